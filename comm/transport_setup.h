// TransportSetup: builds a communicator's transports from TESSERA_TRANSPORT, in two
// steps around the rendezvous.
//
// 1. Prepare (before): opens the TCP listener, creates the transports that must publish
//    something (a shared-memory segment name, UCX's worker address, ibverbs' device
//    summary) and fills this rank's RankInfo with it.
// 2. Finish (after, with every rank's RankInfo): creates the shared-memory transport
//    with the ranks of this host, tells UCX and ibverbs who else has them, and hands
//    every transport, in priority order, to a LinkTable.
//
// Every pair of ranks must choose the same transport; that holds because the list is
// an agreed setting (the rendezvous checks it) and each transport's CanConnect depends
// only on what both ranks published. cuda_ipc is not among them: it carries only
// device-resident calls, in a table of its own (Communicator::EnableDeviceLinks), from
// the segment names published here. In "auto", ibverbs is used where a device opens,
// UCX only on a host with an RDMA device that ibverbs could not open (elsewhere UCX
// would only run over TCP, which tessera's own TCP does faster), and a transport that
// cannot start (no device) is left out quietly; one named explicitly must start.
#ifndef TESSERA_COMM_TRANSPORT_SETUP_H_
#define TESSERA_COMM_TRANSPORT_SETUP_H_

#include <memory>
#include <string>
#include <vector>

#include "base/settings.h"
#include "base/socket.h"
#include "bootstrap/rendezvous.h"
#include "transport/link_table.h"
#include "transport/shm/shm_transport.h"

namespace tessera {

class TcpTransport;
class UcxTransport;
class IbverbsTransport;

class TransportSetup {
 public:
  TransportSetup();
  ~TransportSetup();

  // Fills mine->listen, shm_name, the UCX address, the ibverbs summary and the agreed
  // transport settings.
  Status Prepare(const Settings& settings, int rank, int nranks, RankInfo* mine);

  // Builds the links' table. *local_ranks: ranks on this host (this one included).
  Status Finish(const std::vector<RankInfo>& all, uint64_t secret, const Deadline& deadline,
                std::unique_ptr<LinkTable>* out, int* local_ranks);

  // One line for the log: the transports this rank built, in priority order.
  const std::string& description() const { return description_; }
  // Whether UCX carries some pair (after Finish).
  bool uses_ucx() const { return uses_ucx_; }
  // Whether TESSERA_TRANSPORT allows cuda_ipc (auto, or a list naming it).
  bool allows_cuda_ipc() const { return allows_cuda_ipc_; }
  // The ranks of this host in rank order, with their segment names (after Finish): what
  // the cuda_ipc transport is created from (transport/cuda_ipc).
  const std::vector<ShmTransport::LocalRank>& local_ranks() const { return local_; }
  // The ibverbs transport in the table (after Finish; owned by the table), or null: what
  // device-resident calls across hosts derive their GPUDirect transport from.
  IbverbsTransport* ibverbs() const { return ibverbs_in_table_; }

 private:
  Settings settings_;
  int rank_ = 0;
  int nranks_ = 0;
  std::vector<std::string> order_;  // TESSERA_TRANSPORT, expanded
  bool automatic_ = false;
  Socket listener_;
  std::unique_ptr<UcxTransport> ucx_;
  std::unique_ptr<IbverbsTransport> ibverbs_;
  IbverbsTransport* ibverbs_in_table_ = nullptr;
  std::shared_ptr<LinkTable*> table_for_ibverbs_;  // filled in Finish: ibverbs' set-up channel
  std::string description_;
  bool uses_ucx_ = false;
  bool allows_cuda_ipc_ = false;
  std::vector<ShmTransport::LocalRank> local_;
};

// TESSERA_TRANSPORT as the number the rendezvous compares (one digit per name, in order).
int64_t EncodeTransportList(const std::vector<std::string>& order);

}  // namespace tessera

#endif  // TESSERA_COMM_TRANSPORT_SETUP_H_
