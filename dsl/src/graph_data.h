// Internal: the storage behind a Graph handle.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "kiln/dsl/graph.h"

namespace kiln::detail {

struct GraphData {
  // A deque: appending never moves existing nodes, so a `const Node&` taken
  // from a Tensor stays valid while more ops are added.
  std::deque<Node> nodes;
  std::vector<int> params;            // Input and Scalar ids, declared order
  std::vector<GraphOutput> outputs;
};

}  // namespace kiln::detail
