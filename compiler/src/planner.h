// Internal: the fusion planner. It turns a graph into an ordered list of
// kernels, each described by a self-contained sub-graph that one schedule
// compiles:
//   - every reduction is first rewritten into a reduction over its operand's
//     last axis (a permute and/or reshape of the operand where needed), so
//     that one row schedule serves inner, outer and full reductions;
//   - reductions over the same rows share a kernel (a "row group") as long as
//     each only consumes results of its own group: softmax's max and sum,
//     layernorm's mean and variance, cross-entropy's max, sum and gather;
//     elementwise producers are recomputed inside the consumer's loads, and
//     consumers that broadcast a row result back along the row join the
//     group's kernel (the normalized output of a norm);
//   - where a kernel cannot hold a value (a reduction of a reduction over
//     another axis, a reshape of a computed value), the value is
//     materialized in a workspace tensor by the kernel that can compute it
//     and read by the later kernel; the explanation says which and why;
//   - outputs with no reduction in their cone join a row group of their own
//     shape that reads the same inputs (residual add + rmsnorm returns the
//     sum from the norm's kernel), else one pointwise kernel per shape.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kiln/compiler/compile.h"
#include "kiln/dsl/graph.h"

namespace kiln::compiler {

struct KernelPlan {
  enum class Kind { Pointwise, RowReduction, Matmul };
  Kind kind = Kind::Pointwise;
  // Inputs: graph inputs (their names) and workspace tensors read; scalars
  // by their names; outputs: graph outputs and workspace tensors written.
  Graph graph;
  std::set<std::string> workspaceNames;  // names in `graph` that are workspace
  std::string why;
  // A row kernel's grid tail: a one-row reduction over values this kernel
  // writes (its inputs are this kernel's workspace outputs), run by the
  // last block to finish (cross-entropy's mean over the per-row losses).
  // `tailCounter`: the workspace tensor (i32[1], zero between launches)
  // that counts finished blocks.
  std::shared_ptr<Graph> tail;
  std::string tailCounter;
};

struct Plan {
  std::vector<KernelPlan> kernels;       // launch order
  std::vector<KernelTensor> workspace;   // first-written order
  std::string explain;
};

struct PlanOptions {
  // A softmax over the rows of a matmul's product, where the Hopper kernel
  // takes the matmul and K is short (at most kRowSoftmaxMaxK), joins the
  // matmul's kernel (its row-softmax form, matmul_sm90.h) instead of a row
  // kernel that reads the stored product back: set for sm_90 targets
  // (CompileOptions::matmulRowSoftmax).
  bool matmulRowSoftmax = false;
};
inline constexpr int64_t kRowSoftmaxMaxK = 256;

// Exported for the tests that evaluate a plan's kernels on the CPU.
KILN_COMPILER_API Plan planGraph(const Graph& g, const PlanOptions& options = {});

// The graph with every reduction rewritten over its operand's last axis
// (exposed for tests and `kiln compile --emit=graph`).
Graph normalizeReductions(const Graph& g);

}  // namespace kiln::compiler
