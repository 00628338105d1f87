#include "tuning.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>

#include "kernel_internal.h"
#include "kiln/autotune/tuner.h"
#include "kiln/autotune/tuning_db.h"
#include "kiln/dsl/reference.h"
#include "kiln/runtime/device.h"
#include "kiln/runtime/device_buffer.h"
#include "kiln/runtime/disk_cache.h"
#include "kiln/runtime/driver.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/timing.h"
#include "kiln_version.h"

namespace kiln {

namespace detail {

Counters& counters() {
  static Counters c;
  return c;
}

compiler::CompiledGraph countedCompile(const Graph& graph, const compiler::CompileOptions& options) {
  compiler::CompiledGraph cg = compiler::compileGraph(graph, options);
  counters().compiled += cg.kernels.size();
  return cg;
}

}  // namespace detail

Stats stats() {
  const detail::Counters& c = detail::counters();
  Stats s;
  s.kernelsCompiled = c.compiled;
  s.kernelsFromDiskCache = c.fromDiskCache;
  s.tuningHits = c.hits;
  s.tuningMisses = c.misses;
  s.kernelsTuned = c.tuned;
  s.candidatesBenchmarked = c.benchmarked;
  return s;
}

namespace {

std::mutex& progressMutex() {
  static std::mutex mu;
  return mu;
}
TuningProgressFn& progressFn() {
  static TuningProgressFn fn;
  return fn;
}

}  // namespace

void setTuningProgress(TuningProgressFn fn) {
  std::lock_guard<std::mutex> lock(progressMutex());
  progressFn() = std::move(fn);
}

namespace detail {

namespace {

// Multiply-adds the fp64 reference spends on the graph's matmuls at `dims`
// (the rest of the reference is linear in the elements).
int64_t referenceMacs(const Graph& g, const DimBindings& dims) {
  int64_t macs = 0;
  for (int id = 0; id < g.numNodes(); ++id) {
    const Node& n = g.node(id);
    if (n.op != Op::Matmul) continue;
    const Node& a = g.node(n.inputs[0]);
    std::vector<int64_t> out = resolveShape(n.shape, dims), as = resolveShape(a.shape, dims);
    int64_t e = n.transA ? as[as.size() - 2] : as.back();
    for (int64_t x : out) e *= x;
    macs += e;
  }
  return macs;
}
// At most this many: about 0.3 s of the host's fp64 reference.
constexpr int64_t kReferenceMacs = int64_t{1} << 27;

using Clock = std::chrono::steady_clock;

// ---- The database ----------------------------------------------------------

// Every access to a database goes through this lock (TuningDatabase is not
// thread-safe), and so does the memo below.
std::mutex& dbMutex() {
  static std::mutex mu;
  return mu;
}

tune::TuningDatabase& globalDatabase() {
  static std::unique_ptr<tune::TuningDatabase> db;
  if (!db) db = std::make_unique<tune::TuningDatabase>();  // throws naming a bad file; retried next time
  return *db;
}

bool hasEntries(const tune::TuningDatabase& db) {
  for (const auto& f : db.files())
    if (!f.entries.empty()) return true;
  return false;
}

tune::DeviceKey currentDeviceKey() {
  const rt::Device::Basics& b = rt::Device::current().basics();
  return tune::DeviceKey{b.name, b.ccMajor, b.ccMinor, b.smCount};
}

// Resolved configs by (database, device, mode, options, graph): a warm
// compile of a graph already resolved in this process does no lookups.
// Cleared whenever this process records an entry.
struct Resolved {
  std::map<int, std::string> configs;
  std::vector<std::string> notes;
};
std::map<std::string, Resolved>& memo() {
  static std::map<std::string, Resolved> m;
  return m;
}

// ---- A tuning instance on the GPU -------------------------------------------

double toleranceOf(DType t) {
  switch (t) {
    case DType::BF16: return 1.6e-2;
    case DType::F16: return 2e-3;
    case DType::F32: return 2e-5;
    default: return 0;
  }
}

// Compares `got` with `want` (element by element, `exact` the fp64 values
// when the reference evaluator made them): floats within `tol` relative,
// absolute below `floor`; NaN where NaN; infinities equal; integers exactly.
std::optional<std::string> compare(const std::string& output, const HostTensor& got, const HostTensor& want,
                                   const std::vector<double>* exact, double tol, double floor, int64_t firstIndex) {
  int64_t bad = 0, first = -1;
  double firstGot = 0, firstWant = 0;
  for (int64_t e = 0; e < got.numel(); ++e) {
    double w = exact && isFloat(got.dtype()) ? (*exact)[static_cast<size_t>(e)] : want.get(e);
    double h = got.get(e);
    bool ok;
    if (std::isnan(w)) ok = std::isnan(h);
    else if (std::isinf(w)) ok = h == w || (got.dtype() != DType::F32 && std::isinf(h));
    else if (!isFloat(got.dtype())) ok = h == w;
    else ok = std::fabs(h - w) <= tol * std::max(floor, std::fabs(w));
    if (!ok && bad++ == 0) {
      first = e;
      firstGot = h;
      firstWant = w;
    }
  }
  if (bad == 0) return std::nullopt;
  return "output " + output + ": " + std::to_string(bad) + " of " + std::to_string(got.numel()) +
         " checked elements wrong, first at " + std::to_string(firstIndex + first) + ": got " +
         std::to_string(firstGot) + ", want " + std::to_string(firstWant);
}

// The graph's inputs (fresh random values) and outputs on the GPU at the
// tuning dims, and what candidates are checked against:
//  - instances of at most 2^21 elements (inputs and outputs together): the
//    fp64 reference evaluator's outputs, every element;
//  - larger ones (beyond what the evaluator does in a second): the
//    heuristic config's outputs (the first candidate checked, which the
//    test suite checks against the reference), on 8 chunks of 16 KiB per
//    output (the first, the last and random ones).
class Instance {
 public:
  Instance(const Graph& g, const DimBindings& dims, const compiler::CompileOptions& co) : g_(g), co_(co) {
    std::mt19937_64 rng(std::random_device{}());
    EvalInputs in;
    in.dims = dims;
    int64_t elements = 0, maxInput = 0;
    for (int id : g.params()) {
      const Node& n = g.node(id);
      if (n.op != Op::Input) {
        HostTensor one(n.dtype, {});
        one.fillRandom(rng, isFloat(n.dtype) ? 0.5 : 1.0, isFloat(n.dtype) ? 1.0 : 8.0);
        in.scalars[n.name] = one.get(0);
        scalars_.emplace_back(one.get(0));
        continue;
      }
      std::vector<int64_t> shape = resolveShape(n.shape, dims);
      int64_t numel = 1;
      for (int64_t d : shape) numel *= d;
      const size_t bytes = static_cast<size_t>(numel) * static_cast<size_t>(dtypeSize(n.dtype));
      elements += numel;
      bytes_ += static_cast<double>(bytes);
      buffers_.emplace_back(bytes + 256);
      views_.emplace_back(buffers_.back().data(), n.dtype, shape);
      inputNames_.push_back(n.name);
      maxInput = std::max(maxInput, numel);
    }
    // Small instances: every value drawn on the host (the reference needs
    // them). Large ones: a pool of random values (an odd count, so rows do
    // not repeat in step) uploaded once and doubled on the device.
    for (const GraphOutput& o : g.outputs()) {
      int64_t numel = 1;
      for (int64_t d : resolveShape(g.node(o.node).shape, dims)) numel *= d;
      elements += numel;
    }
    const bool small = elements <= (int64_t{1} << 21) && referenceMacs(g, dims) <= kReferenceMacs;
    for (size_t i = 0; i < inputNames_.size(); ++i) {
      const TensorView& v = views_[i];
      const double lo = isFloat(v.dtype) ? -1.0 : 0.0, hi = isFloat(v.dtype) ? 1.0 : 8.0;
      int64_t numel = 1;
      for (int64_t d : v.shape) numel *= d;
      if (numel == 0) continue;
      const size_t es = static_cast<size_t>(dtypeSize(v.dtype));
      if (small) {
        HostTensor t(v.dtype, v.shape);
        t.fillRandom(rng, lo, hi);
        buffers_[i].upload(t.data(), t.bytes());
        in.tensors.emplace(inputNames_[i], std::move(t));
        continue;
      }
      const int64_t pool = std::min<int64_t>(numel, (int64_t{1} << 20) + 77);
      HostTensor t(v.dtype, {pool});
      t.fillRandom(rng, lo, hi);
      buffers_[i].upload(t.data(), t.bytes());
      const uintptr_t base = reinterpret_cast<uintptr_t>(buffers_[i].data());
      for (int64_t have = pool; have < numel;) {
        int64_t n = std::min(have, numel - have);
        rt::check(rt::driver().memcpyDtoD(base + static_cast<uintptr_t>(have) * es, base, static_cast<size_t>(n) * es),
                  "cuMemcpyDtoD (tuning inputs)");
        have += n;
      }
    }
    firstOut_ = views_.size();
    for (const GraphOutput& o : g.outputs()) {
      const Node& n = g.node(o.node);
      std::vector<int64_t> shape = resolveShape(n.shape, dims);
      int64_t numel = 1;
      for (int64_t d : shape) numel *= d;
      size_t bytes = static_cast<size_t>(numel) * static_cast<size_t>(dtypeSize(n.dtype));
      bytes_ += static_cast<double>(bytes);
      buffers_.emplace_back(bytes + 256);
      views_.emplace_back(buffers_.back().data(), n.dtype, shape);
      outNames_.push_back(o.name);
      // An output with fewer elements than the largest input reduces about
      // L = that ratio values into each: rounding in another order moves it
      // by ~sqrt(L) ulps of the values summed, so the absolute floor of its
      // tolerance grows with sqrt(L) (1 for elementwise outputs).
      double ratio = numel > 0 ? static_cast<double>(maxInput) / static_cast<double>(numel) : 1.0;
      floors_.push_back(std::max(1.0, std::sqrt(ratio)));
    }
    for (const std::string& d : g.dynamicDims()) dimValues_.push_back(dims.at(d));
    fullReference_ = small;
    if (fullReference_) {
      ref_ = evaluate(g, in);
    } else {
      // The compiled kernel takes its dynamic dims at launch: the same
      // candidate also runs on a small instance (the dims halved until it
      // holds at most 2^21 elements) checked against the reference.
      DimBindings few = dims;
      auto total = [&](const DimBindings& d) {
        int64_t n = 0;
        for (int id : g.params())
          if (g.node(id).op == Op::Input) {
            int64_t e = 1;
            for (int64_t x : resolveShape(g.node(id).shape, d)) e *= x;
            n += e;
          }
        for (const GraphOutput& o : g.outputs()) {
          int64_t e = 1;
          for (int64_t x : resolveShape(g.node(o.node).shape, d)) e *= x;
          n += e;
        }
        return n;
      };
      bool shrunk = true;
      auto fits = [&](const DimBindings& d) {
        return total(d) <= (int64_t{1} << 21) && referenceMacs(g, d) <= kReferenceMacs;
      };
      while (!fits(few) && shrunk) {
        shrunk = false;
        for (auto& [name, v] : few)
          if (v > 1) {
            v = (v + 1) / 2;
            shrunk = true;
          }
      }
      if (!few.empty() && fits(few)) small_ = std::make_unique<Instance>(g, few, co);
      // Chunks of 16 KiB (or the whole output when smaller), at the same
      // places for every candidate.
      for (size_t o = 0; o < outNames_.size(); ++o) {
        const TensorView& v = views_[firstOut_ + o];
        int64_t numel = 1;
        for (int64_t d : v.shape) numel *= d;
        int64_t chunk = std::max<int64_t>(1, 16384 / dtypeSize(v.dtype));
        std::vector<std::pair<int64_t, int64_t>> cs;
        if (numel <= 8 * chunk) {
          cs.push_back({0, numel});
        } else {
          cs.push_back({0, chunk});
          cs.push_back({numel - chunk, chunk});
          for (int i = 0; i < 6; ++i)
            cs.push_back({static_cast<int64_t>(rng() % static_cast<uint64_t>(numel - chunk)), chunk});
        }
        chunks_.push_back(std::move(cs));
      }
    }
  }

  double bytes() const { return bytes_; }
  // How candidates are checked, for explain().
  std::string checkedHow() const {
    if (fullReference_) return "";
    return small_ ? "; candidates checked against the reference on a small instance and against the heuristic's "
                    "output at full size"
                  : "; candidates checked against the heuristic's output";
  }

  std::optional<std::string> check(const compiler::CompiledGraph& cg) {
    if (small_)
      if (auto bad = small_->check(cg)) return *bad + " (on the small instance " + small_->describeDims() + ")";
    Kernel k = kernelFor(cg);
    for (size_t o = 0; o < outNames_.size(); ++o) buffers_[firstOut_ + o].poison();
    launch(k);
    for (size_t o = 0; o < outNames_.size(); ++o) {
      const TensorView& v = views_[firstOut_ + o];
      const rt::DeviceBuffer& b = buffers_[firstOut_ + o];
      if (fullReference_) {
        HostTensor got(v.dtype, v.shape);
        if (got.bytes()) b.download(got.data(), got.bytes());
        if (auto bad = compare(outNames_[o], got, ref_[o].value, &ref_[o].exact, toleranceOf(v.dtype), floors_[o], 0))
          return bad;
        continue;
      }
      const size_t es = static_cast<size_t>(dtypeSize(v.dtype));
      std::vector<HostTensor> got;
      for (const auto& [start, count] : chunks_[o]) {
        HostTensor h(v.dtype, {count});
        b.download(h.data(), h.bytes(), static_cast<size_t>(start) * es);
        got.push_back(std::move(h));
      }
      if (defaultChunks_.size() <= o) {  // the first candidate: the heuristic's config
        defaultChunks_.push_back(std::move(got));
        continue;
      }
      for (size_t c = 0; c < got.size(); ++c)
        if (auto bad = compare(outNames_[o], got[c], defaultChunks_[o][c], nullptr, 2 * toleranceOf(v.dtype),
                               floors_[o], chunks_[o][c].first))
          return *bad + " (against the heuristic config's output)";
    }
    return std::nullopt;
  }

  tune::Timing time(const compiler::CompiledGraph& cg, int iters) {
    Kernel k = kernelFor(cg);
    rt::BenchmarkOptions bo;
    bo.warmup = 3;
    bo.iters = iters;
    bo.flushL2 = true;
    rt::BenchmarkResult r = rt::benchmark([&] { launch(k); }, bo);
    return {r.medianUs, r.p95Us};
  }

 private:
  std::string describeDims() const {
    std::string out;
    size_t i = 0;
    for (const std::string& d : g_.dynamicDims()) out += (out.empty() ? "" : ", ") + d + "=" + std::to_string(dimValues_[i++]);
    return out;
  }

  Kernel kernelFor(const compiler::CompiledGraph& cg) {
    auto it = kernels_.find(&cg);
    if (it != kernels_.end()) return it->second;
    Kernel k = kernelFromCompiled(g_, cg, co_);
    kernels_.emplace(&cg, k);
    return k;
  }
  void launch(const Kernel& k) {
    k.launch(std::span<const TensorView>(views_), std::span<const int64_t>(dimValues_),
             std::span<const ScalarArg>(scalars_));
  }

  Graph g_;
  compiler::CompileOptions co_;
  std::vector<rt::DeviceBuffer> buffers_;
  std::vector<TensorView> views_;
  std::vector<int64_t> dimValues_;
  std::vector<ScalarArg> scalars_;
  std::vector<std::string> outNames_, inputNames_;
  std::vector<double> floors_;  // per output: the absolute floor of its tolerance
  size_t firstOut_ = 0;
  double bytes_ = 0;
  bool fullReference_ = true;
  std::vector<EvalOutput> ref_;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> chunks_;
  std::vector<std::vector<HostTensor>> defaultChunks_;
  std::map<const compiler::CompiledGraph*, Kernel> kernels_;
  std::unique_ptr<Instance> small_;  // the small instance checked against the reference
};

// An entry without a resource report (or one saying 0 registers: seen on
// the H200 machine, where nvJitLink's log at times holds only its own
// summary, which the parser did not read before session 18; kept as a
// fallback for logs it cannot read)
// gets one from the driver: registers, local memory per thread (as stack:
// the driver does not tell spills from stack, so a spilling candidate is
// not pruned but timed, and loses) and static shared memory.
void fillMissingResources(compiler::CompiledGraph& cg) {
  for (compiler::CompiledKernel& k : cg.kernels) {
    bool missing = false;
    for (const compiler::KernelEntry& e : k.entries) {
      auto it = std::find_if(k.resources.begin(), k.resources.end(),
                             [&](const compiler::ResourceReport& r) { return r.kernel == e.name; });
      missing = missing || it == k.resources.end() || it->registers == 0;
    }
    if (!missing || k.cubin.empty()) continue;
    const auto* bytes = reinterpret_cast<const uint8_t*>(k.cubin.data());
    rt::Module m = rt::Module::load(std::span<const uint8_t>(bytes, k.cubin.size()), k.name);
    std::vector<compiler::ResourceReport> reports;
    for (const compiler::KernelEntry& e : k.entries) {
      rt::Function f = m.function(e.name);
      compiler::ResourceReport r;
      r.kernel = e.name;
      r.registers = f.numRegisters();
      r.stackBytes = f.localBytes();
      r.sharedBytes = f.staticSharedBytes();
      reports.push_back(r);
    }
    k.resources = std::move(reports);
  }
}

std::string fmtUs(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", us);
  return buf;
}

const char* modeName(CompileOptions::Tune t) {
  switch (t) {
    case CompileOptions::Tune::Off: return "off";
    case CompileOptions::Tune::UseDatabase: return "db";
    case CompileOptions::Tune::IfMissing: return "if-missing";
    case CompileOptions::Tune::Always: return "always";
  }
  return "?";
}

}  // namespace

std::vector<std::string> resolveTuning(const Graph& graph, const std::string& graphText, const CompileOptions& options,
                                       compiler::CompileOptions& co) {
  using Tune = CompileOptions::Tune;
  const Tune mode = options.tune;
  if (mode == Tune::Off) return {};
  const bool mayTune = mode == Tune::IfMissing || mode == Tune::Always;
  std::lock_guard<std::mutex> lock(dbMutex());
  tune::TuningDatabase& db = options.tuningDatabase ? *options.tuningDatabase : globalDatabase();
  if (mode == Tune::UseDatabase && !hasEntries(db)) return {};

  tune::DeviceKey device;
  if (options.tuningDevice) {
    device = *options.tuningDevice;
  } else if (rt::driverAvailable()) {
    device = currentDeviceKey();
  } else {
    if (mayTune) throw Error("tune: tuning needs a GPU: " + rt::driverUnavailableReason());
    return {};  // no device to look up configs for
  }
  if (mayTune) {
    if (!rt::driverAvailable()) throw Error("tune: tuning needs a GPU: " + rt::driverUnavailableReason());
    if (!(device == currentDeviceKey()))
      throw Error("tune: CompileOptions::tuningDevice is " + device.str() + " but tuning runs on this GPU, " +
                  currentDeviceKey().str());
  }

  // Memoized for the process-wide database only (a caller's database may
  // change between calls, or be another object at the same address).
  const bool useMemo = options.tuningDatabase == nullptr;
  std::string key = std::string(modeName(mode)) + "|" +
                    device.str() + "|" + co.chip + "|" + std::to_string(co.smCount) + "|" + co.configOverride + "|" +
                    co.rowConfigOverride + "|" + co.matmulConfigOverride + "|" + (co.matmulRowSoftmax ? "row-softmax|" : "") +
                    std::to_string(options.tuneIters) + "|";
  for (const auto& [name, v] : options.dims) key += name + "=" + std::to_string(v) + ",";
  key += "|" + graphText;
  if (auto it = memo().find(key); useMemo && it != memo().end()) {
    for (const auto& [i, c] : it->second.configs) co.kernelConfigs[i] = c;
    return it->second.notes;
  }

  std::vector<compiler::KernelTuningInfo> infos = compiler::describeKernels(graph, co);
  std::vector<std::string> notes(infos.size());
  std::map<int, std::string> chosen;
  std::unique_ptr<Instance> instance;  // made at the first kernel to tune
  DimBindings dims;
  for (const std::string& d : graph.dynamicDims()) {
    auto it = options.dims.find(d);
    if (it != options.dims.end()) dims[d] = it->second;
    else if (mayTune)
      throw Error("tune: the graph's dynamic dim '" + d +
                  "' has no value: tuning benchmarks at the sizes in CompileOptions::dims");
  }

  for (const compiler::KernelTuningInfo& info : infos) {
    std::vector<std::pair<std::string, int64_t>> bucketDims;
    std::string missingDim;
    for (const std::string& d : info.dims) {
      auto it = dims.find(d);
      if (it == dims.end()) missingDim = d;
      else bucketDims.push_back({d, it->second});
    }
    std::string& note = notes[static_cast<size_t>(info.index)];
    if (!missingDim.empty()) {
      note = "not looked up: dim " + missingDim + " has no value in CompileOptions::dims";
      continue;
    }
    const std::string bucket = tune::shapeBucket(bucketDims);
    const std::string signature = rt::hashHex(info.signatureText);
    if (mode != Tune::Always) {
      if (auto e = db.lookup(signature, info.schedule, info.scheduleVersion, device, bucket)) {
        chosen[info.index] = co.kernelConfigs[info.index] = e->config.dump();
        ++counters().hits;
        note = "from the tuning database (" + fmtUs(e->medianUs) + " us measured " + e->date + ")";
        continue;
      }
      ++counters().misses;
    }
    if (!mayTune) {
      note = "no tuning-database entry: the heuristic's config";
      continue;
    }

    // Tune this kernel now, with the configs chosen so far for the others.
    if (!instance) instance = std::make_unique<Instance>(graph, dims, co);
    tune::SearchHooks hooks;
    const compiler::CompileOptions base = co;
    hooks.compile = [&](const std::string& config) {
      compiler::CompileOptions c = base;
      // The heuristic's candidate (the space's first) as compile() builds
      // it: no per-kernel config, so its rebuilds after the resource report
      // apply (a given config is built exactly as asked).
      if (config == info.space.front()) c.kernelConfigs.erase(info.index);
      else c.kernelConfigs[info.index] = config;
      c.keepText = false;
      return countedCompile(graph, c);
    };
    hooks.complete = fillMissingResources;
    hooks.check = [&](const compiler::CompiledGraph& cg) { return instance->check(cg); };
    hooks.time = [&](const compiler::CompiledGraph& cg, int iters) { return instance->time(cg, iters); };
    hooks.progress = [&](const tune::Progress& p) {
      std::lock_guard<std::mutex> plock(progressMutex());
      if (progressFn()) progressFn()(TuningProgress{info.name, p.done, p.total});
    };
    tune::SearchOptions so;
    so.kernelName = info.name;
    so.finalIters = std::max(2, options.tuneIters);
    so.quickIters = std::max(3, options.tuneIters / 4);
    const rt::DeviceProperties& props = rt::Device::current().properties();
    if (props.regsPerSM > 0) so.limits.registersPerSm = props.regsPerSM;
    if (props.sharedPerBlockOptin > 0) so.limits.sharedBytesPerBlock = props.sharedPerBlockOptin;
    tune::SearchResult r = tune::search(info.space, info.index, hooks, so);
    if (const char* v = std::getenv("KILN_TUNE_VERBOSE"); v && *v && std::string(v) != "0") {
      // Every candidate: what happened to it and its times (a sweep for free).
      std::fprintf(stderr, "kiln: tune: %s (%s, %s): %zu candidates\n", info.name.c_str(), info.schedule.c_str(),
                   bucket.empty() ? "static shape" : bucket.c_str(), r.candidates.size());
      for (const tune::Candidate& c : r.candidates)
        std::fprintf(stderr, "  %-13s %3d regs  quick %9.2f us  final %9.2f us  %s%s%s%s\n", tune::statusName(c.status),
                     c.registers, c.quick.medianUs, c.final.medianUs, c.config.c_str(), c.config == r.best ? "  <- chosen" : "",
                     c.why.empty() ? "" : "  ", c.why.c_str());
    }
    ++counters().tuned;
    counters().benchmarked += static_cast<uint64_t>(r.benchmarked);

    // Stored and used in the database's form (compact JSON), so that a later
    // process that reads it back builds the very same cache key.
    chosen[info.index] = co.kernelConfigs[info.index] = nlohmann::json::parse(r.best).dump();
    tune::TuningEntry e;
    e.kernelSignature = signature;
    e.schedule = info.schedule;
    e.scheduleVersion = info.scheduleVersion;
    e.device = device;
    e.shapeBucket = bucket;
    e.config = nlohmann::json::parse(r.best);
    e.medianUs = r.bestTiming.medianUs;
    e.p95Us = r.bestTiming.p95Us;
    e.achieved = r.bestTiming.medianUs > 0 ? instance->bytes() / (r.bestTiming.medianUs * 1e-6) / 1e12 : 0;
    e.achievedUnit = "TB/s";
    e.kilnVersion = KILN_VERSION;
    e.date = tune::utcNowIso8601();
    db.record(e);
    db.save();
    memo().clear();
    note = "tuned now: " + fmtUs(r.bestTiming.medianUs) + " us (heuristic " + fmtUs(r.defaultTiming.medianUs) +
           " us), " + std::to_string(r.benchmarked) + " of " + std::to_string(r.candidates.size()) +
           " candidates timed in " + fmtUs(r.wallMs / 1000) + " s" + (r.bestIsDefault ? "; the heuristic's config kept" : "") +
           instance->checkedHow();
  }
  if (useMemo) memo()[key] = Resolved{chosen, notes};
  return notes;
}

}  // namespace detail

}  // namespace kiln
