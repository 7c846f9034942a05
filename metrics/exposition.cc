#include "metrics/exposition.h"

#include <cinttypes>
#include <cstdio>
#include <functional>

namespace tessera {
namespace {

std::string Number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

std::string Seconds(int64_t us) { return Number(static_cast<double>(us) / 1e6); }

// `comm="...",rank="..."`, the labels of every sample of `h`.
std::string Who(const HealthSnapshot& h) {
  char id[24];
  std::snprintf(id, sizeof(id), "%016" PRIx64, h.comm_id);
  return std::string("comm=\"") + id + "\",rank=\"" + std::to_string(h.rank) + "\"";
}

// One family: its HELP and TYPE lines, then `samples` of every communicator.
class Page {
 public:
  explicit Page(const std::vector<HealthSnapshot>& comms) : comms_(comms) {}
  void Family(const char* name, const char* type, const char* help,
              const std::function<void(const HealthSnapshot&, const std::string& who)>& samples) {
    out_ += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    for (const HealthSnapshot& h : comms_) samples(h, Who(h));
  }
  void Sample(const std::string& name, const std::string& labels, const std::string& value) {
    out_ += name + "{" + labels + "} " + value + "\n";
  }
  std::string text() const { return out_; }

 private:
  const std::vector<HealthSnapshot>& comms_;
  std::string out_;
};

std::string Kind(int k) { return ",kind=\"" + LabelValue(CallKindName(k)) + "\""; }

void CallFamilies(Page* p) {
  auto per_kind = [p](const char* name, std::function<std::string(const CallCounts&)> value) {
    return [p, name, value](const HealthSnapshot& h, const std::string& who) {
      for (int k = 0; k < kCallKinds; ++k) {
        if (h.kinds[k].calls > 0) p->Sample(name, who + Kind(k), value(h.kinds[k]));
      }
    };
  };
  p->Family("tessera_calls_total", "counter", "Calls that ended (done or failed), by kind.",
            per_kind("tessera_calls_total", [](const CallCounts& c) { return std::to_string(c.calls); }));
  p->Family("tessera_call_failures_total", "counter", "Calls that failed, by kind.",
            per_kind("tessera_call_failures_total", [](const CallCounts& c) { return std::to_string(c.failures); }));
  p->Family("tessera_bytes_total", "counter", "This rank's input bytes of the calls done, by kind.",
            per_kind("tessera_bytes_total", [](const CallCounts& c) { return std::to_string(c.bytes); }));
  p->Family("tessera_call_duration_seconds", "histogram",
            "Time of the calls, by kind, on the tick clock (each call within 1-4 ms; sums unbiased).",
            [p](const HealthSnapshot& h, const std::string& who) {
              for (int k = 0; k < kCallKinds; ++k) {
                const CallCounts& c = h.kinds[k];
                if (c.calls == 0) continue;
                uint64_t cumulative = 0;
                for (size_t b = 0; b < kCallTimeBuckets; ++b) {
                  cumulative += c.buckets[b];
                  const std::string le = b < kCallTimeBoundsUs.size() ? Seconds(kCallTimeBoundsUs[b]) : "+Inf";
                  p->Sample("tessera_call_duration_seconds_bucket", who + Kind(k) + ",le=\"" + le + "\"",
                            std::to_string(cumulative));
                }
                p->Sample("tessera_call_duration_seconds_sum", who + Kind(k), Seconds(c.time_us));
                p->Sample("tessera_call_duration_seconds_count", who + Kind(k), std::to_string(c.calls));
              }
            });
}

void WaitFamilies(Page* p) {
  p->Family("tessera_stalled_seconds_total", "counter",
            "Time this rank's calls stalled waiting on peers (waits past the spin budget).",
            [p](const HealthSnapshot& h, const std::string& who) {
              p->Sample("tessera_stalled_seconds_total", who, Seconds(h.stalled_us));
            });
  p->Family("tessera_peer_stalled_seconds_total", "counter",
            "Time this rank stalled while a transfer with that peer was pending.",
            [p](const HealthSnapshot& h, const std::string& who) {
              for (size_t q = 0; q < h.peer_stall_us.size(); ++q) {
                if (static_cast<int>(q) == h.rank) continue;
                p->Sample("tessera_peer_stalled_seconds_total", who + ",peer=\"" + std::to_string(q) + "\"",
                          Seconds(h.peer_stall_us[q]));
              }
            });
}

void StragglerFamilies(Page* p) {
  auto named = [](const HealthSnapshot& h, const std::string& who) {
    return who + ",straggler=\"" + std::to_string(h.straggler.rank) + "\",straggler_host=\"" +
           LabelValue(h.straggler_host) + "\"";
  };
  p->Family("tessera_straggler", "gauge",
            "The straggler named by the verdict: the share of the window's waiting on late ranks that was on it "
            "(no sample: none named).",
            [p, named](const HealthSnapshot& h, const std::string& who) {
              if (h.straggler.named()) p->Sample("tessera_straggler", named(h, who), Number(h.straggler.wait_permille / 1000.0));
            });
  p->Family("tessera_straggler_late_calls", "gauge", "Of the window's collectives, those the straggler arrived last in.",
            [p, named](const HealthSnapshot& h, const std::string& who) {
              if (h.straggler.named()) p->Sample("tessera_straggler_late_calls", named(h, who), std::to_string(h.straggler.last_calls));
            });
  p->Family("tessera_straggler_lag_seconds", "gauge",
            "The straggler's median lag behind the first rank, over the calls it arrived last in.",
            [p, named](const HealthSnapshot& h, const std::string& who) {
              if (h.straggler.named()) p->Sample("tessera_straggler_lag_seconds", named(h, who), Seconds(h.straggler.median_lag_us));
            });
  p->Family("tessera_straggler_judge", "gauge", "1 on the rank that judges stragglers (its verdict is current).",
            [p](const HealthSnapshot& h, const std::string& who) {
              p->Sample("tessera_straggler_judge", who, h.judge ? "1" : "0");
            });
}

void StateFamilies(Page* p) {
  p->Family("tessera_info", "gauge", "The rank's host, pid and communicator size.",
            [p](const HealthSnapshot& h, const std::string& who) {
              p->Sample("tessera_info",
                        who + ",host=\"" + LabelValue(h.host) + "\",pid=\"" + std::to_string(h.pid) + "\",nranks=\"" +
                            std::to_string(h.nranks) + "\"",
                        "1");
            });
  p->Family("tessera_broken", "gauge", "1 once a call failed while communicating (the communicator is broken).",
            [p](const HealthSnapshot& h, const std::string& who) { p->Sample("tessera_broken", who, h.broken ? "1" : "0"); });
  p->Family("tessera_revokes_total", "counter", "tesseraCommRevoke on this communicator.",
            [p](const HealthSnapshot& h, const std::string& who) {
              p->Sample("tessera_revokes_total", who, std::to_string(h.revokes));
            });
  p->Family("tessera_shrinks_total", "counter", "Communicators shrunk from this one.",
            [p](const HealthSnapshot& h, const std::string& who) {
              p->Sample("tessera_shrinks_total", who, std::to_string(h.shrinks));
            });
}

}  // namespace

std::string LabelValue(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string PrometheusText(const std::vector<HealthSnapshot>& comms) {
  Page p(comms);
  StateFamilies(&p);
  CallFamilies(&p);
  WaitFamilies(&p);
  StragglerFamilies(&p);
  return p.text();
}

std::string HealthPage(const std::vector<HealthSnapshot>& comms) {
  std::string out = "{\"communicators\": [";
  for (size_t i = 0; i < comms.size(); ++i) out += (i > 0 ? ", " : "") + HealthJson(comms[i]);
  return out + "]}\n";
}

}  // namespace tessera
