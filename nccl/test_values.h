// test_values: inputs and serial references for the drop-in's tests, in NCCL's types.
//
// Every value is a small integer, which every NCCL data type holds exactly (float16 and
// bfloat16 included, up to 256), and each reference is computed serially in double, so
// results are compared exactly. The inputs of each operator are chosen so that its
// result, and every partial result, stays exact and in range on up to 4 ranks: sums and
// extrema of [-16, 16] (unsigned [0, 32]), products of {-2, -1, 1, 2} (unsigned
// {1, 2, 3}), and averages whose sum is a multiple of the rank count.
#ifndef TESSERA_NCCL_TEST_VALUES_H_
#define TESSERA_NCCL_TEST_VALUES_H_

#include <nccl.h>

#include <cstddef>
#include <string>
#include <vector>

namespace nccl_test {

// The ten types that reduce (fp8 excluded), in enum order.
std::vector<ncclDataType_t> ReducibleTypes();
// The built-in operators.
std::vector<ncclRedOp_t> BuiltinOps();

size_t TypeSize(ncclDataType_t type);  // 0 for unknown values
std::string TypeName(ncclDataType_t type);
std::string OpName(ncclRedOp_t op);

// Writes v, which must be an integer that `type` holds exactly, as `type` at dst.
void Encode(ncclDataType_t type, double v, void* dst);
double Decode(ncclDataType_t type, const void* src);

// What rank `rank` of `nranks` contributes at element i to a reduction with `op`.
double ReductionInput(ncclDataType_t type, ncclRedOp_t op, int rank, int nranks, size_t i);
// The reduction of ReductionInput over all ranks at element i, computed serially.
double ReductionResult(ncclDataType_t type, ncclRedOp_t op, int nranks, size_t i);
// What rank `rank` holds at element i for collectives that only move data.
double MoveInput(int rank, size_t i);

// `count` elements of `type`, element i being value(i).
template <typename F>
std::vector<char> MakeBuffer(ncclDataType_t type, size_t count, F value) {
  std::vector<char> buf(count * TypeSize(type));
  for (size_t i = 0; i < count; ++i) Encode(type, value(i), buf.data() + i * TypeSize(type));
  return buf;
}

// "" when element i of `got` (count elements of `type`) equals want(i) for every i;
// else a description naming `what`, the first mismatching index and both values.
template <typename F>
std::string Compare(ncclDataType_t type, const void* got, size_t count, F want, const std::string& what) {
  const char* bytes = static_cast<const char*>(got);
  for (size_t i = 0; i < count; ++i) {
    const double g = Decode(type, bytes + i * TypeSize(type)), w = want(i);
    if (g != w) {
      return what + " (" + TypeName(type) + "): element " + std::to_string(i) + " is " + std::to_string(g) +
             ", want " + std::to_string(w) + "; ";
    }
  }
  return "";
}

}  // namespace nccl_test

#endif  // TESSERA_NCCL_TEST_VALUES_H_
