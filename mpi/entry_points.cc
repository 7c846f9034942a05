// libtessera_mpi.so's MPI functions: the collectives it routes to tessera, and the hooks of
// MPI_Init and MPI_Finalize. Everything else a program calls is Open MPI's, untouched.
//
// Each collective decides, on every rank alike (docs/mpi.md#what-is-routed), whether
// tessera runs it: the setting, then (reductions) the datatype and operator, then the
// communicator's mirror (mirror.h). A call tessera does not take goes to the PMPI_ entry
// point of the same name, as MPI's profiling interface intends. A routed call that fails
// goes through the communicator's MPI error handler with tessera's message (errors.h).
//
// The definitions are checked against Open MPI's mpi.h: a signature that differs is a
// conflicting declaration of a C function, and the build fails.
#include <mpi.h>
#include <tessera/tessera.h>

#include <cstring>
#include <vector>

#include "mpi/call_counts.h"
#include "mpi/datatypes.h"
#include "mpi/errors.h"
#include "mpi/mirror.h"
#include "mpi/settings.h"

namespace tessera_mpi {
namespace {

// Where a call goes: tessera through `mirror`, or Open MPI (mirror null) for `route`.
struct Decision {
  const Mirror* mirror;
  Route route;
};

Decision Decide(Collective collective, MPI_Comm comm) {
  if (!CurrentSettings().Routes(collective)) return {nullptr, Route::kSettingOff};
  const Mirror* mirror = MirrorOf(comm);
  if (mirror == nullptr) return {nullptr, Route::kCommunicator};
  if (mirror->comm == nullptr) return {nullptr, mirror->why_not};
  return {mirror, Route::kRouted};
}

// A reduction also needs a datatype and an operator of tessera's. They are looked at
// first: the same on every rank by MPI's rules, and a call that falls back on them
// creates no mirror.
Decision DecideReduction(Collective collective, MPI_Comm comm, int count, MPI_Datatype datatype, MPI_Op op,
                         tesseraDataType_t* type, tesseraRedOp_t* tessera_op) {
  if (count < 0) return {nullptr, Route::kArgument};
  if (!TesseraTypeOf(datatype, type)) return {nullptr, Route::kDatatype};
  if (!TesseraOpOf(op, tessera_op)) return {nullptr, Route::kOperator};
  return Decide(collective, comm);
}

Decision Counted(Collective collective, Decision decision) {
  CountCall(collective, decision.route);
  return decision;
}

int Finish(Collective collective, const Mirror& mirror, tesseraResult_t result) {
  return result == tesseraSuccess ? MPI_SUCCESS : RaiseTesseraError(collective, mirror, result);
}

// Moves bytes with `run` (a tessera call over the views) between staged or direct views;
// the send view is packed before, the receive view unpacked after.
template <typename Run>
int MoveBytes(Collective collective, const Mirror& mirror, ByteView* send, ByteView* recv, Run run) {
  int rc = send != nullptr ? send->PackIn() : MPI_SUCCESS;
  if (rc != MPI_SUCCESS) return RaiseMpiError(mirror, rc);
  const tesseraResult_t result = run();
  if (result != tesseraSuccess) return RaiseTesseraError(collective, mirror, result);
  rc = recv != nullptr ? recv->UnpackOut() : MPI_SUCCESS;
  return rc == MPI_SUCCESS ? MPI_SUCCESS : RaiseMpiError(mirror, rc);
}

int Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  tesseraDataType_t type;
  tesseraRedOp_t tessera_op;
  const Decision d =
      Counted(Collective::kAllreduce, DecideReduction(Collective::kAllreduce, comm, count, datatype, op, &type, &tessera_op));
  if (d.mirror == nullptr) return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  const void* send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  return Finish(Collective::kAllreduce, *d.mirror,
                tesseraAllReduce(send, recvbuf, static_cast<size_t>(count), type, tessera_op, d.mirror->comm, nullptr));
}

int Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm) {
  tesseraDataType_t type;
  tesseraRedOp_t tessera_op;
  const Decision d =
      Counted(Collective::kReduce, DecideReduction(Collective::kReduce, comm, count, datatype, op, &type, &tessera_op));
  if (d.mirror == nullptr) return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
  const void* send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;  // MPI_IN_PLACE: the root's
  return Finish(Collective::kReduce, *d.mirror,
                tesseraReduce(send, recvbuf, static_cast<size_t>(count), type, tessera_op, root, d.mirror->comm, nullptr));
}

int ReduceScatterBlock(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm) {
  tesseraDataType_t type;
  tesseraRedOp_t tessera_op;
  const Decision d = Counted(Collective::kReduceScatterBlock, DecideReduction(Collective::kReduceScatterBlock, comm,
                                                                              recvcount, datatype, op, &type, &tessera_op));
  if (d.mirror == nullptr) return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
  const Mirror& m = *d.mirror;
  const size_t count = static_cast<size_t>(recvcount);
  if (sendbuf != MPI_IN_PLACE) {
    return Finish(Collective::kReduceScatterBlock, m,
                  tesseraReduceScatter(sendbuf, recvbuf, count, type, tessera_op, m.comm, nullptr));
  }
  // In place, the block lands at the front of recvbuf and the rest of recvbuf stays as
  // it was (as Open MPI leaves it): tessera writes it aside, from where it is copied.
  int size = 0;
  PMPI_Type_size(datatype, &size);
  std::vector<char> block(count * static_cast<size_t>(size));
  const tesseraResult_t result = tesseraReduceScatter(recvbuf, block.data(), count, type, tessera_op, m.comm, nullptr);
  if (result == tesseraSuccess && !block.empty()) std::memcpy(recvbuf, block.data(), block.size());
  return Finish(Collective::kReduceScatterBlock, m, result);
}

int Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  const Decision d =
      Counted(Collective::kBcast, count < 0 ? Decision{nullptr, Route::kArgument} : Decide(Collective::kBcast, comm));
  if (d.mirror == nullptr) return PMPI_Bcast(buffer, count, datatype, root, comm);
  const Mirror& m = *d.mirror;
  ByteView view;
  const int rc = view.Init(buffer, count, datatype, comm);
  if (rc != MPI_SUCCESS) return RaiseMpiError(m, rc);
  const bool is_root = root == m.rank;
  return MoveBytes(Collective::kBcast, m, is_root ? &view : nullptr, is_root ? nullptr : &view, [&] {
    return tesseraBcast(view.data(), view.bytes(), tesseraUint8, root, m.comm, nullptr);
  });
}

int Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
              MPI_Datatype recvtype, MPI_Comm comm) {
  const bool in_place = sendbuf == MPI_IN_PLACE;
  const bool bad_count = recvcount < 0 || (!in_place && sendcount < 0);
  const Decision d = Counted(Collective::kAllgather,
                             bad_count ? Decision{nullptr, Route::kArgument} : Decide(Collective::kAllgather, comm));
  if (d.mirror == nullptr) return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  const Mirror& m = *d.mirror;
  ByteView recv, send;
  int rc = recv.Init(recvbuf, static_cast<long long>(recvcount) * m.nranks, recvtype, comm);
  if (rc == MPI_SUCCESS && !in_place) rc = send.Init(sendbuf, sendcount, sendtype, comm);
  if (rc != MPI_SUCCESS) return RaiseMpiError(m, rc);
  const size_t block = recv.bytes() / static_cast<size_t>(m.nranks);
  if (!in_place && send.bytes() != block) return RaiseMpiError(m, MPI_ERR_TRUNCATE);
  // In place, this rank's block already sits in recvbuf (and is packed with the rest).
  ByteView* source = in_place ? &recv : &send;
  return MoveBytes(Collective::kAllgather, m, source, &recv, [&] {
    const char* from = in_place ? recv.data() + static_cast<size_t>(m.rank) * block : send.data();
    return tesseraAllGather(from, recv.data(), block, tesseraUint8, m.comm, nullptr);
  });
}

int Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
             MPI_Datatype recvtype, MPI_Comm comm) {
  const bool in_place = sendbuf == MPI_IN_PLACE;
  const bool bad_count = recvcount < 0 || (!in_place && sendcount < 0);
  const Decision d =
      Counted(Collective::kAlltoall, bad_count ? Decision{nullptr, Route::kArgument} : Decide(Collective::kAlltoall, comm));
  if (d.mirror == nullptr) return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  const Mirror& m = *d.mirror;
  ByteView recv, send;
  int rc = recv.Init(recvbuf, static_cast<long long>(recvcount) * m.nranks, recvtype, comm);
  if (rc == MPI_SUCCESS && !in_place) rc = send.Init(sendbuf, static_cast<long long>(sendcount) * m.nranks, sendtype, comm);
  if (rc != MPI_SUCCESS) return RaiseMpiError(m, rc);
  if (!in_place && send.bytes() != recv.bytes()) return RaiseMpiError(m, MPI_ERR_TRUNCATE);
  const size_t block = recv.bytes() / static_cast<size_t>(m.nranks);
  ByteView* source = in_place ? &recv : &send;  // in place: tessera copies the input aside
  return MoveBytes(Collective::kAlltoall, m, source, &recv, [&] {
    return tesseraAlltoAll(source->data(), recv.data(), block, tesseraUint8, m.comm, nullptr);
  });
}

// A one-byte allreduce: no rank has its result before every rank has contributed.
int Barrier(MPI_Comm comm) {
  const Decision d = Counted(Collective::kBarrier, Decide(Collective::kBarrier, comm));
  if (d.mirror == nullptr) return PMPI_Barrier(comm);
  unsigned char token = 0;
  return Finish(Collective::kBarrier, *d.mirror,
                tesseraAllReduce(&token, &token, 1, tesseraUint8, tesseraMax, d.mirror->comm, nullptr));
}

int AfterInit(int rc) {
  if (rc == MPI_SUCCESS) AgreeOnSettings();
  return rc;
}

int Finalize() {
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  DestroyMirrors();
  PrintCallCounts(rank);
  return PMPI_Finalize();
}

}  // namespace
}  // namespace tessera_mpi

extern "C" {

int MPI_Init(int* argc, char*** argv) { return tessera_mpi::AfterInit(PMPI_Init(argc, argv)); }

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  return tessera_mpi::AfterInit(PMPI_Init_thread(argc, argv, required, provided));
}

int MPI_Finalize(void) { return tessera_mpi::Finalize(); }

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return tessera_mpi::Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
               MPI_Comm comm) {
  return tessera_mpi::Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm) {
  return tessera_mpi::ReduceScatterBlock(sendbuf, recvbuf, recvcount, datatype, op, comm);
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  return tessera_mpi::Bcast(buffer, count, datatype, root, comm);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
  return tessera_mpi::Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm) {
  return tessera_mpi::Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Barrier(MPI_Comm comm) { return tessera_mpi::Barrier(comm); }

}  // extern "C"
