#include "kiln/runtime/aot.h"

#include <utility>

#include "kiln/error.h"
#include "kiln/runtime/driver.h"
#include "kiln/runtime/launch.h"

namespace kiln::rt {

namespace {

AotKernelSpec checked(AotKernelSpec s) {
  auto bad = [&](const std::string& problem) {
    return Error("kiln: ahead-of-time kernel '" + s.name + "': " + problem + " (regenerate it with `kiln aot`)");
  };
  if (s.cubin.empty()) throw bad("no cubin");
  if (s.vectorEntry.empty() && s.scalarEntry.empty()) throw bad("no entry point");
  if (!s.oneStepEntry.empty() && s.vectorEntry.empty()) throw bad("a one-step entry without a vectorized one");
  if (s.threadsPerBlock < 1 || s.threadsPerBlock > 1024) throw bad("threads per block outside [1, 1024]");
  if (s.cluster < 1 || s.sharedBytes < 0 || s.grid.elementsPerBlock < 1 || s.grid.cluster != s.cluster)
    throw bad("a bad launch rule");
  const size_t numDims = s.signature.dims.size();
  auto dimIndex = [&](int d) {
    if (d < 0 || static_cast<size_t>(d) >= numDims) throw bad("its launch rule names dim " + std::to_string(d));
  };
  for (const auto& [d, t] : s.grid.dynamic) {
    dimIndex(d);
    if (t < 1) throw bad("a tile size below 1");
  }
  for (const GridRule::Bound& b : s.grid.bounds) dimIndex(b.index);
  for (const auto& [d, m] : s.grid.multiples) {
    dimIndex(d);
    if (m < 1) throw bad("a vector multiple below 1");
  }
  for (const GridRule::Range& r : s.grid.oneStep) dimIndex(r.index);
  return s;
}

}  // namespace

AotKernel::AotKernel(AotKernelSpec spec) : spec_(checked(std::move(spec))), packer_(spec_.signature) {
  grid_ = spec_.grid;
}

void AotKernel::load() const {
  std::call_once(loaded_, [&] {
    driver();  // "kiln: no CUDA driver found ..." without one
    Module m = Module::load(spec_.cubin, spec_.name);
    auto fn = [&](const std::string& entry) {
      if (entry.empty()) return Function();
      Function f = m.function(entry);
      if (spec_.sharedBytes > 0) f.setMaxDynamicSharedBytes(spec_.sharedBytes);
      if (spec_.cluster > 8) f.allowNonPortableClusters();
      return f;
    };
    Function v = fn(spec_.vectorEntry), s = fn(spec_.scalarEntry), o = fn(spec_.oneStepEntry);
    GridRule g = spec_.grid;
    const Function& widest = v ? v : s;
    if (spec_.resident) {
      const int64_t cap = residentBlocks(widest, spec_.threadsPerBlock, spec_.sharedBytes, spec_.cluster);
      if (cap > 0 && (g.maxBlocks <= 0 || cap < g.maxBlocks)) g.maxBlocks = cap;
    }
    // Published only when everything loaded: a failed load (no GPU) throws
    // out of call_once, which lets a later launch try again.
    module_ = std::move(m);
    vectorized_ = v;
    scalar_ = s;
    oneStep_ = o;
    grid_ = std::move(g);
  });
}

void AotKernel::launch(std::span<const TensorView* const> tensors, std::span<const int64_t> dims,
                       std::span<const ScalarArg> scalars, void* stream) const {
  ArgBlock block;
  packer_.pack(block, tensors, dims, scalars);
  launchPacked(block, stream);
}

void AotKernel::launch(std::span<const TensorView> tensors, std::span<const int64_t> dims,
                       std::span<const ScalarArg> scalars, void* stream) const {
  ArgBlock block;
  packer_.pack(block, tensors, dims, scalars);
  launchPacked(block, stream);
}

void AotKernel::launchPacked(const ArgBlock& block, void* stream) const {
  const auto dimValue = [&](size_t d) { return block.dimValue(d); };
  spec_.grid.check(dimValue, spec_.name);
  load();
  const int64_t blocks = grid_.blocks(dimValue);
  if (blocks == 0) return;
  LaunchConfig cfg;
  cfg.grid.x = static_cast<unsigned>(blocks);
  cfg.block.x = static_cast<unsigned>(spec_.threadsPerBlock);
  cfg.sharedBytes = static_cast<unsigned>(spec_.sharedBytes);
  cfg.stream = stream;
  if (spec_.cluster > 1) cfg.cluster.x = static_cast<unsigned>(spec_.cluster);
  if (vectorized_ && block.vectorizable() && grid_.vectorFits(dimValue)) [[likely]] {
    rt::launch(oneStep_ && grid_.inOneStep(dimValue) ? oneStep_ : vectorized_, cfg, block);
    return;
  }
  if (!scalar_) {
    std::string why = block.vectorizable() ? "the dims are not multiples of its vector width" : "";
    for (size_t t = 0; t < spec_.signature.tensors.size() && t < 64; ++t)
      if (block.misalignedMask() & (uint64_t(1) << t))
        why = "tensor '" + spec_.signature.tensors[t].name + "' is not " +
              std::to_string(spec_.signature.tensors[t].alignment) + "-byte aligned";
    throw Error("kiln: launch of ahead-of-time kernel '" + spec_.name + "': " + why +
                ", and it has no scalar entry for such arguments");
  }
  rt::launch(scalar_, cfg, block);
}

}  // namespace kiln::rt
