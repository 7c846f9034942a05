// Shows that the CUDA code was compiled, and for what: reads the device code nvcc
// embedded in cuda/reduce_kernels.cu's object (argv[1]) and checks that it holds sm_80
// and sm_90 cubins, each with every kernel, and compute_90 PTX for newer GPUs. Prints
// the line CI logs show ("CUDA code compiled: ..."). Runs without a GPU.
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "cuda/fatbin_reader.h"
#include "gtest/gtest.h"

namespace tessera {
namespace cuda {
namespace {

std::string g_object_path;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int Count(const std::vector<std::string>& kernels, const std::string& name) {
  int n = 0;
  for (const std::string& k : kernels) n += k.find(name) != std::string::npos ? 1 : 0;
  return n;
}

// Kernels of reduce_kernels.cu: 10 datatypes x 4 operators of ReduceKernel, widening and
// narrowing for 2 half types, scaling and division for 10 datatypes.
const std::map<std::string, int> kExpectedKernels = {
    {"ReduceKernel", 40}, {"WidenKernel", 2}, {"NarrowKernel", 2}, {"ScaleKernel", 10}, {"DivideKernel", 10}};

TEST(CudaCompiled, ReduceKernelsHoldSm80AndSm90CubinsAndPtx) {
  ASSERT_FALSE(g_object_path.empty()) << "usage: cuda_compiled_test <object file>";
  const std::string object = ReadFile(g_object_path);
  ASSERT_FALSE(object.empty()) << "cannot read " << g_object_path;
  std::vector<DeviceImage> images;
  const Status s = ReadDeviceImages(object, &images);
  ASSERT_TRUE(s.ok()) << s.ToString();

  std::map<int, const DeviceImage*> cubins;
  std::vector<int> ptx;
  for (const DeviceImage& image : images) {
    if (image.kind == DeviceImage::Kind::kCubin) cubins[image.arch] = &image;
    if (image.kind == DeviceImage::Kind::kPtx) ptx.push_back(image.arch);
  }
  std::string line = "CUDA code compiled: cuda/reduce_kernels.cu (" + std::to_string(object.size()) + "-byte object):";
  for (int arch : {80, 90}) {
    SCOPED_TRACE("sm_" + std::to_string(arch));
    ASSERT_EQ(cubins.count(arch), 1u) << "no sm_" << arch << " cubin";
    const DeviceImage& cubin = *cubins[arch];
    ASSERT_TRUE(cubin.readable) << "the sm_" << arch << " cubin is compressed or not ELF";
    EXPECT_EQ(cubin.elf_arch, arch) << "the cubin's own ELF header names another architecture";
    for (const auto& expected : kExpectedKernels) {
      EXPECT_EQ(Count(cubin.kernels, expected.first), expected.second) << expected.first;
    }
    line += " sm_" + std::to_string(arch) + " cubin (" + std::to_string(cubin.kernels.size()) + " kernels),";
  }
  EXPECT_EQ(cubins.size(), 2u) << "cubins for other architectures than sm_80 and sm_90";
  ASSERT_EQ(ptx.size(), 1u);
  EXPECT_EQ(ptx[0], 90);
  line += " compute_" + std::to_string(ptx[0]) + " PTX";
  std::printf("%s\n", line.c_str());
}

// The same check with NVIDIA's cuobjdump, where the toolkit has one (this machine's
// does not: the reader above is then the only check).
TEST(CudaCompiled, CuobjdumpListsBothArchitectures) {
  const char* cuobjdump = "/usr/local/cuda/bin/cuobjdump";
  struct stat st;
  if (stat(cuobjdump, &st) != 0) GTEST_SKIP() << "skipped: this CUDA toolkit has no " << cuobjdump;
  const std::string command = std::string(cuobjdump) + " --list-elf " + g_object_path + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
  EXPECT_EQ(pclose(pipe), 0) << output;
  EXPECT_NE(output.find("sm_80"), std::string::npos) << output;
  EXPECT_NE(output.find("sm_90"), std::string::npos) << output;
}

// The reader must refuse damaged input without crashing: every truncation of the real
// object, and a few corrupted headers.
TEST(FatbinReader, RefusesTruncatedAndCorruptedObjects) {
  const std::string object = ReadFile(g_object_path);
  ASSERT_FALSE(object.empty());
  std::vector<DeviceImage> images;
  EXPECT_FALSE(ReadDeviceImages("", &images).ok());
  EXPECT_FALSE(ReadDeviceImages("not an ELF file at all, just text", &images).ok());
  for (size_t len = 0; len < object.size(); len += 97) {
    (void)ReadDeviceImages(object.substr(0, len), &images);  // any answer, but no crash
  }
  std::string corrupt = object;
  corrupt[60] = '\xff';  // e_shnum
  corrupt[61] = '\xff';
  EXPECT_FALSE(ReadDeviceImages(corrupt, &images).ok());
  corrupt = object;
  for (size_t i = 0; i + 4 <= corrupt.size(); ++i) {  // the fat binary's magic
    if (std::memcmp(corrupt.data() + i, "\x50\xed\x55\xba", 4) == 0) {
      std::memcpy(&corrupt[i + 8], "\xff\xff\xff\xff\xff\xff\xff\x7f", 8);  // entries size
      break;
    }
  }
  EXPECT_FALSE(ReadDeviceImages(corrupt, &images).ok());
}

}  // namespace
}  // namespace cuda
}  // namespace tessera

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc > 1) tessera::cuda::g_object_path = argv[1];
  return RUN_ALL_TESTS();
}
