// The op library: common deep-learning ops written only with the primitives
// of ops.h, so every schedule and the reference evaluator see plain graphs.
// Half-precision inputs are computed in f32 (cast in, cast back), like
// PyTorch's "opmath" type; the result has the input's dtype unless said.
#pragma once

#include "kiln/dsl/ops.h"

namespace kiln {

#define KILN_LOC ::kiln::Loc loc = ::kiln::Loc::current()

enum class GeluApproximation { None, Tanh };  // erf form, or tanh form

Tensor gelu(const Tensor& x, GeluApproximation approx = GeluApproximation::None, KILN_LOC);
inline Tensor gelu_tanh(const Tensor& x, KILN_LOC) { return gelu(x, GeluApproximation::Tanh, loc); }
Tensor silu(const Tensor& x, KILN_LOC);
// swiglu(a, b) = silu(a) * b
Tensor swiglu(const Tensor& a, const Tensor& b, KILN_LOC);

Tensor softmax(const Tensor& x, int64_t axis = -1, KILN_LOC);
Tensor log_softmax(const Tensor& x, int64_t axis = -1, KILN_LOC);

// Over the last dim, like torch.nn.functional.layer_norm with
// normalized_shape = [last dim]: (x - mean) / sqrt(var + eps) * weight + bias
// (biased variance). weight and bias may be empty Tensors (none).
Tensor layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5, KILN_LOC);
// x * rsqrt(mean(x^2) + eps) * weight over the last dim (weight may be empty).
Tensor rmsnorm(const Tensor& x, const Tensor& weight, double eps = 1e-6, KILN_LOC);

enum class Reduction { None, Mean };
// logits [..., C] (any float dtype), targets [...] (i32 or i64 class ids).
// Per-row loss logsumexp(logits) - logits[target], computed in f32 with the
// row max subtracted; returns f32 (per row for None, 0-dim for Mean).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets,
                     Reduction reduction = Reduction::Mean, KILN_LOC);

// One AdamW step (torch.optim.AdamW, decoupled weight decay). The runtime
// scalars are f32 graph scalars (Graph::scalar); `step` counts from 1.
struct AdamWScalars {
  Tensor lr, beta1, beta2, eps, weight_decay, step;
};
struct AdamWResult {
  Tensor param, exp_avg, exp_avg_sq;
};
AdamWResult adamw_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                       const Tensor& exp_avg_sq, const AdamWScalars& s, KILN_LOC);
// Declares the six scalars in `g` with the names lr, beta1, beta2, eps,
// weight_decay, step.
AdamWScalars adamw_scalars(Graph& g, KILN_LOC);

// ---- gradients (backward passes), for training ----
// Each takes the gradient of the forward op's output (dy, the forward
// output's shape) and what the forward op saw, and returns the gradients of
// its inputs, computed in f32 for 16-bit floats and returned in the dtype of
// the input they belong to, like PyTorch's autograd. Each is a plain graph
// of primitives: it fuses with its neighbours like any other graph.

// d/dx of softmax(x, axis) from its output y: y * (dy - sum(dy * y)).
Tensor softmax_backward(const Tensor& dy, const Tensor& y, int64_t axis = -1, KILN_LOC);
// d/dx of log_softmax(x, axis) from its output y: dy - exp(y) * sum(dy).
Tensor log_softmax_backward(const Tensor& dy, const Tensor& y, int64_t axis = -1, KILN_LOC);

// Gradients of a norm over the last dim. dweight and dbias sum over every
// leading dim (the rows); they are empty where the forward op had no weight
// or bias. The row statistics (mean, rstd) are recomputed from x: in the
// row kernel that computes dx they cost no extra memory traffic.
struct NormGrads {
  Tensor dx, dweight, dbias;
};
NormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& bias,
                             double eps = 1e-5, KILN_LOC);
NormGrads rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, double eps = 1e-6, KILN_LOC);

// d/dlogits of cross_entropy(logits, targets, reduction): (softmax(logits) -
// onehot(targets)) * dloss per row, where dloss is the gradient of the loss:
// one value per row ([...], Reduction::None) or a 0-dim value (Mean, divided
// by the number of rows). Rows whose target is outside [0, C) (an ignored
// index) get softmax(logits) * dloss, as the forward picks nothing there.
// Returns the logits' dtype.
Tensor cross_entropy_backward(const Tensor& dloss, const Tensor& logits, const Tensor& targets,
                              Reduction reduction = Reduction::Mean, KILN_LOC);

// dy * gelu'(x), dy * silu'(x), in dy's and x's promoted dtype.
Tensor gelu_backward(const Tensor& dy, const Tensor& x, GeluApproximation approx = GeluApproximation::None, KILN_LOC);
Tensor silu_backward(const Tensor& dy, const Tensor& x, KILN_LOC);

#undef KILN_LOC

}  // namespace kiln
