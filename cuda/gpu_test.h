// For tests: skips the current test, with the text CI looks for, when no GPU is usable.
//   TEST(Gpu, Something) { TESSERA_SKIP_WITHOUT_GPU(); ... }
// prints "skipped: no GPU (<why>)" and marks the test skipped (gtest's SKIPPED).
#ifndef TESSERA_CUDA_GPU_TEST_H_
#define TESSERA_CUDA_GPU_TEST_H_

#include <string>

#include "cuda/availability.h"
#include "gtest/gtest.h"

#define TESSERA_SKIP_WITHOUT_GPU()                                              \
  do {                                                                          \
    const std::string tessera_no_gpu = ::tessera::cuda::NoGpuReason();          \
    if (!tessera_no_gpu.empty()) GTEST_SKIP() << "skipped: no GPU (" << tessera_no_gpu << ")"; \
  } while (0)

// The opposite, for tests of the no-driver path: skipped on a machine that has a GPU.
#define TESSERA_SKIP_WITH_GPU()                                                          \
  do {                                                                                   \
    if (::tessera::cuda::NoGpuReason().empty()) GTEST_SKIP() << "skipped: a GPU is present"; \
  } while (0)

#endif  // TESSERA_CUDA_GPU_TEST_H_
