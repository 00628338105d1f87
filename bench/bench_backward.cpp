// Gradient benchmarks on the GPU: the op library's backward ops at training
// shapes, each built as one graph and compiled by kiln::compile with the
// heuristic's configs:
//   rmsnorm_backward    bf16 and f32 32768x4096, bf16 4096x32768 (dx, dweight)
//   layernorm_backward  bf16 32768x4096 and 4096x32768 (dx, dweight, dbias)
//   softmax_backward    bf16 32768x4096 (dx from dy and the forward output y)
//   cross_entropy_backward  bf16 8192x32768 logits, mean (dlogits)
//   gelu_backward (tanh)    bf16 32768x4096 (a pointwise control)
//
//   bench_backward               every case
//   bench_backward rmsnorm f32   the cases whose name contains any argument
//   bench_backward --list        the case names
//
// Every case is checked once before it is timed: outputs poisoned (NaN), one
// launch, then every output element against fp64 formulas evaluated on the
// host over all rows (all cores): dx row by row, dweight and dbias as sums
// over every row. Tolerances: 1e-2 relative for bf16 outputs, 1e-4 for f32
// ones (below 1 in magnitude: absolute; the sums over rows: below sqrt(rows)).
//
// Timing: rt::benchmark (CUDA events around each launch of the whole graph:
// all its kernels; 10 warm-ups, median and p95 of 100 runs, L2 flushed before
// each run). Effective TB/s = (every input read once + every output written
// once) / median. Prints a table line and a `JSON {...}` line per case, and
// writes the JSON lines to $OUT/kiln_backward.jsonl when OUT is set; the
// anchors are bench/anchors_backward.py (same names, same bytes). Exit
// status: 0 when every case compiled, ran and matched; 1 otherwise; 77
// without a GPU (after compiling the selected cases, which needs no GPU).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_common.h"
#include "kiln/dsl/oplib.h"
#include "kiln/kiln.h"
#include "kiln/runtime/device.h"
#include "kiln/runtime/timing.h"

using namespace kiln;
using json = nlohmann::json;

namespace {

enum class Kind { RmsNorm, LayerNorm, Softmax, CrossEntropy, Gelu };

struct Case {
  Kind kind;
  int64_t rows, cols;
  DType dtype;
  std::string op() const {
    switch (kind) {
      case Kind::RmsNorm: return "rmsnorm_backward";
      case Kind::LayerNorm: return "layernorm_backward";
      case Kind::Softmax: return "softmax_backward";
      case Kind::CrossEntropy: return "cross_entropy_backward";
      case Kind::Gelu: return "gelu_tanh_backward";
    }
    return "?";
  }
  std::string name() const {
    return op() + " [" + std::to_string(rows) + "x" + std::to_string(cols) + " " +
           (dtype == DType::BF16 ? "bfloat16" : "float32") + "]";
  }
};

std::vector<Case> allCases() {
  return {{Kind::RmsNorm, 32768, 4096, DType::BF16},   {Kind::LayerNorm, 32768, 4096, DType::BF16},
          {Kind::RmsNorm, 32768, 4096, DType::F32},    {Kind::RmsNorm, 4096, 32768, DType::BF16},
          {Kind::LayerNorm, 4096, 32768, DType::BF16}, {Kind::Softmax, 32768, 4096, DType::BF16},
          {Kind::CrossEntropy, 8192, 32768, DType::BF16}, {Kind::Gelu, 32768, 4096, DType::BF16}};
}

constexpr double kEps = 1e-5;

Graph buildGraph(const Case& c) {
  Graph g;
  const DType t = c.dtype;
  const Shape shape = {c.rows, c.cols};
  switch (c.kind) {
    case Kind::RmsNorm:
    case Kind::LayerNorm: {
      Tensor dy = g.input("dy", t, shape), x = g.input("x", t, shape), w = g.input("w", t, {c.cols});
      NormGrads r = c.kind == Kind::RmsNorm ? rmsnorm_backward(dy, x, w, kEps)
                                            : layernorm_backward(dy, x, w, g.input("b", t, {c.cols}), kEps);
      g.output("dx", r.dx);
      g.output("dw", r.dweight);
      if (r.dbias.valid()) g.output("db", r.dbias);
      break;
    }
    case Kind::Softmax:
      g.output("dx", softmax_backward(g.input("dy", t, shape), g.input("y", t, shape)));
      break;
    case Kind::CrossEntropy: {
      Tensor logits = g.input("logits", t, shape);
      Tensor targets = g.input("targets", DType::I64, {c.rows});
      g.output("dlogits", cross_entropy_backward(g.input("dloss", DType::F32, {}), logits, targets));
      break;
    }
    case Kind::Gelu:
      g.output("dx", gelu_backward(g.input("dy", t, shape), g.input("x", t, shape), GeluApproximation::Tanh));
      break;
  }
  return g;
}

// ---------------------------------------------------------------- inputs

uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

unsigned hostThreads() { return std::max(1u, std::min(32u, std::thread::hardware_concurrency())); }

void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t parts = std::min<int64_t>(hostThreads(), std::max<int64_t>(1, n / 64));
  std::vector<std::thread> ts;
  for (int64_t p = 0; p < parts; ++p) ts.emplace_back([&, p] { fn(n * p / parts, n * (p + 1) / parts); });
  for (std::thread& t : ts) t.join();
}

// A host tensor in storage format, readable as doubles.
struct Host {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  double at(int64_t i) const {
    switch (dtype) {
      case DType::F32: {
        float f;
        std::memcpy(&f, bytes.data() + 4 * i, 4);
        return f;
      }
      case DType::BF16: {
        uint16_t b;
        std::memcpy(&b, bytes.data() + 2 * i, 2);
        return bf16BitsToDouble(b);
      }
      case DType::I64: {
        int64_t v;
        std::memcpy(&v, bytes.data() + 8 * i, 8);
        return static_cast<double>(v);
      }
      default: throw Error("bench_backward: unexpected dtype");
    }
  }
  void set(int64_t i, double v) {
    if (dtype == DType::F32) {
      float f = static_cast<float>(v);
      std::memcpy(bytes.data() + 4 * i, &f, 4);
    } else if (dtype == DType::BF16) {
      uint16_t b = doubleToBF16Bits(v);
      std::memcpy(bytes.data() + 2 * i, &b, 2);
    } else {
      int64_t x = static_cast<int64_t>(v);
      std::memcpy(bytes.data() + 8 * i, &x, 8);
    }
  }
};

Host makeInput(const Node& n, const Case& c, uint64_t seed) {
  Host h;
  h.dtype = n.dtype;
  for (const Dim& d : n.shape) h.shape.push_back(d.size);
  h.bytes.resize(static_cast<size_t>(h.numel()) * dtypeSize(n.dtype));
  double lo = -1, hi = 1;
  if (n.name == "x") lo = -2, hi = 2;
  if (n.name == "w") lo = 0.5, hi = 1.5;
  if (n.name == "y") lo = 0, hi = 2.0 / static_cast<double>(c.cols);  // about a probability row
  if (n.name == "logits") lo = -4, hi = 4;
  if (n.name == "dloss") lo = 0.5, hi = 2;
  parallelFor(h.numel(), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const uint64_t r = mix64((seed << 52) ^ static_cast<uint64_t>(i));
      if (n.dtype == DType::I64) h.set(i, static_cast<double>(r % static_cast<uint64_t>(c.cols)));
      else h.set(i, lo + (hi - lo) * (static_cast<double>(r >> 11) * 0x1.0p-53));
    }
  });
  return h;
}

// ---------------------------------------------------------------- fp64 check

using Inputs = std::map<std::string, Host>;
using Outputs = std::map<std::string, std::vector<double>>;  // every element of each output

// The formulas of the op library's gradients, in fp64 over every row.
Outputs expected(const Case& c, const Inputs& in) {
  const int64_t R = c.rows, N = c.cols;
  Outputs out;
  std::vector<double>& dx = out[c.kind == Kind::CrossEntropy ? "dlogits" : "dx"];
  dx.assign(static_cast<size_t>(R * N), 0);
  const bool norm = c.kind == Kind::RmsNorm || c.kind == Kind::LayerNorm;
  const int64_t parts = hostThreads();
  std::vector<std::vector<double>> dwPart(parts), dbPart(parts);
  parallelFor(parts, [&](int64_t pb, int64_t pe) {
    for (int64_t p = pb; p < pe; ++p) {
      std::vector<double> dw(norm ? N : 0, 0.0), db(norm ? N : 0, 0.0), row(static_cast<size_t>(N));
      for (int64_t r = R * p / parts; r < R * (p + 1) / parts; ++r) {
        const int64_t o = r * N;
        if (norm) {
          const Host &X = in.at("x"), &DY = in.at("dy"), &W = in.at("w");
          double mean = 0, ss = 0;
          if (c.kind == Kind::LayerNorm)
            for (int64_t j = 0; j < N; ++j) mean += X.at(o + j);
          mean /= static_cast<double>(N);
          for (int64_t j = 0; j < N; ++j) ss += (X.at(o + j) - mean) * (X.at(o + j) - mean);
          const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(N) + kEps);
          double mg = 0, mgx = 0;
          for (int64_t j = 0; j < N; ++j) {
            const double xh = (X.at(o + j) - mean) * rstd, g = DY.at(o + j) * W.at(j);
            row[j] = xh;
            mg += g;
            mgx += g * xh;
            dw[j] += DY.at(o + j) * xh;
            db[j] += DY.at(o + j);
          }
          mg /= static_cast<double>(N);
          mgx /= static_cast<double>(N);
          if (c.kind == Kind::RmsNorm) mg = 0;
          for (int64_t j = 0; j < N; ++j) dx[o + j] = rstd * (DY.at(o + j) * W.at(j) - mg - row[j] * mgx);
        } else if (c.kind == Kind::Softmax) {
          const Host &Y = in.at("y"), &DY = in.at("dy");
          double dot = 0;
          for (int64_t j = 0; j < N; ++j) dot += DY.at(o + j) * Y.at(o + j);
          for (int64_t j = 0; j < N; ++j) dx[o + j] = Y.at(o + j) * (DY.at(o + j) - dot);
        } else if (c.kind == Kind::CrossEntropy) {
          const Host& L = in.at("logits");
          const double scale = in.at("dloss").at(0) / static_cast<double>(R);
          const int64_t t = static_cast<int64_t>(in.at("targets").at(r));
          double m = -INFINITY, s = 0;
          for (int64_t j = 0; j < N; ++j) m = std::max(m, L.at(o + j));
          for (int64_t j = 0; j < N; ++j) s += std::exp(L.at(o + j) - m);
          for (int64_t j = 0; j < N; ++j) dx[o + j] = (std::exp(L.at(o + j) - m) / s - (j == t ? 1.0 : 0.0)) * scale;
        } else {
          const Host &X = in.at("x"), &DY = in.at("dy");
          const double k = std::sqrt(2.0 / M_PI), cc = 0.044715;
          for (int64_t j = 0; j < N; ++j) {
            const double v = X.at(o + j), t = std::tanh(k * (v + cc * v * v * v));
            dx[o + j] = DY.at(o + j) * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k * (1 + 3 * cc * v * v));
          }
        }
      }
      dwPart[p] = std::move(dw);
      dbPart[p] = std::move(db);
    }
  });
  if (norm) {
    std::vector<double>& dw = out["dw"];
    dw.assign(static_cast<size_t>(N), 0);
    std::vector<double> db(static_cast<size_t>(N), 0);
    for (int64_t p = 0; p < parts; ++p)
      for (int64_t j = 0; j < N; ++j) {
        dw[j] += dwPart[p][j];
        db[j] += dbPart[p][j];
      }
    if (c.kind == Kind::LayerNorm) out["db"] = db;
  }
  return out;
}

// Elements outside tolerance; prints the first.
int64_t compare(const std::string& name, const Host& got, const std::vector<double>& want, double floor) {
  const double tol = got.dtype == DType::BF16 ? 1e-2 : 1e-4;
  int64_t bad = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.at(i), w = want[static_cast<size_t>(i)];
    if (std::fabs(g - w) <= tol * std::max(floor, std::fabs(w))) continue;
    if (bad++ == 0) std::printf("    %s[%lld]: got %.8g, want %.8g\n", name.c_str(), static_cast<long long>(i), g, w);
  }
  return bad;
}

// ---------------------------------------------------------------- run

std::ofstream jsonOut;

void emitJson(const json& j) {
  const std::string line = j.dump();
  std::printf("JSON %s\n", line.c_str());
  std::fflush(stdout);
  if (jsonOut) jsonOut << line << "\n" << std::flush;
}

std::string kernelSummary(const Kernel& k) {
  std::string s;
  for (const compiler::CompiledKernel& ck : k.compiled().kernels)
    s += "    " + ck.name + " " + ck.schedule + " " + ck.config + "\n";
  return s;
}

bool runCase(const Case& c) {
  std::printf("\n== %s\n", c.name().c_str());
  try {
    const Graph g = buildGraph(c);
    Kernel k = compile(g);
    std::printf("%s", kernelSummary(k).c_str());
    Inputs in;
    std::vector<rt::DeviceBuffer> bufs;
    std::vector<TensorView> views;
    uint64_t seed = 1;
    for (int id : g.params()) {
      const Node& n = g.node(id);
      Host h = makeInput(n, c, seed++);
      bufs.emplace_back(h.bytes.size());
      bufs.back().upload(h.bytes.data(), h.bytes.size());
      views.emplace_back(bufs.back().data(), h.dtype, h.shape);
      in[n.name] = std::move(h);
    }
    std::vector<Host> outs;
    for (const GraphOutput& o : g.outputs()) {
      const Node& n = g.node(o.node);
      Host h;
      h.dtype = n.dtype;
      for (const Dim& d : n.shape) h.shape.push_back(d.size);
      h.bytes.resize(static_cast<size_t>(h.numel()) * dtypeSize(n.dtype));
      bufs.emplace_back(h.bytes.size());
      bufs.back().poison();
      views.emplace_back(bufs.back().data(), h.dtype, h.shape);
      outs.push_back(std::move(h));
    }
    k.launch(std::span<const TensorView>(views));
    const Outputs want = expected(c, in);
    int64_t bad = 0;
    const size_t first = bufs.size() - outs.size();
    for (size_t i = 0; i < outs.size(); ++i) {
      const std::string& name = g.outputs()[i].name;
      bufs[first + i].download(outs[i].bytes.data(), outs[i].bytes.size());
      const bool overRows = name == "dw" || name == "db";
      bad += compare(name, outs[i], want.at(name), overRows ? std::sqrt(static_cast<double>(c.rows)) : 1.0);
    }
    std::printf("  check: %s (every element of %zu output(s) against fp64)\n", bad ? "FAIL" : "ok", outs.size());
    rt::BenchmarkOptions bo;
    bo.flushL2 = true;
    rt::BenchmarkResult r = rt::benchmark([&] { k.launch(std::span<const TensorView>(views)); }, bo);
    const double bytes = bench::minBytes(g), tbps = bytes / (r.medianUs * 1e-6) / 1e12;
    std::printf("  %-48s %9.1f us (p95 %.1f)  %.3f TB/s  %zu kernel(s)\n", c.name().c_str(), r.medianUs, r.p95Us, tbps,
                k.compiled().kernels.size());
    emitJson({{"op", c.name()}, {"impl", "kiln"}, {"median_us", r.medianUs}, {"p95_us", r.p95Us}, {"TBps", tbps},
              {"bytes", bytes}, {"kernels", k.compiled().kernels.size()}, {"check", bad ? "FAIL" : "ok"}});
    return bad == 0;
  } catch (const std::exception& e) {
    std::printf("  FAIL: %s\n", e.what());
    return false;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> filters;
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--list") list = true;
    else filters.push_back(argv[i]);
  }
  std::vector<Case> cases;
  for (const Case& c : allCases()) {
    bool take = filters.empty();
    for (const std::string& f : filters) take = take || c.name().find(f) != std::string::npos;
    if (take) cases.push_back(c);
  }
  if (list) {
    for (const Case& c : cases) std::printf("%s\n", c.name().c_str());
    return 0;
  }
  if (!rt::driverAvailable()) {
    std::printf("bench_backward: no GPU, so nothing runs (%s); compiling the %zu case(s) only:\n",
                rt::driverUnavailableReason().c_str(), cases.size());
    int failed = 0;
    for (const Case& c : cases) {
      try {
        compiler::CompiledGraph cg = compiler::compileGraph(buildGraph(c));
        std::printf("  %s: %zu kernel(s)\n", c.name().c_str(), cg.kernels.size());
      } catch (const std::exception& e) {
        std::printf("  %s: FAIL: %s\n", c.name().c_str(), e.what());
        ++failed;
      }
    }
    return failed ? 1 : 77;
  }
  if (const char* out = std::getenv("OUT")) jsonOut.open(std::string(out) + "/kiln_backward.jsonl");
  std::printf("%s; %u host threads\n", rt::Device::current().properties().summary().c_str(), hostThreads());
  std::vector<std::string> failed;
  for (const Case& c : cases)
    if (!runCase(c)) failed.push_back(c.name());
  std::printf("\nbench_backward: %zu of %zu case(s) passed\n", cases.size() - failed.size(), cases.size());
  for (const std::string& n : failed) std::printf("  FAIL %s\n", n.c_str());
  return failed.empty() ? 0 : 1;
}
