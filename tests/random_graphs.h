// Random graphs: what a user might write, drawn from a seed, for tests that
// hold for every graph (the plan evaluated kernel by kernel matches the
// graph; every kernel compiles to a spill-free cubin; on the GPU, the
// outputs match the reference evaluator).
//
// A graph starts from one to three inputs of a base shape (rank 1 to 3,
// sizes from 1 to 4096, some dims dynamic) or of shapes that broadcast to
// it, in f32, bf16, f16 or i32 (cast to f32 first, as a user computes in
// f32), then applies 2 to 12 random operations to values drawn from what
// it has so far: unary and binary elementwise ops (broadcasting against
// each other, literals, runtime scalars, iota; divisions by values in
// [0.5, 2.5]), comparisons and where, reductions over random axes (sum,
// mean, max, min, var, argmax, argmin; keepdim or not), softmax and
// log_softmax along a random axis, rmsnorm and layernorm of an input over
// its last axis, matmuls (by new weight inputs, f32 or 16-bit, or a Gram
// matrix; a 16-bit matmul's product at times followed by a softmax over
// its rows), and views (permute, transpose, reshape, slice, expand). One to three of the
// values become outputs, the newest always (cast back to a 16-bit input's
// dtype at times).
//
// The inputs are in [-1, 1) (integers in [0, 8)); each value carries a bound on its magnitude,
// and a value whose bound passes 100 is scaled back to 1, so the outputs'
// rounding errors stay small against their bounds: each output's relFloor
// (the magnitude below which its tolerance is absolute) is its bound.
// Comparisons, argmax and argmin read only values computed without
// rounding (inputs, their casts to f32, negations, absolute values, views,
// max and min), whose order the GPU's f32 arithmetic cannot change.
//
// A value computed in f32 and rounded to 16 bits inside the graph (a
// 16-bit matmul's operand and product) can round to a neighbour of the
// reference's value, one 16-bit ulp away, where the two straddle a
// rounding boundary. Each value carries a bound on that difference (err),
// carried through every later op by its Lipschitz constant; an output's
// relFloor grows so that its absolute tolerance covers twice its err.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kiln/dsl/oplib.h"
#include "kiln/dsl/ops.h"
#include "kiln/dsl/reference.h"
#include "gpu_basics.h"

namespace kiln::test {

struct RandomGraph {
  Graph graph;
  DimBindings dims;                         // the dynamic dims' values
  std::map<std::string, double> relFloor;   // by output: its magnitude bound
  std::string description;                  // the operations, one a line
};

namespace detail {

struct RandomValue {
  Tensor t;
  double bound = 1;    // |value| <= bound (NaN aside)
  bool exact = false;  // computed without rounding from the inputs
  double err = 0;      // |GPU - reference| from 16-bit roundings that can differ
};

class RandomGraphBuilder {
 public:
  explicit RandomGraphBuilder(uint64_t seed) : rng_(seed) {}

  RandomGraph run() {
    baseShape();
    const int inputs = pick(1, 3);
    for (int i = 0; i < inputs; ++i) addInput(i);
    const int ops = pick(2, 12);
    for (int i = 0; i < ops; ++i) step();
    outputs();
    return std::move(out_);
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <class T>
  const T& oneOf(const std::vector<T>& v) {
    return v[static_cast<size_t>(pick(0, static_cast<int>(v.size()) - 1))];
  }
  void say(const std::string& s) { out_.description += s + "\n"; }
  Graph& g() { return out_.graph; }

  // The size of a dim (dynamic ones by their bound value).
  int64_t sizeOf(const Dim& d) const { return d.isStatic() ? d.size : out_.dims.at(d.name); }
  int64_t countOf(const Shape& s, const std::vector<int64_t>& axes) const {
    int64_t n = 1;
    for (int64_t a : axes) n *= sizeOf(s[static_cast<size_t>(a)]);
    return n;
  }
  static std::string shapeText(const Shape& s) {
    std::string t = "[";
    for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + (s[i].isStatic() ? std::to_string(s[i].size) : s[i].name);
    return t + "]";
  }

  // Rank 1 to 3, at most 2^17 elements; sizes that make short and long
  // rows, odd lengths, unit dims; up to two dims dynamic.
  void baseShape() {
    const int rank = oneOf(std::vector<int>{1, 2, 2, 2, 3, 3});
    const std::vector<int64_t> sizes = {1, 2, 3, 7, 16, 17, 32, 64, 100, 128, 256, 300, 512, 1000, 1024, 2048, 4096};
    int64_t total = 1;
    for (int i = 0; i < rank; ++i) {
      int64_t s = oneOf(sizes);
      while (total * s > (int64_t{1} << 17)) s = sizes[static_cast<size_t>(pick(0, 6))];
      total *= s;
      if (chance(0.2) && s > 1) {
        const std::string name = "D" + std::to_string(i);
        out_.dims[name] = s;
        base_.push_back(Dim(name));
      } else {
        base_.push_back(Dim(s));
      }
    }
  }

  // An input of the base shape, or of one that broadcasts to it (leading
  // dims dropped, or some dims 1).
  void addInput(int i) {
    Shape s = base_;
    if (i > 0 && chance(0.5)) {
      if (chance(0.5) && s.size() > 1) s.erase(s.begin(), s.begin() + pick(1, static_cast<int>(s.size()) - 1));
      else
        for (Dim& d : s)
          if (chance(0.5)) d = Dim(1);
    }
    const DType t = oneOf(std::vector<DType>{DType::F32, DType::F32, DType::BF16, DType::F16, DType::I32});
    const std::string name = "x" + std::to_string(i);
    Tensor x = g().input(name, t, s);
    say(name + " = input " + std::string(dtypeName(t)) + " " + shapeText(s));
    if (t != DType::F32) {
      if (isFloat(t)) lowDType_ = t;
      x = cast(x, DType::F32);
    }
    // (integers are drawn in [0, 8))
    values_.push_back({x, t == DType::I32 ? 8.0 : 1.0, true, 0});
    if (s == base_ && sizeOf(s.back()) > 1 && isFloat(t)) normable_.push_back(values_.size() - 1);
  }

  // The shapes broadcast against each other (numpy rules, a dynamic dim
  // only against itself or 1).
  static bool broadcastable(const Shape& a, const Shape& b) {
    for (size_t i = 1; i <= std::min(a.size(), b.size()); ++i) {
      const Dim& x = a[a.size() - i];
      const Dim& y = b[b.size() - i];
      const bool unit = (x.isStatic() && x.size == 1) || (y.isStatic() && y.size == 1);
      if (!unit && !(x.isStatic() == y.isStatic() && x.size == y.size && x.name == y.name)) return false;
    }
    return true;
  }

  void add(Tensor t, double bound, bool exact, double err, const std::string& what) {
    // Values of at most 2^18 elements (the reference evaluates them in fp64;
    // broadcasting two long vectors against each other could make billions).
    int64_t numel = 1;
    for (const Dim& d : t.shape()) numel *= sizeOf(d);
    if (numel > (int64_t{1} << 18)) throw Error("random graphs: " + what + " has " + std::to_string(numel) + " elements");
    say("v" + std::to_string(values_.size()) + " = " + what + " -> " + shapeText(t.shape()));
    if (!(bound <= 100)) {  // (NaN-safe)
      t = t * (1.0 / bound);
      err /= bound;
      bound = 1;
      exact = false;
      say("  scaled by 1/bound");
    }
    values_.push_back({t, bound, exact, err});
  }
  std::string ref(const RandomValue& v) const {
    for (size_t i = 0; i < values_.size(); ++i)
      if (values_[i].t.id() == v.t.id()) return "v" + std::to_string(i);
    return "?";
  }

  // A value, the newer ones more often.
  const RandomValue& anyValue(bool exactOnly = false) {
    std::vector<size_t> c;
    for (size_t i = 0; i < values_.size(); ++i)
      if (!exactOnly || values_[i].exact) c.push_back(i);
    if (c.empty()) return values_.back();
    const size_t k = c.size();
    const size_t j = chance(0.6) ? k - 1 - static_cast<size_t>(pick(0, std::min<int>(1, static_cast<int>(k) - 1)))
                                 : static_cast<size_t>(pick(0, static_cast<int>(k) - 1));
    return values_[c[j]];
  }
  // The shape a and b broadcast to.
  static Shape broadcastShape(const Shape& a, const Shape& b) {
    Shape r = a.size() >= b.size() ? a : b;
    const Shape& o = a.size() >= b.size() ? b : a;
    for (size_t i = 1; i <= o.size(); ++i) {
      Dim& d = r[r.size() - i];
      if (d.isStatic() && d.size == 1) d = o[o.size() - i];
    }
    return r;
  }
  // A value that broadcasts against shape `s` (`fallback` where none does).
  const RandomValue& partnerOf(const Shape& s, const RandomValue& fallback, bool exactOnly = false) {
    std::vector<size_t> c;
    for (size_t i = 0; i < values_.size(); ++i)
      if ((!exactOnly || values_[i].exact) && broadcastable(values_[i].t.shape(), s)) c.push_back(i);
    return c.empty() ? fallback : values_[oneOf(c)];
  }

  // One operation; one the DSL refuses (an op on an integer value it
  // does not take, say) is noted and skipped.
  void step() {
    try {
      stepOnce();
    } catch (const Error& e) {
      say(std::string("  (refused: ") + e.what() + ")");
    }
  }
  void stepOnce() {
    const int kind = pick(0, 99);
    if (kind < 22) unaryOp();
    else if (kind < 50) binaryOp();
    else if (kind < 56) whereOp();
    else if (kind < 76) reductionOp();
    else if (kind < 81) softmaxOp();
    else if (kind < 85) normOp();
    else if (kind < 90) matmulOp();
    else viewOp();
  }

  // A matmul of a value of rank >= 2: by a new weight input [K, N] (f32,
  // or bf16 cast to f32; at times stored [N, K] and transposed), or by the
  // value's own transpose (a Gram matrix, rank 2). At most 2^24
  // multiply-adds (the reference's fp64 loops).
  void matmulOp() {
    const RandomValue a = anyValue();
    const Shape& s = a.t.shape();
    if (s.size() < 2) return unaryOp();
    const Dim K = s.back(), M = s[s.size() - 2];
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < s.size(); ++i) rows *= sizeOf(s[i]);
    const double k = static_cast<double>(sizeOf(K));
    if (s.size() == 2 && chance(0.3)) {
      if (static_cast<double>(sizeOf(M)) * static_cast<double>(sizeOf(M)) * k > double(1 << 24)) return unaryOp();
      add(matmul(a.t, permute(a.t, {1, 0})), k * a.bound * a.bound, false, 2 * k * a.bound * a.err, "matmul(" + ref(a) + ", " + ref(a) + ".T)");
      return;
    }
    const int64_t n = oneOf(std::vector<int64_t>{1, 8, 16, 40, 64, 136});
    if (static_cast<double>(rows) * static_cast<double>(n) * k > double(1 << 24)) return unaryOp();
    // The weight: f32, bf16 widened to f32, or (a matmul in 16 bits, as a
    // user writes one for tensor cores) of the dtype that a is rounded to:
    // bf16, or f16 where the product cannot overflow it.
    const bool low = chance(0.4);
    const double pb = k * a.bound;  // the product's bound (weights in [-1, 1))
    const DType t = low ? (pb < 30000 && chance(0.3) ? DType::F16 : DType::BF16)
                        : (chance(0.5) ? DType::F32 : DType::BF16);
    const std::string w = "w" + std::to_string(weights_++);
    const bool stored = chance(0.4);  // [N, K], read transposed
    Tensor wt = g().input(w, t, stored ? Shape{Dim(n), K} : Shape{K, Dim(n)});
    say(w + " = input " + std::string(dtypeName(t)) + (stored ? " [N, K]" : " [K, N]"));
    if (t != DType::F32 && !low) wt = cast(wt, DType::F32);
    if (stored) wt = permute(wt, {1, 0});
    const std::string ws = w + (stored ? ".T" : "");
    if (!low) {
      add(matmul(a.t, wt), pb, false, k * a.err, "matmul(" + ref(a) + ", " + ws + ")");
      return;
    }
    // The product stored in 16 bits and widened to f32; a 16-bit ulp
    // relative to the value is at most `ulp`, and a's rounding differs only
    // where a was computed with rounding. Half the time a softmax or
    // log_softmax over the product's rows follows (what an sm_90 compile can
    // fuse into the matmul's kernel, its row-softmax form).
    const double ulp = std::ldexp(1.0, t == DType::BF16 ? -7 : -10);
    const double aErr = a.err + (a.exact ? 0 : ulp * a.bound);
    add(cast(matmul(cast(a.t, t), wt), DType::F32), pb, false, k * aErr + ulp * pb,
        "f32(matmul(" + std::string(dtypeName(t)) + "(" + ref(a) + "), " + ws + "))");
    if (!chance(0.5)) return;
    const RandomValue p = values_.back();
    softmaxOf(p, static_cast<int64_t>(p.t.shape().size()) - 1, 0.7);
  }

  void unaryOp() {
    const RandomValue a = anyValue();
    switch (pick(0, 7)) {
      case 0: add(neg(a.t), a.bound, a.exact, a.err, "neg(" + ref(a) + ")"); break;
      case 1: add(abs(a.t), a.bound, a.exact, a.err, "abs(" + ref(a) + ")"); break;
      case 2: add(tanh(a.t), std::min(1.0, a.bound), false, a.err, "tanh(" + ref(a) + ")"); break;
      case 3: add(sigmoid(a.t), 1, false, a.err / 4, "sigmoid(" + ref(a) + ")"); break;
      case 4: add(relu(a.t), a.bound, a.exact, a.err, "relu(" + ref(a) + ")"); break;
      case 5: add(sin(a.t), 1, false, a.err, "sin(" + ref(a) + ")"); break;
      case 6:
        if (a.bound <= 4) add(exp(a.t), std::exp(a.bound), false, std::exp(a.bound) * a.err, "exp(" + ref(a) + ")");
        else add(cos(a.t), 1, false, a.err, "cos(" + ref(a) + ")");
        break;
      default: add(gelu_tanh(a.t), a.bound, false, 1.2 * a.err, "gelu_tanh(" + ref(a) + ")"); break;
    }
  }

  void binaryOp() {
    const RandomValue a = anyValue();
    const int form = pick(0, 9);
    if (form == 0) {  // a literal
      const double c = oneOf(std::vector<double>{0.5, -2.0, 3.0, 0.125});
      if (chance(0.5)) add(a.t * c, a.bound * std::abs(c), false, a.err * std::abs(c), ref(a) + " * " + std::to_string(c));
      else add(a.t + c, a.bound + std::abs(c), false, a.err, ref(a) + " + " + std::to_string(c));
      return;
    }
    if (form == 1) {  // a runtime scalar in [0.5, 1)
      Tensor s = g().scalar("s" + std::to_string(scalars_++));
      add(a.t * s, a.bound, false, a.err, ref(a) + " * scalar");
      return;
    }
    if (form == 2) {  // a division by a value in [0.5, 2.5]
      const RandomValue b = partnerOf(a.t.shape(), a);
      add(a.t / (1.5 + tanh(b.t)), 2 * a.bound, false, 2 * a.err + 4 * a.bound * b.err, "div(" + ref(a) + ", 1.5 + tanh(" + ref(b) + "))");
      return;
    }
    if (form == 3 && chance(0.5)) {  // iota along an axis of a's shape, scaled to [0, 1)
      const Shape& s = a.t.shape();
      if (!s.empty() && isStaticShape(s)) {
        const int64_t axis = pick(0, static_cast<int>(s.size()) - 1);
        const double len = static_cast<double>(sizeOf(s[static_cast<size_t>(axis)]));
        Tensor i = iota(g(), s, axis, DType::F32) * (1.0 / len);
        add(a.t + i, a.bound + 1, false, a.err, ref(a) + " + iota(" + std::to_string(axis) + ") / len");
        return;
      }
    }
    const RandomValue b = partnerOf(a.t.shape(), a);
    const std::string args = "(" + ref(a) + ", " + ref(b) + ")";
    switch (pick(0, 4)) {
      case 0: add(a.t + b.t, a.bound + b.bound, false, a.err + b.err, "add" + args); break;
      case 1: add(a.t - b.t, a.bound + b.bound, false, a.err + b.err, "sub" + args); break;
      case 2: add(a.t * b.t, a.bound * b.bound, false, a.err * b.bound + b.err * a.bound, "mul" + args); break;
      case 3: add(maximum(a.t, b.t), std::max(a.bound, b.bound), a.exact && b.exact, std::max(a.err, b.err), "maximum" + args); break;
      default: add(minimum(a.t, b.t), std::max(a.bound, b.bound), a.exact && b.exact, std::max(a.err, b.err), "minimum" + args); break;
    }
  }

  // where(a > b, c, d), the comparison between exact values.
  void whereOp() {
    const RandomValue a = anyValue(true);
    if (!a.exact) return unaryOp();
    const RandomValue b = partnerOf(a.t.shape(), a, true);
    Tensor cond = chance(0.5) ? a.t > b.t : a.t <= b.t;
    const RandomValue c = partnerOf(cond.shape(), a);
    if (chance(0.3)) {
      add(where(cond, c.t, 0.0), c.bound, false, c.err, "where(" + ref(a) + " cmp " + ref(b) + ", " + ref(c) + ", 0)");
      return;
    }
    const RandomValue d = partnerOf(broadcastShape(cond.shape(), c.t.shape()), c);
    add(where(cond, c.t, d.t), std::max(c.bound, d.bound), false, std::max(c.err, d.err),
        "where(" + ref(a) + " cmp " + ref(b) + ", " + ref(c) + ", " + ref(d) + ")");
  }

  std::vector<int64_t> randomAxes(int64_t rank) {
    std::vector<int64_t> axes;
    for (int64_t i = 0; i < rank; ++i)
      if (chance(0.4)) axes.push_back(i);
    if (axes.empty() && rank > 0) axes.push_back(pick(0, static_cast<int>(rank) - 1));
    return axes;
  }

  void reductionOp() {
    const RandomValue a = anyValue();
    const Shape& s = a.t.shape();
    const int64_t rank = static_cast<int64_t>(s.size());
    if (rank == 0) return unaryOp();
    const bool keep = chance(0.5);
    const bool all = chance(0.15);
    std::vector<int64_t> axes = all ? std::vector<int64_t>{} : randomAxes(rank);
    std::vector<int64_t> counted = axes;
    if (all)
      for (int64_t i = 0; i < rank; ++i) counted.push_back(i);
    const double n = static_cast<double>(countOf(s, counted));
    std::string what = std::string(keep ? " keepdim" : "") + " over " +
                       (all ? std::string("all") : std::to_string(axes.size()) + " axes from " + std::to_string(axes[0]));
    const int op = pick(0, 7);
    if (op >= 6) {  // argmax / argmin: one axis, exact values
      const RandomValue e = anyValue(true);
      if (!e.exact || e.t.shape().empty()) return unaryOp();
      const int64_t axis = pick(0, static_cast<int>(e.t.shape().size()) - 1);
      const double len = static_cast<double>(sizeOf(e.t.shape()[static_cast<size_t>(axis)]));
      Tensor r = op == 6 ? argmax(e.t, axis, keep) : argmin(e.t, axis, keep);
      add(r, len, true, 0, std::string(op == 6 ? "argmax(" : "argmin(") + ref(e) + ", " + std::to_string(axis) + ")" +
                            (keep ? " keepdim" : ""));
      return;
    }
    const Axes ax{axes};
    switch (op) {
      case 0: add(sum(a.t, ax, keep), a.bound * n, false, a.err * n, "sum(" + ref(a) + ")" + what); break;
      case 1: add(mean(a.t, ax, keep), a.bound, false, a.err, "mean(" + ref(a) + ")" + what); break;
      case 2: add(max(a.t, ax, keep), a.bound, a.exact, a.err, "max(" + ref(a) + ")" + what); break;
      case 3: add(min(a.t, ax, keep), a.bound, a.exact, a.err, "min(" + ref(a) + ")" + what); break;
      case 4: {
        const int64_t correction = pick(0, 1);
        add(var(a.t, ax, correction, keep), 2 * a.bound * a.bound, false, 8 * a.bound * a.err,
            "var(" + ref(a) + ", correction " + std::to_string(correction) + ")" + what);
        break;
      }
      default: add(sum(a.t * a.t, ax, keep), a.bound * a.bound * n, false, 2 * a.bound * a.err * n, "sum(" + ref(a) + "^2)" + what); break;
    }
  }

  void softmaxOp() {
    const RandomValue a = anyValue();
    const Shape& s = a.t.shape();
    if (s.empty()) return unaryOp();
    softmaxOf(a, pick(0, static_cast<int>(s.size()) - 1), 0.5);
  }
  // softmax (with probability pSoftmax) or log_softmax of a along axis.
  void softmaxOf(const RandomValue& a, int64_t axis, double pSoftmax) {
    const double n = static_cast<double>(sizeOf(a.t.shape()[static_cast<size_t>(axis)]));
    if (chance(pSoftmax)) add(softmax(a.t, axis), 1, false, 2 * a.err, "softmax(" + ref(a) + ", " + std::to_string(axis) + ")");
    else
      add(log_softmax(a.t, axis), 2 * a.bound + std::log(n) + 1, false, 2 * a.err,
          "log_softmax(" + ref(a) + ", " + std::to_string(axis) + ")");
  }

  // rmsnorm or layernorm over the last axis of an input of the base shape
  // (random values along the row: a row of equal computed values would
  // normalize its rounding errors), weight (and bias) new inputs.
  void normOp() {
    if (normable_.empty()) return unaryOp();
    const RandomValue a = values_[oneOf(normable_)];
    const Dim last = a.t.shape().back();
    const double n = static_cast<double>(sizeOf(last));
    const std::string w = "w" + std::to_string(weights_++);
    Tensor weight = g().input(w, DType::F32, {last});
    if (chance(0.5)) {
      add(rmsnorm(a.t, weight), std::sqrt(n), false, 0, "rmsnorm(" + ref(a) + ", " + w + ")");
    } else {
      Tensor bias = g().input("b" + std::to_string(weights_++), DType::F32, {last});
      add(layernorm(a.t, weight, bias), std::sqrt(n) + 1, false, 0, "layernorm(" + ref(a) + ", " + w + ")");
    }
  }

  void viewOp() {
    const RandomValue a = anyValue();
    const Shape& s = a.t.shape();
    const int rank = static_cast<int>(s.size());
    if (rank == 0) return unaryOp();
    switch (pick(0, 4)) {
      case 0: {  // permute / transpose
        if (rank < 2) return unaryOp();
        std::vector<int64_t> perm(static_cast<size_t>(rank));
        for (int i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = i;
        std::shuffle(perm.begin(), perm.end(), rng_);
        std::string p;
        for (int64_t i : perm) p += std::to_string(i);
        add(permute(a.t, perm), a.bound, a.exact, a.err, "permute(" + ref(a) + ", " + p + ")");
        return;
      }
      case 1: {  // merge two adjacent static dims
        for (int i = 0; i + 1 < rank; ++i) {
          if (!s[static_cast<size_t>(i)].isStatic() || !s[static_cast<size_t>(i) + 1].isStatic()) continue;
          Shape r;
          for (int j = 0; j < rank; ++j) {
            if (j == i + 1) continue;
            r.push_back(j == i ? Dim(s[static_cast<size_t>(i)].size * s[static_cast<size_t>(i) + 1].size)
                               : s[static_cast<size_t>(j)]);
          }
          add(reshape(a.t, r), a.bound, a.exact, a.err, "reshape(" + ref(a) + ", " + shapeText(r) + ")");
          return;
        }
        return unaryOp();
      }
      case 2: {  // split a static dim in two
        for (int i = 0; i < rank && rank < 4; ++i) {
          const Dim& d = s[static_cast<size_t>(i)];
          if (!d.isStatic() || d.size % 2 != 0 || d.size < 4) continue;
          const int64_t f = d.size % 4 == 0 && chance(0.5) ? 4 : 2;
          Shape r(s.begin(), s.begin() + i);
          r.push_back(Dim(f));
          r.push_back(Dim(d.size / f));
          r.insert(r.end(), s.begin() + i + 1, s.end());
          add(reshape(a.t, r), a.bound, a.exact, a.err, "reshape(" + ref(a) + ", " + shapeText(r) + ")");
          return;
        }
        return unaryOp();
      }
      case 3: {  // slice a static axis
        for (int i = rank - 1; i >= 0; --i) {
          const Dim& d = s[static_cast<size_t>(i)];
          if (!d.isStatic() || d.size < 3) continue;
          const int64_t start = pick(0, static_cast<int>(d.size / 3));
          const int64_t end = pick(static_cast<int>(start) + 1, static_cast<int>(d.size));
          const int64_t stride = chance(0.3) ? 2 : 1;
          add(slice(a.t, i, start, end, stride), a.bound, a.exact, a.err,
              "slice(" + ref(a) + ", " + std::to_string(i) + ", " + std::to_string(start) + ", " + std::to_string(end) +
                  ", " + std::to_string(stride) + ")");
          return;
        }
        return unaryOp();
      }
      default: {  // expand a unit dim to the base shape's size there (right-aligned)
        if (s.size() > base_.size()) return unaryOp();
        Shape r = s;
        bool any = false;
        for (size_t i = 1; i <= s.size(); ++i) {
          const Dim& d = s[s.size() - i];
          const Dim& b = base_[base_.size() - i];
          if (d.isStatic() && d.size == 1 && !(b.isStatic() && b.size == 1)) {
            r[s.size() - i] = b;
            any = true;
          }
        }
        if (!any) return unaryOp();
        add(expand(a.t, r), a.bound, a.exact, a.err, "expand(" + ref(a) + ", " + shapeText(r) + ")");
        return;
      }
    }
  }

  // The newest value, and up to two others (distinct nodes, not inputs).
  void outputs() {
    std::vector<size_t> chosen = {values_.size() - 1};
    const int more = pick(0, 2);
    for (int i = 0; i < more; ++i) {
      const size_t j = static_cast<size_t>(pick(0, static_cast<int>(values_.size()) - 1));
      bool dup = false;
      for (size_t c : chosen) dup = dup || values_[c].t.id() == values_[j].t.id();
      if (!dup) chosen.push_back(j);
    }
    for (size_t k = 0; k < chosen.size(); ++k) {
      const RandomValue& v = values_[chosen[k]];
      const std::string name = "y" + std::to_string(k);
      Tensor t = v.t;
      if (lowDType_ != DType::F32 && isFloat(t.dtype()) && chance(0.5)) t = cast(t, lowDType_);
      g().output(name, t);
      // (absolute below it: tolerance x relFloor covers twice err; integer
      // outputs, argmax and argmin of exact values, carry none)
      out_.relFloor[name] = std::max(1.0, v.bound);
      if (v.err > 0 && isFloat(t.dtype()))
        out_.relFloor[name] = std::max(out_.relFloor[name], 2 * v.err / tolerance(t.dtype()));
      say(name + " = output " + ref(v) + " as " + std::string(dtypeName(t.dtype())));
    }
  }

  std::mt19937_64 rng_;
  RandomGraph out_;
  Shape base_;
  std::vector<RandomValue> values_;
  DType lowDType_ = DType::F32;
  int scalars_ = 0;
  int weights_ = 0;
  std::vector<size_t> normable_;  // inputs of the base shape (random along rows)
};

}  // namespace detail

inline RandomGraph randomGraph(uint64_t seed) { return detail::RandomGraphBuilder(seed).run(); }

}  // namespace kiln::test
