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
