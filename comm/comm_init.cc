#include "comm/comm_init.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/rendezvous.h"
#include "comm/call_validation.h"
#include "comm/group_runner.h"
#include "comm/handle_registry.h"
#include "comm/last_error.h"
#include "comm/launch.h"
#include "topology/host_identity.h"

namespace tessera {
namespace {

// A tesseraConfig_t's fields, with the defaults applied.
struct Config {
  bool blocking = true;
  const char* name = nullptr;
  int64_t timeout_ms = 0;  // 0: keep the settings' TESSERA_TIMEOUT_MS
  int deterministic = -1;  // -1: keep the settings' TESSERA_DETERMINISTIC
};

// The settings a communicator is created with: `settings` with what `config` sets.
Settings WithConfig(Settings settings, const Config& config) {
  if (config.timeout_ms > 0) settings.timeout_ms = config.timeout_ms;
  if (config.deterministic >= 0) settings.deterministic = config.deterministic;
  return settings;
}

// A field that is 0 or 1 where the config sets it (else TESSERA_CONFIG_UNDEF_INT).
Status ReadFlag(int value, const char* field, int* out) {
  if (value == TESSERA_CONFIG_UNDEF_INT) return Status::Ok();
  if (value != 0 && value != 1) {
    return InvalidArgument(std::string("config.") + field + " must be 0 or 1, not " + std::to_string(value));
  }
  *out = value;
  return Status::Ok();
}

Status ReadConfig(const tesseraConfig_t* config, Config* out) {
  if (config == nullptr) return Status::Ok();
  if (config->magic != TESSERA_CONFIG_MAGIC || config->size != sizeof(tesseraConfig_t) || config->version == 0 ||
      config->version > TESSERA_VERSION_CODE) {
    return InvalidArgument("config is not initialised with TESSERA_CONFIG_INITIALIZER (bad size, magic or version)");
  }
  int blocking = out->blocking ? 1 : 0;
  TESSERA_RETURN_IF_ERROR(ReadFlag(config->blocking, "blocking", &blocking));
  out->blocking = blocking == 1;
  out->name = config->commName;
  if (config->timeoutMs != TESSERA_CONFIG_UNDEF_INT) {
    if (config->timeoutMs <= 0) {
      return InvalidArgument("config.timeoutMs must be > 0, not " + std::to_string(config->timeoutMs));
    }
    out->timeout_ms = config->timeoutMs;
  }
  return ReadFlag(config->deterministic, "deterministic", &out->deterministic);
}

// A handle for a communicator created on this thread; `blocking` false gives it a worker.
tesseraComm* Handed(std::unique_ptr<Communicator> impl, const char* name, bool blocking) {
  tesseraComm* handle = NewHandle(impl->rank(), impl->nranks(), name, impl->settings());
  handle->Publish(std::move(impl));
  if (!blocking) handle->worker = std::make_unique<AsyncWorker>();
  return handle;
}

// Creates a communicator into a new handle; non-blocking: on the handle's worker.
Status InitInto(const char* fn, int nranks, const UniqueIdData& id, int rank, const Settings& settings,
                const Config& config, tesseraComm** out) {
  tesseraComm* handle = NewHandle(rank, nranks, config.name, settings);
  auto create = [handle, settings, id, nranks, rank]() -> Status {
    std::unique_ptr<Communicator> created;
    Status s = Communicator::Create(settings, id, nranks, rank, &created);
    if (s.ok()) s = DevicePath::Attach(created.get());
    if (created) handle->Publish(std::move(created));
    return s.Annotate("rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  };
  if (!config.blocking) {
    handle->worker = std::make_unique<AsyncWorker>();
    handle->worker->Post([handle, create, fn] {
      Status s = create();
      Report(handle, fn, s);
      return s;
    });
    *out = handle;
    return Status(Code::kInProgress, "created on the communicator's worker");
  }
  Status s = create();
  if (!s.ok()) {
    DiscardHandle(handle);
    return s;
  }
  *out = handle;
  return Status::Ok();
}

}  // namespace

Status NewApiUniqueId(tesseraUniqueId* out) {
  if (out == nullptr) return InvalidArgument("uniqueId is NULL");
  Settings settings;
  TESSERA_RETURN_IF_ERROR(Settings::FromEnvironment(&settings));
  UniqueIdData id;
  TESSERA_RETURN_IF_ERROR(NewUniqueId(settings, -1, HostIdentity(settings.host_id), &id));
  EncodeUniqueId(id, out->internal);
  return Status::Ok();
}

Status InitRank(const char* fn, int nranks, const tesseraUniqueId& id, int rank, const tesseraConfig_t* config,
                tesseraComm** out) {
  if (out == nullptr) return InvalidArgument("comm is NULL");
  *out = nullptr;
  TESSERA_RETURN_IF_ERROR(ValidateRank(nranks, rank));
  Config cfg;
  UniqueIdData decoded;
  Settings settings;
  Status s = ReadConfig(config, &cfg);
  if (s.ok()) s = DecodeUniqueId(id.internal, &decoded);
  if (s.ok()) s = Settings::FromEnvironment(&settings);
  if (!s.ok()) return s.Annotate("rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  return InitInto(fn, nranks, decoded, rank, WithConfig(settings, cfg), cfg, out);
}

tesseraResult_t InitAll(tesseraComm** comms, int ndev) {
  const char* fn = "tesseraCommInitAll";
  if (comms == nullptr) return Report(nullptr, fn, InvalidArgument("comms is NULL"));
  if (ndev <= 0) return Report(nullptr, fn, InvalidArgument("ndev " + std::to_string(ndev) + " must be > 0"));
  tesseraUniqueId id;
  const Status made = NewApiUniqueId(&id);
  if (!made.ok()) return Report(nullptr, "tesseraGetUniqueId", made);
  std::vector<tesseraResult_t> results(ndev, tesseraSuccess);
  std::vector<std::string> errors(ndev);
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; ++i) {
    threads.emplace_back([&, i] {
      const char* rank_fn = "tesseraCommInitRank";
      results[i] = Report(nullptr, rank_fn, InitRank(rank_fn, ndev, id, i, nullptr, &comms[i]));
      if (results[i] != tesseraSuccess) errors[i] = ThreadLastError();
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < ndev; ++i) {
    if (results[i] == tesseraSuccess) continue;
    for (int j = 0; j < ndev; ++j) {
      if (results[j] == tesseraSuccess) ReleaseHandle(comms[j], false);
      comms[j] = nullptr;
    }
    SetThreadLastError(errors[i]);
    return results[i];
  }
  return tesseraSuccess;
}

Status InitFromEnv(tesseraComm** out) {
  if (out == nullptr) return InvalidArgument("comm is NULL");
  *out = nullptr;
  Settings settings;
  TESSERA_RETURN_IF_ERROR(Settings::FromEnvironment(&settings));
  std::unique_ptr<Communicator> impl;
  TESSERA_RETURN_IF_ERROR(CreateFromLauncher(settings, &impl));
  TESSERA_RETURN_IF_ERROR(DevicePath::Attach(impl.get()));
  *out = Handed(std::move(impl), nullptr, true);
  return Status::Ok();
}

Status SplitHandle(tesseraComm* comm, int color, int key, const tesseraConfig_t* config, tesseraComm** out) {
  if (out == nullptr) return InvalidArgument("newcomm is NULL");
  *out = nullptr;
  if (color < 0 && color != TESSERA_SPLIT_NOCOLOR) {
    return InvalidArgument("color " + std::to_string(color) + " must be >= 0 or TESSERA_SPLIT_NOCOLOR");
  }
  Config cfg;
  TESSERA_RETURN_IF_ERROR(ReadConfig(config, &cfg));
  if (InGroup()) return InvalidUsage("tesseraCommSplit inside a group is not supported");
  comm->WaitIdle();
  if (!comm->impl()) return InvalidUsage("the parent communicator was never created");
  std::unique_ptr<Communicator> impl;
  TESSERA_RETURN_IF_ERROR(comm->impl()->Split(color, key, WithConfig(comm->impl()->settings(), cfg), &impl));
  if (!impl) return Status::Ok();  // TESSERA_SPLIT_NOCOLOR
  TESSERA_RETURN_IF_ERROR(DevicePath::Attach(impl.get()));
  *out = Handed(std::move(impl), cfg.name, config != nullptr ? cfg.blocking : comm->worker == nullptr);
  return Status::Ok();
}

Status ShrinkHandle(tesseraComm* comm, const int* exclude_ranks, int exclude_count, const tesseraConfig_t* config,
                    int flags, tesseraComm** out) {
  if (out == nullptr) return InvalidArgument("newcomm is NULL");
  *out = nullptr;
  TESSERA_RETURN_IF_ERROR(ValidateShrink(exclude_ranks, exclude_count, flags));
  Config cfg;
  TESSERA_RETURN_IF_ERROR(ReadConfig(config, &cfg));
  if (InGroup()) return InvalidUsage("tesseraCommShrink inside a group is not supported");
  if (!comm->impl()) return InvalidUsage("the parent communicator was never created");
  if ((flags & TESSERA_SHRINK_ABORT) != 0) comm->impl()->Revoke();
  comm->WaitIdle();
  const std::vector<int> exclude(exclude_ranks, exclude_ranks + exclude_count);
  const bool lost = (flags & TESSERA_SHRINK_LOST) != 0;
  std::unique_ptr<Communicator> impl;
  TESSERA_RETURN_IF_ERROR(comm->impl()->Shrink(exclude, lost, WithConfig(comm->impl()->settings(), cfg), &impl));
  TESSERA_RETURN_IF_ERROR(DevicePath::Attach(impl.get()));
  *out = Handed(std::move(impl), cfg.name, config != nullptr ? cfg.blocking : comm->worker == nullptr);
  return Status::Ok();
}

}  // namespace tessera
