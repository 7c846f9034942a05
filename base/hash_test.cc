#include "base/hash.h"

#include <string>

#include "gtest/gtest.h"

namespace tessera {
namespace {

// The published FNV-1a 64-bit test vectors: the value is the definition's, not this
// build's, so ranks built apart agree on it.
TEST(Fnv1a, MatchesThePublishedVectors) {
  EXPECT_EQ(Fnv1a(""), kFnv1aBasis);
  EXPECT_EQ(Fnv1a("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(Fnv1a("foobar"), 0x85944171f73967e8ull);
}

TEST(Fnv1a, PiecesHashedInTurnGiveTheWholesHash) {
  const std::string whole = "TESSERA_ALGO_TABLE rows";
  EXPECT_EQ(Fnv1a(whole.substr(7), Fnv1a(whole.substr(0, 7))), Fnv1a(whole));
  EXPECT_NE(Fnv1a("ab"), Fnv1a("ba"));
}

}  // namespace
}  // namespace tessera
