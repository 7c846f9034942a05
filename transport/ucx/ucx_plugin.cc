// The UCX backend's side of the plugin contract (transport/plugin.h).
#include <dirent.h>

#include <algorithm>

#include "transport/ucx/ucx_transport.h"
#include "transport/ucx/ucx_wire.h"

namespace tessera {
namespace {

// Waking from UCX's event fd costs far more than from the shm doorbell or a socket, and
// a UCX chunk's rendezvous takes longer than 50 us: spin longer over UCX, so that a
// wait for a chunk under way seldom sleeps.
constexpr int64_t kUcxSpinUs = 1000;

// Whether the kernel shows an RDMA device (what UCX's RDMA transports would use).
bool HostHasRdmaDevice() {
  DIR* dir = opendir("/sys/class/infiniband");
  if (dir == nullptr) return false;
  bool found = false;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') found = true;
  }
  closedir(dir);
  return found;
}

class OpenUcx : public OpenTransport {
 public:
  explicit OpenUcx(std::unique_ptr<UcxTransport> ucx) : ucx_(std::move(ucx)) {}

  std::string card() const override { return EncodeUcxCard(ucx_->worker_address()); }

  Status Finish(const FinishContext& ctx, std::unique_ptr<Transport>* out) override {
    std::vector<std::string> addresses(ctx.cards.size());
    for (size_t r = 0; r < ctx.cards.size(); ++r) {
      TESSERA_RETURN_IF_ERROR(DecodeUcxCard(ctx.cards[r], &addresses[r]).Annotate("rank " + std::to_string(r) + "'s UCX card"));
    }
    TESSERA_RETURN_IF_ERROR(ucx_->SetPeerAddresses(std::move(addresses)));
    ucx_->WatchLocalPeers(ctx.local);
    *out = std::move(ucx_);
    return Status::Ok();
  }

  int64_t spin_us_hint() const override { return kUcxSpinUs; }

 private:
  std::unique_ptr<UcxTransport> ucx_;
};

}  // namespace

Status OpenUcxTransport(const OpenContext& ctx, std::unique_ptr<OpenTransport>* out) {
  const bool ibverbs_opened = std::count(ctx.opened.begin(), ctx.opened.end(), "ibverbs") > 0;
  if (ctx.automatic && (ibverbs_opened || !HostHasRdmaDevice())) return Status::Ok();
  UcxTransport::Options options;
  options.chunk_bytes = ctx.settings->ucx_chunk_bytes;
  options.chunks_in_flight = ctx.settings->ucx_chunks_in_flight;
  options.eager = !HostHasRdmaDevice();
  std::unique_ptr<UcxTransport> ucx;
  Status s = UcxTransport::Create(options, ctx.rank, ctx.nranks, &ucx);
  if (!s.ok()) return ctx.automatic ? Status::Ok() : s.Annotate("TESSERA_TRANSPORT lists ucx");
  if (ucx->worker_address().size() > kMaxUcxWorkerAddress) {
    return SystemError("UCX worker address of " + std::to_string(ucx->worker_address().size()) + " bytes exceeds " +
                       std::to_string(kMaxUcxWorkerAddress) + ": name fewer devices with UCX_TLS or UCX_NET_DEVICES");
  }
  *out = std::make_unique<OpenUcx>(std::move(ucx));
  return Status::Ok();
}

}  // namespace tessera
