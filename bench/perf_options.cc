// Parsing of the nccl-tests flags (getopt_long), with every bad value named in the error.
#include "bench/perf_options.h"

#include <getopt.h>

#include <cerrno>
#include <cstdlib>
#include <limits>

namespace tessera_bench {
namespace {

constexpr long long kMaxInt = std::numeric_limits<int>::max();

// A decimal integer in [min, max], nothing else.
bool ParseInteger(const std::string& text, long long min, long long max, long long* value) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long parsed = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || parsed < min || parsed > max) return false;
  *value = parsed;
  return true;
}

std::string Quoted(const char* text) { return std::string("'") + (text ? text : "") + "'"; }

// "a,b,c" -> {"a", "b", "c"}; "" -> {""} (so that an empty name is reported).
std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t comma; (comma = text.find(',', start)) != std::string::npos; start = comma + 1) {
    parts.push_back(text.substr(start, comma - start));
  }
  parts.push_back(text.substr(start));
  return parts;
}

// Applies one flag to `options`; returns an error message or "".
std::string ApplyFlag(int flag, const char* arg, PerfOptions* options) {
  const std::string value = arg ? arg : "";
  long long number = 0;
  switch (flag) {
    case 'b':
      if (!ParseByteSize(value, &options->min_bytes)) return "-b: bad size " + Quoted(arg);
      return "";
    case 'e':
      if (!ParseByteSize(value, &options->max_bytes)) return "-e: bad size " + Quoted(arg);
      return "";
    case 'i':
      if (!ParseByteSize(value, &options->step_bytes) || options->step_bytes == 0) {
        return "-i: bad step size " + Quoted(arg) + " (want > 0)";
      }
      return "";
    case 'f':
      if (!ParseInteger(value, 1, 1 << 20, &number)) {
        return "-f: bad step factor " + Quoted(arg) + " (want an integer >= 1)";
      }
      options->step_factor = static_cast<size_t>(number);
      return "";
    case 'n':
      if (!ParseInteger(value, 1, kMaxInt, &number)) {
        return "-n: bad iteration count " + Quoted(arg) + " (want >= 1)";
      }
      options->iters = static_cast<int>(number);
      return "";
    case 'w':
      if (!ParseInteger(value, 0, kMaxInt, &number)) {
        return "-w: bad warmup count " + Quoted(arg) + " (want >= 0)";
      }
      options->warmup_iters = static_cast<int>(number);
      return "";
    case 'D':
      if (!ParseInteger(value, 0, 3600 * 1000, &number)) {
        return "-D: bad minimum duration " + Quoted(arg) + " (want milliseconds, 0 to 3600000)";
      }
      options->min_duration_ms = static_cast<int>(number);
      return "";
    case 'c':
      if (!ParseInteger(value, 0, 1, &number)) return "-c: want 0 or 1, got " + Quoted(arg);
      options->check = number == 1;
      return "";
    case 'o': {
      if (value == "all") {
        options->ops = AllReduceOps();
        return "";
      }
      options->ops.clear();
      for (const std::string& name : SplitCommas(value)) {
        ReduceOp op;
        if (!ParseReduceOp(name, &op)) {
          return "-o: unknown op " + Quoted(name.c_str()) + " (sum, prod, max, min, avg, all)";
        }
        options->ops.push_back(op);
      }
      return "";
    }
    case 'd': {
      if (value == "all") {
        options->types = AllDataTypes();
        return "";
      }
      options->types.clear();
      for (const std::string& name : SplitCommas(value)) {
        DataType type;
        if (!ParseDataType(name, &type)) {
          return "-d: unknown datatype " + Quoted(name.c_str()) +
                 " (int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 all)";
        }
        options->types.push_back(type);
      }
      return "";
    }
    case 't':
    case 'g':
      if (value != "1") {
        return std::string("-") + static_cast<char>(flag) +
               ": only 1 is supported (one process per rank), got " + Quoted(arg);
      }
      return "";
    case 'h':
      options->help = true;
      return "";
  }
  return "internal error: unhandled flag";
}

}  // namespace

bool ParseByteSize(const std::string& text, size_t* bytes) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || text.size() > digits + 1) return false;
  size_t shift = 0;
  if (text.size() == digits + 1) {
    switch (text[digits]) {
      case 'K': case 'k': shift = 10; break;
      case 'M': case 'm': shift = 20; break;
      case 'G': case 'g': shift = 30; break;
      default: return false;
    }
  }
  long long number = 0;
  const long long kMax = std::numeric_limits<long long>::max();
  if (!ParseInteger(text.substr(0, digits), 0, kMax, &number)) return false;
  size_t value = static_cast<size_t>(number);
  if (value > (std::numeric_limits<size_t>::max() >> shift)) return false;
  *bytes = value << shift;
  return true;
}

ParsedOptions ParsePerfOptions(int argc, char** argv) {
  static const option kLongOptions[] = {
      {"minbytes", required_argument, nullptr, 'b'},
      {"maxbytes", required_argument, nullptr, 'e'},
      {"stepbytes", required_argument, nullptr, 'i'},
      {"stepfactor", required_argument, nullptr, 'f'},
      {"iters", required_argument, nullptr, 'n'},
      {"warmup_iters", required_argument, nullptr, 'w'},
      {"min_duration_ms", required_argument, nullptr, 'D'},
      {"check", required_argument, nullptr, 'c'},
      {"op", required_argument, nullptr, 'o'},
      {"datatype", required_argument, nullptr, 'd'},
      {"nthreads", required_argument, nullptr, 't'},
      {"ngpus", required_argument, nullptr, 'g'},
      {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0}};
  ParsedOptions parsed;
  // getopt keeps its state in globals: optind = 0 restarts GNU getopt from scratch, and
  // opterr = 0 keeps it from printing (errors are reported through the result).
  optind = 0;
  opterr = 0;
  for (;;) {
    int flag = getopt_long(argc, argv, ":b:e:i:f:n:w:D:c:o:d:t:g:h", kLongOptions, nullptr);
    if (flag == -1) break;
    const char* where = argv[optind - 1];
    if (flag == '?') {
      std::string name = optopt != 0 ? std::string("-") + static_cast<char>(optopt) : where;
      parsed.error = "unknown flag " + Quoted(name.c_str());
      return parsed;
    }
    if (flag == ':') {
      parsed.error = "flag " + Quoted(where) + " needs a value";
      return parsed;
    }
    parsed.error = ApplyFlag(flag, optarg, &parsed.options);
    if (!parsed.error.empty()) return parsed;
  }
  if (optind < argc) {
    parsed.error = "unexpected argument " + Quoted(argv[optind]);
    return parsed;
  }
  const PerfOptions& options = parsed.options;
  if (options.min_bytes > options.max_bytes) {
    parsed.error = "minbytes (" + std::to_string(options.min_bytes) + ") > maxbytes (" +
                   std::to_string(options.max_bytes) + ")";
    return parsed;
  }
  parsed.ok = true;
  return parsed;
}

std::string PerfUsage(const std::string& program) {
  return "USAGE: " + program +
         "\n"
         "  [-b,--minbytes <min size in bytes>]     default 32M\n"
         "  [-e,--maxbytes <max size in bytes>]     default 32M\n"
         "  [-i,--stepbytes <increment size>]       default 1M\n"
         "  [-f,--stepfactor <increment factor>]    default 1 (use -i)\n"
         "  [-n,--iters <iteration count>]          default 20\n"
         "  [-w,--warmup_iters <warmup count>]      default 5\n"
         "  [-D,--min_duration_ms <ms>]             timed calls go on until they last this long\n"
         "                                          (more than -n where needed), default 0\n"
         "  [-c,--check <0/1>]                      validate results, default 1\n"
         "  [-o,--op <sum/prod/min/max/avg/all>]    default sum\n"
         "  [-d,--datatype <int8/uint8/int32/uint32/int64/uint64/half/float/double/bfloat16/all>]\n"
         "                                          default float\n"
         "  [-t,--nthreads 1] [-g,--ngpus 1]        for nccl-tests scripts (1 process = 1 rank)\n"
         "  [-h,--help]\n"
         "Sizes take K, M, G suffixes (powers of 2). -o and -d also take comma-separated\n"
         "lists (-d int8,float).\n";
}

std::vector<size_t> SizeSeries(const PerfOptions& options) {
  std::vector<size_t> sizes;
  size_t size = options.min_bytes;
  while (size <= options.max_bytes) {
    sizes.push_back(size);
    size_t next;
    if (options.step_factor > 1) {
      if (size > std::numeric_limits<size_t>::max() / options.step_factor) break;
      next = size * options.step_factor;
    } else {
      if (size > std::numeric_limits<size_t>::max() - options.step_bytes) break;
      next = size + options.step_bytes;
    }
    if (next <= size) break;  // -b 0 with a factor, or a zero step: no progress
    size = next;
  }
  return sizes;
}

}  // namespace tessera_bench
