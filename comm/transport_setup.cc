#include "comm/transport_setup.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "transport/exchange.h"
#include "transport/ibverbs/ibverbs_transport.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/ucx/ucx_transport.h"

namespace tessera {
namespace {

bool Wants(const std::vector<std::string>& order, const char* name) {
  return std::find(order.begin(), order.end(), name) != order.end();
}

// Whether the kernel shows an RDMA device (what UCX's RDMA transports would use).
bool HostHasRdmaDevice() {
  DIR* dir = opendir("/sys/class/infiniband");
  if (dir == nullptr) return false;
  bool found = false;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') found = true;
  }
  closedir(dir);
  return found;
}

// ibverbs' set-up channel: one message each way over the pair's TCP control link.
Status ExchangeOverTcp(LinkTable* table, int peer, const std::string& mine, const Deadline& deadline,
                       std::string* theirs) {
  if (table == nullptr) return InternalError("ibverbs connection data before the link table exists");
  Link* link = nullptr;
  TESSERA_RETURN_IF_ERROR(table->Control(peer, deadline, &link));
  theirs->assign(mine.size(), '\0');
  Transfer transfers[2] = {Transfer::Send(link, mine.data(), mine.size()),
                           Transfer::Recv(link, &(*theirs)[0], theirs->size())};
  ExchangeOptions options;
  options.deadline = deadline;
  options.timeout_ms = std::max<int64_t>(1, deadline.RemainingMs());
  options.notices = table;
  return Exchange(transfers, 2, options).Annotate("ibverbs connection set-up with rank " + std::to_string(peer));
}

}  // namespace

int64_t EncodeTransportList(const std::vector<std::string>& order) {
  std::vector<std::string> known;  // every name, in auto's order: its digit is its place + 1
  Settings::TransportList("auto", &known);
  int64_t code = 0;
  for (const std::string& name : order) {
    code = code * 10 + (std::find(known.begin(), known.end(), name) - known.begin()) + 1;
  }
  return code;
}

TransportSetup::TransportSetup() = default;
TransportSetup::~TransportSetup() = default;

Status TransportSetup::Prepare(const Settings& settings, int rank, int nranks, RankInfo* mine) {
  settings_ = settings;
  rank_ = rank;
  nranks_ = nranks;
  automatic_ = settings.transport == "auto";
  TESSERA_RETURN_IF_ERROR(Settings::TransportList(settings.transport, &order_));

  // The TCP listener always opens: TCP is the usual fallback, and its address is how
  // failure notices reach a rank.
  std::string ip;
  TESSERA_RETURN_IF_ERROR(ChooseLocalAddress(settings.socket_ifname, &ip));
  TESSERA_RETURN_IF_ERROR(Listen(ip, 0, &listener_, &mine->listen).Annotate("peer listener"));
  allows_cuda_ipc_ = automatic_ || Wants(order_, "cuda_ipc");
  if (Wants(order_, "shm") || allows_cuda_ipc_) {  // cuda_ipc's control segments are named after it
    std::strncpy(mine->shm_name, ShmTransport::NewSegmentName().c_str(), sizeof(mine->shm_name) - 1);
  }

  if (Wants(order_, "ibverbs")) {
    IbverbsTransport::Options options;
    options.device_filter = settings.ib_hca;
    options.gid_index = static_cast<int>(settings.ib_gid_index);
    options.spread_index = rank;
    table_for_ibverbs_ = std::make_shared<LinkTable*>(nullptr);
    std::shared_ptr<LinkTable*> table = table_for_ibverbs_;
    auto exchange = [table](int peer, const std::string& data, const Deadline& deadline, std::string* theirs) {
      return ExchangeOverTcp(*table, peer, data, deadline, theirs);
    };
    Status s = IbverbsTransport::Create(options, rank, nranks, exchange, &ibverbs_);
    if (!s.ok() && !(automatic_ && IbverbsTransport::IsNoRdmaDevice(s))) {
      return s.Annotate("TESSERA_TRANSPORT lists ibverbs");
    }
    if (ibverbs_) {
      const std::string& summary = ibverbs_->summary();
      if (summary.size() > sizeof(mine->ib_summary)) return InternalError("ibverbs summary too long");
      std::memcpy(mine->ib_summary, summary.data(), summary.size());
      mine->ib_summary_len = static_cast<uint32_t>(summary.size());
    }
  }

  // In auto, UCX earns its place only where it can use RDMA that ibverbs could not.
  const bool want_ucx = Wants(order_, "ucx") && (!automatic_ || (!ibverbs_ && HostHasRdmaDevice()));
  if (want_ucx) {
    UcxTransport::Options options;
    options.chunk_bytes = settings.ucx_chunk_bytes;
    Status s = UcxTransport::Create(options, rank, nranks, &ucx_);
    if (!s.ok()) {
      ucx_.reset();
      if (!automatic_) return s.Annotate("TESSERA_TRANSPORT lists ucx");
    }
    if (ucx_) {
      const std::string& address = ucx_->worker_address();
      if (address.size() > sizeof(mine->ucx_address)) {
        return SystemError("UCX worker address of " + std::to_string(address.size()) + " bytes exceeds " +
                           std::to_string(sizeof(mine->ucx_address)) +
                           ": name fewer devices with UCX_TLS or UCX_NET_DEVICES");
      }
      std::memcpy(mine->ucx_address, address.data(), address.size());
      mine->ucx_address_len = static_cast<uint32_t>(address.size());
    }
  }
  mine->agreed.transports = EncodeTransportList(order_);
  mine->agreed.ucx_chunk_bytes = settings.ucx_chunk_bytes;
  return Status::Ok();
}

Status TransportSetup::Finish(const std::vector<RankInfo>& all, uint64_t secret, const Deadline& deadline,
                              std::unique_ptr<LinkTable>* out, int* local_ranks) {
  std::vector<ShmTransport::LocalRank> local;
  for (int r = 0; r < nranks_; ++r) {
    if (std::strncmp(all[r].host, all[rank_].host, sizeof(all[r].host)) == 0) {
      local.push_back({r, all[r].pid, all[r].shm_name});
    }
  }
  *local_ranks = static_cast<int>(local.size());
  local_ = local;

  std::vector<std::unique_ptr<Transport>> transports;
  std::string tcp_note;
  for (const std::string& name : order_) {
    if (name == "shm" && local.size() > 1) {
      std::unique_ptr<ShmTransport> shm;
      TESSERA_RETURN_IF_ERROR(ShmTransport::Create({settings_.shm_slot_bytes, settings_.shm_slots}, rank_, local,
                                                   deadline, &shm));
      transports.push_back(std::move(shm));
    } else if (name == "ibverbs" && ibverbs_) {
      std::vector<std::string> summaries;
      for (const RankInfo& info : all) {
        summaries.emplace_back(info.ib_summary, std::min<size_t>(info.ib_summary_len, sizeof(info.ib_summary)));
      }
      TESSERA_RETURN_IF_ERROR(ibverbs_->SetPeerSummaries(summaries));
      ibverbs_in_table_ = ibverbs_.get();
      transports.push_back(std::move(ibverbs_));
    } else if (name == "ucx" && ucx_) {
      std::vector<std::string> addresses;
      for (const RankInfo& info : all) {
        addresses.emplace_back(info.ucx_address, std::min<size_t>(info.ucx_address_len, sizeof(info.ucx_address)));
      }
      TESSERA_RETURN_IF_ERROR(ucx_->SetPeerAddresses(std::move(addresses)));
      transports.push_back(std::move(ucx_));
      uses_ucx_ = true;
    } else if (name == "tcp") {
      std::vector<SocketAddress> addresses;
      for (const RankInfo& info : all) addresses.push_back(info.listen);
      transports.push_back(std::make_unique<TcpTransport>(
          TcpTransport::Options{settings_.tcp_streams, settings_.tcp_chunk_bytes, settings_.tcp_congestion}, rank_,
          secret, std::move(listener_), std::move(addresses)));
      const std::string& note = static_cast<TcpTransport*>(transports.back().get())->congestion_note();
      if (!note.empty()) tcp_note = " (TESSERA_TCP_CONGESTION: " + note + ")";
    } else {
      continue;
    }
    description_ += (description_.empty() ? "" : ",") + name + (name == "tcp" ? tcp_note : "");
  }
  if (description_.empty()) description_ = "none";
  *out = std::make_unique<LinkTable>(nranks_, std::move(transports));
  if (table_for_ibverbs_) *table_for_ibverbs_ = out->get();
  return Status::Ok();
}

}  // namespace tessera
