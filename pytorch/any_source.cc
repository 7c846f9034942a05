#include "pytorch/any_source.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace tessera_torch {
namespace {

std::string Prefix(int rank) { return "tessera/mailbox/" + std::to_string(rank) + "/"; }

}  // namespace

bool AnySourceMailbox::Enabled() {
  const char* value = std::getenv("TESSERA_TORCH_ANY_SOURCE");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

AnySourceMailbox::AnySourceMailbox(c10::intrusive_ptr<c10d::Store> store, int rank, int size)
    : store_(std::move(store)), rank_(rank), claimed_(size, 0) {}

void AnySourceMailbox::Announce(int destination) {
  const int64_t entry = store_->add(Prefix(destination) + "count", 1) - 1;
  const std::string me = std::to_string(rank_);
  store_->set(Prefix(destination) + std::to_string(entry), std::vector<uint8_t>(me.begin(), me.end()));
}

void AnySourceMailbox::Claim(int source) {
  std::lock_guard<std::mutex> lock(mu_);
  ++claimed_.at(source);
}

int AnySourceMailbox::NextSource() {
  for (;;) {
    const std::string key = Prefix(rank_) + std::to_string(cursor_++);
    std::vector<uint8_t> bytes = store_->get(key);  // waits until the sender has written it
    store_->deleteKey(key);
    const int source = std::stoi(std::string(bytes.begin(), bytes.end()));
    TORCH_CHECK(source >= 0 && source < static_cast<int>(claimed_.size()) && source != rank_,
                "tessera recv from any source: the mailbox names rank ", source);
    std::lock_guard<std::mutex> lock(mu_);
    if (claimed_[source] == 0) return source;
    --claimed_[source];  // that message is a specific receive's
  }
}

}  // namespace tessera_torch
