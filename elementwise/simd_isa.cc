#include "elementwise/simd_isa.h"

namespace tessera {
namespace {

SimdIsa DetectIsa() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("f16c")) return SimdIsa::kBaseline;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    return SimdIsa::kAvx512;
  }
  return SimdIsa::kAvx2;
}

}  // namespace

const char* SimdIsaName(SimdIsa isa) {
  switch (isa) {
    case SimdIsa::kBaseline: return "baseline";
    case SimdIsa::kAvx2: return "avx2";
    case SimdIsa::kAvx512: return "avx512";
  }
  return "unknown";
}

SimdIsa SupportedSimdIsa() {
  static const SimdIsa isa = DetectIsa();
  return isa;
}

}  // namespace tessera
