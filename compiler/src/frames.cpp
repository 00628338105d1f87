#include "frames.h"

namespace kiln::compiler {

std::string frameKey(const Frame& f) {
  std::string k;
  for (const Axis& a : f) k += std::to_string(a.src) + "," + std::to_string(a.coeff) + "," + std::to_string(a.off) + ";";
  return k;
}

Frame identityFrame(int rank) {
  Frame f(static_cast<size_t>(rank));
  for (int k = 0; k < rank; ++k) f[k] = Axis{k, 1, 0};
  return f;
}

bool isUnit(const Dim& d) { return d.isStatic() && d.size == 1; }

Frame broadcastFrame(const Frame& consumerFrame, const Shape& consumer, const Shape& operand) {
  Frame f(operand.size());
  size_t off = consumer.size() - operand.size();
  for (size_t j = 0; j < operand.size(); ++j)
    f[j] = (isUnit(operand[j]) && !isUnit(consumer[j + off])) ? Axis{} : consumerFrame[j + off];
  return f;
}

Frame operandFrame(const Graph& g, const Node& n, size_t operand, const Frame& frame) {
  const Node& x = g.node(n.inputs[operand]);
  switch (n.op) {
    case Op::Permute: {
      Frame f(x.shape.size());
      for (size_t k = 0; k < n.axes.size(); ++k) f[n.axes[k]] = frame[k];
      return f;
    }
    case Op::Slice: {
      Frame f = frame;
      Axis& a = f[n.axis];
      a.coeff *= n.step;
      a.off = a.off * n.step + n.start;
      return f;
    }
    case Op::Reshape: {
      // Only reshapes that add or drop unit dims map dim to dim; schedules
      // read other reshapes of inputs through accessOf (a reshaped input).
      Frame f(x.shape.size());
      size_t j = 0;
      for (size_t k = 0; k < n.shape.size(); ++k) {
        if (isUnit(n.shape[k])) continue;
        while (j < x.shape.size() && isUnit(x.shape[j])) ++j;
        f[j++] = frame[k];
      }
      return f;
    }
    default:  // elementwise operands and expand broadcast
      return broadcastFrame(frame, n.shape, x.shape);
  }
}

bool perRowFrame(const Shape& s, const Shape& domain, Frame& out) {
  const int k = static_cast<int>(domain.size());
  Frame f(s.size());
  int j = 0;
  for (size_t a = 0; a < s.size(); ++a) {
    if (isUnit(s[a])) continue;
    while (j + 1 < k && isUnit(domain[static_cast<size_t>(j)])) ++j;
    if (j + 1 >= k || !(domain[static_cast<size_t>(j)] == s[a])) return false;
    f[a] = Axis{j++, 1, 0};
  }
  out = std::move(f);
  return true;
}

bool readsOwnRow(const Node& r, const Shape& operand, const Frame& frame, const Shape& domain) {
  const int k = static_cast<int>(domain.size());
  bool ok = operand == domain;
  for (int j = 0; ok && j + 1 < k; ++j) ok = frame[j] == Axis{j, 1, 0} || isUnit(domain[j]);
  if (ok && r.keepdim) ok = frame[k - 1].src < 0 || isUnit(domain[k - 1]);
  return ok;
}

bool unitReshape(const Node& n, const Node& x) {
  Shape a, b;
  for (const Dim& d : n.shape)
    if (!isUnit(d)) a.push_back(d);
  for (const Dim& d : x.shape)
    if (!isUnit(d)) b.push_back(d);
  return a == b;
}

std::string Access::key() const {
  std::string k = std::to_string(node) + ":" + base.str();
  for (const Poly& p : strides) k += "|" + p.str();
  return k;
}

Access accessOf(int inputNode, const Shape& viewShape, const Frame& frame, int rank) {
  Access a;
  a.node = inputNode;
  a.strides.assign(static_cast<size_t>(rank), Poly());
  std::vector<Poly> rm = rowMajorStrides(viewShape);
  for (size_t j = 0; j < viewShape.size(); ++j) {
    const Axis& ax = frame[j];
    a.base = a.base + rm[j] * ax.off;
    if (ax.src >= 0) a.strides[ax.src] = a.strides[ax.src] + rm[j] * ax.coeff;
  }
  return a;
}

bool directAccess(const Graph& g, int id, const Frame& f, int rank, Access& out) {
  const Node& n = g.node(id);
  if (n.op == Op::Input) {
    out = accessOf(id, n.shape, f, rank);
    return true;
  }
  if (n.op == Op::Reshape && g.node(n.inputs[0]).op == Op::Input && !unitReshape(n, g.node(n.inputs[0]))) {
    out = accessOf(n.inputs[0], n.shape, f, rank);
    return true;
  }
  return false;
}

uint64_t AxisDependence::of(int id, const Frame& f) {
  std::string key = std::to_string(id) + "@" + frameKey(f);
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  const Node& n = g_.node(id);
  uint64_t m = 0;
  Access a;
  if (directAccess(g_, id, f, rank_, a)) {
    for (int k = 0; k < rank_; ++k)
      if (!a.strides[k].isZero()) m |= uint64_t{1} << k;
  } else if (n.op == Op::Iota) {
    const Axis& ax = f[n.axis];
    if (ax.src >= 0 && ax.coeff != 0) m = uint64_t{1} << ax.src;
  } else if (opClass(n.op) == OpClass::Reduction) {
    m = reductionMask_;
  } else {
    for (size_t i = 0; i < n.inputs.size(); ++i) m |= of(n.inputs[i], operandFrame(g_, n, i, f));
  }
  memo_[key] = m;
  return m;
}

int columnPartialOperand(const Graph& g, int id) {
  const Node& n = g.node(id);
  if (n.op != Op::Sum || n.dtype != DType::F32 || n.keepdim || n.axes.size() != 1 || n.axes[0] != 1 ||
      n.shape.size() != 2)
    return -1;
  const Node& r = g.node(n.inputs[0]);
  if (r.op != Op::Reshape || r.shape.size() != 3) return -1;
  const Node& e = g.node(r.inputs[0]);
  if (e.shape.size() != 2 || !e.shape[0].isStatic() || !r.shape[0].isStatic() || !r.shape[1].isStatic() ||
      !(r.shape[2] == e.shape[1]) || r.shape[0].size * r.shape[1].size != e.shape[0].size)
    return -1;
  return r.inputs[0];
}

bool hasColumnPartials(const Graph& g) {
  for (const GraphOutput& o : g.outputs())
    if (columnPartialOperand(g, o.node) >= 0) return true;
  return false;
}

}  // namespace kiln::compiler
