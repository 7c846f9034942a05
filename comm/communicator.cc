#include "comm/communicator.h"

#include <unistd.h>

#include <cstring>
#include <thread>

#include "collectives/algorithms.h"
#include "collectives/reduce_kernels.h"
#include "topology/host_identity.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"

namespace tessera {

Status Communicator::Create(const Settings& settings, const UniqueIdData& id, int nranks, int rank,
                            std::unique_ptr<Communicator>* out) {
  std::unique_ptr<Communicator> c(new Communicator());
  TESSERA_RETURN_IF_ERROR(c->Init(settings, id, nranks, rank));
  *out = std::move(c);
  return Status::Ok();
}

Communicator::~Communicator() = default;

Status Communicator::Init(const Settings& settings, const UniqueIdData& id, int nranks, int rank) {
  TESSERA_RETURN_IF_ERROR(CheckAlgorithmName(settings.algo));
  settings_ = settings;
  log_level_ = ParseLogLevel(settings.debug);
  rank_ = rank;
  nranks_ = nranks;
  const Deadline deadline = Deadline::AfterMs(settings.timeout_ms);
  const bool tcp_only = settings.transport == "tcp";

  // Open the socket peers will connect to before telling them where it is.
  std::string ip;
  TESSERA_RETURN_IF_ERROR(ChooseLocalAddress(settings.socket_ifname, &ip));
  Socket listener;
  RankInfo mine;
  TESSERA_RETURN_IF_ERROR(Listen(ip, 0, &listener, &mine.listen).Annotate("peer listener"));
  mine.pid = getpid();
  std::strncpy(mine.host, HostIdentity(settings.host_id).c_str(), sizeof(mine.host) - 1);
  if (!tcp_only) std::strncpy(mine.shm_name, ShmTransport::NewSegmentName().c_str(), sizeof(mine.shm_name) - 1);
  mine.agreed = AgreedSettings{settings.shm_slot_bytes, settings.shm_slots, settings.tcp_streams,
                               settings.tcp_chunk_bytes, tcp_only ? 1 : 0};

  std::vector<RankInfo> all;
  TESSERA_RETURN_IF_ERROR(JoinRendezvous(id, rank, nranks, mine, settings.timeout_ms, &all));

  // Transports in priority order: shared memory with ranks of this host, TCP otherwise.
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<ShmTransport::LocalRank> local;
  for (int r = 0; r < nranks; ++r) {
    if (!tcp_only && std::strncmp(all[r].host, mine.host, sizeof(mine.host)) == 0) {
      local.push_back({r, all[r].pid, all[r].shm_name});
    }
  }
  if (local.size() > 1) {
    std::unique_ptr<ShmTransport> shm;
    TESSERA_RETURN_IF_ERROR(ShmTransport::Create({settings.shm_slot_bytes, settings.shm_slots}, rank, local, deadline, &shm));
    transports.push_back(std::move(shm));
  }
  std::vector<SocketAddress> addresses;
  for (const RankInfo& info : all) addresses.push_back(info.listen);
  transports.push_back(std::make_unique<TcpTransport>(
      TcpTransport::Options{settings.tcp_streams, settings.tcp_chunk_bytes}, rank, id.secret, std::move(listener),
      std::move(addresses)));
  links_ = std::make_unique<LinkTable>(nranks, std::move(transports));

  const int64_t cores = std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN));
  const int64_t local_ranks = std::max<int64_t>(1, static_cast<int64_t>(local.size()));
  spin_us_ = settings.spin_us >= 0 ? settings.spin_us : (local_ranks <= cores ? 50 : 0);
  Log(log_level_, LogLevel::kInfo,
      "rank " + std::to_string(rank) + " of " + std::to_string(nranks) + " ready: host " + mine.host + ", " +
          std::to_string(local.size()) + " rank(s) on this host, listening on " + mine.listen.ToString() +
          ", spin " + std::to_string(spin_us_) + " us");
  return Status::Ok();
}

CollectiveContext Communicator::Context() const {
  CollectiveContext ctx;
  ctx.rank = rank_;
  ctx.nranks = nranks_;
  ctx.links = links_.get();
  ctx.exchange.deadline = Deadline::AfterMs(settings_.timeout_ms);
  ctx.exchange.timeout_ms = settings_.timeout_ms;
  ctx.exchange.spin_us = spin_us_;
  ctx.exchange.abort = &abort_;
  ctx.exchange.notices = links_.get();
  return ctx;
}

Status Communicator::sticky_error() const {
  std::lock_guard<std::mutex> lock(error_mu_);
  return error_;
}

Status Communicator::Break(const Status& s) {
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!error_.ok()) return s;
    error_ = s;
  }
  // Tell the peers, so they fail now with this root cause instead of timing out on us.
  links_->PublishFailure(s);
  return s;
}

Status Communicator::AllReduce(const void* send, void* recv, size_t count, DataType type, RedOp op) {
  TESSERA_RETURN_IF_ERROR(sticky_error());
  if (abort_.load()) return Break(RemoteError("the communicator was aborted"));
  AllReduceArgs args;
  args.send = send;
  args.recv = recv;
  args.count = count;
  args.type = type;
  TESSERA_RETURN_IF_ERROR(GetReducer(type, op, &args.reducer));
  if (count == 0) return Status::Ok();
  const AllReduceAlgorithmInfo& algo = SelectAllReduce(settings_.algo, count * SizeOf(type), nranks_);
  Status s = algo.run(Context(), args);
  if (!s.ok()) return Break(s.Annotate(algo.name));
  return Status::Ok();
}

}  // namespace tessera
