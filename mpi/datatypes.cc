#include "mpi/datatypes.h"

#include <climits>

namespace tessera_mpi {
namespace {

static_assert(sizeof(int) == 4 && sizeof(long) == 8 && sizeof(long long) == 8, "LP64 expected");
static_assert(sizeof(MPI_Aint) == 8 && sizeof(MPI_Offset) == 8 && sizeof(MPI_Count) == 8, "64-bit MPI integers expected");

struct TypeRow {
  MPI_Datatype mpi;
  tesseraDataType_t tessera;
};

// Open MPI's predefined handles are addresses of its objects, not constants: the table is
// built on first use and searched in order, the types that programs reduce most first.
// MPI_CHAR is signed here (x86-64); Open MPI reduces it as such. MPI_BYTE is left out:
// MPI reduces it only with bitwise operators, which tessera lacks.
const TypeRow* TypeTable(size_t* rows) {
  static const TypeRow table[] = {
      {MPI_FLOAT, tesseraFloat32},           {MPI_DOUBLE, tesseraFloat64},
      {MPI_INT, tesseraInt32},               {MPI_LONG, tesseraInt64},
      {MPI_CHAR, tesseraInt8},               {MPI_UNSIGNED, tesseraUint32},
      {MPI_UNSIGNED_LONG, tesseraUint64},    {MPI_LONG_LONG_INT, tesseraInt64},
      {MPI_UNSIGNED_LONG_LONG, tesseraUint64}, {MPI_SIGNED_CHAR, tesseraInt8},
      {MPI_UNSIGNED_CHAR, tesseraUint8},     {MPI_INT8_T, tesseraInt8},
      {MPI_UINT8_T, tesseraUint8},           {MPI_INT32_T, tesseraInt32},
      {MPI_UINT32_T, tesseraUint32},         {MPI_INT64_T, tesseraInt64},
      {MPI_UINT64_T, tesseraUint64},         {MPI_AINT, tesseraInt64},
      {MPI_OFFSET, tesseraInt64},            {MPI_COUNT, tesseraInt64},
  };
  *rows = sizeof(table) / sizeof(table[0]);
  return table;
}

}  // namespace

bool TesseraTypeOf(MPI_Datatype type, tesseraDataType_t* out) {
  size_t rows = 0;
  const TypeRow* table = TypeTable(&rows);
  for (size_t i = 0; i < rows; ++i) {
    if (table[i].mpi == type) {
      *out = table[i].tessera;
      return true;
    }
  }
  return false;
}

bool TesseraOpOf(MPI_Op op, tesseraRedOp_t* out) {
  if (op == MPI_SUM) {
    *out = tesseraSum;
  } else if (op == MPI_MAX) {
    *out = tesseraMax;
  } else if (op == MPI_MIN) {
    *out = tesseraMin;
  } else if (op == MPI_PROD) {
    *out = tesseraProd;
  } else {
    return false;
  }
  return true;
}

int ByteView::Init(const void* buffer, long long count, MPI_Datatype type, MPI_Comm comm) {
  buffer_ = buffer;
  type_ = type;
  comm_ = comm;
  int size = 0, integers = 0, addresses = 0, datatypes = 0, combiner = 0;
  MPI_Aint lb = 0, extent = 0, true_lb = 0, true_extent = 0;
  int rc = PMPI_Type_size(type, &size);
  if (rc == MPI_SUCCESS) rc = PMPI_Type_get_envelope(type, &integers, &addresses, &datatypes, &combiner);
  if (rc == MPI_SUCCESS) rc = PMPI_Type_get_extent(type, &lb, &extent);
  if (rc == MPI_SUCCESS) rc = PMPI_Type_get_true_extent(type, &true_lb, &true_extent);
  if (rc != MPI_SUCCESS) return rc;
  bytes_ = static_cast<size_t>(count) * static_cast<size_t>(size);
  // A predefined type is one element, contiguous when it has no padding (MPI_DOUBLE_INT
  // has); a derived type may list its blocks in any order, so it is packed.
  staged_ = !(combiner == MPI_COMBINER_NAMED && extent == size && true_lb == 0 && true_extent == size);
  if (!staged_) return MPI_SUCCESS;
  if (count > INT_MAX) return MPI_ERR_COUNT;
  count_ = static_cast<int>(count);
  int packed_size = 0;
  rc = PMPI_Pack_size(count_, type, comm, &packed_size);
  if (rc != MPI_SUCCESS) return rc;
  staging_.resize(packed_size > 0 ? static_cast<size_t>(packed_size) : 1);
  return MPI_SUCCESS;
}

int ByteView::PackIn() {
  if (!staged_) return MPI_SUCCESS;
  int position = 0;
  const int rc = PMPI_Pack(buffer_, count_, type_, staging_.data(), static_cast<int>(staging_.size()), &position, comm_);
  if (rc != MPI_SUCCESS) return rc;
  // On a homogeneous job the packed bytes are the type signature's, MPI_Type_size each.
  return static_cast<size_t>(position) == bytes_ ? MPI_SUCCESS : MPI_ERR_TYPE;
}

int ByteView::UnpackOut() {
  if (!staged_) return MPI_SUCCESS;
  int position = 0;
  return PMPI_Unpack(staging_.data(), static_cast<int>(staging_.size()), &position, const_cast<void*>(buffer_), count_,
                     type_, comm_);
}

}  // namespace tessera_mpi
