// nccl-tests' other collectives for the benchmark harness (see perf_collectives_more.h).
#include "bench/perf_collectives_more.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bench/perf_data.h"

namespace tessera_bench {
namespace {

// Elements of `bytes` of `element_size`, split in `parts` equal blocks: the block.
size_t BlockCount(size_t bytes, size_t element_size, int parts) {
  if (element_size == 0 || parts <= 0) return 0;
  return bytes / element_size / static_cast<size_t>(parts);
}

double RingFactor(int nranks) {
  return nranks > 0 ? static_cast<double>(nranks - 1) / nranks : 0.0;
}

unsigned char* At(void* buffer, size_t elements, DataType type) {
  return static_cast<unsigned char*>(buffer) + elements * ElementSize(type);
}
const unsigned char* At(const void* buffer, size_t elements, DataType type) {
  return static_cast<const unsigned char*>(buffer) + elements * ElementSize(type);
}

// The expected reduction over every rank, elements offset..offset+count-1 of the
// global index space, as a pattern starting at `offset`.
ElementPattern ReducedPatternFrom(DataType type, ReduceOp op, int nranks, size_t offset) {
  std::vector<int64_t> values(kPatternPeriod);
  for (size_t j = 0; j < kPatternPeriod; ++j) values[j] = ReducedValue(type, op, nranks, offset + j);
  return ElementPattern(type, values);
}

// The same for one rank's send data.
ElementPattern SendPatternFrom(DataType type, ReduceOp op, int rank, int nranks, size_t offset) {
  std::vector<int64_t> values(kPatternPeriod);
  for (size_t j = 0; j < kPatternPeriod; ++j) {
    values[j] = SendValue(type, op, rank, nranks, offset + j);
  }
  return ElementPattern(type, values);
}

Outcome CheckRoot(int root, const CollectiveBackend& backend) {
  if (root >= 0 && root < backend.Size()) return Outcome::Ok();
  return Outcome::Rejected("root " + std::to_string(root) + " is not a rank of this job (0.." +
                           std::to_string(backend.Size() - 1) + ")");
}

// This process's rank from the launcher's environment (0 alone), before any job is
// joined: only rank 0 prints flag errors.
int RankFromLauncher() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "RANK"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return std::atoi(value);
  }
  return 0;
}

}  // namespace

void PreparedCollective::Prepare(DataType type, ReduceOp op, int rank, int nranks) {
  type_ = type;
  op_ = op;
  rank_ = rank;
  nranks_ = nranks;
}

ElementPattern PreparedCollective::MovedPattern(int source, int destination) const {
  // 0..96: exact in every type, int8 and bfloat16 included.
  std::vector<int64_t> values(kPatternPeriod);
  for (size_t j = 0; j < kPatternPeriod; ++j) {
    values[j] = static_cast<int64_t>((static_cast<size_t>(source) * 31 +
                                      static_cast<size_t>(destination) * 7 + j * 3 + 1) % 97);
  }
  return ElementPattern(type_, values);
}

// --- allgather -------------------------------------------------------------------------

BufferCounts AllGatherPerf::CountsForBytes(size_t bytes, size_t element_size, int nranks) const {
  size_t block = BlockCount(bytes, element_size, nranks);
  return BufferCounts{block, block * static_cast<size_t>(nranks)};
}

size_t AllGatherPerf::InPlaceSendOffset(const BufferCounts& counts, int rank) const {
  return static_cast<size_t>(rank) * counts.send;
}

double AllGatherPerf::BusBandwidthFactor(int nranks) const { return RingFactor(nranks); }

void AllGatherPerf::FillSend(void* sendbuff, const BufferCounts& counts) const {
  MovedPattern(rank_, 0).Fill(sendbuff, counts.send);
}

size_t AllGatherPerf::CountWrong(const void* recvbuff, const BufferCounts& counts) const {
  size_t wrong = 0;
  for (int r = 0; r < nranks_; ++r) {
    wrong += MovedPattern(r, 0).CountMismatches(At(recvbuff, r * counts.send, type_), counts.send);
  }
  return wrong;
}

Outcome AllGatherPerf::Run(CollectiveBackend& backend, const void* sendbuff, void* recvbuff,
                           const BufferCounts& counts, DataType type, ReduceOp op) const {
  (void)op;
  return backend.AllGather(sendbuff, recvbuff, counts.send, type);
}

// --- reduce-scatter --------------------------------------------------------------------

BufferCounts ReduceScatterPerf::CountsForBytes(size_t bytes, size_t element_size,
                                               int nranks) const {
  size_t total = BlockCount(bytes, element_size, nranks) * static_cast<size_t>(nranks);
  return BufferCounts{total, total};
}

double ReduceScatterPerf::BusBandwidthFactor(int nranks) const { return RingFactor(nranks); }

void ReduceScatterPerf::FillSend(void* sendbuff, const BufferCounts& counts) const {
  SendPatternFrom(type_, op_, rank_, nranks_, 0).Fill(sendbuff, counts.send);
}

size_t ReduceScatterPerf::CountWrong(const void* recvbuff, const BufferCounts& counts) const {
  const size_t block = counts.send / static_cast<size_t>(nranks_);
  const size_t offset = static_cast<size_t>(rank_) * block;
  const void* result = last_in_place_ ? At(recvbuff, offset, type_) : recvbuff;
  return ReducedPatternFrom(type_, op_, nranks_, offset).CountMismatches(result, block);
}

Outcome ReduceScatterPerf::Run(CollectiveBackend& backend, const void* sendbuff, void* recvbuff,
                               const BufferCounts& counts, DataType type, ReduceOp op) const {
  const size_t block = counts.send / static_cast<size_t>(backend.Size());
  last_in_place_ = sendbuff == recvbuff;
  void* result = last_in_place_ ? At(recvbuff, static_cast<size_t>(backend.Rank()) * block, type)
                                : recvbuff;
  return backend.ReduceScatter(sendbuff, result, block, type, op);
}

// --- broadcast -------------------------------------------------------------------------

BufferCounts BroadcastPerf::CountsForBytes(size_t bytes, size_t element_size, int nranks) const {
  size_t count = BlockCount(bytes, element_size, 1);
  (void)nranks;
  return BufferCounts{count, count};
}

double BroadcastPerf::BusBandwidthFactor(int nranks) const { return nranks > 0 ? 1.0 : 0.0; }

void BroadcastPerf::FillSend(void* sendbuff, const BufferCounts& counts) const {
  MovedPattern(rank_, 0).Fill(sendbuff, counts.send);
}

size_t BroadcastPerf::CountWrong(const void* recvbuff, const BufferCounts& counts) const {
  return MovedPattern(root_, 0).CountMismatches(recvbuff, counts.recv);
}

Outcome BroadcastPerf::Run(CollectiveBackend& backend, const void* sendbuff, void* recvbuff,
                           const BufferCounts& counts, DataType type, ReduceOp op) const {
  (void)op;
  Outcome outcome = CheckRoot(root_, backend);
  if (!outcome.ok()) return outcome;
  return backend.Broadcast(sendbuff, recvbuff, counts.send, type, root_);
}

// --- reduce ----------------------------------------------------------------------------

BufferCounts ReducePerf::CountsForBytes(size_t bytes, size_t element_size, int nranks) const {
  size_t count = BlockCount(bytes, element_size, 1);
  (void)nranks;
  return BufferCounts{count, count};
}

double ReducePerf::BusBandwidthFactor(int nranks) const { return nranks > 0 ? 1.0 : 0.0; }

void ReducePerf::FillSend(void* sendbuff, const BufferCounts& counts) const {
  SendPatternFrom(type_, op_, rank_, nranks_, 0).Fill(sendbuff, counts.send);
}

size_t ReducePerf::CountWrong(const void* recvbuff, const BufferCounts& counts) const {
  if (rank_ != root_) return 0;  // recvbuff is only written on the root
  return ReducedPatternFrom(type_, op_, nranks_, 0).CountMismatches(recvbuff, counts.recv);
}

Outcome ReducePerf::Run(CollectiveBackend& backend, const void* sendbuff, void* recvbuff,
                        const BufferCounts& counts, DataType type, ReduceOp op) const {
  Outcome outcome = CheckRoot(root_, backend);
  if (!outcome.ok()) return outcome;
  return backend.Reduce(sendbuff, recvbuff, counts.send, type, op, root_);
}

// --- alltoall --------------------------------------------------------------------------

BufferCounts AlltoAllPerf::CountsForBytes(size_t bytes, size_t element_size, int nranks) const {
  size_t total = BlockCount(bytes, element_size, nranks) * static_cast<size_t>(nranks);
  return BufferCounts{total, total};
}

double AlltoAllPerf::BusBandwidthFactor(int nranks) const { return RingFactor(nranks); }

void AlltoAllPerf::FillSend(void* sendbuff, const BufferCounts& counts) const {
  const size_t block = counts.send / static_cast<size_t>(nranks_);
  for (int peer = 0; peer < nranks_; ++peer) {
    MovedPattern(rank_, peer).Fill(At(sendbuff, peer * block, type_), block);
  }
}

size_t AlltoAllPerf::CountWrong(const void* recvbuff, const BufferCounts& counts) const {
  const size_t block = counts.recv / static_cast<size_t>(nranks_);
  size_t wrong = 0;
  for (int peer = 0; peer < nranks_; ++peer) {
    wrong += MovedPattern(peer, rank_).CountMismatches(At(recvbuff, peer * block, type_), block);
  }
  return wrong;
}

Outcome AlltoAllPerf::Run(CollectiveBackend& backend, const void* sendbuff, void* recvbuff,
                          const BufferCounts& counts, DataType type, ReduceOp op) const {
  (void)op;
  return backend.AlltoAll(sendbuff, recvbuff, counts.send / static_cast<size_t>(backend.Size()),
                          type);
}

// --- sendrecv --------------------------------------------------------------------------

BufferCounts SendRecvPerf::CountsForBytes(size_t bytes, size_t element_size, int nranks) const {
  size_t count = BlockCount(bytes, element_size, 1);
  (void)nranks;
  return BufferCounts{count, count};
}

double SendRecvPerf::BusBandwidthFactor(int nranks) const { return nranks > 0 ? 1.0 : 0.0; }

void SendRecvPerf::FillSend(void* sendbuff, const BufferCounts& counts) const {
  MovedPattern(rank_, (rank_ + 1) % nranks_).Fill(sendbuff, counts.send);
}

size_t SendRecvPerf::CountWrong(const void* recvbuff, const BufferCounts& counts) const {
  const int from = (rank_ + nranks_ - 1) % nranks_;
  return MovedPattern(from, rank_).CountMismatches(recvbuff, counts.recv);
}

Outcome SendRecvPerf::Run(CollectiveBackend& backend, const void* sendbuff, void* recvbuff,
                          const BufferCounts& counts, DataType type, ReduceOp op) const {
  (void)op;
  const int n = backend.Size();
  const int r = backend.Rank();
  return backend.SendRecv(sendbuff, recvbuff, counts.send, type, (r + 1) % n, (r + n - 1) % n);
}

// --- main ------------------------------------------------------------------------------

int MorePerfMain(int argc, char** argv, const std::string& collective,
                 const BackendFactory& make_backend) {
  const bool rooted = collective == "broadcast" || collective == "reduce";
  int root = 0;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i > 0 && (arg == "-r" || arg == "--root")) {
      char* end = nullptr;
      const char* value = i + 1 < argc ? argv[i + 1] : "";
      long parsed = std::strtol(value, &end, 10);
      if (!rooted || *value == '\0' || *end != '\0' || parsed < 0 || parsed > 1 << 20) {
        if (RankFromLauncher() == 0) {
          std::fprintf(stderr, "%s: %s\n", argv[0],
                       rooted ? "-r takes a rank number (0, 1, ...)"
                              : "-r: this collective has no root");
        }
        return kExitBadFlags;
      }
      root = static_cast<int>(parsed);
      ++i;
      continue;
    }
    args.push_back(argv[i]);
  }
  args.push_back(nullptr);
  const int count = static_cast<int>(args.size()) - 1;
  std::unique_ptr<PerfCollective> perf;
  if (collective == "allgather") perf.reset(new AllGatherPerf());
  if (collective == "reducescatter") perf.reset(new ReduceScatterPerf());
  if (collective == "broadcast") perf.reset(new BroadcastPerf(root));
  if (collective == "reduce") perf.reset(new ReducePerf(root));
  if (collective == "alltoall") perf.reset(new AlltoAllPerf());
  if (collective == "sendrecv") perf.reset(new SendRecvPerf());
  if (!perf) {
    std::fprintf(stderr, "%s: unknown collective '%s'\n", argv[0], collective.c_str());
    return kExitFailed;
  }
  return PerfProgramMain(count, args.data(), *perf, make_backend);
}

}  // namespace tessera_bench
