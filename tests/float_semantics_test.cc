// Floating-point semantics of the reductions, stated as tests:
//  - float16 and bfloat16 are accumulated in float32 and rounded once at the end, so a
//    sum over many ranks is within 1 ulp of the half type of the exact (float64) sum of
//    the inputs. The inputs are chosen so that rounding to the half type after every
//    addition would be off by more than 1 ulp (each test shows this on its own inputs
//    first, so that it cannot pass by accident): one rank holds a large value, the others
//    add small ones below half an ulp of it.
//  - max and min: a NaN in any rank's input makes the result NaN; infinities order as
//    usual; -0.0 and +0.0 compare equal and either may be returned.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/tessera.h"
#include "tests/rank_harness.h"
#include "tests/typed_values.h"

namespace tessera_test {
namespace {

RankOptions FloatOptions() {
  RankOptions opts;
  opts.timeout = Milliseconds(120000);
  opts.failure_grace = Milliseconds(5000);
  opts.env["TESSERA_TIMEOUT_MS"] = "30000";
  return opts;
}

// --- Half types: float32 accumulation, one rounding -------------------------------------

// Per half type: the large value one rank holds (an integer, exact in the type), and the
// small value each other rank adds, in (ulp / 3, ulp / 2) of the large value: below half
// an ulp, so that a half-precision step drops it, while three of them exceed an ulp.
struct HalfCase {
  tesseraDataType_t type;
  double large;
  double small;
};

const HalfCase kHalfCases[] = {
    {tesseraFloat16, 1024.0, 0.4},   // ulp 1 at 1024..2047; half(0.4) = 0.39990234375
    {tesseraBfloat16, 256.0, 0.8},   // ulp 2 at 256..511; bfloat16(0.8) = 0.80078125
};

// Element i: rank i % nranks holds large + 4 * (i % 8) (the large value visits every
// position of any reduction order), every other rank holds small * (1 + (i % 3) / 16).
double HalfInput(const HalfCase& c, size_t i, int rank, int nranks) {
  if (static_cast<int>(i % static_cast<size_t>(nranks)) == rank) return c.large + 4.0 * static_cast<double>(i % 8);
  return RoundToType(c.type, c.small * (1.0 + static_cast<double>(i % 3) / 16.0));
}

enum class HalfOp { kSum, kAvg, kPreMulSum };

const char* HalfOpName(HalfOp op) {
  switch (op) {
    case HalfOp::kSum: return "sum";
    case HalfOp::kAvg: return "avg";
    case HalfOp::kPreMulSum: return "premulsum(0.5)";
  }
  return "?";
}

// The exact result of element i, in float64 (the inputs are exact in float64).
double HalfReference(const HalfCase& c, HalfOp op, size_t i, int nranks) {
  double sum = 0;
  for (int r = 0; r < nranks; ++r) sum += HalfInput(c, i, r, nranks);
  if (op == HalfOp::kAvg) return sum / nranks;
  if (op == HalfOp::kPreMulSum) return 0.5 * sum;
  return sum;
}

// What rounding to the half type after every step, in rank order, would give.
double HalfStepwise(const HalfCase& c, HalfOp op, size_t i, int nranks) {
  const double scale = op == HalfOp::kPreMulSum ? 0.5 : 1.0;
  double acc = RoundToType(c.type, scale * HalfInput(c, i, 0, nranks));
  for (int r = 1; r < nranks; ++r) acc = RoundToType(c.type, acc + scale * HalfInput(c, i, r, nranks));
  if (op == HalfOp::kAvg) acc = RoundToType(c.type, acc / nranks);
  return acc;
}

// Checks got (count elements, element k is global element first + k) against the
// float64 reference within 1 ulp of the half type.
std::string CheckHalfResult(const HalfCase& c, HalfOp op, const std::vector<uint16_t>& got, size_t first,
                            size_t count, int nranks, const std::string& what) {
  size_t wrong = 0;
  std::string detail;
  double worst = 0;
  for (size_t k = 0; k < count; ++k) {
    const double want = HalfReference(c, op, first + k, nranks);
    const double g = DecodeValue(c.type, &got[k]);
    const double err = std::fabs(g - want) / UlpOf(c.type, want);
    if (!(err <= worst)) worst = err;
    if (err <= 1.0) continue;  // false for NaN too
    if (wrong < 3) {
      char line[200];
      snprintf(line, sizeof(line), " [%zu]=%.10g want %.10g (%.2f ulp; stepwise half would give %.10g)",
               first + k, g, want, err, HalfStepwise(c, op, first + k, nranks));
      detail += line;
    }
    ++wrong;
  }
  if (wrong == 0) return "";
  return what + ": " + std::to_string(wrong) + " of " + std::to_string(count) +
         " elements beyond 1 ulp of the float64 reference (worst " + std::to_string(worst) + " ulp):" + detail;
}

// Ranks, and whether allreduces run in segments of 1024 float32 values
// (TESSERA_HALF_SEGMENT_BYTES=4096: four whole segments and a part of one here).
class HalfAccumulation : public testing::TestWithParam<std::tuple<int, bool>> {};

// The inputs discriminate: stepwise half rounding is off by more than 1 ulp somewhere.
TEST_P(HalfAccumulation, StepwiseRoundingWouldFailTheseInputs) {
  const int nranks = std::get<0>(GetParam());
  for (const HalfCase& c : kHalfCases) {
    for (HalfOp op : {HalfOp::kSum, HalfOp::kPreMulSum}) {
      double worst = 0;
      for (size_t i = 0; i < 64; ++i) {
        const double want = HalfReference(c, op, i, nranks);
        worst = std::fmax(worst, std::fabs(HalfStepwise(c, op, i, nranks) - want) / UlpOf(c.type, want));
      }
      EXPECT_GT(worst, 1.0) << TypeName(c.type) << " " << HalfOpName(op) << " on " << nranks << " ranks";
    }
  }
}

TEST_P(HalfAccumulation, WithinOneUlpOfFloat64Reference) {
  const int nranks = std::get<0>(GetParam());
  RankOptions opts = FloatOptions();
  if (std::get<1>(GetParam())) opts.env["TESSERA_HALF_SEGMENT_BYTES"] = "4096";
  auto results = RunRanks(nranks, [nranks](int rank, tesseraComm_t comm) {
    FailureLog log;
    const size_t count = 4099;  // per rank for reduce-scatter, total otherwise
    const size_t n = static_cast<size_t>(nranks);
    for (const HalfCase& c : kHalfCases) {
      for (HalfOp op : {HalfOp::kSum, HalfOp::kAvg, HalfOp::kPreMulSum}) {
        tesseraRedOp_t red = op == HalfOp::kAvg ? tesseraAvg : tesseraSum;
        if (op == HalfOp::kPreMulSum) {
          uint16_t half_scalar;
          EncodeValue(c.type, 0.5, &half_scalar);
          tesseraResult_t r =
              tesseraRedOpCreatePreMulSum(&red, &half_scalar, c.type, tesseraScalarHostImmediate, comm);
          if (!log.Expect(r == tesseraSuccess, "tesseraRedOpCreatePreMulSum(" + TypeName(c.type) +
                                                   "): " + CodeName(r) + ": " + LastError(nullptr))) {
            continue;
          }
        }
        const std::string label = TypeName(c.type) + " " + HalfOpName(op) + " on rank " +
                                  std::to_string(rank) + " of " + std::to_string(nranks);
        std::vector<uint16_t> send(n * count), recv(n * count, 0xEEEE);
        for (size_t i = 0; i < n * count; ++i) EncodeValue(c.type, HalfInput(c, i, rank, nranks), &send[i]);

        tesseraResult_t r = tesseraAllReduce(send.data(), recv.data(), count, c.type, red, comm, nullptr);
        if (log.Expect(r == tesseraSuccess, "allreduce " + label + ": " + CodeName(r) + ": " + LastError(nullptr))) {
          log.Add(CheckHalfResult(c, op, recv, 0, count, nranks, "allreduce " + label));
        }
        const int root = nranks - 1;
        r = tesseraReduce(send.data(), recv.data(), count, c.type, red, root, comm, nullptr);
        if (log.Expect(r == tesseraSuccess, "reduce " + label + ": " + CodeName(r) + ": " + LastError(nullptr)) &&
            rank == root) {
          log.Add(CheckHalfResult(c, op, recv, 0, count, nranks, "reduce " + label));
        }
        r = tesseraReduceScatter(send.data(), recv.data(), count, c.type, red, comm, nullptr);
        if (log.Expect(r == tesseraSuccess, "reducescatter " + label + ": " + CodeName(r) + ": " + LastError(nullptr))) {
          log.Add(CheckHalfResult(c, op, recv, rank * count, count, nranks, "reducescatter " + label));
        }
        // In place too.
        std::vector<uint16_t> inplace = send;
        r = tesseraAllReduce(inplace.data(), inplace.data(), count, c.type, red, comm, nullptr);
        if (log.Expect(r == tesseraSuccess, "in-place allreduce " + label + ": " + CodeName(r))) {
          log.Add(CheckHalfResult(c, op, inplace, 0, count, nranks, "in-place allreduce " + label));
        }
        if (op == HalfOp::kPreMulSum) {
          log.Expect(tesseraRedOpDestroy(red, comm) == tesseraSuccess, "destroy: " + LastError(nullptr));
        }
      }
    }
    return log.str();
  }, opts);
  EXPECT_EQ("", Failures(results));
}

INSTANTIATE_TEST_SUITE_P(Ranks, HalfAccumulation, testing::Combine(testing::Values(4, 7), testing::Bool()),
                         [](const testing::TestParamInfo<std::tuple<int, bool>>& info) {
                           return "r" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_segments" : "");
                         });

// --- TESSERA_HALF_WIRE=half: half types travel and are reduced in 16 bits ---------------
// Integer-valued inputs whose every partial result is exact in both half types come out
// exact for every operator; the discriminating inputs above come out beyond 1 ulp
// somewhere (with the ring), which shows the values were rounded at each step: they
// travelled as half.
TEST(HalfWire, ExactWhereEveryStepIsExactAndRoundedPerStepOtherwise) {
  const int nranks = 4;
  RankOptions opts = FloatOptions();
  opts.env["TESSERA_HALF_WIRE"] = "half";
  // The ring adds one rank's value at a time, so a partial sum that holds the large
  // value drops the small ones (recursive doubling would pair the small ones first).
  opts.env["TESSERA_ALGO"] = "ring";
  auto results = RunRanks(nranks, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    const size_t count = 5003;
    for (tesseraDataType_t type : {tesseraFloat16, tesseraBfloat16}) {
      auto input = [](size_t i, int r) { return static_cast<double>(static_cast<int>((i * 7 + r * 3) % 9) - 4); };
      std::vector<uint16_t> send(count), recv(count);
      for (size_t i = 0; i < count; ++i) EncodeValue(type, input(i, rank), &send[i]);
      uint16_t half_scalar;
      EncodeValue(type, 0.5, &half_scalar);
      tesseraRedOp_t premul;
      log.Expect(tesseraRedOpCreatePreMulSum(&premul, &half_scalar, type, tesseraScalarHostImmediate, comm) ==
                     tesseraSuccess, "PreMulSum: " + LastError(nullptr));
      for (tesseraRedOp_t op : {tesseraSum, tesseraMax, tesseraMin, tesseraAvg, premul}) {
        tesseraResult_t r = tesseraAllReduce(send.data(), recv.data(), count, type, op, comm, nullptr);
        if (!log.Expect(r == tesseraSuccess, "allreduce: " + LastError(nullptr))) continue;
        size_t wrong = 0;
        for (size_t i = 0; i < count; ++i) {
          double want = op == tesseraMax ? -1e9 : op == tesseraMin ? 1e9 : 0;
          for (int q = 0; q < 4; ++q) {
            const double v = input(i, q);
            want = op == tesseraMax ? std::fmax(want, v) : op == tesseraMin ? std::fmin(want, v) : want + v;
          }
          if (op == tesseraAvg) want /= 4;
          if (op == premul) want *= 0.5;
          if (DecodeValue(type, &recv[i]) != want) ++wrong;
        }
        log.Expect(wrong == 0, TypeName(type) + " op " + std::to_string(op) + ": " + std::to_string(wrong) +
                                   " of " + std::to_string(count) + " elements wrong");
      }
      tesseraRedOpDestroy(premul, comm);
    }
    // The discriminating inputs: rounded at each step, so some element is off by more
    // than 1 ulp of the exact sum.
    for (const HalfCase& c : kHalfCases) {
      std::vector<uint16_t> send(count), recv(count);
      for (size_t i = 0; i < count; ++i) EncodeValue(c.type, HalfInput(c, i, rank, 4), &send[i]);
      if (!log.Expect(tesseraAllReduce(send.data(), recv.data(), count, c.type, tesseraSum, comm, nullptr) ==
                          tesseraSuccess, "allreduce: " + LastError(nullptr))) {
        continue;
      }
      log.Expect(!CheckHalfResult(c, HalfOp::kSum, recv, 0, count, 4, "").empty(),
                 TypeName(c.type) + ": within 1 ulp everywhere, as if reduced in float32 before rounding");
    }
    return log.str();
  }, opts);
  EXPECT_EQ("", Failures(results));
}

// --- NaN, infinities and signed zeros in max and min ------------------------------------

const tesseraDataType_t kFloatTypes[] = {tesseraFloat16, tesseraBfloat16, tesseraFloat32, tesseraFloat64};

enum class Special { kNaN, kPlusInf, kMinusInf };

// Element i of rank r: a small integer, except that the rank i % (nranks + 1) holds
// `special` (so every rank holds it somewhere, at every position of the reduction
// order, and every (nranks + 1)-th element has none); elements i % 7 == 3 hold it on
// every rank.
bool HasSpecial(size_t i, int rank, int nranks) {
  if (i % 7 == 3) return true;
  return static_cast<int>(i % static_cast<size_t>(nranks + 1)) == rank;
}

double SpecialValue(Special s) {
  switch (s) {
    case Special::kNaN: return NAN;
    case Special::kPlusInf: return INFINITY;
    case Special::kMinusInf: return -INFINITY;
  }
  return 0;
}

double OrdinaryValue(size_t i, int rank) { return static_cast<double>(static_cast<int>((i * 5 + rank * 3) % 17) - 8); }

// The expected result of element i under op (tesseraMax / tesseraMin / tesseraSum).
double SpecialReference(Special s, tesseraRedOp_t op, size_t i, int nranks) {
  double acc = 0;
  for (int r = 0; r < nranks; ++r) {
    double x = HasSpecial(i, r, nranks) ? SpecialValue(s) : OrdinaryValue(i, r);
    if (r == 0) {
      acc = x;
    } else if (op == tesseraSum) {
      acc += x;
    } else if (std::isnan(x) || std::isnan(acc)) {
      acc = NAN;
    } else {
      acc = op == tesseraMax ? std::fmax(acc, x) : std::fmin(acc, x);
    }
  }
  return acc;
}

std::string SpecialName(Special s) {
  switch (s) {
    case Special::kNaN: return "NaN";
    case Special::kPlusInf: return "+inf";
    case Special::kMinusInf: return "-inf";
  }
  return "?";
}

class SpecialValues : public testing::TestWithParam<int> {};

// max / min (and sum, for contrast) with NaN or an infinity in some rank's input:
// allreduce, reduce and reduce-scatter, every float type.
TEST_P(SpecialValues, NaNPropagatesInfinitiesOrder) {
  const int nranks = GetParam();
  auto results = RunRanks(nranks, [nranks](int rank, tesseraComm_t comm) {
    FailureLog log;
    const size_t count = 257;
    const size_t n = static_cast<size_t>(nranks);
    for (tesseraDataType_t type : kFloatTypes) {
      const size_t elem = TypeSize(type);
      for (Special special : {Special::kNaN, Special::kPlusInf, Special::kMinusInf}) {
        for (tesseraRedOp_t op : {tesseraMax, tesseraMin, tesseraSum}) {
          const std::string label = TypeName(type) + " " + (op == tesseraMax ? "max" : op == tesseraMin ? "min" : "sum") +
                                    " with " + SpecialName(special) + " on rank " + std::to_string(rank);
          std::vector<unsigned char> send(n * count * elem), recv(n * count * elem, 0xEE);
          for (size_t i = 0; i < n * count; ++i) {
            EncodeValue(type, HasSpecial(i, rank, nranks) ? SpecialValue(special) : OrdinaryValue(i, rank),
                        &send[i * elem]);
          }
          auto check = [&](const std::string& what, size_t first, size_t len) {
            size_t wrong = 0;
            std::string detail;
            for (size_t k = 0; k < len; ++k) {
              const double want = SpecialReference(special, op, first + k, nranks);
              const double got = DecodeValue(type, &recv[k * elem]);
              const bool ok = std::isnan(want) ? std::isnan(got) : got == want;
              if (ok) continue;
              if (wrong++ < 3) {
                char line[120];
                snprintf(line, sizeof(line), " [%zu]=%g want %g", first + k, got, want);
                detail += line;
              }
            }
            if (wrong > 0) log.Add(what + " " + label + ": " + std::to_string(wrong) + " wrong:" + detail);
          };
          tesseraResult_t r = tesseraAllReduce(send.data(), recv.data(), count, type, op, comm, nullptr);
          if (log.Expect(r == tesseraSuccess, "allreduce " + label + ": " + CodeName(r))) check("allreduce", 0, count);
          r = tesseraReduce(send.data(), recv.data(), count, type, op, 0, comm, nullptr);
          if (log.Expect(r == tesseraSuccess, "reduce " + label + ": " + CodeName(r)) && rank == 0) {
            check("reduce", 0, count);
          }
          r = tesseraReduceScatter(send.data(), recv.data(), count, type, op, comm, nullptr);
          if (log.Expect(r == tesseraSuccess, "reducescatter " + label + ": " + CodeName(r))) {
            check("reducescatter", rank * count, count);
          }
        }
      }
    }
    return log.str();
  }, FloatOptions());
  EXPECT_EQ("", Failures(results));
}

// max(-0, +0) and min(-0, +0) are a zero of either sign, never anything else; a
// mixture of zeros and negative numbers gives the zero for max.
TEST_P(SpecialValues, SignedZerosCompareEqual) {
  const int nranks = GetParam();
  auto results = RunRanks(nranks, [](int rank, tesseraComm_t comm) {
    FailureLog log;
    for (tesseraDataType_t type : kFloatTypes) {
      const size_t elem = TypeSize(type);
      const size_t count = 4;
      std::vector<unsigned char> send(count * elem), recv(count * elem, 0xEE);
      // [0]: -0 on even ranks, +0 on odd; [1]: the opposite; [2]: -0 everywhere but
      // -1 on rank 0; [3]: +0 everywhere but 1 on rank 0.
      EncodeValue(type, rank % 2 ? 0.0 : -0.0, &send[0]);
      EncodeValue(type, rank % 2 ? -0.0 : 0.0, &send[elem]);
      EncodeValue(type, rank == 0 ? -1.0 : -0.0, &send[2 * elem]);
      EncodeValue(type, rank == 0 ? 1.0 : 0.0, &send[3 * elem]);
      for (tesseraRedOp_t op : {tesseraMax, tesseraMin}) {
        const std::string label = TypeName(type) + (op == tesseraMax ? " max" : " min");
        tesseraResult_t r = tesseraAllReduce(send.data(), recv.data(), count, type, op, comm, nullptr);
        if (!log.Expect(r == tesseraSuccess, label + ": " + CodeName(r))) continue;
        for (size_t k = 0; k < 2; ++k) {
          const double got = DecodeValue(type, &recv[k * elem]);
          log.Expect(got == 0.0, label + " of signed zeros [" + std::to_string(k) + "] = " + std::to_string(got));
        }
        const double want2 = op == tesseraMax ? 0.0 : -1.0;
        const double want3 = op == tesseraMax ? 1.0 : 0.0;
        const double got2 = DecodeValue(type, &recv[2 * elem]), got3 = DecodeValue(type, &recv[3 * elem]);
        log.Expect(got2 == want2, label + " [2] = " + std::to_string(got2) + " want " + std::to_string(want2));
        log.Expect(got3 == want3, label + " [3] = " + std::to_string(got3) + " want " + std::to_string(want3));
      }
    }
    return log.str();
  }, FloatOptions());
  EXPECT_EQ("", Failures(results));
}

INSTANTIATE_TEST_SUITE_P(Ranks, SpecialValues, testing::Values(2, 3, 4),
                         [](const testing::TestParamInfo<int>& info) {
                           return "r" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace tessera_test
