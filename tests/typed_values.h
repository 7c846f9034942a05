// typed_values: values of every tessera datatype for tests, and the serial reference of
// every reduction operator.
//
// Tests choose small values (integers, or halves of integers) that every datatype holds
// exactly, encode them into buffers of the datatype under test, and compare what a
// collective produced with a reference computed here, serially, in float64 or int64.
// The float16, bfloat16 and fp8 conversions are written out (round to nearest even) so
// that the tests depend on no compiler support for these types.
#ifndef TESSERA_TESTS_TYPED_VALUES_H_
#define TESSERA_TESTS_TYPED_VALUES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tessera_test {

// Every datatype of tessera.h, fp8 included, in enum order.
std::vector<tesseraDataType_t> AllDataTypes();

// "int8", "float16", ...; "datatype 42" for unknown values.
std::string TypeName(tesseraDataType_t type);
// Bytes per element (0 for unknown values).
size_t TypeSize(tesseraDataType_t type);
bool IsUnsignedType(tesseraDataType_t type);
bool IsFloatType(tesseraDataType_t type);  // fp8, float16, bfloat16, float32, float64
bool IsFp8Type(tesseraDataType_t type);

// Writes v converted to `type` at dst: integers by truncation toward zero (v must be in
// range), floating types rounded to nearest even (overflow: infinity, or NaN for e4m3).
void EncodeValue(tesseraDataType_t type, double v, void* dst);
// The element of `type` at src, as a double (exact for every type but 64-bit integers
// beyond 2^53).
double DecodeValue(tesseraDataType_t type, const void* src);
// EncodeValue then DecodeValue: v as `type` holds it.
double RoundToType(tesseraDataType_t type, double v);
// The gap between |v| and the next larger value of a floating `type` (1 for integers).
double UlpOf(tesseraDataType_t type, double v);

// What a test asks of a collective: a built-in operator, a PreMulSum operator, or no
// reduction at all (data movement).
enum class OpKind { kSum, kProd, kMax, kMin, kAvg, kPreMulSum, kCopy };

// The reduction operators, in the order the tests run them (no kCopy).
std::vector<OpKind> AllReductionKinds();
std::string OpKindName(OpKind op);
// The built-in tesseraRedOp_t of a kind (kPreMulSum and kCopy: tesseraSum).
tesseraRedOp_t BuiltinOp(OpKind op);

// The PreMulSum scalar the tests use for `type`: 2 for integers, 0.5 for floats.
double PreMulScalar(tesseraDataType_t type);

// Rank `rank`'s input value at position j (0 <= j < kPeriod) of a test with `op` on
// `type`. The ranges are chosen so that every reduction over up to kMaxExactRanks ranks
// is exact in every datatype (int8 included), and so that, for a fixed j, different
// ranks hold different values for kCopy (a block from the wrong rank is detected).
constexpr int kPeriod = 31;
constexpr int kMaxExactRanks = 7;
double InputValue(OpKind op, tesseraDataType_t type, int j, int rank);

// The serial reference: op over inputs (one per rank, in rank order), computed exactly
// (int64 for integers, float64 for floats): avg of integers truncates sum / n toward
// zero, avg of floats is sum / n, PreMulSum is sum of scalar * x. Not for kCopy.
double ReduceReference(OpKind op, tesseraDataType_t type, const std::vector<double>& inputs,
                       double scalar);

// A buffer of `count` elements of `type` whose element k is row[(first + k) % row.size()]
// (row holds values, encoded here).
std::vector<unsigned char> TileRow(tesseraDataType_t type, const std::vector<double>& row,
                                   size_t count, size_t first = 0);
// `count` elements of the byte 0xEE: what recvbuffs start as, to see what was written.
std::vector<unsigned char> Sentinel(tesseraDataType_t type, size_t count);

// Compares `count` elements of got with want (both of `type`, exact byte equality).
// "" or a description of the first mismatches, prefixed with `what`.
std::string CompareElements(tesseraDataType_t type, const void* got, const void* want,
                            size_t count, const std::string& what);

// Compares element k of got (count elements of `type`) with want_row[j] within
// tolerance_row[j], j = (first + k) % want_row.size(): |got - want| <= tolerance, for
// results that are not exact (averages of floats, half-precision sums).
std::string CompareWithinTolerance(tesseraDataType_t type, const void* got, size_t count,
                                   size_t first, const std::vector<double>& want_row,
                                   const std::vector<double>& tolerance_row,
                                   const std::string& what);

// Collects failures as text, keeping the first `max_lines` and counting the rest, so that
// a systematic bug does not produce megabytes of repeated lines.
class FailureLog {
 public:
  explicit FailureLog(int max_lines = 40) : max_lines_(max_lines) {}
  // Records `line` when it is not empty. Returns line.empty().
  bool Add(const std::string& line);
  bool Expect(bool cond, const std::string& what) { return cond || Add(what); }
  bool ok() const { return lines_ == 0; }
  int lines() const { return lines_; }
  std::string str() const;

 private:
  int max_lines_;
  int lines_ = 0;
  std::string text_;
};

}  // namespace tessera_test

#endif  // TESSERA_TESTS_TYPED_VALUES_H_
