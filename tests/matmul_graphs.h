// Graphs with matmuls and ops no matmul epilogue can take: a matmul's
// operand computed in the graph (a norm's output, a scaled or cast input, a
// transpose of a computed value), its product reduced or normalized (a
// softmax of attention scores, row sums), chains of matmuls (an MLP), two
// products added, a row statistic read by an epilogue. The planner runs them
// in stages (planAroundMatmuls): shared by the CPU plan test and the [gpu]
// test that runs them against the reference.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "kiln/dsl/oplib.h"
#include "kiln/dsl/ops.h"
#include "reduction_graphs.h"

namespace kiln::test {

struct MatmulGraphCase {
  GraphCase c;
  DimBindings dims;  // values of the dynamic dims
  size_t kernels = 0;  // the plan's kernel count
  // The count where a softmax over a Hopper matmul's rows joins the matmul's
  // kernel (CompileOptions::matmulRowSoftmax, on by default; 16-bit
  // operands): 0 when the same.
  size_t rowSoftmaxKernels = 0;
  size_t kernelsFor(DType t, bool rowSoftmax) const {
    return rowSoftmax && t != DType::F32 && rowSoftmaxKernels ? rowSoftmaxKernels : kernels;
  }
};

// t: the operands' dtype (bf16/f16: the Hopper kernel where rows are
// multiples of 8; f32: the portable kernel). Inputs are small (|x| <= 0.5)
// so that products over K = 64..128 stay near 1 and a 16-bit product's
// rounding moves a softmax by about its own ulp.
inline std::vector<MatmulGraphCase> matmulGraphCases(DType t) {
  std::vector<MatmulGraphCase> out;
  const bool f32 = t == DType::F32;
  // Sums in another order than the fp64 reference's (f32 over K, 16-bit
  // products rounded before a softmax or a sum reads them).
  const double tol = f32 ? 16 : 4;
  auto add = [&](const std::string& what, size_t kernels, DimBindings dims,
                 const std::function<void(Graph&)>& build, std::map<std::string, double> relFloor = {},
                 size_t rowSoftmaxKernels = 0) {
    MatmulGraphCase m;
    m.c.label = what + "/" + std::string(dtypeName(t));
    build(m.c.graph);
    for (int id : m.c.graph.params())
      if (m.c.graph.node(id).op == Op::Input && isFloat(m.c.graph.node(id).dtype))
        m.c.ranges[m.c.graph.node(id).name] = {-0.5, 0.5};
    m.c.relFloor = std::move(relFloor);
    m.c.tolScale = tol;
    m.dims = std::move(dims);
    m.kernels = kernels;
    m.rowSoftmaxKernels = rowSoftmaxKernels;
    out.push_back(std::move(m));
  };
  const Dim T("T");
  // Attention scores: the transpose of k read in place (transB), the scale
  // in the epilogue, the softmax in a row kernel (or, 16-bit, in the
  // matmul's kernel: its row-softmax form, one unit of 128 rows split
  // across a cluster, the last of 200 rows ragged).
  add("softmax(q @ k.T * 0.125)", 2, {{"T", 200}}, [&](Graph& g) {
    Tensor q = g.input("q", t, {T, 64}), k = g.input("k", t, {T, 64});
    g.output("p", softmax(matmul(q, permute(k, {1, 0})) * 0.125));
  }, {{"p", 0}}, 1);
  // A pre-norm block: rmsnorm's output is the matmul's operand; the
  // residual is read by the epilogue.
  add("x + rmsnorm(x, w) @ W", 2, {{"T", 136}}, [&](Graph& g) {
    Tensor x = g.input("x", t, {T, 128});
    Tensor h = rmsnorm(x, g.input("w", t, {128}));
    g.output("y", x + matmul(h, g.input("W", t, {128, 128})));
  });
  // An MLP: the first product's activation is the second's operand.
  add("gelu_tanh(x @ w1 + b1) @ w2 + b2", 2, {}, [&](Graph& g) {
    Tensor x = g.input("x", t, {96, 64});
    Tensor h = gelu_tanh(matmul(x, g.input("w1", t, {64, 128})) + g.input("b1", t, {128}));
    g.output("y", matmul(h, g.input("w2", t, {128, 32})) + g.input("b2", t, {32}));
  });
  // Two products added: the second's epilogue reads the first's.
  add("a @ b + c @ d", 2, {}, [&](Graph& g) {
    Tensor ab = matmul(g.input("a", t, {64, 72}), g.input("b", t, {72, 48}));
    Tensor cd = matmul(g.input("c", t, {64, 40}), g.input("d", t, {40, 48}));
    g.output("y", ab + cd);
  });
  // Operands computed in the graph: a scaled input and a transposed
  // computed value (a copy in the workspace).
  add("(x * 2) @ exp(w).T", 3, {}, [&](Graph& g) {
    Tensor x = g.input("x", t, {80, 64}), w = g.input("w", t, {56, 64});
    g.output("y", matmul(x * 2.0, permute(exp(w), {1, 0})));
  });
  // The product reduced, and kept: the matmul writes both.
  add("y = relu(a @ b), s = sum(y, 1), m = max(a @ b)", 3, {{"T", 77}}, [&](Graph& g) {
    Tensor p = matmul(g.input("a", t, {T, 64}), g.input("b", t, {64, 96}));
    Tensor y = relu(p);
    g.output("y", y);
    g.output("s", sum(y, 1));
    g.output("m", max(p));
  });
  // A row statistic of the operand scales the product in the epilogue: the
  // statistic's kernel runs first, the epilogue reads it.
  add("(x @ w) * rsqrt(mean(x * x, 1, keepdim) + 1e-6)", 2, {{"T", 33}}, [&](Graph& g) {
    Tensor x = g.input("x", t, {T, 64});
    Tensor xf = cast(x, DType::F32);
    Tensor r = rsqrt(mean(xf * xf, 1, true) + 1e-6);
    g.output("y", cast(matmul(x, g.input("w", t, {64, 40})), DType::F32) * r);
  });
  // Batched: layernorm over [B, T, D], then a batch of products with a
  // shared weight, then log_softmax.
  add("log_softmax(layernorm(x) @ w)", 3, {}, [&](Graph& g) {
    Tensor x = g.input("x", t, {3, 40, 64});
    Tensor h = layernorm(x, g.input("lw", t, {64}), g.input("lb", t, {64}));
    g.output("y", log_softmax(matmul(h, g.input("w", t, {64, 24}))));
  }, {}, 2);
  return out;
}

}  // namespace kiln::test
