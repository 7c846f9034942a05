// The settings table: parsing, validation that names the variable, and docs/settings.md
// listing every row with its default (so the documentation cannot drift).
#include "base/settings.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace tessera {
namespace {

Settings::Lookup From(const std::map<std::string, std::string>& env) {
  return [env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

TEST(Settings, DefaultsWhenNothingIsSet) {
  Settings s;
  ASSERT_TRUE(Settings::FromEnvironment(&s, From({})).ok());
  EXPECT_EQ(s.timeout_ms, 120000);
  EXPECT_EQ(s.transport, "auto");
  EXPECT_EQ(s.tcp_streams, 2);
}

TEST(Settings, ReadsEveryKind) {
  Settings s;
  ASSERT_TRUE(Settings::FromEnvironment(&s, From({{"TESSERA_TIMEOUT_MS", "2500"},
                                                   {"TESSERA_TRANSPORT", "tcp"},
                                                   {"TESSERA_SHM_SLOT_BYTES", "4096"}}))
                  .ok());
  EXPECT_EQ(s.timeout_ms, 2500);
  EXPECT_EQ(s.transport, "tcp");
  EXPECT_EQ(s.shm_slot_bytes, 4096);
}

TEST(Settings, MalformedValuesNameTheVariable) {
  const std::map<std::string, std::string> bad[] = {
      {{"TESSERA_TIMEOUT_MS", "soon"}},  {{"TESSERA_TIMEOUT_MS", "0"}},
      {{"TESSERA_SHM_SLOT_BYTES", "100"}},
      {{"TESSERA_SHM_SLOTS", "1"}},      {{"TESSERA_TCP_STREAMS", "0"}},
      {{"TESSERA_DEBUG", "LOUD"}},       {{"TESSERA_TCP_CHUNK_BYTES", "12x"}},
      {{"TESSERA_UCX_CHUNK_BYTES", "100"}},
      {{"TESSERA_IB_GID_INDEX", "-2"}},  {{"TESSERA_TCP_CONGESTION", "Cubic"}},
      {{"TESSERA_TCP_CONGESTION", "a_name_far_too_long"}},
      {{"TESSERA_UCX_CHUNKS_IN_FLIGHT", "0"}}, {{"TESSERA_CUDA_IPC_SLOTS", "0"}},
      {{"TESSERA_IB_SLOTS", "3"}},       {{"TESSERA_IB_SLOT_BYTES", "8200"}},
      {{"TESSERA_IB_TIMEOUT", "32"}},    {{"TESSERA_IB_RETRY_COUNT", "8"}},
      {{"TESSERA_IB_SL", "16"}},         {{"TESSERA_IB_TC", "256"}},
      {{"TESSERA_IB_REGISTER_USER_BUFFERS", "2"}}, {{"TESSERA_IB_CACHE_ENTRIES", "0"}},
  };
  for (const auto& env : bad) {
    Settings s;
    Status st = Settings::FromEnvironment(&s, From(env));
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << env.begin()->first;
    EXPECT_NE(st.message().find(env.begin()->first), std::string::npos) << st.message();
  }
}

// Rows agreed by all come always; a backend's only where TESSERA_TRANSPORT lists it;
// `values` replaces a row's text.
TEST(Settings, AgreedLinesFollowTheAgreeColumn) {
  Settings s;
  ASSERT_TRUE(Settings::FromEnvironment(&s, From({{"TESSERA_TCP_STREAMS", "4"}})).ok());
  const std::string tcp_only = AgreedLines(s, {"tcp"}, {{"TESSERA_TRANSPORT", "tcp"}});
  EXPECT_NE(tcp_only.find("TESSERA_TRANSPORT=tcp\n"), std::string::npos) << tcp_only;
  EXPECT_NE(tcp_only.find("TESSERA_TCP_STREAMS=4\n"), std::string::npos) << tcp_only;
  EXPECT_NE(tcp_only.find("TESSERA_HALF_WIRE=float32\n"), std::string::npos) << tcp_only;
  EXPECT_EQ(tcp_only.find("TESSERA_SHM_SLOTS="), std::string::npos) << tcp_only;
  EXPECT_EQ(tcp_only.find("TESSERA_TIMEOUT_MS="), std::string::npos) << tcp_only;
  const std::string both = AgreedLines(s, {"shm", "tcp"}, {});
  EXPECT_NE(both.find("TESSERA_SHM_SLOTS=8\n"), std::string::npos) << both;
  EXPECT_NE(both.find("TESSERA_TRANSPORT=auto\n"), std::string::npos) << both;
}

TEST(Settings, DocsListEveryVariableWithItsDefaultAndWhoAgrees) {
  std::ifstream in("docs/settings.md");
  ASSERT_TRUE(in.good()) << "docs/settings.md not found";
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  for (const SettingInfo& row : AllSettings()) {
    const std::string want = "| `" + std::string(row.env) + "` | `" + row.default_value + "` | " +
                             AgreeText(row.agree) + " |";
    EXPECT_NE(doc.find(want), std::string::npos) << "docs/settings.md lacks the row start: " << want;
  }
}

}  // namespace
}  // namespace tessera
