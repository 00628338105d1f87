#include "samples.h"

#include "kiln/dsl/oplib.h"

namespace kiln::samples {

namespace {

Graph geluBias() {
  Graph g;
  Tensor x = g.input("x", DType::BF16, {"N", 4096});
  Tensor b = g.input("b", DType::BF16, {4096});
  g.output("y", gelu_tanh(x + b));
  return g;
}

Graph fmaSample() {
  Graph g;
  Tensor x = g.input("x", DType::BF16, {"N", 4096});
  Tensor y = g.input("y", DType::BF16, {"N", 4096});
  Tensor z = g.input("z", DType::BF16, {"N", 4096});
  g.output("out", x * y + z);
  return g;
}

Graph softmaxSample() {
  Graph g;
  Tensor x = g.input("x", DType::BF16, {"N", 4096});
  g.output("y", softmax(x, -1));
  return g;
}

Graph layernormSample() {
  Graph g;
  Tensor x = g.input("x", DType::BF16, {"N", 4096});
  Tensor w = g.input("weight", DType::BF16, {4096});
  Tensor b = g.input("bias", DType::BF16, {4096});
  g.output("y", layernorm(x, w, b, 1e-5));
  return g;
}

Graph rmsnormSample() {
  Graph g;
  Tensor x = g.input("x", DType::BF16, {"N", 4096});
  Tensor w = g.input("weight", DType::BF16, {4096});
  g.output("y", rmsnorm(x, w, 1e-6));
  return g;
}

Graph crossEntropySample() {
  Graph g;
  Tensor logits = g.input("logits", DType::BF16, {"N", 32768});
  Tensor targets = g.input("targets", DType::I64, {"N"});
  g.output("loss", cross_entropy(logits, targets, Reduction::Mean));
  return g;
}

Graph adamwSample() {
  Graph g;
  Tensor p = g.input("param", DType::F32, {"N"});
  Tensor grad = g.input("grad", DType::F32, {"N"});
  Tensor m = g.input("exp_avg", DType::F32, {"N"});
  Tensor v = g.input("exp_avg_sq", DType::F32, {"N"});
  AdamWScalars s = adamw_scalars(g);
  AdamWResult r = adamw_step(p, grad, m, v, s);
  g.output("new_param", r.param);
  g.output("new_exp_avg", r.exp_avg);
  g.output("new_exp_avg_sq", r.exp_avg_sq);
  return g;
}

Graph rmsnormBackwardSample() {
  Graph g;
  Tensor dy = g.input("dy", DType::BF16, {"N", 4096});
  Tensor x = g.input("x", DType::BF16, {"N", 4096});
  Tensor w = g.input("weight", DType::BF16, {4096});
  NormGrads r = rmsnorm_backward(dy, x, w, 1e-6);
  g.output("dx", r.dx);
  g.output("dweight", r.dweight);
  return g;
}

Graph layernormBackwardSample() {
  Graph g;
  Tensor dy = g.input("dy", DType::BF16, {"N", 4096});
  Tensor x = g.input("x", DType::BF16, {"N", 4096});
  Tensor w = g.input("weight", DType::BF16, {4096});
  Tensor b = g.input("bias", DType::BF16, {4096});
  NormGrads r = layernorm_backward(dy, x, w, b, 1e-5);
  g.output("dx", r.dx);
  g.output("dweight", r.dweight);
  g.output("dbias", r.dbias);
  return g;
}

Graph softmaxBackwardSample() {
  Graph g;
  Tensor dy = g.input("dy", DType::BF16, {"N", 4096});
  Tensor y = g.input("y", DType::BF16, {"N", 4096});
  g.output("dx", softmax_backward(dy, y, -1));
  return g;
}

Graph crossEntropyBackwardSample() {
  Graph g;
  Tensor logits = g.input("logits", DType::BF16, {"N", 32768});
  Tensor targets = g.input("targets", DType::I64, {"N"});
  Tensor dloss = g.input("dloss", DType::F32, {});
  g.output("dlogits", cross_entropy_backward(dloss, logits, targets, Reduction::Mean));
  return g;
}

// Attention scores of one head: softmax(q @ k.T * scale). Two kernels: the
// matmul (k read transposed in place, the scale in its epilogue), then the
// softmax's row kernel.
Graph attentionScoresSample() {
  Graph g;
  Tensor q = g.input("q", DType::BF16, {"T", 128});
  Tensor k = g.input("k", DType::BF16, {"T", 128});
  g.output("p", softmax(matmul(q, permute(k, {1, 0})) * g.scalar("scale", DType::F32)));
  return g;
}

// A pre-norm MLP block: x + gelu_tanh(rmsnorm(x) @ w1.T) @ w2.T, weights
// stored [out, in] as nn.Linear's. Three kernels: the norm, then each
// matmul with its epilogue (the activation; the residual).
Graph mlpBlockSample() {
  Graph g;
  Tensor x = g.input("x", DType::BF16, {"tokens", 4096});
  Tensor h = rmsnorm(x, g.input("norm_w", DType::BF16, {4096}));
  Tensor up = gelu_tanh(matmul(h, g.input("w1", DType::BF16, {11008, 4096}), {false, true}));
  g.output("y", x + matmul(up, g.input("w2", DType::BF16, {4096, 11008}), {false, true}));
  return g;
}

}  // namespace

const std::vector<Sample>& all() {
  static const std::vector<Sample> samples = {
      {"gelu_bias", "y = gelu_tanh(x + b), b a row vector", geluBias},
      {"fma", "out = x * y + z", fmaSample},
      {"softmax", "softmax over the last dim", softmaxSample},
      {"layernorm", "layernorm with weight and bias, eps 1e-5", layernormSample},
      {"rmsnorm", "rmsnorm with weight, eps 1e-6", rmsnormSample},
      {"cross_entropy", "mean cross-entropy of logits and i64 targets", crossEntropySample},
      {"adamw", "one AdamW step: new param, exp_avg, exp_avg_sq", adamwSample},
      {"rmsnorm_backward", "rmsnorm's gradients: dx and dweight from dy, x and the weight", rmsnormBackwardSample},
      {"layernorm_backward", "layernorm's gradients: dx, dweight and dbias", layernormBackwardSample},
      {"softmax_backward", "softmax's gradient from dy and its output y", softmaxBackwardSample},
      {"cross_entropy_backward", "the mean cross-entropy's gradient w.r.t. the logits", crossEntropyBackwardSample},
      {"attention_scores", "softmax(q @ k.T * scale): a matmul, then a row kernel", attentionScoresSample},
      {"mlp_block", "x + gelu_tanh(rmsnorm(x) @ w1.T) @ w2.T: a norm, then two matmuls", mlpBlockSample},
  };
  return samples;
}

Graph build(const std::string& name) {
  for (const Sample& s : all())
    if (s.name == name) return s.build();
  throw Error("kiln: no sample graph named '" + name + "'");
}

}  // namespace kiln::samples
