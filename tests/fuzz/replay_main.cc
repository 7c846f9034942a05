// main() of a fuzz target built with gcc for `bazel test`: it runs the target's stored
// corpus (every file under the directories or files named on the command line), then a
// fixed, seeded set of mutants of each file (truncations, byte flips, insertions,
// boundary integers, splices with another file), so every build checks that the
// stored inputs and their near neighbours are answered without a crash. The real
// fuzzing (libFuzzer, with ASan and UBSan) is tools/fuzz.sh; this is its cheap,
// deterministic shadow in the ordinary test suite.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

constexpr int kMutantsPerFile = 400;

void Collect(const std::string& path, std::vector<std::string>* files) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    files->push_back(path);
    return;
  }
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return;
  while (dirent* e = readdir(dir)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) Collect(path + "/" + e->d_name, files);
  }
  closedir(dir);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void Run(const std::string& input) {
  // A copy of exactly the input's size, so reads past its end are out of bounds.
  std::vector<uint8_t> bytes(input.begin(), input.end());
  LLVMFuzzerTestOneInput(bytes.empty() ? nullptr : bytes.data(), bytes.size());
}

uint64_t Next(uint64_t* state) {  // xorshift64*
  *state ^= *state >> 12;
  *state ^= *state << 25;
  *state ^= *state >> 27;
  return *state * 0x2545F4914F6CDD1Dull;
}

std::string Mutate(const std::string& seed, const std::string& other, uint64_t* rng) {
  std::string m = seed;
  const int edits = 1 + static_cast<int>(Next(rng) % 4);
  for (int e = 0; e < edits; ++e) {
    const size_t at = m.empty() ? 0 : Next(rng) % m.size();
    switch (Next(rng) % 6) {
      case 0: m.resize(at); break;  // truncate
      case 1: if (!m.empty()) m[at] = static_cast<char>(m[at] ^ (1u << (Next(rng) % 8))); break;
      case 2: m.insert(at, 1 + Next(rng) % 8, static_cast<char>(Next(rng))); break;
      case 3: {  // a boundary integer over 4 bytes
        static const uint32_t kValues[] = {0, 1, 0x7fffffffu, 0x80000000u, 0xffffffffu, 0xffffu, 4096};
        const uint32_t v = kValues[Next(rng) % (sizeof(kValues) / sizeof(kValues[0]))];
        if (m.size() >= 4) std::memcpy(&m[std::min(at, m.size() - 4)], &v, 4);
        break;
      }
      case 4: m = m.substr(0, at) + other.substr(other.empty() ? 0 : Next(rng) % other.size()); break;
      default: if (!m.empty()) m.erase(at, 1 + Next(rng) % 8); break;
    }
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) Collect(argv[i], &files);
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "no corpus files under the paths given\n");
    return 1;
  }
  std::vector<std::string> inputs;
  for (const std::string& f : files) inputs.push_back(ReadFile(f));
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  size_t runs = 0;
  Run(std::string());
  for (size_t i = 0; i < inputs.size(); ++i) {
    Run(inputs[i]);
    ++runs;
    for (int k = 0; k < kMutantsPerFile; ++k, ++runs) Run(Mutate(inputs[i], inputs[(i + 1) % inputs.size()], &rng));
  }
  std::printf("%zu stored inputs and %zu mutants answered\n", inputs.size(), runs - inputs.size());
  return 0;
}
