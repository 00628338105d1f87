// Cold compile time, graph -> cubin, of gelu_tanh(x + b) (a CPU benchmark:
// usage: bench_compile [runs] [default|ptxas|nvjitlink] [tune|plain] [FILE.kiln];
// no GPU needed; FILE.kiln: that graph instead, every kernel's stages
// summed). Each run compiles from scratch (compiler::compileGraph
// bypasses the in-process kernel registry). Prints the median and the median
// of each stage over the runs after the first (which pays one-time LLVM and
// MLIR initialization, reported separately), and the median number of page
// faults per compile (KILN_TUNE_MALLOC=0 shows them without the allocator
// priming of compiler/src/toolkit_lib.cpp).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "kiln/compiler/compile.h"
#include "kiln/dsl/oplib.h"
#include "kiln/dsl/text.h"

using namespace kiln;

int main(int argc, char** argv) {
  int runs = argc > 1 ? std::atoi(argv[1]) : 21;
  // bench_compile RUNS ROUTE tune: also keep freed memory in the process
  // (compiler::tuneAllocatorForCompilation) to see what page faults cost.
  bool tuned = argc > 3 && std::string(argv[3]) == "tune" && compiler::tuneAllocatorForCompilation();
  compiler::CompileOptions opts;
  // What kiln::compile builds up front: the vectorized entry (the scalar
  // entry is built on the first launch with an unaligned pointer).
  opts.variants = compiler::EntryVariants::VectorOnly;
  if (argc > 2 && std::string(argv[2]) != "default")
    opts.route = std::string(argv[2]) == "nvjitlink" ? compiler::CubinRoute::NvJitLink : compiler::CubinRoute::Ptxas;
  std::vector<double> totals, faults;  // ms; page faults (minor) per compile
  std::map<std::string, std::vector<double>> stages;
  double first = 0;
  const std::string file = argc > 4 ? argv[4] : "";
  for (int i = 0; i < runs; ++i) {
    Graph g;
    if (!file.empty()) {
      g = parseGraphFile(file);
    } else {
      Tensor x = g.input("x", DType::BF16, {"N", 4096});
      Tensor b = g.input("b", DType::BF16, {4096});
      g.output("y", gelu_tanh(x + b));
    }
    rusage before {}, after {};
    ::getrusage(RUSAGE_SELF, &before);
    auto t0 = std::chrono::steady_clock::now();
    compiler::CompiledGraph cg = compiler::compileGraph(g, opts);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ::getrusage(RUSAGE_SELF, &after);
    if (i == 0) {
      first = ms;
      continue;
    }
    totals.push_back(ms);
    faults.push_back(static_cast<double>(after.ru_minflt - before.ru_minflt));
    std::map<std::string, double> sum;
    for (const auto& k : cg.kernels)
      for (const auto& s : k.stages) sum[s.name] += s.ms;
    for (const auto& [name, ms] : sum) stages[name].push_back(ms);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  std::printf("cold compile %s, graph -> cubin (%s%s): median %.2f ms over %zu runs (first run %.1f ms)\n",
              file.empty() ? "gelu_tanh(x + b)" : file.c_str(), std::string(compiler::routeName(opts.route)).c_str(),
              tuned ? ", allocator tuned" : "", median(totals), totals.size(), first);
  for (const auto& [name, v] : stages) std::printf("  %-16s %.2f ms\n", name.c_str(), median(v));
  std::printf("  page faults      %.0f per compile (median)\n", median(faults));
  return 0;
}
