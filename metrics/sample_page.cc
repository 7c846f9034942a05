#include "metrics/sample_page.h"

namespace tessera {

std::vector<HealthSnapshot> SamplePage() {
  HealthSnapshot a;
  a.comm_id = 0x0123456789abcdefull;
  a.rank = 0;
  a.nranks = 4;
  a.pid = 4242;
  a.host = "node \"a\"\\1";
  a.kinds[0].calls = 1000;
  a.kinds[0].bytes = 8000;
  a.kinds[0].time_us = 5000;
  a.kinds[0].buckets = {990, 10, 0, 0, 0, 0, 0, 0};
  a.kinds[kCallKinds - 1].calls = 2;
  a.kinds[kCallKinds - 1].failures = 1;
  a.stalled_us = 38000;
  a.peer_stall_us = {0, 1000, 2000, 35000};
  a.straggler.rank = 3;
  a.straggler.window_calls = 1000;
  a.straggler.last_calls = 910;
  a.straggler.median_lag_us = 38000;
  a.straggler.wait_permille = 910;
  a.straggler.cost_permille = 350;
  a.straggler.waiters = {0, 1, 2};
  a.straggler_host = "node-b";
  a.judge = true;
  HealthSnapshot b = a;
  b.comm_id = 7;
  b.straggler = StragglerVerdict();
  b.judge = false;
  b.broken = true;
  b.revokes = 1;
  return {a, b};
}

}  // namespace tessera
