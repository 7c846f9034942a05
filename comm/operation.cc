#include "comm/operation.h"

namespace tessera {

OperationBytes BytesOf(const Operation& op, int rank, int nranks) {
  const size_t n = op.count * SizeOf(op.type), all = n * static_cast<size_t>(nranks);
  const bool root = rank == op.root;
  switch (op.kind) {
    case OpKind::kAllReduce: return {n, n};
    case OpKind::kBroadcast: return {root ? n : 0, n};
    case OpKind::kReduce: return {n, root ? n : 0};
    case OpKind::kAllGather: return {n, all};
    case OpKind::kReduceScatter: return {all, n};
    case OpKind::kAlltoAll: return {all, all};
    case OpKind::kGather: return {n, root ? all : 0};
    case OpKind::kScatter: return {root ? all : 0, n};
    case OpKind::kSend: return {n, 0};
    case OpKind::kRecv: return {0, n};
  }
  return {};
}

}  // namespace tessera
