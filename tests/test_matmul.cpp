// The matmul schedule: on the CPU, every dtype and layout compiles through
// NVRTC and ptxas without spills (the Hopper TMA + wgmma kernel on sm_90
// where its layout rules hold, else the portable mma.sync / FMA kernel),
// epilogues fuse into the matmul's kernel, and graphs the schedule cannot
// take are refused with what is in the way; on the GPU, results match the
// fp64 reference for every epilogue, divisible and ragged shapes, transposes,
// batches, small M and every config of the Hopper kernel's space.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "gpu_support.h"
#include "matmul_graphs.h"
#include "op_sweep.h"
#include "kiln/kiln.h"
#include "kiln/runtime/device.h"
#include "kiln/runtime/timing.h"
#include "../compiler/src/matmul_sm90.h"

using namespace kiln;

namespace {

Graph matmulGraph(DType t, Dim M, Dim N, Dim K, bool transA, bool transB, Shape batchA = {}, Shape batchB = {}) {
  Graph g;
  Shape a = batchA, b = batchB;
  if (transA) a.insert(a.end(), {K, M});
  else a.insert(a.end(), {M, K});
  if (transB) b.insert(b.end(), {N, K});
  else b.insert(b.end(), {K, N});
  Tensor ta = g.input("a", t, a);
  Tensor tb = g.input("b", t, b);
  g.output("c", matmul(ta, tb, {transA, transB}));
  return g;
}

// y = gelu_tanh(a @ b + bias): the lesson's linear layer.
Graph linearBiasGelu(DType t, Dim M, int64_t N, int64_t K) {
  Graph g;
  Tensor y = matmul(g.input("a", t, {M, K}), g.input("b", t, {K, N})) + g.input("bias", t, {N});
  g.output("y", gelu_tanh(y));
  return g;
}

bool needsF32Tolerance(DType t, int64_t k) { return t == DType::F32 && k > 0; }

// Attention probabilities over the scores q @ k.T * scale ([batch.., Tq, Tk],
// head dim d): softmax (kind 0), log_softmax (1), or a softmax of the scores
// where a bool mask [Tq, Tk] ("mask") allows them and -inf elsewhere (2):
// the planner puts each in the matmul's kernel (its row-softmax form).
Graph attentionProbs(DType t, Dim tq, Dim tk, int64_t d, const Shape& batch, int kind) {
  Graph g;
  Shape qs = batch, ks = batch;
  qs.insert(qs.end(), {tq, d});
  ks.insert(ks.end(), {tk, d});
  std::vector<int64_t> perm;
  for (size_t i = 0; i < batch.size(); ++i) perm.push_back(static_cast<int64_t>(i));
  perm.push_back(static_cast<int64_t>(batch.size()) + 1);
  perm.push_back(static_cast<int64_t>(batch.size()));
  Tensor s = matmul(g.input("q", t, qs), permute(g.input("k", t, ks), perm)) * g.scalar("scale", DType::F32);
  if (kind == 2) s = where(g.input("mask", DType::Bool, {tq, tk}), s, -INFINITY);
  g.output("p", kind == 1 ? log_softmax(s) : softmax(s));
  return g;
}

}  // namespace

TEST_CASE("matmul: every dtype and layout compiles through NVRTC and ptxas without spills", "[compile][matmul]") {
  for (DType t : {DType::BF16, DType::F16, DType::F32})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        INFO(dtypeName(t) << " transA " << ta << " transB " << tb);
        Graph g = matmulGraph(t, Dim("M"), 256, 512, ta, tb, {Dim("B")}, {1});
        compiler::CompiledGraph cg = compiler::compileGraph(g, {});
        REQUIRE(cg.kernels.size() == 1);
        const auto& k = cg.kernels[0];
        CHECK(k.schedule == "matmul");
        // A stored [B, K, M] has the dynamic M as its row length: TMA needs
        // static 16-byte rows, so the portable kernel takes it.
        const bool hopper = t != DType::F32 && !ta;
        CHECK_THAT(k.source, Catch::Contains(t == DType::F32 ? "fmaf"
                                             : hopper        ? "wgmma.mma_async"
                                                             : "mma.sync.aligned.m16n8k16"));
        // Hopper: a map per operand and one for the output (TMA stores).
        CHECK(k.tensorMaps.size() == (hopper ? 3u : 0u));
        if (hopper) CHECK_THAT(k.ptx, Catch::Contains("cp.async.bulk.tensor.3d.global.shared::cta"));
        REQUIRE(k.resources.size() == 1);
        CHECK(k.resources[0].registers > 0);
        CHECK(k.resources[0].spillStoreBytes == 0);
        CHECK(k.dims == std::vector<std::string>{"B", "M"});
        CHECK_THAT(cg.explain, Catch::Contains("matmul"));
      }
}

TEST_CASE("matmul: a softmax over the product's rows joins the Hopper kernel where K is short (its row-softmax "
          "form)",
          "[compile][matmul]") {
  auto one = [](const Graph& g, const compiler::CompileOptions& o) {
    compiler::CompiledGraph cg = compiler::compileGraph(g, o);
    INFO(cg.explain);
    REQUIRE(cg.kernels.size() == 1);
    const auto& k = cg.kernels[0];
    CHECK(k.schedule == "matmul");
    CHECK_THAT(cg.explain, Catch::Contains("with the softmax over its rows"));
    CHECK_THAT(k.source, Catch::Contains("kiln_rowvals_inside") && Catch::Contains("wgmma.mma_async"));
    CHECK(k.launch.resident);
    REQUIRE(!k.resources.empty());
    for (const auto& r : k.resources) CHECK(r.spillStoreBytes == 0);
    return k;
  };
  for (int kind : {0, 1, 2})
    for (bool dynamic : {true, false})
      for (const Shape& batch : {Shape{}, Shape{2, Dim("H")}}) {
        INFO("kind " << kind << (dynamic ? ", T dynamic" : ", T static") << ", batch " << shapeToString(batch));
        const Dim T = dynamic ? Dim("T") : Dim(1000);
        const compiler::CompiledKernel k =
            one(attentionProbs(DType::BF16, T, T, 128, batch, kind), {.matmulRowSoftmax = true});
        // The heuristic's clusters: 4 CTAs for a dynamic row count; 8 rows
        // blocks of 1000 static rows fill 64 SMs with clusters of 8 (no more
        // than the row's 4 tiles of 256: 4).
        CHECK_THAT(k.config, Catch::Contains("\"cluster_n\": 4"));
        CHECK(k.launch.cluster == 4);
        CHECK_THAT(k.ptx, Catch::Contains("mbarrier.try_wait.parity.acquire.cluster"));
      }
  // Every cluster size, tile width and staging at the heuristic's stages.
  for (int cn : {1, 2, 4, 8})
    for (int bn : {128, 256})
      for (int nb : {1, 2}) {
        const std::string cfg = "{\"cluster_n\": " + std::to_string(cn) + ", \"block_n\": " + std::to_string(bn) +
                                ", \"staging_buffers\": " + std::to_string(nb) + ", \"stages\": 3}";
        INFO(cfg);
        const compiler::CompiledKernel k =
            one(attentionProbs(DType::F16, Dim("T"), Dim("S"), 64, {}, 0),
                {.matmulConfigOverride = cfg, .matmulRowSoftmax = true});
        CHECK(k.launch.cluster == cn);
        if (cn > 1) CHECK_THAT(k.config, Catch::Contains("\"cluster_n\": " + std::to_string(cn)));
        else CHECK_THAT(k.config, !Catch::Contains("cluster_n"));
      }
  // The form takes cooperative consumers and no B multicast: a config
  // asking otherwise is a clear error.
  for (const char* cfg : {"{\"pingpong\": 1, \"block_n\": 128, \"staging_buffers\": 1}", "{\"cluster_m\": 2}"})
    CHECK_THROWS_WITH(compiler::compileGraph(attentionProbs(DType::BF16, Dim("T"), Dim("T"), 128, {}, 0),
                                             {.matmulConfigOverride = cfg, .matmulRowSoftmax = true}),
                      Catch::Contains("softmax over its rows") && Catch::Contains("cooperative"));
  // cluster_n on a matmul without a softmax: the kernel's config says 1.
  {
    compiler::CompiledGraph cg = compiler::compileGraph(matmulGraph(DType::BF16, 256, 256, 128, false, false),
                                                        {.matmulConfigOverride = "{\"cluster_n\": 4}",
                                                         .matmulRowSoftmax = true});
    CHECK_THAT(cg.kernels.at(0).config, !Catch::Contains("cluster_n"));
  }
  // Where the product is stored and read back instead: a long K (computing
  // it twice would cost more), f32 operands (the portable kernel), another
  // target, the option off, the scores also an output.
  auto two = [](const Graph& g, const compiler::CompileOptions& o) {
    compiler::CompiledGraph cg = compiler::compileGraph(g, o);
    INFO(cg.explain);
    CHECK(cg.kernels.size() == 2);
    CHECK_THAT(cg.explain, !Catch::Contains("softmax over its rows"));
  };
  two(attentionProbs(DType::BF16, Dim("T"), Dim("T"), 512, {}, 0), {.matmulRowSoftmax = true});
  two(attentionProbs(DType::F32, Dim("T"), Dim("T"), 128, {}, 0), {.matmulRowSoftmax = true});
  two(attentionProbs(DType::BF16, Dim("T"), Dim("T"), 128, {}, 0), {.chip = "sm_80", .matmulRowSoftmax = true});
  two(attentionProbs(DType::BF16, Dim("T"), Dim("T"), 128, {}, 0), {});
  {
    Graph g;
    Tensor sc = matmul(g.input("q", DType::BF16, {"T", 64}), permute(g.input("k", DType::BF16, {"T", 64}), {1, 0}));
    g.output("scores", sc);
    g.output("p", softmax(sc));
    two(g, {.matmulRowSoftmax = true});
  }
}

TEST_CASE("matmul: f32 through tf32 runs mma.sync m16n8k8 on tf32 operands", "[compile][matmul]") {
  for (bool tb : {false, true}) {
    Graph g;
    Tensor y = matmul(g.input("a", DType::F32, {"M", 264}), g.input("b", DType::F32, tb ? Shape{136, 264} : Shape{264, 136}),
                      {.transB = tb, .tf32 = true});
    g.output("y", relu(y));
    compiler::CompiledGraph cg = compiler::compileGraph(g, {});
    const auto& k = cg.kernels.at(0);
    CHECK_THAT(k.source, Catch::Contains("cvt.rna.tf32.f32"));
    CHECK_THAT(k.ptx, Catch::Contains("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"));
    CHECK(k.resources.at(0).spillStoreBytes == 0);
    CHECK_THAT(cg.explain, Catch::Contains("through tf32"));
    // The attribute survives the graph's text (and so the cache keys).
    CHECK_THAT(g.toText(), Catch::Contains("tf32 = true"));
    CHECK(parseGraph(g.toText()).toText() == g.toText());
  }
}

TEST_CASE("matmul: elementwise consumers fuse into the matmul's kernel as its epilogue", "[compile][matmul]") {
  Graph g = linearBiasGelu(DType::BF16, Dim("M"), 512, 256);
  compiler::CompiledGraph cg = compiler::compileGraph(g, {});
  REQUIRE(cg.kernels.size() == 1);
  CHECK_THAT(cg.explain, Catch::Contains("epilogue of 12 fused elementwise op(s)"));
  CHECK_THAT(cg.kernels[0].source, Catch::Contains("kiln_epilogue") && Catch::Contains("kiln_tanh_approx"));
  // Several outputs (pre-activation and activation), a residual, a runtime
  // scalar, a column bias and a cast to f32.
  Graph h;
  Dim M("M");
  Tensor acc = matmul(h.input("a", DType::BF16, {M, 256}), h.input("w", DType::BF16, {512, 256}), {false, true});
  Tensor pre = acc * h.scalar("alpha", DType::F32) + h.input("rowbias", DType::BF16, {M, 1});
  h.output("pre", pre);
  h.output("out", cast(relu(pre) + h.input("residual", DType::BF16, {M, 512}), DType::F32));
  cg = compiler::compileGraph(h, {});
  REQUIRE(cg.kernels.size() == 1);
  CHECK(cg.kernels[0].tensors.size() == 6);
  CHECK(cg.kernels[0].scalars.size() == 1);
  CHECK(cg.kernels[0].resources[0].spillStoreBytes == 0);
}

TEST_CASE("matmul: graphs with other ops around a matmul compile in stages, each matmul a kernel with its epilogue",
          "[compile][matmul]") {
  for (DType t : {DType::BF16, DType::F32})
    for (const test::MatmulGraphCase& m : test::matmulGraphCases(t))
      for (bool rowSoftmax : {true, false}) {
      INFO(m.c.label << (rowSoftmax ? "" : ", a softmax over a matmul's rows in a row kernel"));
      compiler::CompiledGraph cg = compiler::compileGraph(m.c.graph, {.matmulRowSoftmax = rowSoftmax});
      INFO(cg.explain);
      CHECK(cg.kernels.size() == m.kernelsFor(t, rowSoftmax));
      int matmuls = 0;
      for (const auto& k : cg.kernels) {
        matmuls += k.schedule == "matmul";
        for (const auto& r : k.resources) CHECK(r.spillStoreBytes == 0);
      }
      CHECK(matmuls >= 1);
      // The facade's launch plan takes it (each kernel's tensors found among
      // the graph's or the workspace's), as `kiln aot` does.
      CHECK_NOTHROW(compile(m.c.graph, {.chip = "sm_90", .matmulRowSoftmax = rowSoftmax}));
    }
  // The transpose of an input, and of a computed value's transpose, are
  // read in place (transA/transB), not copied: one kernel.
  Graph g;
  Tensor a = g.input("a", DType::BF16, {64, 128});
  Tensor b = g.input("b", DType::BF16, {32, 128});
  g.output("y", matmul(permute(permute(a, {1, 0}), {1, 0}), permute(b, {1, 0})));
  compiler::CompiledGraph cg = compiler::compileGraph(g, {});
  CHECK(cg.kernels.size() == 1);
  CHECK_THAT(cg.explain, Catch::Contains("B transposed") && !Catch::Contains("A transposed"));
  // A product reduced: the matmul writes it to the workspace, a row kernel
  // sums it; explain() says which kernel reads what.
  Graph h;
  h.output("s", sum(matmul(h.input("a", DType::BF16, {64, 128}), h.input("b", DType::BF16, {128, 32})), {1}));
  cg = compiler::compileGraph(h, {});
  REQUIRE(cg.kernels.size() == 2);
  CHECK(cg.kernels[0].schedule == "matmul");
  CHECK(cg.kernels[1].schedule == "row_reduction");
  CHECK_THAT(cg.explain, Catch::Contains("writes kiln_mm0") && Catch::Contains("reads kiln_mm0 (kernel 0)"));
  // The attention scores' softmax widens the scaled bf16 product to f32:
  // where the product is stored (no row-softmax form), the matmul stores the
  // bf16 value (half the bytes) and the row kernel casts it, rather than the
  // epilogue storing the f32 cast.
  for (DType t : {DType::BF16, DType::F16}) {
    INFO(dtypeName(t));
    Graph a;
    Tensor q = a.input("q", t, {"T", 128});
    Tensor k = a.input("k", t, {"T", 128});
    a.output("p", softmax(matmul(q, permute(k, {1, 0})) * a.scalar("scale", DType::F32)));
    cg = compiler::compileGraph(a, {.matmulRowSoftmax = false});
    INFO(cg.explain);
    REQUIRE(cg.kernels.size() == 2);
    REQUIRE(cg.workspace.size() == 1);
    CHECK(cg.workspace[0].dtype == t);
    CHECK_THAT(cg.explain, Catch::Contains("epilogue of 1 fused elementwise op(s) (mul)"));
  }
  // A widened product that is also a graph output stays in the epilogue
  // (it is written anyway), and the row kernel reads it back.
  {
    Graph a;
    Tensor s32 = cast(matmul(a.input("q", DType::BF16, {64, 128}), a.input("k", DType::BF16, {128, 96})), DType::F32);
    a.output("s", s32);
    a.output("m", max(s32, {1}));
    cg = compiler::compileGraph(a, {});
    INFO(cg.explain);
    REQUIRE(cg.kernels.size() == 2);
    CHECK(cg.workspace.empty());
    CHECK_THAT(cg.explain, Catch::Contains("(cast)"));
  }
  // bf16 tensor cores need sm_80.
  CHECK_THROWS_WITH(compiler::compileGraph(matmulGraph(DType::BF16, 64, 64, 64, false, false), {.chip = "sm_75"}),
                    Catch::Contains("sm_80"));
  // A bad config override names its key.
  CHECK_THROWS_WITH(compile(matmulGraph(DType::BF16, 64, 64, 64, false, false),
                            {.chip = "sm_90", .matmulConfigOverride = "{\"block_n\": 100}"}),
                    Catch::Contains("block_n"));
}

TEST_CASE("matmul matches the reference: dtypes, layouts, ragged shapes, batches, small M", "[gpu][matmul]") {
  test::requireGpu();
  struct Shape3 {
    int64_t m, n, k;
  };
  // Static shapes: the Hopper kernel takes bf16/f16 whose rows are
  // multiples of 8 elements (K 100 and N 67 go to the portable kernel).
  for (DType t : {DType::BF16, DType::F16, DType::F32})
    for (Shape3 s : {Shape3{128, 256, 64}, Shape3{300, 200, 136}, Shape3{129, 67, 100}, Shape3{16, 384, 1024},
                     Shape3{1, 8, 16}, Shape3{256, 512, 8}})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          INFO(dtypeName(t) << " M " << s.m << " N " << s.n << " K " << s.k << " transA " << ta << " transB " << tb);
          test::RunOptions o;
          // f32 accumulates in another order than the fp64 reference.
          o.tolScale = needsF32Tolerance(t, s.k) ? std::sqrt(static_cast<double>(s.k)) : 1.0;
          test::runAndCheck(matmulGraph(t, s.m, s.n, s.k, ta, tb), o);
        }
  // f32 through tf32: both layouts of each operand, ragged tiles; the
  // reference rounds the operands the same way, so only the order of the
  // f32 sums differs.
  for (Shape3 s : {Shape3{300, 200, 136}, Shape3{129, 67, 100}, Shape3{1, 8, 16}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        INFO("tf32 M " << s.m << " N " << s.n << " K " << s.k << " transA " << ta << " transB " << tb);
        Graph g;
        Shape a = ta ? Shape{s.k, s.m} : Shape{s.m, s.k}, b = tb ? Shape{s.n, s.k} : Shape{s.k, s.n};
        g.output("c", matmul(g.input("a", DType::F32, a), g.input("b", DType::F32, b), {ta, tb, true}));
        test::RunOptions o;
        o.tolScale = std::sqrt(static_cast<double>(s.k));
        test::runAndCheck(g, o);
      }
  // A dynamic M.
  for (DType t : {DType::BF16, DType::F32})
    for (int64_t m : {1, 200, 1000}) {
      INFO(dtypeName(t) << " M " << m);
      test::RunOptions o;
      o.dims = {{"M", m}};
      o.tolScale = t == DType::F32 ? 16 : 1;
      test::runAndCheck(matmulGraph(t, Dim("M"), 136, 264, false, false), o);
    }
  // A dynamic N (scores q @ k.T over N keys): the Hopper kernel stores its
  // inner tiles through TMA where a launch's rows are 16-byte multiples
  // (N 264, 1000) and from registers where they are not (N 1, 260, 1001).
  for (DType out : {DType::BF16, DType::F32})
    for (int64_t n : {1, 260, 264, 1000, 1001}) {
      INFO("dynamic N " << n << ", " << dtypeName(out) << " output");
      Graph g;
      Tensor s = matmul(g.input("q", DType::BF16, {300, 64}), g.input("k", DType::BF16, {"N", 64}), {false, true});
      g.output("s", cast(s * 0.5, out));
      test::RunOptions o;
      o.dims = {{"N", n}};
      test::runAndCheck(g, o);
    }
  // Batches: [B, M, K] @ [K, N], and [2, 1, M, K] @ [3, N, K] broadcast.
  for (DType t : {DType::BF16, DType::F32}) {
    INFO(dtypeName(t));
    test::RunOptions o;
    o.dims = {{"B", 3}};
    o.tolScale = t == DType::F32 ? 16 : 1;
    test::runAndCheck(matmulGraph(t, 70, 136, 96, false, false, {Dim("B")}, {}), o);
    test::runAndCheck(matmulGraph(t, 33, 40, 48, false, true, {2, 1}, {3}), {.tolScale = o.tolScale});
    test::runAndCheck(matmulGraph(t, 64, 128, 72, true, false, {4}, {4}), {.tolScale = o.tolScale});
  }
}

// Graphs with matmuls among other ops (tests/matmul_graphs.h): operands
// computed by earlier kernels, products normalized or reduced by later
// ones, chains of matmuls, through the workspace in launch order.
TEST_CASE("graphs with matmuls among other ops match the reference", "[gpu][matmul]") {
  test::requireGpu();
  for (DType t : {DType::BF16, DType::F32})
    for (const test::MatmulGraphCase& m : test::matmulGraphCases(t))
      for (bool rowSoftmax : {false, true}) {
        INFO(m.c.label << (rowSoftmax ? ", a softmax over a matmul's rows in the matmul's kernel" : ""));
        test::RunOptions o;
        o.dims = m.dims;
        o.ranges = m.c.ranges;
        o.relFloor = m.c.relFloor;
        o.tolScale = m.c.tolScale;
        o.compile.matmulRowSoftmax = rowSoftmax;
        Kernel k = test::runAndCheck(m.c.graph, o);
        CHECK(k.explain().find("matmul") != std::string::npos);
        CHECK(k.compiled().kernels.size() == m.kernelsFor(t, rowSoftmax && rt::Device::current().basics().arch() == "sm_90"));
      }
}

TEST_CASE("matmul epilogues match the reference", "[gpu][matmul]") {
  test::requireGpu();
  for (DType t : {DType::BF16, DType::F16}) {
    INFO(dtypeName(t));
    const Dim M("M");
    const int64_t N = 392, K = 520;
    auto base = [&](Graph& g) { return matmul(g.input("a", t, {M, K}), g.input("b", t, {K, N})); };
    std::vector<std::pair<std::string, std::function<void(Graph&)>>> cases = {
        {"bias + gelu_tanh", [&](Graph& g) { g.output("y", gelu_tanh(base(g) + g.input("bias", t, {N}))); }},
        {"bias + gelu (erf)", [&](Graph& g) { g.output("y", gelu(base(g) + g.input("bias", t, {N}))); }},
        {"relu", [&](Graph& g) { g.output("y", relu(base(g))); }},
        {"silu", [&](Graph& g) { g.output("y", silu(base(g))); }},
        {"sigmoid", [&](Graph& g) { g.output("y", sigmoid(base(g))); }},
        {"column bias", [&](Graph& g) { g.output("y", base(g) + g.input("cb", t, {M, 1})); }},
        {"residual", [&](Graph& g) { g.output("y", base(g) + g.input("r", t, {M, N})); }},
        {"scalars", [&](Graph& g) {
           g.output("y", base(g) * g.scalar("alpha", DType::F32) + g.input("r", t, {M, N}) * g.scalar("beta", DType::F32));
         }},
        {"cast to f32", [&](Graph& g) { g.output("y", cast(base(g), DType::F32)); }},
        {"two outputs", [&](Graph& g) {
           Tensor pre = base(g) + g.input("bias", t, {N});
           g.output("pre", pre);
           g.output("act", gelu_tanh(pre));
         }},
        {"where", [&](Graph& g) {
           Tensor y = base(g);
           g.output("y", where(y > 0.0, y, y * 0.01));
         }},
    };
    for (auto& [name, build] : cases) {
      INFO(name);
      Graph g;
      build(g);
      test::RunOptions o;
      o.dims = {{"M", 257}};
      if (name == "scalars") o.scalars = {{"alpha", 0.5}, {"beta", -1.25}};
      test::runAndCheck(g, o);
    }
  }
}

TEST_CASE("matmul: every config of the Hopper kernel's space matches the reference", "[gpu][matmul]") {
  test::requireGpu();
  if (rt::Device::current().basics().arch() != "sm_90") {
    WARN("SKIPPED: the Hopper kernel's configs need an sm_90 GPU");
    return;
  }
  for (const compiler::Sm90MatmulConfig& c : compiler::sm90MatmulSpace()) {
    INFO(c.json());
    test::RunOptions o;
    o.compile.matmulConfigOverride = c.json();
    o.compile.tune = CompileOptions::Tune::Off;
    o.dims = {{"M", 700}};
    test::runAndCheck(linearBiasGelu(DType::BF16, Dim("M"), 1000, 1096), o);
  }
}

// The row-softmax form (a softmax over the product's rows in the Hopper
// kernel, the product computed twice): ragged rows and columns (one column
// tile, fewer tiles than the cluster's CTAs, a last tile of one column),
// batches, log_softmax, masked rows (all masked: NaN, as torch), every
// cluster size, static and dynamic T, against the reference.
TEST_CASE("matmul: a softmax over the product's rows in the Hopper kernel matches the reference", "[gpu][matmul]") {
  test::requireGpu();
  if (rt::Device::current().basics().arch() != "sm_90") {
    WARN("SKIPPED: the row-softmax form is the Hopper kernel's (sm_90)");
    return;
  }
  struct Case {
    int64_t tq, tk, d;
    Shape batch;
    int kind;
    bool dynamic;
    std::string config;
  };
  // Small ones first (KILN_ROW_SOFTMAX_CASES below).
  std::vector<Case> cases = {
      {1, 7, 64, {}, 0, true, ""},              {200, 200, 64, {}, 1, true, ""},
      {300, 257, 128, {}, 0, true, ""},         {640, 520, 64, {2}, 2, true, ""},
      {129, 3000, 64, {2, 3}, 0, true, ""},     {1000, 1000, 128, {}, 0, false, ""},
      {700, 1000, 128, {}, 1, false, ""},       {4096, 4096, 128, {}, 0, true, ""},
  };
  for (int cn : {1, 2, 8})
    cases.push_back({700, 2100, 128, {}, 0, true, "{\"cluster_n\": " + std::to_string(cn) + "}"});
  // Every config of the form's tuning space.
  for (const compiler::Sm90MatmulConfig& c : compiler::sm90RowMatmulSpace())
    cases.push_back({300, 1100, 64, {}, 0, true, c.json()});
  // KILN_ROW_SOFTMAX_CASES=N: the first N cases only (under compute-sanitizer).
  if (const char* n = std::getenv("KILN_ROW_SOFTMAX_CASES"))
    cases.resize(std::min(cases.size(), static_cast<size_t>(std::max(0, std::atoi(n)))));
  for (const Case& c : cases) {
    INFO("Tq " << c.tq << ", Tk " << c.tk << ", d " << c.d << ", batch " << shapeToString(c.batch) << ", kind "
               << c.kind << (c.dynamic ? ", dynamic" : ", static") << " " << c.config);
    const Graph g = attentionProbs(DType::BF16, c.dynamic ? Dim("T") : Dim(c.tq), c.dynamic ? Dim("S") : Dim(c.tk),
                                   c.d, c.batch, c.kind);
    test::RunOptions o;
    if (c.dynamic) o.dims = {{"T", c.tq}, {"S", c.tk}};
    o.ranges = {{"q", {-1, 1}}, {"k", {-1, 1}}};
    o.scalars = {{"scale", 1 / std::sqrt(static_cast<double>(c.d))}};
    o.relFloor = {{"p", c.kind == 1 ? 1.0 : 0.0}};
    o.tolScale = 4;
    o.compile.matmulConfigOverride = c.config;
    o.compile.matmulRowSoftmax = true;
    o.compile.tune = CompileOptions::Tune::Off;
    // The mask: rows 0 and 5 all masked (NaN, as torch), the rest random.
    if (c.kind == 2)
      o.prepare = [&](EvalInputs& in) {
        HostTensor& m = in.tensors.at("mask");
        for (int64_t j = 0; j < c.tk; ++j)
          for (int64_t r : {int64_t(0), int64_t(5)}) m.set(r * c.tk + j, 0);
      };
    Kernel k = test::runAndCheck(g, o);
    CHECK(k.explain().find("softmax over its rows") != std::string::npos);
  }
}

TEST_CASE("matmul: clusters of 2 (B multicast) with an odd number of tile rows, small M and either B layout",
          "[gpu][matmul]") {
  test::requireGpu();
  if (rt::Device::current().basics().arch() != "sm_90") {
    WARN("SKIPPED: clusters with TMA multicast need an sm_90 GPU");
    return;
  }
  for (int bn : {128, 256})
    for (int64_t m : {300, 16, 1000}) {
      INFO("block_n " << bn << ", M " << m);
      test::RunOptions o;
      o.compile.matmulConfigOverride = "{\"cluster_m\": 2, \"block_n\": " + std::to_string(bn) + "}";
      o.compile.tune = CompileOptions::Tune::Off;
      o.dims = {{"M", m}};
      test::runAndCheck(linearBiasGelu(DType::BF16, Dim("M"), 1000, 328), o);
      test::runAndCheck(matmulGraph(DType::F16, Dim("M"), 520, 1096, false, true), o);
    }
}

TEST_CASE("matmul: a misaligned operand of the Hopper kernel is a clear error", "[gpu][matmul]") {
  test::requireGpu();
  if (rt::Device::current().basics().arch() != "sm_90") {
    WARN("SKIPPED: the Hopper kernel needs an sm_90 GPU");
    return;
  }
  Kernel k = compile(matmulGraph(DType::BF16, 128, 128, 64, false, false));
  rt::DeviceBuffer a(128 * 64 * 2 + 64), b(64 * 128 * 2), c(128 * 128 * 2);
  std::vector<TensorView> views{TensorView(static_cast<char*>(a.data()) + 2, DType::BF16, {128, 64}),
                                TensorView(b.data(), DType::BF16, {64, 128}), TensorView(c.data(), DType::BF16, {128, 128})};
  CHECK_THROWS_WITH(k.launch(std::span<const TensorView>(views)),
                    Catch::Contains("tensor 'a'") && Catch::Contains("16-byte aligned"));
}

TEST_CASE("matmul: time at 4096^3 bf16 (printed, not a goal; bench_matmul measures)", "[gpu][matmul]") {
  test::requireGpu();
  const int64_t n = 4096;
  Graph g = matmulGraph(DType::BF16, n, n, n, false, false);
  Kernel k = compile(g);
  rt::DeviceBuffer a(n * n * 2), b(n * n * 2), c(n * n * 2);
  a.fill(0x3c);
  b.fill(0x3c);
  std::vector<TensorView> views{TensorView(a.data(), DType::BF16, {n, n}), TensorView(b.data(), DType::BF16, {n, n}),
                                TensorView(c.data(), DType::BF16, {n, n})};
  rt::BenchmarkOptions bo;
  bo.warmup = 2;
  bo.iters = 10;
  double us = rt::benchmark([&] { k.launch(std::span<const TensorView>(views)); }, bo).medianUs;
  std::printf("matmul bf16 4096^3 (%s): %.1f us, %.1f TFLOP/s\n", k.explain().find("stages") != std::string::npos ? "sm_90a kernel" : "portable kernel", us,
              2.0 * n * n * n / (us * 1e-6) / 1e12);
  CHECK(us > 0);
}

// Small enough for compute-sanitizer (scripts/gpu-memcheck.sh runs it): the
// Hopper kernel on ragged tiles (M, N, K not multiples of the tile), A
// transposed, and a batch, with an epilogue reading a bias.
TEST_CASE("matmul: small shapes for compute-sanitizer", "[gpu][matmul][memcheck]") {
  test::requireGpu();
  test::RunOptions o;
  o.dims = {{"M", 200}};
  test::runAndCheck(linearBiasGelu(DType::BF16, Dim("M"), 136, 264), o);
  test::runAndCheck(matmulGraph(DType::F16, 72, 200, 136, true, true), {});
  test::runAndCheck(matmulGraph(DType::BF16, 40, 64, 72, false, false, {2}, {2}), {});
  // A dynamic N through TMA stores (N 264, 520: one staging buffer, and
  // one per chunk, the heuristic's for this short K) and from registers
  // (N 260).
  for (int64_t n : {264, 260, 520}) {
    Graph g;
    g.output("s", matmul(g.input("q", DType::BF16, {130, 64}), g.input("k", DType::BF16, {"N", 64}), {false, true}));
    test::RunOptions d;
    d.dims = {{"N", n}};
    if (n == 264) d.compile.matmulConfigOverride = "{\"staging_buffers\": 1, \"stages\": 4}";
    test::runAndCheck(g, d);
  }
  // A cluster of 2 over 3 tile rows (the last pair's second CTA beyond M).
  o.dims = {{"M", 300}};
  o.compile.matmulConfigOverride = "{\"cluster_m\": 2, \"block_n\": 128}";
  test::runAndCheck(linearBiasGelu(DType::BF16, Dim("M"), 136, 264), o);
}

namespace {

// The matmul epilogue's element emitter (cuda_element.cpp) over every op it
// takes: graphs whose epilogue computes, next to the matmul's own output c,
// each op on inputs of their own (in the op sweep's ranges), the first one
// plus c * 0 (exactly 0: it makes the op part of the epilogue, which takes
// the nodes that read the product). Three graphs per float dtype (unary
// ops; binary ops; where, fma and float casts), so that a kernel stays
// under the launcher's 64 tensors.
struct EpilogueSweep {
  Graph graph;
  InputRanges ranges;
  Tensor zero;  // c * 0
  int ops = 0;
};

std::vector<EpilogueSweep> epilogueSweeps(DType t) {
  const Shape s{64, 72};
  std::vector<EpilogueSweep> out(3);
  for (EpilogueSweep& e : out) {
    Tensor c = matmul(e.graph.input("ma", t, {64, 16}), e.graph.input("mb", t, {16, 72}));
    e.graph.output("c", c);
    e.zero = c * 0.0;
    e.ranges = {{"ma", {-1, 1}}, {"mb", {-1, 1}}};
  }
  // Adds `build` to sweep e under `name` when the DSL takes it and the
  // result is a float or bool (what an epilogue computes).
  auto add = [&](EpilogueSweep& e, const std::string& name, const InputRanges& r, int arity, bool boolC,
                 const std::function<Tensor(const std::vector<Tensor>&)>& build) {
    {
      Graph probe;
      std::vector<Tensor> in;
      for (int i = 0; i < arity; ++i) in.push_back(probe.input(std::string(1, char('a' + i)), i == 2 && boolC ? DType::Bool : t, s));
      try {
        Tensor y = build(in);
        if (y.dtype() != DType::Bool && !isFloat(y.dtype())) return;
      } catch (const Error&) {
        return;
      }
    }
    std::vector<Tensor> in;
    for (int i = 0; i < arity; ++i) {
      const std::string key(1, char('a' + i)), input = key + "_" + name;
      in.push_back(e.graph.input(input, i == 2 && boolC ? DType::Bool : t, s));
      if (auto it = r.find(key); it != r.end()) e.ranges[input] = it->second;
    }
    in[0] = in[0] + e.zero;
    e.graph.output("y_" + name, build(in));
    ++e.ops;
  };
  for (Op op : test::unaryOps())
    add(out[0], std::string(opName(op)), test::rangesFor(op, t), 1, false,
        [&](const std::vector<Tensor>& in) { return unary(op, in[0]); });
  for (Op op : test::binaryOps())
    add(out[1], std::string(opName(op)), test::rangesFor(op, t), 2, false,
        [&](const std::vector<Tensor>& in) { return binary(op, in[0], in[1]); });
  add(out[2], "where", test::rangesFor(Op::Where, t), 3, true,
      [&](const std::vector<Tensor>& in) { return where(in[2], in[0], in[1]); });
  add(out[2], "fma", test::rangesFor(Op::Fma, t), 3, false,
      [&](const std::vector<Tensor>& in) { return fma(in[0], in[1], in[2]); });
  for (DType to : {DType::F32, DType::BF16, DType::F16})
    add(out[2], "cast_" + std::string(dtypeName(to)), {{"a", {-100, 100}}}, 1, false,
        [&](const std::vector<Tensor>& in) { return cast(in[0], to); });
  return out;
}

}  // namespace

TEST_CASE("matmul epilogues: every float op compiles in the epilogue's CUDA C++", "[compile][matmul]") {
  for (DType t : {DType::BF16, DType::F32}) {
    int ops = 0;
    for (EpilogueSweep& e : epilogueSweeps(t)) {
      INFO(dtypeName(t) << ": " << e.graph.toText().substr(0, 400));
      compiler::CompiledGraph cg = compiler::compileGraph(e.graph, {});
      INFO(cg.explain);
      REQUIRE(cg.kernels.size() == 1);
      CHECK(cg.kernels[0].schedule == "matmul");
      ops += e.ops;
    }
    CHECK(ops >= 30);  // 14 unary, 16 binary, where, fma, 3 casts, less what the DSL refuses
  }
}

TEST_CASE("matmul epilogues: every float op matches the reference", "[gpu][matmul]") {
  test::requireGpu();
  for (DType t : {DType::BF16, DType::F16, DType::F32})
    for (EpilogueSweep& e : epilogueSweeps(t)) {
      INFO(dtypeName(t) << ", " << e.ops << " ops");
      test::RunOptions o;
      o.ranges = e.ranges;
      o.tolScale = t == DType::F32 ? 4 : 1;
      test::runAndCheck(e.graph, o);
    }
}
