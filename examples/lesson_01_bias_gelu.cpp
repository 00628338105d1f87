// Lesson 1: the first fused kernel, end to end.
//
// y = gelu_tanh(x + b) over a [rows, 4096] bf16 tensor with a bias row b.
// Written as PyTorch eager code this is five kernels (add, and the four
// elementwise ops of gelu's tanh form), each reading and writing the whole
// tensor. kiln fuses it into one kernel that reads x and b once and writes y
// once: the only lever a memory-bound op has is moving fewer bytes.
//
// The steps: describe the graph, compile it (graph → MLIR → PTX → cubin),
// look at what came out, launch it on real data, check it against the fp64
// reference evaluator, and measure its bandwidth. On a machine without a GPU
// the lesson compiles, prints the kernel summary and says it cannot run.
#include <cmath>
#include <cstdio>
#include <random>

#include "kiln/kiln.h"
#include "kiln/runtime/timing.h"

using namespace kiln;

int main(int argc, char** argv) {
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 8192, cols = 4096;

  // 1. The algorithm: what to compute. "rows" is a dynamic dim, bound at
  //    launch, so one kernel serves every batch size.
  Graph g;
  Tensor x = g.input("x", DType::BF16, {"rows", cols});
  Tensor b = g.input("b", DType::BF16, {cols});
  g.output("y", gelu_tanh(x + b));

  // 2. Compile. The schedule (how) comes from a heuristic; explain() shows
  //    it, with the registers the kernel uses. The cubin goes to the disk
  //    cache: a second run of this lesson loads it instead of compiling
  //    ("disk cache: hit"; the time shown is the original compile's).
  Kernel k = compile(g);
  std::printf("%s", k.explain().c_str());
  for (const auto& ck : k.compiled().kernels)
    std::printf("compiled %s in %.1f ms (graph -> cubin; disk cache: %s)\n", ck.name.c_str(), ck.compileMs,
                ck.cache.c_str());

  if (!rt::driverAvailable()) {
    std::printf("\nno GPU here: %s\nThe kernel compiled for %s; run this lesson on a machine with an NVIDIA GPU "
                "to launch it.\n",
                rt::driverUnavailableReason().c_str(), k.compiled().kernels.empty() ? "?" : "sm_90");
    return 0;
  }

  // 3. Data: random inputs on the host, copied to the device; the output
  //    poisoned (NaN bytes) so an element the kernel forgets shows up.
  std::mt19937_64 rng(1);
  HostTensor hx(DType::BF16, {rows, cols}), hb(DType::BF16, {cols});
  hx.fillRandom(rng, -3, 3);
  hb.fillRandom(rng, -1, 1);
  rt::DeviceBuffer dx(hx.bytes()), db(hb.bytes()), dy(hx.bytes());
  dx.upload(hx.data(), hx.bytes());
  db.upload(hb.data(), hb.bytes());
  dy.poison();

  TensorView vx(dx.data(), DType::BF16, {rows, cols}), vb(db.data(), DType::BF16, {cols}),
      vy(dy.data(), DType::BF16, {rows, cols});
  k.launch({vx, vb, vy});

  // 4. Check against the reference evaluator (fp64, rounded to bf16 at the
  //    output). bf16 outputs agree within a couple of bf16 ulps.
  HostTensor hy(DType::BF16, {rows, cols});
  dy.download(hy.data(), hy.bytes());
  EvalInputs in;
  in.tensors["x"] = hx;
  in.tensors["b"] = hb;
  in.dims["rows"] = rows;
  auto ref = evaluate(g, in);
  double worst = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < hy.numel(); ++i) {
    double want = ref[0].exact[i], got = hy.get(i);
    double err = std::fabs(got - want) / std::max(1.0, std::fabs(want));
    if (!(err <= 1e-2)) ++bad;
    if (err > worst || std::isnan(err)) worst = std::isnan(err) ? INFINITY : err;
  }
  std::printf("checked %lld elements against the reference: max relative error %.3g, %lld outside 1e-2\n",
              static_cast<long long>(hy.numel()), worst, static_cast<long long>(bad));

  // 5. Bandwidth: bytes that must move (x and y once, b once) over the median
  //    time of many launches.
  rt::BenchmarkResult r = rt::benchmark([&] { k.launch({vx, vb, vy}); }, 10, 100);
  double bytes = 2.0 * hx.bytes() + hb.bytes();
  std::printf("median %.1f us, p95 %.1f us: %.2f TB/s effective\n", r.medianUs, r.p95Us,
              bytes / (r.medianUs * 1e-6) / 1e12);
  return bad == 0 ? 0 : 1;
}
