// Communicator: one rank's membership of a group, owning its settings, its links to
// peers and its sticky error. The C API (c_api.cc) is a thin shim over it.
#ifndef TESSERA_COMM_COMMUNICATOR_H_
#define TESSERA_COMM_COMMUNICATOR_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "base/log.h"
#include "base/settings.h"
#include "base/status.h"
#include "base/types.h"
#include "bootstrap/rendezvous.h"
#include "collectives/collective.h"
#include "transport/link_table.h"

namespace tessera {

class Communicator {
 public:
  // Joins the rendezvous of `id` as `rank` of `nranks` and sets up transports.
  // Arguments are assumed validated by the caller.
  static Status Create(const Settings& settings, const UniqueIdData& id, int nranks, int rank,
                       std::unique_ptr<Communicator>* out);
  ~Communicator();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const Settings& settings() const { return settings_; }
  LogLevel log_level() const { return log_level_; }

  // Collectives. Arguments are validated by the caller. A failure here breaks the
  // communicator: later calls return the same error without communicating.
  Status AllReduce(const void* send, void* recv, size_t count, DataType type, RedOp op);

  // Thread-safe: the error that broke the communicator, or OK.
  Status sticky_error() const;
  // Thread-safe: makes a blocked or future collective fail promptly.
  void RequestAbort() { abort_.store(true); }

 private:
  Communicator() = default;
  Status Init(const Settings& settings, const UniqueIdData& id, int nranks, int rank);
  CollectiveContext Context() const;
  // Records `s` as the sticky error (the first one wins) and returns it.
  Status Break(const Status& s);

  Settings settings_;
  LogLevel log_level_ = LogLevel::kWarn;
  int rank_ = 0;
  int nranks_ = 1;
  int64_t spin_us_ = 0;
  std::unique_ptr<LinkTable> links_;
  std::atomic<bool> abort_{false};
  mutable std::mutex error_mu_;
  Status error_;
};

}  // namespace tessera

#endif  // TESSERA_COMM_COMMUNICATOR_H_
