// Pointwise benchmarks on the GPU: the memory-bound cases of ANCHORS.md
// (x + y, x*y + z, gelu_tanh(x + b), a chain of six elementwise ops) at
// 32768x4096 bf16/f32 and 1024x262144 f32, the host cost of a launch, and the
// cold compile time. Each case is checked against the reference evaluator
// before it is timed. Prints a table; writes JSON lines to $OUT if set.
//
// Effective bandwidth counts each input read once and each output written
// once (the same bytes as shared/bench/anchors.py). Timing: CUDA events
// around each launch, L2 flushed before each run, median and p95 of 100.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench_common.h"
#include "kiln/autotune/tuning_db.h"
#include "kiln/compiler/backend.h"
#include "kiln/compiler/nvrtc.h"
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

// A graph over [rows, cols]; built twice: at full size (benchmarked) and
// with a few rows (the reference evaluator checks those rows of the output).
using Builder = std::function<Graph(int64_t rows)>;

using bench::minBytes;

// KILN_BENCH_TUNE=FILE: each case is also tuned (recorded in FILE) and timed.
std::unique_ptr<tune::TuningDatabase> tuningDb;

// Device inputs shared by the cases of one shape: x, y, z [rows, cols], b [cols].
struct Inputs {
  DType dtype;
  int64_t rows, cols;
  std::map<std::string, HostTensor> host;
  std::map<std::string, rt::DeviceBuffer> dev;
};

using bench::exportKernel;

void benchCase(const std::string& name, const Builder& build, Inputs& in, const char* tag,
               const std::string& override = "") {
  Graph g = build(in.rows);
  Kernel k = compile(g, {.configOverride = override, .tune = CompileOptions::Tune::Off});
  std::vector<TensorView> views;
  for (int id : g.params()) {
    const Node& n = g.node(id);
    std::vector<int64_t> shape = resolveShape(n.shape, {});
    views.emplace_back(in.dev.at(n.name).data(), n.dtype, shape);
  }
  std::vector<rt::DeviceBuffer> outs;
  for (const GraphOutput& o : g.outputs()) {
    std::vector<int64_t> shape = resolveShape(g.node(o.node).shape, {});
    HostTensor h(g.node(o.node).dtype, shape);
    outs.emplace_back(h.bytes());
    outs.back().poison();
    views.emplace_back(outs.back().data(), h.dtype(), shape);
  }
  k.launch(std::span<const TensorView>(views));
  // Check the first and last `few` rows against the reference evaluator on
  // a graph of 2 * few rows built the same way.
  const int64_t few = 4;
  auto check = [&] {
    bool ok = true;
    Graph small = build(2 * few);
    EvalInputs ein;
    for (int id : small.params()) {
      const Node& n = small.node(id);
      const HostTensor& full = in.host.at(n.name);
      if (n.shape.size() == 1) {
        ein.tensors[n.name] = full;
        continue;
      }
      HostTensor part(n.dtype, {2 * few, in.cols});
      size_t rowBytes = in.cols * dtypeSize(n.dtype);
      std::memcpy(part.data(), full.data(), few * rowBytes);
      std::memcpy(static_cast<char*>(part.data()) + few * rowBytes,
                  static_cast<const char*>(full.data()) + (in.rows - few) * rowBytes, few * rowBytes);
      ein.tensors[n.name] = part;
    }
    auto ref = evaluate(small, ein);
    for (size_t o = 0; o < ref.size(); ++o) {
      DType dt = ref[o].value.dtype();
      size_t rowBytes = in.cols * dtypeSize(dt);
      HostTensor got(dt, {2 * few, in.cols});
      outs[o].download(got.data(), few * rowBytes, 0);
      outs[o].download(static_cast<char*>(got.data()) + few * rowBytes, few * rowBytes, (in.rows - few) * rowBytes);
      double tol = dt == DType::F32 ? 2e-5 : 1.6e-2;
      for (int64_t i = 0; i < got.numel(); ++i) {
        double want = ref[o].exact[i], have = got.get(i);
        if (!(std::fabs(have - want) <= tol * std::max(1.0, std::fabs(want)))) ok = false;
      }
    }
    return ok;
  };
  bool ok = check();
  rt::BenchmarkOptions bo;
  bo.warmup = 10;
  bo.iters = 100;
  bo.flushL2 = true;
  rt::BenchmarkResult r = rt::benchmark([&] { k.launch(std::span<const TensorView>(views)); }, bo);
  double tbps = minBytes(g) / (r.medianUs * 1e-6) / 1e12;
  std::string cfg = k.compiled().kernels.at(0).config;
  std::printf("%-34s %-16s kiln %9.1f us (p95 %7.1f)  %.3f TB/s  %s  %s\n", name.c_str(), tag, r.medianUs, r.p95Us,
              tbps, ok ? "ok" : "WRONG", cfg.c_str());
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "{\"op\": \"%s [%s]\", \"impl\": \"kiln\", \"median_us\": %.2f, \"p95_us\": %.2f, \"TBps\": %.3f, "
                "\"correct\": %s, \"config\": %s}",
                name.c_str(), tag, r.medianUs, r.p95Us, tbps, ok ? "true" : "false", cfg.c_str());
  record(buf);
  // Variants (an override) under the case's name followed by the override.
  exportKernel(name + " [" + tag + "]" + (override.empty() ? "" : " " + override), k);
  if (!tuningDb || !override.empty()) return;
  // KILN_BENCH_TUNE: the same check and timing with the tuner's config.
  CompileOptions to;
  to.tune = CompileOptions::Tune::Always;
  to.tuningDatabase = tuningDb.get();
  auto t0 = std::chrono::steady_clock::now();
  Kernel tuned = compile(g, to);
  double tuneS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (rt::DeviceBuffer& b : outs) b.poison();
  tuned.launch(std::span<const TensorView>(views));
  bool tok = check();
  rt::BenchmarkResult tr = rt::benchmark([&] { tuned.launch(std::span<const TensorView>(views)); }, bo);
  double ttbps = minBytes(g) / (tr.medianUs * 1e-6) / 1e12;
  std::string tcfg = tuned.compiled().kernels.at(0).config;
  std::printf("%-34s %-16s tuned %8.1f us (p95 %7.1f)  %.3f TB/s  %s  %.3fx the heuristic; tuning %.2f s  %s\n",
              name.c_str(), tag, tr.medianUs, tr.p95Us, ttbps, tok ? "ok" : "WRONG", r.medianUs / tr.medianUs, tuneS,
              tcfg.c_str());
  std::string note = tuned.explain();
  if (size_t at = note.find("tuning: "); at != std::string::npos)
    std::printf("  %s\n", note.substr(at, note.find('\n', at) - at).c_str());
  std::snprintf(buf, sizeof buf,
                "{\"op\": \"%s [%s]\", \"impl\": \"kiln tuned\", \"median_us\": %.2f, \"p95_us\": %.2f, \"TBps\": %.3f, "
                "\"correct\": %s, \"tuning_s\": %.3f, \"config\": %s}",
                name.c_str(), tag, tr.medianUs, tr.p95Us, ttbps, tok ? "true" : "false", tuneS, tcfg.c_str());
  record(buf);
}

// Configs tried by the `sweep` mode around the heuristic's choice.
const char* kSweep[] = {
    "", R"({"vector": 8})", R"({"vector": 8, "threads": 256})", R"({"vector": 8, "threads": 64})",
    R"({"threads": 64})", R"({"unroll": 2})", R"({"threads": 256})",
};

// Configs the `variants` mode exports: the heuristic's and Triton's grid
// (twice the elements per block; unrolled vectors load first). Measured
// here and not ahead of the heuristic: 256 threads, 64-bit indices, a
// grid-stride loop, plain loads, four vectors per thread, 8-byte vectors
// (sessions 21-22); the inputs' loads with evict_first in L1 and L2 (2-7%
// slower), the outputs' stores with evict_first or evict_last in L2 (level
// or slower; session 28 calls 1-2).
// (Session 33: torch.compile's autotuner picked 256 threads x 2 f32 values,
// 8-byte accesses, for x*y+z f32 at 32768x4096, where kiln's 128 x 4 has
// run 0.1-0.3% behind in every call.)
const char* kVariants[] = {"", R"({"threads": 256, "vector": 2})", R"({"vector": 2})", R"({"threads": 256})",
                           R"({"unroll": 2})"};

enum class Mode { Cases, Sweep, Variants };

void memoryBound(DType t, int64_t m, int64_t n, Mode mode) {
  const bool sweep = mode == Mode::Sweep;
  std::string tag = std::to_string(m) + "x" + std::to_string(n) + " " + (t == DType::BF16 ? "bfloat16" : "float32");
  Inputs in{t, m, n, {}, {}};
  std::mt19937_64 rng(42);
  for (const char* name : {"x", "y", "z", "b"}) {
    HostTensor h(t, name[0] == 'b' ? std::vector<int64_t>{n} : std::vector<int64_t>{m, n});
    h.fillRandom(rng, -2, 2);
    rt::DeviceBuffer d(h.bytes());
    d.upload(h.data(), h.bytes());
    in.host.emplace(name, std::move(h));
    in.dev.emplace(name, std::move(d));
  }
  // The cases' graphs over [rows, n] (the sweep and variant modes reuse them).
  Builder add = [&](int64_t rows) {
    Graph g;
    g.output("out", g.input("x", t, {rows, n}) + g.input("y", t, {rows, n}));
    return g;
  };
  Builder fma = [&](int64_t rows) {
    Graph g;
    Tensor x = g.input("x", t, {rows, n}), y = g.input("y", t, {rows, n}), z = g.input("z", t, {rows, n});
    g.output("out", x * y + z);
    return g;
  };
  Builder gelu = [&](int64_t rows) {
    Graph g;
    g.output("out", gelu_tanh(g.input("x", t, {rows, n}) + g.input("b", t, {n})));
    return g;
  };
  Builder chain = [&](int64_t rows) {
    Graph g;
    Tensor c = g.input("x", t, {rows, n});
    c = c * 1.5 + 0.25;  // mul, add
    c = exp(c * -0.5);   // mul, exp
    c = c * 2.0 - 1.0;   // mul, sub: six ops, as in anchors_pointwise.py
    g.output("y", c);
    return g;
  };
  if (mode == Mode::Variants) {
    // Every case with configs around the heuristic's, exported
    // (KILN_EXPORT_KERNELS) for bench/anchors_pointwise.py's `variants`
    // mode, which times each next to torch.compile in rounds.
    for (const char* o : kVariants) {
      benchCase("add", add, in, tag.c_str(), o);
      benchCase("fma x*y+z", fma, in, tag.c_str(), o);
      benchCase("gelu(x+b)", gelu, in, tag.c_str(), o);
      benchCase("chain of 6", chain, in, tag.c_str(), o);
    }
    return;
  }
  if (sweep) {
    for (const char* o : kSweep) {
      benchCase("sweep fma x*y+z", fma, in, tag.c_str(), o);
      benchCase("sweep gelu(x+b)", gelu, in, tag.c_str(), o);
    }
    return;
  }
  benchCase("add", add, in, tag.c_str());
  benchCase("fma x*y+z", fma, in, tag.c_str());
  benchCase("gelu(x+b)", gelu, in, tag.c_str());
  benchCase("chain of 6", chain, in, tag.c_str());
}

double nowUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void launchOverhead() {
  // The host cost of kiln's launch path (pack + checks + cuLaunchKernel) on a
  // one-element kernel, and of raw cuLaunchKernel calls of the same kernel, in
  // the same process. Two methods:
  //  - back to back: host time of 20,000 launches in a row, the method of
  //    shared/bench/floor.cu. Once the launch queue is full the host waits
  //    for the GPU, so this also measures how fast the GPU retires empty
  //    kernels (floor.cu's host time and end-to-end time come out equal);
  //  - bursts: host time of 64 launches after the GPU has drained (synchronize
  //    between bursts, untimed), 300 bursts a round; only the host's own cost.
  // The variants run interleaved (back to back: a round of each in turn;
  // bursts: a burst of each in turn), 7 rounds, so that a slow phase of the
  // machine hits all of them; the median round of each is reported.
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N"});
  g.output("y", x + 1.0);
  Kernel k = compile(g);
  rt::DeviceBuffer bx(64), by(64);
  TensorView vx(bx.data(), DType::F32, {1}), vy(by.data(), DType::F32, {1});
  const TensorView views[] = {vx, vy};
  const auto& ck = k.compiled().kernels.at(0);
  rt::Module mod = rt::Module::load(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(ck.cubin.data()),
                                                             ck.cubin.size()));
  rt::Function f = mod.function(ck.entries.back().name);
  void* px = vx.data;
  void* py = vy.data;
  int64_t one = 1;
  void* args[] = {&px, &py, &one};
  struct alignas(8) Packed {
    void* x;
    void* y;
    int64_t n;
  } packed{px, py, one};
  size_t packedSize = sizeof packed;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packedSize,
                   CU_LAUNCH_PARAM_END};
  // floor.cu's kernel: empty, one pointer parameter, built by NVRTC. Raw
  // launches of it beside raw launches of kiln's kernel tell the kernel's
  // share of a launch's cost from the process's.
  std::optional<rt::Module> emptyMod;
  std::optional<rt::Function> emptyFn;
  void* emptyArg = nullptr;
  void* emptyArgs[] = {&emptyArg};
  try {
    compiler::CudaCompileOptions co;
    co.arch = "compute_90";
    const std::string ptx = compiler::cudaToPtx("extern \"C\" __global__ void k(float* p) {}", co).ptx;
    const std::vector<char> cubin = compiler::ptxToCubin(ptx, "sm_90").cubin;
    emptyMod = rt::Module::load(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(cubin.data()), cubin.size()));
    emptyFn = emptyMod->function("k");
  } catch (const std::exception& e) {
    std::printf("launch host cost: no empty kernel (%s)\n", e.what());
  }
  CUstream own = nullptr;
  if (rt::driver().streamCreate(&own, 1 /* CU_STREAM_NON_BLOCKING */) != CUDA_SUCCESS) own = nullptr;
  const auto& d = rt::driver();
  struct Variant {
    const char* name;
    std::function<void()> launch;
    std::vector<double> rounds, burstRounds;
  };
  std::vector<Variant> variants = {
      {"kiln Kernel::launch, stream 0", [&] { k.launch(std::span<const TensorView>(views)); }, {}, {}},
      {"raw cuLaunchKernel, stream 0", [&] { d.launchKernel(f.handle(), 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr); }, {}, {}},
      {"raw cuLaunchKernel (packed buffer), stream 0",
       [&] { d.launchKernel(f.handle(), 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, extra); }, {}, {}},
      {"kiln Kernel::launch, own stream",
       [&] { k.launch(std::span<const TensorView>(views), {}, {}, own); }, {}, {}},
      {"raw cuLaunchKernel, own stream", [&] { d.launchKernel(f.handle(), 1, 1, 1, 32, 1, 1, 0, own, args, nullptr); }, {}, {}},
  };
  if (emptyFn)
    variants.push_back({"raw cuLaunchKernel, empty k(float*), stream 0",
                        [&] { d.launchKernel(emptyFn->handle(), 1, 1, 1, 32, 1, 1, 0, nullptr, emptyArgs, nullptr); },
                        {},
                        {}});
  for (Variant& v : variants)
    for (int i = 0; i < 2000; ++i) v.launch();
  d.ctxSynchronize();
  // Bursts interleave burst by burst (each variant's burst follows the
  // previous variant's), so that a slow phase of the host, which lasts
  // longer than a burst, hits every variant alike.
  for (int round = 0; round < 7; ++round) {
    for (Variant& v : variants) {
      const int n = 20000;
      const double t0 = nowUs();
      for (int i = 0; i < n; ++i) v.launch();
      const double t1 = nowUs();
      d.ctxSynchronize();
      v.rounds.push_back((t1 - t0) / n);
    }
    std::vector<std::vector<double>> bursts(variants.size());
    for (int b = 0; b < 300; ++b)
      for (size_t vi = 0; vi < variants.size(); ++vi) {
        const int m = 64;
        const double b0 = nowUs();
        for (int i = 0; i < m; ++i) variants[vi].launch();
        const double b1 = nowUs();
        d.ctxSynchronize();
        bursts[vi].push_back((b1 - b0) / m);
      }
    for (size_t vi = 0; vi < variants.size(); ++vi) {
      std::sort(bursts[vi].begin(), bursts[vi].end());
      variants[vi].burstRounds.push_back(bursts[vi][bursts[vi].size() / 2]);
    }
  }
  if (own) d.streamDestroy(own);
  std::string json = "{\"op\": \"launch host cost\"";
  for (Variant& v : variants) {
    std::sort(v.rounds.begin(), v.rounds.end());
    std::sort(v.burstRounds.begin(), v.burstRounds.end());
    std::printf("launch host cost: %-46s bursts %.3f us (rounds %.3f..%.3f); back to back %.3f us (%.3f..%.3f)\n",
                v.name, v.burstRounds[3], v.burstRounds.front(), v.burstRounds.back(), v.rounds[3], v.rounds.front(),
                v.rounds.back());
    json += ", \"" + std::string(v.name) + " (bursts)\": " + std::to_string(v.burstRounds[3]) + ", \"" +
            std::string(v.name) + " (back to back)\": " + std::to_string(v.rounds[3]);
  }
  std::printf("launch host cost: kiln %.3f us, raw cuLaunchKernel %.3f us (bursts, stream 0, same kernel, same "
              "process)\n",
              variants[0].burstRounds[3], variants[1].burstRounds[3]);
  json += ", \"kiln_us\": " + std::to_string(variants[0].burstRounds[3]) +
          ", \"raw_cuLaunchKernel_us\": " + std::to_string(variants[1].burstRounds[3]) + "}";
  record(json);
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* out = std::getenv("OUT")) jsonOut.open(std::string(out) + "/kiln_pointwise.jsonl");
  if (!rt::driverAvailable()) {
    std::printf("bench_pointwise: %s\n", rt::driverUnavailableReason().c_str());
    return 0;
  }
  std::printf("%s\n", rt::Device::current().properties().summary().c_str());
  if (const char* file = std::getenv("KILN_BENCH_TUNE"); file && *file) {
    tune::TuningDbOptions o;
    o.searchPath = "";
    o.userFile = file;
    tuningDb = std::make_unique<tune::TuningDatabase>(o);
  }
  std::string what = argc > 1 ? argv[1] : "all";
  if (what == "all" || what == "launch") launchOverhead();
  if (what == "all" || what == "mem") {
    memoryBound(DType::BF16, 32768, 4096, Mode::Cases);
    memoryBound(DType::F32, 32768, 4096, Mode::Cases);
    memoryBound(DType::F32, 1024, 262144, Mode::Cases);
  }
  if (what == "sweep") memoryBound(DType::F32, 32768, 4096, Mode::Sweep);
  if (what == "variants") {
    memoryBound(DType::BF16, 32768, 4096, Mode::Variants);
    memoryBound(DType::F32, 32768, 4096, Mode::Variants);
    memoryBound(DType::F32, 1024, 262144, Mode::Variants);
  }
  return 0;
}
