// The compile pipeline, one short list of stages per kernel:
//   plan (kernels, planner.h) → heuristic config → emit MLIR text → parse →
//   lower to PTX (MLIR NVVM target, libdevice) → cubin (ptxas child process)
// KILN_DUMP=graph,mlir,ptx[,all] prints those stages of every kernel compiled
// by a running program to stderr.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include <malloc.h>

#include <mutex>
#include <nlohmann/json.hpp>

#include "kiln/compiler/compile.h"
#include "kiln/dsl/text.h"
#include "planner.h"
#include "pointwise.h"
#include "row_reduction.h"

namespace kiln::compiler {

namespace {

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

void applyOverride(PointwiseConfig& c, const std::string& text) {
  if (text.empty()) return;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw Error("kiln: compile: config override is not JSON: " + std::string(e.what()));
  }
  if (!j.is_object()) throw Error("kiln: compile: config override must be a JSON object, got " + text);
  for (const auto& [key, value] : j.items()) {
    if (!value.is_number_integer()) throw Error("kiln: compile: config override '" + key + "' must be an integer");
    int64_t v = value.get<int64_t>();
    if (key == "threads" && v >= 32 && v <= 1024 && v % 32 == 0) c.threads = static_cast<int>(v);
    else if (key == "vector" && (v == 1 || v == 2 || v == 4 || v == 8 || v == 16)) c.vector = static_cast<int>(v);
    else if (key == "unroll" && v >= 1 && v <= 16) c.unroll = static_cast<int>(v);
    else if (key == "max_blocks" && v >= 0) c.maxBlocks = v;
    else if (key == "index_bits" && (v == 32 || v == 64)) c.index32 = v == 32;
    else
      throw Error("kiln: compile: config override " + key + " = " + std::to_string(v) +
                  " is not valid for the pointwise schedule (threads: multiple of 32 in [32, 1024]; vector: "
                  "1, 2, 4, 8, 16; unroll: 1..16; max_blocks >= 0; index_bits: 32 or 64)");
  }
}

}  // namespace

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
  Plan plan = planGraph(graph);
  out.explain = plan.explain;
  out.workspace = plan.workspace;
  double planMs = msSince(tPlan) + printMs;
  const size_t numKernels = plan.kernels.size();

  for (size_t i = 0; i < numKernels; ++i) {
    const KernelPlan& kp = plan.kernels[i];
    auto tk = Clock::now();
    std::string name;
    std::string mlir;
    CompiledKernel k;
    if (kp.kind == KernelPlan::Kind::Pointwise) {
      name = "kiln_pointwise" + std::to_string(i);
      PointwiseGroup group;
      for (size_t o = 0; o < kp.graph.outputs().size(); ++o) group.outputs.push_back(static_cast<int>(o));
      group.shape = kp.graph.node(kp.graph.outputs()[0].node).shape;
      PointwiseConfig cfg = pointwiseHeuristic(kp.graph, group, options);
      applyOverride(cfg, options.configOverride);
      PointwiseKernel pk = emitPointwise(kp.graph, group, cfg, name, options.variants);
      k = std::move(pk.kernel);
      mlir = std::move(pk.mlir);
    } else {
      name = "kiln_row" + std::to_string(i);
      RowConfig cfg = rowHeuristic(kp.graph, options);
      applyRowOverride(cfg, options.rowConfigOverride);
      // A persistent row of 1024 threads (64 registers each) that spills is slower than the looped form: the
      // heuristic's estimate of registers is checked against ptxas's report
      // and the kernel rebuilt looped (tuning overrides are kept as given).
      if (cfg.persistent && cfg.threadsPerRow >= 1024 && options.rowConfigOverride.empty()) {
        RowKernel probe = emitRowReduction(kp.graph, cfg, name, options.variants);
        GpuModule pm = GpuModule::parse(probe.mlir);
        PtxOptions ppo;
        ppo.chip = options.chip;
        ppo.cudaHome = options.cudaHome;
        PtxResult pp = lowerToPtx(pm, ppo);
        CubinOptions pco;
        pco.route = CubinRoute::Default;
        if (!options.chip.empty() && std::isdigit(static_cast<unsigned char>(options.chip.back())) &&
            nvJitLinkAvailable(options.cudaHome))
          pco.route = CubinRoute::NvJitLink;
        pco.cudaHome = options.cudaHome;
        CubinResult pc = ptxToCubin(pp.ptx, options.chip, pco);
        bool spills = false;
        for (const KernelEntry& e : probe.kernel.entries)
          if (const ResourceReport* r = pc.kernel(e.name)) spills = spills || r->spillStoreBytes > 0;
        if (spills) {
          cfg.persistent = false;
          cfg.threadsPerRow = cfg.threads = 512;
        }
      }
      RowKernel rk = emitRowReduction(kp.graph, cfg, name, options.variants);
      k = std::move(rk.kernel);
      mlir = std::move(rk.mlir);
    }
    for (KernelTensor& t : k.tensors) t.workspace = kp.workspaceNames.count(t.name) > 0;
    k.why = kp.why;
    k.stages.push_back({"plan", planMs / numKernels});
    k.stages.push_back({"emit", msSince(tk)});
    dump("mlir", name, mlir);

    auto tp = Clock::now();
    GpuModule module = GpuModule::parse(mlir);
    k.stages.push_back({"mlir-parse", msSince(tp)});
    PtxOptions po;
    po.chip = options.chip;
    po.cudaHome = options.cudaHome;
    PtxResult ptx = lowerToPtx(module, po);
    for (const StageTime& s : ptx.stages) k.stages.push_back(s);
    dump("ptx", name, ptx.ptx);

    CubinOptions co;
    co.route = options.route;
    if (co.route == CubinRoute::Default && !options.chip.empty() && std::isdigit(static_cast<unsigned char>(options.chip.back())) &&
        nvJitLinkAvailable(options.cudaHome))
      co.route = CubinRoute::NvJitLink;
    co.cudaHome = options.cudaHome;
    CubinResult cubin = ptxToCubin(ptx.ptx, options.chip, co);
    for (const StageTime& s : cubin.stages) k.stages.push_back(s);
    k.cubin = std::move(cubin.cubin);
    for (const KernelEntry& e : k.entries)
      if (const ResourceReport* r = cubin.kernel(e.name)) k.resources.push_back(*r);
    if (options.keepText) {
      k.mlir = std::move(mlir);
      k.ptx = std::move(ptx.ptx);
    }
    k.compileMs = msSince(tk) + planMs / numKernels;
    out.kernels.push_back(std::move(k));
  }
  return out;
}

}  // namespace kiln::compiler
