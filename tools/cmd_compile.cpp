// `kiln compile`: every stage of the pipeline, visible.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "kiln/compiler/compile.h"
#include "kiln/dsl/text.h"
#include "kiln/kernel.h"

namespace kiln::cli {

const char* kCompileHelp =
    "usage: kiln compile FILE [--dim NAME=VALUE]... [--emit=graph|mlir|cuda|ptx|cubin] [-o OUT]\n"
    "       kiln compile FILE [--dim NAME=VALUE]... --json\n"
    "\n"
    "Compiles a graph file (.kiln) to GPU kernels and prints one stage:\n"
    "  --emit=graph   the canonical graph the compiler sees (after --dim)\n"
    "  --emit=mlir    the MLIR each kernel is emitted as\n"
    "  --emit=cuda    the CUDA C++ of each matmul kernel (what NVRTC compiles)\n"
    "  --emit=ptx     the PTX (MLIR's NVVM target, libdevice linked)\n"
    "  --emit=cubin   the cubin (binary: use -o)\n"
    "  --json         one JSON object: \"kernels\" (in launch order; per kernel\n"
    "                 name, schedule, config, why, tensors, entries, registers,\n"
    "                 spills (bytes), stack (bytes), compile_ms (graph ->\n"
    "                 cubin), stages_ms and cache (hit, miss, rebuilt or off)),\n"
    "                 \"workspace\" (the intermediates\n"
    "                 between kernels: name, dtype, shape with dynamic dims as\n"
    "                 names) and \"explain\" (the planner's account of the split)\n"
    "\n"
    "  --dim NAME=VALUE  specialize a dynamic dim to a static size; dims left\n"
    "                    unbound stay kernel parameters\n"
    "  --hint NAME=VALUE a value a dynamic dim is expected to take: the\n"
    "                    heuristics' configs for it (a long dynamic row length\n"
    "                    gets the long-row config; at launch, the facade builds\n"
    "                    such a variant for values outside a kernel's range)\n"
    "  --chip sm_XY      target SM (default sm_90)\n"
    "  --matmul-row-softmax  a softmax over a Hopper matmul's rows (short K) in\n"
    "                    the matmul's kernel, the product computed twice\n"
    "                    (CompileOptions::matmulRowSoftmax; off by default:\n"
    "                    slower than the stored product on an H100)\n"
    "  --pointwise-config JSON, --row-config JSON, --matmul-config JSON\n"
    "                    replace the heuristic's choices in every kernel of that\n"
    "                    schedule (keys: docs/tuning.md), e.g.\n"
    "                    --row-config '{\"persistent\": 0, \"stage\": 1}'\n"
    "                    (a row config naming threads_per_row, threads, vector,\n"
    "                    persistent and unroll is whole: keys it leaves out take\n"
    "                    their defaults; a partial one merges onto the heuristic)\n"
    "  --no-cache        compile without the disk cache (see `kiln cache`)\n"
    "  -o OUT            write to OUT instead of standard output\n"
    "\n"
    "KILN_DUMP=graph,mlir,ptx (or all) prints the same stages from any program\n"
    "using kiln, to standard error.\n";

namespace {

// [N, 4096] as ["N", 4096]: dynamic dims by name, static ones as numbers.
nlohmann::json shapeJson(const Shape& shape) {
  nlohmann::json j = nlohmann::json::array();
  for (const Dim& d : shape) {
    if (d.isStatic()) j.push_back(d.size);
    else j.push_back(d.name);
  }
  return j;
}

}  // namespace

int runCompile(int argc, char** argv) {
  int rc = 0;
  std::optional<Args> parsed = parseFileCommand(argc, argv, kCompileHelp, {"dim", "hint", "emit", "chip", "pointwise-config", "row-config", "matmul-config"}, rc);
  if (!parsed) return rc;
  const Args& a = *parsed;
  Graph g = parseGraphFile(a.positional[0]);
  // --dim and --hint name dynamic dims of the graph (--hint: after --dim).
  auto requireDims = [&](const DimBindings& given, const std::string& flag, const std::string& after) {
    const std::vector<std::string> known = g.dynamicDims();
    for (const auto& [name, v] : given)
      if (std::find(known.begin(), known.end(), name) == known.end())
        throw Error("kiln: --" + flag + " " + name + ": the graph has no dynamic dim named " + name + after);
  };
  DimBindings dims = parseDims(a.all("dim"));
  requireDims(dims, "dim", "");
  g = bindDims(g, std::vector<std::pair<std::string, int64_t>>(dims.begin(), dims.end()));
  DimBindings hints = parseDims(a.all("hint"), "hint");
  requireDims(hints, "hint", dims.empty() ? "" : " (after --dim)");

  std::string emit = a.get("emit").value_or(a.has("json") ? "" : "ptx");
  if (!emit.empty() && emit != "graph" && emit != "mlir" && emit != "cuda" && emit != "ptx" && emit != "cubin")
    throw Error("kiln: --emit=" + emit + ": expected graph, mlir, cuda, ptx or cubin");

  std::string out;
  if (emit == "graph") {
    out = printGraph(g);
  } else {
    compiler::CompileOptions opts;
    if (auto chip = a.get("chip")) opts.chip = *chip;
    if (auto c = a.get("pointwise-config")) opts.configOverride = *c;
    if (auto c = a.get("row-config")) opts.rowConfigOverride = *c;
    if (auto c = a.get("matmul-config")) opts.matmulConfigOverride = *c;
    opts.matmulRowSoftmax = a.has("matmul-row-softmax");
    for (const auto& [name, v] : hints) opts.dimHints[name] = v;
    compiler::CompiledGraph cg = compileGraphCached(g, opts, !a.has("no-cache"));
    if (a.has("json")) {
      nlohmann::json kernels = nlohmann::json::array();
      for (const compiler::CompiledKernel& k : cg.kernels) {
        nlohmann::json j;
        j["name"] = k.name;
        j["schedule"] = k.schedule;
        j["config"] = nlohmann::json::parse(k.config);
        j["why"] = k.why;
        nlohmann::json tensors = nlohmann::json::array();
        for (const compiler::KernelTensor& t : k.tensors)
          tensors.push_back({{"name", t.name}, {"dtype", std::string(dtypeName(t.dtype))},
                             {"shape", shapeJson(t.shape)}, {"output", t.output}, {"workspace", t.workspace}});
        j["tensors"] = tensors;
        nlohmann::json entries = nlohmann::json::array();
        int regs = 0, spills = 0, stack = 0;
        for (const compiler::ResourceReport& r : k.resources) {
          entries.push_back({{"name", r.kernel}, {"registers", r.registers},
                             {"spills", r.spillStoreBytes + r.spillLoadBytes}, {"stack", r.stackBytes}});
          regs = std::max(regs, r.registers);
          spills += r.spillStoreBytes + r.spillLoadBytes;
          stack = std::max(stack, r.stackBytes);
        }
        j["entries"] = entries;
        j["registers"] = regs;
        j["spills"] = spills;
        j["stack"] = stack;
        j["compile_ms"] = k.compileMs;
        nlohmann::json stages = nlohmann::json::object();
        for (const compiler::StageTime& s : k.stages) stages[s.name] = s.ms;
        j["stages_ms"] = stages;
        j["cache"] = k.cache;
        auto ranges = [](const std::vector<compiler::LaunchGeometry::DimRange>& rs) {
          nlohmann::json a = nlohmann::json::array();
          for (const compiler::LaunchGeometry::DimRange& r : rs) a.push_back({{"dim", r.dim}, {"min", r.min}, {"max", r.max}});
          return a;
        };
        j["preferred"] = ranges(k.launch.preferred);
        j["one_step_range"] = ranges(k.launch.oneStepRange);
        kernels.push_back(j);
      }
      nlohmann::json workspace = nlohmann::json::array();
      for (const compiler::KernelTensor& t : cg.workspace)
        workspace.push_back({{"name", t.name}, {"dtype", std::string(dtypeName(t.dtype))}, {"shape", shapeJson(t.shape)}});
      out = nlohmann::json{{"kernels", kernels}, {"workspace", workspace}, {"explain", cg.explain}}.dump(2) + "\n";
    } else {
      if (emit == "cuda" && std::none_of(cg.kernels.begin(), cg.kernels.end(),
                                         [](const compiler::CompiledKernel& k) { return !k.source.empty(); }))
        throw Error("kiln: --emit=cuda: no kernel of this graph is CUDA C++ (only matmul kernels are; the others are "
                    "MLIR: use --emit=mlir)");
      for (const compiler::CompiledKernel& k : cg.kernels) {
        if (emit == "mlir") out += k.mlir;
        else if (emit == "cuda") out += k.source;
        else if (emit == "ptx") out += k.ptx;
        else out.append(k.cubin.begin(), k.cubin.end());
      }
      if (emit == "cubin" && cg.kernels.size() > 1)
        throw Error("kiln: --emit=cubin: the graph compiled to " + std::to_string(cg.kernels.size()) +
                    " kernels; one cubin per file is not possible yet, use --json to see them");
    }
  }
  if (auto path = a.get("o")) {
    std::ofstream f(*path, std::ios::binary);
    if (!f) throw Error("kiln: cannot write " + *path);
    f << out;
  } else {
    if (emit == "cubin") throw Error("kiln: --emit=cubin writes binary data: give -o FILE");
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  return 0;
}

}  // namespace kiln::cli
