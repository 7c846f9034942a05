// MPI's datatypes and operators as tessera takes them.
//
// Reductions: tessera reduces its own element types with sum, prod, max and min, so a
// reduction is routed only when its datatype is a predefined MPI type of one of those
// (TesseraTypeOf) and its operator one of those four (TesseraOpOf). MPI has every rank of
// a reduction pass the same datatype and operator, so every rank decides alike.
//
// Data movement (bcast, allgather, alltoall): tessera moves bytes, and MPI lets ranks pass
// different datatypes of the same type signature (a vector type on the root, plain floats
// elsewhere). Every such call is therefore routed, whatever its datatypes: a buffer whose
// elements lie contiguous in memory moves as it is, any other through a packed staging
// copy (PMPI_Pack / PMPI_Unpack), the bytes MPI itself would send on a homogeneous job.
#ifndef TESSERA_MPI_DATATYPES_H_
#define TESSERA_MPI_DATATYPES_H_

#include <mpi.h>
#include <tessera/tessera.h>

#include <cstddef>
#include <vector>

namespace tessera_mpi {

// The tessera type of a predefined MPI datatype whose values tessera reduces as MPI does
// (MPI_FLOAT, MPI_DOUBLE, MPI_INT, MPI_INT64_T, MPI_UNSIGNED_CHAR, ...). False for every
// other datatype: derived ones, MPI_SHORT, MPI_LONG_DOUBLE, MPI_C_BOOL, MPI_BYTE, pairs.
bool TesseraTypeOf(MPI_Datatype type, tesseraDataType_t* out);

// MPI_SUM, MPI_PROD, MPI_MAX and MPI_MIN; false for every other operator.
bool TesseraOpOf(MPI_Op op, tesseraRedOp_t* out);

// `count` elements of `type` at `buffer`, as the bytes tessera moves. Direct when the
// elements lie contiguous in memory in their type-map order (a predefined type without
// padding, or a contiguous type of one); otherwise staged in a packed copy.
class ByteView {
 public:
  // Describes the buffer. An MPI error code (the datatype's, or MPI_ERR_COUNT for a staged
  // count past INT_MAX) on failure. `count` may be a block count times the ranks.
  int Init(const void* buffer, long long count, MPI_Datatype type, MPI_Comm comm);

  // The bytes tessera reads and writes: the user's buffer, or the staging copy.
  char* data() { return staged_ ? staging_.data() : static_cast<char*>(const_cast<void*>(buffer_)); }
  size_t bytes() const { return bytes_; }
  bool staged() const { return staged_; }

  // Staged only: fill the staging copy from the buffer (before a send), and write it
  // back into the buffer (after a receive). MPI error codes.
  int PackIn();
  int UnpackOut();

 private:
  const void* buffer_ = nullptr;
  int count_ = 0;
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  MPI_Comm comm_ = MPI_COMM_NULL;
  size_t bytes_ = 0;
  bool staged_ = false;
  std::vector<char> staging_;
};

}  // namespace tessera_mpi

#endif  // TESSERA_MPI_DATATYPES_H_
