// One MPI collective call that tessera runs: the tessera call it becomes, and what it
// keeps until it completes (packed copies, an aside buffer), for the blocking entry points
// (run at once) and the non-blocking ones (run on the mirror's non-blocking communicator,
// requests.h) alike.
//
// Each Prepare* function turns an MPI call's arguments into a RoutedCall, packing what
// must be packed (datatypes.h); Issue posts it on a tessera communicator; Finish, after
// it succeeded, unpacks or copies into the user's buffers. A RoutedCall points into
// itself: it stays where it was prepared until it completes.
#ifndef TESSERA_MPI_ROUTED_CALL_H_
#define TESSERA_MPI_ROUTED_CALL_H_

#include <mpi.h>
#include <tessera/tessera.h>

#include <cstddef>
#include <vector>

#include "mpi/datatypes.h"
#include "mpi/mirror.h"
#include "mpi/settings.h"

namespace tessera_mpi {

struct RoutedCall {
  Collective collective = Collective::kAllreduce;  // its blocking form names the tessera call
  const Mirror* mirror = nullptr;
  // The tessera call's arguments.
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  tesseraDataType_t type = tesseraUint8;
  tesseraRedOp_t op = tesseraSum;
  int root = 0;
  // Kept until completion.
  ByteView send_view, recv_view;
  bool unpack_recv = false;     // Finish unpacks recv_view into the user's buffer
  std::vector<char> aside;      // in-place reduce_scatter_block: the block, copied to
  void* aside_to = nullptr;     // the front of the user's buffer by Finish
  unsigned char token = 0;      // a barrier's byte
};

// The arguments of the MPI calls, checked by the entry points: counts not negative, and
// for reductions, a datatype and an operator that tessera has (`type`, `op`). Each
// returns an MPI error code (a datatype's, or MPI_ERR_TRUNCATE for signatures that differ).
int PrepareAllreduce(RoutedCall* call, const void* sendbuf, void* recvbuf, int count, tesseraDataType_t type,
                     tesseraRedOp_t op);
int PrepareReduce(RoutedCall* call, const void* sendbuf, void* recvbuf, int count, tesseraDataType_t type,
                  tesseraRedOp_t op, int root);
int PrepareReduceScatterBlock(RoutedCall* call, const void* sendbuf, void* recvbuf, int recvcount,
                              MPI_Datatype datatype, tesseraDataType_t type, tesseraRedOp_t op);
int PrepareBcast(RoutedCall* call, void* buffer, int count, MPI_Datatype datatype, int root);
int PrepareAllgather(RoutedCall* call, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                     int recvcount, MPI_Datatype recvtype);
int PrepareAlltoall(RoutedCall* call, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    int recvcount, MPI_Datatype recvtype);
void PrepareBarrier(RoutedCall* call);

// Posts the call on `comm` (the mirror's blocking or non-blocking communicator).
tesseraResult_t Issue(RoutedCall* call, tesseraComm_t comm);

// After the tessera call succeeded: what the user's buffers still need. An MPI error code.
int Finish(RoutedCall* call);

}  // namespace tessera_mpi

#endif  // TESSERA_MPI_ROUTED_CALL_H_
