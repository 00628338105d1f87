// Matmul on the GPU: kiln's kernels at the shapes of issue 6, for
// docs/benchmarks.md, printed next to nothing else: cuBLAS and
// torch.compile come from shared/bench/anchors.py (gemm) in the same device
// run (scripts/gpu-run.sh, KILN_ANCHORS=gemm).
//
//   bench_matmul            every case below
//   bench_matmul SUBSTR...  the cases whose name contains one of SUBSTR
//   KILN_MATMUL_CONFIGS='{"pingpong": 0};{...}'  each case also with these
//
// Cases: plain bf16 GEMM (a [M, K] @ b [K, N], the layout of torch's a @ b)
// and GEMM + bias + gelu_tanh at 8192^3, 4096^3 and 8192x8192x2048; small M
// (16, 64, 128 x 8192 x 8192); the nn.Linear layout (b stored [N, K]).
// Each case checks 4 sampled rows of its output against an fp64 reference
// on the host, then times the launch (rt::benchmark: median of CUDA-event
// timed runs, L2 flushed) and prints TFLOP/s and one JSON line. Then the
// compile time of one matmul kernel (generate, NVRTC, ptxas; no cache) and a
// warm start: a fresh process compiling the lesson's graph from the disk
// cache.
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <tuple>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kiln/dsl/reference.h"
#include "kiln/kiln.h"
#include "kiln/runtime/device.h"
#include "kiln/runtime/device_buffer.h"
#include "kiln/runtime/driver.h"
#include "kiln/runtime/timing.h"

extern char** environ;

using namespace kiln;

namespace {

struct Case {
  std::string name;
  int64_t m, n, k;
  bool epilogue;  // + bias, gelu_tanh
  bool transB;    // b stored [N, K]
};

Graph caseGraph(const Case& c) {
  Graph g;
  Tensor a = g.input("a", DType::BF16, {c.m, c.k});
  Tensor b = g.input("b", DType::BF16, c.transB ? Shape{c.n, c.k} : Shape{c.k, c.n});
  Tensor y = matmul(a, b, {false, c.transB});
  if (c.epilogue) y = gelu_tanh(y + g.input("bias", DType::BF16, {c.n}));
  g.output("y", y);
  return g;
}

double geluTanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

void runCase(const Case& c, const std::string& config = "") {
  Graph g = caseGraph(c);
  auto t0 = std::chrono::steady_clock::now();
  CompileOptions co;
  co.matmulConfigOverride = config;
  Kernel k = compile(g, co);
  const double compileMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<uint16_t> ha(c.m * c.k), hb(c.k * c.n), hbias(c.n);
  for (auto& v : ha) v = doubleToBF16Bits(dist(rng));
  for (auto& v : hb) v = doubleToBF16Bits(dist(rng));
  for (auto& v : hbias) v = doubleToBF16Bits(dist(rng));
  rt::DeviceBuffer a(ha.size() * 2), b(hb.size() * 2), bias(hbias.size() * 2), y(c.m * c.n * 2);
  a.upload(ha.data(), ha.size() * 2);
  b.upload(hb.data(), hb.size() * 2);
  bias.upload(hbias.data(), hbias.size() * 2);
  y.poison();
  std::vector<TensorView> views{TensorView(a.data(), DType::BF16, {c.m, c.k}),
                                TensorView(b.data(), DType::BF16, c.transB ? std::vector<int64_t>{c.n, c.k}
                                                                           : std::vector<int64_t>{c.k, c.n})};
  if (c.epilogue) views.emplace_back(bias.data(), DType::BF16, std::vector<int64_t>{c.n});
  views.emplace_back(y.data(), DType::BF16, std::vector<int64_t>{c.m, c.n});
  k.launch(std::span<const TensorView>(views));
  KILN_CU_CHECK(rt::driver().ctxSynchronize());
  // Check sampled rows against fp64.
  std::vector<uint16_t> hy(c.m * c.n);
  y.download(hy.data(), hy.size() * 2);
  double worst = 0;
  int bad = 0;
  for (int64_t row : {int64_t{0}, c.m / 3, c.m / 2 + 1, c.m - 1}) {
    for (int64_t col = 0; col < c.n; ++col) {
      double acc = 0;
      for (int64_t kk = 0; kk < c.k; ++kk)
        acc += bf16BitsToDouble(ha[row * c.k + kk]) *
               bf16BitsToDouble(c.transB ? hb[col * c.k + kk] : hb[kk * c.n + col]);
      double want = c.epilogue ? geluTanh(acc + bf16BitsToDouble(hbias[col])) : acc;
      double have = bf16BitsToDouble(hy[row * c.n + col]);
      double err = std::fabs(have - want) / std::max(1.0, std::fabs(want));
      worst = std::max(worst, err);
      if (!(err <= 1.6e-2)) ++bad;  // bf16 output: 2^-8 relative, plus f32 summation
    }
  }
  rt::BenchmarkOptions bo;
  bo.warmup = 3;
  bo.iters = 20;
  rt::BenchmarkResult r = rt::benchmark([&] { k.launch(std::span<const TensorView>(views)); }, bo);
  const double tflops = 2.0 * c.m * c.n * c.k / (r.medianUs * 1e-6) / 1e12;
  const std::string name = c.name + (config.empty() ? "" : " " + config);
  std::printf("%-34s %9.1f us  %6.1f TFLOP/s  check %s (max rel err %.2e)  compile %.0f ms  config %s\n",
              name.c_str(), r.medianUs, tflops, bad ? "FAILED" : "ok", worst, compileMs,
              k.compiled().kernels[0].config.c_str());
  if (k.compiled().kernels[0].launch.cluster > 1) {
    const std::string ex = k.explain();
    const size_t at = ex.find("clusters of");
    if (at != std::string::npos) std::printf("  %s\n", ex.substr(at, ex.find('\n', at) - at).c_str());
  }
  std::printf("{\"case\": \"%s\", \"us\": %.2f, \"tflops\": %.1f, \"check\": \"%s\"}\n", name.c_str(), r.medianUs,
              tflops, bad ? "failed" : "ok");
  std::fflush(stdout);
}

// Blocks with matmuls among other ops, planned in stages: the samples
// attention_scores (softmax(q @ k.T * scale), T 4096, head dim 128: the
// matmul with the scale in its epilogue, then the softmax's row kernel) and
// mlp_block (x + gelu_tanh(rmsnorm(x) @ w1.T) @ w2.T, 4096 tokens, 4096 ->
// 11008 -> 4096: the norm's kernel, then the two matmuls with their
// epilogues). Each checks 4 rows against the reference evaluator (the same
// block over those rows only: rows are independent; relative error, below
// `floor` absolute), then times the whole
// plan (every kernel, one launch call, L2 flushed like do_bench) next to
// eager and torch.compile from anchors_matmul.py.
struct Block {
  std::string name;
  Graph graph;
  DimBindings dims;
  std::map<std::string, double> scalars;
  std::string rowDim;       // the row dim of the inputs and the output
  std::vector<std::string> rowInputs;  // inputs whose rows are sampled
  double flops = 0;
};

Graph attentionScores(Dim tq, Dim tk) {
  Graph g;
  Tensor q = g.input("q", DType::BF16, {tq, 128});
  Tensor k = g.input("k", DType::BF16, {tk, 128});
  g.output("p", softmax(matmul(q, permute(k, {1, 0})) * g.scalar("scale", DType::F32)));
  return g;
}

Graph mlpBlock(Dim tokens) {
  Graph g;
  Tensor x = g.input("x", DType::BF16, {tokens, 4096});
  Tensor h = rmsnorm(x, g.input("norm_w", DType::BF16, {4096}));
  Tensor up = gelu_tanh(matmul(h, g.input("w1", DType::BF16, {11008, 4096}), {false, true}));
  g.output("y", x + matmul(up, g.input("w2", DType::BF16, {4096, 11008}), {false, true}));
  return g;
}

void runBlock(const std::string& name, const Graph& g, const Graph& rowsGraph, const DimBindings& dims,
              const std::map<std::string, double>& scalars, const std::vector<std::string>& rowInputs,
              const InputRanges& ranges, double flops, double floor) {
  // KILN_BLOCK_MATMUL_CONFIG: a config override for the blocks' matmul
  // kernels (an A/B against the heuristic in the same run).
  CompileOptions co;
  if (const char* c = std::getenv("KILN_BLOCK_MATMUL_CONFIG")) co.matmulConfigOverride = c;
  // KILN_BLOCK_ROW_SOFTMAX=1: a softmax over a matmul's rows in the matmul's
  // kernel (CompileOptions::matmulRowSoftmax), against the stored product.
  if (const char* r = std::getenv("KILN_BLOCK_ROW_SOFTMAX")) co.matmulRowSoftmax = std::string(r) == "1";
  Kernel k = compile(g, co);
  EvalInputs in = randomInputs(g, dims, 20261205, ranges);
  in.scalars = scalars;
  std::map<std::string, rt::DeviceBuffer> bufs;
  Args args;
  for (int id : g.params()) {
    const Node& n = g.node(id);
    if (n.op == Op::Scalar) {
      args.scalar(n.name, scalars.at(n.name));
      continue;
    }
    const HostTensor& h = in.tensors.at(n.name);
    rt::DeviceBuffer& b = bufs.emplace(n.name, rt::DeviceBuffer(h.bytes())).first->second;
    b.upload(h.data(), h.bytes());
    args.tensor(n.name, TensorView(b.data(), n.dtype, h.shape()));
  }
  std::vector<HostTensor> outs;
  for (const GraphOutput& o : g.outputs()) {
    const Node& n = g.node(o.node);
    outs.emplace_back(n.dtype, resolveShape(n.shape, dims));
    rt::DeviceBuffer& b = bufs.emplace(o.name, rt::DeviceBuffer(outs.back().bytes())).first->second;
    b.poison();
    args.tensor(o.name, TensorView(b.data(), n.dtype, outs.back().shape()));
  }
  for (const auto& [d, v] : dims) args.dim(d, v);
  k.launch(args);
  KILN_CU_CHECK(rt::driver().ctxSynchronize());
  // 4 rows through the reference: the row-sampled inputs cut to those rows.
  const int64_t rows = outs[0].shape()[0];
  const std::vector<int64_t> picked = {0, rows / 3, rows / 2 + 1, rows - 1};
  EvalInputs rin = in;
  for (const std::string& r : rowInputs) {
    const HostTensor& full = in.tensors.at(r);
    const int64_t len = full.numel() / full.shape()[0];
    std::vector<int64_t> shape = full.shape();
    shape[0] = 4;
    HostTensor cut(full.dtype(), shape);
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < len; ++j) cut.set(i * len + j, full.get(picked[static_cast<size_t>(i)] * len + j));
    rin.tensors[r] = cut;
  }
  rin.dims.clear();
  const std::vector<EvalOutput> want = evaluate(rowsGraph, rin);
  HostTensor& got = outs[0];
  bufs.at(g.outputs()[0].name).download(got.data(), got.bytes());
  const int64_t len = got.numel() / rows;
  double worst = 0;
  int bad = 0;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < len; ++j) {
      const double w = want[0].value.get(i * len + j), have = got.get(picked[static_cast<size_t>(i)] * len + j);
      const double err = std::fabs(have - w) / std::max(std::fabs(w), floor);
      worst = std::max(worst, err);
      if (!(err <= 2e-2)) ++bad;  // bf16 output and bf16 intermediates
    }
  rt::BenchmarkOptions bo;
  bo.warmup = 5;
  bo.iters = 30;
  bo.flushL2 = true;
  rt::BenchmarkResult r = rt::benchmark([&] { k.launch(args); }, bo);
  std::printf("%-34s %9.1f us  %6.1f TFLOP/s  check %s (max rel err %.2e)  %zu kernels:", name.c_str(), r.medianUs,
              flops / (r.medianUs * 1e-6) / 1e12, bad ? "FAILED" : "ok", worst, k.compiled().kernels.size());
  for (const auto& ck : k.compiled().kernels) std::printf(" %s", ck.schedule.c_str());
  std::printf("\n{\"case\": \"%s\", \"us\": %.2f, \"check\": \"%s\"}\n", name.c_str(), r.medianUs,
              bad ? "failed" : "ok");
  std::fflush(stdout);
}

// The attention block's kernels alone (KILN_BLOCK_PARTS set): the scaled
// scores (the matmul and its epilogue) with T dynamic (the output's row
// stride unknown when compiled: plain stores) and static (TMA stores), the
// softmax over the stored scores, and the whole block with T static.
Graph scaledScores(Dim tq, Dim tk) {
  Graph g;
  Tensor q = g.input("q", DType::BF16, {tq, 128});
  Tensor k = g.input("k", DType::BF16, {tk, 128});
  g.output("s", matmul(q, permute(k, {1, 0})) * g.scalar("scale", DType::F32));
  return g;
}

Graph softmaxOf(Dim rows, Dim len) {
  Graph g;
  g.output("p", softmax(g.input("s", DType::BF16, {rows, len})));
  return g;
}

void runBlockParts() {
  const int64_t T = 4096;
  const std::map<std::string, double> scale = {{"scale", 1 / std::sqrt(128.0)}};
  runBlock("part scores T4096 d128 (T dynamic)", scaledScores(Dim("T"), Dim("T")), scaledScores(4, T), {{"T", T}},
           scale, {"q"}, {}, 2.0 * T * T * 128, 1e-2);
  runBlock("part scores T4096 d128 (T static)", scaledScores(T, T), scaledScores(4, T), {}, scale, {"q"}, {},
           2.0 * T * T * 128, 1e-2);
  runBlock("part softmax 4096x4096 bf16 (dynamic)", softmaxOf(Dim("T"), Dim("T")), softmaxOf(4, T), {{"T", T}}, {},
           {"s"}, {{"s", {-3, 3}}}, 0, 1e-7);
  runBlock("block attention_scores T4096 d128 (T static)", attentionScores(T, T), attentionScores(4, T), {}, scale,
           {"q"}, {}, 2.0 * T * T * 128, 1e-7);
}

void runBlocks() {
  if (std::getenv("KILN_BLOCK_PARTS")) runBlockParts();
  const int64_t T = 4096;
  runBlock("block attention_scores T4096 d128", attentionScores(Dim("T"), Dim("T")), attentionScores(4, T),
           {{"T", T}}, {{"scale", 1 / std::sqrt(128.0)}}, {"q"}, {}, 2.0 * T * T * 128, 1e-7);
  runBlock("block mlp 4096x4096x11008", mlpBlock(Dim("tokens")), mlpBlock(4), {{"tokens", T}}, {}, {"x"},
           {{"w1", {-1 / 64.0, 1 / 64.0}}, {"w2", {-1 / 64.0, 1 / 64.0}}}, 2 * 2.0 * T * 4096 * 11008, 0.1);
}

// Compile time of one matmul kernel, nothing cached.
void compileTime() {
  std::vector<double> ms;
  for (int i = 0; i < 3; ++i) {
    Graph g = caseGraph({"", 8192, 8192 + 8 * i, 8192, true, false});
    auto t0 = std::chrono::steady_clock::now();
    compiler::CompileOptions co;
    co.chip = "sm_90";
    compiler::CompiledGraph cg = compiler::compileGraph(g, co);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (i == 0) {
      std::printf("compile stages (gemm+bias+gelu):");
      for (const auto& s : cg.kernels[0].stages) std::printf(" %s %.1f ms", s.name.c_str(), s.ms);
      std::printf("\n");
    }
  }
  std::sort(ms.begin(), ms.end());
  std::printf("compile of one matmul kernel (generate, NVRTC, ptxas), no cache: median %.0f ms of 3\n", ms[1]);
}

int warmChild() {
  Graph g = caseGraph({"", 8192, 8192, 8192, true, false});
  auto t0 = std::chrono::steady_clock::now();
  Kernel k = compile(g);
  const double first = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  Graph h = caseGraph({"", 4096, 4096, 4096, true, false});
  t0 = std::chrono::steady_clock::now();
  Kernel k2 = compile(h);
  const double second = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const Stats s = stats();
  std::printf("warm start from the disk cache (fresh process): first kernel %.2f ms (includes one-time setup), "
              "second %.2f ms; kernels compiled %llu, loaded from cache %llu\n",
              first, second, static_cast<unsigned long long>(s.kernelsCompiled),
              static_cast<unsigned long long>(s.kernelsFromDiskCache));
  return s.kernelsCompiled == 0 ? 0 : 1;
}

// A fresh process fills a fresh cache ("warm-fill"), then another times
// compiling the same graphs from it ("warm-child"). (This process has
// already compiled them: its in-process registry would answer, and its
// cache directory was fixed at its first compile.)
void warmStart(const char* self) {
  const std::string dir = (std::filesystem::temp_directory_path() / "kiln-bench-matmul-cache").string();
  std::filesystem::remove_all(dir);
  setenv("KILN_CACHE_DIR", dir.c_str(), 1);
  for (const char* step : {"warm-fill", "warm-child"}) {
    pid_t pid;
    char* argv[] = {const_cast<char*>(self), const_cast<char*>(step), nullptr};
    if (posix_spawn(&pid, self, nullptr, nullptr, argv, environ) != 0) return;
    int status = 0;
    waitpid(pid, &status, 0);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc > 1 && std::string(argv[1]) == "warm-child") return warmChild();
    if (argc > 1 && std::string(argv[1]) == "warm-fill") {
      (void)compile(caseGraph({"", 8192, 8192, 8192, true, false}));
      (void)compile(caseGraph({"", 4096, 4096, 4096, true, false}));
      return 0;
    }
    if (argc == 2 && std::string(argv[1]) == "warm") {  // runs without a GPU too (no module loads then)
      warmStart(argv[0]);
      return 0;
    }
    if (!rt::driverAvailable()) {
      std::printf("SKIPPED: bench_matmul needs a GPU (%s)\n", rt::driverUnavailableReason().c_str());
      return 0;
    }
    std::printf("%s\n", rt::Device::current().basics().name.c_str());
    std::vector<Case> cases;
    for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{8192, 8192, 8192}, {4096, 4096, 4096}, {8192, 8192, 2048}}) {
      const std::string shape = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
      cases.push_back({"gemm bf16 " + shape, m, n, k, false, false});
      cases.push_back({"gemm+bias+gelu " + shape, m, n, k, true, false});
    }
    for (int64_t m : {16, 64, 128}) cases.push_back({"small-M gemm " + std::to_string(m) + "x8192x8192", m, 8192, 8192, false, false});
    cases.push_back({"gemm bf16 b[N,K] 8192x8192x8192", 8192, 8192, 8192, false, true});
    // KILN_MATMUL_SHAPES="MxNxK[t],...": plain GEMMs at these shapes ("t":
    // b stored [N, K]), before the cases above.
    if (const char* env = std::getenv("KILN_MATMUL_SHAPES")) {
      std::vector<Case> extra;
      std::string all = env;
      for (size_t at = 0; at < all.size();) {
        size_t end = all.find(',', at);
        if (end == std::string::npos) end = all.size();
        std::string item = all.substr(at, end - at);
        long long m = 0, n = 0, k = 0;
        if (std::sscanf(item.c_str(), "%lldx%lldx%lld", &m, &n, &k) == 3)
          extra.push_back({"shape " + item, m, n, k, false, item.back() == 't'});
        at = end + 1;
      }
      cases.insert(cases.begin(), extra.begin(), extra.end());
    }
    std::vector<std::string> filters(argv + 1, argv + argc);
    auto wanted = [&](const std::string& name) {
      if (filters.empty()) return true;
      for (const auto& f : filters)
        if (name.find(f) != std::string::npos) return true;
      return false;
    };
    // KILN_MATMUL_CONFIGS: configs (JSON objects separated by ';') each case
    // also runs with, next to the heuristic's.
    std::vector<std::string> configs;
    if (const char* env = std::getenv("KILN_MATMUL_CONFIGS")) {
      std::string all = env;
      for (size_t at = 0; at < all.size();) {
        size_t end = all.find(';', at);
        if (end == std::string::npos) end = all.size();
        if (end > at) configs.push_back(all.substr(at, end - at));
        at = end + 1;
      }
    }
    for (const Case& c : cases)
      if (wanted(c.name)) {
        runCase(c);
        for (const std::string& cfg : configs) try {
            runCase(c, cfg);
          } catch (const std::exception& e) {
            std::printf("%-34s config %s: %s\n", c.name.c_str(), cfg.c_str(), e.what());
          }
      }
    if (wanted("block")) runBlocks();
    if (wanted("compile")) compileTime();
    if (wanted("warm")) warmStart(argv[0]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_matmul: %s\n", e.what());
    return 1;
  }
  return 0;
}
