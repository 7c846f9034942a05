// typed_values: encoding, decoding and serial references for tests. See typed_values.h.
#include "tests/typed_values.h"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace tessera_test {
namespace {

// A binary floating-point format: sign bit, exp_bits of biased exponent, man_bits of
// fraction. `ieee` formats reserve the top exponent for infinities and NaNs; fp8 e4m3
// (the OCP "FN" variant) has no infinity and one NaN per sign (all bits set).
struct FloatFormat {
  int exp_bits;
  int man_bits;
  int bias;
  bool ieee;
};

constexpr FloatFormat kHalf{5, 10, 15, true};
constexpr FloatFormat kBfloat16{8, 7, 127, true};
constexpr FloatFormat kE4m3{4, 3, 7, false};
constexpr FloatFormat kE5m2{5, 2, 15, true};
constexpr FloatFormat kFloat32{8, 23, 127, true};
constexpr FloatFormat kFloat64{11, 52, 1023, true};

const FloatFormat* FormatOf(tesseraDataType_t type) {
  switch (type) {
    case tesseraFloat16: return &kHalf;
    case tesseraBfloat16: return &kBfloat16;
    case tesseraFloat8e4m3: return &kE4m3;
    case tesseraFloat8e5m2: return &kE5m2;
    case tesseraFloat32: return &kFloat32;
    case tesseraFloat64: return &kFloat64;
    default: return nullptr;
  }
}

uint32_t NaNBits(const FloatFormat& f) {
  const uint32_t exp_all = (1u << f.exp_bits) - 1;
  if (!f.ieee) return (exp_all << f.man_bits) | ((1u << f.man_bits) - 1);
  return (exp_all << f.man_bits) | (1u << (f.man_bits - 1));
}

// Rounds v to the nearest value of a format of at most 16 bits (ties to even); returns
// the bit pattern.
uint32_t EncodeSmallFloat(const FloatFormat& f, double v) {
  const uint32_t sign = std::signbit(v) ? 1u << (f.exp_bits + f.man_bits) : 0u;
  const uint32_t exp_all = (1u << f.exp_bits) - 1;
  if (std::isnan(v)) return NaNBits(f);
  const double a = std::fabs(v);
  const uint32_t overflow = f.ieee ? sign | (exp_all << f.man_bits) : sign | NaNBits(f);
  if (std::isinf(a)) return overflow;
  if (a == 0) return sign;
  int e = 0;
  std::frexp(a, &e);                 // a = m * 2^e, 0.5 <= m < 1
  int exponent = e - 1;              // a = 1.x * 2^exponent
  const int min_exponent = 1 - f.bias;
  if (exponent < min_exponent) exponent = min_exponent;  // subnormal: fixed quantum
  const double quantum = std::ldexp(1.0, exponent - f.man_bits);
  double q = std::nearbyint(a / quantum);  // ties to even (default rounding mode)
  const double implicit_one = std::ldexp(1.0, f.man_bits);
  if (q >= 2 * implicit_one) {  // rounding carried into the next binade
    q /= 2;
    ++exponent;
  }
  uint32_t exp_field;
  uint32_t man_field;
  if (q < implicit_one) {  // subnormal (exponent is min_exponent)
    exp_field = 0;
    man_field = static_cast<uint32_t>(q);
  } else {
    exp_field = static_cast<uint32_t>(exponent + f.bias);
    man_field = static_cast<uint32_t>(q - implicit_one);
  }
  const uint32_t max_exp_field = f.ieee ? exp_all - 1 : exp_all;
  if (exp_field > max_exp_field) return overflow;
  if (!f.ieee && exp_field == exp_all && man_field == (1u << f.man_bits) - 1) return overflow;
  return sign | (exp_field << f.man_bits) | man_field;
}

double DecodeSmallFloat(const FloatFormat& f, uint32_t bits) {
  const uint32_t exp_all = (1u << f.exp_bits) - 1;
  const bool negative = (bits >> (f.exp_bits + f.man_bits)) & 1u;
  const uint32_t exp_field = (bits >> f.man_bits) & exp_all;
  const uint32_t man_field = bits & ((1u << f.man_bits) - 1);
  double v;
  if (f.ieee && exp_field == exp_all) {
    v = man_field == 0 ? INFINITY : NAN;
  } else if (!f.ieee && exp_field == exp_all && man_field == (1u << f.man_bits) - 1) {
    v = NAN;
  } else if (exp_field == 0) {
    v = std::ldexp(static_cast<double>(man_field), 1 - f.bias - f.man_bits);
  } else {
    v = std::ldexp(static_cast<double>((1u << f.man_bits) + man_field),
                   static_cast<int>(exp_field) - f.bias - f.man_bits);
  }
  return negative ? -v : v;
}

template <typename T>
void Store(T x, void* dst) {
  memcpy(dst, &x, sizeof(T));
}

template <typename T>
T Load(const void* src) {
  T x;
  memcpy(&x, src, sizeof(T));
  return x;
}

}  // namespace

std::vector<tesseraDataType_t> AllDataTypes() {
  std::vector<tesseraDataType_t> types;
  for (int t = 0; t < tesseraNumTypes; ++t) types.push_back(static_cast<tesseraDataType_t>(t));
  return types;
}

std::string TypeName(tesseraDataType_t type) {
  switch (type) {
    case tesseraInt8: return "int8";
    case tesseraUint8: return "uint8";
    case tesseraInt32: return "int32";
    case tesseraUint32: return "uint32";
    case tesseraInt64: return "int64";
    case tesseraUint64: return "uint64";
    case tesseraFloat16: return "float16";
    case tesseraFloat32: return "float32";
    case tesseraFloat64: return "float64";
    case tesseraBfloat16: return "bfloat16";
    case tesseraFloat8e4m3: return "float8e4m3";
    case tesseraFloat8e5m2: return "float8e5m2";
    default: return "datatype " + std::to_string(static_cast<int>(type));
  }
}

size_t TypeSize(tesseraDataType_t type) {
  switch (type) {
    case tesseraInt8: case tesseraUint8: case tesseraFloat8e4m3: case tesseraFloat8e5m2: return 1;
    case tesseraFloat16: case tesseraBfloat16: return 2;
    case tesseraInt32: case tesseraUint32: case tesseraFloat32: return 4;
    case tesseraInt64: case tesseraUint64: case tesseraFloat64: return 8;
    default: return 0;
  }
}

bool IsUnsignedType(tesseraDataType_t type) {
  return type == tesseraUint8 || type == tesseraUint32 || type == tesseraUint64;
}

bool IsFloatType(tesseraDataType_t type) { return FormatOf(type) != nullptr; }

bool IsFp8Type(tesseraDataType_t type) {
  return type == tesseraFloat8e4m3 || type == tesseraFloat8e5m2;
}

void EncodeValue(tesseraDataType_t type, double v, void* dst) {
  switch (type) {
    case tesseraInt8: Store(static_cast<int8_t>(v), dst); break;
    case tesseraUint8: Store(static_cast<uint8_t>(v), dst); break;
    case tesseraInt32: Store(static_cast<int32_t>(v), dst); break;
    case tesseraUint32: Store(static_cast<uint32_t>(v), dst); break;
    case tesseraInt64: Store(static_cast<int64_t>(v), dst); break;
    case tesseraUint64: Store(static_cast<uint64_t>(v), dst); break;
    case tesseraFloat32: Store(static_cast<float>(v), dst); break;
    case tesseraFloat64: Store(v, dst); break;
    case tesseraFloat16: case tesseraBfloat16:
      Store(static_cast<uint16_t>(EncodeSmallFloat(*FormatOf(type), v)), dst);
      break;
    case tesseraFloat8e4m3: case tesseraFloat8e5m2:
      Store(static_cast<uint8_t>(EncodeSmallFloat(*FormatOf(type), v)), dst);
      break;
    default: break;
  }
}

double DecodeValue(tesseraDataType_t type, const void* src) {
  switch (type) {
    case tesseraInt8: return Load<int8_t>(src);
    case tesseraUint8: return Load<uint8_t>(src);
    case tesseraInt32: return Load<int32_t>(src);
    case tesseraUint32: return Load<uint32_t>(src);
    case tesseraInt64: return static_cast<double>(Load<int64_t>(src));
    case tesseraUint64: return static_cast<double>(Load<uint64_t>(src));
    case tesseraFloat32: return Load<float>(src);
    case tesseraFloat64: return Load<double>(src);
    case tesseraFloat16: case tesseraBfloat16:
      return DecodeSmallFloat(*FormatOf(type), Load<uint16_t>(src));
    case tesseraFloat8e4m3: case tesseraFloat8e5m2:
      return DecodeSmallFloat(*FormatOf(type), Load<uint8_t>(src));
    default: return NAN;
  }
}

double RoundToType(tesseraDataType_t type, double v) {
  unsigned char bytes[8];
  EncodeValue(type, v, bytes);
  return DecodeValue(type, bytes);
}

double UlpOf(tesseraDataType_t type, double v) {
  const FloatFormat* f = FormatOf(type);
  if (f == nullptr) return 1.0;
  int e = 0;
  std::frexp(std::fabs(v), &e);
  int exponent = v == 0 ? 1 - f->bias : e - 1;
  if (exponent < 1 - f->bias) exponent = 1 - f->bias;
  return std::ldexp(1.0, exponent - f->man_bits);
}

std::vector<OpKind> AllReductionKinds() {
  return {OpKind::kSum, OpKind::kProd, OpKind::kMax, OpKind::kMin, OpKind::kAvg, OpKind::kPreMulSum};
}

std::string OpKindName(OpKind op) {
  switch (op) {
    case OpKind::kSum: return "sum";
    case OpKind::kProd: return "prod";
    case OpKind::kMax: return "max";
    case OpKind::kMin: return "min";
    case OpKind::kAvg: return "avg";
    case OpKind::kPreMulSum: return "premulsum";
    case OpKind::kCopy: return "copy";
  }
  return "?";
}

tesseraRedOp_t BuiltinOp(OpKind op) {
  switch (op) {
    case OpKind::kProd: return tesseraProd;
    case OpKind::kMax: return tesseraMax;
    case OpKind::kMin: return tesseraMin;
    case OpKind::kAvg: return tesseraAvg;
    default: return tesseraSum;
  }
}

double PreMulScalar(tesseraDataType_t type) { return IsFloatType(type) ? 0.5 : 2.0; }

double InputValue(OpKind op, tesseraDataType_t type, int j, int rank) {
  const bool is_unsigned = IsUnsignedType(type);
  switch (op) {
    case OpKind::kProd: {
      // For a fixed j, ranks 0..6 hit each residue once: |product| <= 2 * 3.
      static const int kFactors[7] = {2, -1, 1, 3, -1, 1, 1};
      if (j == 5 && rank == 0) return 0;
      int f = kFactors[(j * 5 + rank * 3) % 7];
      return is_unsigned && f < 0 ? 1 : f;
    }
    case OpKind::kPreMulSum: {
      // [-7, 7] ([0, 14] unsigned): 7 ranks * 2 * 7 = 98 fits int8.
      int v = (j * 7 + rank * 13) % 15;
      return is_unsigned ? v : v - 7;
    }
    case OpKind::kCopy:
      if (IsFp8Type(type)) return ((j * 7 + rank * 13) % 15) - 7;  // exact in e5m2
      return InputValue(OpKind::kSum, type, j, rank);
    default: {
      // [-15, 15] ([0, 30] unsigned): 7 ranks * 30 = 210 fits uint8, 105 int8, and
      // bfloat16 holds every integer up to 256.
      int v = (j * 7 + rank * 13) % 31;
      return is_unsigned ? v : v - 15;
    }
  }
}

double ReduceReference(OpKind op, tesseraDataType_t type, const std::vector<double>& inputs,
                       double scalar) {
  const bool integer = !IsFloatType(type);
  double acc = 0;
  int64_t iacc = 0;
  for (size_t r = 0; r < inputs.size(); ++r) {
    const double x = inputs[r];
    switch (op) {
      case OpKind::kSum: case OpKind::kAvg:
        acc += x;
        iacc += static_cast<int64_t>(x);
        break;
      case OpKind::kPreMulSum:
        acc += scalar * x;
        iacc += static_cast<int64_t>(scalar) * static_cast<int64_t>(x);
        break;
      case OpKind::kProd:
        acc = r == 0 ? x : acc * x;
        break;
      case OpKind::kMax:
        acc = r == 0 || x > acc ? x : acc;
        break;
      case OpKind::kMin:
        acc = r == 0 || x < acc ? x : acc;
        break;
      case OpKind::kCopy:
        break;
    }
  }
  const int64_t n = static_cast<int64_t>(inputs.size());
  if (op == OpKind::kAvg) {
    return integer ? static_cast<double>(iacc / n) : acc / static_cast<double>(n);
  }
  if (integer && (op == OpKind::kSum || op == OpKind::kPreMulSum)) {
    return static_cast<double>(iacc);
  }
  return acc;
}

std::vector<unsigned char> TileRow(tesseraDataType_t type, const std::vector<double>& row,
                                   size_t count, size_t first) {
  const size_t elem = TypeSize(type);
  std::vector<unsigned char> encoded(row.size() * elem);
  for (size_t j = 0; j < row.size(); ++j) EncodeValue(type, row[j], &encoded[j * elem]);
  std::vector<unsigned char> out(count * elem);
  size_t j = row.empty() ? 0 : first % row.size();
  for (size_t k = 0; k < count; ++k) {
    memcpy(&out[k * elem], &encoded[j * elem], elem);
    if (++j == row.size()) j = 0;
  }
  return out;
}

std::vector<unsigned char> Sentinel(tesseraDataType_t type, size_t count) {
  return std::vector<unsigned char>(count * TypeSize(type), 0xEE);
}

namespace {

std::string DescribeMismatches(size_t wrong, size_t count, const std::string& first,
                               const std::string& what) {
  return what + ": " + std::to_string(wrong) + " of " + std::to_string(count) +
         " elements wrong:" + first;
}

std::string Mismatch(size_t k, double got, double want) {
  char line[160];
  snprintf(line, sizeof(line), " [%zu]=%.17g want %.17g", k, got, want);
  return line;
}

}  // namespace

std::string CompareElements(tesseraDataType_t type, const void* got, const void* want,
                            size_t count, const std::string& what) {
  const size_t elem = TypeSize(type);
  const auto* g = static_cast<const unsigned char*>(got);
  const auto* w = static_cast<const unsigned char*>(want);
  if (memcmp(g, w, count * elem) == 0) return "";
  size_t wrong = 0;
  std::string first;
  for (size_t k = 0; k < count; ++k) {
    if (memcmp(g + k * elem, w + k * elem, elem) == 0) continue;
    if (wrong < 3) {
      first += Mismatch(k, DecodeValue(type, g + k * elem), DecodeValue(type, w + k * elem));
    }
    ++wrong;
  }
  return DescribeMismatches(wrong, count, first, what);
}

std::string CompareWithinTolerance(tesseraDataType_t type, const void* got, size_t count,
                                   size_t first, const std::vector<double>& want_row,
                                   const std::vector<double>& tolerance_row,
                                   const std::string& what) {
  const size_t elem = TypeSize(type);
  const auto* g = static_cast<const unsigned char*>(got);
  const size_t period = want_row.size();
  size_t wrong = 0;
  std::string first_wrong;
  for (size_t k = 0; k < count && period > 0; ++k) {
    const size_t j = (first + k) % period;
    const double gv = DecodeValue(type, g + k * elem);
    if (std::fabs(gv - want_row[j]) <= tolerance_row[j]) continue;  // false for NaN too
    if (wrong < 3) first_wrong += Mismatch(k, gv, want_row[j]);
    ++wrong;
  }
  if (wrong == 0) return "";
  return DescribeMismatches(wrong, count, first_wrong, what);
}

bool FailureLog::Add(const std::string& line) {
  if (line.empty()) return true;
  if (lines_ < max_lines_) text_ += line + "\n";
  ++lines_;
  return false;
}

std::string FailureLog::str() const {
  if (lines_ <= max_lines_) return text_;
  return text_ + "... and " + std::to_string(lines_ - max_lines_) + " more failures\n";
}

}  // namespace tessera_test
