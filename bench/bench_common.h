// Shared by kiln's GPU benchmarks.
#pragma once

#include "kiln/dsl/graph.h"

namespace kiln::bench {

// Bytes that must move: every input read once, every output written once
// (the effective-bandwidth numerator of docs/benchmarks.md).
inline double minBytes(const Graph& g) {
  double bytes = 0;
  for (int id : g.params())
    if (g.node(id).op == Op::Input) bytes += staticElementCount(g.node(id).shape) * double(dtypeSize(g.node(id).dtype));
  for (const GraphOutput& o : g.outputs())
    bytes += staticElementCount(g.node(o.node).shape) * double(dtypeSize(g.node(o.node).dtype));
  return bytes;
}

}  // namespace kiln::bench
