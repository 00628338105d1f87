// Ahead-of-time kernels: what `kiln aot` writes out for a graph (the cubins,
// entries, signatures and launch rules of its kernels, and its workspace, as
// data in a generated C++ file) and the launcher that runs it. An
// application that calls such a graph links kiln_runtime alone: no compiler
// and no LLVM in its process, only the CUDA driver at run time (loaded with
// dlopen, as everywhere in kiln).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "kiln/runtime/arg_packer.h"
#include "kiln/runtime/grid_rule.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/signature.h"
#include "kiln/runtime/tensor_map.h"
#include "kiln/runtime/tensor_view.h"
#include "kiln/runtime/workspace.h"

namespace kiln::rt {

// One compiled kernel of the graph, as `kiln aot` writes it out.
struct AotKernelSpec {
  std::string name;                      // the compiled kernel's name (messages)
  std::span<const unsigned char> cubin;  // the module image (static storage)
  // Entry points (empty: the kernel has none of that kind). The vectorized
  // entry takes tensors at their signature alignment and dims at the
  // grid's multiples; the scalar entry takes any; the one-step entry takes
  // the dims in the grid's one-step ranges.
  std::string vectorEntry, scalarEntry, oneStepEntry;
  KernelSignature signature;  // the kernel's tensors (with alignments), dims, scalars
  // Kernel tensor i is graph tensor tensors[i] (>= 0: the graph
  // signature's order) or workspace tensor -tensors[i] - 1; kernel dim i
  // is graph dim dims[i]; kernel scalar i is graph scalar scalars[i].
  std::vector<int> tensors, dims, scalars;
  GridRule grid;              // blocks from the dims (maxBlocks capped at load)
  int threadsPerBlock = 256;
  int sharedBytes = 0;        // dynamic shared memory per block
  int cluster = 1;            // blocks per cluster (sm_90)
  bool resident = false;      // loops over rows: no more blocks than fit at once
  std::vector<TensorMapRule> maps;  // TMA operands after the parameters (matmul)
};

// A graph compiled ahead of time: its kernels in launch order, and the
// workspace that carries intermediates between them.
struct AotGraphSpec {
  std::string name;                        // the function's name (messages)
  KernelSignature signature;               // the graph's: inputs, outputs, dims, scalars
  std::vector<WorkspaceTensor> workspace;  // dims as graph dim indices
  std::vector<AotKernelSpec> kernels;
  // The same graph compiled for other dim values (`kiln aot --variant`),
  // each with the same signature: a launch whose dims fall outside the
  // kernels' preferred ranges (GridRule::preferred) takes the first variant
  // whose ranges hold them, as kiln::compile builds a variant at run time.
  std::vector<AotGraphSpec> variants;
};

class AotGraph {
 public:
  // Checks the spec (a kiln::Error names what is wrong); loads nothing.
  explicit AotGraph(AotGraphSpec spec);
  ~AotGraph();
  AotGraph(const AotGraph&) = delete;
  AotGraph& operator=(const AotGraph&) = delete;

  const KernelSignature& signature() const { return spec_.signature; }
  const std::string& name() const { return spec_.name; }
  size_t numKernels() const { return spec_.kernels.size(); }

  // Checks the arguments against the graph's signature (dtype, shape,
  // contiguity, overlaps; a kiln::Error naming the argument) before any
  // driver call, loads the modules into the current context (or the
  // device's primary one) the first time, and launches the kernels in
  // order on `stream` (null: the legacy default stream). Tensors in
  // signature order (inputs, then outputs); dims empty to infer them all
  // from the tensors; one scalar per declared scalar. A graph with a
  // workspace allocates it at the first launch (and grows it when the dims
  // need more); launches of one AotGraph from several threads take turns
  // for it.
  void launch(std::span<const TensorView* const> tensors, std::span<const int64_t> dims = {},
              std::span<const ScalarArg> scalars = {}, void* stream = nullptr) const;
  void launch(std::span<const TensorView> tensors, std::span<const int64_t> dims = {},
              std::span<const ScalarArg> scalars = {}, void* stream = nullptr) const;

  // Loads the modules now (the first launch would); a kiln::Error without a
  // driver or GPU.
  void load() const;

  // The build a launch with these graph dim values (signature().dims order)
  // runs: this one when its kernels' configs were chosen for them (or when
  // no variant's were), else the first variant whose were.
  const AotGraph& buildFor(std::span<const int64_t> dims) const;
  size_t numVariants() const { return variants_.size(); }

 private:
  struct Loaded;
  void launchChecked(const ArgBlock& full, std::span<const TensorView* const> tensors,
                     std::span<const ScalarArg> scalars, void* stream) const;
  bool preferredFor(std::span<const int64_t> dims) const;

  AotGraphSpec spec_;
  ArgPacker packer_;
  std::vector<std::unique_ptr<ArgPacker>> packers_;  // per kernel
  bool identity_ = false;  // one kernel whose signature is the graph's
  std::unique_ptr<Workspace> workspace_;
  mutable std::once_flag loaded_;
  mutable std::unique_ptr<Loaded> loadedState_;
  std::vector<std::unique_ptr<AotGraph>> variants_;
};

}  // namespace kiln::rt
