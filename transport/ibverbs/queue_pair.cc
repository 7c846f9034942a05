#include "transport/ibverbs/queue_pair.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

namespace tessera {
namespace ibverbs {
namespace {

uint64_t SubnetPrefix(const Gid& g) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | g[i];
  return v;
}

}  // namespace

uint32_t RandomPsn() {
  std::random_device rd;
  return rd() & 0xFFFFFF;
}

void InitTransition(const LocalPort& local, ibv_qp_attr* attr, int* mask) {
  std::memset(attr, 0, sizeof(*attr));
  attr->qp_state = IBV_QPS_INIT;
  attr->pkey_index = 0;
  attr->port_num = static_cast<uint8_t>(local.port.port);
  // Peers write into our ring; nothing reads or does atomics.
  attr->qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
}

Status RtrTransition(const LocalPort& local, const ConnectionInfo& remote, const QueuePairTuning& tuning,
                     ibv_qp_attr* attr, int* mask) {
  if (remote.link_layer != local.port.link_layer) {
    return InvalidUsage(std::string("RDMA link layers differ: this rank's port is ") +
                        LinkLayerName(local.port.link_layer) + ", rank " + std::to_string(remote.rank) + "'s is " +
                        LinkLayerName(remote.link_layer));
  }
  const bool ethernet = local.port.link_layer == LinkLayer::kEthernet;
  // Between InfiniBand subnets (both GIDs known, prefixes differ) packets need a GRH.
  const bool remote_has_gid = SubnetPrefix(remote.gid) != 0;
  const bool other_subnet =
      !ethernet && local.gid_index >= 0 && remote_has_gid && SubnetPrefix(local.gid) != SubnetPrefix(remote.gid);
  const bool global = ethernet || other_subnet;
  if (global && local.gid_index < 0) {
    return InvalidUsage("reaching rank " + std::to_string(remote.rank) +
                        " needs a global route header, but this rank's port has no GID");
  }
  std::memset(attr, 0, sizeof(*attr));
  attr->qp_state = IBV_QPS_RTR;
  attr->path_mtu = static_cast<ibv_mtu>(std::min(local.port.active_mtu, remote.mtu));
  attr->dest_qp_num = remote.qp_num;
  attr->rq_psn = remote.psn;
  attr->max_dest_rd_atomic = 1;
  attr->min_rnr_timer = 12;  // 0.64 ms before a receiver-not-ready retry
  attr->ah_attr.port_num = static_cast<uint8_t>(local.port.port);
  attr->ah_attr.sl = tuning.service_level;
  attr->ah_attr.src_path_bits = 0;
  attr->ah_attr.dlid = ethernet ? 0 : remote.lid;
  attr->ah_attr.is_global = global ? 1 : 0;
  if (global) {
    std::memcpy(attr->ah_attr.grh.dgid.raw, remote.gid.data(), remote.gid.size());
    attr->ah_attr.grh.sgid_index = static_cast<uint8_t>(local.gid_index);
    attr->ah_attr.grh.hop_limit = tuning.hop_limit;
    attr->ah_attr.grh.traffic_class = tuning.traffic_class;
    attr->ah_attr.grh.flow_label = 0;
  }
  *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
          IBV_QP_MIN_RNR_TIMER;
  return Status::Ok();
}

void RtsTransition(uint32_t local_psn, const QueuePairTuning& tuning, ibv_qp_attr* attr, int* mask) {
  std::memset(attr, 0, sizeof(*attr));
  attr->qp_state = IBV_QPS_RTS;
  attr->sq_psn = local_psn & 0xFFFFFF;
  attr->timeout = tuning.timeout;
  attr->retry_cnt = tuning.retry_count;
  attr->rnr_retry = tuning.rnr_retry;
  attr->max_rd_atomic = 1;
  *mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
}

Status CreateRcQueuePair(ibv_pd* pd, ibv_cq* cq, uint32_t send_depth, uint32_t recv_depth, ibv_qp** out) {
  ibv_qp_init_attr init;
  std::memset(&init, 0, sizeof(init));
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;  // every work request says whether it wants a completion
  init.cap.max_send_wr = send_depth;
  init.cap.max_recv_wr = recv_depth;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = 0;
  *out = ibv_create_qp(pd, &init);
  if (*out == nullptr) {
    return ErrnoError("ibv_create_qp (RC, " + std::to_string(send_depth) + " send and " + std::to_string(recv_depth) +
                          " receive work requests)",
                      errno);
  }
  return Status::Ok();
}

Status ModifyQueuePair(ibv_qp* qp, const char* state, ibv_qp_attr* attr, int mask) {
  if (int rc = ibv_modify_qp(qp, attr, mask)) {
    return ErrnoError(std::string("ibv_modify_qp to ") + state + " (QP " + std::to_string(qp->qp_num) + ")", rc);
  }
  return Status::Ok();
}

}  // namespace ibverbs
}  // namespace tessera
