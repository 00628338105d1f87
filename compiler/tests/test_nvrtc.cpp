// The CUDA C++ path of the matmul schedule, without a GPU: NVRTC makes PTX
// for compute_90a (wgmma in inline PTX), the ptxas executable makes the
// sm_90a cubin with its resource report, and every failure along the way is
// a kiln::Error carrying the compiler's message.
#include <cstdlib>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "kiln/compiler/backend.h"
#include "kiln/compiler/nvrtc.h"
#include "kiln/error.h"
#include "../src/matmul_sm90.h"
#include "kiln/compiler/compile.h"
#include "kiln/dsl/oplib.h"
#include "kiln/dsl/ops.h"

#include <memory>

using namespace kiln::compiler;
using Catch::Matchers::Contains;

namespace {

// One warpgroup issues a single m64n16k16 bf16 wgmma from two shared-memory
// descriptors passed in as parameters and writes its 8 accumulators per
// thread. Not a useful kernel: a probe that the toolchain takes sm_90a code.
const char* kWgmmaProbe = R"(
extern "C" __global__ void __launch_bounds__(128, 1)
kiln_wgmma_probe(float* out, unsigned long long descA, unsigned long long descB) {
  float d[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) d[i] = 0.0f;
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  asm volatile(
      "{\n"
      ".reg .pred scale;\n"
      "setp.ne.b32 scale, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, scale, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(descA), "l"(descB), "r"(1));
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
  for (int i = 0; i < 8; ++i) out[threadIdx.x * 8 + i] = d[i];
}
)";

}  // namespace

TEST_CASE("NVRTC: CUDA C++ with wgmma to PTX for compute_90a, then ptxas to an sm_90a cubin",
          "[compiler][nvrtc]") {
  std::string why;
  if (!nvrtcAvailable("", &why)) {
    // Every machine kiln builds on has the CUDA toolkit; say so loudly.
    FAIL("NVRTC is not available: " << why);
  }
  CHECK(nvrtcVersion().rfind("13.", 0) == 0);
  CudaCompileOptions o;
  o.name = "wgmma_probe.cu";
  CudaToPtxResult p = cudaToPtx(kWgmmaProbe, o);
  CHECK_THAT(p.ptx, Contains(".entry kiln_wgmma_probe"));
  CHECK_THAT(p.ptx, Contains("wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16"));
  CHECK_THAT(p.ptx, Contains(".target sm_90a"));
  CHECK(p.ms > 0);

  // "a" targets never go through nvJitLink (it crashes on wgmma): the
  // default route is the ptxas child process.
  CubinResult c = ptxToCubin(p.ptx, "sm_90a", CubinOptions{});
  CHECK(c.route == CubinRoute::Ptxas);
  REQUIRE(c.cubin.size() > 4);
  CHECK((c.cubin[0] == 0x7f && c.cubin[1] == 'E'));
  const ResourceReport* r = c.kernel("kiln_wgmma_probe");
  REQUIRE(r != nullptr);
  CHECK(r->registers > 0);
  CHECK(r->spillStoreBytes == 0);
}

TEST_CASE("NVRTC errors name the source and carry NVRTC's log", "[compiler][nvrtc]") {
  CudaCompileOptions o;
  o.name = "broken.cu";
  CHECK_THROWS_WITH(cudaToPtx("extern \"C\" __global__ void k(float* p) { p[0] = undeclared_thing; }", o),
                    Contains("NVRTC") && Contains("broken.cu") && Contains("undeclared_thing"));
  // Only virtual architectures: the cubin is ptxas's job.
  o.arch = "sm_90a";
  CHECK_THROWS_WITH(cudaToPtx("__global__ void k() {}", o), Contains("not a virtual architecture"));
}

TEST_CASE("PTX that ptxas rejects is a kiln::Error with ptxas's message", "[compiler][nvrtc]") {
  // NVRTC passes inline PTX through unchecked; ptxas finds the bad opcode.
  const char* bad = R"(
extern "C" __global__ void kiln_bad_asm(int* p) { asm volatile("not.an.instruction;"); p[0] = 1; }
)";
  CudaToPtxResult p = cudaToPtx(bad, {});
  try {
    ptxToCubin(p.ptx, "sm_90a", CubinOptions{});
    FAIL("ptxas accepted an invalid instruction");
  } catch (const kiln::Error& e) {
    std::string what = e.what();
    CHECK_THAT(what, Contains("ptxas"));
    CHECK_THAT(what, Contains("not.an.instruction") || Contains("syntax error") || Contains("Unknown"));
  }
}

namespace {

// y = gelu_tanh(a @ b + bias) (the heaviest epilogue of the lesson), a
// [M, K], b [K, N] or [N, K].
kiln::Graph linearGelu(kiln::DType t, bool transA, bool transB) {
  using namespace kiln;
  Graph g;
  Dim M("M");
  const int64_t N = 512, K = 256;
  Tensor a = g.input("a", t, transA ? Shape{K, M} : Shape{M, K});
  Tensor b = g.input("b", t, transB ? Shape{N, K} : Shape{K, N});
  Tensor bias = g.input("bias", t, {N});
  g.output("y", gelu_tanh(matmul(a, b, {transA, transB}) + bias));
  return g;
}

// tmaStore: whether the kernel stores its inner tiles through TMA (a third
// tensor map, for the output).
void checkSm90Kernel(const kiln::compiler::CompiledKernel& k, int blockN, bool tmaStore) {
  CHECK(k.schedule == "matmul");
  CHECK_THAT(k.source, Contains("wgmma.mma_async.sync.aligned.m64n"));
  CHECK_THAT(k.ptx, Contains("wgmma.mma_async.sync.aligned.m64n" + std::to_string(blockN) + "k16"));
  CHECK_THAT(k.ptx, Contains("cp.async.bulk.tensor.3d"));
  CHECK_THAT(k.ptx, Contains("setmaxnreg.inc.sync.aligned.u32 23") || Contains("setmaxnreg.inc.sync.aligned.u32 240"));
  if (k.config.find("\"consumer_regs\": 240") != std::string::npos)
    CHECK_THAT(k.ptx, Contains("setmaxnreg.dec.sync.aligned.u32 24;") && Contains("setmaxnreg.inc.sync.aligned.u32 240"));
  CHECK(k.tensorMaps.size() == (tmaStore ? 3u : 2u));
  if (tmaStore) CHECK_THAT(k.ptx, Contains("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group"));
  else CHECK_THAT(k.ptx, !Contains("cp.async.bulk.tensor.3d.global.shared::cta"));
  CHECK(k.launch.threadsPerBlock == 384);
  REQUIRE(k.resources.size() == 1);
  CHECK(k.resources[0].spillStoreBytes == 0);
  CHECK(k.resources[0].spillLoadBytes == 0);
}

}  // namespace

TEST_CASE("the sm_90a matmul kernel compiles without spills for every config of its space",
          "[compiler][nvrtc][matmul]") {
  const auto space = sm90MatmulSpace();
  REQUIRE(space.size() >= 8);
  for (const Sm90MatmulConfig& c : space) {
    INFO(c.json());
    kiln::compiler::CompileOptions o;
    o.chip = "sm_90";
    o.kernelConfigs[0] = c.json();
    auto cg = kiln::compiler::compileGraph(linearGelu(kiln::DType::BF16, false, false), o);
    REQUIRE(cg.kernels.size() == 1);
    const kiln::Graph g = linearGelu(kiln::DType::BF16, false, false);
    checkSm90Kernel(cg.kernels[0], c.blockN,
                    c.tmaStore && !c.pingpong &&
                        c.sharedBytes() + c.stagingBuffers * sm90StagingBytes(g) <= 227 * 1024);
    CHECK(cg.kernels[0].config == c.json());
  }
}

TEST_CASE("the sm_90a matmul kernel: every layout and dtype, the heuristic's config", "[compiler][nvrtc][matmul]") {
  for (kiln::DType t : {kiln::DType::BF16, kiln::DType::F16})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        INFO(kiln::dtypeName(t) << " transA " << ta << " transB " << tb);
        kiln::compiler::CompileOptions o;
        o.chip = "sm_90";
        kiln::Graph g = linearGelu(t, ta, tb);
        if (ta) {  // A stored [K, M] needs a static M (its rows' stride)
          kiln::Graph h;
          kiln::Tensor a = h.input("a", t, {256, 384});
          kiln::Tensor b = h.input("b", t, tb ? kiln::Shape{512, 256} : kiln::Shape{256, 512});
          h.output("y", kiln::matmul(a, b, {true, tb}));
          g = h;
        }
        auto cg = kiln::compiler::compileGraph(g, o);
        REQUIRE(cg.kernels.size() == 1);
        checkSm90Kernel(cg.kernels[0], kiln::compiler::sm90MatmulHeuristic(g, o.smCount).blockN, true);
      }
  // Off Hopper, or with rows TMA cannot take, the portable kernel serves.
  kiln::compiler::CompileOptions o;
  o.chip = "sm_80";
  auto cg = kiln::compiler::compileGraph(linearGelu(kiln::DType::BF16, false, false), o);
  CHECK_THAT(cg.kernels[0].source, Contains("mma.sync.aligned.m16n8k16"));
  CHECK(cg.kernels[0].tensorMaps.empty());
  kiln::Graph odd;
  odd.output("y", kiln::matmul(odd.input("a", kiln::DType::BF16, {64, 100}), odd.input("b", kiln::DType::BF16, {100, 64})));
  CHECK_FALSE(sm90MatmulApplies(odd));
  o.chip = "sm_90";
  CHECK_THAT(kiln::compiler::compileGraph(odd, o).kernels[0].source, Contains("mma.sync.aligned.m16n8k16"));
  CHECK_THROWS_WITH(applySm90MatmulOverride(*std::make_unique<Sm90MatmulConfig>(), "{\"block_n\": 96}"),
                    Contains("block_n"));
  CHECK_THROWS_WITH(applySm90MatmulOverride(*std::make_unique<Sm90MatmulConfig>(),
                                            "{\"block_n\": 192, \"staging_buffers\": 2, \"stages\": 3}"),
                    Contains("staging_buffers must divide"));
  CHECK_THROWS_WITH(applySm90MatmulOverride(*std::make_unique<Sm90MatmulConfig>(), "{\"staging_buffers\": 3}"),
                    Contains("staging_buffers"));
  Sm90MatmulConfig big;
  CHECK_THROWS_WITH(applySm90MatmulOverride(big, "{\"block_n\": 256, \"stages\": 8}"), Contains("shared memory"));
}

TEST_CASE("the sm_90a matmul kernel stores inner tiles through TMA where its outputs allow",
          "[compiler][nvrtc][matmul]") {
  using namespace kiln;
  kiln::compiler::CompileOptions o;
  o.chip = "sm_90";
  auto build = [](std::vector<DType> outs, int64_t n) {
    Graph g;
    Tensor y = matmul(g.input("a", DType::BF16, {"M", 256}), g.input("b", DType::BF16, {256, n}));
    for (size_t i = 0; i < outs.size(); ++i) g.output("y" + std::to_string(i), cast(relu(y) * double(i + 1), outs[i]));
    return g;
  };
  // One bf16 output, two outputs (bf16 + f32): one map per output.
  for (auto outs : {std::vector<DType>{DType::BF16}, std::vector<DType>{DType::BF16, DType::F32}}) {
    INFO(outs.size() << " output(s)");
    Graph g = build(outs, 512);
    CHECK(sm90StagingBytes(g) == (outs.size() == 1 ? 16384 : 16384 + 32768));
    auto cg = kiln::compiler::compileGraph(g, o);
    REQUIRE(cg.kernels.size() == 1);
    const auto& k = cg.kernels[0];
    const Sm90MatmulConfig h = sm90MatmulHeuristic(g, o.smCount);
    const bool fits = h.sharedBytes() + sm90StagingBytes(g) <= 227 * 1024;
    checkSm90Kernel(k, h.blockN, fits);
    if (fits) CHECK(k.launch.sharedBytes == h.sharedBytes() + sm90StagingBytes(g));
  }
  // What TMA cannot store: three outputs, a bool output, rows of 8 f32 + 4
  // (not 16-byte multiples: N = 12 for f32 is 48 bytes, fine; N = 10 is not).
  CHECK(sm90StagingBytes(build({DType::BF16, DType::BF16, DType::BF16}, 512)) == 0);
  CHECK(sm90StagingBytes(build({DType::Bool}, 512)) == 0);
  CHECK(sm90StagingBytes(build({DType::F32}, 12)) == 2 * 64 * 64 * 4);
  CHECK(sm90StagingBytes(build({DType::BF16}, 12)) == 0);
  // A dynamic N (attention scores: q @ k.T with T tokens): the output's map
  // is encoded where a launch's rows are 16-byte multiples, and the kernel
  // checks the same condition before it takes the TMA path.
  for (DType out : {DType::BF16, DType::F32}) {
    INFO("dynamic N, " << dtypeName(out) << " output");
    Graph g;
    Tensor y = matmul(g.input("q", DType::BF16, {"T", 128}), g.input("k", DType::BF16, {"T", 128}), {false, true});
    g.output("s", cast(y * 0.5, out));
    const int size = static_cast<int>(dtypeSize(out));
    CHECK(sm90StagingBytes(g) == 2 * 64 * 64 * size);
    auto cg = kiln::compiler::compileGraph(g, o);
    const auto& k = cg.kernels.at(0);
    const Sm90MatmulConfig h = sm90MatmulHeuristic(g, o.smCount);
    REQUIRE(h.sharedBytes() + sm90StagingBytes(g) <= 227 * 1024);
    REQUIRE(k.tensorMaps.size() == 3);
    CHECK_FALSE(k.tensorMaps[0].whenRowsAligned);
    CHECK_FALSE(k.tensorMaps[1].whenRowsAligned);
    CHECK(k.tensorMaps[2].whenRowsAligned);
    CHECK_THAT(k.source, Contains("kiln_tma_rows = true && (N * " + std::to_string(size) + ") % 16 == 0"));
    // K = 128 (short): the heuristic gives each 64-column chunk a staging
    // buffer of its own where it fits (bf16: 4 buffers next to a 3-stage
    // ring; f32: 2), each chunk waiting only for the stores of the chunk
    // that used its buffer last.
    const int nb = out == DType::BF16 ? 4 : 2;
    CHECK(h.stagingBuffers == nb);
    CHECK(h.stages == 3);
    CHECK(k.launch.sharedBytes == h.sharedBytes() + nb * sm90StagingBytes(g));
    CHECK_THAT(k.source, Contains("cp.async.bulk.wait_group.read " + std::to_string(nb - 1) + ";"));
    CHECK_THAT(k.config, Contains("\"staging_buffers\": " + std::to_string(nb)));
    // One buffer by override: each chunk waits for the previous chunk's
    // stores to have read it.
    kiln::compiler::CompileOptions one = o;
    one.kernelConfigs[0] = "{\"staging_buffers\": 1, \"stages\": 4}";
    const auto ks = kiln::compiler::compileGraph(g, one).kernels.at(0);
    Sm90MatmulConfig sc = h;
    applySm90MatmulOverride(sc, one.kernelConfigs[0]);
    CHECK(ks.launch.sharedBytes == sc.sharedBytes() + sm90StagingBytes(g));
    CHECK_THAT(ks.source, Contains("cp.async.bulk.wait_group.read 0;"));
    CHECK_THAT(ks.config, Contains("\"staging_buffers\": 1"));
    REQUIRE(ks.resources.size() == 1);
    CHECK(ks.resources[0].spillStoreBytes == 0);
    // A config of 4 stages over those buffers keeps as many as fit beside it.
    if (out == DType::BF16) {
      kiln::compiler::CompileOptions four = o;
      four.kernelConfigs[0] = "{\"staging_buffers\": 4, \"stages\": 4}";
      const auto k4 = kiln::compiler::compileGraph(g, four).kernels.at(0);
      CHECK_THAT(k4.config, Contains("\"stages\": 4") && Contains("\"staging_buffers\": 2"));
      CHECK(k4.tensorMaps.size() == 3);
    }
    CHECK_THAT(k.ptx, Contains("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group"));
    REQUIRE(k.resources.size() == 1);
    CHECK(k.resources[0].spillStoreBytes == 0);
    CHECK(k.resources[0].spillLoadBytes == 0);
  }
  // Turned off by the config: straight stores, two maps.
  o.kernelConfigs[0] = "{\"tma_store\": 0}";
  Graph g = build({DType::BF16}, 512);
  auto cg = kiln::compiler::compileGraph(g, o);
  checkSm90Kernel(cg.kernels[0], sm90MatmulHeuristic(g, o.smCount).blockN, false);
  CHECK_THAT(cg.kernels[0].config, Contains("\"tma_store\": 0"));
}

TEST_CASE("the sm_90a matmul kernel in clusters of 2 shares B's tile by TMA multicast", "[compiler][nvrtc][matmul]") {
  using namespace kiln;
  for (bool transB : {false, true})
    for (int bn : {128, 256}) {
      INFO("transB " << transB << ", block_n " << bn);
      kiln::compiler::CompileOptions o;
      o.chip = "sm_90";
      o.kernelConfigs[0] = "{\"cluster_m\": 2, \"block_n\": " + std::to_string(bn) + "}";
      auto cg = kiln::compiler::compileGraph(linearGelu(DType::BF16, false, transB), o);
      const auto& k = cg.kernels.at(0);
      checkSm90Kernel(k, bn, true);
      if (const char* dump = std::getenv("KILN_TEST_DUMP")) std::ofstream(dump) << k.source;
      CHECK_THAT(k.ptx, Contains("multicast::cluster"));
      CHECK_THAT(k.ptx, Contains("mapa.shared::cluster"));
      CHECK_THAT(k.ptx, Contains("barrier.cluster.arrive"));
      CHECK(k.launch.cluster == 2);
      CHECK(k.launch.tile == std::vector<int64_t>{256, bn});
      // K-major B: each CTA's box holds half of the tile's rows.
      CHECK(k.tensorMaps.at(1).boxRows == (transB ? bn / 2 : 64));
    }
  Sm90MatmulConfig c;
  CHECK_THROWS_WITH(applySm90MatmulOverride(c, "{\"cluster_m\": 2, \"block_n\": 192}"), Contains("block_n is 128 or 256"));
  CHECK_THROWS_WITH(applySm90MatmulOverride(c, "{\"cluster_m\": 4}"), Contains("cluster_m"));
  Sm90MatmulConfig p;
  CHECK_THROWS_WITH(applySm90MatmulOverride(p, "{\"cluster_m\": 2, \"block_n\": 128, \"pingpong\": 1}"),
                    Contains("cooperative"));
}
