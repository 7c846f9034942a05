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

#include <memory>

#include "mpi/call_counts.h"
#include "mpi/datatypes.h"
#include "mpi/errors.h"
#include "mpi/mirror.h"
#include "mpi/requests.h"
#include "mpi/routed_call.h"
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

// The decision for data movement: any datatypes (datatypes.h), counts not negative.
Decision DecideMovement(Collective collective, MPI_Comm comm, bool bad_count) {
  return bad_count ? Decision{nullptr, Route::kArgument} : Decide(collective, comm);
}

// A non-blocking collective also needs MPI_THREAD_MULTIPLE (requests.h) and the mirror's
// non-blocking communicator.
Decision DecideNonBlocking(Decision blocking, tesseraComm_t* async) {
  if (blocking.mirror == nullptr) return blocking;
  if (!CurrentSettings().thread_multiple) return {nullptr, Route::kThreadLevel};
  *async = AsyncCommOf(*blocking.mirror);
  return *async != nullptr ? blocking : Decision{nullptr, Route::kUnavailable};
}

// Runs a prepared call now on the mirror's communicator; `prepared` is Prepare*'s code.
int RunNow(RoutedCall* call, int prepared) {
  const Mirror& m = *call->mirror;
  if (prepared != MPI_SUCCESS) return RaiseMpiError(m, prepared);
  const tesseraResult_t result = Issue(call, m.comm);
  if (result != tesseraSuccess) return RaiseTesseraError(call->collective, m, result);
  const int rc = Finish(call);
  return rc == MPI_SUCCESS ? MPI_SUCCESS : RaiseMpiError(m, rc);
}

// Posts a prepared call on the non-blocking communicator, as *request.
int RunLater(std::unique_ptr<RoutedCall> call, int prepared, tesseraComm_t async, MPI_Request* request) {
  const Mirror& m = *call->mirror;
  if (prepared != MPI_SUCCESS) return RaiseMpiError(m, prepared);
  const int rc = StartRequest(std::move(call), async, request);
  return rc == MPI_SUCCESS ? MPI_SUCCESS : RaiseMpiError(m, rc);
}

RoutedCall Blank(Collective collective, const Mirror* mirror) {
  RoutedCall call;
  call.collective = collective;
  call.mirror = mirror;
  return call;
}

std::unique_ptr<RoutedCall> NewCall(Collective collective, const Mirror* mirror) {
  auto call = std::make_unique<RoutedCall>();
  call->collective = collective;
  call->mirror = mirror;
  return call;
}

int AfterInit(int rc) {
  if (rc == MPI_SUCCESS) AgreeOnSettings();
  return rc;
}

int Finalize() {
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  DestroyMirrors();
  StopRequests();
  PrintCallCounts(rank);
  return PMPI_Finalize();
}

}  // namespace
}  // namespace tessera_mpi

namespace tmpi = tessera_mpi;
using tmpi::Collective;

extern "C" {

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  tesseraDataType_t type;
  tesseraRedOp_t top;
  const tmpi::Decision d = tmpi::Counted(
      Collective::kAllreduce, tmpi::DecideReduction(Collective::kAllreduce, comm, count, datatype, op, &type, &top));
  if (d.mirror == nullptr) return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  tmpi::RoutedCall call = tmpi::Blank(Collective::kAllreduce, d.mirror);
  return tmpi::RunNow(&call, tmpi::PrepareAllreduce(&call, sendbuf, recvbuf, count, type, top));
}

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request* request) {
  tesseraDataType_t type;
  tesseraRedOp_t top;
  tesseraComm_t async = nullptr;
  const tmpi::Decision d = tmpi::Counted(
      Collective::kIallreduce,
      tmpi::DecideNonBlocking(tmpi::DecideReduction(Collective::kIallreduce, comm, count, datatype, op, &type, &top),
                              &async));
  if (d.mirror == nullptr) return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
  auto call = tmpi::NewCall(Collective::kIallreduce, d.mirror);
  const int prepared = tmpi::PrepareAllreduce(call.get(), sendbuf, recvbuf, count, type, top);
  return tmpi::RunLater(std::move(call), prepared, async, request);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
               MPI_Comm comm) {
  tesseraDataType_t type;
  tesseraRedOp_t top;
  const tmpi::Decision d = tmpi::Counted(
      Collective::kReduce, tmpi::DecideReduction(Collective::kReduce, comm, count, datatype, op, &type, &top));
  if (d.mirror == nullptr) return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
  tmpi::RoutedCall call = tmpi::Blank(Collective::kReduce, d.mirror);
  return tmpi::RunNow(&call, tmpi::PrepareReduce(&call, sendbuf, recvbuf, count, type, top, root));
}

int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request* request) {
  tesseraDataType_t type;
  tesseraRedOp_t top;
  tesseraComm_t async = nullptr;
  const tmpi::Decision d =
      tmpi::Counted(Collective::kIreduce,
                    tmpi::DecideNonBlocking(
                        tmpi::DecideReduction(Collective::kIreduce, comm, count, datatype, op, &type, &top), &async));
  if (d.mirror == nullptr) return PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, request);
  auto call = tmpi::NewCall(Collective::kIreduce, d.mirror);
  const int prepared = tmpi::PrepareReduce(call.get(), sendbuf, recvbuf, count, type, top, root);
  return tmpi::RunLater(std::move(call), prepared, async, request);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm) {
  tesseraDataType_t type;
  tesseraRedOp_t top;
  const tmpi::Decision d =
      tmpi::Counted(Collective::kReduceScatterBlock,
                    tmpi::DecideReduction(Collective::kReduceScatterBlock, comm, recvcount, datatype, op, &type, &top));
  if (d.mirror == nullptr) return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
  tmpi::RoutedCall call = tmpi::Blank(Collective::kReduceScatterBlock, d.mirror);
  return tmpi::RunNow(&call, tmpi::PrepareReduceScatterBlock(&call, sendbuf, recvbuf, recvcount, datatype, type, top));
}

int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm, MPI_Request* request) {
  tesseraDataType_t type;
  tesseraRedOp_t top;
  tesseraComm_t async = nullptr;
  const tmpi::Decision d = tmpi::Counted(
      Collective::kIreduceScatterBlock,
      tmpi::DecideNonBlocking(
          tmpi::DecideReduction(Collective::kIreduceScatterBlock, comm, recvcount, datatype, op, &type, &top), &async));
  if (d.mirror == nullptr) return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request);
  auto call = tmpi::NewCall(Collective::kIreduceScatterBlock, d.mirror);
  const int prepared = tmpi::PrepareReduceScatterBlock(call.get(), sendbuf, recvbuf, recvcount, datatype, type, top);
  return tmpi::RunLater(std::move(call), prepared, async, request);
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  const tmpi::Decision d = tmpi::Counted(Collective::kBcast, tmpi::DecideMovement(Collective::kBcast, comm, count < 0));
  if (d.mirror == nullptr) return PMPI_Bcast(buffer, count, datatype, root, comm);
  tmpi::RoutedCall call = tmpi::Blank(Collective::kBcast, d.mirror);
  return tmpi::RunNow(&call, tmpi::PrepareBcast(&call, buffer, count, datatype, root));
}

int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request* request) {
  tesseraComm_t async = nullptr;
  const tmpi::Decision d = tmpi::Counted(
      Collective::kIbcast, tmpi::DecideNonBlocking(tmpi::DecideMovement(Collective::kIbcast, comm, count < 0), &async));
  if (d.mirror == nullptr) return PMPI_Ibcast(buffer, count, datatype, root, comm, request);
  auto call = tmpi::NewCall(Collective::kIbcast, d.mirror);
  const int prepared = tmpi::PrepareBcast(call.get(), buffer, count, datatype, root);
  return tmpi::RunLater(std::move(call), prepared, async, request);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
  const bool bad_count = recvcount < 0 || (sendbuf != MPI_IN_PLACE && sendcount < 0);
  const tmpi::Decision d =
      tmpi::Counted(Collective::kAllgather, tmpi::DecideMovement(Collective::kAllgather, comm, bad_count));
  if (d.mirror == nullptr) return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  tmpi::RoutedCall call = tmpi::Blank(Collective::kAllgather, d.mirror);
  return tmpi::RunNow(&call, tmpi::PrepareAllgather(&call, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype));
}

int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  const bool bad_count = recvcount < 0 || (sendbuf != MPI_IN_PLACE && sendcount < 0);
  tesseraComm_t async = nullptr;
  const tmpi::Decision d =
      tmpi::Counted(Collective::kIallgather,
                    tmpi::DecideNonBlocking(tmpi::DecideMovement(Collective::kIallgather, comm, bad_count), &async));
  if (d.mirror == nullptr) {
    return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
  }
  auto call = tmpi::NewCall(Collective::kIallgather, d.mirror);
  const int prepared = tmpi::PrepareAllgather(call.get(), sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype);
  return tmpi::RunLater(std::move(call), prepared, async, request);
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm) {
  const bool bad_count = recvcount < 0 || (sendbuf != MPI_IN_PLACE && sendcount < 0);
  const tmpi::Decision d =
      tmpi::Counted(Collective::kAlltoall, tmpi::DecideMovement(Collective::kAlltoall, comm, bad_count));
  if (d.mirror == nullptr) return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  tmpi::RoutedCall call = tmpi::Blank(Collective::kAlltoall, d.mirror);
  return tmpi::RunNow(&call, tmpi::PrepareAlltoall(&call, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype));
}

int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  const bool bad_count = recvcount < 0 || (sendbuf != MPI_IN_PLACE && sendcount < 0);
  tesseraComm_t async = nullptr;
  const tmpi::Decision d =
      tmpi::Counted(Collective::kIalltoall,
                    tmpi::DecideNonBlocking(tmpi::DecideMovement(Collective::kIalltoall, comm, bad_count), &async));
  if (d.mirror == nullptr) {
    return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
  }
  auto call = tmpi::NewCall(Collective::kIalltoall, d.mirror);
  const int prepared = tmpi::PrepareAlltoall(call.get(), sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype);
  return tmpi::RunLater(std::move(call), prepared, async, request);
}

int MPI_Barrier(MPI_Comm comm) {
  const tmpi::Decision d = tmpi::Counted(Collective::kBarrier, tmpi::DecideMovement(Collective::kBarrier, comm, false));
  if (d.mirror == nullptr) return PMPI_Barrier(comm);
  tmpi::RoutedCall call = tmpi::Blank(Collective::kBarrier, d.mirror);
  tmpi::PrepareBarrier(&call);
  return tmpi::RunNow(&call, MPI_SUCCESS);
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  tesseraComm_t async = nullptr;
  const tmpi::Decision d = tmpi::Counted(
      Collective::kIbarrier, tmpi::DecideNonBlocking(tmpi::DecideMovement(Collective::kIbarrier, comm, false), &async));
  if (d.mirror == nullptr) return PMPI_Ibarrier(comm, request);
  auto call = tmpi::NewCall(Collective::kIbarrier, d.mirror);
  tmpi::PrepareBarrier(call.get());
  return tmpi::RunLater(std::move(call), MPI_SUCCESS, async, request);
}

int MPI_Init(int* argc, char*** argv) { return tmpi::AfterInit(PMPI_Init(argc, argv)); }

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  return tmpi::AfterInit(PMPI_Init_thread(argc, argv, required, provided));
}

int MPI_Finalize(void) { return tmpi::Finalize(); }

}  // extern "C"
