// CudaIpcTransport (cuda_ipc_transport.h): the control segments, and a link's set-up:
// export our slots, exchange records with the peer, map theirs, confirm.
#include "transport/cuda_ipc/cuda_ipc_transport.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "transport/cuda_ipc/cuda_ipc_link.h"
#include "transport/exchange.h"

namespace tessera {
namespace {

// The set-up messages, one each way, 256 bytes:
//   0 magic "TDIP"  4 kind (1: slots record, 2: mapped, 3: failed)  8 slot_bytes  16 slots
//   24 text length (u32)  28 text: the engine's record, or why mapping failed
constexpr size_t kSetupBytes = 256;
constexpr size_t kSetupText = kSetupBytes - 28;
constexpr uint32_t kRecord = 1, kMapped = 2, kFailed = 3;
static_assert(DeviceEngine::kMaxExportRecordBytes <= kSetupText, "an engine record fits a set-up message");

struct SetupMessage {
  uint32_t kind = 0;
  uint64_t slot_bytes = 0, slots = 0;
  std::string text;
};

void Encode(const SetupMessage& m, char* out) {
  std::memset(out, 0, kSetupBytes);
  std::memcpy(out, "TDIP", 4);
  std::memcpy(out + 4, &m.kind, 4);
  std::memcpy(out + 8, &m.slot_bytes, 8);
  std::memcpy(out + 16, &m.slots, 8);
  const uint32_t len = static_cast<uint32_t>(std::min(m.text.size(), kSetupText));
  std::memcpy(out + 24, &len, 4);
  std::memcpy(out + 28, m.text.data(), len);
}

Status Decode(const char* in, SetupMessage* m) {
  if (std::memcmp(in, "TDIP", 4) != 0) return InternalError("cuda_ipc set-up: not a set-up message");
  uint32_t len = 0;
  std::memcpy(&m->kind, in + 4, 4);
  std::memcpy(&m->slot_bytes, in + 8, 8);
  std::memcpy(&m->slots, in + 16, 8);
  std::memcpy(&len, in + 24, 4);
  if (len > kSetupText) return InternalError("cuda_ipc set-up: text of " + std::to_string(len) + " bytes");
  m->text.assign(in + 28, len);
  return Status::Ok();
}

// Sends `mine` and receives the peer's over the control link.
Status Swap(Link* control, const SetupMessage& mine, const Deadline& deadline, SetupMessage* theirs) {
  char out[kSetupBytes], in[kSetupBytes];
  Encode(mine, out);
  Transfer t[2] = {Transfer::Send(control, out, kSetupBytes), Transfer::Recv(control, in, kSetupBytes)};
  ExchangeOptions options;
  options.deadline = deadline;
  options.timeout_ms = std::max<int64_t>(1, deadline.RemainingMs());
  TESSERA_RETURN_IF_ERROR(Exchange(t, 2, options));
  return Decode(in, theirs);
}

}  // namespace

std::string CudaIpcTransport::ControlSegmentName(const std::string& segment) { return segment + "-dev"; }

Status CudaIpcTransport::Create(const Options& options, DeviceEngine* engine, int my_rank,
                                const std::vector<ShmTransport::Member>& local, const Deadline& deadline,
                                std::unique_ptr<CudaIpcTransport>* out) {
  if (options.slot_bytes <= 0 || options.slots <= 0) return InvalidArgument("cuda_ipc: slot size and count must be positive");
  std::unique_ptr<CudaIpcTransport> t(new CudaIpcTransport());
  t->options_ = options;
  t->engine_ = engine;
  t->local_ = local;
  std::vector<ShmTransport::Member> control = local;
  for (ShmTransport::Member& r : control) {
    if (r.segment.empty()) return InternalError("cuda_ipc: rank " + std::to_string(r.rank) + " has no segment name");
    r.segment = ControlSegmentName(r.segment);
  }
  ShmTransport::Options shm;
  shm.slot_bytes = kSetupBytes;
  shm.slots = ControlRingSlots(options.slots);
  TESSERA_RETURN_IF_ERROR(ShmTransport::Create(shm, my_rank, control, deadline, &t->control_)
                              .Annotate("cuda_ipc control segments"));
  t->busy_fd_ = eventfd(1, EFD_CLOEXEC);
  if (t->busy_fd_ < 0) return ErrnoError("cuda_ipc: eventfd", errno);
  *out = std::move(t);
  return Status::Ok();
}

CudaIpcTransport::~CudaIpcTransport() {
  if (busy_fd_ >= 0) close(busy_fd_);
}

bool CudaIpcTransport::CanConnect(int peer) const { return control_ && control_->CanConnect(peer); }

void CudaIpcTransport::PublishFailure(const Status& failure) {
  if (control_) control_->PublishFailure(failure);
}

Status CudaIpcTransport::Connect(int peer, const Deadline& deadline, std::unique_ptr<Link>* out) {
  const std::string what = "cuda_ipc connection set-up with rank " + std::to_string(peer);
  int peer_pid = 0;
  for (const ShmTransport::Member& r : local_) {
    if (r.rank == peer) peer_pid = r.pid;
  }
  CudaIpcLink::Parts parts;
  parts.slot_bytes = static_cast<size_t>(options_.slot_bytes);
  parts.slots = static_cast<size_t>(options_.slots);
  parts.busy_fd = busy_fd_;
  TESSERA_RETURN_IF_ERROR(control_->Connect(peer, deadline, &parts.control).Annotate(what));
  TESSERA_RETURN_IF_ERROR(engine_->CreateStream(&parts.send_stream).Annotate(what));
  TESSERA_RETURN_IF_ERROR(engine_->CreateStream(&parts.recv_stream).Annotate(what));
  TESSERA_RETURN_IF_ERROR(engine_->Export(parts.slot_bytes * parts.slots, &parts.inbound).Annotate(what));

  // 1. Records both ways; map the peer's slots.
  SetupMessage mine, theirs;
  mine.kind = kRecord;
  mine.slot_bytes = parts.slot_bytes;
  mine.slots = parts.slots;
  mine.text = parts.inbound->record();
  TESSERA_RETURN_IF_ERROR(Swap(parts.control.get(), mine, deadline, &theirs).Annotate(what));
  Status mapped;
  if (theirs.kind != kRecord) {
    mapped = InternalError("expected the peer's slots record, got message kind " + std::to_string(theirs.kind));
  } else if (theirs.slot_bytes != mine.slot_bytes || theirs.slots != mine.slots) {
    mapped = InvalidUsage("rank " + std::to_string(peer) + " has " + std::to_string(theirs.slots) + " slots of " +
                          std::to_string(theirs.slot_bytes) + " bytes, this rank " + std::to_string(mine.slots) +
                          " of " + std::to_string(mine.slot_bytes) + " (TESSERA_CUDA_IPC_SLOT_BYTES must agree)");
  } else {
    mapped = engine_->Map(theirs.text, peer_pid, &parts.outbound);
    if (mapped.ok() && parts.outbound->bytes() < parts.slot_bytes * parts.slots) {
      mapped = InternalError("the peer's slots map to " + std::to_string(parts.outbound->bytes()) + " bytes");
    }
  }

  // 2. Tell each other how mapping went; once the peer has mapped ours, drop their name.
  SetupMessage ack;
  ack.kind = mapped.ok() ? kMapped : kFailed;
  ack.text = mapped.ok() ? "" : mapped.message();
  TESSERA_RETURN_IF_ERROR(Swap(parts.control.get(), ack, deadline, &theirs).Annotate(what));
  TESSERA_RETURN_IF_ERROR(mapped.Annotate(what + ": mapping the peer's slots (" + engine_->name() + " engine)"));
  if (theirs.kind != kMapped) {
    return RemoteError(what + ": rank " + std::to_string(peer) + " could not map this rank's slots: " + theirs.text);
  }
  parts.inbound->PeerMapped();
  *out = std::make_unique<CudaIpcLink>(peer, std::move(parts));
  return Status::Ok();
}

}  // namespace tessera
