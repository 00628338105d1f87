#include "kiln/dsl/oplib.h"

#include <cmath>

namespace kiln {

namespace {

// The dtype ops compute in: f32 for half types, else the input's.
DType opmath(DType t) { return (t == DType::F16 || t == DType::BF16) ? DType::F32 : t; }

Tensor toOpmath(const Tensor& x, const Loc& loc) {
  return x.dtype() == opmath(x.dtype()) ? x : cast(x, opmath(x.dtype()), loc);
}

Tensor backTo(const Tensor& y, DType t, const Loc& loc) {
  return y.dtype() == t ? y : cast(y, t, loc);
}

[[noreturn]] void fail(std::string_view op, const std::string& problem, const Loc& loc) {
  throw Error("kiln: " + std::string(op) + ": " + problem + " (at " + formatLocation(loc) + ")");
}

void requireFloat(std::string_view op, std::string_view what, const Tensor& t, const Loc& loc) {
  if (!t.valid()) fail(op, std::string(what) + " is an empty Tensor handle; expected a tensor", loc);
  if (!isFloat(t.dtype()))
    fail(op, std::string(what) + " is " + typeToString(t.dtype(), t.shape()) +
                 "; expected a float dtype (f32, f16, bf16)", loc);
}

// A [D] weight/bias against x [..., D].
void requireLastDimVector(std::string_view op, std::string_view what, const Tensor& x, const Tensor& v,
                          const Loc& loc) {
  requireFloat(op, what, v, loc);
  if (x.rank() == 0) fail(op, "x is 0-dim; expected rank >= 1", loc);
  if (v.rank() != 1 || !(v.shape()[0] == x.shape().back()))
    fail(op, std::string(what) + " is " + typeToString(v.dtype(), v.shape()) + " but x is " +
                 typeToString(x.dtype(), x.shape()) + "; expected " + std::string(what) + " of shape [" +
                 dimToString(x.shape().back()) + "]", loc);
}

// The axis of a row op, checked here so that the error names the op the
// user called (softmax), not the max inside it.
void requireAxis(std::string_view op, const Tensor& x, int64_t axis, const Loc& loc) {
  const int64_t r = x.rank();
  if (r == 0 || axis < -r || axis >= r)
    fail(std::string(op) + "(" + typeToString(x.dtype(), x.shape()) + ")",
         "axis " + std::to_string(axis) + " is out of range; expected an axis in [" + std::to_string(-r) + ", " + std::to_string(r - 1) + "]", loc);
}

}  // namespace

Tensor gelu(const Tensor& x, GeluApproximation approx, Loc loc) {
  requireFloat("gelu", "x", x, loc);
  Tensor v = toOpmath(x, loc);
  Tensor y;
  if (approx == GeluApproximation::Tanh) {
    const double k = std::sqrt(2.0 / M_PI);
    Tensor inner = mul(add(v, mul(0.044715, mul(v, mul(v, v, loc), loc), loc), loc), k, loc);
    y = mul(mul(0.5, v, loc), add(1.0, tanh(inner, loc), loc), loc);
  } else {
    y = mul(mul(0.5, v, loc), add(1.0, erf(mul(v, M_SQRT1_2, loc), loc), loc), loc);
  }
  return backTo(y, x.dtype(), loc);
}

Tensor silu(const Tensor& x, Loc loc) {
  requireFloat("silu", "x", x, loc);
  Tensor v = toOpmath(x, loc);
  return backTo(mul(v, sigmoid(v, loc), loc), x.dtype(), loc);
}

Tensor swiglu(const Tensor& a, const Tensor& b, Loc loc) {
  requireFloat("swiglu", "a", a, loc);
  requireFloat("swiglu", "b", b, loc);
  Tensor va = toOpmath(a, loc), vb = toOpmath(b, loc);
  Tensor y = mul(mul(va, sigmoid(va, loc), loc), vb, loc);
  return backTo(y, promoteTypes({&a.node(), &b.node()}), loc);
}

Tensor softmax(const Tensor& x, int64_t axis, Loc loc) {
  requireFloat("softmax", "x", x, loc);
  requireAxis("softmax", x, axis, loc);
  Tensor v = toOpmath(x, loc);
  Tensor m = max(v, axis, true, loc);
  Tensor e = exp(sub(v, m, loc), loc);
  Tensor y = div(e, sum(e, axis, true, loc), loc);
  return backTo(y, x.dtype(), loc);
}

Tensor log_softmax(const Tensor& x, int64_t axis, Loc loc) {
  requireFloat("log_softmax", "x", x, loc);
  requireAxis("log_softmax", x, axis, loc);
  Tensor v = toOpmath(x, loc);
  Tensor m = max(v, axis, true, loc);
  Tensor shifted = sub(v, m, loc);
  Tensor lse = log(sum(exp(shifted, loc), axis, true, loc), loc);
  return backTo(sub(shifted, lse, loc), x.dtype(), loc);
}

Tensor layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, Loc loc) {
  requireFloat("layernorm", "x", x, loc);
  if (weight.valid()) requireLastDimVector("layernorm", "weight", x, weight, loc);
  if (bias.valid()) requireLastDimVector("layernorm", "bias", x, bias, loc);
  Tensor v = toOpmath(x, loc);
  Tensor mu = mean(v, -1, true, loc);
  Tensor centered = sub(v, mu, loc);
  Tensor variance = var(v, -1, 0, true, loc);
  Tensor y = mul(centered, rsqrt(add(variance, eps, loc), loc), loc);
  if (weight.valid()) y = mul(y, toOpmath(weight, loc), loc);
  if (bias.valid()) y = add(y, toOpmath(bias, loc), loc);
  return backTo(y, x.dtype(), loc);
}

Tensor rmsnorm(const Tensor& x, const Tensor& weight, double eps, Loc loc) {
  requireFloat("rmsnorm", "x", x, loc);
  if (weight.valid()) requireLastDimVector("rmsnorm", "weight", x, weight, loc);
  Tensor v = toOpmath(x, loc);
  Tensor ms = mean(mul(v, v, loc), -1, true, loc);
  Tensor y = mul(v, rsqrt(add(ms, eps, loc), loc), loc);
  if (weight.valid()) y = mul(y, toOpmath(weight, loc), loc);
  return backTo(y, x.dtype(), loc);
}

namespace {

// cross_entropy's and its gradient's checks of logits [..., C] and targets [...].
void requireLogitsAndTargets(std::string_view op, const Tensor& logits, const Tensor& targets, const Loc& loc) {
  requireFloat(op, "logits", logits, loc);
  if (!targets.valid()) fail(op, "targets is an empty Tensor handle", loc);
  if (!isInteger(targets.dtype()))
    fail(op, "targets is " + typeToString(targets.dtype(), targets.shape()) + "; expected i32 or i64 class indices",
         loc);
  const Shape& ls = logits.shape();
  if (logits.rank() < 1 || targets.rank() != logits.rank() - 1 ||
      !std::equal(targets.shape().begin(), targets.shape().end(), ls.begin()))
    fail(op, "logits is " + typeToString(logits.dtype(), ls) + " and targets is " +
                 typeToString(targets.dtype(), targets.shape()) +
                 "; expected logits [..., C] and targets [...] with the same leading dims", loc);
}

// True at each row's target class: iota over the classes == the target (a
// target outside [0, C) matches nothing).
Tensor targetMask(const Tensor& logits, const Tensor& targets, const Loc& loc) {
  Shape keep = targets.shape();
  keep.push_back(Dim(int64_t{1}));
  Tensor t = reshape(targets, keep, loc);
  Graph g = logits.graph();
  return eq(iota(g, logits.shape(), -1, targets.dtype(), loc), t, loc);
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, Reduction reduction, Loc loc) {
  requireLogitsAndTargets("cross_entropy", logits, targets, loc);
  Tensor v = backTo(logits, DType::F32, loc);
  Tensor m = max(v, -1, true, loc);
  Tensor lse = add(log(sum(exp(sub(v, m, loc), loc), -1, true, loc), loc), m, loc);
  Tensor picked = where(targetMask(logits, targets, loc), v, 0.0, loc);
  Tensor loss = sub(lse, sum(picked, -1, true, loc), loc);   // [..., 1]
  loss = reshape(loss, targets.shape(), loc);
  if (reduction == Reduction::Mean) return mean(loss, {}, false, loc);
  return loss;
}

// ---- gradients

namespace {

// dy must have the forward output's shape and a float dtype.
void requireGradOf(std::string_view op, const Tensor& dy, const Tensor& like, std::string_view likeName,
                   const Loc& loc) {
  requireFloat(op, "dy", dy, loc);
  if (dy.shape() != like.shape())
    fail(op, "dy is " + typeToString(dy.dtype(), dy.shape()) + " but " + std::string(likeName) + " is " +
                 typeToString(like.dtype(), like.shape()) + "; expected dy of " + std::string(likeName) + "'s shape",
         loc);
}

// The sum of v over every axis but the last: a weight's gradient.
Tensor sumRows(const Tensor& v, const Loc& loc) {
  std::vector<int64_t> lead;
  for (int64_t a = 0; a + 1 < v.rank(); ++a) lead.push_back(a);
  return lead.empty() ? v : sum(v, Axes(lead), false, loc);
}

}  // namespace

Tensor softmax_backward(const Tensor& dy, const Tensor& y, int64_t axis, Loc loc) {
  requireFloat("softmax_backward", "y", y, loc);
  requireGradOf("softmax_backward", dy, y, "y", loc);
  requireAxis("softmax_backward", y, axis, loc);
  Tensor vy = toOpmath(y, loc), vdy = toOpmath(dy, loc);
  Tensor dot = sum(mul(vdy, vy, loc), axis, true, loc);
  return backTo(mul(vy, sub(vdy, dot, loc), loc), y.dtype(), loc);
}

Tensor log_softmax_backward(const Tensor& dy, const Tensor& y, int64_t axis, Loc loc) {
  requireFloat("log_softmax_backward", "y", y, loc);
  requireGradOf("log_softmax_backward", dy, y, "y", loc);
  requireAxis("log_softmax_backward", y, axis, loc);
  Tensor vy = toOpmath(y, loc), vdy = toOpmath(dy, loc);
  Tensor total = sum(vdy, axis, true, loc);
  return backTo(sub(vdy, mul(exp(vy, loc), total, loc), loc), y.dtype(), loc);
}

NormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& bias,
                             double eps, Loc loc) {
  requireFloat("layernorm_backward", "x", x, loc);
  requireGradOf("layernorm_backward", dy, x, "x", loc);
  if (weight.valid()) requireLastDimVector("layernorm_backward", "weight", x, weight, loc);
  if (bias.valid()) requireLastDimVector("layernorm_backward", "bias", x, bias, loc);
  Tensor v = toOpmath(x, loc), vdy = toOpmath(dy, loc);
  Tensor mu = mean(v, -1, true, loc);
  Tensor rstd = rsqrt(add(var(v, -1, 0, true, loc), eps, loc), loc);
  Tensor xhat = mul(sub(v, mu, loc), rstd, loc);
  Tensor g = weight.valid() ? mul(vdy, toOpmath(weight, loc), loc) : vdy;
  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
  Tensor inner = sub(sub(g, mean(g, -1, true, loc), loc), mul(xhat, mean(mul(g, xhat, loc), -1, true, loc), loc), loc);
  NormGrads r;
  r.dx = backTo(mul(rstd, inner, loc), x.dtype(), loc);
  if (weight.valid()) r.dweight = backTo(sumRows(mul(vdy, xhat, loc), loc), weight.dtype(), loc);
  if (bias.valid()) r.dbias = backTo(sumRows(vdy, loc), bias.dtype(), loc);
  return r;
}

NormGrads rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, double eps, Loc loc) {
  requireFloat("rmsnorm_backward", "x", x, loc);
  requireGradOf("rmsnorm_backward", dy, x, "x", loc);
  if (weight.valid()) requireLastDimVector("rmsnorm_backward", "weight", x, weight, loc);
  Tensor v = toOpmath(x, loc), vdy = toOpmath(dy, loc);
  Tensor rstd = rsqrt(add(mean(mul(v, v, loc), -1, true, loc), eps, loc), loc);
  Tensor xhat = mul(v, rstd, loc);
  Tensor g = weight.valid() ? mul(vdy, toOpmath(weight, loc), loc) : vdy;
  // dx = rstd * (g - xhat * mean(g * xhat))
  Tensor inner = sub(g, mul(xhat, mean(mul(g, xhat, loc), -1, true, loc), loc), loc);
  NormGrads r;
  r.dx = backTo(mul(rstd, inner, loc), x.dtype(), loc);
  if (weight.valid()) r.dweight = backTo(sumRows(mul(vdy, xhat, loc), loc), weight.dtype(), loc);
  return r;
}

Tensor cross_entropy_backward(const Tensor& dloss, const Tensor& logits, const Tensor& targets, Reduction reduction,
                              Loc loc) {
  requireLogitsAndTargets("cross_entropy_backward", logits, targets, loc);
  requireFloat("cross_entropy_backward", "dloss", dloss, loc);
  const bool mean = reduction == Reduction::Mean;
  if (mean ? dloss.rank() != 0 : dloss.shape() != targets.shape())
    fail("cross_entropy_backward", "dloss is " + typeToString(dloss.dtype(), dloss.shape()) + "; expected " +
                                       (mean ? std::string("a 0-dim value (the mean's gradient)")
                                             : typeToString(dloss.dtype(), targets.shape()) + " (one value a row)"),
         loc);
  Tensor p = softmax(backTo(logits, DType::F32, loc), -1, loc);
  Tensor onehot = where(targetMask(logits, targets, loc), 1.0, 0.0, loc);
  Tensor scale = backTo(dloss, DType::F32, loc);
  if (mean) {
    // Divided by the number of rows: a constant for static leading dims;
    // over dynamic ones, the count of the targets (a sum of ones).
    double rows = 1;
    bool known = true;
    for (const Dim& d : targets.shape()) {
      if (!d.isStatic()) known = false;
      else rows *= static_cast<double>(d.size);
    }
    if (known) {
      scale = div(scale, rows, loc);
    } else {
      Tensor ones = where(eq(targets, targets, loc), 1.0, 0.0, loc);
      scale = div(scale, sum(backTo(ones, DType::F32, loc), {}, false, loc), loc);
    }
  } else {
    Shape keep = targets.shape();
    keep.push_back(Dim(int64_t{1}));
    scale = reshape(scale, keep, loc);
  }
  return backTo(mul(sub(p, onehot, loc), scale, loc), logits.dtype(), loc);
}

Tensor gelu_backward(const Tensor& dy, const Tensor& x, GeluApproximation approx, Loc loc) {
  requireFloat("gelu_backward", "x", x, loc);
  requireGradOf("gelu_backward", dy, x, "x", loc);
  Tensor v = toOpmath(x, loc);
  Tensor d;
  if (approx == GeluApproximation::Tanh) {
    const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
    Tensor x2 = mul(v, v, loc);
    Tensor t = tanh(mul(mul(v, add(1.0, mul(c, x2, loc), loc), loc), k, loc), loc);
    // 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2)
    Tensor dt = mul(mul(mul(0.5, v, loc), sub(1.0, mul(t, t, loc), loc), loc), mul(k, add(1.0, mul(3 * c, x2, loc), loc), loc), loc);
    d = add(mul(0.5, add(1.0, t, loc), loc), dt, loc);
  } else {
    // 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi)
    Tensor cdf = mul(0.5, add(1.0, erf(mul(v, M_SQRT1_2, loc), loc), loc), loc);
    Tensor pdf = mul(exp(mul(-0.5, mul(v, v, loc), loc), loc), 1.0 / std::sqrt(2.0 * M_PI), loc);
    d = add(cdf, mul(v, pdf, loc), loc);
  }
  DType out = promoteTypes({&dy.node(), &x.node()});
  return backTo(mul(toOpmath(dy, loc), d, loc), out, loc);
}

Tensor silu_backward(const Tensor& dy, const Tensor& x, Loc loc) {
  requireFloat("silu_backward", "x", x, loc);
  requireGradOf("silu_backward", dy, x, "x", loc);
  Tensor v = toOpmath(x, loc);
  Tensor s = sigmoid(v, loc);
  // s (1 + x (1 - s))
  Tensor d = mul(s, add(1.0, mul(v, sub(1.0, s, loc), loc), loc), loc);
  DType out = promoteTypes({&dy.node(), &x.node()});
  return backTo(mul(toOpmath(dy, loc), d, loc), out, loc);
}

AdamWScalars adamw_scalars(Graph& g, Loc loc) {
  return {g.scalar("lr", DType::F32, loc),    g.scalar("beta1", DType::F32, loc),
          g.scalar("beta2", DType::F32, loc), g.scalar("eps", DType::F32, loc),
          g.scalar("weight_decay", DType::F32, loc), g.scalar("step", DType::F32, loc)};
}

AdamWResult adamw_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                       const Tensor& exp_avg_sq, const AdamWScalars& s, Loc loc) {
  requireFloat("adamw_step", "param", param, loc);
  requireFloat("adamw_step", "grad", grad, loc);
  requireFloat("adamw_step", "exp_avg", exp_avg, loc);
  requireFloat("adamw_step", "exp_avg_sq", exp_avg_sq, loc);
  for (const Tensor* t : {&grad, &exp_avg, &exp_avg_sq})
    if (t->shape() != param.shape())
      fail("adamw_step", "param is " + typeToString(param.dtype(), param.shape()) + " but another state tensor is " +
                             typeToString(t->dtype(), t->shape()) + "; expected equal shapes", loc);
  for (const Tensor* t : {&s.lr, &s.beta1, &s.beta2, &s.eps, &s.weight_decay, &s.step})
    if (!t->valid() || t->rank() != 0)
      fail("adamw_step", "a hyper-parameter is not a 0-dim scalar; expected Graph::scalar values", loc);
  Tensor p = toOpmath(param, loc), g = toOpmath(grad, loc);
  Tensor m = toOpmath(exp_avg, loc), v = toOpmath(exp_avg_sq, loc);
  Tensor m2 = add(mul(s.beta1, m, loc), mul(sub(1.0, s.beta1, loc), g, loc), loc);
  Tensor v2 = add(mul(s.beta2, v, loc), mul(sub(1.0, s.beta2, loc), mul(g, g, loc), loc), loc);
  Tensor bc1 = sub(1.0, pow(s.beta1, s.step, loc), loc);
  Tensor bc2 = sub(1.0, pow(s.beta2, s.step, loc), loc);
  Tensor stepSize = div(s.lr, bc1, loc);
  Tensor denom = add(div(sqrt(v2, loc), sqrt(bc2, loc), loc), s.eps, loc);
  Tensor decayed = mul(p, sub(1.0, mul(s.lr, s.weight_decay, loc), loc), loc);
  Tensor p2 = sub(decayed, mul(stepSize, div(m2, denom, loc), loc), loc);
  return {backTo(p2, param.dtype(), loc), backTo(m2, exp_avg.dtype(), loc),
          backTo(v2, exp_avg_sq.dtype(), loc)};
}

}  // namespace kiln
