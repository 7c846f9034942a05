// The allreduce algorithms, registered in one table {id, name, description}, and the
// choice among them. TESSERA_ALGO forces one by name; "auto" picks by message size.
#ifndef TESSERA_COLLECTIVES_ALGORITHMS_H_
#define TESSERA_COLLECTIVES_ALGORITHMS_H_

#include <string>
#include <vector>

#include "collectives/collective.h"

namespace tessera {

enum class AllReduceAlgorithm { kRing, kRecursiveDoubling };

struct AllReduceAlgorithmInfo {
  AllReduceAlgorithm id;
  const char* name;
  const char* description;
  Status (*run)(const CollectiveContext& ctx, const CollectiveArgs& args);
};

const std::vector<AllReduceAlgorithmInfo>& AllReduceAlgorithms();

// "auto" or a name from the table; InvalidArgument listing the names otherwise.
Status CheckAlgorithmName(const std::string& name);

// The algorithm for a buffer of `bytes` on `nranks` ranks, honouring a forced name.
const AllReduceAlgorithmInfo& SelectAllReduce(const std::string& forced, size_t bytes, int nranks);

}  // namespace tessera

#endif  // TESSERA_COLLECTIVES_ALGORITHMS_H_
