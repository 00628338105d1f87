// Kernels of several compiled kernels with intermediates in the Kernel's
// workspace, built from hand-written plans (detail::kernelFromCompiled)
// until the planner makes such plans itself: the runtime tests' PTX axpy
// (y = alpha * x + beta) stands in for compiled kernels. CPU tests check
// the mapping onto the graph and explain(); [gpu] tests launch.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <vector>

#include "kernel_internal.h"
#include "kiln/kiln.h"
#include "test_kernels.h"

using namespace kiln;
using Catch::Matchers::Contains;

namespace {

void requireGpu() {
  if (!rt::driverAvailable()) {
    std::cout << "SKIPPED: no CUDA driver (" << rt::driverUnavailableReason() << ")" << std::endl;
    std::exit(77);
  }
}

compiler::KernelTensor tensor(const std::string& name, bool output, bool workspace, int alignment = 0) {
  return {.name = name, .dtype = DType::F32, .shape = {Dim("N")}, .output = output, .workspace = workspace,
          .alignment = alignment};
}

// out = alpha * in + beta over [N], as kiln_test_axpy: one element per
// thread, entry only scalar (the plain PTX takes any aligned-to-element
// pointer). `alignment` > 0 makes the packer report smaller alignments, so
// launches take the scalar-entry path.
compiler::CompiledKernel axpy(const std::string& name, compiler::KernelTensor in, compiler::KernelTensor out) {
  compiler::CompiledKernel k;
  k.name = name;
  k.schedule = "test_axpy";
  k.config = "{\"threads\": 128}";
  k.why = out.name + " = alpha * " + in.name + " + beta";
  k.tensors = {std::move(in), std::move(out)};
  k.dims = {"N"};
  k.scalars = {{"alpha", DType::F32}, {"beta", DType::F32}};
  k.entries = {{"kiln_test_axpy", false}};
  k.launch.threadsPerBlock = 128;
  k.launch.elementsPerBlock = 128;
  k.launch.iterShape = {Dim("N")};
  const std::string ptx = rt::test::kTestPtx;
  k.cubin.assign(ptx.begin(), ptx.end());
  k.cubin.push_back('\0');
  k.resources = {{.kernel = "kiln_test_axpy", .registers = 12}};
  return k;
}

// y = alpha * (alpha * x + beta) + beta, in the graph and as a plan of two
// kernels through the workspace tensor ws0.
Graph twoStepGraph() {
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N"});
  Tensor alpha = g.scalar("alpha");
  Tensor beta = g.scalar("beta");
  g.output("y", (x * alpha + beta) * alpha + beta);
  return g;
}

compiler::CompiledGraph twoStepPlan(int alignment = 0) {
  compiler::CompiledGraph cg;
  cg.kernels = {axpy("k0", tensor("x", false, false, alignment), tensor("ws0", true, true, alignment)),
                axpy("k1", tensor("ws0", false, true, alignment), tensor("y", true, false, alignment))};
  cg.workspace = {tensor("ws0", true, true)};
  cg.explain = "kernel 0: the inner axpy, into ws0\nkernel 1: the outer axpy, from ws0\n";
  return cg;
}

float step(float v, float alpha, float beta) { return std::fma(v, alpha, beta); }

std::vector<float> ramp(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i % 977) * 0.25f - 100.0f;
  return v;
}

std::vector<float> download(const rt::DeviceBuffer& b, int64_t n, size_t offset = 0) {
  std::vector<float> v(static_cast<size_t>(n));
  if (n) b.download(v.data(), v.size() * sizeof(float), offset);
  return v;
}

}  // namespace

TEST_CASE("a multi-kernel plan maps onto the graph and explains itself", "[facade]") {
  Kernel k = detail::kernelFromCompiled(twoStepGraph(), twoStepPlan(), "sm_90");
  const std::string e = k.explain();
  INFO(e);
  CHECK(e.rfind("2 kernel(s) for sm_90\n", 0) == 0);
  CHECK_THAT(e, Contains("k0: schedule test_axpy, config {\"threads\": 128}"));
  CHECK_THAT(e, Contains("why: ws0 = alpha * x + beta"));
  CHECK_THAT(e, Contains("in x f32[N]; out ws0 f32[N] (workspace)"));
  CHECK_THAT(e, Contains("in ws0 f32[N] (workspace); out y f32[N]"));
  CHECK_THAT(e, Contains("kiln_test_axpy: 12 registers, 0 bytes spill stores, 0 bytes spill loads"));
  CHECK_THAT(e, Contains("workspace: 1 intermediate(s)"));
  CHECK_THAT(e, Contains("  ws0: f32[N]\n"));
  CHECK_THAT(e, Contains("plan:\n  kernel 0: the inner axpy, into ws0\n  kernel 1: the outer axpy, from ws0\n"));
  CHECK(k.signature().toString() == "graph(x: f32[N], out y: f32[N]; N; alpha: f32, beta: f32)");
}

TEST_CASE("a plan that does not fit its graph is refused before any launch", "[facade]") {
  const Graph g = twoStepGraph();
  auto refused = [&](compiler::CompiledGraph cg, const std::string& what) {
    INFO(what);
    CHECK_THROWS_WITH(detail::kernelFromCompiled(g, std::move(cg), "sm_90"),
                      Contains("internal error") && Contains(what));
  };
  compiler::CompiledGraph cg = twoStepPlan();
  cg.workspace.clear();
  refused(cg, "'ws0' is a workspace tensor the graph's workspace list lacks");

  cg = twoStepPlan();
  std::swap(cg.kernels[0], cg.kernels[1]);
  refused(cg, "compiled kernel 'k1' does not fit its graph: it reads workspace tensor 'ws0' before any kernel");

  cg = twoStepPlan();
  cg.workspace[0].dtype = DType::BF16;
  refused(cg, "'ws0' is f32[N] here but bf16[N] in the workspace list");

  cg = twoStepPlan();
  cg.kernels[1].tensors[0].workspace = false;  // "ws0" is no graph tensor
  refused(cg, "input tensor 'ws0' is neither a parameter nor an output of the graph");

  cg = twoStepPlan();
  cg.kernels[0].scalars[1].name = "gamma";
  refused(cg, "scalar 'gamma' is not a scalar of the graph");

  cg = twoStepPlan();
  cg.workspace[0].shape = {Dim("M")};
  refused(cg, "workspace tensor 'ws0' has the dim M");
}

TEST_CASE("two kernels pass an intermediate through the workspace", "[gpu][facade]") {
  requireGpu();
  Kernel k = detail::kernelFromCompiled(twoStepGraph(), twoStepPlan(), "sm_90");
  const float alpha = 1.5f, beta = -0.75f;
  // Growing, shrinking (the allocation stays), growing again, and empty.
  for (int64_t n : {1000, 300001, 10, 1 << 21, 0}) {
    INFO("N = " << n);
    std::vector<float> hx = ramp(n);
    rt::DeviceBuffer dx(hx.size() * sizeof(float)), dy(hx.size() * sizeof(float));
    if (n) dx.upload(hx.data(), hx.size() * sizeof(float));
    dy.poison();
    k.launch({dx.view(DType::F32, {n}), dy.view(DType::F32, {n})}, {}, {alpha, beta});
    std::vector<float> y = download(dy, n);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const size_t u = static_cast<size_t>(i);
      if (y[u] != step(step(hx[u], alpha, beta), alpha, beta)) ++bad;
    }
    CHECK(bad == 0);
  }
  // By name, the same.
  const int64_t n = 4097;
  std::vector<float> hx = ramp(n);
  rt::DeviceBuffer dx(n * sizeof(float)), dy(n * sizeof(float));
  dx.upload(hx.data(), hx.size() * sizeof(float));
  dy.poison();
  k.launch(Args().tensor("x", dx.view(DType::F32, {n})).tensor("y", dy.view(DType::F32, {n}))
               .scalar("alpha", 2.0f).scalar("beta", 1.0f));
  std::vector<float> y = download(dy, n);
  CHECK(y[4096] == step(step(hx[4096], 2.0f, 1.0f), 2.0f, 1.0f));
}

TEST_CASE("a later kernel reads a graph output an earlier kernel wrote", "[gpu][facade]") {
  requireGpu();
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N"});
  Tensor alpha = g.scalar("alpha");
  Tensor beta = g.scalar("beta");
  Tensor y = x * alpha + beta;
  g.output("y", y);
  g.output("z", y * alpha + beta);
  compiler::CompiledGraph cg;
  cg.kernels = {axpy("k0", tensor("x", false, false), tensor("y", true, false)),
                axpy("k1", tensor("y", false, false), tensor("z", true, false))};
  Kernel k = detail::kernelFromCompiled(g, std::move(cg), "sm_90");
  CHECK(k.explain().find("workspace:") == std::string::npos);
  const int64_t n = 5000;
  std::vector<float> hx = ramp(n);
  rt::DeviceBuffer dx(n * sizeof(float)), dy(n * sizeof(float)), dz(n * sizeof(float));
  dx.upload(hx.data(), hx.size() * sizeof(float));
  dy.poison();
  dz.poison();
  k.launch({dx.view(DType::F32, {n}), dy.view(DType::F32, {n}), dz.view(DType::F32, {n})}, {}, {3.0f, 0.5f});
  std::vector<float> hy = download(dy, n), hz = download(dz, n);
  int64_t bad = 0;
  for (size_t i = 0; i < hx.size(); ++i)
    if (hy[i] != step(hx[i], 3.0f, 0.5f) || hz[i] != step(hy[i], 3.0f, 0.5f)) ++bad;
  CHECK(bad == 0);
}

TEST_CASE("unaligned pointers take kernels' own scalar entries without recompiling", "[gpu][facade]") {
  requireGpu();
  // Tensors that ask for 16-byte alignment, kernels with only a scalar
  // entry: a 4-byte offset makes the launch unvectorizable, and the scalar
  // entry that came with the plan must be used as it is (compiling the
  // graph again would make a different plan and fail).
  Kernel k = detail::kernelFromCompiled(twoStepGraph(), twoStepPlan(16), "sm_90");
  const int64_t n = 1001;
  std::vector<float> hx = ramp(n);
  rt::DeviceBuffer dx(n * sizeof(float) + 16), dy(n * sizeof(float) + 16);
  dx.upload(hx.data(), hx.size() * sizeof(float), 4);
  dy.poison();
  k.launch({dx.view(DType::F32, {n}, 4), dy.view(DType::F32, {n}, 4)}, {}, {0.5f, 2.0f});
  std::vector<float> y = download(dy, n, 4);
  int64_t bad = 0;
  for (size_t i = 0; i < hx.size(); ++i)
    if (y[i] != step(step(hx[i], 0.5f, 2.0f), 0.5f, 2.0f)) ++bad;
  CHECK(bad == 0);
}
