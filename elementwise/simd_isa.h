// The one CPU dispatch of the element-wise code (reduce_kernels, elementwise): which
// x86-64 instruction sets this CPU runs, detected once per process. Each of those files
// compiles its loops for every level through per-function target attributes (the build
// needs no -march) and says, in its Preferred...Isa, which level it uses and why.
#ifndef TESSERA_ELEMENTWISE_SIMD_ISA_H_
#define TESSERA_ELEMENTWISE_SIMD_ISA_H_

namespace tessera {

// Instruction-set levels, narrowest first; each includes the ones before it.
//  kBaseline: x86-64 (SSE2), any CPU.
//  kAvx2:     AVX2 and F16C.
//  kAvx512:   also AVX-512 F, BW, DQ and VL.
enum class SimdIsa : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

const char* SimdIsaName(SimdIsa isa);  // "baseline", "avx2", "avx512"

// The widest level this CPU runs (detected on the first call).
SimdIsa SupportedSimdIsa();

}  // namespace tessera

#endif  // TESSERA_ELEMENTWISE_SIMD_ISA_H_
