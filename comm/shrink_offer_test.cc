// The shrink offer from another process: what the lowest survivor encodes comes back
// whole, and lists that no survivor could have sent are refused, naming what is wrong.
#include "comm/shrink_offer.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

UniqueIdData SomeId() {
  UniqueIdData id;
  id.root.ip_be = 0x0100007f;
  id.root.port_be = 0x3930;
  id.secret = 0xfeedull;
  id.root_pid = 77;
  return id;
}

// The offer of shrink 2 with `ranks` as the excluded list's text.
std::string OfferWithRanks(const std::string& ranks) { return EncodeShrinkOffer(2, SomeId(), {}) + ranks; }

TEST(ShrinkOffer, ComesBackWhole) {
  bool current = false;
  UniqueIdData id;
  std::vector<int> exclude;
  ASSERT_TRUE(DecodeShrinkOffer(EncodeShrinkOffer(2, SomeId(), {1, 3}), 2, 4, &current, &id, &exclude).ok());
  EXPECT_TRUE(current);
  EXPECT_EQ(exclude, (std::vector<int>{1, 3}));
  EXPECT_EQ(id.secret, 0xfeedull);
  EXPECT_EQ(id.root_pid, 77);
}

TEST(ShrinkOffer, AnotherShrinksOfferIsNotCurrent) {
  bool current = true;
  UniqueIdData id;
  std::vector<int> exclude{9};
  ASSERT_TRUE(DecodeShrinkOffer(EncodeShrinkOffer(1, SomeId(), {0}), 2, 4, &current, &id, &exclude).ok());
  EXPECT_FALSE(current);
  EXPECT_EQ(exclude, std::vector<int>{9});
  ASSERT_TRUE(DecodeShrinkOffer("", 2, 4, &current, &id, &exclude).ok());
  EXPECT_FALSE(current);
}

TEST(ShrinkOffer, RefusesListsNoSurvivorSends) {
  const char* bad[] = {"4 ",     // out of range for 4 ranks
                       "3 1 ",   // not increasing
                       "1 1 ",   // twice
                       "01 ",    // not canonical
                       "-1 ",    // not a number
                       "1",      // cut short
                       "1 x",    // trailing bytes
                       "0 1 2 3 "};  // nobody left
  for (const char* ranks : bad) {
    bool current = false;
    UniqueIdData id;
    std::vector<int> exclude;
    const Status s = DecodeShrinkOffer(OfferWithRanks(ranks), 2, 4, &current, &id, &exclude);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << "'" << ranks << "': " << s.ToString();
  }
  bool current = false;
  UniqueIdData id;
  std::vector<int> exclude;
  const std::string cut = EncodeShrinkOffer(2, SomeId(), {}).substr(0, 40);
  EXPECT_EQ(DecodeShrinkOffer(cut, 2, 4, &current, &id, &exclude).message(), "a shrink offer cut short");
}

}  // namespace
}  // namespace tessera
