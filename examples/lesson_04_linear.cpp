// Lesson 4: a linear layer with its epilogue for free.
//
// y = gelu_tanh(x @ W + b): x [tokens, 4096], W [4096, 4096], b [4096], all
// bf16. In PyTorch eager this is a GEMM, then an add and the gelu as more
// kernels that read and write the whole [tokens, 4096] output again. kiln
// compiles the graph into ONE kernel: the matmul (on Hopper: TMA loads into
// a shared-memory ring, wgmma on two consumer warpgroups, a producer
// warpgroup, a persistent grid) whose epilogue adds the bias and applies the
// gelu to the accumulators in registers before the single store.
//
// The steps: describe the graph, compile it, look at the generated CUDA C++
// (`kiln compile examples/graphs/linear_bias_gelu.kiln --emit=cuda` prints
// the same), run it, check it against the fp64 reference, and time it next
// to the plain GEMM: the epilogue should cost (almost) nothing. On a machine
// without a GPU the lesson compiles, prints the kernel summary and says it
// cannot run.
#include <cmath>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <random>

#include "kiln/kiln.h"
#include "kiln/runtime/timing.h"

using namespace kiln;

int main(int argc, char** argv) {
  const int64_t tokens = argc > 1 ? std::atoll(argv[1]) : 4096, features = 4096;

  // 1. The layer. "tokens" is a dynamic dim bound at launch; the weight's
  //    shape is static, so the kernel's tiles and tensor maps know it.
  Graph g;
  Tensor x = g.input("x", DType::BF16, {"tokens", features});
  Tensor w = g.input("w", DType::BF16, {features, features});
  Tensor b = g.input("b", DType::BF16, {features});
  g.output("y", gelu_tanh(matmul(x, w) + b));

  // The same GEMM without the epilogue, to compare against.
  Graph plain;
  plain.output("y", matmul(plain.input("x", DType::BF16, {"tokens", features}),
                           plain.input("w", DType::BF16, {features, features})));

  // 2. Compile: one kernel, the matmul schedule, 12 fused epilogue ops.
  Kernel k = compile(g, {.dims = {{"tokens", tokens}}});
  Kernel kp = compile(plain, {.dims = {{"tokens", tokens}}});
  std::printf("%s", k.explain().c_str());
  for (const auto& ck : k.compiled().kernels)
    std::printf("compiled %s in %.0f ms (generate CUDA C++, NVRTC, ptxas; disk cache: %s)\n", ck.name.c_str(),
                ck.compileMs, ck.cache.c_str());

  if (!rt::driverAvailable()) {
    std::printf("\nno GPU here: %s\nThe kernel compiled; run this lesson on a machine with an NVIDIA GPU to launch "
                "it.\n",
                rt::driverUnavailableReason().c_str());
    return 0;
  }

  // 3. Data and a poisoned output.
  std::mt19937_64 rng(4);
  HostTensor hx(DType::BF16, {tokens, features}), hw(DType::BF16, {features, features}), hb(DType::BF16, {features});
  hx.fillRandom(rng, -1, 1);
  hw.fillRandom(rng, -0.05, 0.05);
  hb.fillRandom(rng, -1, 1);
  rt::DeviceBuffer dx(hx.bytes()), dw(hw.bytes()), db(hb.bytes()), dy(hx.bytes());
  dx.upload(hx.data(), hx.bytes());
  dw.upload(hw.data(), hw.bytes());
  db.upload(hb.data(), hb.bytes());
  dy.poison();
  TensorView vx(dx.data(), DType::BF16, {tokens, features}), vw(dw.data(), DType::BF16, {features, features}),
      vb(db.data(), DType::BF16, {features}), vy(dy.data(), DType::BF16, {tokens, features});
  k.launch({vx, vw, vb, vy});

  // 4. Check against the reference evaluator on the first 64 tokens (the
  //    fp64 reference of the whole layer would take minutes on the host).
  const int64_t checked = std::min<int64_t>(tokens, 64);
  HostTensor hy(DType::BF16, {tokens, features});
  dy.download(hy.data(), hy.bytes());
  Graph head;
  head.output("y", gelu_tanh(matmul(head.input("x", DType::BF16, {checked, features}),
                                    head.input("w", DType::BF16, {features, features})) +
                             head.input("b", DType::BF16, {features})));
  HostTensor hxHead(DType::BF16, {checked, features});
  std::memcpy(hxHead.data(), hx.data(), hxHead.bytes());
  EvalInputs in;
  in.tensors["x"] = hxHead;
  in.tensors["w"] = hw;
  in.tensors["b"] = hb;
  auto ref = evaluate(head, in);
  double worst = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < checked * features; ++i) {
    double want = ref[0].exact[i], got = hy.get(i);
    double err = std::fabs(got - want) / std::max(1.0, std::fabs(want));
    if (!(err <= 1e-2)) ++bad;
    if (err > worst || std::isnan(err)) worst = std::isnan(err) ? INFINITY : err;
  }
  std::printf("checked %lld elements (first %lld tokens) against the reference: max relative error %.3g, %lld "
              "outside 1e-2\n",
              static_cast<long long>(checked * features), static_cast<long long>(checked), worst,
              static_cast<long long>(bad));

  // 5. Time the fused layer and the plain GEMM.
  const double flops = 2.0 * tokens * features * features;
  rt::BenchmarkResult fused = rt::benchmark([&] { k.launch({vx, vw, vb, vy}); }, 5, 50);
  rt::BenchmarkResult gemm = rt::benchmark([&] { kp.launch({vx, vw, vy}); }, 5, 50);
  std::printf("plain GEMM          %8.1f us  %6.1f TFLOP/s\n", gemm.medianUs, flops / (gemm.medianUs * 1e-6) / 1e12);
  std::printf("GEMM + bias + gelu  %8.1f us  %6.1f TFLOP/s  (%.3f x the plain GEMM's time)\n", fused.medianUs,
              flops / (fused.medianUs * 1e-6) / 1e12, fused.medianUs / gemm.medianUs);
  return bad == 0 ? 0 : 1;
}
