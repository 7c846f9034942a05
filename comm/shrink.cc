// Revoke and shrink (communicator.h): surviving a lost rank.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "comm/communicator.h"
#include "comm/shrink_offer.h"

namespace tessera {

// The transports are not thread-safe, so the failure notice goes out from the thread
// that runs calls: a call in flight sees abort_ within a sleep slice and breaks the
// communicator itself (or, when it ends first, Revoked does); only with no call in
// flight does this thread break it.
void Communicator::Revoke() {
  revoked_.store(true);
  abort_.store(true);
  std::unique_lock<std::mutex> idle(run_mu_, std::try_to_lock);
  if (idle.owns_lock()) RecordFailure(RemoteError("revoked"));
}

namespace {

std::string RankList(const std::vector<int>& ranks) {
  std::string out = "{";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "}";
}

}  // namespace

Status Communicator::OfferShrink(const std::vector<int>& exclude, const Settings& settings, UniqueIdData* id) {
  TESSERA_RETURN_IF_ERROR(NewUniqueId(settings, 0, flight_identity_.host, id));
  watch_->SetOffer(EncodeShrinkOffer(shrinks_, *id, exclude));
  return Status::Ok();
}

// Asks the lowest survivor until it offers this shrink (bounded by the timeout). Its
// list must equal *exclude, unless `adopt` (then *exclude becomes its list).
Status Communicator::FetchShrink(int leader, bool adopt, std::vector<int>* exclude, UniqueIdData* id) {
  const Deadline deadline = Deadline::AfterMs(settings_.timeout_ms);
  for (;;) {
    std::string offer;
    bool current = false;
    std::vector<int> theirs;
    Status s = AskOffer(membership_.watch[leader], membership_.secret, rank_, deadline, &offer);
    if (s.ok()) s = DecodeShrinkOffer(offer, shrinks_, nranks_, &current, id, &theirs);
    if (!s.ok()) return s.Annotate("rank " + std::to_string(leader) + ", the lowest survivor [culprit: rank " +
                                   std::to_string(leader) + "]");
    if (current && (adopt || theirs == *exclude)) {
      *exclude = theirs;
      return Status::Ok();
    }
    if (current) {
      return InvalidUsage("the survivors disagree on who is gone: rank " + std::to_string(leader) + " excludes " +
                          RankList(theirs) + ", rank " + std::to_string(rank_) + " " + RankList(*exclude));
    }
    if (deadline.Expired()) {
      return TimeoutError("rank " + std::to_string(leader) + ", the lowest survivor, offered no shrink within " +
                          std::to_string(settings_.timeout_ms) + " ms (TESSERA_TIMEOUT_MS) [culprit: rank " +
                          std::to_string(leader) + "]");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Status Communicator::LostRanks(std::vector<int>* lost) const {
  std::vector<bool> skip(static_cast<size_t>(nranks_), false);
  skip[static_cast<size_t>(rank_)] = true;
  std::vector<PeerAnswer> answers;
  QueryPeers(membership_.watch, skip, membership_.secret, rank_, WatchRequest::kStatus,
             Deadline::AfterMs(settings_.diagnosis_ms), /*stop_on_verdict=*/false, &answers);
  for (int r = 0; r < nranks_; ++r) {
    const PeerAnswer& a = answers[static_cast<size_t>(r)];
    if (r == rank_ || a.kind == PeerAnswer::Kind::kAnswered) continue;
    if (a.kind == PeerAnswer::Kind::kLocalError) {
      return SystemError("cannot ask rank " + std::to_string(r) + " whether it is alive: " + a.error);
    }
    lost->push_back(r);
  }
  return Status::Ok();
}

Status Communicator::Shrink(const std::vector<int>& exclude_in, bool lost, const Settings& settings,
                            std::unique_ptr<Communicator>* out) {
  const bool adopt = exclude_in.empty();
  const bool watched = !membership_.watch.empty();
  std::vector<int> exclude = adopt ? std::vector<int>() : exclude_in;
  if (adopt && !lost) {
    for (int32_t r : activity_.Snapshot().culprits) exclude.push_back(r);
  }
  // Asked for, or no culprit named (the first failure this rank saw was a peer's revoke).
  if (adopt && exclude.empty() && watched) TESSERA_RETURN_IF_ERROR(LostRanks(&exclude).Annotate("shrink"));
  std::sort(exclude.begin(), exclude.end());
  exclude.erase(std::unique(exclude.begin(), exclude.end()), exclude.end());
  for (int r : exclude) {
    if (r < 0 || r >= nranks_) return InvalidArgument("excluded rank " + std::to_string(r) + " is out of range");
  }
  auto excluded = [&exclude](int r) { return std::binary_search(exclude.begin(), exclude.end(), r); };
  if (excluded(rank_)) return InvalidUsage("rank " + std::to_string(rank_) + " is excluded: only survivors shrink");
  int leader = 0;
  while (leader < nranks_ && excluded(leader)) ++leader;
  if (leader == nranks_) return InvalidArgument("every rank is excluded");
  ++shrinks_;
  UniqueIdData id;
  TESSERA_RETURN_IF_ERROR((leader == rank_ ? OfferShrink(exclude, settings, &id) : FetchShrink(leader, adopt, &exclude, &id))
                              .Annotate("shrink"));
  if (excluded(rank_)) return InvalidUsage("rank " + std::to_string(leader) + ", the lowest survivor, excludes rank " +
                                           std::to_string(rank_) + " " + RankList(exclude));
  int new_rank = 0;
  for (int r = 0; r < rank_; ++r) new_rank += excluded(r) ? 0 : 1;
  const int survivors = nranks_ - static_cast<int>(exclude.size());
  return Create(settings, id, survivors, new_rank, out)
      .Annotate("shrink: " + std::to_string(survivors) + " survivors without " + RankList(exclude) + ", new rank " +
                std::to_string(new_rank));
}

}  // namespace tessera
