#include "pytorch/store_barrier.h"

#include <unistd.h>

#include <algorithm>
#include <exception>
#include <vector>

namespace tessera_torch {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<uint8_t> Bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

std::string IdentityKey(int rank) { return "tessera/identity/" + std::to_string(rank); }

std::string RoundKey(uint64_t round, const std::string& what) {
  return "tessera/monitored_barrier/" + std::to_string(round) + "/" + what;
}

std::string ArrivedKey(uint64_t round, int rank) { return RoundKey(round, "arrived/" + std::to_string(rank)); }

// Whether `key` exists by `deadline`, waiting on the store (which wakes at once when the
// key is set) for what is left of the time.
bool ArrivesBy(c10d::Store& store, const std::string& key, Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return store.check({key});
  try {
    store.wait({key}, left);
    return true;
  } catch (const std::exception&) {
    return store.check({key});  // a timeout of the wait; anything else shows here too
  }
}

std::string RankList(const std::vector<int>& ranks) {
  std::string list;
  for (size_t i = 0; i < ranks.size(); ++i) list += (i ? ", " : "") + std::to_string(ranks[i]);
  return list;
}

// "[Rank 0]: Rank 1 failed to pass monitoredBarrier in 2000 ms (pid 4242 on host b)".
std::string MissingMessage(c10d::Store& store, const std::vector<int>& missing, std::chrono::milliseconds timeout) {
  std::string message = "[Rank 0]: Rank" + std::string(missing.size() > 1 ? "s " : " ") + RankList(missing) +
                        " failed to pass monitoredBarrier in " + std::to_string(timeout.count()) + " ms";
  std::string who;
  for (int rank : missing) {
    const std::string identity = PublishedIdentity(store, rank);
    if (!identity.empty()) who += (who.empty() ? "" : "; ") + std::string("rank ") + std::to_string(rank) + ": " + identity;
  }
  if (!who.empty()) message += " (" + who + ")";
  return message + " (tessera, over the group's store)";
}

void RankZero(c10d::Store& store, int size, uint64_t round, std::chrono::milliseconds timeout, bool wait_all_ranks) {
  const Clock::time_point deadline = Clock::now() + timeout;
  std::vector<int> missing;
  for (int rank = 1; rank < size; ++rank) {
    if (ArrivesBy(store, ArrivedKey(round, rank), deadline)) continue;
    missing.push_back(rank);
    if (!wait_all_ranks) break;
  }
  for (int rank = 1; rank < size; ++rank) store.deleteKey(ArrivedKey(round, rank));
  TORCH_CHECK(missing.empty(), MissingMessage(store, missing, timeout));
  store.set(RoundKey(round, "released"), Bytes("1"));
  // Every rank has arrived at this round, so none waits for the last round's release.
  if (round > 0) store.deleteKey(RoundKey(round - 1, "released"));
}

void OtherRank(c10d::Store& store, int rank, uint64_t round, std::chrono::milliseconds timeout) {
  store.set(ArrivedKey(round, rank), Bytes("1"));
  const Clock::time_point deadline = Clock::now() + timeout;
  TORCH_CHECK(ArrivesBy(store, RoundKey(round, "released"), deadline), "[Rank ", rank, "]: Rank ", rank,
              " reached monitoredBarrier, but rank 0 did not release it within ", timeout.count(),
              " ms: some rank did not arrive (rank 0's error names it), or rank 0 itself did not (",
              PublishedIdentity(store, 0), ")");
}

}  // namespace

void PublishIdentity(c10d::Store& store, int rank) {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  store.set(IdentityKey(rank), Bytes("pid " + std::to_string(getpid()) + " on host " + host));
}

std::string PublishedIdentity(c10d::Store& store, int rank) {
  try {
    if (!store.check({IdentityKey(rank)})) return "";
    std::vector<uint8_t> bytes = store.get(IdentityKey(rank));
    return std::string(bytes.begin(), bytes.end());
  } catch (const std::exception&) {
    return "";
  }
}

void MonitoredBarrier(c10d::Store& store, int rank, int size, uint64_t round, std::chrono::milliseconds timeout,
                      bool wait_all_ranks) {
  if (size == 1) return;
  if (rank == 0) {
    RankZero(store, size, round, timeout, wait_all_ranks);
  } else {
    OtherRank(store, rank, round, timeout);
  }
}

}  // namespace tessera_torch
