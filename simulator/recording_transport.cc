#include "simulator/recording_transport.h"

#include <sys/mman.h>

#include <cerrno>
#include <limits>

namespace tessera {
namespace {

enum : uint8_t { kActive = 0, kReleased = 1, kDone = 2 };

// A link of the recording transport: one message at a time each way, as every link.
class RecordingLink : public Link {
 public:
  RecordingLink(int peer, ScheduleRecorder* recorder) : Link(peer), recorder_(recorder) {}
  const char* kind() const override { return "recording"; }
  void SetCall(const CallStamp&) override { recorder_->OnSetCall(); }

  void BeginSend(const void* data, size_t len) override {
    Begin(true, data, len, false, &send_);
  }
  void BeginRecv(void* dst, size_t len, const void*, const Reducer* reducer) override {
    Begin(false, dst, len, reducer != nullptr, &recv_);
  }
  Status ProgressSend(size_t available, bool* progressed, bool* done) override {
    recorder_->OnSendProgress(send_, available, recorder_->TakeQuery(), progressed, done);
    if (*done) send_ = -1;
    return Status::Ok();
  }
  Status ProgressRecv(bool* progressed, bool* done) override {
    recorder_->TakeQuery();
    recorder_->OnRecvProgress(recv_, progressed, done);
    if (*done) recv_ = -1;
    return Status::Ok();
  }
  // Called only when nothing moved in a whole pass: the engine is about to sleep.
  void AddWaits(WaitSet*, bool, bool) override { recorder_->OnStall(); }
  size_t sent_bytes() const override { return 0; }
  size_t received_bytes() const override { return 0; }
  // Asked by the engine for the receive a send is gated on: nothing of it is final yet.
  size_t ready_bytes() const override {
    recorder_->OnReadyQuery(recv_);
    return 0;
  }

 private:
  void Begin(bool is_send, const void* data, size_t len, bool reduces, int* active) {
    const Status s = recorder_->OnBegin(peer(), is_send, data, len, reduces, active);
    if (!s.ok()) *active = -1;  // the recorder keeps the failure for Finish
  }

  ScheduleRecorder* recorder_;
  int send_ = -1;  // the active messages' indices in the open exchange
  int recv_ = -1;
};

}  // namespace

ReservedArena::~ReservedArena() {
  if (base_ != nullptr) munmap(base_, size_);
}

Status ReservedArena::Reserve(size_t bytes) {
  if (base_ != nullptr) munmap(base_, size_);
  base_ = nullptr;
  void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return ErrnoError("reserving " + std::to_string(bytes) + " bytes of address space", errno);
  base_ = static_cast<char*>(p);
  size_ = bytes;
  used_ = 0;
  return Status::Ok();
}

Status ReservedArena::Take(size_t bytes, char** out) {
  const size_t start = (used_ + 63) & ~size_t{63};
  if (base_ == nullptr || bytes > size_ || start > size_ - bytes) {
    return InvalidUsage("the recorder's reserved address space (" + std::to_string(size_) + " bytes) cannot hold " +
                        std::to_string(bytes) + " more bytes");
  }
  *out = base_ + start;
  used_ = start + bytes;
  return Status::Ok();
}

Status ScheduleRecorder::Copy(void* dst, const void* src, size_t bytes) {
  (void)dst;
  (void)src;
  CloseExchange();
  Step step;
  step.kind = Step::kCopy;
  step.copy_bytes = bytes;
  schedule_.steps.push_back(step);
  return Status::Ok();
}

Status ScheduleRecorder::Allocate(size_t bytes, std::shared_ptr<void>* out) {
  char* p = nullptr;
  TESSERA_RETURN_IF_ERROR(arena_->Take(bytes, &p));
  *out = std::shared_ptr<void>(p, [](void*) {});  // the arena is rewound per recorded rank
  return Status::Ok();
}

void ScheduleRecorder::OnSetCall() {
  if (open_ && !progressed_) return;  // the engine is still setting up this exchange
  CloseExchange();
  open_ = true;
  progressed_ = false;
  exchange_first_ = static_cast<uint32_t>(schedule_.messages.size());
}

void ScheduleRecorder::CloseExchange() {
  if (!open_) return;
  open_ = false;
  const uint32_t count = static_cast<uint32_t>(schedule_.messages.size()) - exchange_first_;
  if (count > 0) {
    Step step;
    step.first = exchange_first_;
    step.count = count;
    schedule_.steps.push_back(step);
  }
  done_.clear();
  data_.clear();
  waited_for_.clear();
  begun_receives_.clear();
  stall_handled_ = false;
}

Status ScheduleRecorder::OnBegin(int peer, bool is_send, const void* data, size_t len, bool reduces, int* index) {
  if (!open_) OnSetCall();  // a link used outside an exchange: still one step
  if (len > std::numeric_limits<uint32_t>::max()) {
    failure_ = InvalidArgument("a message of " + std::to_string(len) + " bytes: the recorder holds at most 4 GiB");
    return failure_;
  }
  Message m;
  m.peer = peer;
  m.bytes = static_cast<uint32_t>(len);
  m.is_send = is_send ? 1 : 0;
  m.reduces = reduces ? 1 : 0;
  *index = static_cast<int>(schedule_.messages.size() - exchange_first_);
  schedule_.messages.push_back(m);
  if (keep_addresses_) schedule_.addresses.push_back(reinterpret_cast<uintptr_t>(data));
  done_.push_back(kActive);
  data_.push_back(reinterpret_cast<uintptr_t>(data));
  if (!is_send) begun_receives_.push_back(*index);
  return Status::Ok();
}

int ScheduleRecorder::TakeQuery() {
  const int q = queried_;
  queried_ = -1;
  return q;
}

void ScheduleRecorder::OnSendProgress(int send, size_t available, int queried, bool* progressed, bool* done) {
  progressed_ = true;
  *progressed = *done = false;
  if (send < 0) return;
  Message& m = schedule_.messages[exchange_first_ + send];
  if (available >= m.bytes) {
    *progressed = *done = true;
    stall_handled_ = false;
    return;
  }
  if (queried < 0) return;  // its gate has not begun: it waits behind another receive
  if (m.gate >= 0 && m.gate != queried && failure_.ok()) {
    failure_ = InternalError("send " + std::to_string(send) + " to rank " + std::to_string(m.peer) +
                             " waited on receives " + std::to_string(m.gate) + " and " + std::to_string(queried));
  }
  if (m.gate < 0) NoteGate(send, queried);
  m.gate = queried;
  waited_for_.push_back(queried);
}

// Where send's data starts in what its gate receive writes: kept when not at its start.
void ScheduleRecorder::NoteGate(int send, int receive) {
  const uint32_t gate_bytes = schedule_.messages[exchange_first_ + receive].bytes;
  const uintptr_t from = data_[receive], data = data_[send];
  if (data < from || data - from >= gate_bytes) {
    if (failure_.ok()) {
      failure_ = InternalError("send " + std::to_string(send) + " is gated on receive " + std::to_string(receive) +
                               " but reads none of the " + std::to_string(gate_bytes) + " bytes it writes");
    }
    return;
  }
  if (data > from) {
    schedule_.gate_offsets.push_back(GateOffset{exchange_first_ + static_cast<uint32_t>(send), static_cast<uint32_t>(data - from)});
  }
}

void ScheduleRecorder::OnRecvProgress(int receive, bool* progressed, bool* done) {
  progressed_ = true;
  *progressed = *done = false;
  if (receive < 0 || done_[receive] != kReleased) return;
  done_[receive] = kDone;
  *progressed = *done = true;
  stall_handled_ = false;
}

// Nothing can move: complete what the stuck sends wait for, else every begun receive.
void ScheduleRecorder::OnStall() {
  if (stall_handled_) return;
  stall_handled_ = true;
  bool any = false;  // a send asked for one not yet done (earlier names may be stale)
  for (int r : waited_for_) {
    if (done_[r] != kActive) continue;
    done_[r] = kReleased;
    any = true;
  }
  if (!any) {
    for (int r : begun_receives_) done_[r] = kReleased;
  }
  std::vector<int> still;
  for (int r : begun_receives_) {
    if (done_[r] == kActive) still.push_back(r);
  }
  begun_receives_.swap(still);
  waited_for_.clear();
}

Status ScheduleRecorder::Finish(RankSchedule* out) {
  CloseExchange();
  TESSERA_RETURN_IF_ERROR(failure_);
  schedule_.steps.shrink_to_fit();  // thousands of ranks' schedules are held at once
  schedule_.messages.shrink_to_fit();
  schedule_.gate_offsets.shrink_to_fit();
  *out = std::move(schedule_);
  schedule_ = RankSchedule();
  return Status::Ok();
}

Status RecordingTransport::Connect(int peer, const Deadline&, std::unique_ptr<Link>* out) {
  *out = std::make_unique<RecordingLink>(peer, recorder_);
  return Status::Ok();
}

}  // namespace tessera
