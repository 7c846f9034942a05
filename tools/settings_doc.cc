// Prints the settings table of base/settings.h as the markdown table of
// docs/settings.md:  bazel run //tools:settings_doc
#include <cstdio>

#include "base/settings.h"

int main() {
  std::printf("| variable | default | ranks must agree | meaning |\n|---|---|---|---|\n");
  for (const tessera::SettingInfo& row : tessera::AllSettings()) {
    std::printf("| `%s` | `%s` | %s | %s |\n", row.env, row.default_value.c_str(),
                tessera::AgreeText(row.agree).c_str(), row.meaning);
  }
  return 0;
}
