// Launcher detection: reads the environment that mpirun, srun or torchrun gives each
// process and turns it into this process's rank, the job size, its place on its host and
// where the rendezvous is (an address to connect to, or the launcher's PMIx server).
// Pure functions over an injectable environment, so every case is testable without a
// launcher.
#ifndef TESSERA_BOOTSTRAP_LAUNCHER_ENV_H_
#define TESSERA_BOOTSTRAP_LAUNCHER_ENV_H_

#include <functional>
#include <string>

#include "base/status.h"

namespace tessera {

enum class Launcher { kNone, kOpenMpi, kSlurm, kTorchrun };

// "none", "openmpi", "slurm" or "torchrun".
const char* LauncherName(Launcher launcher);

struct LaunchInfo {
  Launcher launcher = Launcher::kNone;
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  std::string root_host;  // rendezvous host, empty when the environment names none
  int root_port = 0;      // rendezvous port, 0 when none
  bool use_pmix = false;  // the rendezvous id must be shared through the launcher's PMIx server
  std::string job_key;    // a string unique to this job (job id, PMIx namespace, ...), "" if none
};

// getenv-like: returns the variable's value or nullptr. A variable set to "" counts as
// unset everywhere below.
using EnvLookup = std::function<const char*(const char* name)>;

// Slurm's rendezvous port when only Slurm names the rendezvous (see DetectLaunch).
constexpr int kSlurmPortBase = 20000;
constexpr int kSlurmPortSpan = 10000;  // ports [20000, 29999]: below Linux's ephemeral range

// Reads the launcher's variables through `env` (the process environment when `env` is
// empty) and fills `*out`; `*out` is untouched on error. `bootstrap_addr` is the
// TESSERA_BOOTSTRAP_ADDR setting, "host:port", "[ipv6]:port" or "".
//
// Which launcher (the first that applies; rank and size come from it alone):
//   1. Open MPI, when OMPI_COMM_WORLD_RANK is set: rank OMPI_COMM_WORLD_RANK, size
//      OMPI_COMM_WORLD_SIZE, local OMPI_COMM_WORLD_LOCAL_RANK / OMPI_COMM_WORLD_LOCAL_SIZE.
//   2. torchrun, when RANK and TORCHELASTIC_RUN_ID are set: torchrun started this process,
//      possibly itself started by srun (`srun torchrun ...`, one srun task per node),
//      where SLURM_PROCID numbers nodes, not processes.
//   3. Slurm, when SLURM_PROCID and SLURM_STEP_ID are set (a task of an srun step; a batch
//      script, which has SLURM_PROCID=0 but no step, is not a launch): rank SLURM_PROCID,
//      size SLURM_NTASKS, local rank SLURM_LOCALID, local size from
//      SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE; format "2(x3),1") at index
//      SLURM_NODEID, else SLURM_NTASKS_PER_NODE.
//   4. torchrun style, when RANK is set (by torchrun or by hand): rank RANK, size
//      WORLD_SIZE, local LOCAL_RANK / LOCAL_WORLD_SIZE.
//   5. None: launcher kNone, rank 0, size 1.
// A launcher that gives no local values leaves local_rank 0 and local_size 1. Local rank
// and local size are given together or not at all.
//
// Where the rendezvous is (the first that applies):
//   1. bootstrap_addr, when not empty.
//   2. MASTER_ADDR and MASTER_PORT, under any launcher (both or neither must be set).
//   3. PMIx (use_pmix = true, no host), under Open MPI or Slurm when PMIX_RANK and
//      PMIX_NAMESPACE are set (mpirun; srun --mpi=pmix). PMIX_RANK must equal the rank.
//   4. Slurm without PMIx: the first host of SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST;
//      assumes task 0 runs on the step's first node, true for block and cyclic layouts)
//      and port kSlurmPortBase + (97 * SLURM_JOB_ID + SLURM_STEP_ID) % kSlurmPortSpan, so
//      steps and consecutive jobs get different ports. No nodelist: no rendezvous.
//   5. None: root_host "" and root_port 0; the caller decides whether that is an error
//      (it is not for size 1).
//
// job_key: "openmpi:<PMIX_NAMESPACE or OMPI_MCA_ess_base_jobid>",
// "slurm:<SLURM_JOB_ID>.<SLURM_STEP_ID>", "torchrun:<TORCHELASTIC_RUN_ID>" (when it is not
// torchrun's default "none") or "torchrun:<MASTER_ADDR>:<MASTER_PORT>"; "" when none of
// these is known.
//
// Every variable that is set is checked, also when a higher-precedence source overrides
// it (a malformed MASTER_PORT is an error even with TESSERA_BOOTSTRAP_ADDR set); the
// variables of launchers that were not chosen are not read.
//
// Errors: InvalidArgument naming the variable and its value for every malformed value: a
// non-number (signs, spaces, hex and overflow included), a negative number, rank >= size,
// local rank >= local size, local size > size, a port outside [1, 65535], a bad host or
// host:port, a malformed Slurm hostlist or tasks-per-node list, PMIX_RANK differing from
// the rank; and naming the missing one when a variable lacks its partner (a rank without
// a size, MASTER_ADDR without MASTER_PORT, a nodelist without SLURM_JOB_ID, ...).
// Never aborts.
Status DetectLaunch(const EnvLookup& env, const std::string& bootstrap_addr, LaunchInfo* out);

// Returns the first host of a Slurm hostlist such as "node[07-09,12],gpu[1-2]" ->
// "node07": the first comma-separated entry with each bracket group replaced by the first
// number of its first range, written as in the list (zero padding kept). InvalidArgument
// for an empty list or entry, unbalanced or nested brackets, an empty or non-numeric
// range, a range whose low end exceeds its high end, or a character that cannot be in a
// host name.
Status FirstSlurmHost(const std::string& nodelist, std::string* first);

// Parses "host:port" or "[ipv6]:port" (the brackets are dropped from *host).
// InvalidArgument naming `what` (e.g. "TESSERA_BOOTSTRAP_ADDR") and the text otherwise.
Status ParseHostPort(const std::string& what, const std::string& text, std::string* host,
                     int* port);

}  // namespace tessera

#endif  // TESSERA_BOOTSTRAP_LAUNCHER_ENV_H_
