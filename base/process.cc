#include "base/process.h"

#include <fstream>

namespace tessera {

std::string ProcessState(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return "exited";
  // pid (comm) state ...: comm may hold spaces and parentheses; the state follows the last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return "";
  switch (line[close + 2]) {
    case 'T': case 't': return "stopped (SIGSTOP or a debugger)";
    case 'Z': case 'X': return "exited";
    default: return "";
  }
}

}  // namespace tessera
