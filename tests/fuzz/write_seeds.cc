// Writes the stored seed corpus, valid inputs made by the library's own encoders, so
// the seeds follow the wire formats when they change:
//   bazel run //tests/fuzz:write_seeds -- $PWD/tests/fuzz/corpus
// Each target's seeds go to <dir>/<target>/<name>.
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "base/call_stamp.h"
#include "base/settings.h"
#include "base/types.h"
#include "bootstrap/rendezvous.h"
#include "comm/shrink_offer.h"
#include "diagnosis/watch.h"
#include "transport/ibverbs/wire_format.h"
#include "transport/tcp/tcp_wire.h"
#include "transport/ucx/ucx_wire.h"

namespace tessera {
namespace {

std::string g_root;

void Write(const std::string& target, const std::string& name, const std::string& bytes) {
  const std::string dir = g_root + "/" + target;
  mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
}

template <typename T>
std::string Bytes(const T& value) {
  return std::string(reinterpret_cast<const char*>(&value), sizeof(value));
}

void CallStampSeeds() {
  CallStamp a;
  a.count = 1 << 20;
  a.seq = 73;
  a.kind = static_cast<uint8_t>(OpKind::kAllReduce);
  a.type = static_cast<uint8_t>(DataType::kFloat32);
  a.op = static_cast<uint8_t>(RedOp::kSum);
  CallStamp b = a;
  b.kind = static_cast<uint8_t>(OpKind::kBroadcast);
  b.root = 1;
  CallStamp none;
  Write("call_stamp_fuzz", "allreduce_vs_broadcast",
        Bytes(a) + Bytes(b) + Bytes(int32_t{2}) + Bytes(int32_t{3}) + "the ucx transport carries an 8-bit digest");
  Write("call_stamp_fuzz", "allreduce_vs_none", Bytes(a) + Bytes(none) + Bytes(int32_t{5}) + Bytes(int32_t{0}));
}

void SettingsSeeds() {
  std::string defaults;
  for (const SettingInfo& row : AllSettings()) defaults += row.default_value + "\n";
  Write("settings_fuzz", "defaults", defaults);
  Write("settings_fuzz", "timeout_only", "60000\n");
}

// A unique id as a job on loopback would have.
UniqueIdData SeedUniqueId() {
  UniqueIdData id;
  id.root.ip_be = 0x0100007f;
  id.root.port_be = 0x3930;
  id.secret = 0x1234567890abcdefull;
  id.root_pid = 4242;
  id.root_rank = 0;
  id.root_host = "node-a";
  return id;
}

void RendezvousSeeds() {
  const UniqueIdData id = SeedUniqueId();
  char id_bytes[kUniqueIdBytes];
  EncodeUniqueId(id, id_bytes);
  JoinRequest request;
  request.rank = 1;
  request.nranks = 4;
  request.forward.ip_be = 0x0100007f;
  request.forward.port_be = 0x3b30;
  request.info.pid = 4343;
  request.info.host = "node-a";
  AddAgreed("TESSERA_TRANSPORT=auto\nTESSERA_TCP_STREAMS=2\nTESSERA_HALF_WIRE=float32\n", &request.info);
  AddCard("tcp", std::string("\x7f\x00\x00\x01\x30\x39", 6), &request.info);
  AddCard("shm", "/tessera-4343-1", &request.info);
  AddCard("watch", std::string("\x7f\x00\x00\x01\x30\x3a", 6), &request.info);
  std::vector<RankInfo> infos(4, request.info);
  infos[2].host = infos[3].host = "node-b";
  const std::string table = RankTable::Encode(infos);
  const std::string id_part(id_bytes, kUniqueIdBytes);
  auto reply = [](const Status& status, int nranks, int fanout) {
    const std::string r = EncodeJoinReply(status, nranks, fanout, SocketAddress{0x0100007f, 0x3c30});
    return Bytes(static_cast<uint16_t>(r.size())) + r;
  };
  const std::string rest = EncodeTableRequest(id.secret, 1) + EncodeJoinRequest(id.secret, request);
  Write("rendezvous_fuzz", "ok_table",
        id_part + Bytes(int32_t{4}) + reply(Status::Ok(), 4, 8) + Bytes(static_cast<uint32_t>(table.size())) + table +
            rest);
  Write("rendezvous_fuzz", "refused",
        id_part + Bytes(int32_t{4}) + reply(InvalidUsage("two processes joined as rank 1"), 0, 0) +
            Bytes(uint32_t{0}) + rest);
  Write("rendezvous_fuzz", "forwarded",
        id_part + Bytes(int32_t{4}) + reply(RemoteError("rank 0, which forwards the table to this rank, is gone "
                                                        "or stopped [culprit: rank 0]"), 0, 0) +
            Bytes(static_cast<uint32_t>(table.size())) + table + rest);
}

void TcpWireSeeds() {
  const uint64_t secret = 0x1234567890abcdefull;
  CallStamp call;
  call.count = 4096;
  call.seq = 7;
  call.kind = static_cast<uint8_t>(OpKind::kAllReduce);
  call.type = static_cast<uint8_t>(DataType::kFloat32);
  const std::string prefix = Bytes(secret) + Bytes(uint8_t{4}) + Bytes(uint8_t{2});
  const MessageHeader header{16384, 3, call};
  const std::string receive = Bytes(call) + Bytes(uint64_t{16384}) + Bytes(uint64_t{3});
  Write("tcp_wire_fuzz", "stream",
        prefix + Bytes(ConnectHello{kTcpConnectMagic, secret, 1, 1}) + Bytes(header) + receive);
  Write("tcp_wire_fuzz", "notice",
        prefix + Bytes(ConnectHello{kTcpConnectMagic, secret, 2, kNoticeStream}) + Bytes(header) + receive +
            EncodeNotice(TimeoutError("allreduce (ring): step 1 of 2: receiving from rank 3 (tcp)")));
}

void WatchSeeds() {
  const uint64_t secret = 0x1234567890abcdefull;
  ActivitySnapshot s;
  s.state = ActivitySnapshot::State::kBroken;
  s.last_done_seq = 6;
  s.call.seq = 7;
  s.call.count = 1024;
  s.waiting_on = {2, 3};
  s.culprits = {3};
  s.verdict = "rank 3 (pid 4244 on node-b) stopped in allreduce #7 [culprit: rank 3]";
  // After the request: the communicator's size (2 bytes), a verdict's length (2 bytes)
  // and the verdict, then a reply.
  auto verdict = [](const StragglerVerdict& v) {
    const std::string bytes = EncodeStragglerVerdict(v);
    return Bytes(uint16_t{8}) + Bytes(static_cast<uint16_t>(bytes.size())) + bytes;
  };
  const std::string none = verdict(StragglerVerdict());
  Write("watch_fuzz", "status_broken",
        Bytes(secret) + EncodeWatchRequest(secret, WatchRequest::kStatus, 1) + none + EncodeSnapshot(1, 4242, s));
  Write("watch_fuzz", "offer", Bytes(secret) + EncodeWatchRequest(secret, WatchRequest::kOffer, 2) + none);
  Write("watch_fuzz", "dump_idle", Bytes(secret) + EncodeWatchRequest(secret, WatchRequest::kStatusAndDump, 0) + none +
                                       EncodeSnapshot(0, 4241, ActivitySnapshot()));
  StragglerVerdict named;
  named.rank = 5;
  named.window_calls = 1000;
  named.last_calls = 910;
  named.median_lag_us = 38000;
  named.waiters = {0, 1, 2, 3, 4, 6, 7};
  RankTimings timings;
  timings.last_seq = 9;
  timings.covered_from = 2;
  for (uint32_t seq = 2; seq <= 4; ++seq) timings.stalls.push_back(CallTiming{seq, 0, 4, 38000 * seq, 1000 * seq});
  Write("watch_fuzz", "timings", Bytes(secret) + EncodeWatchRequest(secret, WatchRequest::kTimings, 0) +
                                     verdict(named) + EncodeTimings(3, timings));
}

void LayoutSeeds() {
  Write("layout_fuzz", "two_hosts", std::string(1, '\0') + "# host ranks\nnode-a 0 1\nnode-b 2 3\n");
  Write("layout_fuzz", "irregular", std::string(1, '\0') + "node-a 0 2 4\nnode-b 1\nnode-c 3 5\n");
  Write("layout_fuzz", "spec", std::string(1, '\1') + "4x2:round-robin");
}

void TuningSeeds() {
  Write("tuning_fuzz", "all_keys",
        "# measured on the emulated cluster\nalpha_intra_us = 2.5\nbeta_intra_gbps = 4\n"
        "alpha_inter_us = 50\nbeta_inter_gbps = 1.2  # 10 GbE\ngamma_gbps = 8\n");
  Write("tuning_fuzz", "choices", "allreduce 2x2 8 recursive_doubling\nallreduce 4x2 32768 rabenseifner # x\n");
}

void IbverbsSeeds() {
  using namespace ibverbs;
  RankSummary summary;
  summary.subnet_prefix = 0xfe80000000000000ull;
  ConnectionInfo info;
  info.rank = 1;
  info.peer = 2;
  info.lid = 7;
  info.qp_num = 0x1234;
  info.psn = 0x42;
  info.ring_addr = 0x7f0000001000ull;
  info.ring_rkey = 99;
  info.slots = 16;
  info.slot_bytes = 65536;
  info.notice_addr = 0x7f0000100000ull;
  info.notice_rkey = 100;
  Write("ibverbs_fuzz", "infiniband",
        Bytes(EncodeDataImm(true, 3, 4096)) + SerializeRankSummary(summary) + SerializeConnectionInfo(info));
  summary.link_layer = LinkLayer::kEthernet;
  summary.subnet_prefix = 0;
  summary.gpu_direct = true;
  info.link_layer = LinkLayer::kEthernet;
  info.lid = 0;
  info.gid[10] = 0xff;
  info.gid[11] = 0xff;
  info.gid[12] = 10;
  info.gid[15] = 1;
  Write("ibverbs_fuzz", "roce",
        Bytes(EncodeNoticeImm(8, 120)) + SerializeRankSummary(summary) + SerializeConnectionInfo(info));
}

void UcxSeeds() {
  // A worker address's shape (UCX's own bytes are opaque: any will do for the frame).
  std::string address(180, '\0');
  for (size_t i = 0; i < address.size(); ++i) address[i] = static_cast<char>(i * 37 + 11);
  const std::string card = EncodeUcxCard(address);
  CallStamp call;
  call.count = 1 << 20;
  call.seq = 12;
  const uint64_t data_tag = UcxDataTag(3, 12, UcxCallDigest(call), 5, true);
  Write("ucx_fuzz", "card_and_chunk", Bytes(static_cast<uint16_t>(card.size())) + card + Bytes(data_tag));
  Write("ucx_fuzz", "notice", Bytes(uint16_t{0}) + Bytes(UcxNoticeTag(2)) +
                                  EncodeUcxNotice(TimeoutError("allreduce (ring): receiving from rank 3 (ucx)")));
}

void ShrinkOfferSeeds() {
  const UniqueIdData id = SeedUniqueId();
  const std::string prefix = Bytes(uint8_t{1}) + Bytes(uint8_t{7});  // shrink 1 of 8 ranks
  Write("shrink_offer_fuzz", "two_gone", prefix + EncodeShrinkOffer(1, id, {2, 5}));
  Write("shrink_offer_fuzz", "none_gone", prefix + EncodeShrinkOffer(1, id, {}));
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_seeds <corpus directory>\n");
    return 2;
  }
  tessera::g_root = argv[1];
  mkdir(argv[1], 0755);
  tessera::CallStampSeeds();
  tessera::SettingsSeeds();
  tessera::RendezvousSeeds();
  tessera::TcpWireSeeds();
  tessera::WatchSeeds();
  tessera::LayoutSeeds();
  tessera::TuningSeeds();
  tessera::IbverbsSeeds();
  tessera::UcxSeeds();
  tessera::ShrinkOfferSeeds();
  return 0;
}
