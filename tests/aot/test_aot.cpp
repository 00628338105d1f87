// Kernels compiled ahead of time by `kiln aot` (at build time, see
// CMakeLists.txt), called as plain functions from a process that links
// kiln_runtime and the DSL's reference evaluator only.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "adamw.h"
#include "center_columns.h"
#include "cross_entropy.h"
#include "gelu_bias.h"
#include "../gpu_basics.h"
#include "kiln/dsl/reference.h"
#include "kiln/dsl/text.h"
#include "kiln/error.h"
#include "kiln/runtime/device_buffer.h"
#include "kiln/runtime/driver.h"
#include "rmsnorm.h"
#include "small_linear.h"
#include "attention_scores.h"
#include "softmax.h"
#include "softmax_long.h"
#include "softmax_rows.h"
#include "softmax_rows_novar.h"
#include "kiln/runtime/timing.h"

using Catch::Matchers::Contains;
using kiln::DType;
using kiln::TensorView;
using kiln::test::freshSeed;
using kiln::test::requireGpu;
using kiln::test::tolerance;

namespace {

kiln::Graph graphOf(const char* text) { return kiln::parseGraph(text); }

void* fake(uintptr_t address) { return reinterpret_cast<void*>(address); }

// One ahead-of-time kernel under test: its graph and how to call it.
struct Case {
  std::string name;
  kiln::Graph graph;
  const kiln::rt::AotGraph& kernel;
  kiln::InputRanges ranges;
  std::map<std::string, double> scalars;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"softmax", graphOf(kiln_aot::softmax_graph()), kiln_aot::softmax_launcher(), {}, {}});
  c.push_back({"rmsnorm", graphOf(kiln_aot::rmsnorm_graph()), kiln_aot::rmsnorm_launcher(), {}, {}});
  c.push_back({"gelu_bias", graphOf(kiln_aot::gelu_bias_graph()), kiln_aot::gelu_bias_launcher(), {}, {}});
  c.push_back({"adamw", graphOf(kiln_aot::adamw_graph()), kiln_aot::adamw_launcher(),
               {{"exp_avg_sq", {0.0, 1.0}}},
               {{"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.01}, {"step", 3}}});
  // Compiled with --dim B=24: its graph has that size.
  c.push_back({"softmax_long", graphOf(kiln_aot::softmax_long_graph()), kiln_aot::softmax_long_launcher(), {}, {}});
  // A mean over rows taken by the last block: a workspace of the kernel's own.
  c.push_back({"cross_entropy", graphOf(kiln_aot::cross_entropy_graph()), kiln_aot::cross_entropy_launcher(),
               {{"targets", {0.0, 32767.0}}}, {}});
  // Two kernels with an intermediate in the workspace.
  c.push_back({"center_columns", graphOf(kiln_aot::center_columns_graph()), kiln_aot::center_columns_launcher(), {}, {}});
  // A matmul with its epilogue: TMA descriptors encoded at each call.
  c.push_back({"small_linear", graphOf(kiln_aot::small_linear_graph()), kiln_aot::small_linear_launcher(), {}, {}});
  // A graph with a matmul among other ops (planned in stages): the matmul
  // (TMA loads, the scale in its epilogue), then the softmax's row kernel.
  c.push_back({"attention_scores", graphOf(kiln_aot::attention_scores_graph()),
               kiln_aot::attention_scores_launcher(), {}, {{"scale", 0.088}}});
  return c;
}

// Runs `c` on fresh random inputs with dims `dims` (every device pointer
// `offsetElems` elements past an aligned base), outputs poisoned first, and
// compares every output with the fp64 reference.
void runAndCheck(const Case& c, const kiln::DimBindings& dims, int offsetElems = 0) {
  const uint64_t seed = freshSeed();
  INFO("kernel " << c.name << ", seed " << seed << ", offset " << offsetElems << " elements");
  kiln::EvalInputs in = kiln::randomInputs(c.graph, dims, seed, c.ranges);
  for (const auto& [n, v] : c.scalars) in.scalars[n] = v;
  const std::vector<kiln::EvalOutput> want = kiln::evaluate(c.graph, in);
  const kiln::rt::KernelSignature& sig = c.kernel.signature();
  std::vector<kiln::rt::DeviceBuffer> buffers;
  std::vector<TensorView> views;
  for (const kiln::rt::TensorParam& p : sig.tensors) {
    const size_t elem = static_cast<size_t>(kiln::dtypeSize(p.dtype));
    const size_t offset = static_cast<size_t>(offsetElems) * elem;
    std::vector<int64_t> shape;
    for (const kiln::rt::Dim& d : p.shape) shape.push_back(d.isDynamic() ? dims.at(d.name) : d.size);
    int64_t numel = 1;
    for (int64_t s : shape) numel *= s;
    buffers.emplace_back(static_cast<size_t>(numel) * elem + offset + 16);
    if (!p.isOutput) {
      const kiln::HostTensor& h = in.tensors.at(p.name);
      buffers.back().upload(h.data(), h.bytes(), offset);
    } else {
      buffers.back().poison();
    }
    views.push_back(buffers.back().view(p.dtype, shape, offset));
  }
  std::vector<kiln::rt::ScalarArg> scalars;
  for (const kiln::rt::ScalarParam& s : sig.scalars) scalars.push_back(kiln::rt::ScalarArg(c.scalars.at(s.name)));
  c.kernel.launch(std::span<const TensorView>(views), {}, scalars);
  KILN_CU_CHECK(kiln::rt::driver().ctxSynchronize());
  for (const kiln::EvalOutput& w : want) {
    const int t = sig.findTensor(w.name);
    REQUIRE(t >= 0);
    kiln::HostTensor got(w.value.dtype(), w.value.shape());
    const size_t offset = static_cast<size_t>(offsetElems) * static_cast<size_t>(kiln::dtypeSize(got.dtype()));
    buffers[static_cast<size_t>(t)].download(got.data(), got.bytes(), offset);
    const double tol = tolerance(got.dtype());
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < got.numel(); ++i) {
      const double g = got.get(i), e = w.exact[static_cast<size_t>(i)];
      const bool ok = std::isnan(e) ? std::isnan(g) : std::fabs(g - e) <= tol * std::max(1.0, std::fabs(e));
      if (!ok && bad++ == 0) first = i;
    }
    INFO("output " << w.name << ": " << bad << " of " << got.numel() << " values outside " << tol
                   << (first >= 0 ? ", first at " + std::to_string(first) + ": " + std::to_string(got.get(first)) +
                                        " vs " + std::to_string(w.exact[static_cast<size_t>(first)])
                                  : std::string()));
    CHECK(bad == 0);
  }
}

}  // namespace

TEST_CASE("an ahead-of-time kernel takes its graph's arguments, in the graph's order") {
  for (const Case& c : cases()) {
    INFO("kernel " << c.name);
    const kiln::rt::KernelSignature& sig = c.kernel.signature();
    std::vector<std::pair<std::string, DType>> want;
    for (int id : c.graph.params())
      if (c.graph.node(id).op == kiln::Op::Input) want.push_back({c.graph.node(id).name, c.graph.node(id).dtype});
    for (const kiln::GraphOutput& o : c.graph.outputs()) want.push_back({o.name, c.graph.node(o.node).dtype});
    REQUIRE(sig.tensors.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      CHECK(sig.tensors[i].name == want[i].first);
      CHECK(sig.tensors[i].dtype == want[i].second);
      CHECK(sig.tensors[i].isOutput == (i >= sig.numInputs()));
    }
    CHECK(sig.dims.size() == c.graph.dynamicDims().size());
  }
  // The scalars of adamw, as the graph declares them.
  const kiln::rt::KernelSignature& adamw = kiln_aot::adamw_launcher().signature();
  REQUIRE(adamw.scalars.size() == 6);
  CHECK(adamw.scalars[0].name == "lr");
  CHECK(adamw.scalars[5].name == "step");
}

TEST_CASE("ahead-of-time launches check their arguments before they touch the driver") {
  // Fake pointers: the checks run before any driver call, with or without a GPU.
  const TensorView x(fake(0x10000), DType::BF16, {8, 4096}), y(fake(0x200000), DType::BF16, {8, 4096});
  const TensorView xf32(fake(0x10000), DType::F32, {8, 4096});
  CHECK_THROWS_WITH(kiln_aot::softmax(xf32, y), Contains("'x'") && Contains("bf16") && Contains("f32"));
  const TensorView yShort(fake(0x200000), DType::BF16, {8, 2048});
  CHECK_THROWS_WITH(kiln_aot::softmax(x, yShort), Contains("'y'"));
  const TensorView yRows(fake(0x200000), DType::BF16, {9, 4096});
  CHECK_THROWS_WITH(kiln_aot::softmax(x, yRows), Contains("N"));
  const TensorView overlap(fake(0x10000 + 64), DType::BF16, {8, 4096});
  CHECK_THROWS_WITH(kiln_aot::softmax(x, overlap), Contains("overlaps"));
  const TensorView only[] = {x};
  CHECK_THROWS_WITH(kiln_aot::softmax_launcher().launch(std::span<const TensorView>(only)), Contains("softmax") || Contains("kiln_row0"));
  const TensorView p(fake(0x10000), DType::F32, {1000}), g(fake(0x20000), DType::F32, {1000});
  const TensorView m(fake(0x30000), DType::F32, {1000}), v(fake(0x40000), DType::F32, {1000});
  const TensorView o1(fake(0x50000), DType::F32, {1000}), o2(fake(0x60000), DType::F32, {1000});
  const TensorView o3(fake(0x70000), DType::F32, {999});
  CHECK_THROWS_WITH(kiln_aot::adamw(p, g, m, v, o1, o2, o3, 1e-3, 0.9, 0.999, 1e-8, 0.01, 1.0),
                    Contains("'new_exp_avg_sq'"));
}

TEST_CASE("the C interface checks its arguments and reports through kiln_last_error") {
  // Fake pointers again: every refusal happens before any driver call.
  const int64_t shape[] = {8, 4096}, shortShape[] = {8, 2048}, strides[] = {4096, 1};
  kiln_tensor t[2] = {{fake(0x10000), KILN_BF16, 2, shape, nullptr}, {fake(0x200000), KILN_BF16, 2, shortShape, strides}};
  CHECK(kiln_softmax(t, 2, nullptr, 0, nullptr) == -1);
  CHECK_THAT(std::string(kiln_last_error()), Contains("'y'") && Contains("softmax"));
  CHECK(kiln_softmax(t, 1, nullptr, 0, nullptr) == -1);
  CHECK_THAT(std::string(kiln_last_error()), Contains("1 tensors given, but it takes 2"));
  CHECK(kiln_softmax(nullptr, 2, nullptr, 0, nullptr) == -1);
  CHECK_THAT(std::string(kiln_last_error()), Contains("null"));
  t[1].shape = shape;
  t[0].dtype = 17;
  CHECK(kiln_softmax(t, 2, nullptr, 0, nullptr) == -1);
  CHECK_THAT(std::string(kiln_last_error()), Contains("'x'") && Contains("dtype code 17"));
  t[0].dtype = KILN_F32;
  CHECK(kiln_softmax(t, 2, nullptr, 0, nullptr) == -1);
  CHECK_THAT(std::string(kiln_last_error()), Contains("'x'") && Contains("f32"));
  t[0].dtype = KILN_BF16;
  const double one = 1.0;
  CHECK(kiln_softmax(t, 2, &one, 1, nullptr) == -1);
  CHECK_THAT(std::string(kiln_last_error()), Contains("1 scalars given, but it takes 0"));
  // The AdamW step's scalars, one missing.
  const int64_t n[] = {1000};
  kiln_tensor adam[7];
  for (int i = 0; i < 7; ++i) adam[i] = {fake(0x100000 * (i + 1)), KILN_F32, 1, n, nullptr};
  const double scalars[] = {1e-3, 0.9, 0.999, 1e-8, 0.01, 1.0};
  CHECK(kiln_adamw(adam, 7, scalars, 5, nullptr) == -1);
  CHECK_THAT(std::string(kiln_last_error()), Contains("5 scalars given, but it takes 6"));
  if (!kiln::rt::driverAvailable()) {
    // Valid arguments: the no-driver message, as an error code.
    CHECK(kiln_softmax(t, 2, nullptr, 0, nullptr) == -1);
    CHECK_THAT(std::string(kiln_last_error()), Contains("no CUDA driver"));
  }
}

TEST_CASE("the C interface describes each function's signature as JSON") {
  const std::string softmax = kiln_softmax_signature();
  CHECK(softmax ==
        "{\"name\": \"softmax\", \"tensors\": [{\"name\": \"x\", \"dtype\": \"bf16\", \"code\": 4, \"shape\": [\"N\", "
        "4096], \"output\": false}, {\"name\": \"y\", \"dtype\": \"bf16\", \"code\": 4, \"shape\": [\"N\", 4096], "
        "\"output\": true}], \"scalars\": [], \"dims\": [\"N\"]}");
  const std::string adamw = kiln_adamw_signature();
  CHECK_THAT(adamw, Contains("{\"name\": \"lr\", \"dtype\": \"f32\"}") &&
                        Contains("{\"name\": \"step\", \"dtype\": \"f32\"}]") && Contains("\"output\": true"));
  CHECK(std::string(kiln_cross_entropy_signature()).find("\"shape\": []") != std::string::npos);  // the mean
}

TEST_CASE("an ahead-of-time function with variants picks the build configured for the call's dims") {
  const kiln::rt::AotGraph& f = kiln_aot::softmax_rows_launcher();
  REQUIRE(f.numVariants() == 2);
  CHECK(kiln_aot::softmax_rows_novar_launcher().numVariants() == 0);
  auto build = [&](int64_t r, int64_t c) { return &f.buildFor(std::vector<int64_t>{r, c}); };
  CHECK(build(8, 64) == &f);
  CHECK(build(8, 1) == &f);
  const kiln::rt::AotGraph* longRows = build(8, 20000);
  CHECK(longRows != &f);
  CHECK(build(4, 30000) == longRows);
  const kiln::rt::AotGraph* clusterRows = build(2, 262144);
  CHECK(clusterRows != &f);
  CHECK(clusterRows != longRows);
  CHECK(build(2, 300000) == clusterRows);
  CHECK(build(8, 5000) == &f);  // no variant was built for it: the hinted build
  CHECK(longRows->signature().tensors == f.signature().tensors);
  CHECK_THROWS_WITH(f.buildFor(std::vector<int64_t>{8}), Contains("1 dim values given, but it has 2"));
  // Argument errors name the function whichever build runs.
  const TensorView x(fake(0x10000), DType::F32, {8, 20000}), y(fake(0x10000000), DType::BF16, {8, 20000});
  CHECK_THROWS_WITH(kiln_aot::softmax_rows(x, y), Contains("'y'") && Contains("softmax_rows"));
}

TEST_CASE("a process that calls ahead-of-time kernels has no compiler in it") {
  std::ifstream maps("/proc/self/maps");
  REQUIRE(maps);
  std::string line;
  int lines = 0;
  while (std::getline(maps, line)) {
    ++lines;
    INFO(line);
    CHECK(line.find("kiln_compiler") == std::string::npos);
    CHECK(line.find("libLLVM") == std::string::npos);
    CHECK(line.find("libMLIR") == std::string::npos);
    CHECK(line.find("nvrtc") == std::string::npos);
    CHECK(line.find("nvJitLink") == std::string::npos);
  }
  CHECK(lines > 0);
}

TEST_CASE("without a driver, an ahead-of-time launch says so") {
  if (kiln::rt::driverAvailable()) {
    std::cout << "SKIPPED: this machine has a CUDA driver (the test is for machines without one)" << std::endl;
    std::exit(77);
  }
  const TensorView x(fake(0x10000), DType::BF16, {8, 4096}), y(fake(0x200000), DType::BF16, {8, 4096});
  CHECK_THROWS_WITH(kiln_aot::softmax(x, y), Contains("no CUDA driver"));
  // A second call says the same (the failed load is not remembered as done).
  CHECK_THROWS_WITH(kiln_aot::softmax(x, y), Contains("no CUDA driver"));
}

TEST_CASE("ahead-of-time kernels match the reference on the GPU", "[gpu]") {
  requireGpu();
  for (const Case& c : cases()) {
    const std::vector<std::string> dims = c.graph.dynamicDims();
    const bool tma = c.name == "small_linear" || c.name == "attention_scores";  // needs aligned pointers
    if (dims.empty()) {
      runAndCheck(c, {});
      if (!tma) runAndCheck(c, {}, 1);  // unaligned pointers: the scalar entry
      continue;
    }
    REQUIRE(dims.size() == 1);
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{1000}})
      runAndCheck(c, {{dims[0], c.name == "adamw" ? n * 4099 : n}});
    if (!tma) runAndCheck(c, {{dims[0], c.name == "adamw" ? 1000003 : 33}}, 1);
  }
}

TEST_CASE("ahead-of-time variants match the reference at every row length", "[gpu]") {
  requireGpu();
  const Case rows{"softmax_rows", graphOf(kiln_aot::softmax_rows_graph()), kiln_aot::softmax_rows_launcher(), {}, {}};
  for (auto [r, c] : std::vector<std::pair<int64_t, int64_t>>{{8, 64}, {8, 5000}, {8, 20000}, {3, 65536}, {2, 262144},
                                                              {2, 300001}})
    runAndCheck(rows, {{"R", r}, {"C", c}});
  runAndCheck(rows, {{"R", 5}, {"C", 20001}}, 1);  // unaligned: the variant's scalar entry
  // The same calls timed with the variants and without (the hinted build's
  // config at every length), L2 flushed: what the variants are for.
  for (auto [r, c] : std::vector<std::pair<int64_t, int64_t>>{{1024, 20000}, {64, 262144}}) {
    kiln::rt::DeviceBuffer x(static_cast<size_t>(r * c) * 4), y(static_cast<size_t>(r * c) * 4);
    x.fill(0);
    const TensorView vx = x.view(DType::F32, {r, c}), vy = y.view(DType::F32, {r, c});
    const double with = kiln::rt::benchmark([&] { kiln_aot::softmax_rows(vx, vy); }, 5, 50).medianUs;
    const double without = kiln::rt::benchmark([&] { kiln_aot::softmax_rows_novar(vx, vy); }, 5, 50).medianUs;
    std::cout << "softmax_rows f32 " << r << "x" << c << ": with variants " << with << " us ("
              << 8.0 * static_cast<double>(r * c) / with / 1e6 << " TB/s), hinted build only " << without << " us ("
              << 8.0 * static_cast<double>(r * c) / without / 1e6 << " TB/s)" << std::endl;
  }
}

TEST_CASE("ahead-of-time kernels launch on the caller's stream, launch after launch", "[gpu]") {
  requireGpu();
  const Case c = cases()[0];  // softmax
  for (int i = 0; i < 3; ++i) runAndCheck(c, {{"N", 256 + i}});
}
