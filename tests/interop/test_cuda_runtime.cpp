// kiln next to the CUDA runtime (what PyTorch and most applications use):
// kernels launched on cudaMalloc'd memory and cudaStream_t streams, and
// launches captured into CUDA graphs (cudaStreamBeginCapture) and replayed.
// Every [gpu] case draws fresh inputs, poisons outputs before each run and
// compares them with the fp64 reference evaluator.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <vector>

#include "../gpu_support.h"
#include "kiln/dsl/text.h"
#include "kiln/kiln.h"
#include "kiln/runtime/aot.h"
#include "kiln/runtime/capture.h"
#include "center_columns_aot.h"
#include "cross_entropy_aot.h"
#include "gelu_bias_aot.h"
#include "softmax_aot.h"

using Catch::Matchers::Contains;
using namespace kiln;
using kiln::test::checkOutput;
using kiln::test::freshSeed;
using kiln::test::requireGpu;

namespace {

#define CUDART(expr)                                                                       \
  do {                                                                                     \
    const cudaError_t e_ = (expr);                                                         \
    INFO(#expr);                                                                           \
    REQUIRE(std::string(cudaGetErrorName(e_)) == std::string(cudaGetErrorName(cudaSuccess))); \
  } while (0)

// The graphs, as the ahead-of-time headers hold their text (CMakeLists.txt:
// examples/graphs/*.kiln and tests/aot/center_columns.kiln).
Graph graphNamed(const std::string& name) {
  if (name == "gelu_bias") return parseGraph(kiln_aot::gelu_bias_aot_graph());
  if (name == "softmax") return parseGraph(kiln_aot::softmax_aot_graph());
  if (name == "cross_entropy") return parseGraph(kiln_aot::cross_entropy_aot_graph());
  if (name == "center_columns") return parseGraph(kiln_aot::center_columns_aot_graph());
  FAIL("no graph " << name);
  return Graph();
}

// kiln::Kernel::launch and rt::AotGraph::launch take the same arguments.
using LaunchFn = std::function<void(std::span<const TensorView>, std::span<const int64_t>, void*)>;

LaunchFn launcherOf(const Kernel& k) {
  return [k](std::span<const TensorView> t, std::span<const int64_t> d, void* s) { k.launch(t, d, {}, s); };
}
LaunchFn launcherOf(const rt::AotGraph& k) {
  return [&k](std::span<const TensorView> t, std::span<const int64_t> d, void* s) { k.launch(t, d, {}, s); };
}

// One graph's arguments in memory from cudaMalloc, at fixed dims: inputs
// refreshed (fresh random values, outputs poisoned) before each run, the
// outputs checked after it. Launching through `launch` may be captured.
class Job {
 public:
  Job(std::string name, Graph g, DimBindings dims, LaunchFn launch, InputRanges ranges = {})
      : name_(std::move(name)), g_(std::move(g)), dims_(std::move(dims)), launch_(std::move(launch)),
        ranges_(std::move(ranges)) {
    in_ = randomInputs(g_, dims_, freshSeed(), ranges_);
    for (int id : g_.params()) {
      const Node& n = g_.node(id);
      REQUIRE(n.op == Op::Input);  // graphs without scalars here
      place(in_.tensors.at(n.name).dtype(), in_.tensors.at(n.name).shape());
    }
    for (const GraphOutput& o : g_.outputs()) {
      const Node& n = g_.node(o.node);
      place(n.dtype, resolveShape(n.shape, dims_));
    }
    for (const std::string& d : g_.dynamicDims()) dimValues_.push_back(dims_.at(d));
  }
  ~Job() {
    for (void* p : dev_) cudaFree(p);
  }
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  // Fresh inputs uploaded and outputs poisoned, on `stream` (not captured),
  // and the reference for them.
  void refresh(cudaStream_t stream) {
    seed_ = freshSeed();
    in_ = randomInputs(g_, dims_, seed_, ranges_);
    want_ = evaluate(g_, in_);
    size_t i = 0;
    for (int id : g_.params()) {
      const HostTensor& h = in_.tensors.at(g_.node(id).name);
      CUDART(cudaMemcpyAsync(dev_[i++], h.data(), h.bytes(), cudaMemcpyHostToDevice, stream));
    }
    for (; i < dev_.size(); ++i) CUDART(cudaMemsetAsync(dev_[i], 0xff, bytes_[i], stream));
    CUDART(cudaStreamSynchronize(stream));  // the host tensors may go away
  }

  void launch(cudaStream_t stream) const {
    launch_(std::span<const TensorView>(views_), std::span<const int64_t>(dimValues_), stream);
  }

  // Downloads the outputs (the stream must be done) and checks them.
  void check(const std::string& when) const {
    INFO(name_ << " (" << when << "), seed " << seed_);
    const size_t firstOut = views_.size() - want_.size();
    for (size_t o = 0; o < want_.size(); ++o) {
      HostTensor got(want_[o].value.dtype(), want_[o].value.shape());
      CUDART(cudaMemcpy(got.data(), dev_[firstOut + o], got.bytes(), cudaMemcpyDeviceToHost));
      checkOutput(want_[o], got, 1, 1);
    }
  }

 private:
  void place(DType dtype, const std::vector<int64_t>& shape) {
    int64_t numel = 1;
    for (int64_t s : shape) numel *= s;
    const size_t bytes = static_cast<size_t>(numel) * static_cast<size_t>(dtypeSize(dtype));
    void* p = nullptr;
    CUDART(cudaMalloc(&p, bytes > 0 ? bytes : 1));
    dev_.push_back(p);
    bytes_.push_back(bytes);
    views_.emplace_back(p, dtype, shape);
  }

  std::string name_;
  Graph g_;
  DimBindings dims_;
  LaunchFn launch_;
  InputRanges ranges_;
  EvalInputs in_;
  std::vector<EvalOutput> want_;
  uint64_t seed_ = 0;
  std::vector<void*> dev_;
  std::vector<size_t> bytes_;
  std::vector<TensorView> views_;
  std::vector<int64_t> dimValues_;
};

// A stream of the CUDA runtime's, destroyed at scope exit.
struct Stream {
  cudaStream_t s = nullptr;
  Stream() { CUDART(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s); }
};

// Captures what `body` enqueues on `stream` (global mode, the strictest)
// into an executable graph.
cudaGraphExec_t capture(cudaStream_t stream, const std::function<void()>& body) {
  CUDART(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  body();
  cudaGraph_t graph = nullptr;
  CUDART(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  CUDART(cudaGraphInstantiate(&exec, graph, 0));
  CUDART(cudaGraphDestroy(graph));
  return exec;
}

const InputRanges kTargets = {{"targets", {0.0, 32767.0}}};

}  // namespace

TEST_CASE("kiln kernels run on CUDA runtime memory and streams", "[gpu][interop]") {
  requireGpu();
  CUDART(cudaFree(nullptr));  // the runtime's primary context, current on this thread
  Stream stream;
  Kernel gelu = compile(graphNamed("gelu_bias"));
  Kernel softmax = compile(graphNamed("softmax"));
  Job a("gelu_bias", graphNamed("gelu_bias"), {{"N", 1000}}, launcherOf(gelu));
  Job b("softmax", graphNamed("softmax"), {{"N", 333}}, launcherOf(softmax));
  for (int round = 0; round < 2; ++round) {
    a.refresh(stream.s);
    b.refresh(stream.s);
    a.launch(stream.s);
    b.launch(stream.s);
    CUDART(cudaStreamSynchronize(stream.s));
    a.check("round " + std::to_string(round));
    b.check("round " + std::to_string(round));
  }
}

TEST_CASE("kiln launches captured into a CUDA graph replay with new inputs", "[gpu][interop]") {
  requireGpu();
  CUDART(cudaFree(nullptr));
  Stream stream;
  Kernel gelu = compile(graphNamed("gelu_bias"));
  Kernel softmax = compile(graphNamed("softmax"));
  // Two kernels with an intermediate in the workspace, and a mean taken by
  // the last block of a grid (a counter in the workspace).
  Kernel center = compile(graphNamed("center_columns"));
  Kernel ce = compile(graphNamed("cross_entropy"));
  REQUIRE(center.compiled().kernels.size() == 2);
  std::vector<std::unique_ptr<Job>> jobs;
  jobs.push_back(std::make_unique<Job>("gelu_bias", graphNamed("gelu_bias"), DimBindings{{"N", 777}}, launcherOf(gelu)));
  jobs.push_back(std::make_unique<Job>("softmax", graphNamed("softmax"), DimBindings{{"N", 129}}, launcherOf(softmax)));
  jobs.push_back(std::make_unique<Job>("center_columns", graphNamed("center_columns"), DimBindings{{"N", 3000}}, launcherOf(center)));
  jobs.push_back(std::make_unique<Job>("cross_entropy", graphNamed("cross_entropy"), DimBindings{{"N", 100}}, launcherOf(ce), kTargets));
  jobs.push_back(std::make_unique<Job>("cross_entropy (ahead of time)", graphNamed("cross_entropy"),
                                       DimBindings{{"N", 64}}, launcherOf(kiln_aot::cross_entropy_aot_launcher()), kTargets));
  // Warm-up: the workspaces are allocated outside the capture.
  for (auto& j : jobs) {
    j->refresh(stream.s);
    j->launch(stream.s);
  }
  CUDART(cudaStreamSynchronize(stream.s));
  for (auto& j : jobs) j->check("warm-up launch");

  cudaGraphExec_t exec = capture(stream.s, [&] {
    for (auto& j : jobs) j->launch(stream.s);
  });
  for (int replay = 0; replay < 3; ++replay) {
    for (auto& j : jobs) j->refresh(stream.s);
    CUDART(cudaGraphLaunch(exec, stream.s));
    CUDART(cudaStreamSynchronize(stream.s));
    for (auto& j : jobs) j->check("replay " + std::to_string(replay));
  }
  CUDART(cudaGraphExecDestroy(exec));
}

TEST_CASE("a first launch may be captured: module loads under the relaxed capture mode", "[gpu][interop]") {
  requireGpu();
  CUDART(cudaFree(nullptr));
  Stream stream;
  // An ahead-of-time function loads its cubin at its first call, and a
  // dynamic row length far from the compiled hint builds and loads a
  // variant: both first happen inside the capture here.
  const Graph rows = parseGraph(
      "kiln.graph v1\n"
      "%0 = input \"x\" : f32[R, C]\n"
      "%1 = max %0 {axes = [1], keepdim = true} : f32[R, 1]\n"
      "%2 = sub %0, %1 : f32[R, C]\n"
      "%3 = exp %2 : f32[R, C]\n"
      "%4 = sum %3 {axes = [1], keepdim = true} : f32[R, 1]\n"
      "%5 = div %3, %4 : f32[R, C]\n"
      "output \"y\" = %5\n");
  CompileOptions options;
  options.dims = {{"C", 64}};
  Kernel softmaxRows = compile(rows, options);
  Job a("softmax (ahead of time, first call)", graphNamed("softmax"), {{"N", 300}},
        launcherOf(kiln_aot::softmax_aot_launcher()));
  Job b("softmax over rows of 20000 (a variant built in the capture)", rows, {{"R", 8}, {"C", 20000}},
        launcherOf(softmaxRows));
  CHECK_THAT(softmaxRows.explain(), !Contains("variant built"));
  a.refresh(stream.s);
  b.refresh(stream.s);
  cudaGraphExec_t exec = capture(stream.s, [&] {
    a.launch(stream.s);
    b.launch(stream.s);
  });
  for (int replay = 0; replay < 2; ++replay) {
    if (replay) {
      a.refresh(stream.s);
      b.refresh(stream.s);
    }
    CUDART(cudaGraphLaunch(exec, stream.s));
    CUDART(cudaStreamSynchronize(stream.s));
    a.check("replay " + std::to_string(replay));
    b.check("replay " + std::to_string(replay));
  }
  CHECK_THAT(softmaxRows.explain(), Contains("variant built"));
  CUDART(cudaGraphExecDestroy(exec));
}

TEST_CASE("a workspace cannot grow inside a capture; a captured one outlives a later growth", "[gpu][interop]") {
  requireGpu();
  CUDART(cudaFree(nullptr));
  Stream stream;
  const Graph g = graphNamed("center_columns");
  Kernel center = compile(g);
  Job small("center_columns N=1000", g, {{"N", 1000}}, launcherOf(center));
  Job large("center_columns N=50000", g, {{"N", 50000}}, launcherOf(center));
  small.refresh(stream.s);

  // Its first launch must allocate: a clear error, and the capture is still
  // valid (nothing it forbids was called).
  CUDART(cudaStreamBeginCapture(stream.s, cudaStreamCaptureModeGlobal));
  CHECK(rt::streamCapturing(stream.s));
  CHECK_THROWS_WITH(small.launch(stream.s), Contains("workspace of kernels '") &&
                                                Contains("being captured into a CUDA graph") &&
                                                Contains("launch it once outside the capture"));
  cudaGraph_t empty = nullptr;
  CUDART(cudaStreamEndCapture(stream.s, &empty));
  CUDART(cudaGraphDestroy(empty));
  CHECK_FALSE(rt::streamCapturing(stream.s));

  // Warm up at N=1000, capture, then grow the workspace with an ordinary
  // launch at N=50000: the graph keeps the allocation it captured.
  small.launch(stream.s);
  CUDART(cudaStreamSynchronize(stream.s));
  small.check("warm-up");
  cudaGraphExec_t exec = capture(stream.s, [&] { small.launch(stream.s); });
  large.refresh(stream.s);
  large.launch(stream.s);
  CUDART(cudaStreamSynchronize(stream.s));
  large.check("a launch that grew the workspace");
  for (int replay = 0; replay < 2; ++replay) {
    small.refresh(stream.s);
    CUDART(cudaGraphLaunch(exec, stream.s));
    CUDART(cudaStreamSynchronize(stream.s));
    small.check("replay " + std::to_string(replay) + " after the growth");
  }
  CUDART(cudaGraphExecDestroy(exec));
}

TEST_CASE("kiln and the CUDA runtime share the primary context whichever starts first", "[gpu][interop]") {
  requireGpu();
  // This process's first GPU work may be kiln's (tests run one per process
  // under ctest): the runtime must then find kiln's context usable.
  Kernel gelu = compile(graphNamed("gelu_bias"));
  Job a("gelu_bias", graphNamed("gelu_bias"), {{"N", 64}}, launcherOf(gelu));
  Stream stream;
  a.refresh(stream.s);
  a.launch(stream.s);
  CUDART(cudaStreamSynchronize(stream.s));
  a.check("kiln first");
}

TEST_CASE("stream-capture queries need the driver and say so", "[interop]") {
  if (rt::driverAvailable()) {
    CHECK_FALSE(rt::streamCapturing(nullptr));  // nothing captures in this process yet
  } else {
    CHECK_THROWS_WITH(rt::streamCapturing(nullptr), Contains("no CUDA driver"));
    rt::RelaxedCaptureMode relaxed;  // a no-op without a driver, never a crash
  }
}
