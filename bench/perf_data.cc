// The benchmark's exact test data: per-rank values, their reductions, and buffers
// tiled with one encoded period of them (see perf_data.h for why each choice is exact).
#include "bench/perf_data.h"

#include <algorithm>
#include <cstring>

#include "elementwise/elementwise.h"

namespace tessera_bench {

// The float16/bfloat16 conversions are the library's (elementwise/elementwise.h).
using tessera::Bfloat16ToFloat;
using tessera::FloatToBfloat16;
using tessera::FloatToHalf;
using tessera::HalfToFloat;

namespace {

// The largest integer magnitude that every partial sum may reach and stay exact in
// `type` (and inside its range).
int64_t ExactIntegerLimit(DataType type) {
  switch (type) {
    case DataType::kInt8: return 127;
    case DataType::kUint8: return 255;
    case DataType::kBfloat16: return 256;
    case DataType::kFloat16: return 2048;
    default: return int64_t{1} << 24;  // float's limit; the wider types hold more
  }
}

// The largest magnitude A a sum or average pattern may use for nranks ranks.
int64_t Amplitude(DataType type, int nranks) {
  return std::min<int64_t>(3, ExactIntegerLimit(type) / nranks);
}

int64_t SumValue(DataType type, int64_t rank, int64_t nranks, int64_t j) {
  int64_t a = Amplitude(type, static_cast<int>(nranks));
  if (a == 0) return rank == j % nranks ? 1 : 0;
  int64_t spread = rank * 7 + j * 3 + 1;
  return IsSigned(type) ? spread % (2 * a + 1) - a : spread % (a + 1);
}

int64_t ProdValue(DataType type, int64_t rank, int64_t nranks, int64_t j) {
  int64_t value = IsSigned(type) && (rank + j) % 3 == 0 ? -1 : 1;
  bool doubles = rank == j % nranks && (j / nranks) % 4 == 1;  // one rank at most
  return doubles ? 2 * value : value;
}

int64_t MaxMinValue(DataType type, int64_t rank, int64_t j) {
  int64_t spread = (rank * 5 + j * 3) % 9;
  return IsSigned(type) ? spread - 4 : spread;
}

int64_t AvgValue(DataType type, int64_t rank, int64_t nranks, int64_t j) {
  int64_t a = Amplitude(type, static_cast<int>(nranks));
  if (a == 0) return 0;
  if (a == 1) return IsSigned(type) ? j % 3 - 1 : j % 2;
  int64_t b = a - 1;  // |base| <= b, so base + d stays within [-a, a]
  int64_t base = IsSigned(type) ? (j * 3) % (2 * b + 1) - b : 1 + j % b;
  // Ranks 2p and 2p+1 add +d and -d; an odd last rank adds nothing.
  bool unpaired = nranks % 2 == 1 && rank == nranks - 1;
  int64_t d = unpaired ? 0 : (j + rank / 2) % 2;
  return rank % 2 == 0 ? base + d : base - d;
}

}  // namespace

int64_t SendValue(DataType type, ReduceOp op, int rank, int nranks, size_t index) {
  int64_t j = static_cast<int64_t>(index % kPatternPeriod);
  switch (op) {
    case ReduceOp::kSum: return SumValue(type, rank, nranks, j);
    case ReduceOp::kProd: return ProdValue(type, rank, nranks, j);
    case ReduceOp::kMax:
    case ReduceOp::kMin: return MaxMinValue(type, rank, j);
    case ReduceOp::kAvg: return AvgValue(type, rank, nranks, j);
  }
  return 0;
}

int64_t ReducedValue(DataType type, ReduceOp op, int nranks, size_t index) {
  // Unsigned arithmetic wraps modulo 2^64 where signed would overflow.
  uint64_t wrapped = op == ReduceOp::kProd ? 1 : 0;
  int64_t extreme = SendValue(type, op, 0, nranks, index);
  for (int rank = 0; rank < nranks; ++rank) {
    int64_t value = SendValue(type, op, rank, nranks, index);
    if (op == ReduceOp::kProd) {
      wrapped *= static_cast<uint64_t>(value);
    } else {
      wrapped += static_cast<uint64_t>(value);
    }
    extreme = op == ReduceOp::kMax ? std::max(extreme, value) : std::min(extreme, value);
  }
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kProd: return static_cast<int64_t>(wrapped);
    case ReduceOp::kMax:
    case ReduceOp::kMin: return extreme;
    case ReduceOp::kAvg: return static_cast<int64_t>(wrapped) / nranks;  // divides exactly
  }
  return 0;
}

void EncodeValue(DataType type, int64_t value, void* element) {
  uint64_t bits = static_cast<uint64_t>(value);
  switch (type) {
    case DataType::kInt8:
    case DataType::kUint8: {
      uint8_t narrow = static_cast<uint8_t>(bits);
      std::memcpy(element, &narrow, sizeof narrow);
      return;
    }
    case DataType::kInt32:
    case DataType::kUint32: {
      uint32_t narrow = static_cast<uint32_t>(bits);
      std::memcpy(element, &narrow, sizeof narrow);
      return;
    }
    case DataType::kInt64:
    case DataType::kUint64:
      std::memcpy(element, &bits, sizeof bits);
      return;
    case DataType::kFloat16: {
      uint16_t half = FloatToHalf(static_cast<float>(value));
      std::memcpy(element, &half, sizeof half);
      return;
    }
    case DataType::kBfloat16: {
      uint16_t bf16 = FloatToBfloat16(static_cast<float>(value));
      std::memcpy(element, &bf16, sizeof bf16);
      return;
    }
    case DataType::kFloat32: {
      float single = static_cast<float>(value);
      std::memcpy(element, &single, sizeof single);
      return;
    }
    case DataType::kFloat64: {
      double wide = static_cast<double>(value);
      std::memcpy(element, &wide, sizeof wide);
      return;
    }
  }
}

ElementPattern::ElementPattern(DataType type, const std::vector<int64_t>& values)
    : element_size_(ElementSize(type)), period_bytes_(kPatternPeriod * ElementSize(type)) {
  for (size_t j = 0; j < kPatternPeriod && j < values.size(); ++j) {
    EncodeValue(type, values[j], &period_bytes_[j * element_size_]);
  }
}

void ElementPattern::Fill(void* buffer, size_t count) const {
  unsigned char* out = static_cast<unsigned char*>(buffer);
  size_t remaining = count * element_size_;
  while (remaining > 0) {
    size_t chunk = std::min(remaining, period_bytes_.size());
    std::memcpy(out, period_bytes_.data(), chunk);
    out += chunk;
    remaining -= chunk;
  }
}

size_t ElementPattern::CountMismatches(const void* buffer, size_t count) const {
  const unsigned char* in = static_cast<const unsigned char*>(buffer);
  size_t mismatches = 0;
  for (size_t first = 0; first < count; first += kPatternPeriod) {
    size_t elements = std::min(kPatternPeriod, count - first);
    const unsigned char* chunk = in + first * element_size_;
    if (std::memcmp(chunk, period_bytes_.data(), elements * element_size_) == 0) continue;
    for (size_t j = 0; j < elements; ++j) {
      const unsigned char* expected = &period_bytes_[j * element_size_];
      if (std::memcmp(chunk + j * element_size_, expected, element_size_) != 0) ++mismatches;
    }
  }
  return mismatches;
}

ElementPattern SendPattern(DataType type, ReduceOp op, int rank, int nranks) {
  std::vector<int64_t> values(kPatternPeriod);
  for (size_t j = 0; j < kPatternPeriod; ++j) values[j] = SendValue(type, op, rank, nranks, j);
  return ElementPattern(type, values);
}

ElementPattern ReducedPattern(DataType type, ReduceOp op, int nranks) {
  std::vector<int64_t> values(kPatternPeriod);
  for (size_t j = 0; j < kPatternPeriod; ++j) values[j] = ReducedValue(type, op, nranks, j);
  return ElementPattern(type, values);
}

}  // namespace tessera_bench
