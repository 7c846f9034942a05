// A real-launcher check of PmixShareFromRankZero, run by tests/pmix_share_test.sh under
// `mpirun -np 3`. Each rank detects its rank from the environment, then, by --mode:
//   share       --rounds N: rank 0 shares a fresh random blob each round (sizes vary, ""
//               included); every rank checks the blob's embedded checksum and prints
//               "rank R round I bytes B digest D OK"; the script checks that every rank
//               printed rank 0's digest.
//   mpi         one round before MPI_Init, the rounds inside MPI (PMIx shared with Open
//               MPI), each rank comparing its blob with rank 0's sent by MPI_Bcast, and
//               one round after MPI_Finalize.
//   mpi-first   the same with MPI initialising PMIx before the first share.
//   absent      the last rank initialises PMIx but never calls; the others must get a
//               Timeout error within their timeout (plus slack) and print
//               "rank R timeout OK".
//   no-launcher run without mpirun: the call must be InvalidUsage; prints "no-launcher OK".
// Exits 0 only when its own checks pass.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1  // the C API is enough; the C++ bindings do not build with -Wextra
#endif
#include <mpi.h>
#include <pmix.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "base/hash.h"
#include "base/status.h"
#include "bootstrap/launcher_env.h"
#include "bootstrap/pmix_share.h"

namespace tessera {
namespace {

// `payload_bytes` random bytes followed by their 8-byte checksum; "" for 0.
std::string RandomBlob(size_t payload_bytes) {
  if (payload_bytes == 0) return "";
  std::random_device seed;
  std::mt19937_64 random((static_cast<uint64_t>(seed()) << 32) ^ seed());
  std::string blob(payload_bytes, '\0');
  for (char& c : blob) c = static_cast<char>(random());
  uint64_t sum = Fnv1a(blob.data(), blob.size());
  blob.append(reinterpret_cast<const char*>(&sum), sizeof(sum));
  return blob;
}

bool ChecksumHolds(const std::string& blob) {
  if (blob.empty()) return true;
  if (blob.size() < 8) return false;
  uint64_t sum = 0;
  std::memcpy(&sum, blob.data() + blob.size() - 8, 8);
  return sum == Fnv1a(blob.data(), blob.size() - 8);
}

int Fail(int rank, const std::string& what) {
  std::fprintf(stderr, "rank %d FAILED: %s\n", rank, what.c_str());
  return 1;
}

// Rounds are numbered across calls, so every share of the process has its own number.
int next_round = 0;

int ShareRounds(const LaunchInfo& launch, int rounds, int64_t timeout_ms, bool with_mpi) {
  const size_t kPayloadBytes[] = {40, 0, 1, 100000, 3000};
  for (int last = next_round + rounds; next_round < last; ++next_round) {
    const int round = next_round;
    size_t payload = kPayloadBytes[round % 5];
    std::string blob = launch.rank == 0 ? RandomBlob(payload)
                                        : "not shared yet, rank " + std::to_string(launch.rank);
    Status s = PmixShareFromRankZero(launch.rank, &blob, timeout_ms);
    if (!s.ok()) return Fail(launch.rank, "round " + std::to_string(round) + ": " + s.ToString());
    if (!ChecksumHolds(blob) || blob.size() != (payload == 0 ? 0 : payload + 8)) {
      return Fail(launch.rank, "round " + std::to_string(round) + ": received " +
                                   std::to_string(blob.size()) + " bytes that are not rank 0's");
    }
    if (with_mpi) {
      // Rank 0's blob, sent a second way.
      int size = static_cast<int>(blob.size());
      std::string expected = launch.rank == 0 ? blob : std::string(size, '\0');
      MPI_Bcast(&expected[0], size, MPI_BYTE, 0, MPI_COMM_WORLD);
      if (expected != blob) return Fail(launch.rank, "blob differs from rank 0's MPI_Bcast");
    }
    std::printf("rank %d round %d bytes %zu digest %016llx OK\n", launch.rank, round, blob.size(),
                static_cast<unsigned long long>(Fnv1a(blob.data(), blob.size())));
    std::fflush(stdout);
  }
  return 0;
}

int Absent(const LaunchInfo& launch, int64_t timeout_ms) {
  if (launch.rank == launch.size - 1) {
    // Connect to PMIx (mpirun fails a job where some processes connect and others do not)
    // but never join the fence; stay past the others' timeout so that they time out
    // rather than see this process leave.
    pmix_proc_t self;
    if (PMIx_Init(&self, nullptr, 0) != PMIX_SUCCESS) return Fail(launch.rank, "PMIx_Init");
    std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms + 3000));
    PMIx_Finalize(nullptr, 0);
    std::printf("rank %d absent OK\n", launch.rank);
    return 0;
  }
  std::string blob = "from rank 0";
  auto start = std::chrono::steady_clock::now();
  Status s = PmixShareFromRankZero(launch.rank, &blob, timeout_ms);
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - start)
                    .count();
  if (s.code() != Code::kTimeout)
    return Fail(launch.rank, "expected a timeout, got " + s.ToString());
  // PMIx rounds the timeout up to whole seconds; allow that and some scheduling slack.
  if (waited > timeout_ms + 1000 + 2000) {
    return Fail(launch.rank, "timed out after " + std::to_string(waited) + " ms");
  }
  std::printf("rank %d timeout OK after %lld ms: %s\n", launch.rank, static_cast<long long>(waited),
              s.ToString().c_str());
  return 0;
}

int NoLauncher() {
  std::string blob = "x";
  Status s = PmixShareFromRankZero(0, &blob, 1000);
  if (s.code() != Code::kInvalidUsage) return Fail(0, "expected InvalidUsage, got " + s.ToString());
  std::printf("no-launcher OK: %s\n", s.ToString().c_str());
  return 0;
}

int Main(int argc, char** argv) {
  std::string mode = "share";
  int rounds = 5;
  int64_t timeout_ms = 20000;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--mode=", 0) == 0) {
      mode = arg.substr(7);
    } else if (arg.rfind("--rounds=", 0) == 0) {
      rounds = std::atoi(arg.c_str() + 9);
    } else if (arg.rfind("--timeout_ms=", 0) == 0) {
      timeout_ms = std::atoll(arg.c_str() + 13);
    } else {
      return Fail(-1, "unknown argument " + arg);
    }
  }
  if (mode == "no-launcher") return NoLauncher();

  LaunchInfo launch;
  Status s = DetectLaunch(nullptr, "", &launch);
  if (!s.ok()) return Fail(-1, s.ToString());
  if (launch.launcher != Launcher::kOpenMpi || !launch.use_pmix) {
    return Fail(launch.rank, std::string("expected Open MPI with PMIx, detected ") +
                                 LauncherName(launch.launcher) +
                                 (launch.use_pmix ? " with PMIx" : " without PMIx"));
  }
  if (mode == "share") return ShareRounds(launch, rounds, timeout_ms, /*with_mpi=*/false);
  if (mode == "absent") return Absent(launch, timeout_ms);
  if (mode == "mpi-first") {
    // MPI initialises PMIx first; a share after MPI_Finalize still works.
    MPI_Init(&argc, &argv);
    int result = ShareRounds(launch, rounds, timeout_ms, /*with_mpi=*/true);
    if (result != 0) MPI_Abort(MPI_COMM_WORLD, result);
    MPI_Finalize();
    return ShareRounds(launch, 1, timeout_ms, /*with_mpi=*/false);
  }
  if (mode == "mpi") {
    // Before MPI_Init, inside MPI (PMIx initialised twice), and after MPI_Finalize.
    if (ShareRounds(launch, 1, timeout_ms, /*with_mpi=*/false) != 0) return 1;
    MPI_Init(&argc, &argv);
    int result = ShareRounds(launch, rounds, timeout_ms, /*with_mpi=*/true);
    if (result != 0) MPI_Abort(MPI_COMM_WORLD, result);  // peers may wait in MPI_Bcast
    MPI_Finalize();
    return ShareRounds(launch, 1, timeout_ms, /*with_mpi=*/false);
  }
  return Fail(launch.rank, "unknown mode " + mode);
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) { return tessera::Main(argc, argv); }
