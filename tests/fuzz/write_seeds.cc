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
  return 0;
}
