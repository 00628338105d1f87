#include "kiln/kernel.h"

#include <atomic>
#include <map>
#include <mutex>
#include <sstream>

#include "kiln/runtime/device.h"
#include "kiln/runtime/driver.h"
#include "kiln/runtime/launch.h"
#include "kiln/runtime/module.h"

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
  std::vector<int> tensorMap;  // kernel tensor -> graph tensor
  std::vector<int> dimMap;     // kernel dim -> graph dim
  std::vector<int> scalarMap;  // kernel scalar -> graph scalar
  bool identity = false;       // the kernel's signature is the graph's
  int64_t staticIter = 1;
  std::vector<int> iterDims;   // kernel dim indices multiplying the iteration count
  rt::Module module;
  rt::Function vectorized, scalar;
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
  std::atomic<bool> loaded{false};
  std::mutex loadMutex;
  std::string chip;
};

namespace {

void loadModules(Kernel::Impl& impl) {
  for (PreparedKernel& pk : impl.kernels) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(pk.ck->cubin.data());
    pk.module = rt::Module::load(std::span<const uint8_t>(bytes, pk.ck->cubin.size()), pk.ck->name);
    for (const compiler::KernelEntry& e : pk.ck->entries) {
      rt::Function f = pk.module.function(e.name);
      if (e.vectorized) pk.vectorized = f;
      else pk.scalar = f;
    }
    if (!pk.vectorized) pk.vectorized = pk.scalar;
  }
  impl.loaded = true;
}

// The scalar entries of every kernel, built and loaded once, on demand.
void loadScalarEntries(Kernel::Impl& impl) {
  std::call_once(impl.scalarOnce, [&] {
    compiler::CompileOptions co = impl.options;
    co.variants = compiler::EntryVariants::ScalarOnly;
    impl.scalarCompiled = compiler::compileGraph(impl.graph, co);
    for (size_t i = 0; i < impl.kernels.size(); ++i) {
      const compiler::CompiledKernel& ck = impl.scalarCompiled.kernels.at(i);
      const auto* bytes = reinterpret_cast<const uint8_t*>(ck.cubin.data());
      impl.scalarModules.push_back(rt::Module::load(std::span<const uint8_t>(bytes, ck.cubin.size()), ck.name));
      impl.kernels[i].scalar = impl.scalarModules.back().function(ck.entries.at(0).name);
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

std::shared_ptr<Kernel::Impl> build(const Graph& graph, const CompileOptions& options, const std::string& chip) {
  auto impl = std::make_shared<Kernel::Impl>();
  impl->chip = chip;
  impl->graph = bindDims(graph, {});  // a private copy: the caller may keep adding nodes
  compiler::CompileOptions& co = impl->options;
  co.chip = chip;
  co.route = options.route;
  co.keepText = options.keepText;
  co.configOverride = options.configOverride;
  co.variants = compiler::EntryVariants::VectorOnly;
  if (rt::driverAvailable()) co.smCount = rt::Device::current().properties().smCount;
  impl->compiled = compiler::compileGraph(graph, co);

  // The graph-level signature.
  rt::KernelSignature& sig = impl->sig;
  sig.kernel = "graph";
  std::vector<std::string> scalarNames;
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
  impl->packer = std::make_unique<rt::ArgPacker>(sig);

  for (const compiler::CompiledKernel& ck : impl->compiled.kernels) {
    PreparedKernel pk;
    pk.ck = &ck;
    rt::KernelSignature ks;
    ks.kernel = ck.name;
    for (const compiler::KernelTensor& t : ck.tensors) {
      ks.tensors.push_back({t.name, t.dtype, toRtShape(t.shape), t.output,
                            static_cast<unsigned>(t.alignment > 1 ? t.alignment : 1), true, false});
      int gi = -1;
      for (size_t i = 0; i < sig.tensors.size(); ++i)
        if (sig.tensors[i].name == t.name && sig.tensors[i].isOutput == t.output) gi = static_cast<int>(i);
      pk.tensorMap.push_back(gi);
    }
    for (const std::string& d : ck.dims) {
      ks.dims.push_back({d});
      int gi = -1;
      for (size_t i = 0; i < sig.dims.size(); ++i)
        if (sig.dims[i].name == d) gi = static_cast<int>(i);
      pk.dimMap.push_back(gi);
    }
    for (const compiler::KernelScalar& s : ck.scalars) {
      ks.scalars.push_back({s.name, s.dtype});
      pk.scalarMap.push_back(sig.findScalar(s.name));
    }
    pk.identity = impl->compiled.kernels.size() == 1 && ks.tensors.size() == sig.tensors.size() &&
                  ks.dims.size() == sig.dims.size() && ks.scalars.size() == sig.scalars.size();
    for (size_t i = 0; pk.identity && i < pk.tensorMap.size(); ++i) pk.identity = pk.tensorMap[i] == static_cast<int>(i);
    for (size_t i = 0; pk.identity && i < pk.dimMap.size(); ++i) pk.identity = pk.dimMap[i] == static_cast<int>(i);
    for (size_t i = 0; pk.identity && i < pk.scalarMap.size(); ++i) pk.identity = pk.scalarMap[i] == static_cast<int>(i);
    for (const Dim& d : ck.launch.iterShape) {
      if (d.isStatic()) pk.staticIter *= d.size;
      else pk.iterDims.push_back(indexOf(ck.dims, d.name));
    }
    pk.packer = std::make_unique<rt::ArgPacker>(std::move(ks));
    impl->kernels.push_back(std::move(pk));
  }
  if (rt::driverAvailable()) loadModules(*impl);
  return impl;
}

// The process-wide registry of compiled graphs (equal graph, equal options:
// the same kernel).
struct KernelRegistry {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<Kernel::Impl>> kernels;
  static KernelRegistry& instance() {
    static KernelRegistry r;
    return r;
  }
};

void launchOne(Kernel::Impl& impl, const PreparedKernel& pk, const rt::ArgBlock& block, void* stream) {
  int64_t total = pk.staticIter;
  for (int d : pk.iterDims) total *= block.dimValue(static_cast<size_t>(d));
  if (total <= 0) return;
  const compiler::LaunchGeometry& lg = pk.ck->launch;
  int64_t blocks = (total + lg.elementsPerBlock - 1) / lg.elementsPerBlock;
  if (lg.maxBlocks > 0 && blocks > lg.maxBlocks) blocks = lg.maxBlocks;
  if (blocks > 0x7fffffff) blocks = 0x7fffffff;  // the kernels loop over chunks
  rt::LaunchConfig cfg;
  cfg.grid.x = static_cast<unsigned>(blocks);
  cfg.block.x = static_cast<unsigned>(lg.threadsPerBlock);
  cfg.sharedBytes = static_cast<unsigned>(lg.sharedBytes);
  cfg.stream = stream;
  if (block.vectorizable()) [[likely]] {
    rt::launch(pk.vectorized, cfg, block);
    return;
  }
  loadScalarEntries(impl);  // once; a cheap check afterwards
  rt::launch(pk.scalar, cfg, block);
}

}  // namespace

Kernel compile(const Graph& graph, const CompileOptions& options) {
  std::string chip = options.chip;
  if (chip.empty()) chip = rt::driverAvailable() ? rt::Device::current().properties().arch() : "sm_90";
  std::string key = chip + "|" + std::string(compiler::routeName(options.route)) + "|" +
                    (options.keepText ? "t" : "-") + "|" + options.configOverride + "|" + graph.toText();
  KernelRegistry& reg = KernelRegistry::instance();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto it = reg.kernels.find(key);
  if (it != reg.kernels.end()) return Kernel(it->second);
  auto impl = build(graph, options, chip);
  reg.kernels[key] = impl;
  return Kernel(impl);
}

void Kernel::launch(std::span<const TensorView> tensors, std::span<const int64_t> dims,
                    std::span<const ScalarArg> scalars, void* stream) const {
  if (!impl_) throw Error("kiln: launch of an empty Kernel handle (use kiln::compile)");
  if (impl_->kernels.size() == 1 && impl_->kernels[0].identity) {
    // One kernel whose signature is the graph's: one pack, one launch.
    const PreparedKernel& pk = impl_->kernels[0];
    rt::ArgBlock block;
    pk.packer->pack(block, tensors, dims, scalars);
    ensureLoaded(*impl_);
    launchOne(*impl_, pk, block, stream);
    return;
  }
  // Several kernels: check everything against the graph first (so dims are
  // consistent across kernels), then pack each kernel's share.
  rt::ArgBlock full;
  impl_->packer->pack(full, tensors, dims, scalars);
  ensureLoaded(*impl_);
  for (const PreparedKernel& pk : impl_->kernels) {
    const TensorView* views[64];
    int64_t kdims[64];
    ScalarArg kscalars[64];
    for (size_t i = 0; i < pk.tensorMap.size(); ++i) views[i] = &tensors[pk.tensorMap[i]];
    for (size_t i = 0; i < pk.dimMap.size(); ++i) kdims[i] = full.dimValue(pk.dimMap[i]);
    for (size_t i = 0; i < pk.scalarMap.size(); ++i) kscalars[i] = scalars[pk.scalarMap[i]];
    rt::ArgBlock block;
    pk.packer->pack(block, std::span<const TensorView* const>(views, pk.tensorMap.size()),
                    std::span<const int64_t>(kdims, pk.dimMap.size()),
                    std::span<const ScalarArg>(kscalars, pk.scalarMap.size()));
    launchOne(*impl_, pk, block, stream);
  }
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
  os << cg.kernels.size() << " kernel(s) for " << impl_->chip << "\n" << cg.explain;
  for (const auto& k : cg.kernels) {
    os << "  " << k.name << ": schedule " << k.schedule << ", config " << k.config << "\n";
    for (const auto& r : k.resources)
      os << "    " << r.kernel << ": " << r.registers << " registers, " << r.spillStoreBytes << " bytes spilled\n";
  }
  return os.str();
}

const compiler::CompiledGraph& Kernel::compiled() const {
  if (!impl_) throw Error("kiln: empty Kernel handle");
  return impl_->compiled;
}

const rt::KernelSignature& Kernel::signature() const {
  if (!impl_) throw Error("kiln: empty Kernel handle");
  return impl_->sig;
}

}  // namespace kiln
