// Lesson 2: reductions, and what one kernel can hold.
//
// A transformer block's normalization: h = x + r (the residual add), then
// y = rmsnorm(h) * w. PyTorch eager runs this as half a dozen kernels, each
// reading or writing a whole [rows, 4096] tensor. In kiln it is one kernel:
// a group of threads owns a row, loads x and r once with 16-byte loads,
// keeps h in registers, reduces the sum of squares across the group (warp
// shuffles, then shared memory), and writes both outputs from the same
// registers. The mean of the squares is a reduction; the normalized row is
// a consumer that broadcasts the row's result back along the row: the
// planner puts both in the same kernel.
//
// Not everything fits in one kernel: a reduction of a reduction over other
// rows (cross-entropy's mean over the per-row losses) needs every row
// finished first. kiln splits such a graph into kernels that pass the
// intermediate through a workspace the Kernel owns, and explain() says why.
//
// On a machine without a GPU the lesson compiles both graphs, prints their
// plans and says it cannot run them.
#include <cmath>
#include <cstdio>
#include <random>

#include "kiln/kiln.h"
#include "kiln/runtime/timing.h"

using namespace kiln;

int main(int argc, char** argv) {
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 8192, cols = 4096;

  // 1. Residual add + rmsnorm, two outputs.
  Graph g;
  Tensor x = g.input("x", DType::BF16, {"rows", cols});
  Tensor r = g.input("r", DType::BF16, {"rows", cols});
  Tensor w = g.input("w", DType::BF16, {cols});
  Tensor h = x + r;
  g.output("h", h);
  g.output("y", rmsnorm(h, w, 1e-6));

  Kernel k = compile(g);
  std::printf("-- residual add + rmsnorm\n%s", k.explain().c_str());

  // 2. The mean cross-entropy loss: one kernel, whose last block to finish
  //    takes the mean of the per-row losses (explain() says so).
  Graph ce;
  Tensor logits = ce.input("logits", DType::BF16, {"rows", 32768});
  Tensor targets = ce.input("targets", DType::I64, {"rows"});
  ce.output("loss", cross_entropy(logits, targets, Reduction::Mean));
  Kernel kce = compile(ce);
  std::printf("\n-- cross_entropy (mean)\n%s", kce.explain().c_str());

  if (!rt::driverAvailable()) {
    std::printf("\nno GPU here: %s\nBoth graphs compiled; run this lesson on a machine with an NVIDIA GPU to "
                "launch them.\n",
                rt::driverUnavailableReason().c_str());
    return 0;
  }

  // 3. Run the norm on random data, outputs poisoned, and check both outputs
  //    against the fp64 reference evaluator.
  std::mt19937_64 rng(2);
  HostTensor hx(DType::BF16, {rows, cols}), hr(DType::BF16, {rows, cols}), hw(DType::BF16, {cols});
  hx.fillRandom(rng, -2, 2);
  hr.fillRandom(rng, -2, 2);
  hw.fillRandom(rng, 0.5, 1.5);
  rt::DeviceBuffer dx(hx.bytes()), dr(hr.bytes()), dw(hw.bytes()), dh(hx.bytes()), dy(hx.bytes());
  dx.upload(hx.data(), hx.bytes());
  dr.upload(hr.data(), hr.bytes());
  dw.upload(hw.data(), hw.bytes());
  dh.poison();
  dy.poison();
  TensorView vx(dx.data(), DType::BF16, {rows, cols}), vr(dr.data(), DType::BF16, {rows, cols}),
      vw(dw.data(), DType::BF16, {cols}), vh(dh.data(), DType::BF16, {rows, cols}),
      vy(dy.data(), DType::BF16, {rows, cols});
  k.launch({vx, vr, vw, vh, vy});

  EvalInputs in;
  in.tensors["x"] = hx;
  in.tensors["r"] = hr;
  in.tensors["w"] = hw;
  in.dims["rows"] = rows;
  auto ref = evaluate(g, in);
  int64_t bad = 0;
  double worst = 0;
  rt::DeviceBuffer* outs[2] = {&dh, &dy};
  for (int o = 0; o < 2; ++o) {
    HostTensor got(DType::BF16, {rows, cols});
    outs[o]->download(got.data(), got.bytes());
    for (int64_t i = 0; i < got.numel(); ++i) {
      double want = ref[o].exact[i];
      double err = std::fabs(got.get(i) - want) / std::max(1.0, std::fabs(want));
      if (!(err <= 1.6e-2)) ++bad;
      if (err > worst || std::isnan(err)) worst = std::isnan(err) ? INFINITY : err;
    }
  }
  std::printf("\nchecked h and y (%lld elements each) against the reference: max relative error %.3g, %lld "
              "outside 1.6e-2\n",
              static_cast<long long>(rows * cols), worst, static_cast<long long>(bad));

  // 4. Bandwidth: x, r and w read once, h and y written once.
  rt::BenchmarkResult b = rt::benchmark([&] { k.launch({vx, vr, vw, vh, vy}); }, 10, 100);
  double bytes = 4.0 * hx.bytes() + hw.bytes();
  std::printf("residual add + rmsnorm: median %.1f us, p95 %.1f us: %.2f TB/s effective, in %zu kernel\n",
              b.medianUs, b.p95Us, bytes / (b.medianUs * 1e-6) / 1e12, k.compiled().kernels.size());
  return bad == 0 ? 0 : 1;
}
