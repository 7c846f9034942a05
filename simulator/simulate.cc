// simulate: tessera's own schedules replayed on a SimGrid platform, printed as
// nccl-tests rows (docs/scale.md).
//
//   bazel run //simulator:simulate -- --platform $PWD/simulator/platforms/abci.platform
//       --layout 544x4 --torus 32x68 -b 51114064 -e 51114064 -d half --half-wire half
//
// For every size (nccl-tests' -b -e -f, and -d for the element type) and every
// algorithm that applies to the layout (--algo to choose some), one simulation: the
// schedules recorded from the algorithm's code for every rank, replayed with one actor
// per rank. Each row gives the simulated time, algbw and busbw, and the time the cost
// model predicts for that algorithm; an "auto" row follows with the algorithm the
// cost model (collectives/algorithms.cc, with the platform's parameters or --tuning)
// would choose, and a comment line with the simulated best. --json FILE also writes
// every simulation as one JSON object per line, with what it cost to run.
// --record-only records the schedules and says what that cost; --choice-only prints the
// cost model's predictions and choice alone; --contenders simulates, of the asked rows,
// those the model predicts within kContenderSpread (3x) of its best (algorithms.h), as
// TESSERA_AUTOTUNE measures them in a job.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "base/settings.h"
#include "bench/perf_options.h"
#include "collectives/algorithms.h"
#include "simulator/platform.h"
#include "simulator/recorder.h"
#include "simulator/replay.h"

namespace tessera {
namespace {

struct Options {
  std::string platform, layout, torus, tuning, json;
  std::string half_wire = SettingDefaults::half_wire;
  std::string collective = "allreduce";
  std::vector<std::string> algos;  // empty: every row that applies
  bool record_only = false;
  bool choice_only = false;
  bool contenders = false;  // only the rows the model predicts within kContenderSpread of its best
  tessera_bench::PerfOptions perf;
};

const char kUsage[] =
    "usage: simulate --platform FILE --layout HxR|LAYOUT_FILE [--torus XxY] [--algo a,b,...]\n"
    "                [--collective allreduce|allgather|reduce-scatter|broadcast|reduce]\n"
    "                [--half-wire float32|half] [--tuning FILE] [--json FILE] [--record-only | --choice-only]\n"
    "                [--contenders]\n"
    "                [-b MIN] [-e MAX] [-f FACTOR] [-d TYPE]  (nccl-tests' flags)\n";

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// Our --flags, then nccl-tests' flags for the rest.
Status ParseOptions(int argc, char** argv, Options* o) {
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return InvalidArgument(a + " needs a value\n" + kUsage);
      *out = argv[++i];
      return Status::Ok();
    };
    std::string algos;
    if (a == "--platform") TESSERA_RETURN_IF_ERROR(value(&o->platform));
    else if (a == "--layout") TESSERA_RETURN_IF_ERROR(value(&o->layout));
    else if (a == "--torus") TESSERA_RETURN_IF_ERROR(value(&o->torus));
    else if (a == "--tuning") TESSERA_RETURN_IF_ERROR(value(&o->tuning));
    else if (a == "--json") TESSERA_RETURN_IF_ERROR(value(&o->json));
    else if (a == "--half-wire") TESSERA_RETURN_IF_ERROR(value(&o->half_wire));
    else if (a == "--collective") TESSERA_RETURN_IF_ERROR(value(&o->collective));
    else if (a == "--record-only") o->record_only = true;
    else if (a == "--choice-only") o->choice_only = true;
    else if (a == "--contenders") o->contenders = true;
    else if (a == "--algo") {
      TESSERA_RETURN_IF_ERROR(value(&algos));
      o->algos = Split(algos);
    } else {
      rest.push_back(argv[i]);
    }
  }
  const tessera_bench::ParsedOptions perf = tessera_bench::ParsePerfOptions(static_cast<int>(rest.size()), rest.data());
  if (!perf.ok) return InvalidArgument(perf.error + "\n" + kUsage);
  o->perf = perf.options;
  if (o->platform.empty() || o->layout.empty()) return InvalidArgument(std::string("--platform and --layout are needed\n") + kUsage);
  if (o->half_wire != "float32" && o->half_wire != "half") return InvalidArgument("--half-wire is float32 or half");
  return Status::Ok();
}

// nccl-tests' bus bandwidth factor of each collective.
double BusFactor(OpKind c, int p) {
  if (c == OpKind::kAllReduce) return 2.0 * (p - 1) / p;
  if (c == OpKind::kAllGather || c == OpKind::kReduceScatter) return (p - 1.0) / p;
  return 1.0;
}

Status LoadLayout(const std::string& spec, Layout* out) {
  if (access(spec.c_str(), R_OK) == 0) return ReadLayoutFile(spec, out);
  return LayoutFromSpec(spec, out);
}

struct Row {
  std::string algo;
  double seconds = -1, predicted_s = -1;
  ReplayResult replay;
};

void PrintRow(size_t bytes, size_t count, const char* type, const Row& row, double factor) {
  const double algbw = bytes / row.seconds / 1e9;
  std::printf("%12zu %12zu %8s %5s %4d %-22s %12.1f %7.3f %7.3f %12.1f\n", bytes, count, type, "sum", -1,
              row.algo.c_str(), row.seconds * 1e6, algbw, algbw * factor, row.predicted_s * 1e6);
}

void PrintRecording(size_t bytes, const Row& row) {
  std::printf("# recorded %s of %zu B: %llu messages, %.1f MB of schedules, %.2f s, peak resident %.1f MB\n",
              row.algo.c_str(), bytes, static_cast<unsigned long long>(row.replay.messages),
              row.replay.schedule_bytes / 1e6, row.replay.record_wall_s, row.replay.max_rss_bytes / 1e6);
}

void WriteJson(FILE* f, const Options& o, const std::string& platform_name, const Shape& s, size_t bytes, const Row& row,
               const std::string& chosen) {
  if (f == nullptr) return;
  std::fprintf(f,
               "{\"platform\": \"%s\", \"platform_name\": \"%s\", \"layout\": \"%s\", \"ranks\": %d, \"hosts\": %d, \"torus\": \"%dx%d\", "
               "\"collective\": \"%s\", \"bytes\": %zu, \"algorithm\": \"%s\", \"seconds\": %.9g, "
               "\"predicted_seconds\": %.9g, \"auto_choice\": \"%s\", \"messages\": %llu, \"schedule_bytes\": %llu, "
               "\"record_wall_s\": %.3f, \"replay_wall_s\": %.3f, \"max_rss_bytes\": %llu}\n",
               o.platform.c_str(), platform_name.c_str(), o.layout.c_str(), s.p, s.hosts, s.torus_x, s.torus_y, o.collective.c_str(), bytes,
               row.algo.c_str(), row.seconds, row.predicted_s, chosen.c_str(),
               static_cast<unsigned long long>(row.replay.messages),
               static_cast<unsigned long long>(row.replay.schedule_bytes), row.replay.record_wall_s,
               row.replay.replay_wall_s, static_cast<unsigned long long>(row.replay.max_rss_bytes));
  std::fflush(f);
}

// Everything one run of the command simulates on.
struct Setup {
  const Options* o = nullptr;
  Platform platform;
  Layout layout;
  OpKind c = OpKind::kAllReduce;
  std::unique_ptr<CallRecorder> recorder;
  CostModel model;
  tessera_bench::DataType type = tessera_bench::DataType::kFloat32;
  size_t type_size = 4, wire = 4;           // bytes per element: the user's, and on the wire
  std::vector<const AlgorithmInfo*> rows;   // what --algo asks for, where it applies
  FILE* json = nullptr;

  const Shape& shape() const { return recorder->shape(); }
  double factor() const { return BusFactor(c, shape().p); }
};

Status Prepare(const Options& o, Setup* s) {
  s->o = &o;
  TESSERA_RETURN_IF_ERROR(ReadPlatformFile(o.platform, &s->platform));
  TESSERA_RETURN_IF_ERROR(LoadLayout(o.layout, &s->layout));
  if (!OpKindByName(o.collective, &s->c)) {
    return InvalidArgument("--collective " + o.collective + " is not a collective of algorithms.h");
  }
  s->model = s->platform.Model();
  if (!o.tuning.empty()) TESSERA_RETURN_IF_ERROR(CostModel::FromTuningFile(o.tuning, &s->model));
  TESSERA_RETURN_IF_ERROR(CallRecorder::Create(s->layout, o.torus, s->platform.Fabric(), s->model, &s->recorder));
  s->type = o.perf.types[0];
  s->type_size = tessera_bench::ElementSize(s->type);
  const bool half = s->type == tessera_bench::DataType::kFloat16 || s->type == tessera_bench::DataType::kBfloat16;
  s->wire = half && o.half_wire == "float32" ? 4 : s->type_size;
  for (const AlgorithmInfo& a : AlgorithmsOf(s->c)) {
    bool wanted = o.algos.empty();
    for (const std::string& name : o.algos) wanted |= name == a.name;
    if (wanted && a.applies(s->shape())) s->rows.push_back(&a);
  }
  if (o.json.empty()) return Status::Ok();
  s->json = std::fopen(o.json.c_str(), "a");
  return s->json != nullptr ? Status::Ok() : InvalidArgument("--json " + o.json + ": cannot open");
}

void PrintHeader(const Setup& s) {
  const Shape& shape = s.shape();
  std::printf("# tessera simulator (SimGrid 3.32), %s\n# platform %s\n# layout %s (%d ranks), torus grid %dx%d, "
              "%zu-byte elements on the wire\n# cost model: %s\n#\n",
              s.o->collective.c_str(), s.platform.Describe().c_str(), s.layout.Describe().c_str(), shape.p,
              shape.torus_x, shape.torus_y, s.wire, s.model.ToString().c_str());
  std::printf("# %10s %12s %8s %5s %4s %-22s %12s %7s %7s %12s\n", "size", "count", "type", "redop", "root",
              "algorithm", "time", "algbw", "busbw", "predicted");
  std::printf("# %10s %12s %8s %5s %4s %-22s %12s %7s %7s %12s\n", "(B)", "(elements)", "", "", "", "", "(us)",
              "(GB/s)", "(GB/s)", "(us)");
}

// One simulation (or recording, with --record-only) of `a` on `bytes`.
Status SimulateOne(const Setup& s, const AlgorithmInfo& a, size_t bytes, Row* row) {
  CallSpec spec;
  spec.collective = s.c;
  spec.algorithm = a.name;
  spec.count = bytes / s.type_size;
  spec.elem_size = s.wire;
  row->algo = a.name;
  row->predicted_s = a.predict(s.model, s.shape(), PredictedBytes(s.c, s.shape().p, spec.count, s.wire));
  ReplayOptions options = ReplayOptionsFor(a);
  options.record_only = s.o->record_only;
  TESSERA_RETURN_IF_ERROR(Replay(s.platform, s.layout, [&](std::vector<RankSchedule>* out) {
    return s.recorder->RecordAll(spec, out);
  }, &row->replay, options).Annotate(a.name));
  row->seconds = row->replay.seconds;
  return Status::Ok();
}

// A simulation that failed (a replay that cannot complete, a schedule that does not
// fit): said on stdout where its row would be, and on stderr; never printed as a time.
void PrintFailure(size_t bytes, const std::string& algo, const Status& s) {
  std::printf("# %zu B %s: FAILED: %s\n", bytes, algo.c_str(), s.ToString().c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "simulate: %zu B %s: %s\n", bytes, algo.c_str(), s.ToString().c_str());
}

// Every asked algorithm on `bytes`, then the cost model's choice (simulated too if it
// was not asked for) beside the simulated best. `failed` counts the simulations that
// did not complete; the others are still printed.
Status SimulateSize(const Setup& s, size_t bytes, int* failed) {
  const int failed_before = *failed;
  const size_t count = bytes / s.type_size;
  std::string why;
  const Selection choice =
      SelectAlgorithm(s.c, "auto", s.model, s.shape(), PredictedBytes(s.c, s.shape().p, count, s.wire), &why);
  if (s.o->choice_only) {  // the cost model alone: no recording, no simulation
    std::printf("# %zu B: the cost model chooses %s (%s)\n", bytes, choice.algo->Label(), why.c_str());
    return Status::Ok();
  }
  const char* type = tessera_bench::DataTypeName(s.type);
  std::vector<Row> done;
  std::vector<std::string> tried;
  std::vector<const AlgorithmInfo*> rows = s.rows;
  if (s.o->contenders) {  // the asked rows the model predicts within kContenderSpread of its best
    const std::vector<const AlgorithmInfo*> near =
        Contenders(s.c, s.model, s.shape(), PredictedBytes(s.c, s.shape().p, count, s.wire));
    rows.erase(std::remove_if(rows.begin(), rows.end(), [&](const AlgorithmInfo* a) {
                 return std::find(near.begin(), near.end(), a) == near.end();
               }), rows.end());
  }
  for (const AlgorithmInfo* a : rows) {
    Row row;
    tried.push_back(a->name);
    const Status st = SimulateOne(s, *a, bytes, &row);
    if (!st.ok()) {
      PrintFailure(bytes, a->name, st);
      ++*failed;
      continue;
    }
    if (s.o->record_only) {
      PrintRecording(bytes, row);
      continue;
    }
    PrintRow(bytes, count, type, row, s.factor());
    std::fflush(stdout);
    WriteJson(s.json, *s.o, s.platform.name, s.shape(), bytes, row, choice.algo->name);
    done.push_back(row);
  }
  if (s.o->record_only || tried.empty()) return Status::Ok();
  if (std::find(tried.begin(), tried.end(), choice.algo->name) == tried.end()) {
    // Not asked for: simulated for this row, and a candidate for the best too.
    Row pick;
    const Status st = SimulateOne(s, *choice.algo, bytes, &pick);
    if (st.ok()) {
      WriteJson(s.json, *s.o, s.platform.name, s.shape(), bytes, pick, choice.algo->name);
      done.push_back(pick);
    } else {
      PrintFailure(bytes, choice.algo->name, st);
      ++*failed;
    }
  }
  size_t chosen = done.size();
  for (size_t i = 0; i < done.size(); ++i) {
    if (done[i].algo == choice.algo->name) chosen = i;
  }
  if (chosen == done.size()) {
    std::printf("#   the cost model's choice, %s, did not complete: no comparison\n", choice.algo->name);
    return Status::Ok();
  }
  size_t best = 0;
  for (size_t i = 0; i < done.size(); ++i) {
    if (done[i].seconds < done[best].seconds) best = i;
  }
  Row pick = done[chosen];
  pick.algo = "auto: " + done[chosen].algo;
  PrintRow(bytes, count, type, pick, s.factor());
  std::printf("#   simulated best: %s; the cost model's choice, %s, takes %.3fx its time%s\n", done[best].algo.c_str(),
              done[chosen].algo.c_str(), done[chosen].seconds / done[best].seconds,
              *failed > failed_before ? " (of the algorithms that completed)" : "");
  return Status::Ok();
}

Status Run(const Options& o) {
  Setup s;
  Status st = Prepare(o, &s);
  if (st.ok() && !o.choice_only && !o.record_only) PrintHeader(s);
  int failed = 0;
  for (size_t bytes : tessera_bench::SizeSeries(o.perf)) {
    if (!st.ok()) break;
    st = SimulateSize(s, bytes, &failed);
  }
  if (s.json != nullptr) std::fclose(s.json);
  if (st.ok() && failed > 0) return InternalError(std::to_string(failed) + " simulation(s) failed (above)");
  return st;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  tessera::Options o;
  tessera::Status s = tessera::ParseOptions(argc, argv, &o);
  if (s.ok()) s = tessera::Run(o);
  if (!s.ok()) {
    std::fprintf(stderr, "simulate: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
