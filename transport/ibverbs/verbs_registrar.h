// VerbsRegistrar: the MemoryRegistrar of the registration cache on a real device. Host
// memory is registered with ibv_reg_mr; device (GPU) memory, when a CUDA driver was
// loaded, through GPUDirect RDMA (gpu_direct.h), clamped to its CUDA allocation so the
// page rounding of the cache never reaches into a neighbouring allocation.
#ifndef TESSERA_TRANSPORT_IBVERBS_VERBS_REGISTRAR_H_
#define TESSERA_TRANSPORT_IBVERBS_VERBS_REGISTRAR_H_

#include <infiniband/verbs.h>

#include "transport/ibverbs/gpu_direct.h"
#include "transport/ibverbs/registration_cache.h"

namespace tessera {
namespace ibverbs {

class VerbsRegistrar : public MemoryRegistrar {
 public:
  // `pd` and `cuda` (null: host memory only) must outlive the registrar. `access` is
  // the ibv_access_flags of every registration.
  VerbsRegistrar(ibv_pd* pd, int access, const CudaDriver* cuda) : pd_(pd), access_(access), cuda_(cuda) {}
  // Device memory is recognised from now on (the driver is loaded on first need).
  void set_cuda(const CudaDriver* cuda) { cuda_ = cuda; }

  Status Register(uintptr_t begin, size_t length, MemoryRegion* out) override;
  void Deregister(const MemoryRegion& region) override;

 private:
  ibv_pd* const pd_;
  const int access_;
  const CudaDriver* cuda_;
};

}  // namespace ibverbs
}  // namespace tessera

#endif  // TESSERA_TRANSPORT_IBVERBS_VERBS_REGISTRAR_H_
