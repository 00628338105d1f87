#include "kiln/kernel.h"

#include <array>
#include <atomic>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include "kernel_internal.h"
#include "tuning.h"
#include "kiln/runtime/device.h"
#include "kiln/runtime/driver.h"
#include "kiln/runtime/launch.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/tensor_map.h"
#include "kiln/runtime/workspace.h"

namespace kiln {

namespace {

std::vector<rt::Dim> toRtShape(const Shape& s) {
  std::vector<rt::Dim> out;
  for (const Dim& d : s) out.push_back(d.isStatic() ? rt::Dim(d.size) : rt::Dim(d.name));
  return out;
}

template <typename T>
int indexOf(const std::vector<T>& v, const T& x) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] == x) return static_cast<int>(i);
  return -1;
}

}  // namespace

// One compiled kernel of the graph, ready to launch.
struct PreparedKernel {
  const compiler::CompiledKernel* ck = nullptr;
  std::unique_ptr<rt::ArgPacker> packer;
  // Kernel tensor i is graph tensor tensorMap[i] (a parameter or an output
  // of the graph) or, where that is -1, workspace tensor workspaceMap[i].
  std::vector<int> tensorMap;
  std::vector<int> workspaceMap;
  std::vector<int> dimMap;     // kernel dim -> graph dim
  std::vector<int> scalarMap;  // kernel scalar -> graph scalar
  bool identity = false;       // the kernel's signature is the graph's
  detail::GridRule grid;
  rt::Module module;
  rt::Function vectorized, scalar;
  // The vectorized entry for the rows of LaunchGeometry::oneStepRange
  // (compiler::KernelEntry::oneStep), where the kernel has one.
  rt::Function oneStep;
  // The first compile built this kernel's scalar entry too (a kernel may
  // have no vectorized entry at all). Set before the modules count as
  // loaded and never changed after, so launches read it without a lock;
  // otherwise `scalar` is filled in by loadScalarEntries.
  bool ownScalar = false;
  // The TMA tensor maps the kernel takes after its other parameters
  // (CompiledKernel::tensorMaps).
  std::vector<rt::TensorMapRule> maps;
};

struct Kernel::Impl {
  Graph graph;  // kept to build the scalar entries on demand
  compiler::CompileOptions options;
  compiler::CompiledGraph compiled;
  // The scalar (any-alignment) entries, compiled and loaded the first time
  // a launch gets a pointer the vectorized entries cannot take.
  std::once_flag scalarOnce;
  compiler::CompiledGraph scalarCompiled;
  std::vector<rt::Module> scalarModules;
  rt::KernelSignature sig;
  std::unique_ptr<rt::ArgPacker> packer;
  std::vector<PreparedKernel> kernels;
  // The intermediates between kernels (CompiledGraph::workspace); null when
  // there are none, as for every single-kernel graph.
  std::unique_ptr<rt::Workspace> workspace;
  std::atomic<bool> loaded{false};
  std::mutex loadMutex;
  std::string chip;
  bool diskCache = true;
  std::vector<std::string> tuningNotes;  // per kernel: where its config came from
  // Builds of the graph for dim values outside the ranges its kernels'
  // configs were chosen for (LaunchGeometry::preferred), each compiled
  // with the first such launch's values as hints (CompileOptions::
  // dimHints); a launch takes the first whose ranges hold its values.
  std::mutex variantsMutex;
  std::vector<std::shared_ptr<Impl>> variants;
  bool isVariant = false;  // a variant launches itself whatever the values
};

namespace {

// Lets the function take the kernel's dynamic shared memory and cluster
// size. Above 48 KiB a kernel must opt in; doing it for any amount is
// harmless, and a request beyond what the device allows then fails here, at
// load, naming the kernel, rather than as an opaque launch failure. Clusters
// of more than 8 blocks (16: a row split 16 ways) opt in the same way.
void allowLaunchGeometry(const rt::Function& f, const compiler::LaunchGeometry& lg) {
  if (f && lg.sharedBytes > 0) f.setMaxDynamicSharedBytes(lg.sharedBytes);
  if (f && lg.cluster > 8) f.allowNonPortableClusters();
}

// A kernel that loops over its rows (LaunchGeometry::resident) gets no more
// blocks, or clusters, than fit on the GPU at once: a block or cluster that
// waited for a second wave would double the kernel's time (and for
// clusters, a GPC with an odd number of free SMs leaves one idle).
void capResident(PreparedKernel& pk) {
  const compiler::LaunchGeometry& lg = pk.ck->launch;
  if (!lg.resident || !pk.vectorized) return;
  const int64_t cap = rt::residentBlocks(pk.vectorized, lg.threadsPerBlock, lg.sharedBytes, lg.cluster);
  if (cap > 0 && (pk.grid.maxBlocks <= 0 || cap < pk.grid.maxBlocks)) pk.grid.maxBlocks = cap;
}

void loadModules(Kernel::Impl& impl) {
  for (PreparedKernel& pk : impl.kernels) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(pk.ck->cubin.data());
    pk.module = rt::Module::load(std::span<const uint8_t>(bytes, pk.ck->cubin.size()), pk.ck->name);
    for (const compiler::KernelEntry& e : pk.ck->entries) {
      rt::Function f = pk.module.function(e.name);
      allowLaunchGeometry(f, pk.ck->launch);
      if (e.oneStep) pk.oneStep = f;
      else if (e.vectorized) pk.vectorized = f;
      else pk.scalar = f;
    }
    pk.ownScalar = static_cast<bool>(pk.scalar);
    if (!pk.vectorized) pk.vectorized = pk.scalar;
    capResident(pk);
  }
  impl.loaded = true;
}

[[noreturn]] void planMismatch(size_t k, const compiler::CompiledKernel& a, const compiler::CompiledKernel& b,
                               const std::string& what) {
  throw Error("kiln: internal error: the scalar-entry compile planned kernel " + std::to_string(k) + " ('" +
              a.name + "') differently from the first compile ('" + b.name + "'): " + what +
              "; the scalar entry cannot stand in for the vectorized one");
}

// The scalar entries of the kernels that lack one, built and loaded once,
// on demand. The graph is compiled again with only scalar entries; the plan
// is deterministic, so its kernels match the first compile's position by
// position, which is checked (names, tensors, launch geometry) because the
// launch uses the first compile's geometry and tensor mapping.
void loadScalarEntries(Kernel::Impl& impl) {
  std::call_once(impl.scalarOnce, [&] {
    // Kernels that load through TMA (the Hopper matmul) have one entry, for
    // every launch (launchWithTensorMaps): nothing to build for them.
    auto wants = [](const PreparedKernel& pk) { return !pk.ownScalar && pk.ck->tensorMaps.empty(); };
    bool needed = false;
    for (const PreparedKernel& pk : impl.kernels) needed = needed || wants(pk);
    if (!needed) return;
    compiler::CompileOptions co = impl.options;
    co.variants = compiler::EntryVariants::ScalarOnly;
    // Each row kernel exactly as the first compile built it: the heuristic
    // rebuilds a kernel whose vectorized entry spills in another form,
    // which a build of the scalar entry alone cannot see. (A config that
    // names every core key replaces the heuristic's whole config.)
    for (size_t i = 0; i < impl.kernels.size(); ++i)
      if (impl.kernels[i].ck->schedule == "row_reduction")
        co.kernelConfigs[static_cast<int>(i)] = impl.kernels[i].ck->config;
    impl.scalarCompiled = compileGraphCached(impl.graph, co, impl.diskCache);
    if (impl.scalarCompiled.kernels.size() != impl.kernels.size())
      throw Error("kiln: internal error: the scalar-entry compile made " +
                  std::to_string(impl.scalarCompiled.kernels.size()) + " kernels, the first compile " +
                  std::to_string(impl.kernels.size()));
    for (size_t i = 0; i < impl.kernels.size(); ++i) {
      PreparedKernel& pk = impl.kernels[i];
      if (!wants(pk)) continue;
      const compiler::CompiledKernel& ck = impl.scalarCompiled.kernels[i];
      const compiler::LaunchGeometry &a = ck.launch, &b = pk.ck->launch;
      if (ck.name != pk.ck->name) planMismatch(i, ck, *pk.ck, "another name");
      if (ck.tensors.size() != pk.ck->tensors.size()) planMismatch(i, ck, *pk.ck, "other tensors");
      for (size_t t = 0; t < ck.tensors.size(); ++t)
        if (ck.tensors[t].name != pk.ck->tensors[t].name) planMismatch(i, ck, *pk.ck, "other tensors");
      if (a.threadsPerBlock != b.threadsPerBlock || a.elementsPerBlock != b.elementsPerBlock ||
          a.maxBlocks != b.maxBlocks || a.minBlocks != b.minBlocks || a.resident != b.resident ||
          a.sharedBytes != b.sharedBytes || a.iterShape != b.iterShape || a.tile != b.tile || a.cluster != b.cluster ||
          a.dimBounds != b.dimBounds || a.vectorMultiples != b.vectorMultiples || a.oneStepRange != b.oneStepRange)
        planMismatch(i, ck, *pk.ck, "another launch geometry");
      const compiler::KernelEntry* entry = nullptr;
      for (const compiler::KernelEntry& e : ck.entries)
        if (!e.vectorized) entry = &e;
      if (!entry) planMismatch(i, ck, *pk.ck, "no scalar entry");
      const auto* bytes = reinterpret_cast<const uint8_t*>(ck.cubin.data());
      impl.scalarModules.push_back(rt::Module::load(std::span<const uint8_t>(bytes, ck.cubin.size()), ck.name));
      pk.scalar = impl.scalarModules.back().function(entry->name);
      allowLaunchGeometry(pk.scalar, ck.launch);
    }
  });
}

// Modules load at compile time when a driver is present; otherwise on the
// first launch, which reports a missing driver clearly.
void ensureLoaded(Kernel::Impl& impl) {
  if (impl.loaded.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(impl.loadMutex);
  if (impl.loaded) return;
  rt::driver();  // throws "kiln: no CUDA driver found ..." without one
  loadModules(impl);
}

// A compiled kernel that does not fit the graph it was compiled from: a bug
// in the planner (or in a hand-written plan), reported before any launch.
[[noreturn]] void misfit(const compiler::CompiledKernel& ck, const std::string& problem) {
  throw Error("kiln: internal error: compiled kernel '" + ck.name + "' does not fit its graph: " + problem);
}

// The graph tensor a kernel tensor stands for: the parameter or output of
// that name and direction, or, for a kernel input, a graph output that an
// earlier kernel wrote (names are unique among a graph's parameters and
// outputs). -1 when there is none.
int graphTensorOf(const rt::KernelSignature& sig, const compiler::KernelTensor& t) {
  for (size_t i = 0; i < sig.tensors.size(); ++i)
    if (sig.tensors[i].name == t.name && sig.tensors[i].isOutput == t.output) return static_cast<int>(i);
  if (!t.output)
    for (size_t i = 0; i < sig.tensors.size(); ++i)
      if (sig.tensors[i].name == t.name) return static_cast<int>(i);
  return -1;
}

}  // namespace

namespace detail {

LaunchPlan planLaunches(const Graph& graph, const compiler::CompiledGraph& cg) {
  LaunchPlan plan;
  rt::KernelSignature& sig = plan.signature;
  sig.kernel = "graph";
  for (int id : graph.params()) {
    const Node& n = graph.node(id);
    if (n.op == Op::Input) sig.tensors.push_back({n.name, n.dtype, toRtShape(n.shape), false, 1, true, false});
    else sig.scalars.push_back({n.name, n.dtype});
  }
  for (const GraphOutput& o : graph.outputs()) {
    const Node& n = graph.node(o.node);
    sig.tensors.push_back({o.name, n.dtype, toRtShape(n.shape), true, 1, true, false});
  }
  for (const std::string& d : graph.dynamicDims()) sig.dims.push_back({d});

  // The workspace tensors with their dims as graph dim indices.
  const std::vector<compiler::KernelTensor>& ws = cg.workspace;
  for (const compiler::KernelTensor& t : ws) {
    rt::WorkspaceTensor w{t.name, t.dtype, {}};
    for (const Dim& d : t.shape) {
      const int gi = d.isStatic() ? -1 : sig.findDim(d.name);
      if (d.isDynamic() && gi < 0)
        throw Error("kiln: internal error: workspace tensor '" + t.name + "' has the dim " + d.name +
                    ", which is not a dynamic dim of the graph");
      w.shape.push_back({d.isStatic() ? d.size : 0, gi});
    }
    plan.workspace.push_back(std::move(w));
  }
  std::vector<bool> written(ws.size(), false);

  for (const compiler::CompiledKernel& ck : cg.kernels) {
    KernelPlan kp;
    rt::KernelSignature& ks = kp.signature;
    ks.kernel = ck.name;
    for (const compiler::KernelTensor& t : ck.tensors) {
      ks.tensors.push_back({t.name, t.dtype, toRtShape(t.shape), t.output,
                            static_cast<unsigned>(t.alignment > 1 ? t.alignment : 1), true, false});
      if (t.workspace) {
        int wi = -1;
        for (size_t i = 0; i < ws.size(); ++i)
          if (ws[i].name == t.name) wi = static_cast<int>(i);
        if (wi < 0) misfit(ck, "tensor '" + t.name + "' is a workspace tensor the graph's workspace list lacks");
        const compiler::KernelTensor& w = ws[static_cast<size_t>(wi)];
        if (w.dtype != t.dtype || w.shape != t.shape)
          misfit(ck, "workspace tensor '" + t.name + "' is " + typeToString(t.dtype, t.shape) + " here but " +
                         typeToString(w.dtype, w.shape) + " in the workspace list");
        if (t.output) written[static_cast<size_t>(wi)] = true;
        else if (!written[static_cast<size_t>(wi)])
          misfit(ck, "it reads workspace tensor '" + t.name + "' before any kernel writes it");
        kp.tensors.push_back(-wi - 1);
      } else {
        const int gi = graphTensorOf(sig, t);
        if (gi < 0)
          misfit(ck, std::string(t.output ? "output" : "input") + " tensor '" + t.name +
                         "' is neither a parameter nor an output of the graph, and not a workspace tensor");
        kp.tensors.push_back(gi);
      }
    }
    for (const std::string& d : ck.dims) {
      ks.dims.push_back({d});
      kp.dims.push_back(sig.findDim(d));
      if (kp.dims.back() < 0) misfit(ck, "dim " + d + " is not a dynamic dim of the graph");
    }
    for (const compiler::KernelScalar& sc : ck.scalars) {
      ks.scalars.push_back({sc.name, sc.dtype});
      kp.scalars.push_back(sig.findScalar(sc.name));
      if (kp.scalars.back() < 0) misfit(ck, "scalar '" + sc.name + "' is not a scalar of the graph");
    }
    kp.identity = cg.kernels.size() == 1 && ks.tensors.size() == sig.tensors.size() &&
                  ks.dims.size() == sig.dims.size() && ks.scalars.size() == sig.scalars.size();
    for (size_t i = 0; kp.identity && i < kp.tensors.size(); ++i) kp.identity = kp.tensors[i] == static_cast<int>(i);
    for (size_t i = 0; kp.identity && i < kp.dims.size(); ++i) kp.identity = kp.dims[i] == static_cast<int>(i);
    for (size_t i = 0; kp.identity && i < kp.scalars.size(); ++i) kp.identity = kp.scalars[i] == static_cast<int>(i);
    kp.grid = gridRuleFrom(ck.launch, ck.dims, ck.name);
    for (const compiler::TensorMapParam& m : ck.tensorMaps) {
      if (m.tensor < 0 || static_cast<size_t>(m.tensor) >= ck.tensors.size() || ck.tensors[m.tensor].shape.size() < 2)
        misfit(ck, "a tensor map names tensor " + std::to_string(m.tensor) + ", which is not a tensor of rank >= 2");
      const compiler::KernelTensor& t = ck.tensors[static_cast<size_t>(m.tensor)];
      rt::TensorMapRule rule;
      rule.tensor = static_cast<size_t>(m.tensor);
      rule.dtype = t.dtype;
      rule.boxInner = static_cast<uint32_t>(m.boxInner);
      rule.boxRows = static_cast<uint32_t>(m.boxRows);
      rule.clampRows = m.clampRows;
      rule.whenRowsAligned = m.whenRowsAligned;
      rule.what = ck.schedule + (t.output ? " output '" : " operand '") + t.name + "' of kernel '" + ck.name + "'";
      for (const Dim& d : t.shape) {
        if (d.isStatic()) rule.axes.push_back(d.size);
        else {
          int di = indexOf(ck.dims, d.name);
          if (di < 0) misfit(ck, "tensor '" + t.name + "' has dim " + d.name + ", which the kernel does not take");
          rule.axes.push_back(-static_cast<int64_t>(di) - 1);
        }
      }
      kp.maps.push_back(std::move(rule));
    }
    plan.kernels.push_back(std::move(kp));
  }
  return plan;
}

}  // namespace detail

namespace {

// Everything after compiling: the graph-level signature and packer, one
// PreparedKernel per kernel with its mapping onto the graph's arguments and
// the workspace (detail::planLaunches), and the modules when a driver is
// present.
void prepare(Kernel::Impl& impl) {
  detail::LaunchPlan plan = detail::planLaunches(impl.graph, impl.compiled);
  impl.sig = std::move(plan.signature);
  impl.packer = std::make_unique<rt::ArgPacker>(impl.sig);
  if (!plan.workspace.empty()) {
    std::string owner = impl.compiled.kernels.size() == 1 ? "kernel " : "kernels ";
    for (size_t k = 0; k < impl.compiled.kernels.size(); ++k)
      owner += (k ? ", '" : "'") + impl.compiled.kernels[k].name + "'";
    impl.workspace = std::make_unique<rt::Workspace>(std::move(plan.workspace), std::move(owner));
  }
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    detail::KernelPlan& kp = plan.kernels[k];
    PreparedKernel pk;
    pk.ck = &impl.compiled.kernels[k];
    for (int t : kp.tensors) {
      pk.tensorMap.push_back(t >= 0 ? t : -1);
      pk.workspaceMap.push_back(t >= 0 ? -1 : -t - 1);
    }
    pk.dimMap = std::move(kp.dims);
    pk.scalarMap = std::move(kp.scalars);
    pk.identity = kp.identity;
    pk.grid = std::move(kp.grid);
    pk.maps = std::move(kp.maps);
    pk.packer = std::make_unique<rt::ArgPacker>(std::move(kp.signature));
    impl.kernels.push_back(std::move(pk));
  }
  if (rt::driverAvailable()) loadModules(impl);
}

std::shared_ptr<Kernel::Impl> newImpl(const Graph& graph, const compiler::CompileOptions& co, const std::string& chip) {
  auto impl = std::make_shared<Kernel::Impl>();
  impl->chip = chip;
  impl->graph = bindDims(graph, {});  // a private copy: the caller may keep adding nodes
  impl->options = co;
  return impl;
}

std::shared_ptr<Kernel::Impl> build(const Graph& graph, const compiler::CompileOptions& co, const std::string& chip,
                                    bool diskCache) {
  auto impl = newImpl(graph, co, chip);
  impl->diskCache = diskCache;
  impl->compiled = compileGraphCached(graph, impl->options, diskCache);
  prepare(*impl);
  return impl;
}

// The process-wide registry of compiled graphs (equal graph, equal options:
// the same kernel). One compile per key runs at a time; compiles of
// different keys run in parallel (the registry's lock is held only to find
// the key's slot).
struct KernelRegistry {
  struct Slot {
    std::mutex mutex;
    std::shared_ptr<Kernel::Impl> impl;
  };
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<Slot>> kernels;
  static KernelRegistry& instance() {
    static KernelRegistry r;
    return r;
  }
};

// A kernel that takes TMA tensor maps: they are encoded from this launch's
// pointers and sizes and passed after the packed parameters. Such a kernel
// has one entry and needs every tensor 16-byte aligned.
[[gnu::noinline]] void launchWithTensorMaps(const PreparedKernel& pk, const rt::LaunchConfig& cfg,
                                            const rt::ArgBlock& block) {
  rt::launchWithTensorMaps(pk.vectorized, cfg, block, pk.maps, pk.packer->signature());
}

// The caller has checked the kernel's dim bounds (GridRule::check).
void launchOne(Kernel::Impl& impl, const PreparedKernel& pk, const rt::ArgBlock& block, void* stream) {
  const auto dimValue = [&](size_t d) { return block.dimValue(d); };
  const int64_t blocks = pk.grid.blocks(dimValue);
  if (blocks == 0) return;
  const compiler::LaunchGeometry& lg = pk.ck->launch;
  rt::LaunchConfig cfg;
  cfg.grid.x = static_cast<unsigned>(blocks);
  cfg.block.x = static_cast<unsigned>(lg.threadsPerBlock);
  cfg.sharedBytes = static_cast<unsigned>(lg.sharedBytes);
  cfg.stream = stream;
  if (lg.cluster > 1) cfg.cluster.x = static_cast<unsigned>(lg.cluster);
  if (!pk.maps.empty()) {
    launchWithTensorMaps(pk, cfg, block);
    return;
  }
  if (block.vectorizable() && pk.grid.vectorFits(dimValue)) [[likely]] {
    rt::launch(pk.oneStep && pk.grid.inOneStep(dimValue) ? pk.oneStep : pk.vectorized, cfg, block);
    return;
  }
  if (!pk.ownScalar) loadScalarEntries(impl);  // once; a cheap check afterwards
  rt::launch(pk.scalar, cfg, block);
}

// Several kernels, in order, each with its share of the graph's arguments
// (already checked against the graph as a whole in `full`) and its
// workspace tensors. The workspace stays leased until the last kernel is
// enqueued, so no other launch of this Kernel can move it in between.
void launchKernels(Kernel::Impl& impl, std::span<const TensorView> tensors, std::span<const ScalarArg> scalars,
                   const rt::ArgBlock& full, void* stream) {
  std::optional<rt::Workspace::Lease> lease;
  if (impl.workspace) {
    std::array<int64_t, rt::ArgBlock::kMaxParams> dims;
    const size_t numDims = impl.sig.dims.size();
    for (size_t d = 0; d < numDims; ++d) dims[d] = full.dimValue(d);
    lease.emplace(impl.workspace->acquire(std::span<const int64_t>(dims.data(), numDims), stream));
  }
  std::array<const TensorView*, 64> views;  // an ArgPacker takes at most 64 tensors
  std::array<int64_t, rt::ArgBlock::kMaxParams> kdims;
  std::array<ScalarArg, rt::ArgBlock::kMaxParams> kscalars;
  for (const PreparedKernel& pk : impl.kernels) {
    for (size_t i = 0; i < pk.tensorMap.size(); ++i)
      views[i] = pk.tensorMap[i] >= 0 ? &tensors[static_cast<size_t>(pk.tensorMap[i])]
                                      : &lease->view(static_cast<size_t>(pk.workspaceMap[i]));
    for (size_t i = 0; i < pk.dimMap.size(); ++i) kdims[i] = full.dimValue(static_cast<size_t>(pk.dimMap[i]));
    for (size_t i = 0; i < pk.scalarMap.size(); ++i) kscalars[i] = scalars[static_cast<size_t>(pk.scalarMap[i])];
    // A dim over a kernel's bound first: the views' extents (checked for
    // overlaps with the workspace next) mean nothing past it.
    pk.grid.check([&](size_t d) { return kdims[d]; }, pk.ck->name);
    rt::ArgBlock block;
    pk.packer->pack(block, std::span<const TensorView* const>(views.data(), pk.tensorMap.size()),
                    std::span<const int64_t>(kdims.data(), pk.dimMap.size()),
                    std::span<const ScalarArg>(kscalars.data(), pk.scalarMap.size()));
    launchOne(impl, pk, block, stream);
  }
}

// "in x bf16[N, 4096], b bf16[4096]; out y bf16[N, 4096]" (workspace
// tensors marked).
std::string describeTensors(const compiler::CompiledKernel& k) {
  std::string in, out;
  for (const compiler::KernelTensor& t : k.tensors) {
    std::string& s = t.output ? out : in;
    s += (s.empty() ? "" : ", ") + t.name + " " + typeToString(t.dtype, t.shape) + (t.workspace ? " (workspace)" : "");
  }
  return "in " + (in.empty() ? "-" : in) + "; out " + (out.empty() ? "-" : out);
}

// Indents every line of `text` by `prefix`.
std::string indent(const std::string& text, const std::string& prefix) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out += prefix + text.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

}  // namespace

Kernel compile(const Graph& graph, const CompileOptions& options) {
  std::string chip = options.chip;
  if (chip.empty()) chip = rt::driverAvailable() ? rt::Device::current().basics().arch() : "sm_90";
  compiler::CompileOptions co = detail::compilerOptions(options, chip);
  for (const auto& [name, value] : options.dims) co.dimHints[name] = value;
  std::vector<std::string> tuningNotes;
  const std::string graphText = graph.toText();
  if (options.tune != CompileOptions::Tune::Off) tuningNotes = detail::resolveTuning(graph, graphText, options, co);
  std::string key = chip + "|" + std::string(compiler::routeName(options.route)) + "|" +
                    (options.keepText ? "t" : "-") + "|" + options.configOverride + "|" + options.rowConfigOverride + "|" +
                    options.matmulConfigOverride + "|" + (options.matmulRowSoftmax ? "row-softmax|" : "");
  for (const auto& [index, config] : co.kernelConfigs) key += std::to_string(index) + "=" + config + ";";
  key += "|";
  for (const auto& [dim, value] : co.dimHints) key += dim + "~" + std::to_string(compiler::dimHintClass(value)) + ";";
  key += "|" + graphText;
  key += options.diskCache ? "|disk" : "|nodisk";
  KernelRegistry& reg = KernelRegistry::instance();
  std::shared_ptr<KernelRegistry::Slot> slot;
  {
    std::lock_guard<std::mutex> lock(reg.mutex);
    auto& s = reg.kernels[key];
    if (!s) s = std::make_shared<KernelRegistry::Slot>();
    slot = s;
  }
  std::lock_guard<std::mutex> lock(slot->mutex);  // others compiling this key wait here
  if (!slot->impl) {
    slot->impl = build(graph, co, chip, options.diskCache);
    slot->impl->tuningNotes = std::move(tuningNotes);
  }
  return Kernel(slot->impl);
}

namespace detail {

GridRule gridRuleFrom(const compiler::LaunchGeometry& g, const std::vector<std::string>& kernelDims,
                      const std::string& kernel) {
  auto bad = [&](const std::string& problem) -> Error {
    return Error("kiln: internal error: compiled kernel '" + kernel + "' has a bad launch geometry: " + problem);
  };
  GridRule r;
  if (g.tile.size() > g.iterShape.size()) throw bad("more tile sizes than iteration dims");
  if (g.elementsPerBlock < 1) throw bad("elements per block below 1");
  r.elementsPerBlock = g.elementsPerBlock;
  r.maxBlocks = g.maxBlocks;
  r.minBlocks = g.minBlocks;
  if (g.cluster < 1 || (g.maxBlocks > 0 && g.maxBlocks < g.cluster)) throw bad("a cluster size below 1 or above max blocks");
  r.cluster = g.cluster;
  auto dimIndex = [&](const std::string& name) {
    for (size_t i = 0; i < kernelDims.size(); ++i)
      if (kernelDims[i] == name) return static_cast<int>(i);
    return -1;
  };
  const size_t lead = g.iterShape.size() - g.tile.size();
  for (size_t a = 0; a < g.iterShape.size(); ++a) {
    const int64_t t = a < lead ? 1 : g.tile[a - lead];
    if (t < 1) throw bad("a tile size below 1");
    const Dim& d = g.iterShape[a];
    if (d.isStatic()) {
      r.staticCount *= (d.size + t - 1) / t;
      continue;
    }
    const int index = dimIndex(d.name);
    if (index < 0) throw bad("it iterates over dim " + d.name + ", which the kernel does not take");
    r.dynamic.push_back({index, t});
  }
  for (const compiler::LaunchGeometry::DimBound& b : g.dimBounds) {
    const int index = dimIndex(b.dim);
    if (index < 0) throw bad("it bounds dim " + b.dim + ", which the kernel does not take");
    r.bounds.push_back({index, b.max, b.dim, b.what});
  }
  for (const compiler::LaunchGeometry::DimMultiple& m : g.vectorMultiples) {
    const int index = dimIndex(m.dim);
    if (index < 0) throw bad("its vectorized entry needs a multiple of dim " + m.dim + ", which the kernel does not take");
    if (m.multiple < 1) throw bad("a vector multiple below 1");
    r.multiples.push_back({index, m.multiple});
  }
  auto ranges = [&](const std::vector<compiler::LaunchGeometry::DimRange>& from, std::vector<GridRule::Range>& to,
                    const std::string& what) {
    for (const compiler::LaunchGeometry::DimRange& p : from) {
      const int index = dimIndex(p.dim);
      if (index < 0) throw bad(what + " a range of dim " + p.dim + ", which the kernel does not take");
      if (p.min > p.max) throw bad(what + " an empty range of dim " + p.dim);
      to.push_back({index, p.min, p.max});
    }
  };
  ranges(g.preferred, r.preferred, "its config was chosen for");
  ranges(g.oneStepRange, r.oneStep, "its one-step entry covers");
  return r;
}


compiler::CompileOptions compilerOptions(const CompileOptions& options, const std::string& chip) {
  compiler::CompileOptions co;
  co.chip = chip;
  co.route = options.route;
  co.keepText = options.keepText;
  co.configOverride = options.configOverride;
  co.rowConfigOverride = options.rowConfigOverride;
  co.matmulConfigOverride = options.matmulConfigOverride;
  co.matmulRowSoftmax = options.matmulRowSoftmax;
  co.variants = compiler::EntryVariants::VectorOnly;
  if (rt::driverAvailable()) co.smCount = rt::Device::current().basics().smCount;
  return co;
}

Kernel kernelFromCompiled(const Graph& graph, compiler::CompiledGraph compiled, const std::string& chip,
                          const CompileOptions& options) {
  return kernelFromCompiled(graph, std::move(compiled), compilerOptions(options, chip));
}

Kernel kernelFromCompiled(const Graph& graph, compiler::CompiledGraph compiled, const compiler::CompileOptions& co) {
  auto impl = newImpl(graph, co, co.chip);
  impl->compiled = std::move(compiled);
  prepare(*impl);
  return Kernel(impl);
}

}  // namespace detail

namespace {

// Whether every kernel of `impl` was configured for these values of the
// graph's dims (LaunchGeometry::preferred).
bool preferredFor(const Kernel::Impl& impl, std::span<const int64_t> graphDims) {
  for (const PreparedKernel& pk : impl.kernels)
    if (!pk.grid.inPreferred([&](size_t d) { return graphDims[static_cast<size_t>(pk.dimMap[d])]; })) return false;
  return true;
}

// The build of impl's graph configured for these dim values: one built
// before, or a new one compiled with them as hints (once per range: later
// launches of the same range find it).
[[gnu::noinline]] std::shared_ptr<Kernel::Impl> variantFor(Kernel::Impl& impl, std::span<const int64_t> graphDims) {
  std::lock_guard<std::mutex> lock(impl.variantsMutex);
  for (const std::shared_ptr<Kernel::Impl>& v : impl.variants)
    if (preferredFor(*v, graphDims)) return v;
  compiler::CompileOptions co = impl.options;
  for (const compiler::CompiledKernel& ck : impl.compiled.kernels)
    for (const compiler::LaunchGeometry::DimRange& r : ck.launch.preferred)
      co.dimHints[r.dim] = graphDims[static_cast<size_t>(impl.sig.findDim(r.dim))];
  // A variant of the same hint classes compiles alike: the one to reuse
  // even if its ranges do not hold these values (no build per launch).
  auto sameClasses = [&](const Kernel::Impl& v) {
    if (v.options.dimHints.size() != co.dimHints.size()) return false;
    for (const auto& [dim, value] : co.dimHints) {
      auto it = v.options.dimHints.find(dim);
      if (it == v.options.dimHints.end() || compiler::dimHintClass(it->second) != compiler::dimHintClass(value))
        return false;
    }
    return true;
  };
  for (const std::shared_ptr<Kernel::Impl>& v : impl.variants)
    if (sameClasses(*v)) return v;
  std::shared_ptr<Kernel::Impl> v = newImpl(impl.graph, co, impl.chip);
  v->diskCache = impl.diskCache;
  v->isVariant = true;
  v->tuningNotes = impl.tuningNotes;
  v->compiled = compileGraphCached(v->graph, v->options, v->diskCache);
  prepare(*v);
  impl.variants.push_back(v);
  return v;
}

void launchGraph(Kernel::Impl& impl, std::span<const TensorView> tensors, std::span<const int64_t> dims,
                 std::span<const ScalarArg> scalars, void* stream) {
  std::array<int64_t, rt::ArgBlock::kMaxParams> graphDims;
  if (impl.kernels.size() == 1 && impl.kernels[0].identity) {
    // One kernel whose signature is the graph's: one pack, one launch.
    const PreparedKernel& pk = impl.kernels[0];
    rt::ArgBlock block;
    pk.packer->pack(block, tensors, dims, scalars);
    const auto dimValue = [&](size_t d) { return block.dimValue(d); };
    pk.grid.check(dimValue, pk.ck->name);
    if (!impl.isVariant && !pk.grid.inPreferred(dimValue)) [[unlikely]] {
      for (size_t d = 0; d < impl.sig.dims.size(); ++d) graphDims[d] = block.dimValue(d);
      launchGraph(*variantFor(impl, std::span<const int64_t>(graphDims.data(), impl.sig.dims.size())), tensors, dims,
                  scalars, stream);
      return;
    }
    ensureLoaded(impl);
    launchOne(impl, pk, block, stream);
    return;
  }
  // Several kernels: check everything against the graph first (so dims are
  // consistent across kernels), then pack each kernel's share.
  rt::ArgBlock full;
  impl.packer->pack(full, tensors, dims, scalars);
  for (size_t d = 0; d < impl.sig.dims.size(); ++d) graphDims[d] = full.dimValue(d);
  const std::span<const int64_t> values(graphDims.data(), impl.sig.dims.size());
  if (!impl.isVariant && !preferredFor(impl, values)) [[unlikely]] {
    launchGraph(*variantFor(impl, values), tensors, dims, scalars, stream);
    return;
  }
  ensureLoaded(impl);
  launchKernels(impl, tensors, scalars, full, stream);
}

}  // namespace

void Kernel::launch(std::span<const TensorView> tensors, std::span<const int64_t> dims,
                    std::span<const ScalarArg> scalars, void* stream) const {
  if (!impl_) throw Error("kiln: launch of an empty Kernel handle (use kiln::compile)");
  launchGraph(*impl_, tensors, dims, scalars, stream);
}

void Kernel::launch(const Args& args, void* stream) const {
  if (!impl_) throw Error("kiln: launch of an empty Kernel handle (use kiln::compile)");
  // Resolve names once through the graph-level packer, then go positional.
  rt::ArgBlock full;
  impl_->packer->pack(full, args);
  const rt::KernelSignature& sig = impl_->sig;
  std::vector<TensorView> views(sig.tensors.size());
  for (size_t i = 0; i < sig.tensors.size(); ++i) {
    const rt::TensorParam& p = sig.tensors[i];
    TensorView v;
    v.data = reinterpret_cast<void*>(static_cast<uintptr_t>(full.slot(i)));
    v.dtype = p.dtype;
    for (const rt::Dim& d : p.shape)
      v.shape.push_back(d.isDynamic() ? full.dimValue(static_cast<size_t>(sig.findDim(d.name))) : d.size);
    views[i] = std::move(v);
  }
  std::vector<int64_t> dims;
  for (size_t d = 0; d < sig.dims.size(); ++d) dims.push_back(full.dimValue(d));
  std::vector<ScalarArg> scalars(sig.scalars.size());
  for (const auto& [name, value] : args.scalars()) scalars[static_cast<size_t>(sig.findScalar(name))] = value;
  launch(std::span<const TensorView>(views), std::span<const int64_t>(dims), std::span<const ScalarArg>(scalars),
         stream);
}

std::string Kernel::explain() const {
  if (!impl_) return "empty kernel\n";
  std::ostringstream os;
  const auto& cg = impl_->compiled;
  os << cg.kernels.size() << " kernel(s) for " << impl_->chip << "\n";
  for (const compiler::CompiledKernel& k : cg.kernels) {
    os << "  " << k.name << ": schedule " << k.schedule << ", config " << k.config << "\n";
    if (!k.why.empty()) os << "    why: " << k.why << "\n";
    size_t index = static_cast<size_t>(&k - cg.kernels.data());
    if (index < impl_->tuningNotes.size() && !impl_->tuningNotes[index].empty())
      os << "    tuning: " << impl_->tuningNotes[index] << "\n";
    os << "    " << describeTensors(k) << "\n";
    if (k.launch.sharedBytes > 0) os << "    dynamic shared memory: " << k.launch.sharedBytes << " bytes/block\n";
    if (k.launch.cluster > 1) {
      os << "    clusters of " << k.launch.cluster << " blocks";
      if (index < impl_->kernels.size() && impl_->loaded && impl_->kernels[index].grid.maxBlocks > 0)
        os << ", at most " << impl_->kernels[index].grid.maxBlocks / k.launch.cluster << " at once";
      os << "\n";
    } else if (k.launch.resident) {
      os << "    resident grid: the blocks that fit at once loop over the rows";
      if (index < impl_->kernels.size() && impl_->loaded && impl_->kernels[index].grid.maxBlocks > 0)
        os << " (" << impl_->kernels[index].grid.maxBlocks << " blocks on this GPU)";
      os << "\n";
    }
    for (const compiler::LaunchGeometry::DimBound& b : k.launch.dimBounds)
      os << "    dim " << b.dim << " at most " << b.max << " (" << b.what << ", counted in 32 bits; checked at launch)\n";
    for (const compiler::LaunchGeometry::DimMultiple& m : k.launch.vectorMultiples)
      os << "    vectorized entry where dim " << m.dim << " is a multiple of " << m.multiple << " (else the scalar entry)\n";
    for (const compiler::LaunchGeometry::DimRange& r : k.launch.oneStepRange)
      os << "    one-step entry where dim " << r.dim << " is at most " << r.max
         << " (each pass one step, no loop; longer rows the looped entry)\n";
    for (const compiler::LaunchGeometry::DimRange& r : k.launch.preferred) {
      os << "    config chosen for dim " << r.dim << " ";
      if (r.max == std::numeric_limits<int64_t>::max()) os << "at least " << r.min;
      else if (r.min <= 0) os << "at most " << r.max;
      else os << "in [" << r.min << ", " << r.max << "]";
      os << " (a launch outside builds, once, the graph configured for it)\n";
    }
    for (const auto& r : k.resources)
      os << "    " << r.kernel << ": " << r.registers << " registers, " << r.spillStoreBytes
         << " bytes spill stores, " << r.spillLoadBytes << " bytes spill loads\n";
  }
  if (!cg.workspace.empty()) {
    os << "workspace: " << cg.workspace.size()
       << " intermediate(s), sized at launch from the dims, one allocation owned by the Kernel\n";
    for (const compiler::KernelTensor& t : cg.workspace) os << "  " << t.name << ": " << typeToString(t.dtype, t.shape) << "\n";
  }
  if (!cg.explain.empty()) os << "plan:\n" << indent(cg.explain, "  ");
  std::lock_guard<std::mutex> lock(impl_->variantsMutex);
  for (const std::shared_ptr<Impl>& v : impl_->variants) {
    os << "variant built for a launch outside the ranges above (hints";
    for (const auto& [dim, value] : v->options.dimHints) os << " " << dim << "=" << value;
    os << "):\n";
    for (const compiler::CompiledKernel& k : v->compiled.kernels) {
      os << "  " << k.name << ": schedule " << k.schedule << ", config " << k.config << "\n";
      for (const compiler::LaunchGeometry::DimRange& r : k.launch.preferred)
        os << "    for dim " << r.dim << " in [" << r.min << ", " << r.max << "]\n";
    }
  }
  return os.str();
}

const compiler::CompiledGraph& Kernel::compiled() const {
  if (!impl_) throw Error("kiln: empty Kernel handle");
  return impl_->compiled;
}

int64_t Kernel::maxBlocks(size_t index) const {
  if (!impl_) throw Error("kiln: empty Kernel handle");
  ensureLoaded(*impl_);
  if (index >= impl_->kernels.size())
    throw Error("kiln: Kernel::maxBlocks: kernel " + std::to_string(index) + " of " +
                std::to_string(impl_->kernels.size()));
  return impl_->kernels[index].grid.maxBlocks;
}

const rt::KernelSignature& Kernel::signature() const {
  if (!impl_) throw Error("kiln: empty Kernel handle");
  return impl_->sig;
}

Kernel Kernel::forDims(std::span<const int64_t> dims) const {
  if (!impl_) throw Error("kiln: Kernel::forDims on an empty Kernel handle");
  if (dims.size() != impl_->sig.dims.size())
    throw Error("kiln: Kernel::forDims: " + std::to_string(dims.size()) + " dim value(s) given, but the graph has " +
                std::to_string(impl_->sig.dims.size()) + " dynamic dim(s)");
  for (size_t d = 0; d < dims.size(); ++d)
    if (dims[d] < 0)
      throw Error("kiln: Kernel::forDims: dim " + impl_->sig.dims[d].name + " = " + std::to_string(dims[d]) +
                  " is negative");
  if (impl_->isVariant || preferredFor(*impl_, dims)) return *this;
  return Kernel(variantFor(*impl_, dims));
}

Kernel Kernel::forDims(const std::map<std::string, int64_t>& dims) const {
  if (!impl_) throw Error("kiln: Kernel::forDims on an empty Kernel handle");
  const rt::KernelSignature& sig = impl_->sig;
  std::string listed;
  for (const auto& d : sig.dims) listed += (listed.empty() ? "" : ", ") + d.name;
  for (const auto& [name, value] : dims)
    if (sig.findDim(name) < 0)
      throw Error("kiln: Kernel::forDims: the graph has no dynamic dim named " + name + " (its dynamic dims: " +
                  (listed.empty() ? "none" : listed) + ")");
  std::vector<int64_t> values;
  for (const auto& d : sig.dims) {
    const auto it = dims.find(d.name);
    if (it == dims.end())
      throw Error("kiln: Kernel::forDims: no value given for dynamic dim " + d.name + " (its dynamic dims: " + listed +
                  ")");
    values.push_back(it->second);
  }
  return forDims(values);
}

}  // namespace kiln
