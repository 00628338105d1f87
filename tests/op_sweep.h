// The op x dtype sweep shared by the compile tests (CPU) and the GPU tests:
// one small graph per valid (op, dtype) combination.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/dsl/ops.h"
#include "kiln/dsl/reference.h"

namespace kiln::test {

struct SweepCase {
  std::string label;  // "exp/bf16"
  Graph graph;
  InputRanges ranges;
};

inline std::vector<Op> unaryOps() {
  std::vector<Op> ops;
  for (int i = 0; i < kNumOps; ++i)
    if (opClass(static_cast<Op>(i)) == OpClass::Unary) ops.push_back(static_cast<Op>(i));
  return ops;
}

inline std::vector<Op> binaryOps() {
  std::vector<Op> ops;
  for (int i = 0; i < kNumOps; ++i)
    if (opClass(static_cast<Op>(i)) == OpClass::Binary) ops.push_back(static_cast<Op>(i));
  return ops;
}

// Inputs per op that keep the comparison meaningful (e.g. pow of positive
// bases, a divisor away from zero).
inline InputRanges rangesFor(Op op, DType t) {
  bool f = isFloat(t);
  switch (op) {
    case Op::Log: case Op::Log2: case Op::Sqrt: case Op::Rsqrt:
      return {{"a", {0.05, 4}}};
    case Op::Log1p: return {{"a", {-0.9, 4}}};
    case Op::Reciprocal: return {{"a", {0.25, 4}}};
    case Op::Exp: case Op::Exp2: case Op::Expm1: return {{"a", {-8, 8}}};
    case Op::Pow: return f ? InputRanges{{"a", {0.1, 3}}, {"b", {-2, 2}}} : InputRanges{{"a", {-4, 5}}, {"b", {0, 6}}};
    case Op::Div: case Op::Remainder:
      return f ? InputRanges{{"a", {-8, 8}}, {"b", {0.5, 3}}} : InputRanges{{"a", {-20, 20}}, {"b", {-5, 6}}};
    default:
      return f ? InputRanges{{"a", {-3, 3}}, {"b", {-3, 3}}, {"c", {-3, 3}}}
               : InputRanges{{"a", {-50, 50}}, {"b", {-50, 50}}, {"c", {-50, 50}}};
  }
}

// Every valid unary and binary op in every dtype, plus where, fma and casts,
// over `shape`. Combinations the DSL rejects are skipped.
inline std::vector<SweepCase> opSweep(const Shape& shape) {
  std::vector<SweepCase> cases;
  auto add = [&](const std::string& label, InputRanges ranges, const std::function<Tensor(Graph&)>& body) {
    Graph g;
    try {
      Tensor y = body(g);
      g.output("y", y);
    } catch (const Error&) {
      return;  // not a valid combination
    }
    // Keep only the ranges of parameters this graph has.
    InputRanges used;
    for (int id : g.params())
      if (auto it = ranges.find(g.node(id).name); it != ranges.end()) used.insert(*it);
    cases.push_back({label, g, std::move(used)});
  };
  for (DType t : kAllDTypes) {
    std::string dn(dtypeName(t));
    for (Op op : unaryOps())
      add(std::string(opName(op)) + "/" + dn, rangesFor(op, t),
          [&](Graph& g) { return unary(op, g.input("a", t, shape)); });
    for (Op op : binaryOps())
      add(std::string(opName(op)) + "/" + dn, rangesFor(op, t),
          [&](Graph& g) { return binary(op, g.input("a", t, shape), g.input("b", t, shape)); });
    add("where/" + dn, rangesFor(Op::Where, t), [&](Graph& g) {
      Tensor a = g.input("a", t, shape), b = g.input("b", t, shape);
      return where(g.input("c", DType::Bool, shape), a, b);
    });
    add("fma/" + dn, rangesFor(Op::Fma, t), [&](Graph& g) {
      return fma(g.input("a", t, shape), g.input("b", t, shape), g.input("c", t, shape));
    });
    for (DType to : kAllDTypes)
      add("cast/" + dn + "->" + std::string(dtypeName(to)), {{"a", {-100, 100}}},
          [&](Graph& g) { return cast(g.input("a", t, shape), to); });
  }
  return cases;
}

}  // namespace kiln::test
