// The shared-memory backend's side of the plugin contract (transport/plugin.h).
#include "transport/shm/shm_transport.h"

namespace tessera {
namespace {

class OpenShm : public OpenTransport {
 public:
  explicit OpenShm(const Settings& settings)
      : options_{settings.shm_slot_bytes, settings.shm_slots, settings.shm_segment_bytes, settings.shm_board_bytes,
                 settings.shm_prefault_bytes, settings.shm_single_copy_bytes},
        segment_(ShmTransport::NewSegmentName()) {}

  std::string card() const override { return segment_; }

  Status Finish(const FinishContext& ctx, std::unique_ptr<Transport>* out) override {
    if (ctx.local.size() < 2) return Status::Ok();
    std::vector<ShmTransport::Member> members;
    TESSERA_RETURN_IF_ERROR(MembersFromCards(ctx, "shared-memory", &members));
    std::unique_ptr<ShmTransport> shm;
    TESSERA_RETURN_IF_ERROR(ShmTransport::Create(options_, ctx.rank, members, ctx.deadline, &shm));
    *out = std::move(shm);
    return Status::Ok();
  }

 private:
  ShmTransport::Options options_;
  std::string segment_;
};

}  // namespace

Status MembersFromCards(const FinishContext& ctx, const char* what, std::vector<ShmTransport::Member>* members) {
  members->clear();
  for (const LocalRank& r : ctx.local) {
    if (ctx.cards[r.rank].empty()) {
      return InvalidArgument("rank " + std::to_string(r.rank) + " on this host published no " + what + " segment");
    }
    members->push_back({r.rank, r.pid, ctx.cards[r.rank]});
  }
  return Status::Ok();
}

Status OpenShmTransport(const OpenContext& ctx, std::unique_ptr<OpenTransport>* out) {
  *out = std::make_unique<OpenShm>(*ctx.settings);
  return Status::Ok();
}

}  // namespace tessera
