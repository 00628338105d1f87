// The reference evaluator: walks a graph in canonical order on the host.
//
// Value model. A float-dtype node holds fp64 values, never rounded to its
// dtype (a fused kernel keeps intermediates in registers); an integer or bool
// node holds exact int64 values wrapped to its dtype (two's complement; bool
// is 0/1). Rounding to a narrower float happens at Cast nodes and at graph
// outputs only.
//
// Layout. Every node's values are dense and row-major in the node's resolved
// shape. Broadcasts and views are strided gathers (gatherStrided) driven by an
// incrementing multi-index; reductions first gather the reduced axes
// innermost so that each output element reduces one contiguous row.
//
// This file is the evaluator proper; the per-element op semantics live in
// element_semantics.h and the host tensors, random inputs and shape
// resolution in host_tensor.cpp.
#include "kiln/dsl/reference.h"

#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "element_semantics.h"
#include "kiln/dsl/ops.h"

namespace kiln {

namespace {

using detail::accurateSum;
using detail::binaryFloat;
using detail::binaryInt;
using detail::compare;
using detail::floatToInt;
using detail::fmaFloat;
using detail::fmaInt;
using detail::isComparison;
using detail::kInf;
using detail::kNaN;
using detail::predicateFloat;
using detail::predicateInt;
using detail::truthOf;
using detail::unaryFloat;
using detail::unaryInt;
using detail::wrapAdd;
using detail::wrapMul;
using detail::wrapToDType;

// ------------------------------------------------------------ shape helpers

using detail::dimsToString;
using detail::product;

// Row-major strides of a dense tensor of `shape`.
std::vector<int64_t> denseStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    s[d] = acc;
    acc *= shape[d];
  }
  return s;
}

// Strides that read a dense tensor of `from` as if it had shape `to` (numpy
// broadcasting: dims aligned from the right, a 1 or a missing dim repeats).
std::vector<int64_t> broadcastStrides(const std::vector<int64_t>& from,
                                      const std::vector<int64_t>& to) {
  std::vector<int64_t> dense = denseStrides(from);
  std::vector<int64_t> s(to.size(), 0);
  size_t offset = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d)
    s[offset + d] = (from[d] == 1 && to[offset + d] != 1) ? 0 : dense[d];
  return s;
}

// ------------------------------------------------------------ strided access

// out[i] = src[offset + sum_d idx_d(i) * strides[d]] for every row-major
// index i of `shape`: the one loop behind broadcasts, views and reductions.
template <class T>
void gatherStrided(const std::vector<T>& src, int64_t offset, const std::vector<int64_t>& strides,
                   const std::vector<int64_t>& shape, std::vector<T>& out) {
  int64_t n = product(shape);
  out.resize(static_cast<size_t>(n));
  if (n == 0) return;
  const int rank = static_cast<int>(shape.size());
  if (rank == 0) {
    out[0] = src[offset];
    return;
  }
  const int64_t inner = shape[rank - 1];
  const int64_t innerStride = strides[rank - 1];
  std::vector<int64_t> idx(rank, 0);
  int64_t rowStart = offset;  // source position of the current innermost row
  for (int64_t o = 0; o < n; o += inner) {
    const T* s = src.data() + rowStart;
    T* d = out.data() + o;
    for (int64_t j = 0; j < inner; ++j) d[j] = s[j * innerStride];
    for (int dim = rank - 2; dim >= 0; --dim) {  // advance the outer multi-index
      rowStart += strides[dim];
      if (++idx[dim] < shape[dim]) break;
      rowStart -= strides[dim] * shape[dim];
      idx[dim] = 0;
    }
  }
}

// An elementwise operand: element i of the result reads p[i * step], with
// step 0 for a single broadcast value.
template <class T>
struct Lane {
  const T* p;
  int64_t step;
  T operator[](int64_t i) const { return p[i * step]; }
};

// Buffers of released node values, kept for reuse: on a big tensor the
// first-touch page faults of a fresh vector cost more than the arithmetic
// done on it.
template <class T>
class BufferPool {
 public:
  // An empty vector that can hold n elements without reallocating: the
  // smallest pooled one that fits, else a new one (and the pool is dropped,
  // so memory kept for reuse never piles up). Small requests skip the pool.
  std::vector<T> take(size_t n) {
    if (n < kMinPooled) return {};
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->capacity() >= n && (best == free_.end() || it->capacity() < best->capacity()))
        best = it;
    if (best == free_.end()) {
      free_.clear();
      return {};
    }
    std::vector<T> v = std::move(*best);
    free_.erase(best);
    return v;
  }
  void give(std::vector<T>&& v) {
    if (v.capacity() < kMinPooled) return;
    v.clear();
    free_.push_back(std::move(v));
  }

 private:
  static constexpr size_t kMinPooled = 4096;
  std::vector<std::vector<T>> free_;
};

// A temporary buffer borrowed from a pool for one node and handed back when
// it goes out of scope.
template <class T>
struct Scratch {
  explicit Scratch(BufferPool<T>& p) : pool(p) {}
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { pool.give(std::move(v)); }
  // Makes v able to hold n elements (its contents are not kept).
  std::vector<T>& borrow(size_t n) {
    if (v.capacity() < n) {
      pool.give(std::move(v));
      v = pool.take(n);
    }
    return v;
  }
  BufferPool<T>& pool;
  std::vector<T> v;
};

// `values` (shaped `shape`) as a lane of a result shaped `outShape`. A real
// broadcast is materialized into `scratch`, which must not hold `values`.
template <class T>
Lane<T> makeLane(const std::vector<T>& values, const std::vector<int64_t>& shape,
                 const std::vector<int64_t>& outShape, Scratch<T>& scratch) {
  if (values.size() == 1) return {values.data(), 0};
  if (shape == outShape) return {values.data(), 1};
  std::vector<T>& b = scratch.borrow(static_cast<size_t>(product(outShape)));
  gatherStrided(values, 0, broadcastStrides(shape, outShape), outShape, b);
  return {b.data(), 1};
}

// ------------------------------------------------------------ the evaluator

// The values of one node: `f` for float dtypes, `i` for integer and bool.
struct Values {
  std::vector<double> f;
  std::vector<int64_t> i;
};

class Evaluator {
 public:
  Evaluator(const Graph& g, const EvalInputs& in) : g_(g), in_(in) {}

  std::vector<EvalOutput> run();

 private:
  const Node& node(int id) const { return g_.node(id); }
  bool holdsFloat(int id) const { return isFloat(node(id).dtype); }

  void validate(const std::vector<int>& order) const;
  void evalNode(int id);
  void evalLeaf(int id);
  void evalUnary(int id);
  void evalBinary(int id);
  void evalTernary(int id);
  void evalCast(int id);
  void evalReduction(int id);
  void evalMatmul(int id);
  void evalView(int id);

  // Operand values converted for a computation: ints convert to double
  // exactly; a float operand in an integer computation is a bug upstream.
  const std::vector<double>& asDoubles(int id, Scratch<double>& scratch) const;
  const std::vector<int64_t>& asInts(int id, int user) const;
  // 0/1 per element: nonzero (NaN counts as nonzero).
  const std::vector<int64_t>& truthValues(int id, Scratch<int64_t>& scratch) const;
  template <class T>
  Lane<T> lane(const std::vector<T>& values, int operand, int user, Scratch<T>& scratch) const {
    return makeLane(values, shapes_[operand], shapes_[user], scratch);
  }
  int64_t count(int id) const { return product(shapes_[id]); }
  void release(int id) {
    fpool_.give(std::move(vals_[id].f));
    ipool_.give(std::move(vals_[id].i));
  }

  const Graph& g_;
  const EvalInputs& in_;
  std::vector<Values> vals_;
  std::vector<std::vector<int64_t>> shapes_;  // resolved
  BufferPool<double> fpool_;
  BufferPool<int64_t> ipool_;
};

void Evaluator::validate(const std::vector<int>& order) const {
  // Every dynamic dim the live graph mentions must be bound to a size >= 0,
  // and every binding must name such a dim.
  std::set<std::string> used;
  for (int id : order)
    for (const Dim& d : node(id).shape)
      if (d.isDynamic()) used.insert(d.name);
  for (const std::string& name : used) {
    auto it = in_.dims.find(name);
    if (it == in_.dims.end())
      throw Error(fmt::format("evaluate: dynamic dim '{}' is not bound; expected a size in "
                              "EvalInputs.dims (the graph's dims: {})",
                              name, fmt::join(used, ", ")));
    if (it->second < 0)
      throw Error(fmt::format("evaluate: dynamic dim '{}' is bound to {}; expected a size >= 0",
                              name, it->second));
  }
  for (const auto& [name, size] : in_.dims)
    if (!used.count(name))
      throw Error(fmt::format("evaluate: dim '{}' is bound but the graph has no dynamic dim of "
                              "that name (its dims: {})",
                              name, used.empty() ? "none" : fmt::format("{}", fmt::join(used, ", "))));

  std::set<std::string> inputNames, scalarNames;
  for (int id : g_.params()) {
    const Node& n = node(id);
    if (n.op == Op::Scalar) {
      scalarNames.insert(n.name);
      if (!in_.scalars.count(n.name))
        throw Error(fmt::format("evaluate: runtime scalar '{}' ({}) is missing; expected a value "
                                "in EvalInputs.scalars",
                                n.name, dtypeName(n.dtype)));
      continue;
    }
    inputNames.insert(n.name);
    std::vector<int64_t> want = resolveShape(n.shape, in_.dims);
    std::string expected = typeToString(n.dtype, n.shape);
    if (!isStaticShape(n.shape)) expected += " = " + dimsToString(want);
    auto it = in_.tensors.find(n.name);
    if (it == in_.tensors.end())
      throw Error(fmt::format("evaluate: input '{}' is missing; expected a host tensor {} in "
                              "EvalInputs.tensors",
                              n.name, expected));
    const HostTensor& t = it->second;
    if (t.dtype() != n.dtype || t.shape() != want)
      throw Error(fmt::format("evaluate: input '{}' expects {} but got {}{}", n.name, expected,
                              dtypeName(t.dtype()), dimsToString(t.shape())));
  }
  for (const auto& [name, t] : in_.tensors)
    if (!inputNames.count(name))
      throw Error(fmt::format(
          "evaluate: tensor '{}' is not an input of the graph{}", name,
          scalarNames.count(name) ? " (it is a runtime scalar: pass it in EvalInputs.scalars)"
                                  : ""));
  for (const auto& [name, v] : in_.scalars)
    if (!scalarNames.count(name))
      throw Error(fmt::format(
          "evaluate: scalar '{}' is not a runtime scalar of the graph{}", name,
          inputNames.count(name) ? " (it is a tensor input: pass it in EvalInputs.tensors)" : ""));
}

std::vector<EvalOutput> Evaluator::run() {
  std::vector<int> order = g_.canonicalOrder();
  validate(order);
  vals_.assign(g_.numNodes(), {});
  shapes_.assign(g_.numNodes(), {});

  // Each node's values are dropped once its last user has run (outputs are
  // kept), so long chains over big tensors stay within a few live buffers.
  std::vector<int> usesLeft(g_.numNodes(), 0);
  for (int id : order)
    for (int operand : node(id).inputs) ++usesLeft[operand];
  for (const GraphOutput& o : g_.outputs()) ++usesLeft[o.node];

  for (int id : order) {
    shapes_[id] = resolveShape(node(id).shape, in_.dims);
    // The node writes its values into a recycled buffer where one fits.
    size_t num = static_cast<size_t>(count(id));
    if (holdsFloat(id)) vals_[id].f = fpool_.take(num);
    else vals_[id].i = ipool_.take(num);
    evalNode(id);
    for (int operand : node(id).inputs)
      if (--usesLeft[operand] == 0) release(operand);
  }

  std::vector<EvalOutput> outs;
  for (const GraphOutput& o : g_.outputs()) {
    const Node& n = node(o.node);
    EvalOutput e;
    e.name = o.name;
    e.value = HostTensor(n.dtype, shapes_[o.node]);
    const int64_t num = count(o.node);
    Values& v = vals_[o.node];
    const bool lastUse = --usesLeft[o.node] == 0;
    if (isFloat(n.dtype)) {
      e.exact = lastUse ? std::move(v.f) : v.f;
      for (int64_t i = 0; i < num; ++i) e.value.set(i, e.exact[i]);
    } else {
      e.exact.resize(static_cast<size_t>(num));
      for (int64_t i = 0; i < num; ++i) {
        e.exact[i] = static_cast<double>(v.i[i]);
        e.value.setInt(i, v.i[i]);
      }
    }
    outs.push_back(std::move(e));
  }
  return outs;
}

void Evaluator::evalNode(int id) {
  switch (opClass(node(id).op)) {
    case OpClass::Leaf: return evalLeaf(id);
    case OpClass::Unary: return evalUnary(id);
    case OpClass::Binary: return evalBinary(id);
    case OpClass::Ternary: return evalTernary(id);
    case OpClass::Cast: return evalCast(id);
    case OpClass::Reduction: return evalReduction(id);
    case OpClass::Matmul: return evalMatmul(id);
    case OpClass::View: return evalView(id);
  }
}

const std::vector<double>& Evaluator::asDoubles(int id, Scratch<double>& scratch) const {
  if (holdsFloat(id)) return vals_[id].f;
  const std::vector<int64_t>& v = vals_[id].i;
  std::vector<double>& out = scratch.borrow(v.size());
  out.resize(v.size());
  for (size_t k = 0; k < v.size(); ++k) out[k] = static_cast<double>(v[k]);
  return out;
}

const std::vector<int64_t>& Evaluator::asInts(int id, int user) const {
  if (holdsFloat(id))
    throw Error(fmt::format("reference: {} of dtype {} has a {} operand; the DSL should have "
                            "promoted it",
                            opName(node(user).op), dtypeName(node(user).dtype),
                            dtypeName(node(id).dtype)));
  return vals_[id].i;
}

const std::vector<int64_t>& Evaluator::truthValues(int id, Scratch<int64_t>& scratch) const {
  if (node(id).dtype == DType::Bool) return vals_[id].i;  // already 0/1
  size_t num = static_cast<size_t>(count(id));
  std::vector<int64_t>& out = scratch.borrow(num);
  out.resize(num);
  if (holdsFloat(id)) {
    for (size_t k = 0; k < num; ++k) out[k] = truthOf(vals_[id].f[k]);
  } else {
    for (size_t k = 0; k < num; ++k) out[k] = vals_[id].i[k] != 0;
  }
  return out;
}

void Evaluator::evalLeaf(int id) {
  const Node& n = node(id);
  Values& out = vals_[id];
  const int64_t num = count(id);
  switch (n.op) {
    case Op::Input: {
      const HostTensor& t = in_.tensors.at(n.name);
      if (isFloat(n.dtype)) {
        out.f.resize(num);
        for (int64_t i = 0; i < num; ++i) out.f[i] = t.get(i);
      } else {
        out.i.resize(num);
        for (int64_t i = 0; i < num; ++i) out.i[i] = t.getInt(i);
      }
      return;
    }
    case Op::Scalar: {
      double v = in_.scalars.at(n.name);
      if (isFloat(n.dtype)) out.f.assign(num, roundToDType(v, n.dtype));
      else out.i.assign(num, floatToInt(v, n.dtype));
      return;
    }
    case Op::Constant:
      if (isFloat(n.dtype)) out.f.assign(num, n.fvalue);
      else out.i.assign(num, wrapToDType(n.ivalue, n.dtype));
      return;
    case Op::Iota: {
      const std::vector<int64_t>& shape = shapes_[id];
      int64_t inner = 1;
      for (size_t d = n.axis + 1; d < shape.size(); ++d) inner *= shape[d];
      int64_t size = shape[n.axis];
      auto index = [&](int64_t i) { return (i / inner) % size; };
      if (isFloat(n.dtype)) {
        out.f.resize(num);
        for (int64_t i = 0; i < num; ++i) out.f[i] = static_cast<double>(index(i));
      } else {
        out.i.resize(num);
        for (int64_t i = 0; i < num; ++i) out.i[i] = wrapToDType(index(i), n.dtype);
      }
      return;
    }
    default: break;
  }
}

void Evaluator::evalUnary(int id) {
  const Node& n = node(id);
  const int a = n.inputs[0];
  const int64_t num = count(id);
  Values& out = vals_[id];

  // Predicates look at the operand in its own type.
  if (n.op == Op::IsNan || n.op == Op::IsInf || n.op == Op::LogicalNot) {
    out.i.resize(num);
    if (holdsFloat(a)) {
      const std::vector<double>& x = vals_[a].f;
      for (int64_t i = 0; i < num; ++i) out.i[i] = predicateFloat(n.op, x[i]);
    } else {
      const std::vector<int64_t>& x = vals_[a].i;
      for (int64_t i = 0; i < num; ++i) out.i[i] = predicateInt(n.op, x[i]);
    }
    return;
  }

  if (isFloat(n.dtype)) {
    Scratch<double> scratch(fpool_);
    const std::vector<double>& x = asDoubles(a, scratch);
    out.f.resize(num);
    for (int64_t i = 0; i < num; ++i) out.f[i] = unaryFloat(n.op, x[i]);
  } else {
    const std::vector<int64_t>& x = asInts(a, id);
    out.i.resize(num);
    for (int64_t i = 0; i < num; ++i) out.i[i] = wrapToDType(unaryInt(n.op, x[i]), n.dtype);
  }
}

void Evaluator::evalBinary(int id) {
  const Node& n = node(id);
  const int a = n.inputs[0], b = n.inputs[1];
  const int64_t num = count(id);
  Values& out = vals_[id];

  if (n.op == Op::LogicalAnd || n.op == Op::LogicalOr) {
    Scratch<int64_t> ta(ipool_), tb(ipool_), sa(ipool_), sb(ipool_);
    Lane<int64_t> x = lane(truthValues(a, ta), a, id, sa);
    Lane<int64_t> y = lane(truthValues(b, tb), b, id, sb);
    out.i.resize(num);
    for (int64_t i = 0; i < num; ++i)
      out.i[i] = n.op == Op::LogicalAnd ? (x[i] && y[i]) : (x[i] || y[i]);
    return;
  }

  // Comparisons compute in the operands' promoted type; arithmetic in the
  // node's dtype.
  DType computeType = isComparison(n.op) ? promoteTypes({&node(a), &node(b)}) : n.dtype;
  if (isFloat(computeType)) {
    Scratch<double> ca(fpool_), cb(fpool_), sa(fpool_), sb(fpool_);
    Lane<double> x = lane(asDoubles(a, ca), a, id, sa);
    Lane<double> y = lane(asDoubles(b, cb), b, id, sb);
    if (isComparison(n.op)) {
      out.i.resize(num);
      for (int64_t i = 0; i < num; ++i) out.i[i] = compare(n.op, x[i], y[i]);
    } else {
      out.f.resize(num);
      for (int64_t i = 0; i < num; ++i) out.f[i] = binaryFloat(n.op, x[i], y[i]);
    }
  } else {
    Scratch<int64_t> sa(ipool_), sb(ipool_);
    Lane<int64_t> x = lane(asInts(a, id), a, id, sa);
    Lane<int64_t> y = lane(asInts(b, id), b, id, sb);
    out.i.resize(num);
    if (isComparison(n.op)) {
      for (int64_t i = 0; i < num; ++i) out.i[i] = compare(n.op, x[i], y[i]);
    } else {
      for (int64_t i = 0; i < num; ++i)
        out.i[i] = wrapToDType(binaryInt(n.op, x[i], y[i]), n.dtype);
    }
  }
}

void Evaluator::evalTernary(int id) {
  const Node& n = node(id);
  const int a = n.inputs[0], b = n.inputs[1], c = n.inputs[2];
  const int64_t num = count(id);
  Values& out = vals_[id];

  if (n.op == Op::Where) {
    Scratch<int64_t> truth(ipool_), sc(ipool_);
    Lane<int64_t> cond = lane(truthValues(a, truth), a, id, sc);
    if (isFloat(n.dtype)) {
      Scratch<double> cb(fpool_), cc(fpool_), sb(fpool_), sd(fpool_);
      Lane<double> x = lane(asDoubles(b, cb), b, id, sb), y = lane(asDoubles(c, cc), c, id, sd);
      out.f.resize(num);
      for (int64_t i = 0; i < num; ++i) out.f[i] = cond[i] ? x[i] : y[i];
    } else {
      Scratch<int64_t> sb(ipool_), sd(ipool_);
      Lane<int64_t> x = lane(asInts(b, id), b, id, sb), y = lane(asInts(c, id), c, id, sd);
      out.i.resize(num);
      for (int64_t i = 0; i < num; ++i) out.i[i] = wrapToDType(cond[i] ? x[i] : y[i], n.dtype);
    }
    return;
  }

  // Fma: a * b + c with a single rounding.
  if (isFloat(n.dtype)) {
    Scratch<double> ca(fpool_), cb(fpool_), cc(fpool_), sa(fpool_), sb(fpool_), sd(fpool_);
    Lane<double> x = lane(asDoubles(a, ca), a, id, sa);
    Lane<double> y = lane(asDoubles(b, cb), b, id, sb);
    Lane<double> z = lane(asDoubles(c, cc), c, id, sd);
    out.f.resize(num);
    for (int64_t i = 0; i < num; ++i) out.f[i] = fmaFloat(x[i], y[i], z[i]);
  } else {
    Scratch<int64_t> sa(ipool_), sb(ipool_), sd(ipool_);
    Lane<int64_t> x = lane(asInts(a, id), a, id, sa);
    Lane<int64_t> y = lane(asInts(b, id), b, id, sb);
    Lane<int64_t> z = lane(asInts(c, id), c, id, sd);
    out.i.resize(num);
    for (int64_t i = 0; i < num; ++i) out.i[i] = wrapToDType(fmaInt(x[i], y[i], z[i]), n.dtype);
  }
}

void Evaluator::evalCast(int id) {
  const Node& n = node(id);
  const int a = n.inputs[0];
  const int64_t num = count(id);
  Values& out = vals_[id];
  if (isFloat(n.dtype)) {
    // Storing into a float dtype: one rounding, from the exact value. (An
    // i64 through double to f32/f16/bf16 is still correctly rounded: 53 >=
    // 2 * 24 + 2 makes the double rounding innocuous.)
    Scratch<double> scratch(fpool_);
    const std::vector<double>& x = asDoubles(a, scratch);
    out.f.resize(num);
    for (int64_t i = 0; i < num; ++i) out.f[i] = roundToDType(x[i], n.dtype);
  } else if (holdsFloat(a)) {
    const std::vector<double>& x = vals_[a].f;
    out.i.resize(num);
    for (int64_t i = 0; i < num; ++i) out.i[i] = floatToInt(x[i], n.dtype);
  } else {
    const std::vector<int64_t>& x = vals_[a].i;
    out.i.resize(num);
    for (int64_t i = 0; i < num; ++i) out.i[i] = wrapToDType(x[i], n.dtype);
  }
}

// Reduces each contiguous row of `len` values of `rows` into out (float input).
void reduceFloatRows(const Node& n, const std::vector<double>& rows, int64_t len, int64_t numOut,
                     Values& out) {
  const bool argOp = n.op == Op::ArgMax || n.op == Op::ArgMin;
  std::vector<double> deviations;  // var/std: one row's squared deviations
  if (argOp) out.i.resize(numOut);
  else out.f.resize(numOut);
  for (int64_t o = 0; o < numOut; ++o) {
    const double* r = rows.data() + o * len;
    double result = 0.0;
    switch (n.op) {
      case Op::Sum:
      case Op::Mean: {
        double s = accurateSum(r, len);
        result = n.op == Op::Sum ? s : s / static_cast<double>(len);  // mean of nothing: NaN
        break;
      }
      case Op::Prod: {
        double p = 1.0;
        for (int64_t k = 0; k < len; ++k) p *= r[k];
        result = p;
        break;
      }
      case Op::Max:
      case Op::Min: {
        bool isMax = n.op == Op::Max;
        result = len == 0 ? kNaN : (isMax ? -kInf : kInf);
        for (int64_t k = 0; k < len; ++k) {
          if (std::isnan(r[k])) { result = kNaN; break; }
          if (isMax ? r[k] > result : r[k] < result) result = r[k];
        }
        break;
      }
      case Op::ArgMax:
      case Op::ArgMin: {
        if (len == 0)
          throw Error(fmt::format("evaluate: {} over an empty axis has no index", opName(n.op)));
        bool isMax = n.op == Op::ArgMax;
        int64_t best = 0;
        for (int64_t k = 1; k < len && !std::isnan(r[best]); ++k)
          if (std::isnan(r[k]) || (isMax ? r[k] > r[best] : r[k] < r[best])) best = k;
        out.i[o] = best;
        continue;
      }
      case Op::Var:
      case Op::Std: {
        // Two passes: the mean, then the squared deviations from it.
        double mean = accurateSum(r, len) / static_cast<double>(len);
        deviations.resize(static_cast<size_t>(len));
        for (int64_t k = 0; k < len; ++k) deviations[k] = (r[k] - mean) * (r[k] - mean);
        double ss = accurateSum(deviations.data(), len);
        double divisor = static_cast<double>(len - n.correction);
        double var = divisor <= 0.0 ? kNaN : ss / divisor;
        result = n.op == Op::Var ? var : std::sqrt(var);
        break;
      }
      default:
        throw Error(fmt::format("reference: {} is not a reduction", opName(n.op)));
    }
    out.f[o] = result;
  }
}

// The same for integer and bool input (sums and products wrap like int64).
void reduceIntRows(const Node& n, const std::vector<int64_t>& rows, int64_t len, int64_t numOut,
                   Values& out) {
  out.i.resize(numOut);
  for (int64_t o = 0; o < numOut; ++o) {
    const int64_t* r = rows.data() + o * len;
    int64_t result = 0;
    switch (n.op) {
      case Op::Sum:
        for (int64_t k = 0; k < len; ++k) result = wrapAdd(result, r[k]);
        break;
      case Op::Prod:
        result = 1;
        for (int64_t k = 0; k < len; ++k) result = wrapMul(result, r[k]);
        break;
      case Op::Max:
      case Op::Min:
        if (len == 0)
          throw Error(fmt::format("evaluate: {} of {} over an empty axis has no value",
                                  opName(n.op), dtypeName(n.dtype)));
        result = r[0];
        for (int64_t k = 1; k < len; ++k)
          result = n.op == Op::Max ? std::max(result, r[k]) : std::min(result, r[k]);
        break;
      case Op::ArgMax:
      case Op::ArgMin:
        if (len == 0)
          throw Error(fmt::format("evaluate: {} over an empty axis has no index", opName(n.op)));
        for (int64_t k = 1; k < len; ++k)
          if (n.op == Op::ArgMax ? r[k] > r[result] : r[k] < r[result]) result = k;
        break;
      default:
        throw Error(fmt::format("reference: {} of an integer input is not defined", opName(n.op)));
    }
    out.i[o] = wrapToDType(result, n.dtype);
  }
}

void Evaluator::evalReduction(int id) {
  const Node& n = node(id);
  const int x = n.inputs[0];
  const std::vector<int64_t>& inShape = shapes_[x];
  const std::vector<int64_t> inStrides = denseStrides(inShape);

  // View the input with the kept axes first and the reduced axes last, so
  // each output element owns one contiguous row of `len` values.
  std::vector<int64_t> shape, strides;
  int64_t len = 1;
  for (size_t d = 0; d < inShape.size(); ++d)
    if (!std::count(n.axes.begin(), n.axes.end(), static_cast<int64_t>(d))) {
      shape.push_back(inShape[d]);
      strides.push_back(inStrides[d]);
    }
  for (int64_t d : n.axes) {
    shape.push_back(inShape[d]);
    strides.push_back(inStrides[d]);
    len *= inShape[d];
  }
  const int64_t numOut = count(id);
  if (numOut * len != product(inShape))
    throw Error(fmt::format("reference: {} node shape {} does not match its input {}",
                            opName(n.op), dimsToString(shapes_[id]), dimsToString(inShape)));

  // Mean, var and std of integers (not built by the DSL today) use doubles.
  bool floatPath = holdsFloat(x) || isFloat(n.dtype);
  if (floatPath) {
    Scratch<double> converted(fpool_), rows(fpool_);
    std::vector<double>& r = rows.borrow(static_cast<size_t>(numOut * len));
    gatherStrided(asDoubles(x, converted), 0, strides, shape, r);
    reduceFloatRows(n, r, len, numOut, vals_[id]);
  } else {
    Scratch<int64_t> rows(ipool_);
    std::vector<int64_t>& r = rows.borrow(static_cast<size_t>(numOut * len));
    gatherStrided(vals_[x].i, 0, strides, shape, r);
    reduceIntRows(n, r, len, numOut, vals_[id]);
  }
}

void Evaluator::evalMatmul(int id) {
  const Node& n = node(id);
  const int a = n.inputs[0], b = n.inputs[1];
  const std::vector<int64_t>& as = shapes_[a];
  const std::vector<int64_t>& bs = shapes_[b];
  const std::vector<int64_t>& os = shapes_[id];
  const size_t ra = as.size(), ro = os.size();
  const int64_t M = os[ro - 2], N = os[ro - 1];
  const int64_t K = n.transA ? as[ra - 2] : as[ra - 1];
  // Element (m, k) of a and (k, n) of b inside one matrix, either layout.
  const int64_t amStride = n.transA ? 1 : K, akStride = n.transA ? M : 1;
  const int64_t bkStride = n.transB ? 1 : N, bnStride = n.transB ? K : 1;

  std::vector<int64_t> batch(os.begin(), os.end() - 2);
  std::vector<int64_t> aBatch(as.begin(), as.end() - 2), bBatch(bs.begin(), bs.end() - 2);
  std::vector<int64_t> aStr = broadcastStrides(aBatch, batch), bStr = broadcastStrides(bBatch, batch);
  for (int64_t& s : aStr) s *= M * K;  // one batch step skips a whole matrix
  for (int64_t& s : bStr) s *= K * N;

  Scratch<double> sa(fpool_), sb(fpool_);
  const std::vector<double>* avp = &asDoubles(a, sa);
  const std::vector<double>* bvp = &asDoubles(b, sb);
  // tf32: each operand rounded to 10 mantissa bits (to nearest, ties away
  // from zero: cvt.rna.tf32.f32), then multiplied exactly.
  std::vector<double> ta, tb;
  if (n.tf32) {
    auto round = [](double v) {
      float f = static_cast<float>(v);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;  // not inf or NaN
      std::memcpy(&f, &u, 4);
      return static_cast<double>(f);
    };
    ta = *avp;
    tb = *bvp;
    for (double& v : ta) v = round(v);
    for (double& v : tb) v = round(v);
    avp = &ta;
    bvp = &tb;
  }
  const std::vector<double>& av = *avp;
  const std::vector<double>& bv = *bvp;
  std::vector<double>& out = vals_[id].f;
  out.assign(count(id), 0.0);
  std::vector<double> acc(N);
  const int64_t numBatches = product(batch);
  for (int64_t bi = 0; bi < numBatches; ++bi) {
    int64_t aOff = 0, bOff = 0, rest = bi;
    for (size_t d = batch.size(); d-- > 0;) {
      int64_t idx = rest % batch[d];
      rest /= batch[d];
      aOff += idx * aStr[d];
      bOff += idx * bStr[d];
    }
    // fp64 accumulation over k in increasing order for every (m, n).
    for (int64_t m = 0; m < M; ++m) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t k = 0; k < K; ++k) {
        double x = av[aOff + m * amStride + k * akStride];
        const double* brow = bv.data() + bOff + k * bkStride;
        for (int64_t j = 0; j < N; ++j) acc[j] += x * brow[j * bnStride];
      }
      std::copy(acc.begin(), acc.end(), out.begin() + (bi * M + m) * N);
    }
  }
}

void Evaluator::evalView(int id) {
  const Node& n = node(id);
  const int x = n.inputs[0];
  const std::vector<int64_t>& inShape = shapes_[x];
  const std::vector<int64_t>& outShape = shapes_[id];
  int64_t offset = 0;
  std::vector<int64_t> strides;
  switch (n.op) {
    case Op::Reshape:  // row-major order is unchanged
      if (product(inShape) != product(outShape))
        throw Error(fmt::format("reference: reshape of {} to {} changes the element count",
                                dimsToString(inShape), dimsToString(outShape)));
      strides = denseStrides(outShape);
      break;
    case Op::Expand:
      strides = broadcastStrides(inShape, outShape);
      break;
    case Op::Permute: {
      std::vector<int64_t> dense = denseStrides(inShape);
      for (int64_t axis : n.axes) strides.push_back(dense[axis]);
      break;
    }
    case Op::Slice: {
      strides = denseStrides(inShape);
      offset = n.start * strides[n.axis];
      strides[n.axis] *= n.step;
      break;
    }
    default:
      throw Error(fmt::format("reference: {} is not a view", opName(n.op)));
  }
  if (holdsFloat(x)) gatherStrided(vals_[x].f, offset, strides, outShape, vals_[id].f);
  else gatherStrided(vals_[x].i, offset, strides, outShape, vals_[id].i);
}

}  // namespace

// ------------------------------------------------------------ entry point

std::vector<EvalOutput> evaluate(const Graph& g, const EvalInputs& inputs) {
  return Evaluator(g, inputs).run();
}

}  // namespace kiln
