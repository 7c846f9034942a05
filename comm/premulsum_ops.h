// The PreMulSum operators created on one communicator (tesseraRedOpCreatePreMulSum), by
// operator id (>= kNumRedOps: the built-in operators come first). Thread-safe, with its
// own lock: the C API creates and destroys operators from any thread while the
// communicator's worker may be reading a scalar for a reduction that is running.
#ifndef TESSERA_COMM_PREMULSUM_OPS_H_
#define TESSERA_COMM_PREMULSUM_OPS_H_

#include <map>
#include <mutex>

#include "base/status.h"
#include "base/types.h"

namespace tessera {

class PreMulSumOps {
 public:
  // One operator's scalar, copied out under the lock (the operator may be destroyed
  // while a reduction uses it).
  struct Scalar {
    double copy[1] = {0.0};           // the value copied at creation (room for any type)
    const void* external = nullptr;   // else the caller's pointer, read at each call
    const void* get() const { return external != nullptr ? external : copy; }
  };

  // A new operator that scales by the value of `type` at `scalar`: copied now when
  // `read_now`, else read at each call (the pointer must stay valid until Destroy).
  Status Create(const void* scalar, DataType type, bool read_now, int* op);
  // InvalidArgument when `op` is not a live operator of this set.
  Status Destroy(int op);
  // InvalidArgument unless `op` is a built-in operator or a live one created for `type`.
  Status Validate(int op, DataType type) const;
  // The scalar of live operator `op`; InvalidArgument when it is not live.
  Status Get(int op, Scalar* out) const;

 private:
  struct Entry {
    DataType type;
    Scalar scalar;
  };
  mutable std::mutex mu_;
  std::map<int, Entry> ops_;
  int next_op_ = kNumRedOps;
};

}  // namespace tessera

#endif  // TESSERA_COMM_PREMULSUM_OPS_H_
