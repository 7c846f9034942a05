#include "transport/link_table.h"

#include <string>

namespace tessera {

LinkTable::LinkTable(int nranks, std::vector<std::unique_ptr<Transport>> transports)
    : links_(nranks), control_links_(nranks), transports_(std::move(transports)) {}

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

Status LinkTable::Control(int peer, const Deadline& deadline, Link** out) {
  if (peer < 0 || peer >= static_cast<int>(control_links_.size())) {
    return InternalError("no rank " + std::to_string(peer));
  }
  if (!control_links_[peer]) {
    Transport* tcp = nullptr;
    for (const auto& t : transports_) {
      if (std::string(t->name()) == "tcp") tcp = t.get();
    }
    if (tcp == nullptr) {
      return InvalidUsage("connecting to rank " + std::to_string(peer) +
                          " needs TCP for its set-up messages: add tcp to TESSERA_TRANSPORT");
    }
    TESSERA_RETURN_IF_ERROR(tcp->Connect(peer, deadline, &control_links_[peer]).Annotate("control link"));
  }
  *out = control_links_[peer].get();
  return Status::Ok();
}

}  // namespace tessera
