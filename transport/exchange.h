// The Exchange engine: runs a set of sends and receives over Links to completion,
// progressing them all together without blocking, spinning briefly and then sleeping
// on what the links say (futex doorbell, sockets), until all are done, one fails, the
// deadline passes, or the communicator is aborted. Failures name the peer(s). Every
// link's messages carry the exchange's call stamp where the wire has room.
#ifndef TESSERA_TRANSPORT_EXCHANGE_H_
#define TESSERA_TRANSPORT_EXCHANGE_H_

#include <atomic>
#include <cstddef>

#include "base/call_stamp.h"
#include "base/deadline.h"
#include "base/settings.h"
#include "base/status.h"
#include "transport/link_table.h"
#include "transport/progress_policy.h"
#include "transport/trace.h"
#include "transport/transport.h"

namespace tessera {

// One message of an exchange. Transfers on the same link and direction run in order.
struct Transfer {
  Link* link = nullptr;
  bool is_send = true;
  const void* src = nullptr;        // send: the data
  void* dst = nullptr;              // receive: where the result goes
  const void* acc = nullptr;        // receive with reduction: the other operand
  const Reducer* reducer = nullptr; // receive: null = copy
  size_t len = 0;
  // A send's gate: index (in the same exchange) of a receive that produces this send's
  // data; the send then moves only what that receive has made final, so a ring forwards
  // a block while it arrives. The send's data starts `gate_offset` bytes into what that
  // receive writes. -1: the data is all there.
  // A receive's gate: index of a transfer that must be done before this receive begins
  // (its destination or operand is written by that one, in another queue); later
  // transfers of its queue wait behind it. -1: none.
  int gate = -1;
  size_t gate_offset = 0;
  // A send whose receiver copies it (Recv, not RecvReduce): Link::set_peer_copies.
  bool to_copy = false;

  static Transfer Send(Link* l, const void* data, size_t len) {
    Transfer t;
    t.link = l; t.is_send = true; t.src = data; t.len = len;
    return t;
  }
  static Transfer Recv(Link* l, void* dst, size_t len) {
    Transfer t;
    t.link = l; t.is_send = false; t.dst = dst; t.len = len;
    return t;
  }
  static Transfer RecvReduce(Link* l, void* dst, const void* acc, const Reducer* r, size_t len) {
    Transfer t = Recv(l, dst, len);
    t.acc = acc; t.reducer = r;
    return t;
  }
  static Transfer SendAfter(Link* l, const void* data, size_t len, int gate, size_t gate_offset = 0) {
    Transfer t = Send(l, data, len);
    t.gate = gate;
    t.gate_offset = gate_offset;
    return t;
  }
  // Send `t` (Send or SendAfter) to a peer that receives it with Recv, not RecvReduce:
  // a transport may then wait for the peer to take the message before the send is
  // done, so the peer's receive must not wait for this rank to receive first. Not
  // passed on where the ranks outnumber the cores (ProgressPolicy::crowded).
  static Transfer ToCopy(Transfer t) {
    t.to_copy = true;
    return t;
  }
  // Receive `t` (Recv or RecvReduce), begun once transfer `gate` is done.
  static Transfer RecvAfter(Transfer t, int gate) {
    t.gate = gate;
    return t;
  }
};

// Told, from the exchange's thread, what a stalled exchange waits for each time it is
// about to sleep: the peers of its transfers not yet done and when anything last moved
// (NowMicros); and, once something moves again (or the wait ends), when the stall was
// over. Diagnosis reads what it was told from another thread; the stalls' lengths are
// what straggler detection compares (diagnosis/straggler.h).
class ExchangeObserver {
 public:
  virtual ~ExchangeObserver() = default;
  virtual void Waiting(const int* peers, size_t count, int64_t last_progress_us) = 0;
  // The stall that the last Waiting told of ended at `now_us` (NowMicros).
  virtual void Resumed(int64_t now_us) = 0;
};

struct ExchangeOptions {
  Deadline deadline = Deadline::Past();
  int64_t timeout_ms = 0;                  // for messages only
  ProgressPolicy* progress = nullptr;      // how a wait polls before sleeping; null: sleep at once
  const std::atomic<bool>* abort = nullptr;  // set by another thread: give up promptly
  LinkTable* notices = nullptr;              // where peers' failure notices arrive
  Tracer* tracer = nullptr;                  // records every message when tracing
  // The collective these messages belong to, the same on every rank (base/call_stamp.h);
  // null outside collectives (sends and receives, the cost-model probe).
  const CallStamp* stamp = nullptr;
  ExchangeObserver* observer = nullptr;      // null: nobody asks
  // TESSERA_CHECK_CALLS: links carry `stamp` and receivers compare it (Link::SetCall);
  // false: they carry a zero stamp, so no two calls differ.
  bool check_calls = SettingDefaults::check_calls != 0;
};

Status Exchange(Transfer* transfers, size_t count, const ExchangeOptions& options);

}  // namespace tessera

#endif  // TESSERA_TRANSPORT_EXCHANGE_H_
