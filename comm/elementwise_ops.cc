#include "comm/elementwise_ops.h"

#include <string>

#include "elementwise/elementwise.h"

namespace tessera {

Status HostElementwiseOps::Widen(DataType type, const void* in, float* out, size_t count) {
  WidenHalf(type, in, out, count);
  return Status::Ok();
}

Status HostElementwiseOps::Narrow(DataType type, const float* in, void* out, size_t count) {
  NarrowHalf(type, in, out, count);
  return Status::Ok();
}

Status HostElementwiseOps::Scale(DataType type, const void* scalar, const void* src, void* dst, size_t count) {
  ScaleArray(type, scalar, src, dst, count);
  return Status::Ok();
}

Status HostElementwiseOps::Divide(DataType type, void* data, size_t count, int divisor) {
  DivideArray(type, data, count, divisor);
  return Status::Ok();
}

Status DeviceElementwiseOps::Widen(DataType, const void*, float*, size_t) {
  return InternalError("the device path does not widen half types");
}

Status DeviceElementwiseOps::Narrow(DataType, const float*, void*, size_t) {
  return InternalError("the device path does not widen half types");
}

Status DeviceElementwiseOps::Scale(DataType type, const void* scalar, const void* src, void* dst, size_t count) {
  TESSERA_RETURN_IF_ERROR(stream_->Scale(type, scalar, src, dst, count).Annotate("PreMulSum"));
  return Drain("PreMulSum scaling");
}

Status DeviceElementwiseOps::Divide(DataType type, void* data, size_t count, int divisor) {
  TESSERA_RETURN_IF_ERROR(stream_->Divide(type, data, count, divisor).Annotate("avg"));
  return Drain("avg's division");
}

Status DeviceElementwiseOps::Drain(const char* what) {
  return stream_->Drain(exchange_.deadline, exchange_.abort, "rank " + std::to_string(rank_) + ": " + what);
}

}  // namespace tessera
