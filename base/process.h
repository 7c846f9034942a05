// What /proc says of a process on this host.
#ifndef TESSERA_BASE_PROCESS_H_
#define TESSERA_BASE_PROCESS_H_

#include <string>

namespace tessera {

// Same host only: "exited" (no such process, or a zombie), "stopped (SIGSTOP or a
// debugger)", or "" (running, or its state could not be read) from /proc/<pid>/stat.
std::string ProcessState(int pid);

}  // namespace tessera

#endif  // TESSERA_BASE_PROCESS_H_
