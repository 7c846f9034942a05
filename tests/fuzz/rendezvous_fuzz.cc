// The rendezvous' bytes from the network: a unique id (128 bytes, from the launcher or
// the user), the service's answer (a header and a message), the table of all ranks,
// a table request, and a rank's join request (the rest: a header, then its host, agreed
// lines and {name, bytes} card records). Each must decode or give an error; what
// decodes must have readable cards and agreed lines.
#include <cstdlib>

#include "bootstrap/rendezvous.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

void CheckTable(const std::string& bytes, int nranks) {
  using namespace tessera;
  RankTable table;
  const Status decoded = RankTable::Decode(bytes, nranks, &table);
  if (!decoded.ok()) {
    if (decoded.code() != Code::kInvalidArgument) std::abort();
    return;
  }
  if (table.size() != nranks) std::abort();
  std::string card;
  for (int r = 0; r < table.size(); ++r) {
    table.host(r);
    for (const char* name : {"tcp", "shm", "watch"}) {
      const Status found = table.FindCard(r, name, &card);
      if (!found.ok() && found.code() != Code::kInvalidArgument) std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  FuzzInput in(data, size);
  std::string id_bytes = in.TakeBytes(kUniqueIdBytes);
  id_bytes.resize(kUniqueIdBytes);
  UniqueIdData id;
  const Status id_status = DecodeUniqueId(id_bytes.data(), &id);
  if (!id_status.ok() && id_status.code() != Code::kInvalidArgument) std::abort();

  const int nranks = in.Take<int32_t>();
  const std::string reply_bytes = in.TakeBytes(in.Take<uint16_t>());
  if (JoinReplyBytes(reply_bytes) < kJoinReplyHeaderBytes) std::abort();
  JoinReply reply;
  DecodeJoinReply(reply_bytes, nranks, &reply);
  if (!reply.status.ok() && reply.status.code() == Code::kOk) std::abort();
  if (reply.status.ok() && reply.fanout < 1) std::abort();
  CheckTable(in.TakeBytes(in.Take<uint32_t>()), nranks);

  // The requests are checked against the secret of the id's bytes, decoded or not.
  uint64_t secret = 0;
  std::memcpy(&secret, id_bytes.data() + 16, sizeof(secret));
  int asking = -1;
  DecodeTableRequest(in.TakeBytes(kTableRequestBytes), secret, &asking);
  const std::string request_bytes = in.Rest();
  size_t total = 0;
  if (JoinRequestBytes(request_bytes, secret, &total).ok() && total < kJoinHeaderBytes) std::abort();
  JoinRequest request;
  const Status decoded = DecodeJoinRequest(request_bytes, secret, &request);
  if (!decoded.ok()) return 0;
  if (request.rank < 0 || request.rank >= request.nranks || request.nranks > kMaxRendezvousRanks) std::abort();
  std::string card;
  for (const char* name : {"tcp", "shm", "ucx", "ibverbs", "cuda_ipc", "watch", ""}) {
    const Status found = FindCard(request.info, name, &card);
    if (!found.ok() && found.code() != Code::kInvalidArgument) std::abort();
  }
  RankInfo empty;
  SettingMismatch(request.info, empty);
  SettingMismatch(empty, request.info);
  SettingMismatch(request.info, request.info);
  // The service's table of what decoded reads back.
  std::vector<RankInfo> infos(std::min(request.nranks, 4), request.info);
  CheckTable(RankTable::Encode(infos), static_cast<int>(infos.size()));
  return 0;
}
