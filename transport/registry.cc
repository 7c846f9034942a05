#include "transport/registry.h"

#include <algorithm>

#include "transport/cuda_ipc/cuda_ipc_transport.h"
#include "transport/ibverbs/ibverbs_transport.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/ucx/ucx_transport.h"

namespace tessera {

const std::vector<TransportEntry>& TransportRegistry() {
  static const std::vector<TransportEntry> rows = {
      // name     host   control open
      {"cuda_ipc", false, false, OpenCudaIpcTransport},
      {"shm", true, false, OpenShmTransport},
      {"ibverbs", true, false, OpenIbverbsTransport},
      {"ucx", true, false, OpenUcxTransport},
      {"tcp", true, true, OpenTcpTransport},
  };
  return rows;
}

Status ParseTransportList(const std::string& text, std::vector<const TransportEntry*>* out) {
  const std::vector<TransportEntry>& rows = TransportRegistry();
  out->clear();
  if (text == "auto") {
    for (const TransportEntry& row : rows) out->push_back(&row);
    return Status::Ok();
  }
  std::string names;
  for (const TransportEntry& row : rows) names += std::string(names.empty() ? "" : ", ") + row.name;
  bool any_host = false;
  for (size_t start = 0; start <= text.size();) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string name = text.substr(start, comma - start);
    auto row = std::find_if(rows.begin(), rows.end(), [&](const TransportEntry& r) { return name == r.name; });
    if (row == rows.end() || std::find(out->begin(), out->end(), &*row) != out->end()) {
      return InvalidArgument("TESSERA_TRANSPORT must be auto or a list of distinct names among " + names +
                             " (e.g. ucx or shm,tcp), not '" + text + "'");
    }
    out->push_back(&*row);
    any_host = any_host || row->host;
    start = comma + 1;
  }
  if (!any_host) {
    return InvalidArgument("TESSERA_TRANSPORT=" + text + ": it carries only device buffers; name a host transport "
                           "beside it (e.g. cuda_ipc,shm,tcp)");
  }
  return Status::Ok();
}

Status TransportSet::Open(const Settings& settings, int rank, int nranks, uint64_t secret) {
  settings_ = settings;
  rank_ = rank;
  nranks_ = nranks;
  std::vector<const TransportEntry*> rows;
  TESSERA_RETURN_IF_ERROR(ParseTransportList(settings.transport, &rows));
  OpenContext ctx;
  ctx.settings = &settings_;
  ctx.rank = rank;
  ctx.nranks = nranks;
  ctx.secret = secret;
  ctx.automatic = settings.transport == "auto";
  for (const TransportEntry* row : rows) {
    listed_.push_back(row->name);
    std::unique_ptr<OpenTransport> backend;
    TESSERA_RETURN_IF_ERROR(row->open(ctx, &backend));
    if (!backend) continue;  // left out here (auto)
    ctx.opened.push_back(row->name);
    opened_.push_back({row, std::move(backend)});
  }
  return Status::Ok();
}

std::vector<std::pair<std::string, std::string>> TransportSet::cards() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Opened& o : opened_) out.emplace_back(o.entry->name, o.backend->card());
  return out;
}

Status TransportSet::Finish(const CardLookup& card_of, const std::vector<LocalRank>& local, const Deadline& deadline,
                            std::unique_ptr<LinkTable>* out) {
  auto table = std::make_unique<LinkTable>(nranks_);
  FinishContext ctx;
  ctx.settings = &settings_;
  ctx.rank = rank_;
  ctx.nranks = nranks_;
  ctx.local = local;
  ctx.exchange = table.get();
  ctx.deadline = deadline;
  for (Opened& o : opened_) {
    ctx.cards.assign(nranks_, "");
    for (int r = 0; r < nranks_; ++r) {
      TESSERA_RETURN_IF_ERROR(card_of(r, o.entry->name, &ctx.cards[r]).Annotate("rank " + std::to_string(r)));
    }
    std::unique_ptr<Transport> transport;
    TESSERA_RETURN_IF_ERROR(o.backend->Finish(ctx, &transport));
    if (!transport) continue;
    const std::string note = o.backend->note();
    description_ += std::string(description_.empty() ? "" : ",") + o.entry->name + (note.empty() ? "" : " (" + note + ")");
    spin_us_hint_ = std::max(spin_us_hint_, o.backend->spin_us_hint());
    table->Add(std::move(transport), o.entry->control);
  }
  if (description_.empty()) description_ = "none";
  *out = std::move(table);
  return Status::Ok();
}

bool TransportSet::DevicePossible() const {
  if (nranks_ < 2) return false;
  for (int peer = 0; peer < nranks_; ++peer) {
    if (peer == rank_) continue;
    const bool reached = std::any_of(opened_.begin(), opened_.end(),
                                     [&](const Opened& o) { return o.backend->DeviceReaches(peer); });
    if (!reached) return false;
  }
  return true;
}

bool TransportSet::ReachesAnyPeer(const OpenTransport& backend) const {
  for (int peer = 0; peer < nranks_; ++peer) {
    if (peer != rank_ && backend.DeviceReaches(peer)) return true;
  }
  return false;
}

// Device transports in the registry's order (cuda_ipc first, so the ranks of a host
// take it), whatever TESSERA_TRANSPORT's order: rows are one vector, so their addresses
// are in that order.
Status TransportSet::FinishDevice(DeviceEngine* engine, const Deadline& deadline, std::unique_ptr<LinkTable>* out,
                                  std::string* described) {
  std::vector<Opened*> by_row;
  for (Opened& o : opened_) by_row.push_back(&o);
  std::sort(by_row.begin(), by_row.end(), [](const Opened* a, const Opened* b) { return a->entry < b->entry; });
  auto table = std::make_unique<LinkTable>(nranks_);
  described->clear();
  for (Opened* o : by_row) {
    if (!ReachesAnyPeer(*o->backend)) continue;
    std::unique_ptr<Transport> transport;
    TESSERA_RETURN_IF_ERROR(o->backend->FinishDevice(engine, deadline, &transport));
    *described += std::string(described->empty() ? "" : " and ") + o->backend->DescribeDevice();
    table->Add(std::move(transport), false);
  }
  // Every link now, in increasing peer order: a link's set-up waits for its peer's, and
  // pairs taken in one global order cannot wait in a cycle (lazily, a ring would).
  *out = std::move(table);
  for (int peer = 0; peer < nranks_; ++peer) {
    Link* link = nullptr;
    if (peer != rank_) TESSERA_RETURN_IF_ERROR((*out)->Get(peer, deadline, &link));
  }
  return Status::Ok();
}

}  // namespace tessera
