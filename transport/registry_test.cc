// The registry's list of backends and TESSERA_TRANSPORT's parsing against it.
#include "transport/registry.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace tessera {
namespace {

std::vector<std::string> Names(const std::string& text) {
  std::vector<const TransportEntry*> rows;
  Status s = ParseTransportList(text, &rows);
  EXPECT_TRUE(s.ok()) << text << ": " << s.ToString();
  std::vector<std::string> names;
  for (const TransportEntry* row : rows) names.push_back(row->name);
  return names;
}

TEST(TransportRegistry, ListsKeepTheirOrder) {
  EXPECT_EQ(Names("auto"), (std::vector<std::string>{"cuda_ipc", "shm", "ibverbs", "ucx", "tcp"}));
  EXPECT_EQ(Names("ucx"), (std::vector<std::string>{"ucx"}));
  EXPECT_EQ(Names("tcp,shm"), (std::vector<std::string>{"tcp", "shm"}));
  EXPECT_EQ(Names("cuda_ipc,shm,tcp"), (std::vector<std::string>{"cuda_ipc", "shm", "tcp"}));
}

TEST(TransportRegistry, MalformedListsNameTheVariable) {
  for (const char* text : {"", "pigeon", "shm,,tcp", "ucx,ucx", "shm,", ",tcp", "cuda_ipc"}) {
    std::vector<const TransportEntry*> rows;
    Status s = ParseTransportList(text, &rows);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << "'" << text << "'";
    EXPECT_NE(s.message().find("TESSERA_TRANSPORT"), std::string::npos) << s.message();
  }
}

// Exactly one control transport, and every row complete.
TEST(TransportRegistry, RowsAreComplete) {
  int control = 0;
  for (const TransportEntry& row : TransportRegistry()) {
    EXPECT_NE(row.open, nullptr) << row.name;
    control += row.control;
  }
  EXPECT_EQ(control, 1);
}

// The backends the settings table's agree column names are rows of the registry.
TEST(TransportRegistry, AgreedSettingsNameBackendsOfTheRegistry) {
  for (const SettingInfo& row : AllSettings()) {
    const std::string agree = row.agree;
    if (agree == kAgreeNone || agree == kAgreeAll) continue;
    const auto& rows = TransportRegistry();
    EXPECT_TRUE(std::any_of(rows.begin(), rows.end(), [&](const TransportEntry& e) { return agree == e.name; }))
        << row.env << " is agreed where '" << agree << "' is listed, which is no backend";
  }
}

}  // namespace
}  // namespace tessera
