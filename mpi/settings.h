// What libtessera_mpi.so routes to tessera: the collectives it can take, and the two
// settings of this library (docs/mpi.md#settings). tessera's own TESSERA_* variables
// (docs/settings.md) apply to the communicators it creates.
#ifndef TESSERA_MPI_SETTINGS_H_
#define TESSERA_MPI_SETTINGS_H_

#include <string>

namespace tessera_mpi {

// The MPI collectives this library can route, in the order of the table in settings.cc:
// the blocking ones, then their non-blocking forms in the same order.
enum class Collective {
  kAllreduce,
  kReduce,
  kBcast,
  kAllgather,
  kReduceScatterBlock,
  kAlltoall,
  kBarrier,
  kIallreduce,
  kIreduce,
  kIbcast,
  kIallgather,
  kIreduceScatterBlock,
  kIalltoall,
  kIbarrier,
};
constexpr int kCollectives = 14;
constexpr int kBlockingCollectives = 7;

// The non-blocking form of a blocking collective.
inline Collective NonBlocking(Collective c) { return static_cast<Collective>(static_cast<int>(c) + kBlockingCollectives); }
inline bool IsNonBlocking(Collective c) { return static_cast<int>(c) >= kBlockingCollectives; }

// "MPI_Allreduce", ...
const char* MpiName(Collective c);
// "allreduce", ...: the names TESSERA_MPI_COLLECTIVES takes.
const char* SettingName(Collective c);

// Why a call went to Open MPI (PMPI_*) instead of tessera. kRouted is not a reason: it
// counts the calls that tessera ran.
enum class Route {
  kRouted,
  kSettingOff,     // TESSERA_MPI_COLLECTIVES leaves the collective out
  kCommunicator,   // an intercommunicator, a communicator of one rank, or MPI_COMM_NULL
  kUnavailable,    // tessera could not create the communicator's mirror (a warning said why)
  kDatatype,       // a reduction over a datatype tessera has no type for (derived, short, ...)
  kOperator,       // a user-defined or logical/bitwise/loc operator
  kArgument,       // a negative count or another argument Open MPI will report
  kThreadLevel,    // a non-blocking collective where MPI was not initialised with MPI_THREAD_MULTIPLE
};
constexpr int kRoutes = 8;
const char* RouteName(Route r);

struct Settings {
  unsigned routed = 0;  // bit (1 << Collective) set: routed to tessera
  bool stats = false;   // print the counts of routed and fallen-back calls at MPI_Finalize
  // Non-blocking calls complete on a thread of this library, which needs
  // MPI_THREAD_MULTIPLE (MPI_Grequest_complete from that thread).
  bool thread_multiple = false;
  bool Routes(Collective c) const { return (routed >> static_cast<int>(c)) & 1u; }
};

// Parses TESSERA_MPI_COLLECTIVES's value: comma-separated items applied in order, each
// "all", "none", a collective's setting name (routes it) or "-" and a name (stops routing
// it), starting from all collectives when the first item is a removal and from none
// otherwise ("bcast,allreduce": those two; "-bcast": all but bcast); NULL or empty: all.
// False, with *error saying which item, for anything else.
bool ParseCollectives(const char* value, unsigned* routed, std::string* error);

// The settings of this process, read from the environment on first use. A malformed
// TESSERA_MPI_COLLECTIVES routes nothing, with a warning on stderr.
const Settings& CurrentSettings();

// Called once MPI is initialised: reads the thread level, and the ranks of
// MPI_COMM_WORLD compare their settings and thread levels (a PMPI_Allreduce). Where they
// differ, no rank routes anything, and rank 0 says so on stderr: every rank must make the
// same choice, or a routed call on one rank would meet Open MPI's on another.
void AgreeOnSettings();

}  // namespace tessera_mpi

#endif  // TESSERA_MPI_SETTINGS_H_
