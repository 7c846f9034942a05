// The rendezvous' bytes from the network: a unique id (128 bytes, from the launcher or
// the user), the service's answer (520 bytes) and a rank's join request (the rest: its
// RankInfo with agreed lines and {name, bytes} card records). Each must decode or give
// an error; a request that decodes must have readable cards and agreed lines.
#include <cstdlib>

#include "bootstrap/rendezvous.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  FuzzInput in(data, size);
  std::string id_bytes = in.TakeBytes(kUniqueIdBytes);
  id_bytes.resize(kUniqueIdBytes);
  UniqueIdData id;
  const Status id_status = DecodeUniqueId(id_bytes.data(), &id);
  if (!id_status.ok() && id_status.code() != Code::kInvalidArgument) std::abort();

  const int nranks = in.Take<int32_t>();
  const Status reply = DecodeJoinReply(in.TakeBytes(kJoinReplyBytes), nranks);
  if (!reply.ok() && reply.code() == Code::kOk) std::abort();

  // The request is checked against the secret of the id's bytes, decoded or not.
  uint64_t secret = 0;
  std::memcpy(&secret, id_bytes.data() + 16, sizeof(secret));
  JoinRequest request;
  const Status decoded = DecodeJoinRequest(in.Rest(), secret, &request);
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
  return 0;
}
