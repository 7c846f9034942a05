// collective_calls: one call of any tessera collective, with its buffers laid out as
// the header's rules ask (in place or not, root or not) and its results checked against
// a serial reference (typed_values). Used by the collective matrix, which runs calls
// one by one, and by the group tests, which prepare many, issue them all inside one
// group and check them after tesseraGroupEnd.
#ifndef TESSERA_TESTS_COLLECTIVE_CALLS_H_
#define TESSERA_TESTS_COLLECTIVE_CALLS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "tessera/tessera.h"
#include "tests/typed_values.h"

namespace tessera_test {

enum class Collective {
  kAllReduce,
  kReduce,
  kReduceScatter,
  kBroadcast,
  kBcast,
  kAllGather,
  kAlltoAll,
  kGather,
  kScatter,
  kSendRecv,  // a ring: send to rank + 1, receive from rank - 1
};

std::vector<Collective> AllCollectives();
const char* CollectiveName(Collective c);
bool Reduces(Collective c);
bool Rooted(Collective c);
// The placements a collective has: {false, true}, {false} for AlltoAll (buffers must not
// overlap), {true} for Bcast. For kSendRecv, true stands for "ungrouped" (see below).
std::vector<bool> Placements(Collective c);
// AllReductionKinds() for reductions, {kCopy} otherwise.
std::vector<OpKind> OpsOf(Collective c);

struct CallSpec {
  Collective kind;
  tesseraDataType_t type;
  OpKind op;        // kCopy for data movement
  bool in_place;    // kSendRecv: issue the two calls without a group of their own
  int root;         // rooted collectives
  size_t count;     // the count argument of the call (per rank block where it applies)
  int call_index;   // alternates the PreMulSum scalar's residence and send/recv orders
};

// "reduce float16 avg in-place count 1031 root 2 on rank 1 of 3".
std::string Describe(const CallSpec& s, int rank, int nranks);

// Remote errors, timeouts, system and internal errors: the communicator cannot be used
// any more (every later call would wait for peers that stopped).
bool IsFatal(tesseraResult_t r);

// One call, from its buffers to its checks. Not copyable: the buffers' addresses are
// handed to the library.
class PreparedCall {
 public:
  // Lays out the buffers of rank `rank` of `nranks` for `spec`.
  PreparedCall(const CallSpec& spec, int rank, int nranks);
  PreparedCall(const PreparedCall&) = delete;
  PreparedCall& operator=(const PreparedCall&) = delete;

  const CallSpec& spec() const { return spec_; }
  const std::string& what() const { return what_; }

  // For PreMulSum: creates the operator on comm (a no-op otherwise).
  tesseraResult_t CreateOp(tesseraComm_t comm);
  // Destroys what CreateOp created (a no-op otherwise).
  tesseraResult_t DestroyOp(tesseraComm_t comm);
  // Issues the call on comm. kSendRecv: the send and the receive of the ring, inside a
  // group of their own (in an order that alternates with call_index and rank) unless
  // spec.in_place, where they are blocking calls ordered so that no cycle waits (even
  // ranks send first). *step names the call that failed.
  tesseraResult_t Issue(tesseraComm_t comm, std::string* step);
  // After completion: "" or what is wrong with the results or with buffers that had
  // to stay unchanged.
  std::string Check() const;
  // True while no buffer of the call has changed (e.g. before a group has run it).
  bool Untouched() const { return a_ == a_before_ && b_ == b_before_; }

 private:
  // The pointers handed to the library for this rank.
  const void* SendPointer() const;
  void* RecvPointer() const;
  std::string CheckReduced(const void* got, size_t count, size_t first) const;
  std::string CheckUnchanged(const std::vector<unsigned char>& got,
                             const std::vector<unsigned char>& before, const std::string& what) const;

  CallSpec spec_;
  int rank_;
  int nranks_;
  std::string what_;
  // input_[r][j]: rank r's value at position j (mod kPeriod); want_[j]: the reduction;
  // tolerance_[j] > 0 where the reduction is not exact (empty: exact).
  std::vector<std::vector<double>> input_;
  std::vector<double> want_;
  std::vector<double> tolerance_;
  double scalar_ = 0;
  unsigned char scalar_bytes_[8] = {0};  // the PreMulSum scalar, encoded as spec.type
  // a_: the send side or the in-place buffer; b_: the receive side.
  mutable std::vector<unsigned char> a_, b_;
  std::vector<unsigned char> a_before_, b_before_;
  tesseraRedOp_t op_;
  bool created_op_ = false;
};

// How far from sum / n an average of floats may be: one ulp of the result's type (the
// final rounding), plus what NCCL's way (x * (1/n) on each rank, then a sum in the
// accumulation type: float32 for halves and float32, float64 for float64) may add, n
// roundings of the largest term. A wrong divisor or a missing division is far outside.
double AverageTolerance(tesseraDataType_t type, double want, double largest_input, int nranks);

}  // namespace tessera_test

#endif  // TESSERA_TESTS_COLLECTIVE_CALLS_H_
