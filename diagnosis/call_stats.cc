#include "diagnosis/call_stats.h"

namespace tessera {
namespace {

template <typename T>
void Add(std::atomic<T>* counter, T value) {  // one writer: no read-modify-write
  counter->store(counter->load(std::memory_order_relaxed) + value, std::memory_order_relaxed);
}

}  // namespace

const char* CallKindName(int kind) {
  return kind >= 0 && kind < kNumCollectives ? OpName(static_cast<OpKind>(kind)) : "send/recv";
}

void CallStats::CallBegan(const CallRecord& call, int64_t now_us) {
  const int k = call.stamp.kind;
  kind_ = call.stamp.seq != 0 && k < kNumCollectives ? k : kNumCollectives;
  bytes_ = call.bytes;
  began_us_ = now_us;
}

void CallStats::CallEnded(CallOutcome outcome, int64_t now_us) {
  Counters& c = kinds_[kind_];
  const int64_t took = now_us - began_us_;
  size_t b = 0;
  while (b < kCallTimeBoundsUs.size() && took > kCallTimeBoundsUs[b]) ++b;
  Add<uint64_t>(&c.calls, 1);
  Add<uint64_t>(&c.buckets[b], 1);
  Add<int64_t>(&c.time_us, took);
  if (outcome == CallOutcome::kDone) {
    Add<uint64_t>(&c.bytes, bytes_);
  } else {
    Add<uint64_t>(&c.failures, 1);
  }
}

CallCounts CallStats::Counts(int kind) const {
  const Counters& c = kinds_[kind];
  CallCounts out;
  out.calls = c.calls.load(std::memory_order_relaxed);
  out.failures = c.failures.load(std::memory_order_relaxed);
  out.bytes = c.bytes.load(std::memory_order_relaxed);
  out.time_us = c.time_us.load(std::memory_order_relaxed);
  for (size_t b = 0; b < kCallTimeBuckets; ++b) out.buckets[b] = c.buckets[b].load(std::memory_order_relaxed);
  return out;
}

}  // namespace tessera
