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
// side of a multi-kernel launch takes a lock). But all launches of a graph
// with a workspace share it, on the GPU too: launches that could run at
// the same time on different streams would overwrite each other's
// intermediates (and block counters). Order them (same stream, or events),
// and remember that compile() of an equal graph returns the same Kernel,
// workspace included. explain() lists a workspace: multi-kernel graphs,
// grid tails (cross_entropy's mean) and rows split across blocks (a whole
// tensor of dynamic or odd length) have one; other graphs have none and no
// such rule.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
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
namespace tune {
class TuningDatabase;
struct DeviceKey;
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
  // The same for matmul kernels on Hopper (keys: block_n, stages, group_m).
  std::string matmulConfigOverride;
  // A softmax over the rows of a Hopper matmul's product with a short K is
  // computed in the matmul kernel, the product computed twice instead of
  // stored and read back (see compiler::CompileOptions::matmulRowSoftmax;
  // off by default: correct on an H100, but slower there than the stored
  // product for the attention block at T 4096; docs/benchmarks.md).
  bool matmulRowSoftmax = false;
  // Look up and store compiled kernels in the disk cache ($KILN_CACHE_DIR,
  // else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln; KILN_CACHE=0 turns it off
  // for the whole process). A second process compiling an equal graph with
  // equal options loads the cubins instead of compiling.
  bool diskCache = true;

  // Tuned configs (docs/tuning.md). Each kernel of the graph is looked up in
  // the tuning database by what it computes, the device and the shape bucket
  // of `dims`:
  //   UseDatabase (default): a hit's config is used, else the heuristic's;
  //     nothing is ever benchmarked.
  //   IfMissing: a miss is tuned on the GPU now (compiles and benchmarks the
  //     schedule's candidates) and recorded in the database's user file.
  //   Always: tuned now even on a hit (once per process per graph/options).
  //   Off: the heuristic's config; the database is not read.
  enum class Tune { Off, UseDatabase, IfMissing, Always };
  Tune tune = Tune::UseDatabase;
  // The values the graph's dynamic dims will mostly take: they select the
  // database's shape bucket, and tuning benchmarks at exactly these sizes
  // (so it needs every dynamic dim here); and the heuristics configure the
  // kernels for them (a dynamic row length's threads a row), so that
  // launches with such values need no variant. Unused by graphs without
  // dynamic dims.
  std::map<std::string, int64_t> dims;
  // The database to read and record into; null: the process-wide one
  // ($KILN_TUNING_PATH and the user file, loaded at first use).
  tune::TuningDatabase* tuningDatabase = nullptr;
  // The device to look up tuned configs for; null: the current GPU's (no
  // lookups without a GPU unless this is set: compiling ahead of time for a
  // device that is not here).
  const tune::DeviceKey* tuningDevice = nullptr;
  // Tuning's timing runs per candidate (the final round; the quick round
  // takes a quarter). Fewer: faster tuning, noisier choices.
  int tuneIters = 40;
};

// Counters of what this process's kiln did (all kernels, all threads): how
// a program shows that a warm start compiles nothing and benchmarks nothing.
struct Stats {
  uint64_t kernelsCompiled = 0;       // kernels built by the compiler (tuning candidates included)
  uint64_t kernelsFromDiskCache = 0;  // kernels loaded from the disk cache
  uint64_t tuningHits = 0;            // kernels whose config came from the tuning database
  uint64_t tuningMisses = 0;          // kernels looked up and not found
  uint64_t kernelsTuned = 0;          // searches run
  uint64_t candidatesBenchmarked = 0; // candidate configs timed on the GPU
};
Stats stats();

// Progress of tuning runs in this process (kiln-tune draws its progress bar
// from it): the kernel being tuned and its steps done of the total. Called
// from the tuning thread; null removes it.
struct TuningProgress {
  std::string kernel;
  int done = 0;
  int total = 0;
};
using TuningProgressFn = std::function<void(const TuningProgress&)>;
void setTuningProgress(TuningProgressFn fn);

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
  // The most blocks the launcher gives kernel `index` of compiled()
  // (LaunchGeometry::maxBlocks, or for a resident grid the blocks that fit
  // on this GPU at once); 0: no cap. Loads the modules (needs a driver).
  int64_t maxBlocks(size_t index) const;
  // The graph-level signature: tensor inputs then outputs, dims, scalars.
  const rt::KernelSignature& signature() const;
  // The build that a launch with these values of the dynamic dims (in
  // signature() order) runs: this one, or the variant configured for them
  // (a dynamic row length past the short-row range; see explain()), built
  // now if no launch has built it yet. Call it before capturing launches
  // into a CUDA graph, so that the capture compiles nothing.
  Kernel forDims(std::span<const int64_t> dims) const;
  // The same with the dims by name ({{"R", 12}, {"N", 300000}}): every
  // dynamic dim of the graph, none other (a kiln::Error names the one
  // missing or unknown).
  Kernel forDims(const std::map<std::string, int64_t>& dims) const;
  bool valid() const { return impl_ != nullptr; }

 private:
  std::shared_ptr<Impl> impl_;
};

Kernel compile(const Graph& graph, const CompileOptions& options = {});

}  // namespace kiln
