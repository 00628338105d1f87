// Lesson 0: describing a computation with kiln's DSL.
//
// A kiln program starts as a Graph: inputs with a dtype and a shape (static
// sizes, or named dynamic dims bound later), expressions built from
// operators and the op library, and named outputs. Nothing runs yet; every
// op is checked as it is written, so a shape or dtype mistake is an error
// pointing at the line that made it.
//
// This lesson builds three graphs, prints their text form (what tools read
// and what cache keys hash) and evaluates them with the reference evaluator,
// the fp64 oracle that every GPU kernel is tested against.
#include <cstdio>
#include <iostream>

#include "kiln/dsl/oplib.h"
#include "kiln/dsl/reference.h"
#include "kiln/dsl/text.h"

using namespace kiln;

static void show(const char* title, const Graph& g, const DimBindings& dims) {
  std::printf("=== %s ===\n%s", title, printGraph(g).c_str());
  EvalInputs in = randomInputs(g, dims, /*seed=*/42);
  for (const EvalOutput& out : evaluate(g, in)) {
    double lo = 0, hi = 0, sum = 0;
    for (int64_t i = 0; i < out.value.numel(); ++i) {
      double v = out.value.get(i);
      if (i == 0 || v < lo) lo = v;
      if (i == 0 || v > hi) hi = v;
      sum += v;
    }
    std::printf("  -> %s: %lld elements of %s, min %.6g, max %.6g, mean %.6g\n\n", out.name.c_str(),
                static_cast<long long>(out.value.numel()), std::string(dtypeName(out.value.dtype())).c_str(), lo,
                hi, out.value.numel() ? sum / out.value.numel() : 0.0);
  }
}

int main() {
  // 1. A fused bias + GELU: x is [N, 1024] with N chosen at evaluation time,
  //    b a row vector broadcast along the rows.
  {
    Graph g;
    Tensor x = g.input("x", DType::BF16, {"N", 1024});
    Tensor b = g.input("b", DType::BF16, {1024});
    g.output("y", gelu_tanh(x + b));
    show("gelu_tanh(x + b)", g, {{"N", 8}});
  }
  // 2. Softmax over rows: the op library writes it with max, exp, sum and
  //    div, computing in f32 for bf16 input.
  {
    Graph g;
    Tensor x = g.input("x", DType::BF16, {16, 512});
    g.output("y", softmax(x, -1));
    show("softmax", g, {});
  }
  // 3. RMSNorm returning two outputs: the normalized rows and their rstd.
  {
    Graph g;
    Tensor x = g.input("x", DType::F32, {"rows", 256});
    Tensor w = g.input("w", DType::F32, {256});
    Tensor rstd = rsqrt(mean(x * x, -1, /*keepdim=*/true) + 1e-6);
    g.output("y", x * rstd * w);
    g.output("rstd", rstd);
    show("rmsnorm with rstd", g, {{"rows", 4}});
  }
  // 4. Mistakes are caught where they are made.
  try {
    Graph g;
    Tensor a = g.input("a", DType::F32, {4, 8});
    Tensor b = g.input("b", DType::F32, {4, 9});
    (void)(a + b);
  } catch (const Error& e) {
    std::printf("=== a mistake, caught at graph-building time ===\n%s\n", e.what());
  }
  return 0;
}
