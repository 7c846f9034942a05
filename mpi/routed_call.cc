#include "mpi/routed_call.h"

#include <cstring>

namespace tessera_mpi {

int PrepareAllreduce(RoutedCall* call, const void* sendbuf, void* recvbuf, int count, tesseraDataType_t type,
                     tesseraRedOp_t op) {
  call->send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  call->recv = recvbuf;
  call->count = static_cast<size_t>(count);
  call->type = type;
  call->op = op;
  return MPI_SUCCESS;
}

int PrepareReduce(RoutedCall* call, const void* sendbuf, void* recvbuf, int count, tesseraDataType_t type,
                  tesseraRedOp_t op, int root) {
  PrepareAllreduce(call, sendbuf, recvbuf, count, type, op);  // MPI_IN_PLACE: the root's
  call->root = root;
  return MPI_SUCCESS;
}

int PrepareReduceScatterBlock(RoutedCall* call, const void* sendbuf, void* recvbuf, int recvcount,
                              MPI_Datatype datatype, tesseraDataType_t type, tesseraRedOp_t op) {
  PrepareAllreduce(call, sendbuf, recvbuf, recvcount, type, op);
  if (sendbuf != MPI_IN_PLACE) return MPI_SUCCESS;
  // In place, the block lands at the front of recvbuf and the rest of recvbuf stays as
  // it was (as Open MPI leaves it): tessera writes it aside, from where Finish copies it.
  int size = 0;
  const int rc = PMPI_Type_size(datatype, &size);
  if (rc != MPI_SUCCESS) return rc;
  call->aside.resize(call->count * static_cast<size_t>(size));
  call->recv = call->aside.data();
  call->aside_to = recvbuf;
  return MPI_SUCCESS;
}

int PrepareBcast(RoutedCall* call, void* buffer, int count, MPI_Datatype datatype, int root) {
  ByteView& view = call->recv_view;
  int rc = view.Init(buffer, count, datatype, call->mirror->mpi_comm);
  const bool is_root = root == call->mirror->rank;
  if (rc == MPI_SUCCESS && is_root) rc = view.PackIn();
  if (rc != MPI_SUCCESS) return rc;
  call->send = call->recv = view.data();
  call->count = view.bytes();
  call->root = root;
  call->unpack_recv = !is_root;
  return MPI_SUCCESS;
}

int PrepareAllgather(RoutedCall* call, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                     int recvcount, MPI_Datatype recvtype) {
  const Mirror& m = *call->mirror;
  const bool in_place = sendbuf == MPI_IN_PLACE;
  int rc = call->recv_view.Init(recvbuf, static_cast<long long>(recvcount) * m.nranks, recvtype, m.mpi_comm);
  if (rc == MPI_SUCCESS && !in_place) rc = call->send_view.Init(sendbuf, sendcount, sendtype, m.mpi_comm);
  if (rc != MPI_SUCCESS) return rc;
  const size_t block = call->recv_view.bytes() / static_cast<size_t>(m.nranks);
  if (!in_place && call->send_view.bytes() != block) return MPI_ERR_TRUNCATE;
  // In place, this rank's block already sits in recvbuf (and is packed with the rest).
  rc = in_place ? call->recv_view.PackIn() : call->send_view.PackIn();
  if (rc != MPI_SUCCESS) return rc;
  call->recv = call->recv_view.data();
  call->send = in_place ? call->recv_view.data() + static_cast<size_t>(m.rank) * block : call->send_view.data();
  call->count = block;
  call->unpack_recv = true;
  return MPI_SUCCESS;
}

int PrepareAlltoall(RoutedCall* call, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    int recvcount, MPI_Datatype recvtype) {
  const Mirror& m = *call->mirror;
  const bool in_place = sendbuf == MPI_IN_PLACE;
  int rc = call->recv_view.Init(recvbuf, static_cast<long long>(recvcount) * m.nranks, recvtype, m.mpi_comm);
  if (rc == MPI_SUCCESS && !in_place) {
    rc = call->send_view.Init(sendbuf, static_cast<long long>(sendcount) * m.nranks, sendtype, m.mpi_comm);
  }
  if (rc != MPI_SUCCESS) return rc;
  if (!in_place && call->send_view.bytes() != call->recv_view.bytes()) return MPI_ERR_TRUNCATE;
  ByteView& source = in_place ? call->recv_view : call->send_view;  // in place: tessera copies the input aside
  rc = source.PackIn();
  if (rc != MPI_SUCCESS) return rc;
  call->send = source.data();
  call->recv = call->recv_view.data();
  call->count = call->recv_view.bytes() / static_cast<size_t>(m.nranks);
  call->unpack_recv = true;
  return MPI_SUCCESS;
}

// A one-byte allreduce: no rank has its result before every rank has contributed.
void PrepareBarrier(RoutedCall* call) {
  call->send = call->recv = &call->token;
  call->count = 1;
  call->op = tesseraMax;
}

tesseraResult_t Issue(RoutedCall* call, tesseraComm_t comm) {
  const RoutedCall& c = *call;
  switch (static_cast<Collective>(static_cast<int>(c.collective) % kBlockingCollectives)) {
    case Collective::kAllreduce:
    case Collective::kBarrier:
      return tesseraAllReduce(c.send, c.recv, c.count, c.type, c.op, comm, nullptr);
    case Collective::kReduce:
      return tesseraReduce(c.send, c.recv, c.count, c.type, c.op, c.root, comm, nullptr);
    case Collective::kReduceScatterBlock:
      return tesseraReduceScatter(c.send, c.recv, c.count, c.type, c.op, comm, nullptr);
    case Collective::kBcast:
      return tesseraBroadcast(c.send, c.recv, c.count, tesseraUint8, c.root, comm, nullptr);
    case Collective::kAllgather:
      return tesseraAllGather(c.send, c.recv, c.count, tesseraUint8, comm, nullptr);
    case Collective::kAlltoall:
      return tesseraAlltoAll(c.send, c.recv, c.count, tesseraUint8, comm, nullptr);
    default:
      return tesseraInternalError;
  }
}

int Finish(RoutedCall* call) {
  if (call->aside_to != nullptr && !call->aside.empty()) {
    std::memcpy(call->aside_to, call->aside.data(), call->aside.size());
  }
  return call->unpack_recv ? call->recv_view.UnpackOut() : MPI_SUCCESS;
}

}  // namespace tessera_mpi
