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
// cost model's predictions and choice alone.
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
  tessera_bench::PerfOptions perf;
};

const char kUsage[] =
    "usage: simulate --platform FILE --layout HxR|LAYOUT_FILE [--torus XxY] [--algo a,b,...]\n"
    "                [--collective allreduce|allgather|reduce-scatter|broadcast|reduce]\n"
    "                [--half-wire float32|half] [--tuning FILE] [--json FILE] [--record-only | --choice-only]\n"
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

Status CollectiveByName(const std::string& name, Collective* out) {
  for (int c = 0; c < kNumCollectives; ++c) {
    if (name == CollectiveName(static_cast<Collective>(c))) {
      *out = static_cast<Collective>(c);
      return Status::Ok();
    }
  }
  return InvalidArgument("--collective " + name + " is not a collective of algorithms.h");
}

// nccl-tests' bus bandwidth factor of each collective.
double BusFactor(Collective c, int p) {
  if (c == Collective::kAllReduce) return 2.0 * (p - 1) / p;
  if (c == Collective::kAllGather || c == Collective::kReduceScatter) return (p - 1.0) / p;
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

void WriteJson(FILE* f, const Options& o, const Shape& s, size_t bytes, const Row& row, const std::string& chosen) {
  if (f == nullptr) return;
  std::fprintf(f,
               "{\"platform\": \"%s\", \"layout\": \"%s\", \"ranks\": %d, \"hosts\": %d, \"torus\": \"%dx%d\", "
               "\"collective\": \"%s\", \"bytes\": %zu, \"algorithm\": \"%s\", \"seconds\": %.9g, "
               "\"predicted_seconds\": %.9g, \"auto_choice\": \"%s\", \"messages\": %llu, \"schedule_bytes\": %llu, "
               "\"record_wall_s\": %.3f, \"replay_wall_s\": %.3f, \"max_rss_bytes\": %llu}\n",
               o.platform.c_str(), o.layout.c_str(), s.p, s.hosts, s.torus_x, s.torus_y, o.collective.c_str(), bytes,
               row.algo.c_str(), row.seconds, row.predicted_s, chosen.c_str(),
               static_cast<unsigned long long>(row.replay.messages),
               static_cast<unsigned long long>(row.replay.schedule_bytes), row.replay.record_wall_s,
               row.replay.replay_wall_s, static_cast<unsigned long long>(row.replay.max_rss_bytes));
  std::fflush(f);
}

// Schedules that do not stream move each message in at most this many chunks (replay.h).
constexpr uint32_t kChunksOfRounds = 4;

Status SimulateOne(const Platform& platform, const Layout& layout, CallRecorder* recorder, const CallSpec& spec,
                   const AlgorithmInfo& row_info, bool record_only, Row* row) {
  ReplayOptions options;
  options.record_only = record_only;
  options.max_chunks = row_info.pipelined ? 0 : kChunksOfRounds;
  TESSERA_RETURN_IF_ERROR(Replay(platform, layout, [&](std::vector<RankSchedule>* out) {
    return recorder->RecordAll(spec, out);
  }, &row->replay, options));
  row->seconds = row->replay.seconds;
  return Status::Ok();
}

Status Run(const Options& o) {
  Platform platform;
  Layout layout;
  Collective c = Collective::kAllReduce;
  std::unique_ptr<CallRecorder> recorder;
  TESSERA_RETURN_IF_ERROR(ReadPlatformFile(o.platform, &platform));
  TESSERA_RETURN_IF_ERROR(LoadLayout(o.layout, &layout));
  TESSERA_RETURN_IF_ERROR(CollectiveByName(o.collective, &c));
  TESSERA_RETURN_IF_ERROR(CallRecorder::Create(layout, o.torus, &recorder));
  CostModel model = platform.Model();
  if (!o.tuning.empty()) TESSERA_RETURN_IF_ERROR(CostModel::FromTuningFile(o.tuning, &model));
  const Shape& shape = recorder->shape();
  const tessera_bench::DataType type = o.perf.types[0];
  const size_t type_size = tessera_bench::ElementSize(type);
  const bool half = type == tessera_bench::DataType::kFloat16 || type == tessera_bench::DataType::kBfloat16;
  const size_t wire = half && o.half_wire == "float32" ? 4 : type_size;
  std::vector<const AlgorithmInfo*> rows;
  for (const AlgorithmInfo& a : AlgorithmsOf(c)) {
    bool wanted = o.algos.empty();
    for (const std::string& name : o.algos) wanted |= name == a.name;
    if (wanted && a.applies(shape)) rows.push_back(&a);
  }
  FILE* json = o.json.empty() ? nullptr : std::fopen(o.json.c_str(), "a");
  if (!o.json.empty() && json == nullptr) return InvalidArgument("--json " + o.json + ": cannot open");
  std::printf("# tessera simulator (SimGrid 3.32), %s\n# platform %s\n# layout %s (%d ranks), torus grid %dx%d, "
              "%zu-byte elements on the wire\n# cost model: %s\n#\n",
              o.collective.c_str(), platform.Describe().c_str(), layout.Describe().c_str(), shape.p, shape.torus_x,
              shape.torus_y, wire, model.ToString().c_str());
  std::printf("# %10s %12s %8s %5s %4s %-22s %12s %7s %7s %12s\n", "size", "count", "type", "redop", "root",
              "algorithm", "time", "algbw", "busbw", "predicted");
  std::printf("# %10s %12s %8s %5s %4s %-22s %12s %7s %7s %12s\n", "(B)", "(elements)", "", "", "", "", "(us)",
              "(GB/s)", "(GB/s)", "(us)");
  for (size_t bytes : tessera_bench::SizeSeries(o.perf)) {
    const size_t count = bytes / type_size;
    const size_t predicted_bytes = PredictedBytes(c, shape.p, count, wire);
    std::string why;
    const Selection choice = SelectAlgorithm(c, "auto", model, shape, predicted_bytes, &why);
    if (o.choice_only) {  // the cost model alone: no recording, no simulation
      std::printf("# %zu B: the cost model chooses %s (%s)\n", bytes, choice.algo->Label(), why.c_str());
      continue;
    }
    std::vector<Row> done;
    for (const AlgorithmInfo* a : rows) {
      CallSpec spec;
      spec.collective = c;
      spec.algorithm = a->name;
      spec.count = count;
      spec.elem_size = wire;
      Row row;
      row.algo = a->name;
      row.predicted_s = a->predict(model, shape, predicted_bytes);
      TESSERA_RETURN_IF_ERROR(SimulateOne(platform, layout, recorder.get(), spec, *a, o.record_only, &row).Annotate(a->name));
      if (o.record_only) {
        PrintRecording(bytes, row);
        continue;
      }
      PrintRow(bytes, count, tessera_bench::DataTypeName(type), row, BusFactor(c, shape.p));
      std::fflush(stdout);
      WriteJson(json, o, shape, bytes, row, choice.algo->name);
      done.push_back(row);
    }
    const Row* best = nullptr;
    const Row* chosen = nullptr;
    for (const Row& r : done) {
      if (best == nullptr || r.seconds < best->seconds) best = &r;
      if (r.algo == choice.algo->name) chosen = &r;
    }
    if (chosen != nullptr) {
      Row a = *chosen;
      a.algo = std::string("auto: ") + chosen->algo;
      PrintRow(bytes, count, tessera_bench::DataTypeName(type), a, BusFactor(c, shape.p));
      std::printf("#   simulated best: %s; the cost model's choice, %s, takes %.3fx its time\n", best->algo.c_str(),
                  chosen->algo.c_str(), chosen->seconds / best->seconds);
    } else if (best != nullptr) {
      std::printf("#   simulated best: %s; the cost model chose %s (not simulated: see --algo)\n", best->algo.c_str(),
                  choice.algo->name);
    }
  }
  if (json != nullptr) std::fclose(json);
  return Status::Ok();
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
