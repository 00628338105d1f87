// The compile pipeline, one short list of stages per kernel:
//   plan (kernels, planner.h) → heuristic config → emit MLIR text → parse →
//   lower to PTX (MLIR NVVM target, libdevice) → cubin (ptxas child process)
// KILN_DUMP=graph,mlir,cuda,ptx[,all] prints those stages of every kernel compiled
// by a running program to stderr.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>
#include <vector>

#include <malloc.h>

#include <mutex>

#include "kiln/compiler/compile.h"
#include "kiln/dsl/text.h"
#include "kiln/compiler/nvrtc.h"
#include "matmul.h"
#include "matmul_sm90.h"
#include "kernel_text.h"
#include "frames.h"
#include "planner.h"
#include "pointwise.h"
#include "row_reduction.h"

namespace kiln::compiler {

namespace {

// What a streaming row loop keeps in flight per SM, and the most bytes of
// rows it may have in flight on the whole GPU (see the rebuild chain).
constexpr int64_t kLoopBytesInFlight = 64 * 1024;
constexpr int64_t kRowsInFlight = 24 << 20;

int blocksForRegisters(int registers, int threads) {
  const int perThread = (std::max(registers, 1) + 7) / 8 * 8;
  const int warps = (threads + 31) / 32;
  return std::min(kRegistersPerSm / (perThread * 32 * warps), kMaxThreadsPerSm / threads);
}

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

bool dumpEnabled(const std::string& stage) {
  const char* env = std::getenv("KILN_DUMP");
  if (!env || !*env) return false;
  std::string s = std::string(",") + env + ",";
  return s.find("," + stage + ",") != std::string::npos || s.find(",all,") != std::string::npos;
}

void dump(const std::string& stage, const std::string& kernel, const std::string& text) {
  if (!dumpEnabled(stage)) return;
  std::fprintf(stderr, "// ----- KILN_DUMP %s: %s -----\n%s\n", stage.c_str(), kernel.c_str(), text.c_str());
}

// PTX → cubin into `k` by `route`: the stage times, the cubin and the
// resource report of each entry. Shared by every schedule.
void assembleCubin(const std::string& ptx, CubinRoute route, const CompileOptions& options, CompiledKernel& k) {
  CubinOptions co;
  co.route = route;
  co.cudaHome = options.cudaHome;
  CubinResult cubin = ptxToCubin(ptx, options.chip, co);
  dump("cubin-log", k.name, cubin.log);  // ptxas's or nvJitLink's info log (the resource report's source)
  for (const StageTime& s : cubin.stages) k.stages.push_back(s);
  k.cubin = std::move(cubin.cubin);
  for (const KernelEntry& e : k.entries)
    if (const ResourceReport* r = cubin.kernel(e.name)) k.resources.push_back(*r);
}

// `ptx` with `.minnctapersm blocks` after the `.maxntid` directive of each
// vectorized entry of `entries` (where the NVPTX backend writes it for
// nvvm.minctasm).
std::string withMinBlocks(const std::string& ptx, const std::vector<KernelEntry>& entries, int blocks) {
  std::string out = ptx;
  for (const KernelEntry& e : entries) {
    if (!e.vectorized) continue;
    const size_t entry = out.find(".entry " + e.name + "(");
    const size_t maxntid = entry == std::string::npos ? entry : out.find("\n.maxntid ", entry);
    const size_t eol = maxntid == std::string::npos ? maxntid : out.find('\n', maxntid + 1);
    if (eol == std::string::npos)
      throw Error("kiln: internal: no .maxntid directive for entry " + e.name + " in its PTX");
    out.insert(eol, "\n.minnctapersm " + std::to_string(blocks));
  }
  return out;
}

// How PTX becomes a cubin under `options`: nvJitLink in process for plain
// targets where it is available, else as the options say.
CubinRoute cubinRouteOf(const CompileOptions& options) {
  CubinRoute route = options.route;
  if (route == CubinRoute::Default && !options.chip.empty() &&
      std::isdigit(static_cast<unsigned char>(options.chip.back())) && nvJitLinkAvailable(options.cudaHome))
    route = CubinRoute::NvJitLink;
  return route;
}

// MLIR text → PTX → cubin into `k`: stage times, the cubin, the resource
// report of each entry, and the text when the options keep it; the PTX
// into `ptxOut` too when given.
void lowerKernel(const std::string& name, std::string mlir, const CompileOptions& options, CompiledKernel& k,
                 const std::string& ptxFeatures = "", std::string* ptxOut = nullptr) {
  dump("mlir", name, mlir);
  auto tp = Clock::now();
  GpuModule module = GpuModule::parse(mlir);
  k.stages.push_back({"mlir-parse", msSince(tp)});
  PtxOptions po;
  po.chip = options.chip;
  po.cudaHome = options.cudaHome;
  po.features = ptxFeatures;
  PtxResult ptx = lowerToPtx(module, po);
  for (const StageTime& s : ptx.stages) k.stages.push_back(s);
  dump("ptx", name, ptx.ptx);

  assembleCubin(ptx.ptx, cubinRouteOf(options), options, k);
  if (ptxOut) *ptxOut = ptx.ptx;
  if (options.keepText) {
    k.mlir = std::move(mlir);
    k.ptx = std::move(ptx.ptx);
  }
}

std::string kernelName(const KernelPlan& kp, size_t i) {
  const char* base = kp.kind == KernelPlan::Kind::Pointwise ? "kiln_pointwise"
                     : kp.kind == KernelPlan::Kind::Matmul  ? "kiln_matmul"
                                                            : "kiln_row";
  return base + std::to_string(i);
}

PointwiseGroup pointwiseGroupOf(const KernelPlan& kp) {
  PointwiseGroup group;
  for (size_t o = 0; o < kp.graph.outputs().size(); ++o) group.outputs.push_back(static_cast<int>(o));
  group.shape = kp.graph.node(kp.graph.outputs()[0].node).shape;
  return group;
}

// The heuristic's config, then the schedule-wide override, then the
// kernel's own (tuning). `i` < 0: the heuristic and the schedule-wide
// override only.
void applyKernelConfig(const CompileOptions& options, long i, const std::function<void(const std::string&)>& apply) {
  if (i < 0) return;
  auto it = options.kernelConfigs.find(static_cast<int>(i));
  if (it != options.kernelConfigs.end()) apply(it->second);
}

PointwiseConfig pointwiseConfigOf(const KernelPlan& kp, const PointwiseGroup& group, const CompileOptions& options,
                                  long i) {
  PointwiseConfig cfg = pointwiseHeuristic(kp.graph, group, options);
  applyPointwiseOverride(cfg, options.configOverride);
  applyKernelConfig(options, i, [&](const std::string& j) { applyPointwiseOverride(cfg, j); });
  return cfg;
}

// A row config that names all five core keys (as RowConfig::json() writes
// them: the tuner's candidates, the tuning database's entries, a config
// copied from `kiln compile --json`) is a whole config: the keys it leaves
// out (cluster, lanes, min_blocks...) are their defaults, not the
// heuristic's. A partial one merges onto the heuristic. The rule holds for
// the schedule-wide override (--row-config, KILN_ROW_CONFIG) and for a
// kernel's own config alike.
bool wholeRowConfig(const std::string& j) {
  for (const char* key : {"\"threads_per_row\"", "\"threads\"", "\"vector\"", "\"persistent\"", "\"unroll\""})
    if (j.find(key) == std::string::npos) return false;
  return true;
}

RowConfig rowConfigOf(const KernelPlan& kp, const CompileOptions& options, long i,
                      std::vector<LaunchGeometry::DimRange>* preferred = nullptr) {
  RowConfig cfg = rowHeuristic(kp.graph, options, kp.tail != nullptr, preferred);
  auto apply = [&](const std::string& j) {
    if (wholeRowConfig(j)) cfg = RowConfig{};
    applyRowOverride(cfg, j);
  };
  apply(options.rowConfigOverride);
  applyKernelConfig(options, i, apply);
  return cfg;
}

PlanOptions planOptionsOf(const CompileOptions& options) {
  PlanOptions po;
  po.matmulRowSoftmax = options.matmulRowSoftmax && smNumber(options.chip) == 90;
  return po;
}

// Hopper (sm_90) takes the TMA + wgmma kernel where its layout rules hold;
// everything else the portable mma.sync / FMA kernel.
bool useSm90Matmul(const KernelPlan& kp, const CompileOptions& options) {
  return smNumber(options.chip) == 90 && sm90MatmulApplies(kp.graph);
}

Sm90MatmulConfig sm90ConfigOf(const KernelPlan& kp, const CompileOptions& options, long i) {
  Sm90MatmulConfig cfg = sm90MatmulHeuristic(kp.graph, options.smCount);
  if (!options.matmulConfigOverride.empty()) applySm90MatmulOverride(cfg, options.matmulConfigOverride);
  applyKernelConfig(options, i, [&](const std::string& j) { applySm90MatmulOverride(cfg, j); });
  return cfg;
}

// The matmul kernel: generated CUDA C++ → PTX (NVRTC) → cubin (the ptxas
// executable, a child process: a crash there cannot take the caller down).
CompiledKernel buildMatmul(const KernelPlan& kp, const std::string& name, const CompileOptions& options, size_t i) {
  auto t0 = Clock::now();
  const int sm = smNumber(options.chip);
  MatmulKernel mk;
  std::string arch;
  CompileOptions cubinOptions = options;
  if (useSm90Matmul(kp, options)) {
    mk = emitSm90Matmul(kp.graph, sm90ConfigOf(kp, options, static_cast<long>(i)), name, options.smCount);
    arch = "compute_90a";
    cubinOptions.chip = "sm_90a";
  } else {
    MatmulConfig cfg = matmulHeuristic(kp.graph);
    applyKernelConfig(options, static_cast<long>(i), [&](const std::string& j) { applyMatmulOverride(cfg, j); });
    const DType mt = matmulShape(kp.graph).mm->dtype;
    if ((mt == DType::BF16 || mt == DType::F16) && sm < 80)
      throw Error("kiln: compile: matmul of " + std::string(dtypeName(mt)) +
                  " needs tensor cores with mma.sync (sm_80 or later); the target is " + options.chip);
    mk = emitMatmul(kp.graph, cfg, name);
    arch = "compute_" + std::to_string(sm);
  }
  CompiledKernel k = std::move(mk.kernel);
  k.stages.push_back({"emit", msSince(t0)});
  dump("cuda", name, mk.source);
  CudaCompileOptions no;
  no.arch = arch;
  no.cudaHome = options.cudaHome;
  no.name = name + ".cu";
  CudaToPtxResult ptx = cudaToPtx(mk.source, no);
  k.stages.push_back({"nvrtc", ptx.ms});
  dump("ptx", name, ptx.ptx);
  assembleCubin(ptx.ptx, options.route == CubinRoute::NvJitLink ? CubinRoute::NvJitLink : CubinRoute::Ptxas,
                cubinOptions, k);
  if (options.keepText) {
    k.source = std::move(mk.source);
    k.ptx = std::move(ptx.ptx);
  }
  k.compileMs = msSince(t0);
  return k;
}

}  // namespace

std::vector<KernelTuningInfo> describeKernels(const Graph& graph, const CompileOptions& options) {
  Plan plan = planGraph(graph, planOptionsOf(options));
  std::vector<KernelTuningInfo> out;
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const KernelPlan& kp = plan.kernels[i];
    KernelTuningInfo info;
    info.index = static_cast<int>(i);
    info.name = kernelName(kp, i);
    for (const std::string& d : kp.graph.dynamicDims()) info.dims.push_back(d);
    if (kp.kind == KernelPlan::Kind::Matmul) {
      info.schedule = "matmul";
      info.scheduleVersion = kMatmulScheduleVersion;
      if (useSm90Matmul(kp, options)) {
        // The Hopper kernel's space, the heuristic's config first.
        Sm90MatmulConfig h = sm90ConfigOf(kp, options, -1);
        info.space.push_back(h.json());
        for (const Sm90MatmulConfig& c : sm90RowForm(kp.graph) ? sm90RowMatmulSpace() : sm90MatmulSpace())
          if (c.json() != h.json()) info.space.push_back(c.json());
        info.defaultConfig = sm90ConfigOf(kp, options, static_cast<long>(i)).json();
      } else {
        // The portable kernel has one config.
        info.defaultConfig = matmulHeuristic(kp.graph).json();
        info.space = {info.defaultConfig};
      }
    } else if (kp.kind == KernelPlan::Kind::Pointwise) {
      info.schedule = "pointwise";
      info.scheduleVersion = kPointwiseScheduleVersion;
      PointwiseGroup group = pointwiseGroupOf(kp);
      // The space is centred on the heuristic (with schedule-wide overrides),
      // not on a kernel config already given.
      PointwiseConfig h = pointwiseConfigOf(kp, group, options, -1);
      info.space = pointwiseSpace(group, h, options, pointwiseWidestVector(kp.graph, group));
      info.defaultConfig = pointwiseConfigOf(kp, group, options, static_cast<long>(i)).json();
    } else {
      info.schedule = "row_reduction";
      info.scheduleVersion = kRowReductionScheduleVersion;
      RowConfig h = rowConfigOf(kp, options, -1);
      info.space = rowSpace(kp.graph, h, smNumber(options.chip));
      info.defaultConfig = rowConfigOf(kp, options, static_cast<long>(i)).json();
    }
    info.signatureText = info.schedule + "\n" + printGraph(kp.graph);
    out.push_back(std::move(info));
  }
  return out;
}

bool tuneAllocatorForCompilation() {
#if defined(__GLIBC__)
  bool ok = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;
  ok = mallopt(M_TRIM_THRESHOLD, 256 << 20) == 1 && ok;
  return ok;
#else
  return false;
#endif
}

CompiledGraph compileGraph(const Graph& graph, const CompileOptions& options) {
  static std::once_flag envTuning;
  std::call_once(envTuning, [] {
    const char* env = std::getenv("KILN_TUNE_MALLOC");
    if (env && std::string(env) == "1") tuneAllocatorForCompilation();
  });
  CompiledGraph out;
  auto t0 = Clock::now();
  out.graphText = printGraph(graph);
  double printMs = msSince(t0);
  dump("graph", "graph", out.graphText);
  auto tPlan = Clock::now();
  Plan plan = planGraph(graph, planOptionsOf(options));
  out.explain = plan.explain;
  out.workspace = plan.workspace;
  double planMs = msSince(tPlan) + printMs;
  const size_t numKernels = plan.kernels.size();
  for (const auto& [index, config] : options.kernelConfigs)
    if (index < 0 || static_cast<size_t>(index) >= numKernels)
      throw Error("compile: CompileOptions::kernelConfigs names kernel " + std::to_string(index) + " but the graph has " +
                  std::to_string(numKernels) + " kernel(s)");

  for (size_t i = 0; i < numKernels; ++i) {
    const KernelPlan& kp = plan.kernels[i];
    auto tk = Clock::now();
    // Emits one kernel, then lowers it: MLIR text → PTX → cubin.
    // What the plan says of an emitted kernel. Workspace: the plan's
    // intermediates, and tensors the schedule keeps for itself (a split
    // row's block states; listed below).
    auto fromPlan = [&](CompiledKernel& k) {
      for (KernelTensor& t : k.tensors) t.workspace = t.workspace || kp.workspaceNames.count(t.name) > 0;
      k.why = kp.why;
    };
    auto build = [&](const std::string& name, std::string mlir, CompiledKernel k, const std::string& features = "",
                     std::string* ptxOut = nullptr) {
      fromPlan(k);
      k.stages.push_back({"plan", planMs / numKernels});
      k.stages.push_back({"emit", msSince(tk)});
      lowerKernel(name, std::move(mlir), options, k, features, ptxOut);
      return k;
    };
    const std::string name = kernelName(kp, i);
    auto perKernel = options.kernelConfigs.find(static_cast<int>(i));
    const bool given = perKernel != options.kernelConfigs.end();
    CompiledKernel k;
    if (kp.kind == KernelPlan::Kind::Matmul) {
      k = buildMatmul(kp, name, options, i);
      fromPlan(k);  // (its workspace: operands and values between stages)
      k.stages.insert(k.stages.begin(), StageTime{"plan", planMs / numKernels});
    } else if (kp.kind == KernelPlan::Kind::Pointwise) {
      PointwiseGroup group = pointwiseGroupOf(kp);
      PointwiseConfig cfg = pointwiseConfigOf(kp, group, options, i);
      PointwiseKernel pk = emitPointwise(kp.graph, group, cfg, name, options.variants);
      k = build(name, std::move(pk.mlir), std::move(pk.kernel));
    } else {
      const int sm = smNumber(options.chip);
      std::string rowPtx;  // the last build's PTX
      auto buildRow = [&](const RowConfig& c) {
        RowKernel rk = emitRowReduction(kp.graph, c, name, options.variants, sm, kp.tail.get(), kp.tailCounter);
        return build(name, std::move(rk.mlir), std::move(rk.kernel), rk.ptxFeatures, &rowPtx);
      };
      // The last build (of a looped row) again with `min_blocks` for its
      // vectorized entries: a looped row's min_blocks changes nothing before
      // the PTX but each such entry's `.minnctapersm` directive (a CPU test
      // checks the PTX and the cubin against the full lowering), so the
      // emitter runs again for the kernel's metadata and text and ptxas
      // alone for the cubin, without the MLIR and LLVM stages. Its stages:
      // the last build's, then "occupancy-" ones.
      auto rebuildWithMinBlocks = [&](const RowConfig& c, const CompiledKernel& last) {
        auto te = Clock::now();
        RowKernel rk = emitRowReduction(kp.graph, c, name, options.variants, sm, kp.tail.get(), kp.tailCounter);
        CompiledKernel r = std::move(rk.kernel);
        fromPlan(r);
        r.stages = last.stages;
        r.stages.push_back({"occupancy-emit", msSince(te)});
        std::string ptx = withMinBlocks(rowPtx, r.entries, std::min(c.minBlocks, kMaxThreadsPerSm / c.threads));
        dump("ptx", name, ptx);
        const size_t first = r.stages.size();
        assembleCubin(ptx, cubinRouteOf(options), options, r);
        for (size_t st = first; st < r.stages.size(); ++st) r.stages[st].name = "occupancy-" + r.stages[st].name;
        if (options.keepText) {
          r.mlir = std::move(rk.mlir);
          r.ptx = std::move(ptx);
        }
        return r;
      };
      // Whether the kernel's fast entry spills: the vectorized entries when
      // it has any (the scalar entry serves unaligned pointers only), so
      // that a build of all entries and one of the vectorized entries alone
      // choose the same form. (The facade's later build of the scalar
      // entry is given the chosen config: see loadScalarEntries.)
      auto judged = [](const CompiledKernel& ck, const ResourceReport& r) {
        const bool anyVectorized =
            std::any_of(ck.entries.begin(), ck.entries.end(), [](const KernelEntry& e) { return e.vectorized; });
        auto e = std::find_if(ck.entries.begin(), ck.entries.end(), [&](const KernelEntry& x) { return x.name == r.kernel; });
        return !anyVectorized || (e != ck.entries.end() && e->vectorized);
      };
      auto spills = [&](const CompiledKernel& ck) {
        return std::any_of(ck.resources.begin(), ck.resources.end(),
                           [&](const ResourceReport& r) { return judged(ck, r) && r.spillStoreBytes > 0; });
      };
      // The blocks of `threads` an SM holds at the judged entries' registers.
      auto blocksPerSm = [&](const CompiledKernel& ck, int threads) {
        int blocks = kMaxThreadsPerSm / threads;
        for (const ResourceReport& r : ck.resources)
          if (judged(ck, r)) blocks = std::min(blocks, blocksForRegisters(r.registers, threads));
        return blocks;
      };
      std::vector<LaunchGeometry::DimRange> preferred;
      RowConfig cfg = rowConfigOf(kp, options, i, &preferred);
      k = buildRow(cfg);
      // The heuristic's register estimates are checked against ptxas's
      // report; a kernel that spills is rebuilt in the next form down
      // (configs given by overrides or tuning are kept as given):
      //  - a cluster of 16 blocks at two per SM: 16 blocks of half the
      //    threads, one per SM, each prefetching its part of the next row
      //    by a bulk copy beside its resident weights; where that spills or
      //    cannot prefetch, 8 blocks, one per SM;
      //  - a looped cluster (a dynamic row length) at two blocks per SM:
      //    half the unroll (heavy 16-bit rows: layernorm), then without
      //    min_blocks;
      //  - a cluster whose row loop spills (its loop state costs a few
      //    registers at the 128-register cap of 512 threads): without the
      //    weights in shared memory (config resident), then one cluster
      //    per row;
      //  - a persistent row of 1024 threads (64 registers each): the looped
      //    form, faster than a spilling held row;
      //  - any other held row (one block a row): without l2_prefetch (its
      //    address), then without min_blocks (the full register budget),
      //    then looped;
      //  - a split row (several accumulators under min_blocks 3's cap of
      //    42 registers): without min_blocks;
      //  - a looped row whose unrolled steps spill (heavy math per value,
      //    libdevice's sin say): half the unroll, down to 1.
      // A kernel with column partials (the planner's fuseColumnPartials)
      // holds its rows in a form of its own (the emitter sets it), which
      // these rebuilds for other forms must leave alone.
      const bool heuristic = options.rowConfigOverride.empty() && !given && !hasColumnPartials(kp.graph);
      if (heuristic && cfg.persistent && cfg.cluster == 16 && cfg.minBlocks == 2 && spills(k)) {
        // Measured on the H200 (2026-12-02, layernorm f32 1024x262144, the
        // only such row among the benchmarks, TB/s): 3.82 in session 29
        // call 6 (the tuner's pick) and 3.79 in call 7 against 3.67-3.71 in 8
        // blocks; the spilling 16 at two per SM 3.30 (session 19).
        // Only rows with weights along them (inputs of the row's length,
        // which 8 blocks cannot all keep in shared memory); the others
        // (log_softmax) keep the 8 blocks, not measured in this form.
        bool weights = false;
        for (int a : kp.graph.params())
          for (int b : kp.graph.params()) {
            const Shape& sa = kp.graph.node(a).shape;
            const Shape& sb = kp.graph.node(b).shape;
            weights = weights || (kp.graph.node(a).op == Op::Input && kp.graph.node(b).op == Op::Input && sa.size() == 1 &&
                                  sb.size() >= 2 && sa[0] == sb.back());
          }
        RowConfig p = cfg;
        p.minBlocks = 0;
        p.threadsPerRow = p.threads = cfg.threadsPerRow / 2;
        p.prefetch = 1;
        CompiledKernel pk;
        if (weights) pk = buildRow(p);
        if (weights && !spills(pk) && pk.config.find("\"prefetch\": 1") != std::string::npos) {
          cfg = p;
          k = std::move(pk);
        } else {
          cfg.cluster = 8;
          cfg.minBlocks = 0;
          k = buildRow(cfg);
        }
      }
      if (heuristic && !cfg.persistent && cfg.cluster > 1 && cfg.minBlocks > 0 && cfg.unroll >= 4 && spills(k)) {
        cfg.unroll /= 2;
        k = buildRow(cfg);
      }
      if (heuristic && !cfg.persistent && cfg.cluster > 1 && cfg.minBlocks > 0 && spills(k)) {
        cfg.minBlocks = 0;
        k = buildRow(cfg);
      }
      if (heuristic && cfg.cluster > 1 && cfg.rowLoop && cfg.resident && spills(k)) {
        cfg.resident = false;
        k = buildRow(cfg);
      }
      if (heuristic && cfg.cluster > 1 && cfg.rowLoop && spills(k)) {
        cfg.rowLoop = false;
        k = buildRow(cfg);
      }
      if (heuristic && cfg.persistent && cfg.threadsPerRow >= 1024 && spills(k)) {
        cfg.persistent = false;
        cfg.threadsPerRow = cfg.threads = 512;
        k = buildRow(cfg);
      }
      if (heuristic && cfg.persistent && cfg.l2Prefetch > 0 && spills(k)) {
        cfg.l2Prefetch = 0;
        k = buildRow(cfg);
      }
      if (heuristic && cfg.persistent && cfg.cluster == 1 && cfg.minBlocks > 1 && spills(k)) {
        cfg.minBlocks = 0;
        k = buildRow(cfg);
      }
      if (heuristic && cfg.persistent && cfg.cluster == 1 && spills(k)) {
        cfg.persistent = false;
        k = buildRow(cfg);
      }
      if (heuristic && cfg.split > 1 && cfg.minBlocks > 0 && spills(k)) {
        cfg.minBlocks = 0;
        k = buildRow(cfg);
      }
      while (heuristic && !cfg.persistent && cfg.unroll > 1 && spills(k)) {
        cfg.unroll /= 2;
        k = buildRow(cfg);
      }
      // A looped row (one block a row) streams: each step's loads are all
      // that a block has in flight, and at the end of each row its loads
      // stop (the tree, the barriers). Held by its registers to at most 3
      // blocks per SM with under kLoopBytesInFlight of loads in flight (a
      // 16-byte vector per thread per unrolled step), it is rebuilt with
      // min_blocks asking for the blocks that reach that (ptxas caps the
      // registers), or, if that spills, one block more than it had; kept
      // only without spills, and only where the rows then in flight stay
      // within kRowsInFlight (a later pass reads its row from L2; rows of
      // a dynamic length: the largest of the config's range). Measured on
      // the H200 (2026-12-02, session 26 call 3, TB/s, before -> after):
      // static bf16 rows of 8192 (16384 rows) layernorm 3.69 -> 4.11 (68
      // registers at 256 threads: 3 blocks -> 4), rmsnorm 3.84 -> 4.16 (512
      // threads, 3 -> 4), of 16384 layernorm 3.79 -> 3.90; dynamic
      // (8192 x 16384) layernorm f32 3.38 -> 4.12 (512 threads, 1 -> 2),
      // bf16 3.09 -> 3.64 (256 threads, 2 -> 3), rmsnorm f32 3.87 -> 4.21;
      // rmsnorm f32 of 8192 (256 threads, 3 -> 4) 4.20 -> 4.11. Rows of
      // 128 KB and more lost 4-9% with twice the rows in flight (34 MB);
      // layernorm bf16 of 4096 (128 threads, 7 -> 8) lost 0.6%.
      if (heuristic && !cfg.persistent && cfg.cluster == 1 && cfg.split == 1 && !cfg.stage && cfg.minBlocks == 0 &&
          cfg.vector > 1 && !spills(k)) {
        const int64_t perBlock = int64_t{16} * cfg.threads * cfg.unroll;
        const int64_t rowBytes = rowBytesAtMost(kp.graph, preferred);
        const int have = blocksPerSm(k, cfg.threads);
        // The blocks per SM whose loads of `bytes` each reach
        // kLoopBytesInFlight, fewer (down to `least`) where their rows
        // would pass kRowsInFlight.
        auto blocksFor = [&](int64_t bytes, int least) {
          int b = static_cast<int>(
              std::min<int64_t>((kLoopBytesInFlight + bytes - 1) / bytes, kMaxThreadsPerSm / cfg.threads));
          while (b > least && int64_t{b} * options.smCount * rowBytes > kRowsInFlight) --b;
          return b;
        };
        const int need = blocksFor(perBlock, have);
        std::vector<int> tries;
        if (have <= 3 && rowBytes > 0 && need > have) {
          tries.push_back(need);
          if (need > have + 1) tries.push_back(have + 1);
        }
        bool rebuiltOk = false;
        for (int blocks : tries) {
          RowConfig c = cfg;
          c.minBlocks = blocks;
          CompiledKernel rebuilt = rebuildWithMinBlocks(c, k);
          if (spills(rebuilt)) continue;
          cfg = c;
          k = std::move(rebuilt);
          k.why += "; min_blocks " + std::to_string(blocks) + ": ptxas's registers left " + std::to_string(have) +
                   " block(s) per SM, " + std::to_string(have * perBlock / 1024) + " KB of loads in flight";
          rebuiltOk = true;
          break;
        }
        // One block per SM whose second block spills (heavy 16-bit rows at
        // 512 threads: layernorm's 107 registers): half the vectors per
        // step, at the blocks that then reach kLoopBytesInFlight within
        // kRowsInFlight, as the same loads in flight split over two blocks
        // (one's passes and trees overlap the other's loads). Measured on
        // the H200 (2026-12-03, session 31 call 2, dynamic N, TB/s, before
        // -> unroll 2 and min_blocks 2 as a config): layernorm bf16 4096 x
        // 32768 2.46 -> 3.71; softmax bf16 3.74 -> 3.71 (it has 2 blocks
        // per SM already: not rebuilt).
        if (!rebuiltOk && have == 1 && !tries.empty() && cfg.unroll >= 2) {
          RowConfig c = cfg;
          c.unroll /= 2;
          const int blocks = blocksFor(perBlock / 2, 2);
          c.minBlocks = blocks;
          CompiledKernel rebuilt = buildRow(c);
          if (!spills(rebuilt) && blocksPerSm(rebuilt, c.threads) >= 2) {
            cfg = c;
            k = std::move(rebuilt);
            k.why += "; unroll " + std::to_string(c.unroll) + ", min_blocks " + std::to_string(blocks) +
                     ": ptxas's registers left 1 block per SM, and " + std::to_string(tries.front()) +
                     " at unroll " + std::to_string(c.unroll * 2) + " spilled";
          }
        }
      }
      // The heuristic's config was chosen for a range of a dynamic row
      // length; a given one stands for every value.
      if (heuristic) k.launch.preferred = std::move(preferred);
    }
    k.compileMs = msSince(tk) + planMs / numKernels;
    // The workspace a schedule keeps for itself, listed for the launcher.
    for (const KernelTensor& t : k.tensors)
      if (t.workspace && !kp.workspaceNames.count(t.name)) {
        out.workspace.push_back(t);
        out.workspace.back().output = false;
        k.why += k.config.find("\"threads_per_row\": 1,") != std::string::npos
                     ? "; the rows of each tile split across blocks, whose states the tile's last block to finish "
                       "merges (workspace " + t.name + ")"
                     : "; each row split across blocks, whose states the row's last block to finish merges (workspace " +
                           t.name + ")";
      }
    out.kernels.push_back(std::move(k));
  }
  return out;
}

}  // namespace kiln::compiler
