#include "comm/handle.h"

namespace tessera {
namespace {

Status CreatedOrNot(const tesseraComm& comm) {
  return comm.impl() != nullptr ? Status::Ok() : InvalidUsage("communicator creation failed");
}

}  // namespace
}  // namespace tessera

using tessera::Status;

std::string tesseraComm::Describe() const {
  std::string d = "rank " + std::to_string(rank) + " of " + std::to_string(nranks);
  if (!name.empty()) d += ", comm '" + name + "'";
  return d;
}

void tesseraComm::WaitIdle() {
  if (worker) worker->WaitIdle();
  if (device) device->WaitIdle();
}

Status tesseraComm::AsyncError() const {
  Status state = worker ? worker->state() : Status::Ok();
  if (state.ok() && impl()) state = impl()->sticky_error();
  if (state.ok() && device) state = device->async_error();
  return state;
}

Status tesseraComm::CreatePreMulSum(const void* scalar, tessera::DataType type, bool host_immediate, int* op) {
  if (worker) worker->WaitIdle();
  TESSERA_RETURN_IF_ERROR(tessera::CreatedOrNot(*this));
  if (device) return device->CreatePreMulSum(impl(), scalar, type, host_immediate, op);
  return impl()->CreatePreMulSum(scalar, type, host_immediate, op);
}

Status tesseraComm::DestroyRedOp(int op) {
  if (worker) worker->WaitIdle();
  if (!impl()) return Status::Ok();
  if (device) return device->DestroyRedOp(impl(), op);
  return impl()->DestroyRedOp(op);
}

// The bytes the host path moves: half types widened unless TESSERA_HALF_WIRE=half.
Status tesseraComm::AllReduceAlgorithm(size_t count, tessera::DataType type, const char** name) {
  if (worker) worker->WaitIdle();
  TESSERA_RETURN_IF_ERROR(tessera::CreatedOrNot(*this));
  const tessera::Executor& executor = impl()->executor();
  *name = executor.Choose(tessera::OpKind::kAllReduce, count * executor.WireElementSize(type)).algo->name;
  return Status::Ok();
}

void tesseraComm::Abort() {
  if (device) device->Abort();
  if (worker) worker->DropPending();
  if (impl()) impl()->RequestAbort();
}
