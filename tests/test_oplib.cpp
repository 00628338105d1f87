// The op library, evaluated by the reference evaluator, against formulas
// written out independently here on the same random inputs.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include "kiln/dsl/oplib.h"
#include "kiln/dsl/reference.h"
#include "kiln/dsl/text.h"
#include "samples.h"

using namespace kiln;

namespace {

double tolFor(DType t) {
  switch (t) {
    case DType::BF16: return 1e-2;
    case DType::F16: return 2e-3;
    default: return 1e-5;
  }
}

// |got - want| <= tol * max(1, |want|) for every element.
void checkClose(const HostTensor& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.numel() == static_cast<int64_t>(want.size()));
  for (int64_t i = 0; i < got.numel(); ++i) {
    double g = got.get(i), w = want[i];
    if (std::isnan(w)) {
      CHECK(std::isnan(g));
      continue;
    }
    if (std::fabs(g - w) > tol * std::max(1.0, std::fabs(w))) {
      INFO("element " << i << ": got " << g << ", want " << w);
      CHECK(false);
      return;
    }
  }
}

struct Rows {
  int64_t rows, cols;
};

}  // namespace

TEST_CASE("gelu, silu and swiglu match their formulas", "[oplib]") {
  DType dt = GENERATE(DType::F32, DType::BF16, DType::F16);
  Graph g;
  Tensor a = g.input("a", dt, {37});
  Tensor b = g.input("b", dt, {37});
  g.output("gelu", gelu(a));
  g.output("gelu_tanh", gelu_tanh(a));
  g.output("silu", silu(a));
  g.output("swiglu", swiglu(a, b));
  EvalInputs in = randomInputs(g, {}, 7, {{"a", {-4, 4}}, {"b", {-2, 2}}});
  auto outs = evaluate(g, in);
  const HostTensor& A = in.tensors.at("a");
  const HostTensor& B = in.tensors.at("b");
  std::vector<double> ge, gt, si, sw;
  for (int64_t i = 0; i < 37; ++i) {
    double x = A.get(i), y = B.get(i);
    ge.push_back(x * 0.5 * std::erfc(-x / std::sqrt(2.0)));
    gt.push_back(0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))));
    si.push_back(x / (1 + std::exp(-x)));
    sw.push_back(x / (1 + std::exp(-x)) * y);
  }
  checkClose(outs[0].value, ge, tolFor(dt));
  checkClose(outs[1].value, gt, tolFor(dt));
  checkClose(outs[2].value, si, tolFor(dt));
  checkClose(outs[3].value, sw, tolFor(dt));
  CHECK(outs[0].value.dtype() == dt);
}

TEST_CASE("softmax and log_softmax match their formulas on every row", "[oplib]") {
  DType dt = GENERATE(DType::F32, DType::BF16);
  Rows r = GENERATE(Rows{1, 1}, Rows{3, 17}, Rows{5, 1000});
  Graph g;
  Tensor x = g.input("x", dt, {r.rows, r.cols});
  g.output("sm", softmax(x));
  g.output("lsm", log_softmax(x, 1));
  EvalInputs in = randomInputs(g, {}, 11, {{"x", {-8, 8}}});
  auto outs = evaluate(g, in);
  const HostTensor& X = in.tensors.at("x");
  std::vector<double> sm, lsm;
  for (int64_t i = 0; i < r.rows; ++i) {
    double s = 0;
    for (int64_t j = 0; j < r.cols; ++j) s += std::exp(X.get(i * r.cols + j));
    for (int64_t j = 0; j < r.cols; ++j) {
      sm.push_back(std::exp(X.get(i * r.cols + j)) / s);
      lsm.push_back(X.get(i * r.cols + j) - std::log(s));
    }
  }
  checkClose(outs[0].value, sm, tolFor(dt));
  checkClose(outs[1].value, lsm, tolFor(dt));
}

TEST_CASE("softmax of a row holding -inf stays finite, and a fully -inf row gives NaN", "[oplib]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {2, 3});
  g.output("y", softmax(x));
  EvalInputs in;
  HostTensor X(DType::F32, {2, 3});
  double vals[] = {-INFINITY, 0.0, 0.0, -INFINITY, -INFINITY, -INFINITY};
  for (int i = 0; i < 6; ++i) X.set(i, vals[i]);
  in.tensors["x"] = X;
  auto y = evaluate(g, in)[0].value;
  CHECK(y.get(0) == 0.0);
  CHECK(y.get(1) == 0.5);
  CHECK(y.get(2) == 0.5);
  for (int i = 3; i < 6; ++i) CHECK(std::isnan(y.get(i)));
}

TEST_CASE("layernorm and rmsnorm match torch.nn.functional's formulas", "[oplib]") {
  DType dt = GENERATE(DType::F32, DType::BF16);
  const int64_t rows = 4, cols = 96;
  Graph g;
  Tensor x = g.input("x", dt, {rows, cols});
  Tensor w = g.input("w", dt, {cols});
  Tensor b = g.input("b", dt, {cols});
  g.output("ln", layernorm(x, w, b, 1e-5));
  g.output("ln_plain", layernorm(x, Tensor(), Tensor(), 1e-5));
  g.output("rms", rmsnorm(x, w, 1e-6));
  EvalInputs in = randomInputs(g, {}, 3, {{"x", {-3, 5}}});
  auto outs = evaluate(g, in);
  const HostTensor &X = in.tensors.at("x"), &W = in.tensors.at("w"), &B = in.tensors.at("b");
  std::vector<double> ln, lnp, rms;
  for (int64_t i = 0; i < rows; ++i) {
    double mu = 0, sq = 0;
    for (int64_t j = 0; j < cols; ++j) mu += X.get(i * cols + j) / cols;
    for (int64_t j = 0; j < cols; ++j) sq += std::pow(X.get(i * cols + j) - mu, 2) / cols;
    double ms = 0;
    for (int64_t j = 0; j < cols; ++j) ms += std::pow(X.get(i * cols + j), 2) / cols;
    for (int64_t j = 0; j < cols; ++j) {
      double n = (X.get(i * cols + j) - mu) / std::sqrt(sq + 1e-5);
      lnp.push_back(n);
      ln.push_back(n * W.get(j) + B.get(j));
      rms.push_back(X.get(i * cols + j) / std::sqrt(ms + 1e-6) * W.get(j));
    }
  }
  checkClose(outs[0].value, ln, tolFor(dt));
  checkClose(outs[1].value, lnp, tolFor(dt));
  checkClose(outs[2].value, rms, tolFor(dt));
}

TEST_CASE("cross_entropy matches log-sum-exp minus the target logit", "[oplib]") {
  DType dt = GENERATE(DType::F32, DType::BF16);
  const int64_t rows = 6, classes = 50;
  Graph g;
  Tensor logits = g.input("logits", dt, {"N", classes});
  Tensor targets = g.input("targets", DType::I64, {"N"});
  g.output("mean", cross_entropy(logits, targets));
  g.output("each", cross_entropy(logits, targets, Reduction::None));
  EvalInputs in = randomInputs(g, {{"N", rows}}, 5, {{"logits", {-20, 20}}, {"targets", {0, classes}}});
  auto outs = evaluate(g, in);
  const HostTensor &L = in.tensors.at("logits"), &T = in.tensors.at("targets");
  std::vector<double> each;
  double total = 0;
  for (int64_t i = 0; i < rows; ++i) {
    double s = 0;
    for (int64_t j = 0; j < classes; ++j) s += std::exp(L.get(i * classes + j));
    double loss = std::log(s) - L.get(i * classes + T.getInt(i));
    each.push_back(loss);
    total += loss;
  }
  CHECK(outs[0].value.dtype() == DType::F32);
  checkClose(outs[1].value, each, 1e-5);
  checkClose(outs[0].value, {total / rows}, 1e-5);
}

TEST_CASE("one AdamW step matches torch.optim.AdamW's update", "[oplib]") {
  Graph g;
  Tensor p = g.input("p", DType::F32, {33});
  Tensor gr = g.input("g", DType::F32, {33});
  Tensor m = g.input("m", DType::F32, {33});
  Tensor v = g.input("v", DType::F32, {33});
  AdamWScalars s = adamw_scalars(g);
  AdamWResult r = adamw_step(p, gr, m, v, s);
  g.output("p2", r.param);
  g.output("m2", r.exp_avg);
  g.output("v2", r.exp_avg_sq);
  EvalInputs in = randomInputs(g, {}, 9, {{"v", {0, 1}}});
  in.scalars = {{"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.01}, {"step", 7}};
  auto outs = evaluate(g, in);
  std::vector<double> P, M, V;
  const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
  for (int64_t i = 0; i < 33; ++i) {
    // the scalars are f32 parameters: round them as the graph does
    double flr = static_cast<float>(lr), fb1 = static_cast<float>(b1), fb2 = static_cast<float>(b2);
    double feps = static_cast<float>(eps), fwd = static_cast<float>(wd);
    double pp = in.tensors.at("p").get(i), gg = in.tensors.at("g").get(i);
    double mm = fb1 * in.tensors.at("m").get(i) + (1 - fb1) * gg;
    double vv = fb2 * in.tensors.at("v").get(i) + (1 - fb2) * gg * gg;
    double bc1 = 1 - std::pow(fb1, 7), bc2 = 1 - std::pow(fb2, 7);
    pp *= 1 - flr * fwd;
    pp -= flr / bc1 * mm / (std::sqrt(vv) / std::sqrt(bc2) + feps);
    P.push_back(pp);
    M.push_back(mm);
    V.push_back(vv);
    (void)lr; (void)b1; (void)b2; (void)eps; (void)wd;
  }
  checkClose(outs[0].value, P, 1e-6);
  checkClose(outs[1].value, M, 1e-6);
  checkClose(outs[2].value, V, 1e-6);
}

TEST_CASE("op library mistakes name the op and the operand", "[oplib][errors]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {4, 8});
  Tensor w = g.input("w", DType::F32, {7});
  Tensor i = g.input("i", DType::I32, {4, 8});
  Tensor t = g.input("t", DType::F32, {4});
  auto msg = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(msg([&] { rmsnorm(x, w); }), Catch::Contains("rmsnorm: weight is f32[7]"));
  CHECK_THAT(msg([&] { softmax(i); }), Catch::Contains("softmax: x is i32[4, 8]; expected a float dtype"));
  CHECK_THAT(msg([&] { cross_entropy(x, t); }), Catch::Contains("expected i32 or i64 class indices"));
  CHECK_THAT(msg([&] { layernorm(x, w, Tensor()); }), Catch::Contains("expected weight of shape [8]"));
}

TEST_CASE("the sample graph files are exactly what the DSL builds", "[oplib][samples]") {
  for (const samples::Sample& s : samples::all()) {
    INFO(s.name);
    std::string path = std::string(KILN_SOURCE_DIR) + "/examples/graphs/" + s.name + ".kiln";
    std::ifstream f(path);
    REQUIRE(f.good());
    std::stringstream ss;
    ss << f.rdbuf();
    Graph built = s.build();
    CHECK(ss.str() == printGraph(built));
    CHECK(parseGraph(ss.str(), path) == built);
  }
}

// ---- gradients: each backward op against central differences of the fp64
// reference evaluation of its forward op (f32 graphs compute in fp64 with
// no rounding but at the inputs), d/d input of sum(output * dy).

namespace {

double weightedSum(const Graph& fwd, const EvalInputs& in, const std::string& out, const HostTensor& dy) {
  for (const EvalOutput& o : evaluate(fwd, in)) {
    if (o.name != out) continue;
    double s = 0;
    for (size_t j = 0; j < o.exact.size(); ++j) s += o.exact[j] * dy.get(static_cast<int64_t>(j));
    return s;
  }
  FAIL("no output " << out);
  return 0;
}

std::vector<double> numericGrad(const Graph& fwd, const EvalInputs& in, const std::string& out, const HostTensor& dy,
                                const std::string& wrt) {
  std::vector<double> grad;
  const HostTensor& base = in.tensors.at(wrt);
  for (int64_t i = 0; i < base.numel(); ++i) {
    EvalInputs p = in;
    HostTensor& t = p.tensors.at(wrt);
    const double x0 = base.get(i), h = 0x1p-10;
    t.set(i, x0 + h);
    const double xp = t.get(i), fp = weightedSum(fwd, p, out, dy);
    t.set(i, x0 - h);
    const double xm = t.get(i), fm = weightedSum(fwd, p, out, dy);
    grad.push_back((fp - fm) / (xp - xm));
  }
  return grad;
}

const EvalOutput& outputNamed(const std::vector<EvalOutput>& outs, const std::string& name) {
  for (const EvalOutput& o : outs)
    if (o.name == name) return o;
  FAIL("no output " << name);
  return outs.front();
}

// The backward graph's output `name` against a numeric gradient.
void checkGrad(const std::vector<EvalOutput>& outs, const std::string& name, const std::vector<double>& want) {
  const EvalOutput& o = outputNamed(outs, name);
  INFO("gradient " << name);
  checkClose(o.value, want, 2e-4);
}

}  // namespace

TEST_CASE("softmax_backward and log_softmax_backward are the gradients of softmax and log_softmax", "[oplib][grad]") {
  const bool logForm = GENERATE(false, true);
  const int64_t axis = GENERATE(int64_t{-1}, int64_t{0});
  Graph fwd;
  Tensor x = fwd.input("x", DType::F32, {3, 9});
  fwd.output("y", logForm ? log_softmax(x, axis) : softmax(x, axis));
  EvalInputs in = randomInputs(fwd, {}, 11, {{"x", {-3, 3}}});
  HostTensor dy(DType::F32, {3, 9});
  std::mt19937_64 rng(12);
  dy.fillRandom(rng);
  auto want = numericGrad(fwd, in, "y", dy, "x");

  Graph bwd;
  Tensor y = bwd.input("y", DType::F32, {3, 9}), gy = bwd.input("dy", DType::F32, {3, 9});
  bwd.output("dx", logForm ? log_softmax_backward(gy, y, axis) : softmax_backward(gy, y, axis));
  EvalInputs bin;
  bin.tensors["y"] = evaluate(fwd, in)[0].value;
  bin.tensors["dy"] = dy;
  checkGrad(evaluate(bwd, bin), "dx", want);
}

TEST_CASE("layernorm_backward and rmsnorm_backward are the gradients of layernorm and rmsnorm", "[oplib][grad]") {
  const bool rms = GENERATE(false, true);
  const bool affine = GENERATE(true, false);
  INFO((rms ? "rmsnorm" : "layernorm") << (affine ? " with weight" : " without weight"));
  const Shape shape = {2, 3, 8};
  auto build = [&](Graph& g, bool backward) {
    Tensor x = g.input("x", DType::F32, shape);
    Tensor w = affine ? g.input("w", DType::F32, {8}) : Tensor();
    Tensor b = affine && !rms ? g.input("b", DType::F32, {8}) : Tensor();
    if (!backward) {
      g.output("y", rms ? rmsnorm(x, w, 1e-5) : layernorm(x, w, b, 1e-5));
      return;
    }
    Tensor dy = g.input("dy", DType::F32, shape);
    NormGrads r = rms ? rmsnorm_backward(dy, x, w, 1e-5) : layernorm_backward(dy, x, w, b, 1e-5);
    g.output("dx", r.dx);
    CHECK(r.dweight.valid() == affine);
    CHECK(r.dbias.valid() == (affine && !rms));
    if (r.dweight.valid()) g.output("dw", r.dweight);
    if (r.dbias.valid()) g.output("db", r.dbias);
  };
  Graph fwd, bwd;
  build(fwd, false);
  build(bwd, true);
  InputRanges ranges = {{"x", {-2, 2}}};
  if (affine) ranges["w"] = {0.5, 1.5};
  EvalInputs in = randomInputs(fwd, {}, 21, ranges);
  HostTensor dy(DType::F32, {2, 3, 8});
  std::mt19937_64 rng(22);
  dy.fillRandom(rng);
  EvalInputs bin = in;
  bin.tensors["dy"] = dy;
  auto outs = evaluate(bwd, bin);
  checkGrad(outs, "dx", numericGrad(fwd, in, "y", dy, "x"));
  if (affine) {
    checkGrad(outs, "dw", numericGrad(fwd, in, "y", dy, "w"));
    CHECK(outputNamed(outs, "dw").value.shape() == std::vector<int64_t>{8});
  }
  if (affine && !rms) checkGrad(outs, "db", numericGrad(fwd, in, "y", dy, "b"));
}

TEST_CASE("norm gradients come back in the dtypes of x and weight and bias", "[oplib][grad]") {
  Graph g;
  Tensor x = g.input("x", DType::BF16, {"N", 64});
  Tensor dy = g.input("dy", DType::BF16, {"N", 64});
  Tensor w = g.input("w", DType::F32, {64}), b = g.input("b", DType::F16, {64});
  NormGrads ln = layernorm_backward(dy, x, w, b);
  CHECK(ln.dx.dtype() == DType::BF16);
  CHECK(ln.dweight.dtype() == DType::F32);
  CHECK(ln.dbias.dtype() == DType::F16);
  CHECK(ln.dweight.shape() == Shape{64});
  NormGrads rn = rmsnorm_backward(dy, x, Tensor());
  CHECK(rn.dx.dtype() == DType::BF16);
  CHECK_FALSE(rn.dweight.valid());
}

TEST_CASE("cross_entropy_backward is the gradient of cross_entropy per row and averaged", "[oplib][grad]") {
  const Reduction red = GENERATE(Reduction::None, Reduction::Mean);
  Graph fwd;
  Tensor logits = fwd.input("logits", DType::F32, {4, 7});
  Tensor targets = fwd.input("targets", DType::I64, {4});
  fwd.output("loss", cross_entropy(logits, targets, red));
  EvalInputs in = randomInputs(fwd, {}, 31, {{"logits", {-3, 3}}, {"targets", {0, 7}}});
  in.tensors.at("targets").setInt(2, -1);  // outside the row: picks nothing
  const std::vector<int64_t> lossShape = red == Reduction::Mean ? std::vector<int64_t>{} : std::vector<int64_t>{4};
  HostTensor dloss(DType::F32, lossShape);
  std::mt19937_64 rng(32);
  dloss.fillRandom(rng, 0.5, 2);
  auto want = numericGrad(fwd, in, "loss", dloss, "logits");

  Graph bwd;
  Tensor l = bwd.input("logits", DType::F32, {4, 7});
  Tensor t = bwd.input("targets", DType::I64, {4});
  Tensor d = bwd.input("dloss", DType::F32, red == Reduction::Mean ? Shape{} : Shape{4});
  bwd.output("dlogits", cross_entropy_backward(d, l, t, red));
  EvalInputs bin = in;
  bin.tensors["dloss"] = dloss;
  checkGrad(evaluate(bwd, bin), "dlogits", want);
}

TEST_CASE("cross_entropy_backward's mean over a dynamic row count divides by the rows bound at launch",
          "[oplib][grad]") {
  Graph bwd;
  Tensor l = bwd.input("logits", DType::F32, {"M", 5});
  Tensor t = bwd.input("targets", DType::I32, {"M"});
  Tensor d = bwd.input("dloss", DType::F32, {});
  bwd.output("dlogits", cross_entropy_backward(d, l, t));
  Graph fixed;
  Tensor fl = fixed.input("logits", DType::F32, {6, 5});
  Tensor ft = fixed.input("targets", DType::I32, {6});
  Tensor fd = fixed.input("dloss", DType::F32, {});
  fixed.output("dlogits", cross_entropy_backward(fd, fl, ft));
  EvalInputs in = randomInputs(fixed, {}, 41, {{"targets", {0, 5}}});
  const std::vector<double> want = evaluate(fixed, in)[0].exact;
  in.dims["M"] = 6;
  checkClose(evaluate(bwd, in)[0].value, want, 1e-6);
}

TEST_CASE("gelu_backward and silu_backward are the gradients of gelu and silu", "[oplib][grad]") {
  const int form = GENERATE(0, 1, 2);  // gelu (erf), gelu (tanh), silu
  Graph fwd;
  Tensor x = fwd.input("x", DType::F32, {41});
  fwd.output("y", form == 2 ? silu(x) : gelu(x, form ? GeluApproximation::Tanh : GeluApproximation::None));
  EvalInputs in = randomInputs(fwd, {}, 51, {{"x", {-5, 5}}});
  HostTensor dy(DType::F32, {41});
  std::mt19937_64 rng(52);
  dy.fillRandom(rng);
  auto want = numericGrad(fwd, in, "y", dy, "x");
  Graph bwd;
  Tensor bx = bwd.input("x", DType::F32, {41}), gy = bwd.input("dy", DType::F32, {41});
  bwd.output("dx", form == 2 ? silu_backward(gy, bx)
                             : gelu_backward(gy, bx, form ? GeluApproximation::Tanh : GeluApproximation::None));
  EvalInputs bin = in;
  bin.tensors["dy"] = dy;
  checkGrad(evaluate(bwd, bin), "dx", want);
}

TEST_CASE("gradient mistakes name the op and the operand", "[oplib][grad][errors]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {4, 8});
  Tensor dyShort = g.input("dy", DType::F32, {4, 7});
  Tensor w = g.input("w", DType::F32, {8});
  Tensor t = g.input("t", DType::I64, {4});
  Tensor tf = g.input("tf", DType::F32, {4});
  auto says = [](const std::function<void()>& f, std::vector<std::string> parts) {
    try {
      f();
      FAIL("no error");
    } catch (const Error& e) {
      const std::string m = e.what();
      INFO(m);
      for (const std::string& p : parts) CHECK(m.find(p) != std::string::npos);
    }
  };
  says([&] { rmsnorm_backward(dyShort, x, w); }, {"rmsnorm_backward", "dy is f32[4, 7]", "x is f32[4, 8]"});
  says([&] { layernorm_backward(dyShort, x, w, Tensor()); }, {"layernorm_backward", "dy"});
  says([&] { softmax_backward(x, x, 2); }, {"softmax_backward", "axis 2"});
  says([&] { cross_entropy_backward(tf, x, t, Reduction::Mean); }, {"cross_entropy_backward", "dloss is f32[4]", "0-dim"});
  says([&] { cross_entropy_backward(x, x, tf, Reduction::None); }, {"cross_entropy_backward", "targets is f32[4]"});
  says([&] { gelu_backward(t, x); }, {"gelu_backward", "dy"});
}
