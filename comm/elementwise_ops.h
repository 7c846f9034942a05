// What a reduction does to element buffers around its algorithm, on the host path or
// the device path. The reduction front end (executor.cc) decides what happens (widening,
// PreMulSum's scaling, avg's division); an ElementwiseOps does it in its memory.
#ifndef TESSERA_COMM_ELEMENTWISE_OPS_H_
#define TESSERA_COMM_ELEMENTWISE_OPS_H_

#include <cstddef>

#include "base/status.h"
#include "base/types.h"
#include "device/device_engine.h"
#include "transport/exchange.h"

namespace tessera {

class ElementwiseOps {
 public:
  virtual ~ElementwiseOps() = default;
  // Whether float16 and bfloat16 travel widened to float32 (Widen before the algorithm,
  // Narrow after), rather than as they are, combined in float32 at each step.
  virtual bool widens_half() const = 0;
  // out = the `count` values of half type `type` at `in`, in float32.
  virtual Status Widen(DataType type, const void* in, float* out, size_t count) = 0;
  // out = the float32 values at `in` rounded once to half type `type`.
  virtual Status Narrow(DataType type, const float* in, void* out, size_t count) = 0;
  // PreMulSum: dst = scalar * src in `type` (half types computed in float32, rounded
  // once). `scalar` is one host value of `type`; dst may be src.
  virtual Status Scale(DataType type, const void* scalar, const void* src, void* dst, size_t count) = 0;
  // avg: data /= divisor (integers truncate, as in NCCL; half types in float32, rounded
  // once).
  virtual Status Divide(DataType type, void* data, size_t count, int divisor) = 0;
};

// Host memory, with the CPU kernels of elementwise/elementwise.h. Half types are widened
// unless TESSERA_HALF_WIRE=half (`widen_half` false).
class HostElementwiseOps : public ElementwiseOps {
 public:
  explicit HostElementwiseOps(bool widen_half) : widen_half_(widen_half) {}
  bool widens_half() const override { return widen_half_; }
  Status Widen(DataType type, const void* in, float* out, size_t count) override;
  Status Narrow(DataType type, const float* in, void* out, size_t count) override;
  Status Scale(DataType type, const void* scalar, const void* src, void* dst, size_t count) override;
  Status Divide(DataType type, void* data, size_t count, int divisor) override;

 private:
  bool widen_half_;
};

// Device memory, on the communicator's device stream: each operation is waited for
// before it returns, bounded by the call's deadline and abort flag (`exchange`, which
// must outlive this). Half types travel as they are, so Widen and Narrow are never used.
class DeviceElementwiseOps : public ElementwiseOps {
 public:
  DeviceElementwiseOps(DeviceStream* stream, const ExchangeOptions& exchange, int rank)
      : stream_(stream), exchange_(exchange), rank_(rank) {}
  bool widens_half() const override { return false; }
  Status Widen(DataType type, const void* in, float* out, size_t count) override;
  Status Narrow(DataType type, const float* in, void* out, size_t count) override;
  Status Scale(DataType type, const void* scalar, const void* src, void* dst, size_t count) override;
  Status Divide(DataType type, void* data, size_t count, int divisor) override;

 private:
  Status Drain(const char* what);

  DeviceStream* stream_;
  const ExchangeOptions& exchange_;
  int rank_;
};

}  // namespace tessera

#endif  // TESSERA_COMM_ELEMENTWISE_OPS_H_
