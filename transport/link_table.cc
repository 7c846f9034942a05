#include "transport/link_table.h"

namespace tessera {

LinkTable::LinkTable(int nranks, std::vector<std::unique_ptr<Transport>> transports)
    : links_(nranks), transports_(std::move(transports)) {}

LinkTable::~LinkTable() {
  links_.clear();  // links point into transports' memory: release them first
  transports_.clear();
}

const char* LinkTable::TransportFor(int peer) const {
  for (const auto& t : transports_) {
    if (t->CanConnect(peer)) return t->name();
  }
  return "none";
}

void LinkTable::PublishFailure(const Status& failure) {
  for (const auto& t : transports_) t->PublishFailure(failure);
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

}  // namespace tessera
