// Pointwise benchmarks on the GPU: the memory-bound cases of ANCHORS.md
// (x + y, x*y + z, gelu_tanh(x + b), a chain of six elementwise ops) at
// 32768x4096 bf16/f32 and 1024x262144 f32, the host cost of a launch, and the
// cold compile time. Each case is checked against the reference evaluator
// before it is timed. Prints a table; writes JSON lines to $OUT if set.
//
// Effective bandwidth counts each input read once and each output written
// once (the same bytes as shared/bench/anchors.py). Timing: CUDA events
// around each launch, L2 flushed before each run, median and p95 of 100.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <string>

#include "kiln/kiln.h"
#include "kiln/runtime/device.h"
#include "kiln/runtime/launch.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/timing.h"

using namespace kiln;

namespace {

std::ofstream jsonOut;

void record(const std::string& line) {
  if (jsonOut) jsonOut << line << "\n" << std::flush;
}

struct Case {
  std::string name;
  std::function<Graph(DType, int64_t, int64_t)> build;
};

Graph chain6(DType t, int64_t m, int64_t n) {
  Graph g;
  Tensor x = g.input("x", t, {m, n});
  Tensor c = x;
  c = c * 1.5 + 0.25;     // mul, add
  c = exp(c * -0.5);      // mul, exp
  c = c * 2.0 - 1.0;      // mul, sub: six ops
  g.output("y", c);
  return g;
}

// Bytes that must move: every input read once, every output written once.
double minBytes(const Graph& g, const DimBindings& dims) {
  double bytes = 0;
  for (int id : g.params())
    if (g.node(id).op == Op::Input) {
      double n = 1;
      for (int64_t d : resolveShape(g.node(id).shape, dims)) n *= d;
      bytes += n * dtypeSize(g.node(id).dtype);
    }
  for (const GraphOutput& o : g.outputs()) {
    double n = 1;
    for (int64_t d : resolveShape(g.node(o.node).shape, dims)) n *= d;
    bytes += n * dtypeSize(g.node(o.node).dtype);
  }
  return bytes;
}

void benchCase(const std::string& name, const Graph& g, const char* tag) {
  Kernel k = compile(g);
  std::mt19937_64 rng(1234);
  EvalInputs in = randomInputs(g, {}, rng());
  std::vector<rt::DeviceBuffer> bufs;
  std::vector<TensorView> views;
  for (int id : g.params()) {
    const HostTensor& h = in.tensors.at(g.node(id).name);
    bufs.emplace_back(h.bytes());
    bufs.back().upload(h.data(), h.bytes());
    views.emplace_back(bufs.back().data(), h.dtype(), h.shape());
  }
  std::vector<HostTensor> outs;
  for (const GraphOutput& o : g.outputs()) {
    std::vector<int64_t> shape = resolveShape(g.node(o.node).shape, {});
    outs.emplace_back(g.node(o.node).dtype, shape);
    bufs.emplace_back(outs.back().bytes());
    bufs.back().poison();
    views.emplace_back(bufs.back().data(), outs.back().dtype(), shape);
  }
  k.launch(std::span<const TensorView>(views));
  // Check a sample of rows against the reference (the full tensors are
  // checked by the [gpu] tests).
  bool ok = true;
  {
    auto ref = evaluate(g, in);
    for (size_t o = 0; o < ref.size(); ++o) {
      HostTensor& h = outs[o];
      bufs[g.params().size() + o].download(h.data(), h.bytes());
      double tol = h.dtype() == DType::F32 ? 2e-5 : 1.6e-2;
      for (int64_t i = 0; i < h.numel(); i += 997) {
        double want = ref[o].exact[i], got = h.get(i);
        if (!(std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want)))) ok = false;
      }
    }
  }
  rt::BenchmarkOptions bo;
  bo.warmup = 10;
  bo.iters = 100;
  bo.flushL2 = true;
  rt::BenchmarkResult r = rt::benchmark([&] { k.launch(std::span<const TensorView>(views)); }, bo);
  double tbps = minBytes(g, {}) / (r.medianUs * 1e-6) / 1e12;
  std::string cfg = k.compiled().kernels.at(0).config;
  std::printf("%-34s %-12s kiln %9.1f us (p95 %7.1f)  %.3f TB/s  %s  %s\n", name.c_str(), tag, r.medianUs, r.p95Us,
              tbps, ok ? "ok" : "WRONG", cfg.c_str());
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "{\"op\": \"%s [%s]\", \"impl\": \"kiln\", \"median_us\": %.2f, \"p95_us\": %.2f, \"TBps\": %.3f, "
                "\"correct\": %s, \"config\": %s}",
                name.c_str(), tag, r.medianUs, r.p95Us, tbps, ok ? "true" : "false", cfg.c_str());
  record(buf);
}

void memoryBound(DType t, int64_t m, int64_t n) {
  std::string tag = std::to_string(m) + "x" + std::to_string(n) + " " + std::string(dtypeName(t) == "bf16" ? "bfloat16" : "float32");
  {
    Graph g;
    Tensor x = g.input("x", t, {m, n}), y = g.input("y", t, {m, n});
    g.output("out", x + y);
    benchCase("add", g, tag.c_str());
  }
  {
    Graph g;
    Tensor x = g.input("x", t, {m, n}), y = g.input("y", t, {m, n}), z = g.input("z", t, {m, n});
    g.output("out", x * y + z);
    benchCase("fma x*y+z", g, tag.c_str());
  }
  {
    Graph g;
    Tensor x = g.input("x", t, {m, n}), b = g.input("b", t, {n});
    g.output("out", gelu_tanh(x + b));
    benchCase("gelu(x+b)", g, tag.c_str());
  }
  benchCase("chain of 6", chain6(t, m, n), tag.c_str());
}

double nowUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void launchOverhead() {
  // The host cost of kiln's launch path (pack + checks + cuLaunchKernel) on a
  // one-element kernel, and of a raw cuLaunchKernel of the same kernel, in
  // the same process, measured like shared/bench/floor.cu.
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N"});
  g.output("y", x + 1.0);
  Kernel k = compile(g);
  rt::DeviceBuffer bx(64), by(64);
  TensorView vx(bx.data(), DType::F32, {1}), vy(by.data(), DType::F32, {1});
  const TensorView views[] = {vx, vy};
  const int n = 100000;
  for (int i = 0; i < 1000; ++i) k.launch(std::span<const TensorView>(views));
  rt::driver().ctxSynchronize();
  double t0 = nowUs();
  for (int i = 0; i < n; ++i) k.launch(std::span<const TensorView>(views));
  double t1 = nowUs();
  rt::driver().ctxSynchronize();
  double kilnUs = (t1 - t0) / n;

  // Raw: the same cubin's scalar entry through cuLaunchKernel directly.
  const auto& ck = k.compiled().kernels.at(0);
  rt::Module mod = rt::Module::load(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(ck.cubin.data()),
                                                             ck.cubin.size()));
  rt::Function f = mod.function(ck.entries.back().name);
  void* px = vx.data;
  void* py = vy.data;
  int64_t one = 1;
  void* args[] = {&px, &py, &one};
  for (int i = 0; i < 1000; ++i) rt::driver().launchKernel(f.handle(), 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr);
  rt::driver().ctxSynchronize();
  t0 = nowUs();
  for (int i = 0; i < n; ++i) rt::driver().launchKernel(f.handle(), 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr);
  t1 = nowUs();
  rt::driver().ctxSynchronize();
  double rawUs = (t1 - t0) / n;
  std::printf("launch host cost: kiln %.3f us, raw cuLaunchKernel %.3f us (same kernel, same process)\n", kilnUs,
              rawUs);
  char buf[256];
  std::snprintf(buf, sizeof buf, "{\"op\": \"launch host cost\", \"kiln_us\": %.3f, \"raw_cuLaunchKernel_us\": %.3f}",
                kilnUs, rawUs);
  record(buf);
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* out = std::getenv("OUT")) jsonOut.open(std::string(out) + "/kiln_pointwise.jsonl");
  if (!rt::driverAvailable()) {
    std::printf("bench_pointwise: %s\n", rt::driverUnavailableReason().c_str());
    return 0;
  }
  std::printf("%s\n", rt::Device::current().properties().summary().c_str());
  std::string what = argc > 1 ? argv[1] : "all";
  if (what == "all" || what == "launch") launchOverhead();
  if (what == "all" || what == "mem") {
    memoryBound(DType::BF16, 32768, 4096);
    memoryBound(DType::F32, 32768, 4096);
    memoryBound(DType::F32, 1024, 262144);
  }
  return 0;
}
