// The sample graphs shipped as examples/graphs/<name>.kiln, built with the
// DSL. A test checks that each file is exactly what these builders print.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/dsl/graph.h"

namespace kiln::samples {

struct Sample {
  std::string name;
  std::string summary;
  std::function<Graph()> build;
};

const std::vector<Sample>& all();
Graph build(const std::string& name);  // kiln::Error for an unknown name

}  // namespace kiln::samples
