// Ahead-of-time kernels: what `kiln aot` writes out for a graph (its cubin,
// entries, signature and launch rule, as data in a generated C++ file) and
// the launcher that runs it. An application that calls such kernels links
// kiln_runtime alone: no compiler and no LLVM in its process, only the CUDA
// driver at run time (loaded with dlopen, as everywhere in kiln).
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <string>

#include "kiln/runtime/arg_packer.h"
#include "kiln/runtime/grid_rule.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/signature.h"
#include "kiln/runtime/tensor_view.h"

namespace kiln::rt {

// One compiled kernel, as `kiln aot` writes it out.
struct AotKernelSpec {
  std::string name;                      // the compiled kernel's name (messages)
  std::span<const unsigned char> cubin;  // the module image (static storage)
  // Entry points (empty: the kernel has none of that kind). The vectorized
  // entry takes tensors at their signature alignment and dims at the
  // grid's multiples; the scalar entry takes any; the one-step entry takes
  // the dims in the grid's one-step ranges.
  std::string vectorEntry, scalarEntry, oneStepEntry;
  KernelSignature signature;  // tensors (with alignments), dims, scalars
  GridRule grid;              // blocks from the dims (maxBlocks capped at load)
  int threadsPerBlock = 256;
  int sharedBytes = 0;        // dynamic shared memory per block
  int cluster = 1;            // blocks per cluster (sm_90)
  bool resident = false;      // loops over rows: no more blocks than fit at once
};

class AotKernel {
 public:
  // Checks the spec (a kiln::Error names what is wrong); loads nothing.
  explicit AotKernel(AotKernelSpec spec);
  AotKernel(const AotKernel&) = delete;
  AotKernel& operator=(const AotKernel&) = delete;

  const KernelSignature& signature() const { return spec_.signature; }
  const std::string& name() const { return spec_.name; }

  // Checks the arguments against the signature (dtype, shape, contiguity,
  // overlaps; a kiln::Error naming the argument), loads the module into the
  // current context (or the device's primary one) the first time, and
  // launches on `stream` (null: the legacy default stream). Tensors in
  // signature order (inputs, then outputs); dims empty to infer them all
  // from the tensors; one scalar per declared scalar.
  void launch(std::span<const TensorView* const> tensors, std::span<const int64_t> dims = {},
              std::span<const ScalarArg> scalars = {}, void* stream = nullptr) const;
  void launch(std::span<const TensorView> tensors, std::span<const int64_t> dims = {},
              std::span<const ScalarArg> scalars = {}, void* stream = nullptr) const;

  // Loads the module now (the first launch would); a kiln::Error without a
  // driver or GPU.
  void load() const;

 private:
  void launchPacked(const ArgBlock& block, void* stream) const;

  AotKernelSpec spec_;
  ArgPacker packer_;
  mutable std::once_flag loaded_;
  mutable Module module_;
  mutable Function vectorized_, scalar_, oneStep_;
  mutable GridRule grid_;
};

}  // namespace kiln::rt
