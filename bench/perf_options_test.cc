// Checks the nccl-tests flags: defaults, every flag, size suffixes, the size loop, and
// that every bad value is refused with a message naming it.
#include "bench/perf_options.h"

#include <initializer_list>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tessera_bench {
namespace {

// Parses "program" followed by `args`.
ParsedOptions Parse(std::initializer_list<const char*> args) {
  std::vector<std::string> storage = {"perf"};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : storage) argv.push_back(&s[0]);
  argv.push_back(nullptr);
  return ParsePerfOptions(static_cast<int>(storage.size()), argv.data());
}

TEST(PerfOptionsTest, DefaultsAreNcclTests) {
  ParsedOptions parsed = Parse({});
  ASSERT_TRUE(parsed.ok) << parsed.error;
  const PerfOptions& o = parsed.options;
  EXPECT_EQ(o.min_bytes, 32u << 20);
  EXPECT_EQ(o.max_bytes, 32u << 20);
  EXPECT_EQ(o.step_bytes, 1u << 20);
  EXPECT_EQ(o.step_factor, 1u);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.warmup_iters, 5);
  EXPECT_EQ(o.min_duration_ms, 0);
  EXPECT_TRUE(o.check);
  EXPECT_EQ(o.ops, std::vector<ReduceOp>{ReduceOp::kSum});
  EXPECT_EQ(o.types, std::vector<DataType>{DataType::kFloat32});
  EXPECT_FALSE(o.help);
}

TEST(PerfOptionsTest, EveryFlagShortAndLong) {
  ParsedOptions parsed = Parse({"-b", "8", "-e", "64M", "-f", "2", "-i", "4K", "-n", "7", "-w", "0",
                                "-c", "0", "-o", "max", "-d", "bfloat16", "-g", "1", "-t", "1", "-D", "250"});
  ASSERT_TRUE(parsed.ok) << parsed.error;
  const PerfOptions& o = parsed.options;
  EXPECT_EQ(o.min_bytes, 8u);
  EXPECT_EQ(o.max_bytes, 64u << 20);
  EXPECT_EQ(o.step_factor, 2u);
  EXPECT_EQ(o.step_bytes, 4096u);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.warmup_iters, 0);
  EXPECT_EQ(o.min_duration_ms, 250);
  EXPECT_FALSE(o.check);
  EXPECT_EQ(o.ops, std::vector<ReduceOp>{ReduceOp::kMax});
  EXPECT_EQ(o.types, std::vector<DataType>{DataType::kBfloat16});

  parsed = Parse({"--minbytes=1K", "--maxbytes", "1G", "--stepfactor=4", "--iters=3",
                  "--warmup_iters=1", "--check=1", "--op=avg", "--datatype=half", "--min_duration_ms=7"});
  ASSERT_TRUE(parsed.ok) << parsed.error;
  EXPECT_EQ(parsed.options.min_bytes, 1024u);
  EXPECT_EQ(parsed.options.max_bytes, 1u << 30);
  EXPECT_EQ(parsed.options.step_factor, 4u);
  EXPECT_EQ(parsed.options.min_duration_ms, 7);
  EXPECT_EQ(parsed.options.ops, std::vector<ReduceOp>{ReduceOp::kAvg});
  EXPECT_EQ(parsed.options.types, std::vector<DataType>{DataType::kFloat16});
}

TEST(PerfOptionsTest, AllTypesAndOps) {
  ParsedOptions parsed = Parse({"-d", "all", "-o", "all"});
  ASSERT_TRUE(parsed.ok) << parsed.error;
  EXPECT_EQ(parsed.options.types.size(), 10u);
  EXPECT_EQ(parsed.options.ops.size(), 5u);
  for (const char* name : {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float",
                           "double", "bfloat16"}) {
    parsed = Parse({"-d", name});
    ASSERT_TRUE(parsed.ok) << name;
    EXPECT_STREQ(DataTypeName(parsed.options.types[0]), name);
  }
}

TEST(PerfOptionsTest, CommaSeparatedLists) {
  ParsedOptions parsed = Parse({"-d", "int8,half,double", "-o", "max,sum"});
  ASSERT_TRUE(parsed.ok) << parsed.error;
  EXPECT_EQ(parsed.options.types,
            (std::vector<DataType>{DataType::kInt8, DataType::kFloat16, DataType::kFloat64}));
  EXPECT_EQ(parsed.options.ops, (std::vector<ReduceOp>{ReduceOp::kMax, ReduceOp::kSum}));
  for (const char* bad : {"int8,", ",int8", "int8,,float", "int8,all"}) {
    parsed = Parse({"-d", bad});
    EXPECT_FALSE(parsed.ok) << bad;
  }
  parsed = Parse({"-o", "sum,xor"});
  EXPECT_FALSE(parsed.ok);
  EXPECT_NE(parsed.error.find("'xor'"), std::string::npos) << parsed.error;
}

TEST(PerfOptionsTest, Help) {
  EXPECT_TRUE(Parse({"-h"}).options.help);
  EXPECT_TRUE(Parse({"--help"}).options.help);
  EXPECT_NE(PerfUsage("all_reduce_perf").find("--stepfactor"), std::string::npos);
}

TEST(PerfOptionsTest, BadFlagsAreRefusedByName) {
  struct Case {
    std::initializer_list<const char*> args;
    const char* expected_in_error;
  };
  const Case cases[] = {
      {{"-x"}, "-x"},
      {{"--bogus"}, "--bogus"},
      {{"-b"}, "-b"},
      {{"-b", "12Q"}, "12Q"},
      {{"-b", "-8"}, "-8"},
      {{"-e", ""}, "-e"},
      {{"-e", "99999999999999999999"}, "-e"},
      {{"-e", "17179869184G"}, "-e"},  // 2^34 G overflows 64 bits
      {{"-f", "0"}, "-f"},
      {{"-f", "1.5"}, "-f"},
      {{"-i", "0"}, "-i"},
      {{"-n", "0"}, "-n"},
      {{"-w", "-1"}, "-w"},
      {{"-c", "2"}, "-c"},
      {{"-D", "-5"}, "-D"},
      {{"-D", "1.5"}, "-D"},
      {{"-o", "xor"}, "xor"},
      {{"-d", "float8"}, "float8"},
      {{"-g", "2"}, "-g"},
      {{"-b", "2M", "-e", "1M"}, "minbytes"},
      {{"extra"}, "extra"},
  };
  for (const Case& c : cases) {
    ParsedOptions parsed = Parse(c.args);
    EXPECT_FALSE(parsed.ok) << c.expected_in_error;
    EXPECT_NE(parsed.error.find(c.expected_in_error), std::string::npos)
        << "error '" << parsed.error << "' does not name " << c.expected_in_error;
  }
}

TEST(PerfOptionsTest, ByteSizes) {
  size_t bytes = 0;
  EXPECT_TRUE(ParseByteSize("0", &bytes));
  EXPECT_EQ(bytes, 0u);
  EXPECT_TRUE(ParseByteSize("64k", &bytes));
  EXPECT_EQ(bytes, 65536u);
  EXPECT_TRUE(ParseByteSize("3m", &bytes));
  EXPECT_EQ(bytes, 3u << 20);
  EXPECT_TRUE(ParseByteSize("2G", &bytes));
  EXPECT_EQ(bytes, size_t{2} << 30);
  for (const char* bad : {"", "K", "1KB", "1.5M", " 1", "1 ", "0x10", "+1"}) {
    EXPECT_FALSE(ParseByteSize(bad, &bytes)) << bad;
  }
}

TEST(PerfOptionsTest, SizeSeries) {
  PerfOptions o;
  o.min_bytes = 8;
  o.max_bytes = 64;
  o.step_factor = 2;
  EXPECT_EQ(SizeSeries(o), (std::vector<size_t>{8, 16, 32, 64}));
  o.max_bytes = 100;  // stops before passing max
  EXPECT_EQ(SizeSeries(o), (std::vector<size_t>{8, 16, 32, 64}));
  o.step_factor = 1;  // -i: additive steps
  o.step_bytes = 30;
  EXPECT_EQ(SizeSeries(o), (std::vector<size_t>{8, 38, 68, 98}));
  o.min_bytes = 0;  // a factor cannot grow 0: one size, no endless loop
  o.step_factor = 2;
  EXPECT_EQ(SizeSeries(o), (std::vector<size_t>{0}));
  o.min_bytes = size_t{1} << 62;  // multiplying would overflow: stops
  o.max_bytes = ~size_t{0};
  EXPECT_EQ(SizeSeries(o), (std::vector<size_t>{size_t{1} << 62, size_t{1} << 63}));
}

}  // namespace
}  // namespace tessera_bench
