#include "kiln/runtime/aot.h"

#include <array>
#include <optional>
#include <utility>

#include "kiln/error.h"
#include "kiln/runtime/driver.h"
#include "kiln/runtime/launch.h"

namespace kiln::rt {

struct AotGraph::Loaded {
  struct Kernel {
    Module module;
    Function vectorized, scalar, oneStep;
    GridRule grid;  // the spec's, maxBlocks capped to what fits at once
  };
  std::vector<Kernel> kernels;
};

namespace {

AotGraphSpec checked(AotGraphSpec g) {
  auto bad = [&](const std::string& what, const std::string& problem) {
    return Error("kiln: ahead-of-time graph '" + g.name + "'" + what + ": " + problem +
                 " (regenerate it with `kiln aot`)");
  };
  if (g.kernels.empty()) throw bad("", "no kernels");
  const int numTensors = static_cast<int>(g.signature.tensors.size());
  const int numWorkspace = static_cast<int>(g.workspace.size());
  for (const WorkspaceTensor& w : g.workspace)
    for (const WorkspaceAxis& a : w.shape)
      if (a.dim >= static_cast<int>(g.signature.dims.size())) throw bad("", "workspace tensor '" + w.name + "' names a dim it lacks");
  for (const AotKernelSpec& s : g.kernels) {
    const std::string where = ", kernel '" + s.name + "'";
    if (s.cubin.empty()) throw bad(where, "no cubin");
    if (s.vectorEntry.empty() && s.scalarEntry.empty()) throw bad(where, "no entry point");
    if (!s.oneStepEntry.empty() && s.vectorEntry.empty()) throw bad(where, "a one-step entry without a vectorized one");
    if (!s.maps.empty() && s.vectorEntry.empty()) throw bad(where, "tensor maps without a vectorized entry");
    if (s.threadsPerBlock < 1 || s.threadsPerBlock > 1024) throw bad(where, "threads per block outside [1, 1024]");
    if (s.cluster < 1 || s.sharedBytes < 0 || s.grid.elementsPerBlock < 1 || s.grid.cluster != s.cluster)
      throw bad(where, "a bad launch rule");
    if (s.tensors.size() != s.signature.tensors.size() || s.dims.size() != s.signature.dims.size() ||
        s.scalars.size() != s.signature.scalars.size())
      throw bad(where, "its argument mapping does not match its signature");
    for (int t : s.tensors)
      if (t >= numTensors || -t - 1 >= numWorkspace) throw bad(where, "it maps a tensor the graph lacks");
    for (int d : s.dims)
      if (d < 0 || d >= static_cast<int>(g.signature.dims.size())) throw bad(where, "it maps a dim the graph lacks");
    for (int c : s.scalars)
      if (c < 0 || c >= static_cast<int>(g.signature.scalars.size())) throw bad(where, "it maps a scalar the graph lacks");
    const size_t numDims = s.signature.dims.size();
    auto dimIndex = [&](int d) {
      if (d < 0 || static_cast<size_t>(d) >= numDims) throw bad(where, "its launch rule names dim " + std::to_string(d));
    };
    for (const auto& [d, t] : s.grid.dynamic) {
      dimIndex(d);
      if (t < 1) throw bad(where, "a tile size below 1");
    }
    for (const GridRule::Bound& b : s.grid.bounds) dimIndex(b.index);
    for (const auto& [d, m] : s.grid.multiples) {
      dimIndex(d);
      if (m < 1) throw bad(where, "a vector multiple below 1");
    }
    for (const GridRule::Range& r : s.grid.oneStep) dimIndex(r.index);
    for (const GridRule::Range& r : s.grid.preferred) dimIndex(r.index);
    for (const TensorMapRule& m : s.maps) {
      if (m.tensor >= s.signature.tensors.size() || m.axes.size() < 2) throw bad(where, "a bad tensor map");
      for (int64_t a : m.axes)
        if (a < 0) dimIndex(static_cast<int>(-a - 1));
    }
  }
  return g;
}

}  // namespace

// The signatures are validated by their ArgPackers.
AotGraph::AotGraph(AotGraphSpec spec) : spec_(checked(std::move(spec))), packer_(spec_.signature) {
  for (AotGraphSpec& v : spec_.variants) {
    const std::string where = "ahead-of-time graph '" + spec_.name + "', a variant";
    if (!v.variants.empty()) throw Error("kiln: " + where + " has variants of its own");
    KernelSignature a = v.signature, b = spec_.signature;
    a.kernel = b.kernel;
    if (!(a == b)) throw Error("kiln: " + where + " has another signature: " + v.signature.toString());
    v.name = spec_.name;
    variants_.push_back(std::make_unique<AotGraph>(std::move(v)));
  }
  spec_.variants.clear();
  for (const AotKernelSpec& k : spec_.kernels) packers_.push_back(std::make_unique<ArgPacker>(k.signature));
  if (!spec_.workspace.empty())
    workspace_ = std::make_unique<Workspace>(spec_.workspace, "ahead-of-time function '" + spec_.name + "'");
  const AotKernelSpec& k0 = spec_.kernels[0];
  identity_ = spec_.kernels.size() == 1 && spec_.workspace.empty() &&
              k0.tensors.size() == spec_.signature.tensors.size() && k0.dims.size() == spec_.signature.dims.size() &&
              k0.scalars.size() == spec_.signature.scalars.size();
  for (size_t i = 0; identity_ && i < k0.tensors.size(); ++i) identity_ = k0.tensors[i] == static_cast<int>(i);
  for (size_t i = 0; identity_ && i < k0.dims.size(); ++i) identity_ = k0.dims[i] == static_cast<int>(i);
  for (size_t i = 0; identity_ && i < k0.scalars.size(); ++i) identity_ = k0.scalars[i] == static_cast<int>(i);
  if (identity_) {
    // Its argument errors then name the function the caller called.
    KernelSignature named = k0.signature;
    named.kernel = spec_.name;
    packers_[0] = std::make_unique<ArgPacker>(std::move(named));
  }
}

AotGraph::~AotGraph() = default;

void AotGraph::load() const {
  std::call_once(loaded_, [&] {
    driver();  // "kiln: no CUDA driver found ..." without one
    auto state = std::make_unique<Loaded>();
    for (const AotKernelSpec& s : spec_.kernels) {
      Loaded::Kernel k;
      k.module = Module::load(s.cubin, s.name);
      auto fn = [&](const std::string& entry) {
        if (entry.empty()) return Function();
        Function f = k.module.function(entry);
        if (s.sharedBytes > 0) f.setMaxDynamicSharedBytes(s.sharedBytes);
        if (s.cluster > 8) f.allowNonPortableClusters();
        return f;
      };
      k.vectorized = fn(s.vectorEntry);
      k.scalar = fn(s.scalarEntry);
      k.oneStep = fn(s.oneStepEntry);
      k.grid = s.grid;
      if (s.resident) {
        const int64_t cap = residentBlocks(k.vectorized ? k.vectorized : k.scalar, s.threadsPerBlock, s.sharedBytes,
                                           s.cluster);
        if (cap > 0 && (k.grid.maxBlocks <= 0 || cap < k.grid.maxBlocks)) k.grid.maxBlocks = cap;
      }
      state->kernels.push_back(std::move(k));
    }
    // Published only when everything loaded: a failed load (no GPU) throws
    // out of call_once, which lets a later launch try again.
    loadedState_ = std::move(state);
  });
}

namespace {

void launchKernel(const AotKernelSpec& s, const GridRule& grid, const Function& vectorized, const Function& scalar,
                  const Function& oneStep, const ArgBlock& block, void* stream) {
  const auto dimValue = [&](size_t d) { return block.dimValue(d); };
  const int64_t blocks = grid.blocks(dimValue);
  if (blocks == 0) return;
  LaunchConfig cfg;
  cfg.grid.x = static_cast<unsigned>(blocks);
  cfg.block.x = static_cast<unsigned>(s.threadsPerBlock);
  cfg.sharedBytes = static_cast<unsigned>(s.sharedBytes);
  cfg.stream = stream;
  if (s.cluster > 1) cfg.cluster.x = static_cast<unsigned>(s.cluster);
  if (!s.maps.empty()) {
    launchWithTensorMaps(vectorized, cfg, block, s.maps, s.signature);
    return;
  }
  if (vectorized && block.vectorizable() && grid.vectorFits(dimValue)) [[likely]] {
    launch(oneStep && grid.inOneStep(dimValue) ? oneStep : vectorized, cfg, block);
    return;
  }
  if (!scalar) {
    std::string why = "the dims are not multiples of its vector width";
    for (size_t t = 0; t < s.signature.tensors.size() && t < 64; ++t)
      if (block.misalignedMask() & (uint64_t(1) << t))
        why = "tensor '" + s.signature.tensors[t].name + "' is not " + std::to_string(s.signature.tensors[t].alignment) +
              "-byte aligned";
    throw Error("kiln: launch of ahead-of-time kernel '" + s.name + "': " + why +
                ", and it has no scalar entry for such arguments");
  }
  launch(scalar, cfg, block);
}

}  // namespace

bool AotGraph::preferredFor(std::span<const int64_t> dims) const {
  for (const AotKernelSpec& s : spec_.kernels)
    if (!s.grid.inPreferred([&](size_t d) { return dims[static_cast<size_t>(s.dims[d])]; })) return false;
  return true;
}

const AotGraph& AotGraph::buildFor(std::span<const int64_t> dims) const {
  if (dims.size() != spec_.signature.dims.size())
    throw Error("kiln: ahead-of-time function '" + spec_.name + "': " + std::to_string(dims.size()) +
                " dim values given, but it has " + std::to_string(spec_.signature.dims.size()) + " dynamic dims");
  if (variants_.empty() || preferredFor(dims)) return *this;
  for (const std::unique_ptr<AotGraph>& v : variants_)
    if (v->preferredFor(dims)) return *v;
  return *this;
}

void AotGraph::launch(std::span<const TensorView* const> tensors, std::span<const int64_t> dims,
                      std::span<const ScalarArg> scalars, void* stream) const {
  if (identity_) {
    // One kernel whose signature is the graph's: one pack, one launch.
    ArgBlock block;
    packers_[0]->pack(block, tensors, dims, scalars);
    const AotKernelSpec& s = spec_.kernels[0];
    if (!variants_.empty() && !s.grid.inPreferred([&](size_t d) { return block.dimValue(d); })) [[unlikely]] {
      std::array<int64_t, ArgBlock::kMaxParams> graphDims;
      for (size_t d = 0; d < s.dims.size(); ++d) graphDims[d] = block.dimValue(d);
      const AotGraph& v = buildFor(std::span<const int64_t>(graphDims.data(), s.dims.size()));
      if (&v != this) {
        v.launch(tensors, dims, scalars, stream);
        return;
      }
    }
    s.grid.check([&](size_t d) { return block.dimValue(d); }, s.name);
    load();
    const Loaded::Kernel& k = loadedState_->kernels[0];
    launchKernel(s, k.grid, k.vectorized, k.scalar, k.oneStep, block, stream);
    return;
  }
  ArgBlock full;
  packer_.pack(full, tensors, dims, scalars);
  launchChecked(full, tensors, scalars, stream);
}

void AotGraph::launch(std::span<const TensorView> tensors, std::span<const int64_t> dims,
                      std::span<const ScalarArg> scalars, void* stream) const {
  std::array<const TensorView*, 64> ptrs;
  if (tensors.size() > ptrs.size()) {
    ArgBlock block;  // the packer's own error for too many tensors
    packer_.pack(block, tensors, dims, scalars);
  }
  for (size_t i = 0; i < tensors.size(); ++i) ptrs[i] = &tensors[i];
  launch(std::span<const TensorView* const>(ptrs.data(), tensors.size()), dims, scalars, stream);
}

void AotGraph::launchChecked(const ArgBlock& full, std::span<const TensorView* const> tensors,
                             std::span<const ScalarArg> scalars, void* stream) const {
  std::array<int64_t, ArgBlock::kMaxParams> graphDims;
  const size_t numDims = spec_.signature.dims.size();
  for (size_t d = 0; d < numDims; ++d) graphDims[d] = full.dimValue(d);
  if (!variants_.empty()) [[unlikely]] {
    const AotGraph& v = buildFor(std::span<const int64_t>(graphDims.data(), numDims));
    if (&v != this) {
      v.launchChecked(full, tensors, scalars, stream);  // the same signature: `full` is its packing too
      return;
    }
  }
  // Every kernel's dim bounds before anything is enqueued.
  for (const AotKernelSpec& s : spec_.kernels)
    s.grid.check([&](size_t d) { return graphDims[static_cast<size_t>(s.dims[d])]; }, s.name);
  load();
  // The workspace stays leased until the last kernel is enqueued.
  std::optional<Workspace::Lease> lease;
  if (workspace_) lease.emplace(workspace_->acquire(std::span<const int64_t>(graphDims.data(), numDims), stream));
  std::array<const TensorView*, 64> views;
  std::array<int64_t, ArgBlock::kMaxParams> kdims;
  std::array<ScalarArg, ArgBlock::kMaxParams> kscalars;
  for (size_t k = 0; k < spec_.kernels.size(); ++k) {
    const AotKernelSpec& s = spec_.kernels[k];
    for (size_t i = 0; i < s.tensors.size(); ++i)
      views[i] = s.tensors[i] >= 0 ? tensors[static_cast<size_t>(s.tensors[i])]
                                   : &lease->view(static_cast<size_t>(-s.tensors[i] - 1));
    for (size_t i = 0; i < s.dims.size(); ++i) kdims[i] = graphDims[static_cast<size_t>(s.dims[i])];
    for (size_t i = 0; i < s.scalars.size(); ++i) kscalars[i] = scalars[static_cast<size_t>(s.scalars[i])];
    ArgBlock block;
    packers_[k]->pack(block, std::span<const TensorView* const>(views.data(), s.tensors.size()),
                      std::span<const int64_t>(kdims.data(), s.dims.size()),
                      std::span<const ScalarArg>(kscalars.data(), s.scalars.size()));
    const Loaded::Kernel& l = loadedState_->kernels[k];
    launchKernel(s, l.grid, l.vectorized, l.scalar, l.oneStep, block, stream);
  }
}

}  // namespace kiln::rt
