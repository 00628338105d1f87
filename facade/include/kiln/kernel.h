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
//
// A graph may compile to several kernels (see explain()). Intermediates that
// pass between them and are not graph outputs live in a device workspace
// that the Kernel owns: one allocation, laid out at each launch from that
// launch's dims (each tensor 256-byte aligned), allocated on the first launch
// that needs it and grown, never shrunk, when a launch needs more. Growing
// waits for the whole context (cuCtxSynchronize) before freeing the old
// allocation, so it must not happen during a stream capture: launch once at
// the largest dims before capturing. The memory is freed with the Kernel,
// which the process-wide registry keeps to the end of the process.
//
// Concurrency: launching one Kernel from several threads is safe (the host
// side of a multi-kernel launch takes a lock). But all launches of a
// multi-kernel graph share its one workspace, on the GPU too: launches that
// could run at the same time on different streams would overwrite each
// other's intermediates. Order them (same stream, or events), and remember
// that compile() of an equal graph returns the same Kernel, workspace
// included. Single-kernel graphs (most) have no workspace and no such rule.
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

namespace rt {
class DiskCache;
}

using rt::ScalarArg;
using Args = rt::NamedArgs;

struct CompileOptions {
  // The GPU's SM ("sm_90"). Empty: the current device's, or sm_90 when no
  // GPU is present.
  std::string chip;
  compiler::CubinRoute route = compiler::CubinRoute::Default;
  bool keepText = true;  // keep MLIR and PTX (for explain / tools)
  // JSON replacing the heuristic's config choices (see compiler::CompileOptions):
  // for pointwise kernels, and for row-reduction kernels.
  std::string configOverride;
  std::string rowConfigOverride;
  // Look up and store compiled kernels in the disk cache ($KILN_CACHE_DIR,
  // else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln; KILN_CACHE=0 turns it off
  // for the whole process). A second process compiling an equal graph with
  // equal options loads the cubins instead of compiling.
  bool diskCache = true;
};

// Graph → cubins through the disk cache, without loading anything (what
// `kiln compile` uses). Each kernel's `cache` says "hit", "miss", "rebuilt"
// or "off".
// `cache`: null for the process-wide one (rt::DiskCache::global()).
compiler::CompiledGraph compileGraphCached(const Graph& graph, const compiler::CompileOptions& options,
                                           bool useDiskCache = true, rt::DiskCache* cache = nullptr);
// False when KILN_CACHE is 0, off, false or no.
bool diskCacheEnabledByEnvironment();

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

  // "N kernel(s) for sm_XX", then per kernel its name, schedule, config,
  // why it exists, its tensors and each entry's registers and spills; the
  // workspace tensors with their dtypes and shapes; and the planner's
  // account of how the graph was split ("plan:").
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
