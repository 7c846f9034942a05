// What a rank publishes at the rendezvous (agreed settings and transport cards), the
// table that comes back, the wire between them, and the tree the table travels down.
#include "bootstrap/rendezvous.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <set>
#include <thread>

namespace tessera {
namespace {

TEST(RankInfo, CardsRoundTripByName) {
  RankInfo info;
  ASSERT_TRUE(AddCard("shm", "/tessera-1-2", &info).ok());
  ASSERT_TRUE(AddCard("tcp", std::string("\x0a\0\0\x01\x9c\x40", 6), &info).ok());
  ASSERT_TRUE(AddCard("ucx", std::string(1000, 'u'), &info).ok());
  std::string bytes;
  ASSERT_TRUE(FindCard(info, "tcp", &bytes).ok());
  EXPECT_EQ(bytes, std::string("\x0a\0\0\x01\x9c\x40", 6));
  ASSERT_TRUE(FindCard(info, "ucx", &bytes).ok());
  EXPECT_EQ(bytes, std::string(1000, 'u'));
  ASSERT_TRUE(FindCard(info, "ibverbs", &bytes).ok());
  EXPECT_EQ(bytes, "");
}

TEST(RankInfo, OversizedCardsAndSettingsAreRefused) {
  RankInfo info;
  EXPECT_EQ(AddCard("ucx", std::string(kMaxCardsBytes, 'u'), &info).code(), Code::kInvalidArgument);
  EXPECT_EQ(AddAgreed(std::string(kMaxAgreedBytes + 1, 'x'), &info).code(), Code::kInvalidArgument);
}

// Cards come from the network: records that overrun are an error, not a crash.
TEST(RankInfo, MalformedCardsAreAnError) {
  RankInfo info;
  ASSERT_TRUE(AddCard("shm", "segment", &info).ok());
  info.cards[1 + 3] = static_cast<char>(0xff);  // the card's length, now past the end
  std::string bytes;
  EXPECT_EQ(FindCard(info, "tcp", &bytes).code(), Code::kInvalidArgument);
  info.cards[0] = static_cast<char>(200);  // a name longer than the records
  EXPECT_EQ(FindCard(info, "tcp", &bytes).code(), Code::kInvalidArgument);
}

std::vector<RankInfo> FourRanksOnTwoHosts() {
  std::vector<RankInfo> infos(4);
  for (int r = 0; r < 4; ++r) {
    infos[r].pid = 100 + r;
    infos[r].host = r < 2 ? "node-a" : "node-b";
    infos[r].agreed = "TESSERA_TRANSPORT=auto\n";
    EXPECT_TRUE(AddCard("tcp", std::string(6, static_cast<char>('0' + r)), &infos[r]).ok());
    if (r != 3) {
      EXPECT_TRUE(AddCard("shm", "/tessera-" + std::to_string(r), &infos[r]).ok());
    }
  }
  return infos;
}

// The table keeps every rank's pid, host and cards, lists each host once and leaves
// the agreed lines out.
TEST(RankTable, RoundTripsCompactly) {
  const std::vector<RankInfo> infos = FourRanksOnTwoHosts();
  const std::string bytes = RankTable::Encode(infos);
  EXPECT_EQ(bytes.find("TESSERA_TRANSPORT"), std::string::npos);
  EXPECT_EQ(bytes.find("node-a"), bytes.rfind("node-a"));
  RankTable t;
  ASSERT_TRUE(RankTable::Decode(bytes, 4, &t).ok());
  ASSERT_EQ(t.size(), 4);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(t.pid(r), 100 + r);
    EXPECT_EQ(t.host(r), r < 2 ? "node-a" : "node-b");
    std::string card;
    ASSERT_TRUE(t.FindCard(r, "tcp", &card).ok());
    EXPECT_EQ(card, std::string(6, static_cast<char>('0' + r)));
    ASSERT_TRUE(t.FindCard(r, "shm", &card).ok());
    EXPECT_EQ(card, r == 3 ? "" : "/tessera-" + std::to_string(r));
  }
  EXPECT_EQ(*t.bytes(), bytes);
}

// Any cut, any byte changed: a table decodes or is refused, and never for another size.
TEST(RankTable, DamagedTablesAreRefused) {
  const std::string bytes = RankTable::Encode(FourRanksOnTwoHosts());
  RankTable t;
  EXPECT_EQ(RankTable::Decode(bytes, 5, &t).code(), Code::kInvalidArgument);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    EXPECT_EQ(RankTable::Decode(bytes.substr(0, cut), 4, &t).code(), Code::kInvalidArgument) << cut;
  }
  EXPECT_EQ(RankTable::Decode(bytes + "x", 4, &t).code(), Code::kInvalidArgument);
  for (size_t at = 0; at < bytes.size(); ++at) {
    std::string changed = bytes;
    changed[at] = static_cast<char>(changed[at] ^ 0xa5);
    const Status s = RankTable::Decode(changed, 4, &t);
    EXPECT_TRUE(s.ok() || s.code() == Code::kInvalidArgument) << at;
    if (s.ok()) {
      EXPECT_EQ(t.size(), 4);
      std::string card;
      for (int r = 0; r < 4; ++r) t.FindCard(r, "tcp", &card);
    }
  }
}

TEST(RendezvousWire, JoinRequestRoundTrips) {
  JoinRequest request;
  request.rank = 3;
  request.nranks = 4;
  request.forward.ip_be = 0x0100007f;
  request.forward.port_be = 0x3930;
  request.info = FourRanksOnTwoHosts()[3];
  const std::string bytes = EncodeJoinRequest(42, request);
  size_t total = 0;
  ASSERT_TRUE(JoinRequestBytes(bytes.substr(0, kJoinHeaderBytes), 42, &total).ok());
  EXPECT_EQ(total, bytes.size());
  JoinRequest back;
  ASSERT_TRUE(DecodeJoinRequest(bytes, 42, &back).ok());
  EXPECT_EQ(back.rank, 3);
  EXPECT_EQ(back.nranks, 4);
  EXPECT_EQ(back.forward.port_be, 0x3930);
  EXPECT_EQ(back.info.host, "node-b");
  EXPECT_EQ(back.info.agreed, "TESSERA_TRANSPORT=auto\n");
  EXPECT_EQ(back.info.cards, request.info.cards);
  // A foreign secret, a cut request and one announcing too much are refused alone.
  EXPECT_EQ(DecodeJoinRequest(bytes, 43, &back).code(), Code::kInvalidArgument);
  EXPECT_EQ(DecodeJoinRequest(bytes.substr(0, bytes.size() - 1), 42, &back).code(), Code::kInvalidArgument);
  std::string huge = bytes;
  huge[38] = huge[39] = static_cast<char>(0xff);  // cards_len
  EXPECT_EQ(JoinRequestBytes(huge, 42, &total).code(), Code::kInvalidArgument);
  // A rank out of range fails the rendezvous for all.
  request.rank = 4;
  EXPECT_EQ(DecodeJoinRequest(EncodeJoinRequest(42, request), 42, &back).code(), Code::kInvalidUsage);
}

TEST(RendezvousWire, RepliesCarryTheStatusOrWhereTheTableComesFrom) {
  SocketAddress parent;
  parent.ip_be = 0x0100007f;
  parent.port_be = 0x3a30;
  std::string bytes = EncodeJoinReply(Status::Ok(), 100, 8, parent);
  EXPECT_EQ(JoinReplyBytes(bytes.substr(0, kJoinReplyHeaderBytes)), bytes.size());
  JoinReply reply;
  DecodeJoinReply(bytes, 100, &reply);
  ASSERT_TRUE(reply.status.ok()) << reply.status.message();
  EXPECT_EQ(reply.fanout, 8);
  EXPECT_EQ(reply.parent.port_be, 0x3a30);
  DecodeJoinReply(bytes, 99, &reply);
  EXPECT_EQ(reply.status.code(), Code::kInternalError);
  DecodeJoinReply(EncodeJoinReply(Status::Ok(), 100, 0, parent), 100, &reply);
  EXPECT_FALSE(reply.status.ok());

  bytes = EncodeJoinReply(TimeoutError("missing rank(s) 7 [culprit: rank 7]"), 0, 0, {});
  EXPECT_EQ(JoinReplyBytes(bytes.substr(0, kJoinReplyHeaderBytes)), bytes.size());
  DecodeJoinReply(bytes, 100, &reply);
  EXPECT_EQ(reply.status.code(), Code::kTimeout);
  EXPECT_EQ(reply.status.message(), "missing rank(s) 7 [culprit: rank 7]");
  DecodeJoinReply(bytes.substr(0, bytes.size() - 1), 100, &reply);
  EXPECT_EQ(reply.status.code(), Code::kInternalError);
}

// Every rank but the service's children has exactly one parent, which lists it as a
// child, and is reached in a few hops.
TEST(TableTree, EveryRankIsReachedOnce) {
  for (int fanout : {1, 2, 3, 8, 1000}) {
    for (int nranks : {1, 2, 7, 8, 9, 64, 1000}) {
      std::set<int> reached;
      for (int r = 0; r < std::min(fanout, nranks); ++r) {
        EXPECT_EQ(TableParent(r, fanout), -1);
        reached.insert(r);
      }
      for (int r = 0; r < nranks; ++r) {
        for (int c : TableChildren(r, nranks, fanout)) {
          EXPECT_EQ(TableParent(c, fanout), r) << fanout << " " << nranks;
          EXPECT_GT(c, r);
          EXPECT_TRUE(reached.insert(c).second) << c;
        }
      }
      EXPECT_EQ(static_cast<int>(reached.size()), nranks) << fanout << " " << nranks;
    }
  }
  int hops = 0;
  for (int r = 99999; r >= 0; r = TableParent(r, 8)) ++hops;
  EXPECT_LE(hops, 6);  // 8 + 64 + ... + 8^6 > 100,000
}

TEST(RendezvousWire, TableRequests) {
  int rank = -1;
  ASSERT_TRUE(DecodeTableRequest(EncodeTableRequest(42, 17), 42, &rank).ok());
  EXPECT_EQ(rank, 17);
  EXPECT_EQ(DecodeTableRequest(EncodeTableRequest(41, 17), 42, &rank).code(), Code::kInvalidArgument);
  EXPECT_EQ(DecodeTableRequest("short", 42, &rank).code(), Code::kInvalidArgument);
}

// A service whose process may not open a file per rank fails the rendezvous saying so
// (instead of leaving ranks unaccepted until they time out naming them).
TEST(RendezvousService, TooFewFileDescriptorsIsSaid) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const uint64_t secret = 4242;
  const pid_t child = fork();
  if (child == 0) {
    rlimit tight{64, 64};
    setrlimit(RLIMIT_NOFILE, &tight);
    SocketAddress bound;
    if (!StartRendezvous("127.0.0.1", 0, secret, 5000, 8, &bound).ok()) _exit(1);
    if (write(fds[1], &bound, sizeof(bound)) != sizeof(bound)) _exit(2);
    sleep(6);
    _exit(0);
  }
  SocketAddress service;
  ASSERT_EQ(read(fds[0], &service, sizeof(service)), static_cast<ssize_t>(sizeof(service)));
  const Deadline deadline = Deadline::AfterMs(5000);
  Socket s;
  ASSERT_TRUE(Connect(service, deadline, &s).ok());
  JoinRequest request;
  request.nranks = 1000;
  const std::string hello = EncodeJoinRequest(secret, request);
  ASSERT_TRUE(SendAll(s, hello.data(), hello.size(), deadline).ok());
  std::string reply(kJoinReplyHeaderBytes, '\0');
  ASSERT_TRUE(RecvAll(s, &reply[0], reply.size(), deadline).ok());
  reply.resize(JoinReplyBytes(reply));
  ASSERT_TRUE(RecvAll(s, &reply[kJoinReplyHeaderBytes], reply.size() - kJoinReplyHeaderBytes, deadline).ok());
  JoinReply decoded;
  DecodeJoinReply(reply, 1000, &decoded);
  EXPECT_EQ(decoded.status.code(), Code::kInvalidUsage);
  EXPECT_NE(decoded.status.message().find("1256 file descriptors"), std::string::npos) << decoded.status.message();
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(fds[0]);
  close(fds[1]);
}

// The process that created the id exits and another communicator's service takes its
// port: a rank joining there is refused for its secret, and says that the creator is
// gone (a peer failure) when the creator was on its host; otherwise that the id is
// stale or foreign (an invalid argument).
TEST(RendezvousService, AForeignServiceOnTheCreatorsPortNamesTheCreator) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  UniqueIdData id;
  id.secret = RandomSecret();
  id.root_host = "node-a/net:1";
  id.root_pid = fork();
  if (id.root_pid == 0) {
    SocketAddress bound;
    if (!StartRendezvous("127.0.0.1", 0, 4242, 5000, 8, &bound).ok()) _exit(1);
    _exit(write(fds[1], &bound, sizeof(bound)) == sizeof(bound) ? 0 : 2);
  }
  ASSERT_EQ(read(fds[0], &id.root, sizeof(id.root)), static_cast<ssize_t>(sizeof(id.root)));
  int status = 0;
  ASSERT_EQ(waitpid(id.root_pid, &status, 0), id.root_pid);
  close(fds[0]);
  close(fds[1]);
  SocketAddress foreign;
  ASSERT_TRUE(StartRendezvous("127.0.0.1", id.root.port(), RandomSecret(), 5000, 8, &foreign).ok());
  ASSERT_EQ(foreign.port(), id.root.port());
  RankInfo mine;
  mine.host = "node-a/net:1/boot:7";
  RankTable table;
  Status st = JoinRendezvous(id, 0, 2, mine, "127.0.0.1", 2000, &table);
  EXPECT_EQ(st.code(), Code::kRemoteError) << st.message();
  EXPECT_NE(st.message().find("[culprit: rendezvous host pid " + std::to_string(id.root_pid) + "]"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("exited"), std::string::npos) << st.message();
  mine.host = "node-b/net:1/boot:7";  // the creator on another host: nothing tells
  st = JoinRendezvous(id, 0, 2, mine, "127.0.0.1", 2000, &table);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.message();
  EXPECT_NE(st.message().find("stale or foreign"), std::string::npos) << st.message();
}

// More ranks join at once than the service reads at a time (256): the rest wait in the
// listener's queue, none is turned away, and every rank gets the whole table, most of
// them from the ranks that forward it.
TEST(RendezvousService, ABurstOfJoinsAllGetTheTable) {
  constexpr int kRanks = 700;
  UniqueIdData id;
  id.secret = RandomSecret();
  ASSERT_TRUE(StartRendezvous("127.0.0.1", 0, id.secret, 30000, 4, &id.root).ok());
  std::vector<std::string> failures(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      RankInfo info;
      info.pid = 1000 + r;
      info.host = "node" + std::to_string(r / 8);
      AddCard("tcp", std::to_string(r), &info);
      RankTable table;
      const Status s = JoinRendezvous(id, r, kRanks, info, "127.0.0.1", 30000, &table);
      std::string card;
      if (!s.ok()) {
        failures[r] = s.message();
      } else if (table.size() != kRanks || table.pid(kRanks - 1) != 1000 + kRanks - 1 ||
                 table.host(kRanks - 1) != "node" + std::to_string((kRanks - 1) / 8) ||
                 !table.FindCard(r, "tcp", &card).ok() || card != std::to_string(r)) {
        failures[r] = "a wrong table";
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(failures[r], "") << "rank " << r;
}

}  // namespace
}  // namespace tessera
