#include "mpi/settings.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tessera_mpi {
namespace {

struct CollectiveRow {
  Collective collective;
  const char* mpi_name;
  const char* setting_name;
};

// Every collective this library routes, with its name in TESSERA_MPI_COLLECTIVES.
constexpr CollectiveRow kCollectiveTable[kCollectives] = {
    {Collective::kAllreduce, "MPI_Allreduce", "allreduce"},
    {Collective::kReduce, "MPI_Reduce", "reduce"},
    {Collective::kBcast, "MPI_Bcast", "bcast"},
    {Collective::kAllgather, "MPI_Allgather", "allgather"},
    {Collective::kReduceScatterBlock, "MPI_Reduce_scatter_block", "reduce_scatter_block"},
    {Collective::kAlltoall, "MPI_Alltoall", "alltoall"},
    {Collective::kBarrier, "MPI_Barrier", "barrier"},
    {Collective::kIallreduce, "MPI_Iallreduce", "iallreduce"},
    {Collective::kIreduce, "MPI_Ireduce", "ireduce"},
    {Collective::kIbcast, "MPI_Ibcast", "ibcast"},
    {Collective::kIallgather, "MPI_Iallgather", "iallgather"},
    {Collective::kIreduceScatterBlock, "MPI_Ireduce_scatter_block", "ireduce_scatter_block"},
    {Collective::kIalltoall, "MPI_Ialltoall", "ialltoall"},
    {Collective::kIbarrier, "MPI_Ibarrier", "ibarrier"},
};

constexpr unsigned kAll = (1u << kCollectives) - 1;

bool ParseFlag(const char* value) { return value != nullptr && std::strcmp(value, "1") == 0; }

Settings ReadEnvironment() {
  Settings s;
  std::string error;
  if (!ParseCollectives(std::getenv("TESSERA_MPI_COLLECTIVES"), &s.routed, &error)) {
    std::fprintf(stderr, "tessera_mpi: TESSERA_MPI_COLLECTIVES: %s; routing nothing to tessera\n", error.c_str());
    s.routed = 0;
  }
  s.stats = ParseFlag(std::getenv("TESSERA_MPI_STATS"));
  return s;
}

Settings& MutableSettings() {
  static Settings settings = ReadEnvironment();
  return settings;
}

}  // namespace

const char* MpiName(Collective c) { return kCollectiveTable[static_cast<int>(c)].mpi_name; }

const char* SettingName(Collective c) { return kCollectiveTable[static_cast<int>(c)].setting_name; }

const char* RouteName(Route r) {
  switch (r) {
    case Route::kRouted: return "tessera";
    case Route::kSettingOff: return "setting off";
    case Route::kCommunicator: return "communicator";
    case Route::kUnavailable: return "tessera unavailable";
    case Route::kDatatype: return "datatype";
    case Route::kOperator: return "operator";
    case Route::kArgument: return "argument";
    case Route::kThreadLevel: return "thread level";
  }
  return "?";
}

bool ParseCollectives(const char* value, unsigned* routed, std::string* error) {
  if (value == nullptr || *value == '\0') {
    *routed = kAll;
    return true;
  }
  std::string list(value);
  // A list that opens with a removal starts from all collectives, any other from none.
  unsigned bits = list[0] == '-' ? kAll : 0;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(start, end - start);
    start = end + 1;
    const bool remove = !item.empty() && item[0] == '-';
    if (remove) item.erase(0, 1);
    if (item == "all" && !remove) {
      bits = kAll;
      continue;
    }
    if (item == "none" && !remove) {
      bits = 0;
      continue;
    }
    bool known = false;
    for (const CollectiveRow& row : kCollectiveTable) {
      if (item != row.setting_name) continue;
      const unsigned bit = 1u << static_cast<int>(row.collective);
      bits = remove ? (bits & ~bit) : (bits | bit);
      known = true;
    }
    if (!known) {
      *error = "unknown item \"" + std::string(remove ? "-" : "") + item +
               "\" (want all, none, or [-]allreduce, reduce, bcast, allgather, reduce_scatter_block, alltoall, barrier, "
               "or one of these with an i before it: iallreduce, ...)";
      return false;
    }
  }
  *routed = bits;
  return true;
}

const Settings& CurrentSettings() { return MutableSettings(); }

void AgreeOnSettings() {
  Settings& s = MutableSettings();
  int provided = MPI_THREAD_SINGLE;
  PMPI_Query_thread(&provided);
  s.thread_multiple = provided == MPI_THREAD_MULTIPLE;
  // {agreed, ~agreed} reduced with MPI_MIN: the ranks agree when min == ~(min of ~agreed).
  const unsigned agreed = s.routed | (s.thread_multiple ? 1u << 31 : 0u);
  unsigned mine[2] = {agreed, ~agreed}, least[2] = {0, 0};
  if (PMPI_Allreduce(mine, least, 2, MPI_UNSIGNED, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS) return;
  if (least[0] == ~least[1]) return;
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    std::fprintf(stderr,
                 "tessera_mpi: TESSERA_MPI_COLLECTIVES or the thread level differs between ranks of "
                 "MPI_COMM_WORLD; routing nothing to tessera (set it alike on every rank, e.g. with mpirun -x)\n");
  }
  s.routed = 0;
}

}  // namespace tessera_mpi
