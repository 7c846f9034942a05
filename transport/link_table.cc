#include "transport/link_table.h"

#include <algorithm>
#include <string>

#include "transport/exchange.h"
#include "transport/host_board.h"

namespace tessera {

LinkTable::LinkTable(int nranks, std::vector<std::unique_ptr<Transport>> transports)
    : links_(nranks), control_links_(nranks), transports_(std::move(transports)) {}

void LinkTable::Add(std::unique_ptr<Transport> transport, bool control) {
  if (control) control_ = transport.get();
  transports_.push_back(std::move(transport));
}

LinkTable::~LinkTable() {
  links_.clear();  // links point into transports' memory: release them first
  control_links_.clear();
  transports_.clear();
}

const char* LinkTable::TransportFor(int peer) const {
  for (const auto& t : transports_) {
    if (t->CanConnect(peer)) return t->name();
  }
  return "none";
}

HostBoard* LinkTable::Board() const {
  for (const auto& t : transports_) {
    HostBoard* b = t->board();
    if (b != nullptr && b->ranks() == static_cast<int>(links_.size())) return b;
  }
  return nullptr;
}

void LinkTable::PublishFailure(const Status& failure) {
  const Status root = RootCause(failure);
  for (const auto& t : transports_) t->PublishFailure(root);
}

void LinkTable::AddNoticeWaits(WaitSet* set) {
  for (const auto& t : transports_) t->AddNoticeWaits(set);
}

Status LinkTable::CheckNotices(int wait_ms) {
  for (const auto& t : transports_) TESSERA_RETURN_IF_ERROR(t->CheckNotices(wait_ms));
  return Status::Ok();
}

Status LinkTable::Get(int peer, const Deadline& deadline, Link** out) {
  if (peer < 0 || peer >= static_cast<int>(links_.size())) {
    return InternalError("no rank " + std::to_string(peer));
  }
  if (!links_[peer]) {
    Transport* chosen = nullptr;
    for (const auto& t : transports_) {
      if (t->CanConnect(peer)) {
        chosen = t.get();
        break;
      }
    }
    if (chosen == nullptr) return InternalError("no transport can reach rank " + std::to_string(peer));
    Status s = chosen->Connect(peer, deadline, &links_[peer]);
    if (s.code() == Code::kRemoteError) {
      // The peer may be gone because of another rank's failure: prefer the root cause.
      Status notice = CheckNotices(100);
      if (!notice.ok()) s = Status(notice.code(), s.message() + "; " + notice.message());
    }
    TESSERA_RETURN_IF_ERROR(s);
  }
  *out = links_[peer].get();
  return Status::Ok();
}

Status LinkTable::Swap(int peer, const std::string& mine, const Deadline& deadline, std::string* theirs) {
  const std::string what = "connection set-up with rank " + std::to_string(peer);
  if (peer < 0 || peer >= static_cast<int>(control_links_.size())) return InternalError("no rank " + std::to_string(peer));
  if (control_ == nullptr) {
    return InvalidUsage(what + " needs a control transport for its messages: add tcp to TESSERA_TRANSPORT");
  }
  if (!control_links_[peer]) {
    TESSERA_RETURN_IF_ERROR(control_->Connect(peer, deadline, &control_links_[peer]).Annotate("control link"));
  }
  Link* link = control_links_[peer].get();
  theirs->assign(mine.size(), '\0');
  Transfer transfers[2] = {Transfer::Send(link, mine.data(), mine.size()),
                           Transfer::Recv(link, &(*theirs)[0], theirs->size())};
  ExchangeOptions options;
  options.deadline = deadline;
  options.timeout_ms = std::max<int64_t>(1, deadline.RemainingMs());
  options.notices = this;
  return Exchange(transfers, 2, options).Annotate(what);
}

}  // namespace tessera
