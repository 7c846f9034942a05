// Every setting with arbitrary values: the input's lines are the values of the settings
// table's rows in order (an empty line leaves that variable unset; line k + rows is row k
// again, the later value winning). Settings::FromEnvironment must accept the values or
// name a variable in an InvalidArgument.
#include <cstdlib>
#include <map>
#include <string>

#include "base/settings.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<tessera::SettingInfo> rows = tessera::AllSettings();
  const std::string text = tessera::FuzzInput(data, size).Rest();
  std::map<std::string, std::string> env;
  size_t row = 0;
  for (size_t start = 0; start <= text.size(); ++row) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    // A NUL ends an environment value, as it would in the real environment.
    std::string value = text.substr(start, end - start);
    value = value.substr(0, value.find('\0'));
    if (end > start) env[rows[row % rows.size()].env] = value;
    start = end + 1;
  }
  tessera::Settings settings;
  const tessera::Status s = tessera::Settings::FromEnvironment(&settings, [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  if (!s.ok() && (s.code() != tessera::Code::kInvalidArgument || s.message().find("TESSERA_") == std::string::npos)) {
    std::abort();
  }
  return 0;
}
