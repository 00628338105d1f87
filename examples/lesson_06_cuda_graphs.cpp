// Lesson 6: kiln inside an application that uses the CUDA runtime — memory
// from cudaMalloc, a cudaStream_t, and the launches captured into a CUDA
// graph.
//
// kiln kernels take any device pointer (TensorView) and any stream (a
// CUstream or cudaStream_t, passed as void*), and run in the context that
// is current on the calling thread — the CUDA runtime's primary context, as
// PyTorch's. A launch only enqueues kernels, so it captures like any other:
// cudaStreamBeginCapture, launch, cudaStreamEndCapture, then one
// cudaGraphLaunch replays all of it, for a fraction of the host cost of the
// launches it holds. What a first launch may do besides (load a module,
// allocate a workspace) belongs before the capture: launch once first.
//
// The work: a decoder step's memory-bound tail at a small batch, repeated
// over 16 layers — h = x + r and y = rmsnorm(h) * w (one kernel, two
// outputs), then z = gelu_tanh(y + b) (one kernel). At 64 tokens each
// kernel moves a few hundred kilobytes, so the host's launch cost is what
// limits a step; the graph removes most of it.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "kiln/kiln.h"

using namespace kiln;

namespace {

#define CUDART(expr)                                                                        \
  do {                                                                                      \
    const cudaError_t e_ = (expr);                                                          \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s failed: %s (%s)\n", #expr, cudaGetErrorName(e_), cudaGetErrorString(e_)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

double nowUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Device memory from the CUDA runtime, filled from a host tensor.
void* upload(const HostTensor& h) {
  void* p = nullptr;
  CUDART(cudaMalloc(&p, h.bytes()));
  CUDART(cudaMemcpy(p, h.data(), h.bytes(), cudaMemcpyHostToDevice));
  return p;
}

// The largest relative error (floor 1) of `dev` against the reference.
double worstError(const EvalOutput& want, const void* dev) {
  HostTensor got(want.value.dtype(), want.value.shape());
  CUDART(cudaMemcpy(got.data(), dev, got.bytes(), cudaMemcpyDeviceToHost));
  double worst = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double e = std::fabs(got.get(i) - want.exact[i]) / std::max(1.0, std::fabs(want.exact[i]));
    worst = std::isnan(e) ? INFINITY : std::max(worst, e);
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t tokens = argc > 1 ? std::atoll(argv[1]) : 64, hidden = 4096;
  const int layers = 16;

  // 1. Two graphs, each one kernel; "T" (tokens) is bound at launch.
  Graph norm;
  {
    Tensor x = norm.input("x", DType::BF16, {"T", hidden});
    Tensor r = norm.input("r", DType::BF16, {"T", hidden});
    Tensor w = norm.input("w", DType::BF16, {hidden});
    Tensor h = x + r;
    norm.output("h", h);
    norm.output("y", rmsnorm(h, w, 1e-6));
  }
  Graph act;
  {
    Tensor y = act.input("y", DType::BF16, {"T", hidden});
    Tensor b = act.input("b", DType::BF16, {hidden});
    act.output("z", gelu_tanh(y + b));
  }
  CompileOptions options;
  options.dims = {{"T", tokens}};
  Kernel kn = compile(norm, options), ka = compile(act, options);
  std::printf("-- residual add + rmsnorm\n%s-- bias + gelu\n%s", kn.explain().c_str(), ka.explain().c_str());

  if (!rt::driverAvailable()) {
    std::printf("\nno GPU here: %s\nBoth kernels compiled; run this lesson on a machine with an NVIDIA GPU to "
                "launch them on a CUDA runtime stream and capture them into a CUDA graph.\n",
                rt::driverUnavailableReason().c_str());
    return 0;
  }

  // 2. The CUDA runtime's memory and stream. Each layer reads the previous
  //    layer's z as its residual r, so the 16 layers form one chain.
  std::mt19937_64 rng(6);
  HostTensor hx(DType::BF16, {tokens, hidden}), hr(DType::BF16, {tokens, hidden}), hw(DType::BF16, {hidden}),
      hb(DType::BF16, {hidden});
  hx.fillRandom(rng, -2, 2);
  hr.fillRandom(rng, -2, 2);
  hw.fillRandom(rng, 0.5, 1.5);
  hb.fillRandom(rng, -0.5, 0.5);
  void* x = upload(hx);
  void* w = upload(hw);
  void* b = upload(hb);
  std::vector<void*> z(layers + 1), h(layers), y(layers);
  const size_t act_bytes = hx.bytes();
  z[0] = upload(hr);
  for (int l = 0; l < layers; ++l) {
    CUDART(cudaMalloc(&h[l], act_bytes));
    CUDART(cudaMalloc(&y[l], act_bytes));
    CUDART(cudaMalloc(&z[l + 1], act_bytes));
  }
  cudaStream_t stream;
  CUDART(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  const std::vector<int64_t> shape = {tokens, hidden}, row = {hidden};
  auto step = [&] {
    for (int l = 0; l < layers; ++l) {
      kn.launch({TensorView(x, DType::BF16, shape), TensorView(z[l], DType::BF16, shape),
                 TensorView(w, DType::BF16, row), TensorView(h[l], DType::BF16, shape),
                 TensorView(y[l], DType::BF16, shape)},
                {tokens}, {}, stream);
      ka.launch({TensorView(y[l], DType::BF16, shape), TensorView(b, DType::BF16, row),
                 TensorView(z[l + 1], DType::BF16, shape)},
                {tokens}, {}, stream);
    }
  };

  // 3. Launched directly on the stream (this also loads everything once),
  //    then checked: the first layer against the fp64 reference.
  step();
  CUDART(cudaStreamSynchronize(stream));
  EvalInputs in;
  in.tensors["x"] = hx;
  in.tensors["r"] = hr;
  in.tensors["w"] = hw;
  in.dims["T"] = tokens;
  std::vector<EvalOutput> refNorm = evaluate(norm, in);
  EvalInputs inAct;
  inAct.tensors["y"] = refNorm[1].value;
  inAct.tensors["b"] = hb;
  inAct.dims["T"] = tokens;
  std::vector<EvalOutput> refAct = evaluate(act, inAct);
  const double errH = worstError(refNorm[0], h[0]), errY = worstError(refNorm[1], y[0]),
               errZ = worstError(refAct[0], z[1]);
  std::printf("\nlayer 0 against the reference: h %.3g, y %.3g, z %.3g (max relative error)\n", errH, errY, errZ);
  HostTensor direct(DType::BF16, shape);
  CUDART(cudaMemcpy(direct.data(), z[layers], act_bytes, cudaMemcpyDeviceToHost));

  // 4. The same 32 launches captured into a CUDA graph (global mode, the
  //    strictest) and replayed; the result must be the same bits.
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDART(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  step();
  CUDART(cudaStreamEndCapture(stream, &graph));
  CUDART(cudaGraphInstantiate(&exec, graph, 0));
  CUDART(cudaMemsetAsync(z[layers], 0xff, act_bytes, stream));
  CUDART(cudaGraphLaunch(exec, stream));
  CUDART(cudaStreamSynchronize(stream));
  HostTensor replayed(DType::BF16, shape);
  CUDART(cudaMemcpy(replayed.data(), z[layers], act_bytes, cudaMemcpyDeviceToHost));
  const bool same = std::memcmp(direct.data(), replayed.data(), act_bytes) == 0;
  std::printf("graph replay of %d launches: last layer's output %s the direct launches'\n", 2 * layers,
              same ? "bit for bit equal to" : "DIFFERENT from");

  // 5. Time per step (32 kernels), from the host's first call to the
  //    stream's end, median of 50 steps each way.
  auto timeSteps = [&](auto&& run) {
    std::vector<double> us;
    for (int i = 0; i < 55; ++i) {
      const double t0 = nowUs();
      run();
      CUDART(cudaStreamSynchronize(stream));
      if (i >= 5) us.push_back(nowUs() - t0);
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
  };
  const double directUs = timeSteps(step);
  const double graphUs = timeSteps([&] { CUDART(cudaGraphLaunch(exec, stream)); });
  std::printf("%d tokens, %d layers (%d kernels): direct launches %.1f us a step, CUDA graph %.1f us (%.2fx)\n",
              static_cast<int>(tokens), layers, 2 * layers, directUs, graphUs, directUs / graphUs);

  CUDART(cudaGraphExecDestroy(exec));
  CUDART(cudaGraphDestroy(graph));
  CUDART(cudaStreamDestroy(stream));
  for (void* p : {x, w, b}) CUDART(cudaFree(p));
  for (int l = 0; l < layers; ++l) {
    CUDART(cudaFree(h[l]));
    CUDART(cudaFree(y[l]));
    CUDART(cudaFree(z[l + 1]));
  }
  CUDART(cudaFree(z[0]));
  const bool ok = errH <= 1e-2 && errY <= 1.6e-2 && errZ <= 1.6e-2 && same;
  std::printf("%s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
