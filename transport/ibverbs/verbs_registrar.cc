#include "transport/ibverbs/verbs_registrar.h"

#include <algorithm>
#include <cerrno>

namespace tessera {
namespace ibverbs {

Status VerbsRegistrar::Register(uintptr_t begin, size_t length, MemoryRegion* out) {
  void* const ptr = reinterpret_cast<void*>(begin);
  ibv_mr* mr = nullptr;
  if (cuda_ != nullptr && cuda_->IsDeviceMemory(ptr)) {
    uintptr_t base = 0;
    size_t size = 0;
    TESSERA_RETURN_IF_ERROR(cuda_->AllocationRange(ptr, &base, &size));
    const uintptr_t b = std::max(begin, base);
    const uintptr_t e = std::min(begin + length, base + size);
    DeviceRegistrationPath path;
    TESSERA_RETURN_IF_ERROR(RegisterDeviceMemory(pd_, *cuda_, reinterpret_cast<void*>(b), e - b, access_, &mr, &path));
    begin = b;
    length = e - b;
  } else {
    mr = ibv_reg_mr(pd_, ptr, length, access_);
    if (mr == nullptr) {
      return ErrnoError("ibv_reg_mr of " + std::to_string(length) +
                            " bytes (is the locked-memory limit, ulimit -l, "
                            "large enough?)",
                        errno);
    }
  }
  out->begin = begin;
  out->length = length;
  out->lkey = mr->lkey;
  out->rkey = mr->rkey;
  out->handle = mr;
  return Status::Ok();
}

void VerbsRegistrar::Deregister(const MemoryRegion& region) {
  if (region.handle != nullptr) ibv_dereg_mr(static_cast<ibv_mr*>(region.handle));
}

}  // namespace ibverbs
}  // namespace tessera
