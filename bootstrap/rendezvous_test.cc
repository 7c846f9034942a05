// What a rank publishes at the rendezvous: agreed settings and transport cards.
#include "bootstrap/rendezvous.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(AddCard("ucx", std::string(sizeof(info.cards), 'u'), &info).code(), Code::kInvalidArgument);
  EXPECT_EQ(AddAgreed(std::string(sizeof(info.agreed) + 1, 'x'), &info).code(), Code::kInvalidArgument);
}

// The table comes from the network: records that overrun are an error, not a crash.
TEST(RankInfo, MalformedCardsAreAnError) {
  RankInfo info;
  ASSERT_TRUE(AddCard("shm", "segment", &info).ok());
  info.cards[1 + 3] = static_cast<char>(0xff);  // the card's length, now past the end
  std::string bytes;
  EXPECT_EQ(FindCard(info, "tcp", &bytes).code(), Code::kInvalidArgument);
  info.cards[0] = static_cast<char>(200);  // a name longer than the records
  EXPECT_EQ(FindCard(info, "tcp", &bytes).code(), Code::kInvalidArgument);
  // A length past the struct is read as the struct's end, and the last record's length
  // (256 bytes, in the struct's last byte) then overruns it.
  info.cards_len = 1000000;
  info.cards[2047] = 1;
  EXPECT_EQ(FindCard(info, "tcp", &bytes).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace tessera
