// Internal: the storage behind a Graph handle.
#pragma once

#include <string>
#include <vector>

#include "kiln/dsl/graph.h"

namespace kiln::detail {

struct GraphData {
  std::vector<Node> nodes;
  std::vector<int> params;            // Input and Scalar ids, declared order
  std::vector<GraphOutput> outputs;
};

}  // namespace kiln::detail
