// The facade: kiln::compile(graph) → kiln::Kernel, a handle that launches
// every kernel of the compiled graph in order on the caller's stream.
//
//   kiln::Kernel k = kiln::compile(g);
//   k.launch({x, b, y});                       // views: inputs, then outputs
//   k.launch(kiln::Args().tensor("x", x).tensor("b", b).tensor("y", y));
//
// Positional arguments follow the graph: tensor inputs in declaration order,
// then outputs in output order; dims in Graph::dynamicDims() order (or
// inferred from the tensors); runtime scalars in declaration order.
//
// Compiling an equal graph again in the same process returns the kernel
// built the first time. compile() works without a GPU (it builds the cubin
// for the chip in CompileOptions); launching needs a driver and says so.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/compiler/compile.h"
#include "kiln/dsl/graph.h"
#include "kiln/runtime/arg_packer.h"
#include "kiln/runtime/tensor_view.h"

namespace kiln {

using rt::ScalarArg;
using Args = rt::NamedArgs;

struct CompileOptions {
  // The GPU's SM ("sm_90"). Empty: the current device's, or sm_90 when no
  // GPU is present.
  std::string chip;
  compiler::CubinRoute route = compiler::CubinRoute::Default;
  bool keepText = true;  // keep MLIR and PTX (for explain / tools)
  // JSON replacing the heuristic's config choices (see compiler::CompileOptions).
  std::string configOverride;
};

class Kernel {
 public:
  struct Impl;
  Kernel() = default;
  explicit Kernel(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

  // Positional launch (the fast path: no allocation, no lookups).
  void launch(std::span<const TensorView> tensors, std::span<const int64_t> dims = {},
              std::span<const ScalarArg> scalars = {}, void* stream = nullptr) const;
  void launch(std::initializer_list<TensorView> tensors, std::initializer_list<int64_t> dims = {},
              std::initializer_list<ScalarArg> scalars = {}, void* stream = nullptr) const {
    launch(std::span<const TensorView>(tensors.begin(), tensors.size()),
           std::span<const int64_t>(dims.begin(), dims.size()),
           std::span<const ScalarArg>(scalars.begin(), scalars.size()), stream);
  }
  // By name (convenient; allocates).
  void launch(const Args& args, void* stream = nullptr) const;

  // The kernels, their schedules and configs, and why the graph was split.
  std::string explain() const;
  const compiler::CompiledGraph& compiled() const;
  // The graph-level signature: tensor inputs then outputs, dims, scalars.
  const rt::KernelSignature& signature() const;
  bool valid() const { return impl_ != nullptr; }

 private:
  std::shared_ptr<Impl> impl_;
};

Kernel compile(const Graph& graph, const CompileOptions& options = {});

}  // namespace kiln
