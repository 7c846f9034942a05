// GlooBackend: the benchmark's CollectiveBackend over Gloo (Debian's libgloo-dev, Gloo
// 0.5.0), PyTorch's CPU collectives library, so that gloo_all_reduce_perf measures it
// with the same harness, flags and table as tessera and Open MPI.
//
// Joining the job, as a Gloo user (PyTorch) does:
//   - rank and size come from the launcher's environment: OMPI_COMM_WORLD_RANK/SIZE
//     (mpirun), SLURM_PROCID/SLURM_NTASKS, or RANK/WORLD_SIZE; none of them: one rank.
//   - the rendezvous is Gloo's FileStore in a directory (GlooOptions::store_dir). By
//     default /tmp/gloo_perf_store.<job>, <job> from OMPI_MCA_ess_base_jobid,
//     PMIX_NAMESPACE, SLURM_JOB_ID.SLURM_STEP_ID or TORCHELASTIC_RUN_ID (a job of one
//     rank: its pid), so concurrent jobs never share one. /tmp and not $TMPDIR: on the
//     emulated cluster every host has a $TMPDIR of its own while /tmp is shared, and
//     the store must be seen by every rank. Once every rank is connected (or the
//     rendezvous failed), each removes its own keys, and the default directory goes.
//   - the TCP device binds to the interface named by GLOO_SOCKET_IFNAME (as in
//     PyTorch), else to loopback (127.0.0.1). Ranks on several hosts must set
//     GLOO_SOCKET_IFNAME: the ranks compare host names through the store first, and
//     refuse loopback across hosts with an error instead of a hang.
//
// Algorithms (GlooOptions::algorithm): Gloo's in-place class algorithms (ring,
// ring_chunked, halving_doubling, bcube), each instance built once per (buffer, count,
// type, op) and reused across calls as PyTorch's ProcessGroupGloo used to; for an
// out-of-place call the send data is first copied into recvbuff (inside the timed call:
// what a user of these in-place algorithms pays). bcube's base is the smallest b with
// nranks a power of b (2 for 2, 4, 8; 3 for 3 and 9; nranks otherwise). function_ring
// is gloo::allreduce(), the function API that PyTorch 1.13's ProcessGroupGloo calls,
// out-of-place natively.
// Types: every harness type but bfloat16 (Gloo 0.5.0 has none); ops: sum, prod, max,
// min (Gloo has no avg). The rest, and the class algorithms' counts whose bytes exceed
// INT_MAX (their counts are int), are rejected before any communication.
// Every Gloo call is bounded by GlooOptions::timeout; a Gloo exception becomes a failed
// Outcome naming the call.
#ifndef TESSERA_BENCH_GLOO_BACKEND_H_
#define TESSERA_BENCH_GLOO_BACKEND_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/collective_backend.h"

namespace gloo {
class Algorithm;
namespace rendezvous {
class Context;
class FileStore;
}  // namespace rendezvous
}  // namespace gloo

namespace tessera_bench {

enum class GlooAlgorithm { kRing, kRingChunked, kHalvingDoubling, kBcube, kFunctionRing };

// "ring", "ring_chunked", "halving_doubling", "bcube", "function_ring".
const char* GlooAlgorithmName(GlooAlgorithm algorithm);
// Parses a name as printed above. Returns false for anything else.
bool ParseGlooAlgorithm(const std::string& name, GlooAlgorithm* algorithm);

struct GlooOptions {
  GlooAlgorithm algorithm = GlooAlgorithm::kRingChunked;
  std::string store_dir;  // empty: GLOO_PERF_STORE_DIR, else the default above
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

// Takes the Gloo flags out of argv[1..argc-1]:
//   -A,--algorithm <name>   --store_dir <dir>   --timeout_s <seconds>
// (also "-Aname", "--algorithm=name", ...). The other arguments, argv[0] first, go to
// *rest in order, followed by a null pointer as argv has (so rest->size() - 1 of them
// are arguments). Returns "" or what was wrong, naming the flag. Never prints.
std::string ExtractGlooFlags(int argc, char** argv, GlooOptions* options,
                             std::vector<char*>* rest);

// Usage lines of the flags above (ends with a newline).
std::string GlooUsage();

class GlooBackend : public CollectiveBackend {
 public:
  // Joins the job (see the top of this file). Null and *error set on failure.
  static std::unique_ptr<GlooBackend> Create(const GlooOptions& options, std::string* error);
  // Releases the algorithm instance, then closes the connections.
  ~GlooBackend() override;

  GlooBackend(const GlooBackend&) = delete;
  GlooBackend& operator=(const GlooBackend&) = delete;

  // "Gloo 0.5.0 ring_chunked, tcp 127.0.0.1 (lo)".
  std::string Description() const override { return description_; }
  int Rank() const override { return rank_; }
  int Size() const override { return size_; }

  Outcome AllReduce(const void* sendbuff, void* recvbuff, size_t count, DataType type,
                    ReduceOp op) override;
  Outcome Barrier() override;
  Outcome MaxAcrossRanks(double* values, size_t count) override;
  Outcome SumAcrossRanks(int64_t* values, size_t count) override;
  // Closes every connection, so that peers blocked on this rank fail at once instead
  // of waiting for their timeout.
  void AbortJob() override;

 private:
  // The class-algorithm instance of the last call, and what it was built for.
  struct CachedAlgorithm {
    void* buffer = nullptr;
    size_t count = 0;
    DataType type = DataType::kFloat32;
    ReduceOp op = ReduceOp::kSum;
    std::unique_ptr<gloo::Algorithm> algorithm;
  };

  GlooBackend(const GlooOptions& options, int rank, int size);
  // Joins: store directory, Rendezvous(), then removal of the store's files.
  Outcome Connect();
  // Sets store_dir_ (and store_dir_is_default_) from the options, environment or job.
  Outcome ChooseStoreDir();
  // Host name check and connection of every pair through a file store in store_dir_,
  // left in *store (null if it could not be opened) for the removal of its keys.
  Outcome Rendezvous(std::unique_ptr<gloo::rendezvous::FileStore>* store);
  // Runs a class algorithm in place on `buffer`, building it unless cached. May throw.
  void RunClassAlgorithm(void* buffer, size_t count, DataType type, ReduceOp op);
  // Drops the cached instance (its destructor may throw: caught, returned).
  Outcome ReleaseAlgorithm();
  uint32_t NextTag() { return next_tag_++; }

  const GlooOptions options_;
  const int rank_;
  const int size_;
  std::string description_;
  std::string store_dir_;
  bool store_dir_is_default_ = false;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  CachedAlgorithm cached_;
  uint32_t next_tag_ = 1;
};

}  // namespace tessera_bench

#endif  // TESSERA_BENCH_GLOO_BACKEND_H_
