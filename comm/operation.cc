#include "comm/operation.h"

namespace tessera {

const char* OpName(OpKind kind) {
  switch (kind) {
    case OpKind::kAllReduce: return "allreduce";
    case OpKind::kBroadcast: return "broadcast";
    case OpKind::kReduce: return "reduce";
    case OpKind::kAllGather: return "allgather";
    case OpKind::kReduceScatter: return "reduce-scatter";
    case OpKind::kAlltoAll: return "alltoall";
    case OpKind::kGather: return "gather";
    case OpKind::kScatter: return "scatter";
    case OpKind::kSend: return "send";
    case OpKind::kRecv: return "recv";
  }
  return "unknown";
}

bool IsReduction(OpKind k) { return k == OpKind::kAllReduce || k == OpKind::kReduce || k == OpKind::kReduceScatter; }
bool IsPointToPoint(OpKind k) { return k == OpKind::kSend || k == OpKind::kRecv; }

}  // namespace tessera
