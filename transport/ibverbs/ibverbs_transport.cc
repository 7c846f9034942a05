#include "transport/ibverbs/ibverbs_transport.h"

#include <time.h>

#include <algorithm>

#include "transport/ibverbs/ibverbs_link.h"

namespace tessera {

using ibverbs::ConnectionInfo;
using ibverbs::IbverbsLink;

namespace {

// The second message of a connection: both queue pairs are in RTS, or this side failed.
const std::string kReadyMarker = "TSIBRDY1";
const std::string kFailedMarker = "TSIBERR1";

// How long PublishFailure waits for its notices to leave.
constexpr int kNoticeSendMs = 500;
// Longest sleep of CheckNotices between looks.
constexpr int64_t kNoticeSliceUs = 20000;

Status OutOfRange(const char* what, int64_t value, const std::string& allowed) {
  return InvalidArgument(std::string("ibverbs ") + what + " " + std::to_string(value) + " out of range (" + allowed +
                         ")");
}

}  // namespace

struct IbverbsTransport::BufferRegistration {
  const ibverbs::MemoryRegion* region;
  const void* addr;
  size_t len;
};

Status IbverbsTransport::CheckOptions(const Options& o) {
  if (o.slots < 1 || o.slots > ibverbs::kMaxSlots || (o.slots & (o.slots - 1)) != 0) {
    return OutOfRange("slots", o.slots, "a power of two, 1 to " + std::to_string(ibverbs::kMaxSlots));
  }
  if (o.slot_bytes < ibverbs::kMinSlotBytes || o.slot_bytes > ibverbs::kMaxSlotBytes || o.slot_bytes % 64 != 0) {
    return OutOfRange("slot bytes", o.slot_bytes,
                      "a multiple of 64 from " + std::to_string(ibverbs::kMinSlotBytes) + " to " +
                          std::to_string(ibverbs::kMaxSlotBytes));
  }
  if (o.timeout < 1 || o.timeout > 31) return OutOfRange("timeout", o.timeout, "1 to 31");
  if (o.retry_count < 0 || o.retry_count > 7) return OutOfRange("retry count", o.retry_count, "0 to 7");
  if (o.service_level < 0 || o.service_level > 15) return OutOfRange("service level", o.service_level, "0 to 15");
  if (o.traffic_class < 0 || o.traffic_class > 255) return OutOfRange("traffic class", o.traffic_class, "0 to 255");
  if (o.gid_index < -1 || o.gid_index > 255) return OutOfRange("GID index", o.gid_index, "-1 to 255");
  if (o.cache_entries < 1) return OutOfRange("registration cache entries", o.cache_entries, "at least 1");
  if (o.cache_bytes < 1) return OutOfRange("registration cache bytes", o.cache_bytes, "at least 1");
  std::vector<ibverbs::DeviceFilterEntry> filter;
  return ibverbs::ParseDeviceFilter(o.device_filter, &filter);
}

bool IbverbsTransport::IsNoRdmaDevice(const Status& status) { return ibverbs::IsNoRdmaDevice(status); }

Status IbverbsTransport::Create(const Options& options, int my_rank, int nranks,
                                std::unique_ptr<IbverbsTransport>* out) {
  TESSERA_RETURN_IF_ERROR(CheckOptions(options));
  ibverbs::SelectionRequest request;
  TESSERA_RETURN_IF_ERROR(ibverbs::ParseDeviceFilter(options.device_filter, &request.filter));
  request.numa_node = options.numa_node >= 0 ? options.numa_node : ibverbs::CurrentNumaNode();
  request.spread_index = options.spread_index;
  request.forced_gid_index = options.gid_index;

  auto shared = std::make_shared<ibverbs::SharedState>();
  TESSERA_RETURN_IF_ERROR(ibverbs::VerbsDevice::Open(request, &shared->device));
  // Sends only read registered user memory: no access flags beyond local read, so
  // read-only buffers register too.
  shared->registrar = std::make_unique<ibverbs::VerbsRegistrar>(shared->device->pd(), 0, nullptr);
  ibverbs::RegistrationCache::Limits limits;
  limits.max_entries = static_cast<size_t>(options.cache_entries);
  limits.max_bytes = static_cast<size_t>(options.cache_bytes);
  shared->cache = std::make_unique<ibverbs::RegistrationCache>(shared->registrar.get(), limits);

  std::unique_ptr<IbverbsTransport> t(new IbverbsTransport());
  t->options_ = options;
  t->my_rank_ = my_rank;
  t->nranks_ = nranks;
  ibverbs::RankSummary summary;
  summary.link_layer = shared->device->link_layer();
  if (summary.link_layer == ibverbs::LinkLayer::kInfiniBand && shared->device->gid_index() >= 0) {
    for (int i = 0; i < 8; ++i) summary.subnet_prefix = summary.subnet_prefix << 8 | shared->device->gid()[i];
  }
  t->shared_ = std::move(shared);
  // GPUDirect RDMA: a CUDA driver that sees a GPU, and a way to register its memory.
  t->gpu_direct_status_ = t->LoadCudaDriver();
  if (t->gpu_direct_status_.ok()) t->gpu_direct_status_ = t->shared_->cuda->CanRegisterDeviceMemory();
  summary.gpu_direct = t->gpu_direct_status_.ok();
  t->summary_ = ibverbs::SerializeRankSummary(summary);
  *out = std::move(t);
  return Status::Ok();
}

IbverbsTransport::~IbverbsTransport() {
  // Explicit registrations end with the transport (links may still hold the cache).
  for (auto& r : registrations_) shared_->cache->Unpin(r->region);
}

Status IbverbsTransport::SetPeerSummaries(const std::vector<std::string>& summaries, PeerExchange* exchange) {
  if (exchange == nullptr) return InvalidArgument("ibverbs transport needs a way to exchange connection data");
  exchange_ = exchange;
  if (summaries.size() != static_cast<size_t>(nranks_)) {
    return InvalidArgument("ibverbs summaries for " + std::to_string(summaries.size()) + " ranks, expected " +
                           std::to_string(nranks_));
  }
  ibverbs::RankSummary mine;
  TESSERA_RETURN_IF_ERROR(ibverbs::ParseRankSummary(summary_, &mine));
  reachable_.assign(nranks_, false);
  gpu_direct_everywhere_ = mine.gpu_direct;
  for (int r = 0; r < nranks_; ++r) {
    if (r == my_rank_) continue;
    if (summaries[r].empty()) {
      gpu_direct_everywhere_ = false;
      continue;
    }
    ibverbs::RankSummary theirs;
    TESSERA_RETURN_IF_ERROR(ibverbs::ParseRankSummary(summaries[r], &theirs).Annotate("rank " + std::to_string(r)));
    reachable_[r] = ibverbs::SummariesCompatible(mine, theirs);
    gpu_direct_everywhere_ = gpu_direct_everywhere_ && reachable_[r] && theirs.gpu_direct;
  }
  return Status::Ok();
}

std::string IbverbsTransport::Describe() const { return shared_->device->Describe(); }

bool IbverbsTransport::CanConnect(int peer) const {
  return peer >= 0 && static_cast<size_t>(peer) < reachable_.size() && reachable_[peer];
}

Status IbverbsTransport::Connect(int peer, const Deadline& deadline, std::unique_ptr<Link>* out) {
  const std::string where = "ibverbs connection with rank " + std::to_string(peer);
  if (!CanConnect(peer)) return InvalidUsage(where + ": that rank cannot be reached by RDMA");
  ibverbs::LinkConfig config;
  config.slots = static_cast<uint32_t>(options_.slots);
  config.slot_bytes = static_cast<uint32_t>(options_.slot_bytes);
  config.tuning.timeout = static_cast<uint8_t>(options_.timeout);
  config.tuning.retry_count = static_cast<uint8_t>(options_.retry_count);
  config.tuning.service_level = static_cast<uint8_t>(options_.service_level);
  config.tuning.traffic_class = static_cast<uint8_t>(options_.traffic_class);
  config.register_user_buffers = options_.register_user_buffers;
  config.engine = engine_;

  // Both rounds always happen, with a failure marker in place of the data when this
  // side failed, so the peer fails at once instead of waiting for its deadline.
  std::unique_ptr<IbverbsLink> link;
  const Status created = IbverbsLink::Create(shared_, my_rank_, peer, config, &link);
  const std::string failed_info =
      kFailedMarker + std::string(ibverbs::kConnectionInfoBytes - kFailedMarker.size(), '\0');
  std::string theirs;
  TESSERA_RETURN_IF_ERROR(exchange_->Swap(peer,
                                    created.ok() ? ibverbs::SerializeConnectionInfo(link->LocalInfo()) : failed_info,
                                    deadline, &theirs)
                              .Annotate(where + ": exchanging connection data"));
  Status connected = created;
  if (connected.ok()) {
    ConnectionInfo remote;
    if (theirs == failed_info) {
      connected = RemoteError("rank " + std::to_string(peer) + " could not set up its queue pair");
    } else {
      connected = ibverbs::ParseConnectionInfo(theirs, &remote);
      if (connected.ok()) connected = link->ConnectTo(remote);
    }
  }
  TESSERA_RETURN_IF_ERROR(exchange_->Swap(peer, connected.ok() ? kReadyMarker : kFailedMarker, deadline, &theirs)
                              .Annotate(where + ": waiting for both queue pairs to be ready"));
  TESSERA_RETURN_IF_ERROR(connected.Annotate(where));
  if (theirs != kReadyMarker) {
    return RemoteError(where + ": rank " + std::to_string(peer) + " could not connect its queue pair");
  }
  *out = std::move(link);
  return Status::Ok();
}

Status IbverbsTransport::CreateDeviceTransport(DeviceEngine* engine, std::unique_ptr<IbverbsTransport>* out) {
  if (engine == nullptr) return InvalidArgument("an ibverbs device transport needs a device engine");
  if (!gpu_direct_everywhere_) {
    return InvalidUsage("device-resident calls across hosts need GPUDirect RDMA on every rank" +
                        (gpu_direct_status_.ok() ? std::string() : "; rank " + std::to_string(my_rank_) + ": " +
                                                                       gpu_direct_status_.message()));
  }
  TESSERA_RETURN_IF_ERROR(LoadCudaDriver());
  std::unique_ptr<IbverbsTransport> t(new IbverbsTransport());
  t->options_ = options_;
  t->my_rank_ = my_rank_;
  t->nranks_ = nranks_;
  t->exchange_ = exchange_;
  t->shared_ = shared_;
  t->summary_ = summary_;
  t->reachable_ = reachable_;
  t->cuda_tried_ = true;
  t->gpu_direct_status_ = gpu_direct_status_;
  t->gpu_direct_everywhere_ = true;
  t->engine_ = engine;
  *out = std::move(t);
  return Status::Ok();
}

Status IbverbsTransport::LoadCudaDriver() {
  if (!cuda_tried_) {
    cuda_tried_ = true;
    cuda_status_ = ibverbs::CudaDriver::Load("libcuda.so.1", &shared_->cuda);
    if (cuda_status_.ok()) shared_->registrar->set_cuda(shared_->cuda.get());
  }
  return cuda_status_;
}

Status IbverbsTransport::RegisterBuffer(const void* addr, size_t len, void** handle) {
  if (addr == nullptr || len == 0) return InvalidArgument("cannot register an empty buffer with ibverbs");
  // Without a driver, host memory still registers; a device pointer then fails in
  // ibv_reg_mr, and the driver's absence is part of the message.
  Status cuda = LoadCudaDriver();
  const ibverbs::MemoryRegion* region = nullptr;
  Status s = shared_->cache->Pin(addr, len, &region);
  if (!s.ok()) {
    return cuda.ok() ? s : Status(s.code(), s.message() + " (GPUDirect unavailable: " + cuda.message() + ")");
  }
  registrations_.push_back(std::unique_ptr<BufferRegistration>(new BufferRegistration{region, addr, len}));
  *handle = registrations_.back().get();
  return Status::Ok();
}

Status IbverbsTransport::DeregisterBuffer(void* handle) {
  auto it = std::find_if(registrations_.begin(), registrations_.end(),
                         [handle](const std::unique_ptr<BufferRegistration>& r) { return r.get() == handle; });
  if (it == registrations_.end()) return InvalidArgument("not an ibverbs buffer registration");
  shared_->cache->Unpin((*it)->region);
  // The buffer may be freed next: no cached registration of it may be used again.
  shared_->cache->Invalidate((*it)->addr, (*it)->len);
  registrations_.erase(it);
  return Status::Ok();
}

void IbverbsTransport::PublishFailure(const Status& failure) {
  for (IbverbsLink* link : shared_->links) link->PostNotice(failure);
  const Deadline deadline = Deadline::AfterMs(kNoticeSendMs);
  for (;;) {
    bool all_done = true;
    for (IbverbsLink* link : shared_->links) {
      if (link->Poll().ok() && !link->notice_done()) all_done = false;
    }
    if (all_done || deadline.Expired()) return;
    timespec pause{0, 200000};  // 0.2 ms: a notice takes microseconds on a live fabric
    nanosleep(&pause, nullptr);
  }
}

void IbverbsTransport::AddNoticeWaits(WaitSet* set) {
  for (IbverbsLink* link : shared_->links) link->AddChannelWait(set);
}

Status IbverbsTransport::CheckNotices(int wait_ms) {
  const Deadline deadline = Deadline::AfterMs(wait_ms);
  for (;;) {
    // Reaping completions files any notice; a link's own errors stay with the link.
    for (IbverbsLink* link : shared_->links) link->Poll();
    if (!shared_->notices.empty()) {
      Status notice = shared_->notices.front();
      shared_->notices.pop_front();
      return notice;
    }
    if (deadline.Expired() || shared_->links.empty()) return Status::Ok();
    WaitSet waits;
    AddNoticeWaits(&waits);
    const uint32_t token = waits.Announce();
    bool arrived = false;
    for (IbverbsLink* link : shared_->links) {
      link->Poll();
      arrived |= !shared_->notices.empty();
    }
    if (!arrived) {
      const int64_t left_us =
          std::chrono::duration_cast<std::chrono::microseconds>(deadline.when() - Clock::now()).count();
      waits.Sleep(token, std::max<int64_t>(1, std::min(kNoticeSliceUs, left_us)));
    }
    waits.Retire();
  }
}

}  // namespace tessera
