// The settings table: every tunable of tessera, in one place. Each row is
// (type, field, environment variable, default, agree, meaning). Settings::
// FromEnvironment() parses them once, when a communicator is created; the struct is then
// immutable for that communicator's lifetime. docs/settings.md lists the same rows (a
// test checks). The `agree` column says which ranks must hold the same value
// (AgreedLines): the rendezvous compares them, and creation fails naming the setting and
// the ranks that differ.
//  kAgreeNone   each rank its own value;
//  kAgreeAll    every rank of the communicator;
//  "<backend>"  every rank, where TESSERA_TRANSPORT lists that backend (its name in
//               transport/registry.cc), whether or not the backend opens on the rank.
#ifndef TESSERA_BASE_SETTINGS_H_
#define TESSERA_BASE_SETTINGS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace tessera {

constexpr const char* kAgreeNone = "";
constexpr const char* kAgreeAll = "all";

// clang-format off
#define TESSERA_SETTINGS(X)                                                              \
  X(int64_t, timeout_ms, "TESSERA_TIMEOUT_MS", 120000, kAgreeNone,                       \
    "Upper bound, in milliseconds, on every wait: bootstrap, connection set-up and each " \
    "collective. A peer that stays silent longer makes the call fail naming that peer.") \
  X(std::string, debug, "TESSERA_DEBUG", "WARN", kAgreeNone,                             \
    "Log level on stderr: NONE, WARN (every failure, with rank and peer) or INFO "       \
    "(also communicator set-up and transport choices).")                                \
  X(std::string, transport, "TESSERA_TRANSPORT", "auto", kAgreeAll,                      \
    "Transports, in priority order, as a comma-separated list of shm, ibverbs, ucx and " \
    "tcp: each pair of ranks uses the first that both can use (e.g. ucx: UCX between " \
    "every pair; tcp: TCP, also on one host). auto is shm,ibverbs,ucx,tcp, where UCX " \
    "is tried only on a host with an RDMA device that ibverbs could not open. cuda_ipc " \
    "carries the device-resident calls of the CUDA build (device buffers of ranks all " \
    "on one host, docs/cuda.md); auto allows it, a list must name it beside a host one.") \
  X(std::string, socket_ifname, "TESSERA_SOCKET_IFNAME", "", kAgreeNone,                 \
    "Network interface whose IPv4 address ranks listen on and advertise. Empty: the "   \
    "first interface that is up and not loopback, else loopback.")                      \
  X(std::string, bootstrap_addr, "TESSERA_BOOTSTRAP_ADDR", "", kAgreeNone,               \
    "host:port of the rendezvous used by tesseraCommInitFromEnv; overrides MASTER_ADDR " \
    "/ MASTER_PORT and the launcher's PMIx server.")                                     \
  X(int64_t, bootstrap_fanout, "TESSERA_BOOTSTRAP_FANOUT", 8, kAgreeNone,                \
    "Ranks the rendezvous sends the table of all ranks to, and ranks each of them "      \
    "forwards it to in turn (a tree: docs/scale.md#creation-at-scale). Read where the "  \
    "unique id is made (tesseraGetUniqueId, rank 0 of a launch, a split or shrink).")   \
  X(std::string, host_id, "TESSERA_HOST_ID", "", kAgreeNone,                             \
    "Overrides this process's host identity (default: hostname, network namespace and " \
    "boot id). Ranks with different ids never use shared memory with each other.")       \
  X(std::string, topo_file, "TESSERA_TOPO_FILE", "", kAgreeNone,                         \
    "Layout file (docs/topology.md; bazel run //tools:topo_dump -- --layout 4x2) giving " \
    "each rank's host: emulates that many hosts on one machine (shared memory inside "  \
    "an emulated host, TCP between). Wins over TESSERA_HOST_ID.")                        \
  X(int64_t, shm_slot_bytes, "TESSERA_SHM_SLOT_BYTES", 131072, "shm",                    \
    "Size of one slot of a shared-memory channel: the pipelining unit on one host.")     \
  X(int64_t, shm_slots, "TESSERA_SHM_SLOTS", 8, "shm",                                   \
    "Slots per shared-memory channel (one channel per ordered pair of local ranks).")    \
  X(int64_t, shm_segment_bytes, "TESSERA_SHM_SEGMENT_BYTES", 67108864, "shm",            \
    "Most bytes of channels in one rank's shared-memory segment (one channel per local " \
    "rank). Where TESSERA_SHM_SLOTS slots of TESSERA_SHM_SLOT_BYTES do not fit, "        \
    "channels get fewer slots (down to 2), then smaller ones (down to 4 KiB), so a "     \
    "host of n ranks maps at most n times this, not n^2 channels of full size "         \
    "(docs/scale.md#creation-at-scale).")                                              \
  X(int64_t, shm_board_bytes, "TESSERA_SHM_BOARD_BYTES", 4096, "shm",                    \
    "Bytes of each rank's host-board slot (two per rank, after its channels): an "      \
    "allreduce on a communicator whose ranks share one host may post up to this much "  \
    "per round there and read every rank's (the board algorithm). 0: no board.")        \
  X(int64_t, shm_prefault_bytes, "TESSERA_SHM_PREFAULT_BYTES", 16777216, kAgreeNone,     \
    "Where shared-memory segments are at most this many bytes (hosts of up to 15 ranks " \
    "at the default rings), a rank maps every page of the two channels between it and " \
    "a local peer when it first connects to that peer, so that no collective pays for " \
    "a page's first touch (about 10 us a page on virtual machines that shadow page "   \
    "tables; docs/performance.md#first-touch). Larger segments, and 0: pages are "     \
    "mapped as messages first reach them.")                                             \
  X(int64_t, shm_single_copy_bytes, "TESSERA_SHM_SINGLE_COPY_BYTES", 8192, kAgreeNone,   \
    "Shared-memory messages from this many bytes up to a ring's (TESSERA_SHM_SLOTS x "  \
    "TESSERA_SHM_SLOT_BYTES) are read by the receiver straight from the sender's "     \
    "buffer (Linux cross-memory attach, process_vm_readv): one copy where slots take "  \
    "two, the send done once the receiver has read it. Used where a rank can read its " \
    "local peers' memory (checked when the link is made). 0: slots only.")              \
  X(int64_t, cuda_ipc_slot_bytes, "TESSERA_CUDA_IPC_SLOT_BYTES", 4194304, "cuda_ipc",    \
    "Size of one of the TESSERA_CUDA_IPC_SLOTS device-memory slots a rank keeps per "   \
    "local peer for cuda_ipc (the pipelining unit of device-resident calls). 1 MiB "    \
    "slots make a 64 MiB allreduce of 2 ranks on an H100 3.3x slower.")                 \
  X(int64_t, cuda_ipc_slots, "TESSERA_CUDA_IPC_SLOTS", 4, "cuda_ipc",                    \
    "Device-memory slots a rank keeps per local peer for cuda_ipc: pieces of a message " \
    "in flight at once.")                                                               \
  X(int64_t, tcp_streams, "TESSERA_TCP_STREAMS", 2, "tcp",                               \
    "TCP connections per pair of ranks; large messages are striped across them.")        \
  X(int64_t, tcp_chunk_bytes, "TESSERA_TCP_CHUNK_BYTES", 262144, "tcp",                  \
    "Striping unit across TCP streams, and the staging size for reductions from TCP.")   \
  X(std::string, tcp_congestion, "TESSERA_TCP_CONGESTION", "cubic", kAgreeNone,          \
    "TCP congestion control of the link sockets (setsockopt TCP_CONGESTION), or "       \
    "'system' for the kernel's default. cubic keeps a busy link full, where bbr's "     \
    "probing leaves it idle at times (1.07-1.10x at 128 MiB on the emulated 4x1 "       \
    "cluster). If the kernel refuses it, links keep the default and the INFO log says " \
    "why.")                                                                             \
  X(int64_t, ucx_chunk_bytes, "TESSERA_UCX_CHUNK_BYTES", 524288, "ucx",                  \
    "Pipelining unit of UCX links: messages travel as tagged sends of this size.")      \
  X(int64_t, ucx_chunks_in_flight, "TESSERA_UCX_CHUNKS_IN_FLIGHT", 8, "ucx",             \
    "Chunks a UCX link keeps in flight at once, per direction (and the staging chunks " \
    "of a reducing receive, and the credit window of eager links). The same on every "  \
    "rank.")                                                                            \
  X(std::string, ib_hca, "TESSERA_IB_HCA", "", kAgreeNone,                               \
    "RDMA devices (and ports) the ibverbs transport may use, e.g. mlx5_0,mlx5_2:1. "    \
    "Empty: any active port, the rank's NUMA node first.")                                \
  X(int64_t, ib_gid_index, "TESSERA_IB_GID_INDEX", -1, kAgreeNone,                       \
    "GID index for RoCE. -1: chosen per port (RoCE v2 with an IPv4 address first).")     \
  X(int64_t, ib_slots, "TESSERA_IB_SLOTS", 8, "ibverbs",                                 \
    "Slots of an ibverbs link's receive ring, per direction: the credit window (pieces " \
    "in flight) and, with it, the queue depths. A power of two, 1 to 128.")             \
  X(int64_t, ib_slot_bytes, "TESSERA_IB_SLOT_BYTES", 524288, "ibverbs",                  \
    "Size of one ibverbs ring slot: the largest piece of a message (a multiple of 64, " \
    "4 KiB to 4 MiB).")                                                                 \
  X(int64_t, ib_timeout, "TESSERA_IB_TIMEOUT", 18, kAgreeNone,                           \
    "ibverbs ACK timeout exponent (1 to 31): each try waits 4.096 us * 2^value.")       \
  X(int64_t, ib_retry_count, "TESSERA_IB_RETRY_COUNT", 7, kAgreeNone,                    \
    "ibverbs transport retries (0 to 7) before a silent peer is declared gone.")         \
  X(int64_t, ib_sl, "TESSERA_IB_SL", 0, kAgreeNone,                                      \
    "InfiniBand service level of ibverbs links (0 to 15).")                              \
  X(int64_t, ib_tc, "TESSERA_IB_TC", 0, kAgreeNone,                                      \
    "RoCE traffic class of ibverbs links (0 to 255).")                                   \
  X(int64_t, ib_register_user_buffers, "TESSERA_IB_REGISTER_USER_BUFFERS", 0,          \
    kAgreeNone,                                                                          \
    "1: ibverbs registers every user send buffer for zero-copy (kept in the "           \
    "registration cache; safe only if no such buffer is freed while the communicator " \
    "lives, docs/ibverbs.md). 0: through the staging ring unless registered.")          \
  X(int64_t, ib_cache_entries, "TESSERA_IB_CACHE_ENTRIES", 64, kAgreeNone,               \
    "Most memory regions the ibverbs registration cache keeps registered (>= 1).")       \
  X(int64_t, ib_cache_bytes, "TESSERA_IB_CACHE_BYTES", 4294967296, kAgreeNone,           \
    "Most bytes the ibverbs registration cache keeps registered (>= 1).")               \
  X(std::string, half_wire, "TESSERA_HALF_WIRE", "float32", kAgreeAll,                   \
    "How float16/bfloat16 reductions travel: float32 (widened first; the exact sum "    \
    "of the ranks' values, rounded once; twice the bytes) or half (in their own 16 "     \
    "bits, each step adding in float32 and rounding, as NCCL does; half the bytes).")    \
  X(int64_t, half_segment_bytes, "TESSERA_HALF_SEGMENT_BYTES", 1048576, kAgreeAll,       \
    "A float16/bfloat16 allreduce on the float32 wire (host buffers) runs in segments "  \
    "of this many float32 bytes, each widened, reduced and narrowed while it is in "    \
    "cache.")                                                                           \
  X(int64_t, deterministic, "TESSERA_DETERMINISTIC", 0, kAgreeAll,                       \
    "1: sums, averages and PreMulSums of float16, bfloat16, float32 and float64 by "      \
    "allreduce, reduce and reduce-scatter give the same bits whatever the algorithm, "  \
    "layout, transport, chunk sizes and rank count (up to 4096 contributions): each "   \
    "value is rounded to a grid that all ranks share, the grid values add exactly and " \
    "the sum is rounded once (docs/semantics.md#deterministic-mode). 0: the fastest "   \
    "order. A communicator's config can set it.")                                     \
  X(int64_t, deterministic_segment_bytes, "TESSERA_DETERMINISTIC_SEGMENT_BYTES", 1048576,  \
    kAgreeAll,                                                                           \
    "Deterministic mode reduces a buffer in segments of this many bytes of grid values " \
    "(each converted, reduced and converted back while it is in cache); the results do " \
    "not depend on it.")                                                                \
  X(std::string, deterministic_plan, "TESSERA_DETERMINISTIC_PLAN", "auto", kAgreeAll,    \
    "How a deterministic tesseraAllReduce runs (docs/semantics.md#deterministic-mode): " \
    "auto (the cost model picks, under TESSERA_ALGO=auto; keyed under a forced "         \
    "algorithm), keyed (keys agreed, then grid values reduced), gather (an allgather "   \
    "of the inputs) or exchange (an alltoall of the inputs' blocks, each rank sums "     \
    "one, an allgather). The results do not depend on it.")                             \
  X(std::string, algo, "TESSERA_ALGO", "auto", kAgreeNone,                               \
    "Allreduce algorithm: auto (the cost model picks per call) or one of ring, board, "  \
    "recursive_doubling, rabenseifner, torus, hierarchical, hierarchical_leader, "       \
    "hierarchical_doubling "                                                             \
    "(forced for every call where it applies). Allgather and reduce-scatter: ring "      \
    "forces the flat ring; torus forces the grid schedule on the torus grid "            \
    "(TESSERA_TORUS, else the host grid) and hierarchical on the host grid, where that " \
    "grid has more than one row and more than one column; any other value, or a grid "   \
    "that does not apply, lets the cost model pick the flat ring or the host grid.")     \
  X(std::string, torus, "TESSERA_TORUS", "", kAgreeNone,                                 \
    "Grid of the torus algorithm as XxY (e.g. 4x2, rank = y*X + x). Empty: rows are "    \
    "hosts (X = ranks per host, Y = hosts).")                                            \
  X(int64_t, probe, "TESSERA_PROBE", 1, kAgreeNone,                                      \
    "Cost-model probe at communicator creation (ring allreduces of one element per " \
    "rank between neighbours in pairs, of 1 MiB round at most 16 hosts at a time, "    \
    "and the float32 sum in cache): 1 measures, when there are several hosts, the "    \
    "links across and inside hosts, all at once (and where ranks outnumber cores the " \
    "least a step across takes, from 8-byte recursive doubling calls), and on one "    \
    "host whose ranks outnumber its cores the inside of it and the least a step there " \
    "takes, from the same calls; 2 also the inside of any "                            \
    "single host; 0 "                                                                  \
    "none (built-in defaults or TESSERA_TUNING_FILE). Every rank ends with the same "  \
    "parameters (each one's median over ranks).")                                      \
  X(std::string, tuning_file, "TESSERA_TUNING_FILE", "", kAgreeNone,                     \
    "File of cost-model parameters (alpha_intra_us, beta_intra_gbps, alpha_inter_us, "   \
    "beta_inter_gbps, gamma_gbps, step_floor_intra_us, step_floor_inter_us as 'key = "   \
    "value' lines). Empty: built-in defaults.")                                          \
  X(std::string, algo_table, "TESSERA_ALGO_TABLE", "", kAgreeAll,                        \
    "File of measured algorithm choices for given layouts ('allreduce 2x2 8192 "       \
    "hierarchical_leader' lines, as bench/algorithm_sweep -o writes them), used "      \
    "before the cost model's predictions where the communicator's layout matches. "     \
    "Every rank must read the same choices. Empty: the model alone.")                  \
  X(int64_t, autotune, "TESSERA_AUTOTUNE", 0, kAgreeAll,                                 \
    "1: each collective's algorithm is measured in the job, per size: the contenders "  \
    "(the rows predicted within 3x of the fastest) run in turns of "                    \
    "TESSERA_AUTOTUNE_TURN_CALLS calls, 5 turns "                                        \
    "each, then every rank takes the one of the smallest median turn (at the slowest "  \
    "rank; docs/algorithms.md#measured-in-the-job); 0: the cost model alone. Ignored "  \
    "where TESSERA_ALGO forces an algorithm, "                                           \
    "TESSERA_ALGO_TABLE is set or TESSERA_DETERMINISTIC is on.")                        \
  X(int64_t, autotune_turn_calls, "TESSERA_AUTOTUNE_TURN_CALLS", 64, kAgreeAll,          \
    "With TESSERA_AUTOTUNE=1, the calls of each contender's turn; the first half of "    \
    "each turn is not counted (what the previous schedule left behind: a shaped link's " \
    "burst allowance, the polling's state). 2 to 4096.")                                \
  X(std::string, autotune_file, "TESSERA_AUTOTUNE_FILE", "", kAgreeNone,                 \
    "With TESSERA_AUTOTUNE=1, rank 0 of each communicator writes every size's measured " \
    "algorithm to this file as TESSERA_ALGO_TABLE rows, rewritten at each decision and " \
    "keeping the rows of other layouts and sizes, so that later runs read it with "      \
    "TESSERA_ALGO_TABLE instead of measuring again. Empty: nothing is written.")         \
  X(std::string, trace_dir, "TESSERA_TRACE_DIR", "", kAgreeNone,                         \
    "Directory where each rank writes a Chrome trace of every message when its "         \
    "communicator is destroyed (tessera-trace-<pid>-rank<r>.json). Empty: no tracing.")  \
  X(int64_t, spin_us, "TESSERA_SPIN_US", 2000, kAgreeNone,                               \
    "Microseconds a waiting rank polls its links before it sleeps in the kernel "       \
    "(futex/poll): long enough to keep ranks whose cores are shared with other work "   \
    "in step, and a rank blocked for long burns only this much of its core per wait "   \
    "(at least 1000 when UCX carries some pair; docs/performance.md#contention).")      \
  X(std::string, poll, "TESSERA_POLL", "auto", kAgreeNone,                               \
    "How a waiting rank polls. auto: each poll yields the core when the ranks on this "  \
    "kernel (the host's, and those of hosts emulated on it) outnumber its online cores, " \
    "else pauses the CPU (yielding every 64 polls once a wait is 20 us old); where "      \
    "most recent yields came back a slice late while the kernel had more tasks "        \
    "runnable than those ranks (other work holds the core), yielding stops for 100 ms. " \
    "yield, pause: always that way.")                                                   \
  X(int64_t, check_calls, "TESSERA_CHECK_CALLS", 1, kAgreeAll,                           \
    "1: messages carry the stamp of their collective (sequence number, collective, "    \
    "count, datatype, operator, root; whole over shm and tcp, an 8-bit digest over "    \
    "ucx, nothing over ibverbs and cuda_ipc), and a rank that receives one of another " \
    "call fails naming both ranks and the calls, as then does every rank "              \
    "(docs/diagnosis.md). 0: not compared; mismatched calls may then hang or corrupt " \
    "data silently.")                                                                   \
  X(int64_t, flight_recorder, "TESSERA_FLIGHT_RECORDER", 256, kAgreeNone,                \
    "Operations each communicator keeps in its flight recorder (a ring of the last N: "  \
    "sequence number, collective, bytes, algorithm, start, end, state). 0: none.")       \
  X(std::string, flight_recorder_dir, "TESSERA_FLIGHT_RECORDER_DIR", "", kAgreeNone,     \
    "Directory where a rank writes its flight recorder as JSON when its communicator "   \
    "breaks (a timeout, a peer's failure, an abort): tessera-flight-<id>-rank<r>.json, "  \
    "read for all ranks by tools/flight_report.py; also when a peer's diagnosis asks or "\
    "on tesseraCommDumpFlightRecord. Empty: no file.")                                 \
  X(int64_t, dump_signal, "TESSERA_DUMP_SIGNAL", 0, kAgreeNone,                          \
    "A signal number (e.g. 10, SIGUSR1) on which every communicator of the process "     \
    "writes its flight recorder to TESSERA_FLIGHT_RECORDER_DIR (within 200 ms). 0: none "\
    "(tessera installs no handler).")                                                  \
  X(int64_t, diagnosis_ms, "TESSERA_DIAGNOSIS_MS", 500, kAgreeNone,                      \
    "When a call fails because of a peer (timeout, peer gone, peer's failure), how long "\
    "this rank asks the others' watch services where they are before naming the "       \
    "culprit (docs/diagnosis.md). 0: no watch service and no diagnosis.")               \
  X(std::string, topology_conf, "TESSERA_TOPOLOGY_CONF", "", kAgreeNone,                 \
    "Slurm topology.conf whose leaf switches (SwitchName=... Nodes=...) are the racks "  \
    "the cost model prices (docs/topology.md#the-fabric), where the layout file says "   \
    "none. Empty: under Slurm (SLURM_JOB_ID), topology.conf beside $SLURM_CONF or in "   \
    "/etc/slurm when it exists; none: never read one.")                                \
  X(int64_t, nics, "TESSERA_NICS", 0, kAgreeNone,                                        \
    "NICs per host for the cost model (local rank i's flows use NIC i*N/R), where the "   \
    "layout file says none. 0: the host's RDMA NICs (/sys/class/infiniband), "           \
    "else 1. Every rank takes the median of what the ranks say.")                      \
  X(int64_t, rack_uplink_percent, "TESSERA_RACK_UPLINK_PERCENT", 0, kAgreeNone,          \
    "A rack's uplinks in percent of the sum of its hosts' links (33 for ABCI's racks), " \
    "where the layout file says none. 0: 100 (full bisection).")                         \
  X(int64_t, straggler_window, "TESSERA_STRAGGLER_WINDOW", 1000, kAgreeNone,             \
    "Collectives the straggler verdict looks back on (docs/diagnosis.md#stragglers): "  \
    "each rank keeps how long it stalled on whom in those it stalled in, and rank 0 "  \
    "judges who arrived last in each of the last this many. 0: nothing kept, no "      \
    "verdict (rank 0's value decides; needs the watch service).")                      \
  X(int64_t, straggler_share, "TESSERA_STRAGGLER_SHARE", 50, kAgreeNone,                 \
    "Percent of the window's collectives a rank must have arrived last in (by 1 ms or " \
    "more), or of the others' waiting on late ranks that must have been on it, to be "  \
    "named the straggler; it is no longer named once it falls below both.")            \
  X(int64_t, straggler_period_ms, "TESSERA_STRAGGLER_PERIOD_MS", 1000, kAgreeNone,       \
    "How often rank 0 collects every rank's account of its collectives and judges; "   \
    "the other ranks learn the verdict one period later.")                              \
  X(int64_t, metrics_port, "TESSERA_METRICS_PORT", 0, kAgreeNone,                        \
    "TCP port of the metrics server (docs/diagnosis.md#metrics): /metrics in the "      \
    "Prometheus text format and /health as JSON, from a thread of its own. A rank "     \
    "serves on this port plus its index among its host's ranks (one server per "       \
    "process, for all its communicators). Needs libmicrohttpd12. 0: no server.")
// clang-format on

// Each row's default as a compile-time constant (SettingDefaults::ucx_chunk_bytes; text
// rows as const char*), for the Options structs of the transports, which take their
// defaults from here so that a number is written once, in the row.
template <typename T>
struct SettingDefaultType {
  using Type = T;
};
template <>
struct SettingDefaultType<std::string> {
  using Type = const char*;
};
struct SettingDefaults {
#define TESSERA_SETTING_DEFAULT(type, field, env, def, agree, meaning) \
  static constexpr SettingDefaultType<type>::Type field = def;
  TESSERA_SETTINGS(TESSERA_SETTING_DEFAULT)
#undef TESSERA_SETTING_DEFAULT
};

struct Settings {
#define TESSERA_SETTING_FIELD(type, field, env, def, agree, meaning) type field = SettingDefaults::field;
  TESSERA_SETTINGS(TESSERA_SETTING_FIELD)
#undef TESSERA_SETTING_FIELD

  // Reads every row from `lookup` (the process environment by default). A malformed or
  // out-of-range value is an InvalidArgument naming the variable.
  using Lookup = std::function<const char*(const char* name)>;
  static Status FromEnvironment(Settings* out, const Lookup& lookup = nullptr);
};

// One row of the table, for documentation and tests.
struct SettingInfo {
  const char* env;
  std::string default_value;
  const char* agree;  // kAgreeNone, kAgreeAll or a backend's name
  const char* meaning;
};
std::vector<SettingInfo> AllSettings();
// The agree column as docs/settings.md words it: "no", "yes", "where shm is listed".
std::string AgreeText(const char* agree);

// The "NAME=value" lines (each ended by a newline), in table order, of the rows of `s`
// whose values every rank must agree on: kAgreeAll's, and those of the backends named
// in `listed` (TESSERA_TRANSPORT's list). `values` gives a row's agreed value where it
// is not its text, by variable name: TESSERA_TRANSPORT's is the list "auto" stands
// for, TESSERA_ALGO_TABLE's a digest of the choices read from the file.
std::string AgreedLines(const Settings& s, const std::vector<std::string>& listed,
                        const std::map<std::string, std::string>& values);

}  // namespace tessera

#endif  // TESSERA_BASE_SETTINGS_H_
