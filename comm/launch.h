// Creating a communicator of the whole job from the launcher's environment
// (tesseraCommInitFromEnv): rank and size from mpirun, srun or torchrun variables, the
// rendezvous from TESSERA_BOOTSTRAP_ADDR, MASTER_ADDR/MASTER_PORT, or the launcher's
// PMIx server. See docs/launching.md.
#ifndef TESSERA_COMM_LAUNCH_H_
#define TESSERA_COMM_LAUNCH_H_

#include <memory>

#include "base/settings.h"
#include "comm/communicator.h"

namespace tessera {

Status CreateFromLauncher(const Settings& settings, std::unique_ptr<Communicator>* out);

}  // namespace tessera

#endif  // TESSERA_COMM_LAUNCH_H_
