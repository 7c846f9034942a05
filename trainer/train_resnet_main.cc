// train_resnet: data-parallel ResNet-50 training on tessera.
//
//   mpirun -np 2 train_resnet --data=/path/to/imagenet --batch=0:256,5:512 ...
//   train_resnet --data=...          (a single process)
//
// Creates the job's communicator from the launcher's environment
// (tesseraCommInitFromEnv: mpirun, srun, torchrun variables, or rank 0 of 1), splits a
// second one off for the gradient thread, and runs the Trainer. Exit status: 0 done,
// 1 a failure (named on stderr with the rank), 2 bad flags.
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "tessera/tessera.h"
#include "trainer/train_settings.h"
#include "trainer/trainer.h"

namespace {

// Ranks sharing this host, from the launcher's environment (1 if none says).
int LocalRanks() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE", "MPI_LOCALNRANKS"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && std::atoi(value) > 0) return std::atoi(value);
  }
  return 1;
}

// This rank's index among the ranks of its host (0 if no launcher says).
int LocalRank() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"}) {
    const char* value = std::getenv(name);
    if (value != nullptr) return std::max(0, std::atoi(value));
  }
  return 0;
}

int Fail(int rank, const std::string& message) {
  std::fprintf(stderr, "train_resnet: rank %d: error: %s\n", rank, message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  trainer::TrainSettings settings;
  tessera::Status parsed = trainer::ParseTrainSettings(argc, argv, &settings);
  if (!parsed.ok()) {
    std::fprintf(stderr, "train_resnet: %s\n(train_resnet --help lists the flags)\n", parsed.message().c_str());
    return 2;
  }
  if (settings.help) {
    std::fputs(trainer::TrainSettingsHelp().c_str(), stdout);
    return 0;
  }

  // Half-precision gradients should also travel in 16 bits (each hop still adds in
  // float32): tessera's TESSERA_HALF_WIRE, unless the user chose otherwise. Every rank
  // parses the same flags, so every rank agrees.
  if (settings.wire_type != trainer::WireType::kFloat32) setenv("TESSERA_HALF_WIRE", "half", /*overwrite=*/0);
  // --deterministic: tessera's deterministic mode, and one torch thread unless --threads
  // says otherwise (libtorch's CPU kernels may split their sums by thread count).
  if (settings.deterministic) setenv("TESSERA_DETERMINISTIC", "1", /*overwrite=*/1);
  trainer::Communicators comms;
  tesseraResult_t result = tesseraCommInitFromEnv(&comms.main);
  if (result != tesseraSuccess) {
    return Fail(-1, std::string("tesseraCommInitFromEnv failed: ") + tesseraGetLastError(nullptr));
  }
  tesseraCommUserRank(comms.main, &comms.rank);
  tesseraCommCount(comms.main, &comms.world);
  // The gradient thread gets a communicator of its own: calls on one communicator
  // must be serialised, and the loop's own collectives run beside the thread's.
  result = tesseraCommSplit(comms.main, 0, comms.rank, &comms.gradients, nullptr);
  if (result != tesseraSuccess) {
    std::string message = std::string("tesseraCommSplit failed: ") + tesseraGetLastError(comms.main);
    tesseraCommDestroy(comms.main);
    return Fail(comms.rank, message);
  }

  // --device=cuda without an index: one GPU per local rank.
  if (settings.device == "cuda") settings.device = "cuda:" + std::to_string(LocalRank());

  int threads = settings.threads;
  if (threads == 0 && settings.deterministic) threads = 1;
  if (threads == 0) threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / LocalRanks());
  torch::set_num_threads(threads);

  tessera::Status status;
  std::unique_ptr<trainer::Trainer> loop;
  try {
    loop = std::make_unique<trainer::Trainer>(settings, comms);
    status = loop->Run();
  } catch (const std::exception& error) {  // libtorch reports errors by exception
    status = tessera::InternalError(std::string("libtorch: ") + error.what());
  }
  // After lost ranks (--elastic) the trainer holds the survivors' communicators.
  const trainer::Communicators in_use = loop != nullptr ? loop->communicators() : comms;
  loop.reset();
  tesseraCommDestroy(in_use.gradients);
  tesseraCommDestroy(in_use.main);
  if (!status.ok()) return Fail(in_use.rank, status.message());
  return 0;
}
