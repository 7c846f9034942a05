#include "pytorch/backend.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "pytorch/any_source.h"
#include "pytorch/operation_queue.h"
#include "pytorch/sparse_allreduce.h"
#include "pytorch/store_barrier.h"
#include "pytorch/tensor_views.h"

namespace tessera_torch {
namespace {

using Issue = std::function<void(tesseraComm_t)>;
using Finish = std::function<void(tesseraComm_t)>;

// The key under which group rank 0 publishes the communicator's unique id; the store is
// already prefixed with the group's name by torch.
constexpr const char* kUniqueIdKey = "tessera/unique_id";

void* Data(const at::Tensor& t) { return t.data_ptr(); }
const void* CData(const at::Tensor& t) { return t.data_ptr(); }

std::string Who(const GroupSpec& spec) {
  std::string who = "rank " + std::to_string(spec.rank) + " of " + std::to_string(spec.size) + " of group '" +
                    spec.name + "'";
  if (!spec.global_ranks.empty()) {
    who += " (whose ranks 0.." + std::to_string(spec.size - 1) + " are global ranks";
    for (int64_t g : spec.global_ranks) who += " " + std::to_string(g);
    who += ")";
  }
  return who;
}

tesseraComm_t JoinCommunicator(const GroupSpec& spec) {
  PublishIdentity(*spec.store, spec.rank);
  tesseraUniqueId id;
  std::vector<uint8_t> bytes;
  if (spec.rank == 0) {
    tesseraResult_t r = tesseraGetUniqueId(&id);
    TORCH_CHECK(r == tesseraSuccess, "tessera: creating the unique id of group '", spec.name, "' failed on rank 0: ",
                tesseraGetLastError(nullptr));
    bytes.assign(id.internal, id.internal + sizeof(id.internal));
    spec.store->set(kUniqueIdKey, bytes);
  } else {
    bytes = spec.store->get(kUniqueIdKey);
    TORCH_CHECK(bytes.size() == sizeof(id.internal), "tessera: the unique id in the store has ", bytes.size(),
                " bytes, not ", sizeof(id.internal));
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  tesseraConfig_t config = TESSERA_CONFIG_INITIALIZER;
  const int64_t timeout_ms = std::max<int64_t>(1, std::min<int64_t>(spec.timeout.count(), INT_MAX));
  config.timeoutMs = static_cast<int>(timeout_ms);
  const std::string name = "torch group " + spec.name;
  config.commName = name.c_str();
  tesseraComm_t comm = nullptr;
  tesseraResult_t r = tesseraCommInitRankConfig(&comm, spec.size, id, spec.rank, &config);
  TORCH_CHECK(r == tesseraSuccess, "tessera: joining ", Who(spec), " failed: ", tesseraGetErrorString(r), ": ",
              tesseraGetLastError(nullptr));
  return comm;
}

// The halves of a reduction of `buffer` (contiguous) into itself on every rank.
struct ReductionSteps {
  Issue issue;
  Finish finish;
};

// One tessera reduction call (`call` gets the operator to pass): for PREMUL_SUM the
// operator is created with the factor right before the call and destroyed when the
// data has moved.
ReductionSteps DirectSteps(const Reduction& red, std::function<tesseraResult_t(tesseraComm_t, tesseraRedOp_t)> call) {
  if (!red.scale.defined()) return {[=](tesseraComm_t c) { Ok(call(c, red.op)); }, nullptr};
  auto op = std::make_shared<tesseraRedOp_t>(red.op);
  Issue issue = [=](tesseraComm_t c) {
    Ok(tesseraRedOpCreatePreMulSum(op.get(), Data(red.scale), red.type, tesseraScalarHostImmediate, c));
    Ok(call(c, *op));
  };
  return {issue, [=](tesseraComm_t c) { Ok(tesseraRedOpDestroy(*op, c)); }};
}

// An allreduce of `buffer` in place. Bitwise operators gather every rank's buffer and
// fold them in rank order, the same on every rank.
ReductionSteps AllReduceSteps(const at::Tensor& buffer, const Reduction& red, int size) {
  if (red.kind == Reduction::Kind::kBitwise) {
    at::Tensor gathered = ByteBuffer(buffer.nbytes() * size);
    Issue issue = [=](tesseraComm_t c) {
      Ok(tesseraAllGather(CData(buffer), Data(gathered), buffer.nbytes(), tesseraUint8, c, nullptr));
    };
    Finish finish = [=](tesseraComm_t) {
      at::Tensor out = buffer;
      FoldBitwise(gathered.view(buffer.scalar_type()), size, red.torch_op, out);
    };
    return {issue, finish};
  }
  at::Tensor wire = WireView(buffer, red);
  return DirectSteps(red, [=](tesseraComm_t c, tesseraRedOp_t op) {
    return tesseraAllReduce(CData(wire), Data(wire), wire.numel(), red.type, op, c, nullptr);
  });
}

Finish Then(Finish first, std::function<void()> second) {
  return [first, second](tesseraComm_t c) {
    if (first) first(c);
    second();
  };
}

// Runs `body` inside a tessera group, closing it if body throws.
void InGroup(const std::function<void()>& body) {
  Ok(tesseraGroupStart());
  try {
    body();
  } catch (...) {
    tesseraGroupEnd();
    throw;
  }
  Ok(tesseraGroupEnd());
}

// Pairwise exchange of byte ranges: to every other rank p, send_bytes[p] bytes from
// send + send_offset[p], and receive recv_bytes[p] bytes at recv + recv_offset[p]; the
// rank's own block is copied locally.
struct Exchange {
  std::vector<size_t> send_bytes, send_offset, recv_bytes, recv_offset;
};
void RunExchange(tesseraComm_t c, int rank, const Exchange& x, const uint8_t* send, uint8_t* recv) {
  const int size = static_cast<int>(x.send_bytes.size());
  InGroup([&] {
    for (int p = 0; p < size; ++p) {
      if (p == rank) {
        if (x.send_bytes[p] > 0) std::memcpy(recv + x.recv_offset[p], send + x.send_offset[p], x.send_bytes[p]);
        continue;
      }
      if (x.send_bytes[p] > 0) Ok(tesseraSend(send + x.send_offset[p], x.send_bytes[p], tesseraUint8, p, c, nullptr));
      if (x.recv_bytes[p] > 0) Ok(tesseraRecv(recv + x.recv_offset[p], x.recv_bytes[p], tesseraUint8, p, c, nullptr));
    }
  });
}

// Byte sizes of rows split by `splits` (empty: equal blocks), checked against the rows.
std::vector<size_t> SplitBytes(const at::Tensor& t, const std::vector<int64_t>& splits, int size,
                               const std::string& which) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const size_t row_bytes = rows == 0 ? 0 : t.nbytes() / rows;
  std::vector<size_t> bytes(size);
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "tessera alltoall_base: the ", which, " tensor's ", rows,
                " rows do not split evenly over ", size, " ranks");
    std::fill(bytes.begin(), bytes.end(), row_bytes * (rows / size));
    return bytes;
  }
  TORCH_CHECK(static_cast<int>(splits.size()) == size, "tessera alltoall_base: ", splits.size(), " ", which,
              " split sizes for ", size, " ranks");
  int64_t total = 0;
  for (int p = 0; p < size; ++p) {
    TORCH_CHECK(splits[p] >= 0, "tessera alltoall_base: negative ", which, " split size");
    total += splits[p];
    bytes[p] = row_bytes * splits[p];
  }
  TORCH_CHECK(total == rows, "tessera alltoall_base: the ", which, " split sizes add up to ", total, ", not the ",
              rows, " rows");
  return bytes;
}

// `root` as a rank of a group of `size`, checked; `operation` names the call.
int RootRank(int64_t root, int size, const char* operation) {
  TORCH_CHECK(root >= 0 && root < size, "tessera ", operation, ": root ", root, " is not a rank of this group of ",
              size);
  return static_cast<int>(root);
}

std::vector<size_t> Offsets(const std::vector<size_t>& bytes) {
  std::vector<size_t> offsets(bytes.size(), 0);
  for (size_t i = 1; i < bytes.size(); ++i) offsets[i] = offsets[i - 1] + bytes[i - 1];
  return offsets;
}

std::vector<size_t> NBytes(const std::vector<at::Tensor>& tensors) {
  std::vector<size_t> bytes;
  for (const at::Tensor& t : tensors) bytes.push_back(t.nbytes());
  return bytes;
}

}  // namespace

// --- The group and its queue ---------------------------------------------------------

TesseraBackend::TesseraBackend(const GroupSpec& spec) : TesseraBackend(spec, JoinCommunicator(spec)) {}

TesseraBackend::TesseraBackend(const GroupSpec& spec, tesseraComm_t comm)
    : TorchBackendBase(spec.rank, spec.size), spec_(spec) {
  queue_ = OperationQueue::Start(comm, Who(spec), spec.without_interpreter);
  if (AnySourceMailbox::Enabled()) mailbox_ = std::make_unique<AnySourceMailbox>(spec.store, spec.rank, spec.size);
  init();
}

TesseraBackend::~TesseraBackend() { queue_->Shutdown(); }

c10::intrusive_ptr<c10d::Work> TesseraBackend::Post(c10d::OpType type, const std::string& name,
                                                    std::vector<at::Tensor> outputs, Issue issue, Finish finish) {
  const bool p2p = type == c10d::OpType::SEND || type == c10d::OpType::RECV;
  bool hold = p2p;
  uint64_t sequence = 0;
  {
    std::lock_guard<std::mutex> lock(post_mu_);
    hold = hold || coalescing_;
    if (!p2p && type != kCoalescedOpType) ++sequence_;
    sequence = sequence_;
  }
  return Submit(c10::make_intrusive<TesseraWork>(rank_, type, std::move(outputs), queue_, sequence, spec_.timeout),
                name, std::move(issue), std::move(finish), hold);
}

c10::intrusive_ptr<c10d::Work> TesseraBackend::Submit(c10::intrusive_ptr<TesseraWork> work, const std::string& name,
                                                      Issue issue, Finish finish, bool hold) {
  queue_->Submit(Operation{name, std::move(issue), std::move(finish), work}, hold);
  return work;
}

void TesseraBackend::startCoalescing() {
  std::lock_guard<std::mutex> lock(post_mu_);
  coalescing_ = true;
}

// The held batch gets one more operation that does nothing: its Work completes with the
// batch (a batch completes as one), and is what torch waits for.
c10::intrusive_ptr<c10d::Work> TesseraBackend::EndCoalescing() {
  auto work = Post(kCoalescedOpType, "coalesced", {}, [](tesseraComm_t) {});
  {
    std::lock_guard<std::mutex> lock(post_mu_);
    coalescing_ = false;
  }
  queue_->Release();
  return work;
}

#if TESSERA_TORCH_2
c10::intrusive_ptr<c10d::Work> TesseraBackend::endCoalescing() { return EndCoalescing(); }
#else
void TesseraBackend::endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& works) {
  (void)works;  // each completes with its own operation
  EndCoalescing();
}
#endif

void TesseraBackend::setSequenceNumberForGroup() {
  std::lock_guard<std::mutex> lock(post_mu_);
  sequence_ = 0;
}

uint64_t TesseraBackend::getSequenceNumberForGroup() {
  std::lock_guard<std::mutex> lock(post_mu_);
  return sequence_;
}

// --- Reductions ----------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> TesseraBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                              const c10d::AllreduceOptions& opts) {
  if (tensors.size() == 1 && tensors[0].defined() && tensors[0].is_sparse()) return AllReduceSparse(tensors[0], opts);
  at::Tensor t = SingleTensor(tensors, "allreduce");
  Reduction red = ReductionFor(t.scalar_type(), opts.reduceOp, "allreduce");
  Buffer buffer = ContiguousBuffer(t);
  ReductionSteps steps = AllReduceSteps(buffer.tensor, red, size_);
  return Post(c10d::OpType::ALLREDUCE, "allreduce", {t}, steps.issue,
                      Then(steps.finish, [t, buffer] { CopyBack(t, buffer); }));
}

c10::intrusive_ptr<c10d::Work> TesseraBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "tessera allreduce_coalesced: no tensors");
  CheckDenseCpu(tensors, "allreduce_coalesced");
  const at::ScalarType dtype = tensors[0].scalar_type();
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.scalar_type() == dtype, "tessera allreduce_coalesced: tensors of different types (",
                at::toString(dtype), " and ", at::toString(t.scalar_type()), ")");
  }
  Reduction red = ReductionFor(dtype, opts.reduceOp, "allreduce_coalesced");
  at::Tensor flat = ByteBuffer(TotalBytes(tensors));
  PackBytes(tensors, flat.data_ptr<uint8_t>());
  at::Tensor typed = flat.view(dtype);
  ReductionSteps steps = AllReduceSteps(typed, red, size_);
  std::vector<at::Tensor> outputs = tensors;
  return Post(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors, steps.issue,
                      Then(steps.finish, [flat, outputs]() mutable { UnpackBytes(flat.data_ptr<uint8_t>(), outputs); }));
}

c10::intrusive_ptr<c10d::Work> TesseraBackend::reduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::ReduceOptions& opts) {
  at::Tensor t = SingleTensor(tensors, "reduce");
  Reduction red = ReductionFor(t.scalar_type(), opts.reduceOp, "reduce");
  Buffer buffer = ContiguousBuffer(t);
  const int root = RootRank(opts.rootRank, size_, "reduce");
  const bool at_root = root == rank_;
  if (red.kind == Reduction::Kind::kBitwise) {  // the allreduce, kept on the root only
    at::Tensor result = buffer.tensor.clone();
    ReductionSteps steps = AllReduceSteps(result, red, size_);
    return Post(c10d::OpType::REDUCE, "reduce", {t}, steps.issue, Then(steps.finish, [=] {
                          if (at_root) const_cast<at::Tensor&>(t).copy_(result);
                        }));
  }
  at::Tensor wire = WireView(buffer.tensor, red);
  ReductionSteps steps = DirectSteps(red, [=](tesseraComm_t c, tesseraRedOp_t op) {
    return tesseraReduce(CData(wire), Data(wire), wire.numel(), red.type, op, root, c, nullptr);
  });
  return Post(c10d::OpType::REDUCE, "reduce", {t}, steps.issue, Then(steps.finish, [=] {
                if (at_root) CopyBack(t, buffer);
              }));
}

// Reduces `input` (size blocks of output's elements, contiguous) and leaves this rank's
// block in `output`.
static ReductionSteps ReduceScatterSteps(const at::Tensor& input, const at::Tensor& output,
                                                   const Reduction& red, int rank, int size) {
  Buffer out = ContiguousBuffer(output);
  if (red.kind == Reduction::Kind::kBitwise) {  // the allreduce, this rank's block kept
    at::Tensor all = input.clone();
    ReductionSteps steps = AllReduceSteps(all, red, size);
    return {steps.issue, Then(steps.finish, [=] {
              const int64_t block = out.tensor.numel();
              out.tensor.view({block}).copy_(all.view({size, block})[rank]);
              CopyBack(output, out);
            })};
  }
  at::Tensor in_wire = WireView(input, red);
  at::Tensor out_wire = WireView(out.tensor, red);
  ReductionSteps steps = DirectSteps(red, [=](tesseraComm_t c, tesseraRedOp_t op) {
    return tesseraReduceScatter(CData(in_wire), Data(out_wire), out_wire.numel(), red.type, op, c, nullptr);
  });
  return {steps.issue, Then(steps.finish, [=] { CopyBack(output, out); })};
}

c10::intrusive_ptr<c10d::Work> TesseraBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                   std::vector<std::vector<at::Tensor>>& inputs,
                                                                   const c10d::ReduceScatterOptions& opts) {
  at::Tensor out = SingleTensor(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "tessera reduce_scatter: takes one input list per process, got ", inputs.size());
  TORCH_CHECK(static_cast<int>(inputs[0].size()) == size_, "tessera reduce_scatter: ", inputs[0].size(),
              " input tensors for a group of ", size_);
  CheckAllLike(inputs[0], out.scalar_type(), out.numel(), "reduce_scatter");
  Reduction red = ReductionFor(out.scalar_type(), opts.reduceOp, "reduce_scatter");
  at::Tensor flat = ByteBuffer(TotalBytes(inputs[0]));
  PackBytes(inputs[0], flat.data_ptr<uint8_t>());
  auto steps = ReduceScatterSteps(flat.view(out.scalar_type()), out, red, rank_, size_);
  return Post(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", {out}, steps.issue, steps.finish);
}

c10::intrusive_ptr<c10d::Work> TesseraBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                         const c10d::ReduceScatterOptions& opts) {
  CheckDenseCpu({output, input}, "_reduce_scatter_base");
  TORCH_CHECK(input.scalar_type() == output.scalar_type(), "tessera _reduce_scatter_base: input is ",
              at::toString(input.scalar_type()), ", output ", at::toString(output.scalar_type()));
  TORCH_CHECK(input.numel() == output.numel() * size_, "tessera _reduce_scatter_base: input has ", input.numel(),
              " elements, want ", size_, " x ", output.numel());
  Reduction red = ReductionFor(output.scalar_type(), opts.reduceOp, "_reduce_scatter_base");
  at::Tensor in = input.contiguous();
  auto steps = ReduceScatterSteps(in, output, red, rank_, size_);
  return Post(c10d::OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", {output}, steps.issue, steps.finish);
}

// --- Data movement (bytes) ----------------------------------------------------------

c10::intrusive_ptr<c10d::Work> TesseraBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                              const c10d::BroadcastOptions& opts) {
  at::Tensor t = SingleTensor(tensors, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "tessera broadcast: rootTensor must be 0 (one tensor per process)");
  Buffer buffer = ContiguousBuffer(t);
  const int root = RootRank(opts.rootRank, size_, "broadcast");
  at::Tensor b = buffer.tensor;
  Issue issue = [=](tesseraComm_t c) {
    Ok(tesseraBroadcast(CData(b), Data(b), b.nbytes(), tesseraUint8, root, c, nullptr));
  };
  return Post(c10d::OpType::BROADCAST, "broadcast", {t}, issue, [=](tesseraComm_t) { CopyBack(t, buffer); });
}

c10::intrusive_ptr<c10d::Work> TesseraBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                              std::vector<at::Tensor>& inputs,
                                                              const c10d::AllgatherOptions&) {
  at::Tensor in = SingleTensor(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1, "tessera allgather: takes one output list per process, got ", outputs.size());
  TORCH_CHECK(static_cast<int>(outputs[0].size()) == size_, "tessera allgather: ", outputs[0].size(),
              " output tensors for a group of ", size_);
  CheckAllLike(outputs[0], in.scalar_type(), in.numel(), "allgather");
  at::Tensor src = in.contiguous();
  at::Tensor flat = ByteBuffer(src.nbytes() * size_);
  std::vector<at::Tensor> outs = outputs[0];
  Issue issue = [=](tesseraComm_t c) {
    Ok(tesseraAllGather(CData(src), Data(flat), src.nbytes(), tesseraUint8, c, nullptr));
  };
  Finish finish = [=](tesseraComm_t) mutable { UnpackBytes(flat.data_ptr<uint8_t>(), outs); };
  return Post(c10d::OpType::ALLGATHER, "allgather", outs, issue, finish);
}

c10::intrusive_ptr<c10d::Work> TesseraBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                    const c10d::AllgatherOptions&) {
  CheckDenseCpu({output, input}, "_allgather_base");
  TORCH_CHECK(input.scalar_type() == output.scalar_type(), "tessera _allgather_base: input is ",
              at::toString(input.scalar_type()), ", output ", at::toString(output.scalar_type()));
  TORCH_CHECK(output.numel() == input.numel() * size_, "tessera _allgather_base: output has ", output.numel(),
              " elements, want ", size_, " x ", input.numel());
  at::Tensor src = input.contiguous();
  Buffer out = ContiguousBuffer(output);
  at::Tensor dst = out.tensor;
  Issue issue = [=](tesseraComm_t c) {
    Ok(tesseraAllGather(CData(src), Data(dst), src.nbytes(), tesseraUint8, c, nullptr));
  };
  at::Tensor o = output;
  return Post(c10d::OpType::_ALLGATHER_BASE, "_allgather_base", {o}, issue,
                      [=](tesseraComm_t) { CopyBack(o, out); });
}

c10::intrusive_ptr<c10d::Work> TesseraBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& output_lists, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions&) {
  CheckDenseCpu(inputs, "allgather_coalesced");
  TORCH_CHECK(static_cast<int>(output_lists.size()) == size_, "tessera allgather_coalesced: ", output_lists.size(),
              " output lists for a group of ", size_);
  std::vector<at::Tensor> outs;
  for (auto& list : output_lists) {
    TORCH_CHECK(list.size() == inputs.size(), "tessera allgather_coalesced: an output list of ", list.size(),
                " tensors for ", inputs.size(), " inputs");
    for (size_t i = 0; i < list.size(); ++i) {
      CheckAllLike({list[i]}, inputs[i].scalar_type(), inputs[i].numel(), "allgather_coalesced");
      outs.push_back(list[i]);
    }
  }
  const size_t block = TotalBytes(inputs);
  at::Tensor src = ByteBuffer(block);
  PackBytes(inputs, src.data_ptr<uint8_t>());
  at::Tensor flat = ByteBuffer(block * size_);
  Issue issue = [=](tesseraComm_t c) {
    Ok(tesseraAllGather(CData(src), Data(flat), block, tesseraUint8, c, nullptr));
  };
  Finish finish = [=](tesseraComm_t) mutable { UnpackBytes(flat.data_ptr<uint8_t>(), outs); };
  return Post(c10d::OpType::ALLGATHER_COALESCED, "allgather_coalesced", outs, issue, finish);
}

c10::intrusive_ptr<c10d::Work> TesseraBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::GatherOptions& opts) {
  at::Tensor in = SingleTensor(inputs, "gather");
  const int root = RootRank(opts.rootRank, size_, "gather");
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                "tessera gather: the root needs one list of ", size_, " output tensors");
    CheckAllLike(outputs[0], in.scalar_type(), in.numel(), "gather");
    outs = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || outputs[0].empty(), "tessera gather: only the root takes output tensors");
  }
  at::Tensor src = in.contiguous();
  at::Tensor flat = ByteBuffer(rank_ == root ? src.nbytes() * size_ : 0);
  Issue issue = [=](tesseraComm_t c) {
    Ok(tesseraGather(CData(src), rank_ == root ? Data(flat) : nullptr, src.nbytes(), tesseraUint8, root, c, nullptr));
  };
  Finish finish = [=](tesseraComm_t) mutable {
    if (!outs.empty()) UnpackBytes(flat.data_ptr<uint8_t>(), outs);
  };
  return Post(c10d::OpType::GATHER, "gather", outs, issue, finish);
}

c10::intrusive_ptr<c10d::Work> TesseraBackend::scatter(std::vector<at::Tensor>& outputs,
                                                            std::vector<std::vector<at::Tensor>>& inputs,
                                                            const c10d::ScatterOptions& opts) {
  at::Tensor out = SingleTensor(outputs, "scatter");
  const int root = RootRank(opts.rootRank, size_, "scatter");
  at::Tensor flat = ByteBuffer(0);
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                "tessera scatter: the root needs one list of ", size_, " input tensors");
    CheckAllLike(inputs[0], out.scalar_type(), out.numel(), "scatter");
    flat = ByteBuffer(TotalBytes(inputs[0]));
    PackBytes(inputs[0], flat.data_ptr<uint8_t>());
  } else {
    TORCH_CHECK(inputs.empty() || inputs[0].empty(), "tessera scatter: only the root takes input tensors");
  }
  Buffer buffer = ContiguousBuffer(out);
  at::Tensor dst = buffer.tensor;
  Issue issue = [=](tesseraComm_t c) {
    Ok(tesseraScatter(rank_ == root ? CData(flat) : nullptr, Data(dst), dst.nbytes(), tesseraUint8, root, c, nullptr));
  };
  return Post(c10d::OpType::SCATTER, "scatter", {out}, issue, [=](tesseraComm_t) { CopyBack(out, buffer); });
}

c10::intrusive_ptr<c10d::Work> TesseraBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                  std::vector<int64_t>& output_split_sizes,
                                                                  std::vector<int64_t>& input_split_sizes,
                                                                  const c10d::AllToAllOptions&) {
  CheckDenseCpu({output, input}, "alltoall_base");
  TORCH_CHECK(input.scalar_type() == output.scalar_type(), "tessera alltoall_base: input is ",
              at::toString(input.scalar_type()), ", output ", at::toString(output.scalar_type()));
  at::Tensor src = input.contiguous();
  Buffer out = ContiguousBuffer(output);
  at::Tensor dst = out.tensor;
  at::Tensor o = output;
  Finish finish = [=](tesseraComm_t) { CopyBack(o, out); };
  if (output_split_sizes.empty() && input_split_sizes.empty()) {
    TORCH_CHECK(src.numel() == dst.numel() && src.numel() % size_ == 0, "tessera alltoall_base: input has ",
                src.numel(), " and output ", dst.numel(), " elements; both must be the same multiple of ", size_);
    const size_t block = src.nbytes() / size_;
    Issue issue = [=](tesseraComm_t c) {
      Ok(tesseraAlltoAll(CData(src), Data(dst), block, tesseraUint8, c, nullptr));
    };
    return Post(c10d::OpType::ALLTOALL_BASE, "alltoall_base", {o}, issue, finish);
  }
  Exchange x;
  x.send_bytes = SplitBytes(src, input_split_sizes, size_, "input");
  x.recv_bytes = SplitBytes(dst, output_split_sizes, size_, "output");
  x.send_offset = Offsets(x.send_bytes);
  x.recv_offset = Offsets(x.recv_bytes);
  TORCH_CHECK(x.send_bytes[rank_] == x.recv_bytes[rank_], "tessera alltoall_base: this rank sends itself ",
              x.send_bytes[rank_], " bytes but expects ", x.recv_bytes[rank_]);
  const int rank = rank_;
  Issue issue = [=](tesseraComm_t c) {
    RunExchange(c, rank, x, static_cast<const uint8_t*>(CData(src)), static_cast<uint8_t*>(Data(dst)));
  };
  return Post(c10d::OpType::ALLTOALL_BASE, "alltoall_base", {o}, issue, finish);
}

c10::intrusive_ptr<c10d::Work> TesseraBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const c10d::AllToAllOptions&) {
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_ && static_cast<int>(inputs.size()) == size_,
              "tessera alltoall: ", inputs.size(), " inputs and ", outputs.size(), " outputs for a group of ", size_);
  CheckDenseCpu(outputs, "alltoall");
  CheckDenseCpu(inputs, "alltoall");
  Exchange x;
  x.send_bytes = NBytes(inputs);
  x.recv_bytes = NBytes(outputs);
  x.send_offset = Offsets(x.send_bytes);
  x.recv_offset = Offsets(x.recv_bytes);
  TORCH_CHECK(x.send_bytes[rank_] == x.recv_bytes[rank_], "tessera alltoall: this rank sends itself ",
              x.send_bytes[rank_], " bytes but expects ", x.recv_bytes[rank_]);
  at::Tensor src = ByteBuffer(TotalBytes(inputs));
  PackBytes(inputs, src.data_ptr<uint8_t>());
  at::Tensor dst = ByteBuffer(TotalBytes(outputs));
  // Always pairwise: whether the sizes are even is known per rank only, and every rank
  // must make the same calls.
  const int rank = rank_;
  Issue issue = [=](tesseraComm_t c) { RunExchange(c, rank, x, src.data_ptr<uint8_t>(), dst.data_ptr<uint8_t>()); };
  std::vector<at::Tensor> outs = outputs;
  Finish finish = [=](tesseraComm_t) mutable { UnpackBytes(dst.data_ptr<uint8_t>(), outs); };
  return Post(c10d::OpType::ALLTOALL, "alltoall", outs, issue, finish);
}

// --- Point to point and barrier ------------------------------------------------------

c10::intrusive_ptr<c10d::Work> TesseraBackend::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  (void)tag;  // tessera matches sends and receives between two ranks in issue order
  at::Tensor t = SingleTensor(tensors, "send");
  TORCH_CHECK(dst_rank >= 0 && dst_rank < size_ && dst_rank != rank_, "tessera send: peer ", dst_rank,
              " is not another rank of this group of ", size_);
  at::Tensor src = t.contiguous();
  Issue issue = [=](tesseraComm_t c) {
    Ok(tesseraSend(CData(src), src.nbytes(), tesseraUint8, dst_rank, c, nullptr));
  };
  if (mailbox_) mailbox_->Announce(dst_rank);
  return Post(c10d::OpType::SEND, "send to rank " + std::to_string(dst_rank), {t}, issue);
}

c10::intrusive_ptr<c10d::Work> TesseraBackend::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  (void)tag;
  at::Tensor t = SingleTensor(tensors, "recv");
  TORCH_CHECK(src_rank >= 0 && src_rank < size_ && src_rank != rank_, "tessera recv: peer ", src_rank,
              " is not another rank of this group of ", size_);
  Buffer buffer = ContiguousBuffer(t);
  at::Tensor dst = buffer.tensor;
  Issue issue = [=](tesseraComm_t c) {
    Ok(tesseraRecv(Data(dst), dst.nbytes(), tesseraUint8, src_rank, c, nullptr));
  };
  if (mailbox_) mailbox_->Claim(src_rank);
  return Post(c10d::OpType::RECV, "recv from rank " + std::to_string(src_rank), {t}, issue,
                      [=](tesseraComm_t) { CopyBack(t, buffer); });
}

c10::intrusive_ptr<c10d::Work> TesseraBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  (void)tag;
  TORCH_CHECK(mailbox_ != nullptr,
              "tessera: recv from any source (dist.recv without src) needs TESSERA_TORCH_ANY_SOURCE=1 on every rank "
              "of the group (each send then also posts its source to the store); or pass src");
  at::Tensor t = SingleTensor(tensors, "recv");
  Buffer buffer = ContiguousBuffer(t);
  at::Tensor dst = buffer.tensor;
  auto work = c10::make_intrusive<TesseraWork>(rank_, c10d::OpType::RECVANYSOURCE, std::vector<at::Tensor>{t},
                                               queue_, 0, spec_.timeout);
  AnySourceMailbox* mailbox = mailbox_.get();
  TesseraWork* receiving = work.get();  // the operation holds the work: it outlives the issue
  Issue issue = [=](tesseraComm_t c) {
    const int source = mailbox->NextSource();
    receiving->SetSourceRank(source);
    Ok(tesseraRecv(Data(dst), dst.nbytes(), tesseraUint8, source, c, nullptr));
  };
  return Submit(work, "recv from any source", issue, [=](tesseraComm_t) { CopyBack(t, buffer); }, /*hold=*/true);
}

c10::intrusive_ptr<c10d::Work> TesseraBackend::barrier(const c10d::BarrierOptions&) {
  at::Tensor token = at::zeros({1}, at::TensorOptions().dtype(at::kByte));
  Issue issue = [=](tesseraComm_t c) {
    Ok(tesseraAllReduce(CData(token), Data(token), 1, tesseraUint8, tesseraMax, c, nullptr));
  };
  return Post(c10d::OpType::BARRIER, "barrier", {}, issue);
}

void TesseraBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  uint64_t round = 0;
  {
    std::lock_guard<std::mutex> lock(post_mu_);
    round = monitored_barriers_++;
  }
  const auto timeout = opts.timeout == c10d::kUnsetTimeout ? spec_.timeout : opts.timeout;
  MonitoredBarrier(*spec_.store, rank_, size_, round, timeout, wait_all_ranks);
}

// --- Sparse tensors --------------------------------------------------------------------

// Runs alone (never held in a batch): its second and third allgathers are sized by the
// first's result.
c10::intrusive_ptr<c10d::Work> TesseraBackend::AllReduceSparse(at::Tensor& t, const c10d::AllreduceOptions& opts) {
  CheckSparseAllReduce(t, opts.reduceOp.op_ == c10d::ReduceOp::SUM, "allreduce");
  {
    std::lock_guard<std::mutex> lock(post_mu_);
    TORCH_CHECK(!coalescing_, "tessera allreduce: a sparse tensor cannot be coalesced with other operations");
  }
  auto result = std::make_shared<at::Tensor>();
  const int size = size_;
  at::Tensor input = t;
  Issue issue = [=](tesseraComm_t c) { *result = SparseAllReduce(c, size, input); };
  Finish finish = [=](tesseraComm_t) { const_cast<at::Tensor&>(input).copy_(*result); };
  return Post(c10d::OpType::ALLREDUCE, "allreduce (sparse)", {t}, issue, finish);
}

#if TESSERA_TORCH_2
// --- torch 2.x only --------------------------------------------------------------------

// Every input gathered with one tessera allgather of the inputs packed end to end; each
// output then takes its column of every rank's packed block.
c10::intrusive_ptr<c10d::Work> TesseraBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                               std::vector<at::Tensor>& inputs,
                                                                               const c10d::AllgatherOptions&) {
  const char* name = "allgather_into_tensor_coalesced";
  TORCH_CHECK(outputs.size() == inputs.size(), "tessera ", name, ": ", outputs.size(), " outputs for ",
              inputs.size(), " inputs");
  CheckDenseCpu(inputs, name);
  CheckDenseCpu(outputs, name);
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK(outputs[i].nbytes() == inputs[i].nbytes() * size_ &&
                    outputs[i].scalar_type() == inputs[i].scalar_type(),
                "tessera ", name, ": output ", i, " must be ", size_, " x input ", i, " of the same type");
  }
  const size_t block = TotalBytes(inputs);
  at::Tensor src = ByteBuffer(block);
  PackBytes(inputs, src.data_ptr<uint8_t>());
  at::Tensor flat = ByteBuffer(block * size_);
  const int size = size_;
  std::vector<at::Tensor> outs = outputs;
  Issue issue = [=](tesseraComm_t c) {
    Ok(tesseraAllGather(CData(src), Data(flat), block, tesseraUint8, c, nullptr));
  };
  Finish finish = [=](tesseraComm_t) {
    at::Tensor rows = flat.view({size, static_cast<int64_t>(block)});
    int64_t offset = 0;
    for (const at::Tensor& out : outs) {
      const int64_t bytes = static_cast<int64_t>(out.nbytes()) / size;
      at::Tensor column = rows.narrow(1, offset, bytes).contiguous();
      at::Tensor o = out;
      if (o.is_contiguous()) {
        std::memcpy(o.data_ptr(), column.data_ptr(), column.nbytes());
      } else {
        o.copy_(column.view(o.scalar_type()).view(o.sizes()));
      }
      offset += bytes;
    }
  };
  return Post(c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED, name, outputs, issue, finish);
}

// One tessera reduce-scatter: the inputs are packed so that rank r's block holds every
// input's r-th chunk, end to end; each output then takes its part of this rank's block.
c10::intrusive_ptr<c10d::Work> TesseraBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                               std::vector<at::Tensor>& inputs,
                                                                               const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter_tensor_coalesced";
  TORCH_CHECK(!inputs.empty() && outputs.size() == inputs.size(), "tessera ", name, ": ", outputs.size(),
              " outputs for ", inputs.size(), " inputs");
  CheckDenseCpu(inputs, name);
  CheckDenseCpu(outputs, name);
  const at::ScalarType dtype = inputs[0].scalar_type();
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK(inputs[i].scalar_type() == dtype && outputs[i].scalar_type() == dtype, "tessera ", name,
                ": every tensor must have the same type (", at::toString(dtype), ")");
    TORCH_CHECK(inputs[i].numel() == outputs[i].numel() * size_, "tessera ", name, ": input ", i, " must have ",
                size_, " x output ", i, "'s elements");
  }
  Reduction red = ReductionFor(dtype, opts.reduceOp, name);
  std::vector<at::Tensor> chunks;  // rank-major: every input's chunk for rank 0, then rank 1, ...
  for (int r = 0; r < size_; ++r) {
    for (const at::Tensor& in : inputs) chunks.push_back(in.reshape({-1}).chunk(size_)[r]);
  }
  at::Tensor packed = ByteBuffer(TotalBytes(inputs));
  PackBytes(chunks, packed.data_ptr<uint8_t>());
  at::Tensor mine = at::empty({static_cast<int64_t>(TotalBytes(outputs) / at::elementSize(dtype))},
                              at::TensorOptions().dtype(dtype));
  auto steps = ReduceScatterSteps(packed.view(dtype), mine, red, rank_, size_);
  std::vector<at::Tensor> outs = outputs;
  return Post(c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED, name, outputs, steps.issue,
              Then(steps.finish, [mine, outs]() mutable { UnpackBytes(static_cast<const uint8_t*>(mine.data_ptr()), outs); }));
}

c10::intrusive_ptr<c10d::Backend::Options> TesseraBackend::getBackendOptions() {
  auto options = c10::make_intrusive<Options>("tessera", spec_.timeout);
  options->group_name = spec_.name;
  for (int64_t g : spec_.global_ranks) options->global_ranks_in_group.push_back(static_cast<uint64_t>(g));
  return options;
}

c10::intrusive_ptr<c10d::Backend> TesseraBackend::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                        const std::vector<int>& ranks,
                                                        const c10::intrusive_ptr<Options>& opts) {
  auto me = std::find(ranks.begin(), ranks.end(), rank_);
  if (me == ranks.end()) return nullptr;
  GroupSpec spec = spec_;
  spec.store = store;
  spec.rank = static_cast<int>(me - ranks.begin());
  spec.size = static_cast<int>(ranks.size());
  if (opts) {
    spec.timeout = opts->timeout;
    spec.name = opts->group_name;
  }
  spec.global_ranks.clear();
  for (int r : ranks) spec.global_ranks.push_back(spec_.global_ranks.empty() ? r : spec_.global_ranks.at(r));
  return c10::make_intrusive<TesseraBackend>(spec);
}

c10::intrusive_ptr<c10d::Backend> TesseraBackend::shrink(const std::vector<int64_t>& ranks_to_exclude,
                                                         int shrink_flags,
                                                         const c10::intrusive_ptr<Options>& opts_override) {
  std::vector<int> excluded(ranks_to_exclude.begin(), ranks_to_exclude.end());
  GroupSpec spec = spec_;
  if (opts_override) spec.timeout = opts_override->timeout;
  tesseraConfig_t config = TESSERA_CONFIG_INITIALIZER;
  config.timeoutMs = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(spec.timeout.count(), INT_MAX)));
  const std::string name = "torch group " + spec.name + " (shrunk)";
  config.commName = name.c_str();
  tesseraComm_t comm = nullptr;
  const tesseraResult_t r = queue_->Shrink(excluded, &comm, &config, shrink_flags);
  TORCH_CHECK(r == tesseraSuccess, "tessera shrink of ", Who(spec_), " failed: ", tesseraGetErrorString(r), ": ",
              tesseraGetLastError(nullptr));
  int new_rank = 0, new_size = 0;
  tesseraCommUserRank(comm, &new_rank);
  tesseraCommCount(comm, &new_size);
  std::vector<int64_t> survivors;
  for (int r = 0; r < size_; ++r) {
    if (std::find(excluded.begin(), excluded.end(), r) != excluded.end()) continue;
    survivors.push_back(spec_.global_ranks.empty() ? r : spec_.global_ranks.at(r));
  }
  spec.rank = new_rank;
  spec.size = new_size;
  spec.global_ranks = survivors;
  return c10::make_intrusive<TesseraBackend>(spec, comm);
}

void TesseraBackend::abort() { queue_->Abort(); }

void TesseraBackend::shutdown() { queue_->Shutdown(); }

c10d::ErrorType TesseraBackend::getError() {
  switch (queue_->AsyncError()) {
    case tesseraSuccess: return c10d::ErrorType::SUCCESS;
    case tesseraTimeout: return c10d::ErrorType::TIMEOUT;
    case tesseraRemoteError: return c10d::ErrorType::REMOTE_ERROR;
    default: return c10d::ErrorType::COMM_ERROR;
  }
}
#endif  // TESSERA_TORCH_2

}  // namespace tessera_torch
