// The CUDA IPC backend's side of the plugin contract (transport/plugin.h).
#include <algorithm>

#include "transport/cuda_ipc/cuda_ipc_transport.h"

namespace tessera {
namespace {

class OpenCudaIpc : public OpenTransport {
 public:
  explicit OpenCudaIpc(const Settings& settings) : segment_(ShmTransport::NewSegmentName()) {
    options_.slot_bytes = settings.cuda_ipc_slot_bytes;
    options_.slots = settings.cuda_ipc_slots;
  }

  std::string card() const override { return segment_; }

  // Device memory only: no host transport; the members are kept for FinishDevice.
  Status Finish(const FinishContext& ctx, std::unique_ptr<Transport>* out) override {
    (void)out;
    rank_ = ctx.rank;
    return MembersFromCards(ctx, "cuda_ipc", &members_);
  }

  bool DeviceReaches(int peer) const override {
    return peer != rank_ && std::any_of(members_.begin(), members_.end(),
                                        [&](const ShmTransport::Member& m) { return m.rank == peer; });
  }

  Status FinishDevice(DeviceEngine* engine, const Deadline& deadline, std::unique_ptr<Transport>* out) override {
    std::unique_ptr<CudaIpcTransport> cuda_ipc;
    TESSERA_RETURN_IF_ERROR(CudaIpcTransport::Create(options_, engine, rank_, members_, deadline, &cuda_ipc));
    *out = std::move(cuda_ipc);
    return Status::Ok();
  }

  std::string DescribeDevice() const override {
    return "cuda_ipc (" + std::to_string(options_.slots) + " slots of " + std::to_string(options_.slot_bytes) +
           " B per peer)";
  }

 private:
  CudaIpcTransport::Options options_;
  std::string segment_;
  int rank_ = 0;
  std::vector<ShmTransport::Member> members_;
};

}  // namespace

Status OpenCudaIpcTransport(const OpenContext& ctx, std::unique_ptr<OpenTransport>* out) {
  *out = std::make_unique<OpenCudaIpc>(*ctx.settings);
  return Status::Ok();
}

}  // namespace tessera
