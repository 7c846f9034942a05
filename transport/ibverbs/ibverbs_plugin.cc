// The ibverbs backend's side of the plugin contract (transport/plugin.h).
#include <algorithm>

#include "transport/ibverbs/ibverbs_transport.h"

namespace tessera {
namespace {

class OpenIbverbs : public OpenTransport {
 public:
  explicit OpenIbverbs(std::unique_ptr<IbverbsTransport> ibverbs) : ibverbs_(std::move(ibverbs)) {}

  std::string card() const override { return ibverbs_->summary(); }

  Status Finish(const FinishContext& ctx, std::unique_ptr<Transport>* out) override {
    TESSERA_RETURN_IF_ERROR(ibverbs_->SetPeerSummaries(ctx.cards, ctx.exchange));
    rank_ = ctx.rank;
    local_ = ctx.local;
    in_table_ = ibverbs_.get();
    *out = std::move(ibverbs_);
    return Status::Ok();
  }

  // The ranks of other hosts, when every rank can do GPUDirect RDMA (the same answer
  // everywhere: every rank saw the same summaries).
  bool DeviceReaches(int peer) const override {
    if (in_table_ == nullptr || !in_table_->gpu_direct_everywhere() || peer == rank_) return false;
    return std::none_of(local_.begin(), local_.end(), [&](const LocalRank& r) { return r.rank == peer; });
  }

  Status FinishDevice(DeviceEngine* engine, const Deadline& deadline, std::unique_ptr<Transport>* out) override {
    (void)deadline;
    std::unique_ptr<IbverbsTransport> gpu_direct;
    TESSERA_RETURN_IF_ERROR(in_table_->CreateDeviceTransport(engine, &gpu_direct));
    *out = std::move(gpu_direct);
    return Status::Ok();
  }

  std::string DescribeDevice() const override {
    return "ibverbs with GPUDirect RDMA (" + in_table_->Describe() + ")";
  }

 private:
  std::unique_ptr<IbverbsTransport> ibverbs_;
  IbverbsTransport* in_table_ = nullptr;  // after Finish: owned by the link table
  int rank_ = 0;
  std::vector<LocalRank> local_;
};

}  // namespace

Status OpenIbverbsTransport(const OpenContext& ctx, std::unique_ptr<OpenTransport>* out) {
  const Settings& settings = *ctx.settings;
  IbverbsTransport::Options options;
  options.device_filter = settings.ib_hca;
  options.gid_index = static_cast<int>(settings.ib_gid_index);
  options.spread_index = ctx.rank;
  options.slots = settings.ib_slots;
  options.slot_bytes = settings.ib_slot_bytes;
  options.timeout = settings.ib_timeout;
  options.retry_count = settings.ib_retry_count;
  options.service_level = settings.ib_sl;
  options.traffic_class = settings.ib_tc;
  options.register_user_buffers = settings.ib_register_user_buffers != 0;
  options.cache_entries = settings.ib_cache_entries;
  options.cache_bytes = settings.ib_cache_bytes;
  std::unique_ptr<IbverbsTransport> ibverbs;
  Status s = IbverbsTransport::Create(options, ctx.rank, ctx.nranks, &ibverbs);
  if (!s.ok()) {
    return ctx.automatic && IbverbsTransport::IsNoRdmaDevice(s) ? Status::Ok() : s.Annotate("TESSERA_TRANSPORT lists ibverbs");
  }
  *out = std::make_unique<OpenIbverbs>(std::move(ibverbs));
  return Status::Ok();
}

}  // namespace tessera
