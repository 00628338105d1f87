// The pointwise pipeline on the CPU: every op and dtype down to an sm_90
// cubin, with the PTX and resource report checked; launches that must fail
// before reaching the GPU.
#include <sstream>

#include <catch2/catch.hpp>

#include <regex>

#include "kiln/kiln.h"
#include "op_sweep.h"

using namespace kiln;
using Catch::Matchers::Contains;

namespace {

void checkKernelArtifacts(const compiler::CompiledKernel& k) {
  CHECK(!k.cubin.empty());
  CHECK(k.ptx.find(".extern .func __nv_") == std::string::npos);
  REQUIRE(k.resources.size() == k.entries.size());
  for (const compiler::ResourceReport& r : k.resources) {
    INFO(r.kernel);
    CHECK(r.registers > 0);
    CHECK(r.spillStoreBytes == 0);
    CHECK(r.spillLoadBytes == 0);
  }
}

}  // namespace

TEST_CASE("every op and dtype compiles to an sm_90 cubin without spills or unresolved calls", "[compile]") {
  for (const test::SweepCase& c : test::opSweep({"N", 64})) {
    INFO(c.label);
    compiler::CompiledGraph cg = compiler::compileGraph(c.graph);
    REQUIRE(cg.kernels.size() == 1);
    checkKernelArtifacts(cg.kernels[0]);
  }
}

TEST_CASE("the vectorized entry uses the vector accesses the schedule promised", "[compile]") {
  // x*y+z: 16-byte accesses, except three full-size f32 streams, which the
  // heuristic reads in 8-byte vectors (torch.compile's pick for them,
  // session 33); x+y f32: 16 bytes.
  DType t = GENERATE(DType::BF16, DType::F32, DType::F16);
  const bool fma = GENERATE(true, false);
  INFO(dtypeName(t) << (fma ? " x*y+z" : " x+y"));
  Graph g;
  Tensor x = g.input("x", t, {32768, 4096});
  Tensor y = g.input("y", t, {32768, 4096});
  if (fma) g.output("out", x * y + g.input("z", t, {32768, 4096}));
  else g.output("out", x + y);
  const int bytes = fma && t == DType::F32 ? 8 : 16;
  compiler::CompiledGraph cg = compiler::compileGraph(g);
  const compiler::CompiledKernel& k = cg.kernels.at(0);
  checkKernelArtifacts(k);
  REQUIRE(k.entries.at(0).vectorized);
  CHECK_THAT(k.config, Contains("\"vector\": " + std::to_string(bytes / dtypeSize(t))));
  for (const compiler::KernelTensor& kt : k.tensors) CHECK(kt.alignment == bytes);
  // The vectorized entry's body: a non-coherent vector load per input and
  // a vector store, of that many bytes.
  size_t start = k.ptx.find(".entry " + k.entries[0].name);
  size_t end = k.ptx.find(".entry", start + 1);
  std::string body = k.ptx.substr(start, end - start);
  const std::string v = bytes == 16 ? "v4" : "v2";
  std::regex ld("ld\\.global\\.nc\\." + v + "\\.(b32|u32|f32)"), st("st\\.global\\." + v + "\\.(b32|u32|f32)");
  auto count = [&](const std::regex& r) {
    return std::distance(std::sregex_iterator(body.begin(), body.end(), r), std::sregex_iterator());
  };
  CHECK(count(ld) >= (fma ? 3 : 2));
  CHECK(count(st) >= 1);
}

TEST_CASE("row, column and scalar broadcasts are read through index math, not materialized", "[compile]") {
  Graph g;
  Tensor x = g.input("x", DType::BF16, {"N", 4096});
  Tensor row = g.input("row", DType::BF16, {4096});
  Tensor col = g.input("col", DType::F32, {"N", 1});
  Tensor s = g.scalar("s");
  g.output("y", (x + row) * col + s);
  compiler::CompiledGraph cg = compiler::compileGraph(g);
  REQUIRE(cg.kernels.size() == 1);
  const compiler::CompiledKernel& k = cg.kernels[0];
  checkKernelArtifacts(k);
  CHECK(k.dims == std::vector<std::string>{"N"});
  REQUIRE(k.scalars.size() == 1);
  CHECK(k.tensors.size() == 4);
  CHECK(k.entries.at(0).vectorized);
}

TEST_CASE("outputs of one shape share a kernel, and other shapes get their own", "[compile]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N", 256});
  Tensor b = g.input("b", DType::F32, {256});
  g.output("y", exp(x));
  g.output("z", x * 2.0);
  g.output("bb", b + 1.0);
  compiler::CompiledGraph cg = compiler::compileGraph(g);
  REQUIRE(cg.kernels.size() == 2);
  CHECK(cg.kernels[0].tensors.size() == 3);  // x, y, z
  CHECK(cg.kernels[1].tensors.size() == 2);  // b, bb
  CHECK_THAT(cg.explain, Contains("one kernel per shape"));
}

TEST_CASE("a reduction of a matmul's product compiles: the matmul's kernel, then a row kernel", "[compile]") {
  // Once refused (a matmul compiled with an elementwise epilogue only): the
  // product's exp is the matmul's epilogue, the max a row kernel's.
  Graph g;
  Tensor a = g.input("a", DType::F32, {8, 16});
  Tensor b = g.input("b", DType::F32, {16, 4});
  g.output("c", max(exp(matmul(a, b)), {1}));
  compiler::CompiledGraph cg = compiler::compileGraph(g);
  REQUIRE(cg.kernels.size() == 2);
  CHECK(cg.kernels[0].schedule == "matmul");
  CHECK(cg.kernels[1].schedule == "row_reduction");
  CHECK_THAT(cg.explain, Contains("epilogue of 1 fused elementwise op(s) (exp)"));
}

TEST_CASE("compiling an equal graph again returns the same kernel", "[compile][facade]") {
  auto build = [] {
    Graph g;
    Tensor x = g.input("x", DType::F32, {"N"});
    g.output("y", sigmoid(x) * 3.0);
    return g;
  };
  Kernel a = compile(build(), {.chip = "sm_90"});
  Kernel b = compile(build(), {.chip = "sm_90"});
  CHECK(&a.compiled() == &b.compiled());
}

TEST_CASE("bad launches are clear errors naming the argument", "[compile][facade][errors]") {
  Graph g;
  Tensor x = g.input("x", DType::BF16, {"N", 64});
  Tensor b = g.input("b", DType::BF16, {64});
  g.output("y", x + b);
  Kernel k = compile(g, {.chip = "sm_90"});
  alignas(16) static char mem[1 << 16];
  TensorView x8(mem, DType::BF16, {8, 64}), b64(mem + 4096, DType::BF16, {64}), y8(mem + 8192, DType::BF16, {8, 64});
  auto msg = [&](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  SECTION("wrong dtype") {
    TensorView bad(mem, DType::F32, {8, 64});
    CHECK_THAT(msg([&] { k.launch({bad, b64, y8}); }), Contains("x"));
    CHECK_THAT(msg([&] { k.launch({bad, b64, y8}); }), Contains("f32"));
  }
  SECTION("wrong shape") {
    TensorView bad(mem + 4096, DType::BF16, {65});
    CHECK_THAT(msg([&] { k.launch({x8, bad, y8}); }), Contains("b"));
    CHECK_THAT(msg([&] { k.launch({x8, bad, y8}); }), Contains("65"));
  }
  SECTION("missing argument") {
    CHECK_THAT(msg([&] { k.launch({x8, b64}); }), Contains("3"));
    CHECK_THAT(msg([&] { k.launch(Args().tensor("x", x8).tensor("b", b64)); }), Contains("y"));
  }
  SECTION("pointer misaligned for its element type") {
    TensorView bad(mem + 1, DType::BF16, {8, 64});
    CHECK_THAT(msg([&] { k.launch({bad, b64, y8}); }), Contains("align"));
  }
  SECTION("without a driver the launch says so") {
    if (rt::driverAvailable()) return;
    CHECK_THAT(msg([&] { k.launch({x8, b64, y8}); }), Contains("no CUDA driver"));
  }
}

TEST_CASE("config nc 0 loads inputs with plain ld.global, 16 bytes at a time", "[compile]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {64, 4096}), y = g.input("y", DType::F32, {64, 4096});
  g.output("out", x * y + g.input("z", DType::F32, {64, 4096}));
  compiler::CompileOptions o;
  o.configOverride = R"({"vector": 4})";
  compiler::CompiledGraph nc = compiler::compileGraph(g, o);
  CHECK_THAT(nc.kernels.at(0).ptx, Contains("ld.global.nc.v4"));
  o.configOverride = R"({"nc": 0, "unroll": 2, "vector": 4})";
  compiler::CompiledGraph plain = compiler::compileGraph(g, o);
  const std::string& ptx = plain.kernels.at(0).ptx;
  CHECK_THAT(ptx, Contains("ld.global.v4.b32") && !Contains("ld.global.nc"));
  CHECK_THAT(plain.kernels.at(0).config, Contains("\"nc\": 0"));
  for (const compiler::ResourceReport& r : plain.kernels.at(0).resources) CHECK(r.spillStoreBytes == 0);
}

TEST_CASE("unrolled vectors of a whole chunk issue every load before the first store", "[compile]") {
  // Most 16-byte loads between two stores of the vectorized entry.
  auto loadsBeforeAStore = [](const compiler::CompiledKernel& k) {
    const std::string v = k.ptx.substr(0, k.ptx.find(".entry " + k.name + "_s1"));
    size_t most = 0, run = 0;
    std::istringstream in(v);
    for (std::string line; std::getline(in, line);) {
      if (line.find("ld.global.nc.v4") != std::string::npos) most = std::max(most, ++run);
      if (line.find("st.global") != std::string::npos) run = 0;
    }
    return most;
  };
  for (int64_t cols : {4096, 4000}) {  // chunks divide the elements / the last one is partial
    INFO("x*y+z f32 [33, " << cols << "], unroll 2");
    Graph g;
    Shape s{33, cols};
    Tensor x = g.input("x", DType::F32, s), y = g.input("y", DType::F32, s);
    g.output("out", x * y + g.input("z", DType::F32, s));
    compiler::CompileOptions o;
    o.configOverride = R"({"unroll": 2, "vector": 4})";
    compiler::CompiledKernel k = compiler::compileGraph(g, o).kernels.at(0);
    CHECK(loadsBeforeAStore(k) >= 6);  // 3 inputs x 2 vectors, then the stores
    for (const compiler::ResourceReport& r : k.resources) CHECK(r.spillStoreBytes == 0);
  }
}

TEST_CASE("the scalar entry covers the vectorized entry's chunk per block (one grid serves both)", "[compile]") {
  struct C {
    DType t;
    int64_t cols;
    int unroll;
  };
  for (C c : {C{DType::BF16, 4096, 1}, C{DType::F32, 4096, 2}, C{DType::F32, 4000, 2}}) {
    INFO("x*y+z " << dtypeName(c.t) << " [33, " << c.cols << "], unroll " << c.unroll);
    Graph g;
    Shape s{33, c.cols};
    Tensor x = g.input("x", c.t, s), y = g.input("y", c.t, s);
    g.output("out", x * y + g.input("z", c.t, s));
    compiler::CompileOptions o;
    o.configOverride = "{\"unroll\": " + std::to_string(c.unroll) + ", \"vector\": " + std::to_string(16 / dtypeSize(c.t)) + "}";
    compiler::CompiledKernel k = compiler::compileGraph(g, o).kernels.at(0);
    const int64_t vector = 16 / dtypeSize(c.t);
    REQUIRE(k.launch.elementsPerBlock == k.launch.threadsPerBlock * c.unroll * vector);
    // Each thread of the scalar entry loads unroll x vector elements of each
    // input (before session 21 it loaded unroll, and a static shape's grid
    // of one block per vectorized chunk left the rest unwritten).
    const size_t at = k.ptx.find(".entry " + k.name + "_s1");
    REQUIRE(at != std::string::npos);
    std::istringstream in(k.ptx.substr(at));
    int64_t scalarLoads = 0;
    for (std::string line; std::getline(in, line);)
      if (line.find("ld.global.nc.") != std::string::npos && line.find(".v") == std::string::npos) ++scalarLoads;
    CHECK(scalarLoads >= 3 * c.unroll * vector);
  }
}

TEST_CASE("a config override the schedule does not take is an error naming the schedule and the key", "[compile]") {
  Graph pw;
  Tensor px = pw.input("x", DType::F32, {"N", 64});
  pw.output("y", px * 2.0);
  compiler::CompileOptions o;
  o.configOverride = "{\"threads\": 100}";
  CHECK_THROWS_WITH(compiler::compileGraph(pw, o), Contains("threads = 100") && Contains("pointwise schedule"));
  o.configOverride = "";
  // y joins the row kernel of s (same rows, same input): one row_reduction kernel.
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N", 64});
  g.output("y", x * 2.0);
  g.output("s", sum(x, -1, false));
  o.rowConfigOverride = "{\"persistent\": 2}";
  CHECK_THROWS_WITH(compiler::compileGraph(g, o), Contains("persistent = 2") && Contains("row_reduction schedule"));
  o.rowConfigOverride = "[1]";
  CHECK_THROWS_WITH(compiler::compileGraph(g, o), Contains("must be a JSON object"));
  o.rowConfigOverride = "{\"threads_per_row\": 64}";
  CHECK_NOTHROW(compiler::compileGraph(g, o));
}
