// main() for the test targets that run part of a shared test library: the part is named
// by `--tests=PATTERNS` (gtest filter syntax: positive patterns, then '-' and negative
// ones, separated by ':'), and every pattern must match at least one registered test. A
// renamed suite or instantiation therefore fails the target instead of leaving it to run
// nothing (a plain --gtest_filter that matches nothing passes). A --gtest_filter given
// as well (bazel test --test_arg=...) replaces the selection for that run, once the
// selection has been checked.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

// gtest's wildcard match: '*' any string, '?' any one character.
bool Matches(const char* pattern, const char* name) {
  if (*pattern == '\0') return *name == '\0';
  if (*pattern == '*') return Matches(pattern + 1, name) || (*name != '\0' && Matches(pattern, name + 1));
  return *name != '\0' && (*pattern == '?' || *pattern == *name) && Matches(pattern + 1, name + 1);
}

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t colon = std::min(text.find(':', start), text.size());
    if (colon > start) parts.push_back(text.substr(start, colon - start));
    start = colon + 1;
  }
  return parts;
}

// The patterns of `selection` that match no registered test ("Suite.Name").
std::vector<std::string> Unmatched(const std::string& selection) {
  std::vector<std::string> names;
  const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
  for (int s = 0; s < unit.total_test_suite_count(); ++s) {
    const testing::TestSuite& suite = *unit.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t) {
      names.push_back(std::string(suite.name()) + "." + suite.GetTestInfo(t)->name());
    }
  }
  std::string positive = selection, negative;
  if (const size_t dash = selection.find('-'); dash != std::string::npos) {
    positive = selection.substr(0, dash);
    negative = selection.substr(dash + 1);
  }
  std::vector<std::string> unmatched;
  for (const std::string& part : {positive, negative}) {
    for (const std::string& pattern : Split(part)) {
      bool any = false;
      for (const std::string& name : names) any = any || Matches(pattern.c_str(), name.c_str());
      if (!any) unmatched.push_back(pattern);
    }
  }
  return unmatched;
}

}  // namespace

int main(int argc, char** argv) {
  std::string selection;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--tests=", 8) == 0) {
      selection = argv[i] + 8;
    } else {
      args.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(args.size());
  testing::InitGoogleTest(&n, args.data());
  if (selection.empty()) {
    std::fprintf(stderr, "test_selection_main: --tests=PATTERNS is required (the target's part of the suite)\n");
    return 2;
  }
  const std::vector<std::string> unmatched = Unmatched(selection);
  for (const std::string& pattern : unmatched) {
    std::fprintf(stderr, "--tests=%s: '%s' matches no test (renamed suite or instantiation?)\n", selection.c_str(),
                 pattern.c_str());
  }
  if (!unmatched.empty()) return 1;
  const std::string given = GTEST_FLAG_GET(filter);
  GTEST_FLAG_SET(filter, given == "*" ? selection : given);
  return RUN_ALL_TESTS();
}
