// Reliable-connected (RC) queue pairs: creation and the INIT -> RTR -> RTS transitions
// that connect one to its peer from the peer's ConnectionInfo. The attributes of each
// transition are built by pure functions (tested without a device); the functions that
// call ibv_create_qp / ibv_modify_qp need one.
//
// Choices, all per the InfiniBand specification's RC rules:
// - path MTU: the smaller of the two ports' active MTUs;
// - addressing: LID on InfiniBand; a global route header (GRH) with the peer's GID on
//   Ethernet (RoCE, where it is mandatory) and between InfiniBand subnets;
// - retries: `timeout` is 4.096 us * 2^timeout per attempt (18: ~1.07 s) and
//   `retry_count` attempts (7) before the QP fails with IBV_WC_RETRY_EXC_ERR, which is
//   how a dead peer shows up; receiver-not-ready retries are unlimited (7), as this
//   protocol always keeps receives posted.
#ifndef TESSERA_TRANSPORT_IBVERBS_QUEUE_PAIR_H_
#define TESSERA_TRANSPORT_IBVERBS_QUEUE_PAIR_H_

#include <infiniband/verbs.h>

#include <cstdint>

#include "base/settings.h"
#include "base/status.h"
#include "transport/ibverbs/device_selection.h"
#include "transport/ibverbs/wire_format.h"

namespace tessera {
namespace ibverbs {

// The defaults of the tunables are the settings table's (TESSERA_IB_*).
struct QueuePairTuning {
  uint8_t timeout = SettingDefaults::ib_timeout;          // local ACK timeout exponent (0 = infinite; 1..31)
  uint8_t retry_count = SettingDefaults::ib_retry_count;  // transport retries, 0..7
  uint8_t rnr_retry = 7;                                  // receiver-not-ready retries, 7 = unlimited
  uint8_t service_level = SettingDefaults::ib_sl;         // InfiniBand SL / RoCE priority mapping
  uint8_t traffic_class = SettingDefaults::ib_tc;         // GRH traffic class (RoCE DSCP << 2)
  uint8_t hop_limit = 64;     // GRH hop limit
};

// This side of the connection: the port in use and its GID (gid_index -1: none).
struct LocalPort {
  PortInfo port;
  int gid_index = -1;
  Gid gid{};
};

// The peer's 24-bit initial packet sequence number is random; this is ours.
uint32_t RandomPsn();

void InitTransition(const LocalPort& local, ibv_qp_attr* attr, int* mask);
// InvalidUsage if the two ends cannot talk: different link layers, or a GRH needed
// (RoCE, or two InfiniBand subnets) but this port has no GID.
Status RtrTransition(const LocalPort& local, const ConnectionInfo& remote, const QueuePairTuning& tuning,
                     ibv_qp_attr* attr, int* mask);
void RtsTransition(uint32_t local_psn, const QueuePairTuning& tuning, ibv_qp_attr* attr, int* mask);

// Creates an RC queue pair on `cq` (send and receive completions) with room for
// `send_depth` and `recv_depth` work requests, no scatter/gather beyond one entry.
Status CreateRcQueuePair(ibv_pd* pd, ibv_cq* cq, uint32_t send_depth, uint32_t recv_depth, ibv_qp** out);

// ibv_modify_qp with the attributes above; SystemError naming the state on failure.
Status ModifyQueuePair(ibv_qp* qp, const char* state, ibv_qp_attr* attr, int mask);

}  // namespace ibverbs
}  // namespace tessera

#endif  // TESSERA_TRANSPORT_IBVERBS_QUEUE_PAIR_H_
