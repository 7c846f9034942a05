// CUDA IPC records: encoding and every refusal of the decoder, the no-driver answers
// (run here), and a device buffer shared between two processes (skipped here with
// "skipped: no GPU"). The second process is this test binary started again with
// TESSERA_IPC_CHILD_RECORD set (CUDA cannot be used in a child forked after it started).
#include "cuda/ipc_handles.h"

#include <cuda_runtime_api.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/gpu_test.h"
#include "gtest/gtest.h"

extern char** environ;

namespace tessera {
namespace cuda {
namespace {

IpcBuffer Sample() {
  IpcBuffer b;
  std::mt19937 rng(3);
  for (unsigned char& c : b.handle) c = static_cast<unsigned char>(rng());
  b.offset = 0x123456789abcull;
  b.bytes = 1ull << 33;
  b.device = 3;
  b.pid = 4242;
  return b;
}

std::vector<unsigned char> Encoded(const IpcBuffer& b) {
  std::vector<unsigned char> out(kIpcRecordBytes);
  EncodeIpcBuffer(b, out.data());
  return out;
}

TEST(IpcRecord, RoundTripsAndHasTheDocumentedLayout) {
  const IpcBuffer b = Sample();
  const std::vector<unsigned char> rec = Encoded(b);
  EXPECT_EQ(std::memcmp(rec.data(), "TSCI", 4), 0);
  EXPECT_EQ(rec[4], 1);  // version 1, little-endian
  EXPECT_EQ(rec[5], 0);
  EXPECT_EQ(std::memcmp(rec.data() + 8, b.handle, kIpcHandleBytes), 0);
  EXPECT_EQ(rec[72], 0xbc);  // offset, little-endian
  EXPECT_EQ(rec[84], 2);     // bytes = 2^33: byte 4 of the field at 80
  EXPECT_EQ(rec[88], 3);     // device
  EXPECT_EQ(rec[92], 0x92);  // pid 4242 = 0x1092
  EXPECT_EQ(rec[93], 0x10);
  IpcBuffer back;
  ASSERT_TRUE(DecodeIpcBuffer(rec.data(), rec.size(), &back).ok());
  EXPECT_EQ(std::memcmp(back.handle, b.handle, kIpcHandleBytes), 0);
  EXPECT_EQ(back.offset, b.offset);
  EXPECT_EQ(back.bytes, b.bytes);
  EXPECT_EQ(back.device, b.device);
  EXPECT_EQ(back.pid, b.pid);
}

void ExpectRefused(const std::vector<unsigned char>& rec, size_t len, const std::string& words) {
  IpcBuffer out;
  const Status s = DecodeIpcBuffer(rec.data(), len, &out);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << words;
  EXPECT_NE(s.message().find(words), std::string::npos) << s.message();
}

TEST(IpcRecord, DecoderRefusesEveryMalformedRecord) {
  const std::vector<unsigned char> good = Encoded(Sample());
  ExpectRefused(good, kIpcRecordBytes - 1, "95 bytes, expected 96");
  std::vector<unsigned char> longer = good;
  longer.push_back(0);
  ExpectRefused(longer, longer.size(), "97 bytes");
  IpcBuffer out;
  EXPECT_EQ(DecodeIpcBuffer(nullptr, kIpcRecordBytes, &out).code(), Code::kInvalidArgument);
  std::vector<unsigned char> bad = good;
  bad[0] = 'X';
  ExpectRefused(bad, bad.size(), "bad magic");
  bad = good;
  bad[4] = 2;
  ExpectRefused(bad, bad.size(), "version 2");
  bad = good;
  bad[7] = 1;
  ExpectRefused(bad, bad.size(), "reserved");
  IpcBuffer b = Sample();
  b.offset = ~0ull - 10;
  b.bytes = 11;
  ExpectRefused(Encoded(b), kIpcRecordBytes, "overflows");
  b = Sample();
  b.device = -1;
  ExpectRefused(Encoded(b), kIpcRecordBytes, "negative device");
  b = Sample();
  b.pid = 0;
  ExpectRefused(Encoded(b), kIpcRecordBytes, "pid 0");
}

TEST(IpcMapping, RefusesThisProcessesOwnBuffer) {
  IpcBuffer b = Sample();
  b.pid = static_cast<int32_t>(getpid());
  std::unique_ptr<IpcMapping> m;
  const Status s = IpcMapping::Open(b, &m);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("this process"), std::string::npos) << s.message();
}

TEST(NoDriver, ExportAndOpenAnswerCleanly) {
  TESSERA_SKIP_WITH_GPU();
  std::vector<char> host(64);
  IpcBuffer b;
  Status s = ExportIpcBuffer(host.data(), host.size(), &b);
  EXPECT_EQ(s.code(), Code::kCudaError);
  EXPECT_NE(s.message().find("exporting a CUDA IPC buffer"), std::string::npos) << s.message();
  std::unique_ptr<IpcMapping> m;
  s = IpcMapping::Open(Sample(), &m);
  EXPECT_EQ(s.code(), Code::kCudaError);
  EXPECT_EQ(m, nullptr);
}

TEST(Gpu, HostMemoryCannotBeExported) {
  TESSERA_SKIP_WITHOUT_GPU();
  std::vector<char> host(64);
  IpcBuffer b;
  EXPECT_EQ(ExportIpcBuffer(host.data(), host.size(), &b).code(), Code::kInvalidArgument);
}

std::string Hex(const std::vector<unsigned char>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (unsigned char c : bytes) {
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

std::vector<unsigned char> Unhex(const std::string& s) {
  std::vector<unsigned char> out;
  for (size_t i = 0; i + 1 < s.size(); i += 2) out.push_back(static_cast<unsigned char>(std::stoi(s.substr(i, 2), nullptr, 16)));
  return out;
}

constexpr size_t kShared = 4096;  // bytes of the shared buffer, at offset 256 of its allocation

// The second process (this binary, started by the test below with the record in
// TESSERA_IPC_CHILD_RECORD): maps the parent's buffer, checks the parent's pattern and
// writes its own. Returns the process's exit code.
int RunIpcChild(const char* record) {
  const std::vector<unsigned char> rec = Unhex(record);
  IpcBuffer b;
  Status s = DecodeIpcBuffer(rec.data(), rec.size(), &b);
  if (s.ok() && cudaSetDevice(b.device) != cudaSuccess) s = Status(Code::kCudaError, "cudaSetDevice");
  std::unique_ptr<IpcMapping> m;
  if (s.ok()) s = IpcMapping::Open(b, &m);
  if (s.ok() && m->bytes() != kShared) s = InternalError("mapped " + std::to_string(m->bytes()) + " bytes");
  std::vector<unsigned char> data(kShared);
  if (s.ok() && cudaMemcpy(data.data(), m->data(), kShared, cudaMemcpyDeviceToHost) != cudaSuccess) {
    s = Status(Code::kCudaError, "cudaMemcpy from the mapping");
  }
  for (size_t i = 0; s.ok() && i < kShared; ++i) {
    if (data[i] != static_cast<unsigned char>(i * 7)) s = InternalError("wrong byte " + std::to_string(i));
  }
  for (size_t i = 0; i < kShared; ++i) data[i] = static_cast<unsigned char>(i * 13);
  if (s.ok() && (cudaMemcpy(m->data(), data.data(), kShared, cudaMemcpyHostToDevice) != cudaSuccess ||
                 cudaDeviceSynchronize() != cudaSuccess)) {
    s = Status(Code::kCudaError, "cudaMemcpy to the mapping");
  }
  if (!s.ok()) std::fprintf(stderr, "IPC child: %s\n", s.ToString().c_str());
  return s.ok() ? 0 : 1;
}

TEST(Gpu, BufferIsSharedWithAnotherProcess) {
  TESSERA_SKIP_WITHOUT_GPU();
  void* alloc = nullptr;
  ASSERT_EQ(cudaMalloc(&alloc, 256 + kShared), cudaSuccess);
  char* buf = static_cast<char*>(alloc) + 256;
  std::vector<unsigned char> data(kShared);
  for (size_t i = 0; i < kShared; ++i) data[i] = static_cast<unsigned char>(i * 7);
  ASSERT_EQ(cudaMemcpy(buf, data.data(), kShared, cudaMemcpyHostToDevice), cudaSuccess);
  IpcBuffer b;
  const Status s = ExportIpcBuffer(buf, kShared, &b);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(b.offset, 256u);
  std::vector<unsigned char> rec(kIpcRecordBytes);
  EncodeIpcBuffer(b, rec.data());

  const std::string env = "TESSERA_IPC_CHILD_RECORD=" + Hex(rec);
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  envp.push_back(const_cast<char*>(env.c_str()));
  envp.push_back(nullptr);
  char self[] = "/proc/self/exe";
  char* argv[] = {self, nullptr};
  pid_t child = 0;
  ASSERT_EQ(posix_spawn(&child, self, nullptr, nullptr, argv, envp.data()), 0);
  int status = 0;
  for (int waited_ms = 0; waitpid(child, &status, WNOHANG) == 0; waited_ms += 10) {
    if (waited_ms > 60000) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      FAIL() << "the child process did not finish within 60 s";
    }
    usleep(10000);
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  ASSERT_EQ(cudaMemcpy(data.data(), buf, kShared, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < kShared; ++i) ASSERT_EQ(data[i], static_cast<unsigned char>(i * 13)) << i;
  cudaFree(alloc);
}

}  // namespace
}  // namespace cuda
}  // namespace tessera

int main(int argc, char** argv) {
  if (const char* record = std::getenv("TESSERA_IPC_CHILD_RECORD")) return tessera::cuda::RunIpcChild(record);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
