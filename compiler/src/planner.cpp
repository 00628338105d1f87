#include "planner.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "cuda_element.h"
#include "frames.h"
#include "matmul_sm90.h"
#include "kiln/dsl/ops.h"
#include "kiln/dsl/text.h"

namespace kiln::compiler {

namespace {

bool isReduction(Op op) { return opClass(op) == OpClass::Reduction; }

// A reduction already in the form the row schedule takes: over the last
// axis of an operand of rank >= 1.
bool innerForm(const Graph& g, const Node& n) {
  const Node& x = g.node(n.inputs[0]);
  return x.rank() >= 1 && n.axes.size() == 1 && n.axes[0] == x.rank() - 1;
}

// Rebuilds g in canonical order: parameters are declared again as they
// are; every other node reaches `rewrite` as a copy whose inputs are
// already ids in ng, and `rewrite` adds what stands for it to ng and
// returns that id. Outputs keep their names.
Graph rewriteNodes(const Graph& g, const std::function<int(Graph& ng, int id, Node c)>& rewrite) {
  Graph ng;
  std::map<int, int> map;
  for (int id : g.canonicalOrder()) {
    const Node& n = g.node(id);
    if (n.op == Op::Input) {
      map[id] = ng.input(n.name, n.dtype, n.shape).id();
    } else if (n.op == Op::Scalar) {
      map[id] = ng.scalar(n.name, n.dtype).id();
    } else {
      Node c = n;
      for (int& i : c.inputs) i = map.at(i);
      map[id] = rewrite(ng, id, std::move(c));
    }
  }
  for (const GraphOutput& o : g.outputs()) ng.output(o.name, ng.tensor(map.at(o.node)));
  return ng;
}

// Node `input` of `ng` reshaped to `shape` (its dtype): the planner's
// rewrites make every reshape this way.
int addReshape(Graph& ng, int input, const Shape& shape) {
  Node r;
  r.op = Op::Reshape;
  r.dtype = ng.node(input).dtype;
  r.shape = shape;
  r.inputs = {input};
  return ng.addNode(std::move(r));
}

}  // namespace

// var/std over several axes, one of them dynamic (no reshape merges them
// into one row): the law of total variance over groups of equal size, one
// axis at a time from the last, in f32 — the population variance over axes
// A + [a] is the mean over A of var(x, a) plus the population variance over
// A of mean(x, a) — then scaled by N / max(0, N - correction) as torch does,
// N counted as a sum of ones over the axes (exact to 2^24; past that the
// factor is off by about 1e-7 of 1/N). Every step reduces one axis, which
// the caller's next pass normalizes (a reduction over several axes would
// need two more passes).
static int varOverAxes(Graph& ng, const Node& n, int operand) {
  // Sums and means over several axes one axis at a time, the last first
  // (equal groups: a mean of means is the mean), each of which the caller's
  // next pass normalizes.
  auto eachAxis = [](Tensor t, std::vector<int64_t> axes, bool isMean) {
    std::sort(axes.begin(), axes.end());
    for (auto a = axes.rbegin(); a != axes.rend(); ++a) t = isMean ? mean(t, Axes(*a), true) : sum(t, Axes(*a), true);
    return t;
  };
  Tensor cur = ng.tensor(operand);
  if (cur.dtype() != DType::F32) cur = cast(cur, DType::F32);
  std::vector<int64_t> rest = n.axes;
  std::sort(rest.begin(), rest.end());
  std::optional<Tensor> total;
  while (rest.size() > 1) {
    const int64_t a = rest.back();
    rest.pop_back();
    const Tensor within = eachAxis(var(cur, Axes(a), 0, true), rest, true);
    total = total ? *total + within : within;
    cur = mean(cur, Axes(a), true);
  }
  Tensor v = *total + var(cur, Axes(rest), 0, true);
  if (n.correction != 0) {
    // Ones as an expression of x (x's row kernels count them alongside).
    const Tensor one = cast(isnan(ng.tensor(operand)), DType::F32) * 0.0 + 1.0;
    const Tensor count = eachAxis(one, n.axes, false);
    v = v * (count / maximum(count - static_cast<double>(n.correction), 0.0));
  }
  if (n.op == Op::Std) v = sqrt(v);
  if (v.dtype() != n.dtype) v = cast(v, n.dtype);
  return v.shape() == n.shape ? v.id() : addReshape(ng, v.id(), n.shape);
}

Graph normalizeReductions(const Graph& g) {
  return rewriteNodes(g, [&](Graph& ng, int id, Node c) {
    const Node& n = g.node(id);
    if (!isReduction(n.op) || innerForm(g, n)) return ng.addNode(std::move(c));
    // Rewrite: operand → permute (kept axes first, reduced axes last) →
    // reshape (merge the reduced axes) → reduce the last axis → reshape to
    // the original result shape.
    const Node& x = g.node(n.inputs[0]);
    int cur = c.inputs[0];
    Shape kept, reducedDims;
    std::vector<int64_t> perm;
    for (int a = 0; a < x.rank(); ++a)
      if (!std::count(n.axes.begin(), n.axes.end(), a)) {
        perm.push_back(a);
        kept.push_back(x.shape[a]);
      }
    for (int64_t a : n.axes) {
      perm.push_back(a);
      reducedDims.push_back(x.shape[a]);
    }
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int64_t>(i);
    // A permute that moves only unit dims keeps the elements' order: a
    // reshape (the row form then reads the operand as it is, not through
    // the column form; a column-form var of a [1, 1] operand did not
    // compile).
    std::vector<int64_t> moved;
    for (int64_t a : perm)
      if (!isUnit(x.shape[a])) moved.push_back(a);
    const bool orderKept = std::is_sorted(moved.begin(), moved.end());
    if (!identity) {
      Node p;
      p.op = Op::Permute;
      p.dtype = x.dtype;
      p.axes = perm;
      for (int64_t a : perm) p.shape.push_back(x.shape[a]);
      p.inputs = {cur};
      cur = orderKept ? addReshape(ng, cur, p.shape) : ng.addNode(std::move(p));
    }
    bool dynamicReduced = false;
    for (const Dim& d : reducedDims) dynamicReduced = dynamicReduced || d.isDynamic();
    if (reducedDims.size() > 1 && dynamicReduced &&
        (n.op == Op::Sum || n.op == Op::Mean || n.op == Op::Max || n.op == Op::Min || n.op == Op::Prod)) {
      // Rows of equal length: reducing one axis at a time (the last first)
      // gives the same value (a mean of equal-size means is the mean).
      int prev = c.inputs[0];
      Shape shape = x.shape;
      std::vector<int64_t> axes = n.axes;
      for (auto a = axes.rbegin(); a != axes.rend(); ++a) {
        Node step = n;
        step.inputs = {prev};
        step.axes = {*a};
        step.keepdim = true;
        shape[*a] = Dim(int64_t{1});
        step.shape = shape;
        prev = ng.addNode(std::move(step));  // planGraph normalizes each step again
      }
      return addReshape(ng, prev, n.shape);
    }
    if (reducedDims.size() > 1 && dynamicReduced && (n.op == Op::Var || n.op == Op::Std))
      return varOverAxes(ng, n, c.inputs[0]);
    if (reducedDims.size() != 1) {
      int64_t len = 1;
      for (const Dim& d : reducedDims) {
        if (d.isDynamic())
          throw Error("kiln: compile: " + std::string(opName(n.op)) + " over several axes including the dynamic dim '" +
                      d.name + "' of " + typeToString(x.dtype, x.shape) +
                      " cannot be compiled yet: reduce one axis at a time, or bind the dim");
        len *= d.size;
      }
      Shape merged = kept;
      merged.push_back(Dim(len));
      cur = addReshape(ng, cur, merged);
    }
    Node red = n;
    red.inputs = {cur};
    red.axes = {static_cast<int64_t>(kept.size())};
    red.keepdim = false;
    red.shape = kept;
    cur = ng.addNode(std::move(red));
    if (!(kept == n.shape)) cur = addReshape(ng, cur, n.shape);
    return cur;
  });
}

namespace {

// Equal nodes become one (common subexpressions): the DSL builds softmax and
// log_softmax of the same x with a max, exps and a sum each, and a row
// kernel would compute both statistics. Parameters stay as they are, and a
// graph output's node is never merged (each output keeps its own node).
Graph mergeEqualNodes(const Graph& g) {
  std::set<int> outputs;
  for (const GraphOutput& o : g.outputs()) outputs.insert(o.node);
  std::map<std::string, int> seen;  // a node's description -> its id in ng
  return rewriteNodes(g, [&](Graph& ng, int id, Node c) {
    std::ostringstream key;
    key.precision(17);
    key << static_cast<int>(c.op) << '|' << static_cast<int>(c.dtype) << '|' << shapeToString(c.shape) << '|' << c.weak
        << '|' << c.fvalue << '|' << c.ivalue << '|' << c.axis << '|' << c.keepdim << '|' << c.correction << '|'
        << c.transA << c.transB << c.tf32 << '|' << c.start << ',' << c.end << ',' << c.step << "|in";
    for (int i : c.inputs) key << ' ' << i;
    key << "|ax";
    for (int64_t a : c.axes) key << ' ' << a;
    if (outputs.count(id)) return ng.addNode(std::move(c));
    auto [it, fresh] = seen.emplace(key.str(), -1);
    if (fresh) it->second = ng.addNode(std::move(c));
    return it->second;
  });
}

// A reshape of a computed value is written to memory first (a kernel reads
// it through other index math than the value's own): the whole tensor's
// sum of x*x would run x*x as a pointwise kernel, then the reduction over
// its copy. Where the value is an elementwise expression of inputs of its
// own shape (and of values of unit shape, broadcast alike to any shape),
// reshaping the inputs gives the same values: sinkable() says whether it
// is one, sinkReshapes() moves every such reshape onto the inputs, so the
// kernel reading the reshape computes the expression in its loads.
bool allUnit(const Shape& s) {
  for (const Dim& d : s)
    if (!isUnit(d)) return false;
  return true;
}

// The axis a of `from` that `to` splits in two (to = from with from[a]
// replaced by two dims whose product it is), or -1.
int64_t splitAxisOf(const Shape& from, const Shape& to) {
  if (to.size() != from.size() + 1) return -1;
  for (size_t a = 0; a < from.size(); ++a) {
    if (from[a] == to[a]) continue;
    if (!from[a].isStatic() || !to[a].isStatic() || !to[a + 1].isStatic() || to[a].size * to[a + 1].size != from[a].size)
      return -1;
    for (size_t i = a + 1; i < from.size(); ++i)
      if (!(from[i] == to[i + 1])) return -1;
    return static_cast<int64_t>(a);
  }
  return -1;
}

// Where an operand of shape `s`, broadcast into a value of shape `from`,
// meets the axis `a` that a split reshape of `from` splits: its own dim
// index (-1: the operand, right-aligned, has no dim there).
int64_t operandAxis(const Shape& s, const Shape& from, int64_t a) {
  return a - static_cast<int64_t>(from.size() - s.size());
}

// Each node is visited once (an expression that reuses its values, x*x of
// x*x of ..., would otherwise be walked once per path).
// `splitAxis` (>= 0): the reshape splits that axis of the value in two
// (parts); then an operand broadcast along it (a column statistic reused
// by the next column reduction, softmax's max in exp(x - max) over axis 0)
// is reshaped too: a unit dim more there, a view.
bool sinkable(const Graph& g, int id, int64_t splitAxis) {
  std::map<std::pair<int, int64_t>, bool> memo;
  std::function<bool(int, int64_t)> walk = [&](int at, int64_t split) {
    if (auto it = memo.find({at, split}); it != memo.end()) return it->second;
    const Node& n = g.node(at);
    bool ok = n.op == Op::Input || n.op == Op::Constant;
    if (n.op == Op::Reshape) ok = walk(n.inputs[0], -1);  // below it, the split axis is another
    else if (isElementwise(n.op)) {
      ok = true;
      for (int i : n.inputs) {
        const Node& x = g.node(i);
        if (x.shape == n.shape) {
          ok = ok && walk(i, split);
          continue;
        }
        // An operand broadcast along some axes is not a reshape of an input;
        // it is reshaped as it is where it does not vary along the split axis.
        const int64_t j = split >= 0 ? operandAxis(x.shape, n.shape, split) : -2;
        const bool alongSplit = split >= 0 && (j < 0 || isUnit(x.shape[static_cast<size_t>(j)]));
        ok = ok && (allUnit(x.shape) || alongSplit);
      }
    }
    return memo[{at, split}] = ok;
  };
  return walk(id, splitAxis);
}

Graph sinkReshapes(const Graph& g) {
  std::map<std::pair<int, std::string>, int> memo;  // (node in ng, shape) -> reshaped
  std::function<int(Graph&, int, const Shape&)> sink = [&](Graph& ng, int id, const Shape& to) {
    auto key = std::make_pair(id, shapeToString(to));
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    Node c = ng.node(id);
    int out;
    if (c.op == Op::Reshape) {
      out = sink(ng, c.inputs[0], to);
    } else if (c.shape == to) {
      out = id;
    } else if (c.op == Op::Input) {
      out = addReshape(ng, id, to);
    } else {
      const Shape from = c.shape;
      const int64_t a = splitAxisOf(from, to);
      c.shape = to;
      for (int& i : c.inputs) {
        const Shape s = ng.node(i).shape;
        if (s == from) {
          i = sink(ng, i, to);
          continue;
        }
        // A unit-shaped operand of more dims than the result (a whole
        // tensor's statistic, keepdim, in a merged view): as many unit dims
        // as the result has (a view).
        if (allUnit(s) && s.size() > to.size()) {
          i = addReshape(ng, i, Shape(to.size(), Dim(1)));
          continue;
        }
        // Broadcast along the split axis: a unit dim more there (a view).
        const int64_t j = a >= 0 ? operandAxis(s, from, a) : -1;
        if (j < 0) continue;
        Shape unit = s;
        unit.insert(unit.begin() + j, Dim(1));
        i = addReshape(ng, i, unit);
      }
      out = ng.addNode(std::move(c));
    }
    return memo[key] = out;
  };
  return rewriteNodes(g, [&](Graph& ng, int, Node c) {
    if (c.op != Op::Reshape) return ng.addNode(std::move(c));
    const Node& x = ng.node(c.inputs[0]);
    if (x.op == Op::Input || unitReshape(c, x) ||
        !sinkable(ng, c.inputs[0], splitAxisOf(x.shape, c.shape)))
      return ng.addNode(std::move(c));
    return sink(ng, c.inputs[0], c.shape);
  });
}

// A terminal reduction over few long rows (a whole tensor's sum, say) ran
// on one block per row. splitLongReductions splits each row into S parts:
// the parts reduce as many rows (in f32 for floats: partial sums keep the
// accumulation type), then each row's S partials reduce again, in order
// (deterministic) — for one row the row kernel's grid tail, else a second
// kernel. Only sum, mean (of equal parts: the mean of the means), max, min,
// prod, argmax and argmin (argInParts), var and std (varInParts); only where nothing downstream broadcasts the result back over
// the row (softmax and the norms keep their single pass) and the operand
// does not come from another reduction (cross_entropy's mean stays a tail).
constexpr int64_t kSplitMaxRows = 64;       // rows at most (more fill the GPU)
constexpr int64_t kSplitMinPart = 4096;     // values per part at least
constexpr int64_t kSplitTargetRows = 4096;  // rows x parts at most
constexpr int64_t kSplitMinWritten = 262144;  // values per row at least where the parts are written first

bool splittable(Op op) {
  return op == Op::Sum || op == Op::Mean || op == Op::Max || op == Op::Min || op == Op::Prod || op == Op::ArgMax ||
         op == Op::ArgMin || op == Op::Var || op == Op::Std;
}

// var/std over parts of P values each, S parts (N = S·P values): each
// part's mean m and variance q (correction 0; one pass), then Chan's merge
// of equal counts: the mean of squared deviations is mean(q) + mean((m -
// M)²) with M = mean(m), scaled by N / (N - correction). In f32, cast to
// n's dtype.
int varInParts(Graph& ng, const Node& n, int cur, int64_t outer, int64_t inner) {
  Tensor xp = ng.tensor(cur);
  if (xp.dtype() != DType::F32) xp = cast(xp, DType::F32);
  const int64_t N = ng.node(cur).shape[static_cast<size_t>(outer)].size * ng.node(cur).shape[static_cast<size_t>(inner)].size;
  const Tensor m = mean(xp, {inner});
  const Tensor q = var(xp, {inner}, 0);
  const Tensor d = m - mean(m, {outer}, true);
  Tensor v = mean(q, {outer}, n.keepdim) + mean(d * d, {outer}, n.keepdim);
  // torch divides by max(0, N - correction): inf (0/0 = NaN) past N.
  if (n.correction != 0) v = v * (static_cast<double>(N) / static_cast<double>(std::max<int64_t>(0, N - n.correction)));
  if (n.op == Op::Std) v = sqrt(v);
  return (v.dtype() == n.dtype ? v : cast(v, n.dtype)).id();
}

// argmax/argmin over parts: each part's extreme and its index in the part
// (one kernel), then the part holding the first extreme of the extremes
// (argmax over the parts: NaN first, ties to the first part) and the index
// there, picked as cross_entropy picks its logit, plus the part's offset.
// Within a part the index is the first one too, so the result is the first
// index of the extreme, as PyTorch's.
int argInParts(Graph& ng, const Node& n, int cur, int64_t outer, int64_t inner) {
  const bool isMax = n.op == Op::ArgMax;
  const Tensor parts = ng.tensor(cur);
  const int64_t partLen = ng.node(cur).shape[static_cast<size_t>(inner)].size;
  const Tensor ext = isMax ? max(parts, {inner}) : min(parts, {inner});
  const Tensor at = isMax ? argmax(parts, inner) : argmin(parts, inner);
  const Tensor which = isMax ? argmax(ext, outer, true) : argmin(ext, outer, true);
  const Tensor part = iota(ng, ng.node(at.id()).shape, outer);
  const Tensor index = where(part == which, at + part * partLen, int64_t{0});
  return sum(index, {outer}, n.keepdim).id();
}

// Reduction n over its operand reshaped into parts (node `cur` of ng): over
// each part's values (axis `inner`), then over the parts (axis `outer`,
// before `inner`) into n's shape. Floats sum, average and multiply their
// parts in f32, then cast to n's dtype.
int reduceInParts(Graph& ng, const Node& n, int cur, int64_t outer, int64_t inner) {
  if (n.op == Op::ArgMax || n.op == Op::ArgMin) return argInParts(ng, n, cur, outer, inner);
  if (n.op == Op::Var || n.op == Op::Std) return varInParts(ng, n, cur, outer, inner);
  const bool widen = isFloat(n.dtype) && n.op != Op::Max && n.op != Op::Min;
  const DType acc = widen ? DType::F32 : n.dtype;
  auto castTo = [&](int v, DType t) {
    Node cast;
    cast.op = Op::Cast;
    cast.dtype = t;
    cast.shape = ng.node(v).shape;
    cast.inputs = {v};
    return ng.addNode(std::move(cast));
  };
  if (widen && ng.node(cur).dtype != DType::F32) cur = castTo(cur, DType::F32);
  Node first = n;
  first.dtype = acc;
  first.inputs = {cur};
  first.axes = {inner};
  first.keepdim = false;
  first.shape = ng.node(cur).shape;
  first.shape.erase(first.shape.begin() + inner);
  Node second = n;
  second.dtype = acc;
  second.inputs = {ng.addNode(std::move(first))};
  second.axes = {outer};
  second.shape = n.shape;
  cur = ng.addNode(std::move(second));
  return acc == n.dtype ? cur : castTo(cur, n.dtype);
}

// The parts for a reduction over rows of N values, R rows: 1 where it
// does not split.
int64_t splitParts(int64_t R, int64_t N) {
  if (R > kSplitMaxRows) return 1;
  int64_t S = 1;
  while (N % (2 * S) == 0 && N / (2 * S) >= kSplitMinPart && R * 2 * S <= kSplitTargetRows) S *= 2;
  return S;
}

// Whether a node downstream of `id` has the shape `domain` (a reduction's
// result broadcast back over its rows): the split passes leave those alone.
class Downstream {
 public:
  explicit Downstream(const Graph& g) : g_(g), users_(static_cast<size_t>(g.numNodes())) {
    for (int id = 0; id < g.numNodes(); ++id)
      for (int i : g.node(id).inputs) users_[static_cast<size_t>(i)].push_back(id);
  }
  bool reaches(int id, const Shape& domain) const {
    std::vector<char> seen(users_.size(), 0);
    return reaches(id, domain, seen);
  }

 private:
  bool reaches(int id, const Shape& domain, std::vector<char>& seen) const {
    for (int u : users_[static_cast<size_t>(id)]) {
      if (seen[static_cast<size_t>(u)]++) continue;
      if (g_.node(u).shape == domain || reaches(u, domain, seen)) return true;
    }
    return false;
  }
  const Graph& g_;
  std::vector<std::vector<int>> users_;
};

Graph splitLongReductions(const Graph& g) {
  const int count = g.numNodes();
  const Downstream downstream(g);
  std::function<bool(int, std::vector<char>&)> fromReduction = [&](int id, std::vector<char>& seen) {
    if (seen[static_cast<size_t>(id)]++) return false;
    const Node& n = g.node(id);
    if (isReduction(n.op) || n.op == Op::Matmul) return true;
    for (int i : n.inputs)
      if (fromReduction(i, seen)) return true;
    return false;
  };
  return rewriteNodes(g, [&](Graph& ng, int id, Node c) {
    const Node& n = g.node(id);
    int64_t S = 1;
    if (isReduction(n.op) && splittable(n.op) && innerForm(g, n)) {
      const Node& x = g.node(n.inputs[0]);
      int64_t R = 1;
      bool fixed = x.shape.back().isStatic();
      for (size_t a = 0; a + 1 < x.shape.size(); ++a) {
        fixed = fixed && x.shape[a].isStatic();
        if (x.shape[a].isStatic()) R *= x.shape[a].size;
      }
      std::vector<char> up(static_cast<size_t>(count), 0);
      int under = n.inputs[0];
      while (g.node(under).op == Op::Reshape) under = g.node(under).inputs[0];
      // Parts of an operand that is no elementwise expression of inputs
      // (cross_entropy's pick of the target's logit reads an iota) would be
      // written to memory first, by a kernel of its own: worth it only for
      // rows that one block would take long to read (a whole tensor).
      if (fixed && (S = splitParts(R, x.shape.back().size)) > 1 &&
          (downstream.reaches(id, x.shape) || fromReduction(n.inputs[0], up) ||
           (!sinkable(g, under, -1) && x.shape.back().size < kSplitMinWritten)))
        S = 1;
    }
    if (S == 1) return ng.addNode(std::move(c));
    const Node& x = g.node(n.inputs[0]);
    const int64_t N = x.shape.back().size;
    // The parts as a reshape of the operand (of what a reshape reshapes:
    // a reshape of a computed reshape would be written to memory first).
    int cur = c.inputs[0];
    while (ng.node(cur).op == Op::Reshape) cur = ng.node(cur).inputs[0];
    Shape parts(x.shape.begin(), x.shape.end() - 1);
    parts.push_back(Dim(S));
    Shape split = parts;
    split.push_back(Dim(N / S));
    return reduceInParts(ng, n, addReshape(ng, cur, split), static_cast<int64_t>(parts.size()) - 1,
                         static_cast<int64_t>(parts.size()));
  });
}

// A reduction over a non-last axis of an input (a column sum) runs as rows
// of a permuted view, one thread per row (coalesced across the warp) —
// only as many threads as outputs. splitColumnReductions splits the reduced
// axis into S parts first: x [.., R, ..] as [.., S, R/S, ..], reduced over
// R/S (outputs x S threads), then over S (a second kernel: a reduction of
// a reduction over other rows). The same ops as splitLongReductions; only
// inputs or elementwise expressions of them (sinkReshapes moves the reshape
// onto the inputs), where an operand may also be a value broadcast along
// the reduced axis (a column statistic: softmax's max in sum(exp(x - max))
// over axis 0, a norm's mean in its variance), static shapes. Unlike a
// row's, a column reduction's result broadcast back over x is read by a
// kernel of its own anyway (its rows are a permuted view), so results that
// are broadcast back split too: softmax or a norm over axis 0 become
// statistics in parts, then the output's pointwise kernel.
// A column reduction of inputs alone (no reduction in its operand's cone:
// its kernel has one pass) is left whole: the row schedule splits its rows
// across blocks itself (the column form's `split`, whose last block per
// tile of rows merges the parts), one kernel instead of two.
constexpr int64_t kColumnFewThreads = 65536;   // outputs below this split
constexpr int64_t kColumnMinPart = 256;        // values per part at least
constexpr int64_t kColumnMaxThreads = 262144;  // outputs x parts at most

// Whether a value's cone holds a reduction (each node visited once).
bool reducesBelow(const Graph& g, int id) {
  std::vector<signed char> memo(static_cast<size_t>(g.numNodes()), -1);
  std::function<bool(int)> walk = [&](int at) {
    signed char& m = memo[static_cast<size_t>(at)];
    if (m >= 0) return m == 1;
    const Node& n = g.node(at);
    bool found = isReduction(n.op);
    for (int i : n.inputs) found = found || walk(i);
    m = found ? 1 : 0;
    return found;
  };
  return walk(id);
}

Graph splitColumnReductions(const Graph& g) {
  return rewriteNodes(g, [&](Graph& ng, int id, Node c) {
    const Node& n = g.node(id);
    int64_t S = 1, a = -1;
    if (isReduction(n.op) && splittable(n.op) && n.axes.size() == 1 && reducesBelow(g, n.inputs[0]) &&
        sinkable(g, n.inputs[0], n.axes[0])) {
      const Node& x = g.node(n.inputs[0]);
      a = n.axes[0];
      bool fixed = true;
      int64_t others = 1;
      for (int i = 0; i < x.rank(); ++i) {
        fixed = fixed && x.shape[i].isStatic();
        if (i != a && x.shape[i].isStatic()) others *= x.shape[i].size;
      }
      if (fixed && a < x.rank() - 1 && others < kColumnFewThreads) {
        const int64_t R = x.shape[a].size;
        while (R % (2 * S) == 0 && R / (2 * S) >= kColumnMinPart && others * 2 * S <= kColumnMaxThreads) S *= 2;
      }
    }
    if (S == 1) return ng.addNode(std::move(c));
    const Node& x = g.node(n.inputs[0]);
    Shape parts;
    for (int i = 0; i < x.rank(); ++i) {
      if (i == a) {
        parts.push_back(Dim(S));
        parts.push_back(Dim(x.shape[i].size / S));
      } else {
        parts.push_back(x.shape[i]);
      }
    }
    return reduceInParts(ng, n, addReshape(ng, c.inputs[0], parts), a, a + 1);
  });
}

// Column sums that a row kernel computes as it goes (a norm's gradients:
// dweight = sum over rows of dy * xhat needs the rows' statistics, which the
// kernel computing dx holds): a column sum (normalized: a sum over the last
// axis of a transposed [R, D] value e) of an e that a row kernel over
// [R, D] computes becomes an f32 sum over the parts of P rows
// (columnPartialOperand: [P, D], the row kernel's blocks each summing one
// part in registers) and a sum over the parts ([D, P] transposed: a small
// column kernel). Instead of a second kernel reading e's inputs again (or a
// stored copy of e), the row kernel writes P x D values. Only where a
// thread's sums fit in registers (D <= kPartialMaxCols, static R with a
// divisor P of at least kPartialMinParts parts of kPartialMinRows rows), and
// where e's reductions are all row reductions over [R, D].
constexpr int64_t kPartialMaxCols = 8192;
constexpr int64_t kPartialMaxParts = 512;
constexpr int64_t kPartialMinParts = 16;
constexpr int64_t kPartialMinRows = 4;

Graph fuseColumnPartials(const Graph& g) {
  // A row reduction: over the last axis of a value that is not a
  // transposed view (a column sum's normalized form is one).
  auto rowReduction = [&](const Node& n) {
    return isReduction(n.op) && innerForm(g, n) && g.node(n.inputs[0]).op != Op::Permute;
  };
  // Per value e: whether every reduction in its cone is a row reduction
  // over e's shape (0: no; 1: yes, and there is one; 2: yes, none at all).
  auto rowsOnly = [&](int e) {
    const Shape& shape = g.node(e).shape;
    std::set<int> seen;
    bool any = false;
    std::function<bool(int)> walk = [&](int at) {
      if (!seen.insert(at).second) return true;
      const Node& n = g.node(at);
      if (isReduction(n.op)) {
        if (!(rowReduction(n) && g.node(n.inputs[0]).shape == shape)) return false;
        any = true;
      }
      for (int i : n.inputs)
        if (!walk(i)) return false;
      return true;
    };
    return walk(e) ? (any ? 1 : 2) : 0;
  };
  // The candidates: a column sum (normalized) of a static [R, D] value e of
  // at most kPartialMaxCols columns whose reductions are all row reductions
  // over e's shape -> e. Fused: those whose e needs a row statistic, and
  // those of a reduction-free e beside one of them over the same shape (a
  // norm's dbias beside its dweight).
  auto candidate = [&](int id) -> int {
    const Node& n = g.node(id);
    if (n.op != Op::Sum || n.dtype != DType::F32 || n.keepdim || n.axes != std::vector<int64_t>{1}) return -1;
    const Node& p = g.node(n.inputs[0]);
    if (p.op != Op::Permute || p.axes != std::vector<int64_t>{1, 0}) return -1;
    const Node& e = g.node(p.inputs[0]);
    if (e.rank() != 2 || !e.shape[0].isStatic() || !e.shape[1].isStatic() || e.shape[1].size > kPartialMaxCols) return -1;
    return p.inputs[0];
  };
  std::set<std::string> withStatistics;
  std::map<int, int> kind;  // candidate -> rowsOnly of its e
  for (int id = 0; id < g.numNodes(); ++id) {
    const int e = candidate(id);
    if (e < 0) continue;
    kind[id] = rowsOnly(e);
    if (kind[id] == 1) withStatistics.insert(shapeToString(g.node(e).shape));
  }
  return rewriteNodes(g, [&](Graph& ng, int id, Node c) {
    auto k = kind.find(id);
    if (k == kind.end() || k->second == 0 ||
        (k->second == 2 && !withStatistics.count(shapeToString(g.node(candidate(id)).shape))))
      return ng.addNode(std::move(c));
    const Node& e = g.node(candidate(id));
    const int64_t R = e.shape[0].size, D = e.shape[1].size;
    int64_t P = 0;
    for (int64_t q = std::min(kPartialMaxParts, R / kPartialMinRows); q >= kPartialMinParts && !P; --q)
      if (R % q == 0) P = q;
    if (!P) return ng.addNode(std::move(c));
    const int eNg = ng.node(c.inputs[0]).inputs[0];
    Node part;
    part.op = Op::Sum;
    part.dtype = DType::F32;
    part.inputs = {addReshape(ng, eNg, Shape{Dim(P), Dim(R / P), Dim(D)})};
    part.axes = {1};
    part.keepdim = false;
    part.shape = {Dim(P), Dim(D)};
    const int partId = ng.addNode(std::move(part));
    Node perm;
    perm.op = Op::Permute;
    perm.dtype = DType::F32;
    perm.axes = {1, 0};
    perm.shape = {Dim(D), Dim(P)};
    perm.inputs = {partId};
    c.inputs = {ng.addNode(std::move(perm))};
    return ng.addNode(std::move(c));
  });
}

// Copies into `sg` the nodes of `g` a kernel computes (`computes`: graph
// parameters it reads, and the nodes it computes, in `order`) and the values
// it reads from other kernels (`reads`: node and tensor name, each an input
// of sg): parameters first in declaration order, then the reads in the
// order given, so a kernel's signature is stable. Returns g's ids → sg's.
std::map<int, int> copyKernelNodes(Graph& sg, const Graph& g, const std::vector<int>& order,
                                   const std::function<bool(int)>& computes,
                                   const std::vector<std::pair<int, std::string>>& reads) {
  std::map<int, int> map;
  for (int p : g.params())
    if (computes(p)) {
      const Node& n = g.node(p);
      map[p] = n.op == Op::Input ? sg.input(n.name, n.dtype, n.shape).id() : sg.scalar(n.name, n.dtype).id();
    }
  for (const auto& [id, name] : reads) map[id] = sg.input(name, g.node(id).dtype, g.node(id).shape).id();
  for (int id : order) {
    if (!computes(id) || map.count(id)) continue;
    Node c = g.node(id);
    for (int& i : c.inputs) i = map.at(i);
    map[id] = sg.addNode(std::move(c));
  }
  return map;
}

// How a plan names what it adds: its workspace tensors (prefix + a number)
// and its kernels (numbered from firstKernel in the explanation). A graph
// with matmuls is planned in stages (planAroundMatmuls), each stage's plan
// appended to the last: its names must not meet theirs.
struct PlanNaming {
  std::string wsPrefix = "kiln_ws";
  int firstKernel = 0;
};

struct KernelInfo {
  KernelPlan::Kind kind;
  Shape domain;          // row groups: the reductions' operand shape; pointwise: the shape
  std::string key;       // pointwise: shape + stage
  bool permuted = false; // row groups: the rows are a permuted view of the reduced value
  std::vector<int> roots;            // nodes computed and stored, in order
  std::set<int> deps;                // kernels that must run first
  std::vector<std::string> notes;    // why
};

class Planner {
 public:
  Planner(const Graph& g, PlanNaming naming) : g_(g), naming_(std::move(naming)) {
    order_ = g.canonicalOrder();
    for (size_t i = 0; i < order_.size(); ++i) pos_[order_[i]] = static_cast<int>(i);
  }
  Plan run();

 private:
  const std::set<int>& coneGroups(int id);
  bool fits(int id, int kernel) const;
  int ownerFor(int id, bool isOutput);
  int pointwiseKernel(const Shape& s, const std::string& stage);
  void cut(int id, int kernel, std::set<std::pair<int, int>>& seen);
  void materialize(int id, int owner, int consumer, const std::string& reason);
  bool sharesInput(int id, const Shape& domain);
  bool onlyReducedBy(int id, int kernel) const;
  bool misreads(int id, int kernel);
  bool cheaperToRecompute(int id);
  // What a reduction's own kernel computes it from: its operand, or a
  // column partial's summed value (read through the partial's reshape).
  int reducedOperand(int id) const {
    const int e = columnPartialOperand(g_, id);
    return e >= 0 ? e : g_.node(id).inputs[0];
  }
  int newRowGroup(const Shape& domain, bool permuted);
  bool reshapesAfter(int id, int kernel);
  bool waitsFor(int a, int b) const;
  bool computingWaitsFor(int id, int other, int kernel) const;
  bool needsGroup(int a, int b);
  std::set<int> inputsOf(int id);

  const Graph& g_;
  PlanNaming naming_;
  std::vector<int> order_;
  std::map<int, int> pos_;
  std::map<int, int> groupOf_;  // reduction node → kernel index
  std::map<int, std::set<int>> groupNeeds_;  // row group → the groups its reductions read (transitively)
  std::map<int, std::set<int>> cone_;
  std::vector<KernelInfo> kernels_;
  std::map<int, int> owner_;    // materialized node → kernel writing it
  std::vector<int> materialized_;  // in first-materialized order
  std::map<int, std::string> wsName_;
  std::vector<std::pair<int, int>> work_;  // (root, kernel) to cut
  std::set<std::pair<int, int>> reads_;    // (kernel, node): read from the workspace
};

// The row groups whose reductions a node's value needs (through elementwise
// and view nodes; a reduction contributes its own group).
const std::set<int>& Planner::coneGroups(int id) {
  if (auto it = cone_.find(id); it != cone_.end()) return it->second;
  std::set<int> s;
  const Node& n = g_.node(id);
  if (isReduction(n.op)) s.insert(groupOf_.at(id));
  else
    for (int i : n.inputs) {
      const std::set<int>& c = coneGroups(i);
      s.insert(c.begin(), c.end());
    }
  return cone_[id] = std::move(s);
}

// Whether kernel `k` (a row group) can compute and store node `id`: the
// full domain shape, or one value per row (with or without the kept unit).
bool Planner::fits(int id, int k) const {
  const KernelInfo& ki = kernels_[k];
  if (ki.kind != KernelPlan::Kind::RowReduction) return false;
  if (columnPartialOperand(g_, id) >= 0) {
    auto it = groupOf_.find(id);
    return it != groupOf_.end() && it->second == k;
  }
  // The group's own reductions: one value per row (also where that shape
  // is the domain's, a row of one value: a permuted view's is not stored
  // as the full shape below would be).
  if (auto it = groupOf_.find(id); it != groupOf_.end() && it->second == k) return true;
  const Shape& s = g_.node(id).shape;
  const Shape& d = ki.domain;
  // A full-shaped value is stored in the domain's layout, which is the
  // value's own only when the rows were not made by a permute.
  if (s == d) return !ki.permuted;
  // One value per row, in any shape with the rows' layout (unit dims added
  // or dropped anywhere).
  auto nonUnit = [](const Shape& x) {
    Shape out;
    for (const Dim& dim : x)
      if (!isUnit(dim)) out.push_back(dim);
    return out;
  };
  return nonUnit(s) == nonUnit(Shape(d.begin(), d.end() - 1));
}

// Whether every user of node `id` is a reduction of kernel `kernel`'s group.
bool Planner::onlyReducedBy(int id, int kernel) const {
  bool any = false;
  for (int u = 0; u < g_.numNodes(); ++u) {
    const Node& n = g_.node(u);
    if (std::find(n.inputs.begin(), n.inputs.end(), id) == n.inputs.end()) continue;
    auto it = groupOf_.find(u);
    if (it == groupOf_.end() || it->second != kernel) return false;
    any = true;
  }
  return any;
}

// Whether computing full-shaped node `id` in row kernel `kernel` would read
// one of that kernel's reductions at other rows than its own (a row
// statistic of keepdim false broadcast along columns, say, as x - sum(x, 1)
// of a square x reads it): a row kernel cannot, so such a node is computed
// after the kernel, from its stored results (readsOwnRow, through the
// nodes' frames: the row emitter's rule).
// A value of one per row (its non-unit dims the domain's leading ones) is
// seen as the row emitter sees such an output: its axes on those domain
// axes (a slice of an empty row statistic reads other rows).
bool Planner::misreads(int id, int kernel) {
  const KernelInfo& ki = kernels_[kernel];
  if (ki.kind != KernelPlan::Kind::RowReduction) return false;
  const int k = static_cast<int>(ki.domain.size());
  const Shape& shape = g_.node(id).shape;
  Frame start = identityFrame(k);
  if (!(shape == ki.domain) && !perRowFrame(shape, ki.domain, start)) return false;
  std::set<std::string> seen;
  std::function<bool(int, const Frame&)> visit = [&](int n, const Frame& f) {
    if (!seen.insert(std::to_string(n) + "@" + frameKey(f)).second) return false;
    const Node& node = g_.node(n);
    if (node.op == Op::Input || node.op == Op::Scalar || node.op == Op::Constant || node.op == Op::Iota) return false;
    if (isReduction(node.op)) {
      auto g = groupOf_.find(n);
      if (g == groupOf_.end() || g->second != kernel) return false;  // another kernel's: read from memory
      return !readsOwnRow(node, g_.node(node.inputs[0]).shape, f, ki.domain) || visit(node.inputs[0], identityFrame(k));
    }
    if (node.op == Op::Reshape && !unitReshape(node, g_.node(node.inputs[0]))) return false;  // read from memory
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if (visit(node.inputs[i], operandFrame(g_, node, i, f))) return true;
    return false;
  };
  return visit(id, start);
}

// Whether recomputing elementwise node `id` from the graph inputs in its
// cone reads no more bytes than storing it and reading it back would move,
// counted per element of the value (an input of fewer elements, a weight or
// a row statistic, counts as it is spread over the value; values from
// other kernels that the recomputation would read are one value per row or
// smaller, which `fits` leaves to be stored). Static shapes only: the
// counts of dynamic dims are unknown (taken as equal where the shapes are).
bool Planner::cheaperToRecompute(int id) {
  const Node& n = g_.node(id);
  auto elements = [](const Shape& s) {
    double e = 1;
    for (const Dim& d : s) e *= d.isStatic() ? static_cast<double>(d.size) : 4096.0;
    return e;
  };
  const double mine = elements(n.shape);
  double read = 0;
  for (int i : inputsOf(id)) {
    const Node& in = g_.node(i);
    read += elements(in.shape) / mine * static_cast<double>(dtypeSize(in.dtype));
  }
  return read <= 2.0 * static_cast<double>(dtypeSize(n.dtype));
}

std::set<int> Planner::inputsOf(int id) {
  std::set<int> out;
  std::set<int> seen;
  std::function<void(int)> walk = [&](int i) {
    if (!seen.insert(i).second) return;
    const Node& n = g_.node(i);
    if (n.op == Op::Input) out.insert(i);
    for (int j : n.inputs) walk(j);
  };
  walk(id);
  return out;
}

bool Planner::sharesInput(int id, const Shape& domain) {
  std::set<int> mine = inputsOf(id);
  for (const auto& [red, k] : groupOf_) {
    if (!(kernels_[k].domain == domain)) continue;
    for (int i : inputsOf(red))
      if (mine.count(i)) return true;
  }
  return false;
}

// Whether value `id` reads the results of row group `kernel` through a
// reshape of a computed value (not a unit reshape): another kernel stores
// that value first, after `kernel`, so a reduction of `id` cannot be in
// `kernel` (sum(x - r - sum(x)) over all of x [64, 7], r a row sum: the
// whole sum's second pass would read x - r - s, stored by a kernel that
// needs the first pass's s).
bool Planner::reshapesAfter(int id, int kernel) {
  std::set<int> seen;
  std::function<bool(int)> walk = [&](int at) {
    if (!seen.insert(at).second) return false;
    const Node& n = g_.node(at);
    if (isReduction(n.op)) return false;
    if (n.op == Op::Reshape && !unitReshape(n, g_.node(n.inputs[0])) && g_.node(n.inputs[0]).op != Op::Input)
      return coneGroups(n.inputs[0]).count(kernel) > 0;
    for (int i : n.inputs)
      if (walk(i)) return true;
    return false;
  };
  return walk(id);
}

// Whether kernel `a` must run after row group `b`, as far as the plan knows
// it so far: a's reductions read b's, a already reads a value b stores
// (transitively), or a stores a value (an output: their owners are chosen
// before any kernel's reads are) that needs b's reductions. A value whose
// cone holds both is stored by neither a nor b unless b can run after a:
// max(x, 2) of x [1, 7, 1] and argmin(x, 1) in two row groups, an output
// where(|max| <= argmin, argmin, max) stored by the argmin's group, and a
// sum of it: the max's group, which can also compute a value per row of
// it, stored the sum's operand for the sum and read the argmin, while the
// argmin's group read the max (a cycle; found by random graphs, session 43).
bool Planner::needsGroup(int a, int b) {
  if (groupNeeds_[a].count(b) || waitsFor(a, b)) return true;
  for (int r : kernels_[static_cast<size_t>(a)].roots)
    if (coneGroups(r).count(b)) return true;
  return false;
}

// Whether kernel `other`, computing `id`, would read a value stored by
// `kernel` or by a kernel that waits for it (and so wait for `kernel`): the
// cone of `id` down to stored values and reductions (whose row kernels are
// another matter), a value `other` stores itself excepted.
bool Planner::computingWaitsFor(int id, int other, int kernel) const {
  std::set<int> seen;
  std::function<bool(int)> walk = [&](int v) {
    if (!seen.insert(v).second) return false;
    if (auto o = owner_.find(v); o != owner_.end())
      return o->second != other && (o->second == kernel || waitsFor(o->second, kernel));
    if (isReduction(g_.node(v).op)) return false;
    for (int i : g_.node(v).inputs)
      if (walk(i)) return true;
    return false;
  };
  for (int i : g_.node(id).inputs)
    if (walk(i)) return true;
  return false;
}

// Whether kernel `a` runs after kernel `b` (its dependencies, transitively).
bool Planner::waitsFor(int a, int b) const {
  std::set<int> seen;
  std::function<bool(int)> walk = [&](int k) {
    if (!seen.insert(k).second) return false;
    for (int d : kernels_[static_cast<size_t>(k)].deps)
      if (d == b || walk(d)) return true;
    return false;
  };
  return walk(a);
}

int Planner::newRowGroup(const Shape& domain, bool permuted) {
  KernelInfo ki;
  ki.kind = KernelPlan::Kind::RowReduction;
  ki.domain = domain;
  ki.permuted = permuted;
  kernels_.push_back(std::move(ki));
  return static_cast<int>(kernels_.size()) - 1;
}

int Planner::pointwiseKernel(const Shape& s, const std::string& stage) {
  std::string key = shapeToString(s) + "@" + stage;
  for (size_t k = 0; k < kernels_.size(); ++k)
    if (kernels_[k].kind == KernelPlan::Kind::Pointwise && kernels_[k].key == key) return static_cast<int>(k);
  KernelInfo ki;
  ki.kind = KernelPlan::Kind::Pointwise;
  ki.domain = s;
  ki.key = key;
  for (const KernelInfo& other : kernels_)
    if (other.kind == KernelPlan::Kind::Pointwise && !(other.domain == s)) {
      ki.notes.push_back("outputs of different shapes need different iteration spaces: one kernel per shape");
      break;
    }
  kernels_.push_back(std::move(ki));
  return static_cast<int>(kernels_.size()) - 1;
}

// The kernel that computes node `id` when it must be stored (an output, or
// an intermediate another kernel reads).
int Planner::ownerFor(int id, bool isOutput) {
  const std::set<int>& gs = coneGroups(id);
  const Node& n = g_.node(id);
  if (gs.empty()) {
    if (isOutput)
      for (size_t k = 0; k < kernels_.size(); ++k)
        if (kernels_[k].kind == KernelPlan::Kind::RowReduction && kernels_[k].domain == n.shape &&
            sharesInput(id, n.shape))
          return static_cast<int>(k);
    return pointwiseKernel(n.shape, "pre");
  }
  // The latest group of the cone that can store the value, where the other
  // groups of the cone do not read its results (they run before it): an
  // output that scales a row kernel's values by a statistic of another
  // domain (cross_entropy's gradient over the mean of a dynamic row count)
  // is computed by the row kernel, which reads that statistic, instead of
  // by a pointwise kernel reading a copy of the row kernel's values.
  const int last = *gs.rbegin();
  for (auto k = gs.rbegin(); k != gs.rend(); ++k) {
    bool before = true;
    for (int other : gs)
      if (other != *k && needsGroup(other, *k)) before = false;
    if (before && fits(id, *k) && !misreads(id, *k) && !reshapesAfter(id, *k)) return *k;
  }
  return pointwiseKernel(n.shape, "after" + std::to_string(last));
}

void Planner::materialize(int id, int owner, int consumer, const std::string& reason) {
  if (!owner_.count(id)) {
    owner_[id] = owner;
    materialized_.push_back(id);
    kernels_[owner].roots.push_back(id);
    work_.push_back({id, owner});
    std::string name = naming_.wsPrefix + std::to_string(wsName_.size());
    wsName_[id] = name;
    const Node& n = g_.node(id);
    kernels_[consumer].notes.push_back(name + " (" + typeToString(n.dtype, n.shape) + ", the " +
                                       std::string(opName(n.op)) + " node) is written by kernel {K" +
                                       std::to_string(owner) + "} and read here: " + reason);
  }
  if (owner_.at(id) != consumer) {
    kernels_[consumer].deps.insert(owner_.at(id));
    reads_.insert({consumer, id});
  }
}

// Walks what kernel `kernel` computes for node `id`, materializing the
// values it cannot compute itself.
void Planner::cut(int id, int kernel, std::set<std::pair<int, int>>& seen) {
  if (!seen.insert({id, kernel}).second) return;
  const Node& n = g_.node(id);
  if (n.op == Op::Input || n.op == Op::Scalar || n.op == Op::Constant || n.op == Op::Iota) return;
  // A value another kernel stores is read back only where this kernel could
  // not compute it itself (reading what a later kernel writes would be a
  // cycle).
  // A pointwise kernel computes a value of its own shape that another
  // pointwise kernel of that shape stores, instead of reading it: the same
  // iteration space (the rule in the branch below, for values another
  // kernel already stores). Reading it back was a cycle: out = slice(v) and
  // reshape(v) of v = fma(s, expand(s)), s a statistic, and a min over a
  // permute of the expand: the reshape's operand v got a pointwise kernel of
  // its own, which read the expand from the output's kernel (stored there
  // for the min), while the output's kernel read v from it; random graphs,
  // session 45.
  std::set<int> foreign = coneGroups(id);
  const bool ownGroup = foreign.erase(kernel) > 0;  // the cone holds this kernel's row group
  auto sameSpace = [&](int other) {
    const KernelInfo& a = kernels_[static_cast<size_t>(kernel)];
    const KernelInfo& b = kernels_[static_cast<size_t>(other)];
    return a.kind == KernelPlan::Kind::Pointwise && b.kind == KernelPlan::Kind::Pointwise && a.domain == b.domain &&
           n.shape == a.domain;
  };
  // A value whose cone holds this kernel's own row group is computed here
  // too: whichever kernel stores it runs after this one. Reading it back was
  // a cycle: softmax(t) over a permute of s = softmax(r) (r a reduction of
  // another kernel, t = reshape(permute(s)), a unit reshape that lines up
  // with s's rows): the row kernel of s also took t's max and sum, and read
  // permute(s) from the pointwise kernel that stored it from s for another
  // consumer; random graphs, session 46.
  if (auto it = owner_.find(id); it != owner_.end() && it->second != kernel && !foreign.empty() &&
                                 !sameSpace(it->second) && !ownGroup) {
    kernels_[kernel].deps.insert(it->second);
    reads_.insert({kernel, id});
    return;
  }
  // (A copy: ownerFor below may add kernels, which moves kernels_.)
  const KernelPlan::Kind kind = kernels_[kernel].kind;
  const Shape domain = kernels_[kernel].domain;
  if (isReduction(n.op)) {
    if (groupOf_.at(id) == kernel) {
      cut(reducedOperand(id), kernel, seen);
      return;
    }
  }
  // A permuted view of another kernel's value that only this kernel's
  // reductions read (the split column reduction's partials, reduced over
  // their parts): the other kernel stores the operand and this one reads it
  // through the view, as it reads a permuted graph input (the row
  // heuristic's column form), instead of a pointwise kernel storing a
  // transposed copy.
  if (n.op == Op::Permute && kind == KernelPlan::Kind::RowReduction && !foreign.empty() &&
      !coneGroups(n.inputs[0]).count(kernel) && onlyReducedBy(id, kernel)) {
    cut(n.inputs[0], kernel, seen);
    return;
  }
  // A value needing reductions of other kernels: store it from the kernel
  // that can compute it, as high up the expression as possible — except an
  // elementwise value that no row kernel can store (a pointwise kernel
  // would write it only for this one to read it back): this kernel
  // computes it itself, reading the other kernels' results it needs (softmax
  // over axis 0 in parts: exp(x - max) in the loads of the sum's parts, and
  // again in the output's pointwise kernel).
  // Also an elementwise value whose inputs cost this kernel no more to read
  // than the value itself would cost to write and read back: a norm's
  // weight gradient, sum over rows of dy * xhat, reads dy and x again with
  // the rows' statistics instead of a stored f32 copy of dy * xhat.
  const bool recompute = isElementwise(n.op) && !foreign.empty() && !ownGroup &&
                         (!fits(id, *coneGroups(id).rbegin()) || cheaperToRecompute(id));
  if (!foreign.empty() && !ownGroup && !recompute) {
    // (A value this kernel stores already, a reshape given a pointwise
    // kernel of its own, say: this kernel computes it.)
    auto own = owner_.find(id);
    int owner = own != owner_.end() ? own->second : ownerFor(id, false);
    if (own != owner_.end() && sameSpace(owner)) owner = kernel;  // (see sameSpace above)
    // Where another pointwise kernel would store it, this pointwise kernel
    // computes the value itself
    //  - if the value has this kernel's own shape: the same iteration space,
    //    so storing it elsewhere only to read it back is waste (and was a
    //    cycle: exp(reshape(expand(s))) of a statistic s, read by an output
    //    and by a reshape of it: the reshape's kernel, which computes the
    //    exp, had the output's kernel store the exp's operand, while the
    //    output's kernel read the exp from it; random graphs, session 44);
    //  - if that kernel already waits for this one and the value is a view
    //    or elementwise (views of alternating shapes, a permute of a unit
    //    reshape of a value needing a statistic, each stored by the
    //    pointwise kernel of its shape, made a cycle; random graphs, session
    //    40); a reshape then gets a pointwise kernel of its own;
    //  - likewise if that kernel would read, to compute the value, one that
    //    this kernel (or one waiting for it) stores: it would wait for this
    //    one (unit reshapes of expand(cast(v)), v a reshape stored here for
    //    another kernel, read back from a kernel of their shape that read v
    //    from here; random graphs, session 47).
    if (owner != kernel && own == owner_.end() && kind == KernelPlan::Kind::Pointwise &&
        kernels_[static_cast<size_t>(owner)].kind == KernelPlan::Kind::Pointwise) {
      const bool view = n.op == Op::Permute || n.op == Op::Expand || n.op == Op::Slice ||
                        (n.op == Op::Reshape && unitReshape(n, g_.node(n.inputs[0])));
      if (n.shape == domain && kernels_[static_cast<size_t>(owner)].domain == domain) {
        owner = kernel;
      } else if (view || isElementwise(n.op)) {
        if (waitsFor(owner, kernel) || computingWaitsFor(id, owner, kernel)) owner = kernel;
      } else if (waitsFor(owner, kernel)) {
        const std::string& key = kernels_[static_cast<size_t>(owner)].key;
        owner = pointwiseKernel(n.shape, key.substr(key.find('@') + 1) + "/value%" + std::to_string(id));
      }
    }
    if (owner != kernel) {
      std::string reason =
          kind == KernelPlan::Kind::RowReduction
              ? "this kernel reduces rows of " + shapeToString(domain) + " and cannot also compute reductions over " +
                    shapeToString(kernels_[*foreign.rbegin()].domain)
              : "a pointwise kernel cannot compute reductions";
      if (kind == KernelPlan::Kind::RowReduction && kernels_[*foreign.rbegin()].domain == domain)
        reason = "this kernel's reductions read it at other rows than its own or through a reshape, so a kernel over "
                 "the same rows computes it first";
      if (n.op == Op::Reshape && !unitReshape(n, g_.node(n.inputs[0])))
        reason = "a reshape (" + shapeToString(g_.node(n.inputs[0]).shape) + " -> " + shapeToString(n.shape) +
                 ") of a value that needs the results of kernel {K" + std::to_string(*foreign.rbegin()) +
                 "} is computed after it";
      materialize(id, owner, kernel, reason);
      return;
    }
  }
  if (n.op == Op::Reshape) {
    const Node& x = g_.node(n.inputs[0]);
    if (!unitReshape(n, x) && x.op != Op::Input) {
      const bool stored = owner_.count(n.inputs[0]) > 0;
      int owner = stored ? owner_.at(n.inputs[0]) : ownerFor(n.inputs[0], false);
      // A value that a pointwise kernel would store for the reshape gets a
      // pointwise kernel of its own: the kernel of its shape and stage may
      // read the reshape itself ((x + b) reshaped and transposed back), or
      // through another kernel (min(m, reshape(expand(m))) transposed, m a
      // statistic: the reshape's kernel would read the expand from the
      // output's kernel, which reads the reshape), a cycle. (A row kernel is
      // not the owner of a value that a reshape in it reads: reshapesAfter.)
      if (kernels_[owner].kind == KernelPlan::Kind::Pointwise && !stored) {
        const std::string& key = kernels_[owner].key;
        owner = pointwiseKernel(x.shape, key.substr(key.find('@') + 1) + "/reshape%" + std::to_string(n.inputs[0]));
      }
      if (owner == kernel)
        throw Error("kiln: internal: reshape " + typeToString(x.dtype, x.shape) + " -> " + shapeToString(n.shape) +
                    " of a value computed in the same kernel");
      materialize(n.inputs[0], owner, kernel,
                  "a reshape that is not a unit reshape reads its operand from memory (" + shapeToString(x.shape) +
                      " -> " + shapeToString(n.shape) + ")");
      return;
    }
  }
  for (int i : n.inputs) cut(i, kernel, seen);
}

Plan Planner::run() {
  if (g_.outputs().empty()) throw Error("kiln: compile: the graph has no outputs; mark results with Graph::output");
  for (int id : order_)
    if (g_.node(id).op == Op::Matmul)
      throw Error("kiln: internal: a matmul reached the fusion planner (planAroundMatmuls plans it)");
  // 1. Row groups, in topological order of their first reduction.
  for (int id : order_) {
    const Node& n = g_.node(id);
    if (!isReduction(n.op)) continue;
    if (const int e = columnPartialOperand(g_, id); e >= 0) {
      // A column partial (fuseColumnPartials): computed by the row group
      // over e's rows that computes e (the latest of its cone), else by the
      // latest group over those rows, else by a new one.
      const Shape& rowsOf = g_.node(e).shape;
      int k = -1;
      if (!coneGroups(e).empty()) k = *coneGroups(e).rbegin();
      for (int j = static_cast<int>(kernels_.size()) - 1; j >= 0 && k < 0; --j)
        if (kernels_[j].kind == KernelPlan::Kind::RowReduction && kernels_[j].domain == rowsOf && !kernels_[j].permuted)
          k = j;
      if (k < 0) k = newRowGroup(rowsOf, false);
      groupOf_[id] = k;
      kernels_[k].notes.push_back("it sums " + std::string(opName(g_.node(e).op)) + " " + shapeToString(rowsOf) +
                                  " over each of " + dimToString(n.shape[0]) + " parts of " +
                                  dimToString(g_.node(n.inputs[0]).shape[1]) +
                                  " rows (a column sum's partials, one part a block)");
      continue;
    }
    const Shape& domain = g_.node(n.inputs[0]).shape;
    const std::set<int>& needs = coneGroups(n.inputs[0]);
    int chosen = -1;
    std::string apart;  // why not the group over the same rows
    for (int k = static_cast<int>(kernels_.size()) - 1; k >= 0; --k) {
      if (kernels_[k].kind != KernelPlan::Kind::RowReduction || !(kernels_[k].domain == domain) ||
          kernels_[k].permuted != (g_.node(n.inputs[0]).op == Op::Permute))
        continue;
      // Not a group whose results the operand reads through a reshape of a
      // computed value (stored after the group), or at other rows than
      // their own (sum(x - sum(x, 1), 1) of a square x: the statistic lines
      // up with the columns; a row kernel reads its results at its row).
      if (needs.count(k) && reshapesAfter(n.inputs[0], k)) {
        apart = "reads a reshape of a value that needs the results of kernel {K" + std::to_string(k) + "}";
        break;
      }
      if (needs.count(k) && misreads(n.inputs[0], k)) {
        apart = "reads the results of kernel {K" + std::to_string(k) + "} at other rows than their own";
        break;
      }
      bool ok = true;
      for (int d : needs) ok = ok && (d == k || d < k);
      if (ok) chosen = k;
      break;
    }
    if (chosen < 0) {
      chosen = newRowGroup(domain, g_.node(n.inputs[0]).op == Op::Permute);
      if (!apart.empty())
        kernels_[chosen].notes.push_back("its " + std::string(opName(n.op)) + " over rows of " +
                                         shapeToString(domain) + " " + apart + ": a new kernel");
      else if (!needs.empty())
        kernels_[chosen].notes.push_back("its " + std::string(opName(n.op)) + " over rows of " +
                                         shapeToString(domain) + " needs the results of kernel {K" +
                                         std::to_string(*needs.rbegin()) + "}" +
                                         " (a reduction of a reduction over other rows): a new kernel");
    }
    groupOf_[id] = chosen;
    for (int d : needs)
      if (d != chosen) {
        groupNeeds_[chosen].insert(d);
        groupNeeds_[chosen].insert(groupNeeds_[d].begin(), groupNeeds_[d].end());
      }
  }
  // 2. Outputs.
  std::vector<int> outputKernel;
  for (const GraphOutput& o : g_.outputs()) {
    int k = ownerFor(o.node, true);
    outputKernel.push_back(k);
    if (std::find(kernels_[k].roots.begin(), kernels_[k].roots.end(), o.node) == kernels_[k].roots.end())
      kernels_[k].roots.push_back(o.node);
    work_.push_back({o.node, k});
  }
  // Every reduction must be computed by its group even if only another
  // group's kernel consumes it (then through a materialized value).
  std::set<std::pair<int, int>> seen;
  while (!work_.empty()) {
    auto [root, k] = work_.back();
    work_.pop_back();
    const Node& n = g_.node(root);
    // The root itself is computed here.
    if (isReduction(n.op) && groupOf_.at(root) == k) cut(reducedOperand(root), k, seen);
    else if (n.op == Op::Reshape && !unitReshape(n, g_.node(n.inputs[0])) && g_.node(n.inputs[0]).op != Op::Input) {
      seen.erase({root, k});
      cut(root, k, seen);
    } else
      for (int i : n.inputs) cut(i, k, seen);
  }
  // 3. Launch order: dependencies first, then creation order.
  const int nk = static_cast<int>(kernels_.size());
  std::vector<int> order, state(nk, 0);
  // KILN_DEBUG_PLAN: the kernels, their roots, dependencies and reads, to
  // stderr before they are ordered (where a plan has a cycle, say).
  if (std::getenv("KILN_DEBUG_PLAN")) {
    std::fprintf(stderr, "%s", printGraph(g_).c_str());
    for (int k = 0; k < nk; ++k) {
      std::fprintf(stderr, "K%d %s %s roots:", k, kernels_[k].kind == KernelPlan::Kind::Pointwise ? "pw" : "row",
                   kernels_[k].key.empty() ? shapeToString(kernels_[k].domain).c_str() : kernels_[k].key.c_str());
      for (int r : kernels_[k].roots) std::fprintf(stderr, " %%%d", r);
      std::fprintf(stderr, " deps:");
      for (int d : kernels_[k].deps) std::fprintf(stderr, " K%d", d);
      std::fprintf(stderr, "\n");
    }
    for (auto [k, id] : reads_) std::fprintf(stderr, "K%d reads %%%d (owner K%d)\n", k, id, owner_.at(id));
  }
  std::function<void(int)> visit = [&](int k) {
    if (state[k] == 2) return;
    if (state[k] == 1)
      throw Error("kiln: compile: the fusion plan has a cycle between kernels; this graph cannot be compiled yet "
                  "(please report it with `kiln compile --emit=graph`)");
    state[k] = 1;
    for (int d : kernels_[k].deps) visit(d);
    state[k] = 2;
    order.push_back(k);
  };
  for (int k = 0; k < nk; ++k)
    if (!kernels_[k].roots.empty()) visit(k);

  // 4. Sub-graphs.
  Plan plan;
  std::map<int, int> launchIndex;
  for (size_t i = 0; i < order.size(); ++i) launchIndex[order[i]] = naming_.firstKernel + static_cast<int>(i);
  for (int m : materialized_) {
    const Node& n = g_.node(m);
    KernelTensor t;
    t.name = wsName_.at(m);
    t.dtype = n.dtype;
    t.shape = n.shape;
    t.workspace = true;
    plan.workspace.push_back(t);
  }
  std::ostringstream why;
  for (int k : order) {
    const KernelInfo& ki = kernels_[k];
    KernelPlan kp;
    kp.kind = ki.kind;
    Graph& sg = kp.graph;
    // Leaves in a stable order: graph params first (declaration order), then
    // workspace reads (first-materialized order).
    std::set<int> needed;
    std::set<int> wsReads;
    std::function<void(int, bool)> mark = [&](int id, bool root) {
      if (!root && reads_.count({k, id})) {
        wsReads.insert(id);
        return;
      }
      if (!needed.insert(id).second) return;
      for (int i : g_.node(id).inputs) mark(i, false);
    };
    for (int r : ki.roots) mark(r, true);
    std::vector<std::pair<int, std::string>> wsInputs;
    for (int m : materialized_)
      if (wsReads.count(m)) {
        wsInputs.push_back({m, wsName_.at(m)});
        kp.workspaceNames.insert(wsName_.at(m));
      }
    const std::map<int, int> map =
        copyKernelNodes(sg, g_, order_, [&](int id) { return needed.count(id) > 0; }, wsInputs);
    // Outputs: graph outputs owned here (graph order), then workspace writes.
    for (size_t o = 0; o < g_.outputs().size(); ++o)
      if (outputKernel[o] == k) sg.output(g_.outputs()[o].name, sg.tensor(map.at(g_.outputs()[o].node)));
    for (int m : materialized_)
      if (owner_.at(m) == k) {
        sg.output(wsName_.at(m), sg.tensor(map.at(m)));
        kp.workspaceNames.insert(wsName_.at(m));
      }
    std::ostringstream w;
    w << "kernel " << launchIndex[k] << ": "
      << (ki.kind == KernelPlan::Kind::RowReduction ? "row reduction over rows of " : "pointwise over ")
      << shapeToString(ki.domain) << ", writes";
    for (const GraphOutput& o : sg.outputs()) w << " " << o.name;
    for (std::string note : ki.notes) {
      // Kernel references by launch index.
      for (size_t at; (at = note.find("{K")) != std::string::npos;) {
        size_t end = note.find('}', at);
        int ref = std::stoi(note.substr(at + 2, end - at - 2));
        note.replace(at, end - at + 1, std::to_string(launchIndex.count(ref) ? launchIndex[ref] : ref));
      }
      w << "; " << note;
    }
    kp.why = w.str();
    why << kp.why << "\n";
    plan.kernels.push_back(std::move(kp));
  }
  plan.explain = why.str();
  return plan;
}

}  // namespace

namespace {

// The one-value-per-row outputs of a row kernel (workspace or graph outputs)
// reduced over all rows by the next and last kernel (cross-entropy's mean):
// that kernel becomes the first one's grid tail, run by its last block to
// finish, so the graph is one kernel. The tail reads only what the row
// kernel writes, takes no scalars and reduces one row (its domain is
// one-dimensional): one block, as the second kernel was.
void foldGridTails(Plan& plan, const PlanNaming& naming) {
  const size_t n = plan.kernels.size();
  if (n < 2) return;
  KernelPlan& a = plan.kernels[n - 2];
  KernelPlan& b = plan.kernels[n - 1];
  if (a.kind != KernelPlan::Kind::RowReduction || b.kind != KernelPlan::Kind::RowReduction || a.tail) return;
  std::set<std::string> written;
  for (const GraphOutput& o : a.graph.outputs()) written.insert(o.name);
  bool reduction = false;
  for (int id = 0; id < b.graph.numNodes(); ++id) {
    const Node& nd = b.graph.node(id);
    if (nd.op == Op::Scalar) return;
    if (nd.op == Op::Input && (!written.count(nd.name) || nd.shape.size() != 1)) return;
    if (opClass(nd.op) == OpClass::Reduction) {
      reduction = true;
      if (b.graph.node(nd.inputs[0]).shape.size() != 1) return;  // one row
    }
  }
  if (!reduction) return;
  const std::string counter = "kiln_count" + std::to_string(naming.firstKernel + static_cast<int>(n) - 2);
  a.tail = std::make_shared<Graph>(std::move(b.graph));
  a.tailCounter = counter;
  a.workspaceNames.insert(counter);
  for (const std::string& w : b.workspaceNames) a.workspaceNames.insert(w);
  std::string reads, writes;
  for (int id : a.tail->params()) reads += (reads.empty() ? "" : ", ") + a.tail->node(id).name;
  for (const GraphOutput& o : a.tail->outputs()) writes += (writes.empty() ? "" : ", ") + o.name;
  a.why += "; then the last block to finish (blocks counted in " + counter + ", workspace) reduces " + reads +
           " over all rows and writes " + writes + " (a reduction of this kernel's per-row results: its grid tail, "
           "not a second kernel)";
  plan.kernels.pop_back();
  // The counter first: its place in the workspace never moves with the dims,
  // so the zero it is left at (each launch's last block resets it) stays put.
  KernelTensor c;
  c.name = counter;
  c.dtype = DType::I32;
  c.shape = {Dim(1)};
  c.workspace = true;
  plan.workspace.insert(plan.workspace.begin(), c);
  std::string explain;
  for (const KernelPlan& k : plan.kernels) explain += k.why + "\n";
  plan.explain = explain;
}

}  // namespace

namespace {

// A graph without matmuls: rewritten for the row schedule, then planned.
Plan planWithoutMatmuls(const Graph& g, const PlanNaming& naming) {
  // Twice: the first pass may split a reduction into single-axis steps that
  // the second moves to the last axis.
  Graph ng = fuseColumnPartials(sinkReshapes(
      splitLongReductions(normalizeReductions(normalizeReductions(splitColumnReductions(mergeEqualNodes(g)))))));
  Planner p(ng, naming);
  Plan plan = p.run();
  foldGridTails(plan, naming);
  return plan;
}

// A matmul operand that is a transpose of its last two axes (x.T, a permute
// keeping the batch axes) reads the permute's operand in the other layout
// (transA/transB) instead of a transposed copy.
Graph foldMatmulTransposes(const Graph& g) {
  return rewriteNodes(g, [&](Graph& ng, int, Node c) {
    if (c.op == Op::Matmul)
      for (int j = 0; j < 2; ++j)
        for (;;) {  // x.T.T: twice
          const Node& p = ng.node(c.inputs[j]);
          if (p.op != Op::Permute || p.rank() < 2) break;
          bool swap = p.axes[p.rank() - 1] == p.rank() - 2 && p.axes[p.rank() - 2] == p.rank() - 1;
          for (int a = 0; a + 2 < p.rank() && swap; ++a) swap = p.axes[a] == a;
          if (!swap) break;
          c.inputs[j] = p.inputs[0];
          bool& t = j == 0 ? c.transA : c.transB;
          t = !t;
        }
    return ng.addNode(std::move(c));
  });
}

bool broadcastsTo(const Shape& s, const Shape& to) {
  if (s.size() > to.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const Dim& d = s[s.size() - 1 - i];
    if (!(d == to[to.size() - 1 - i]) && !(d.isStatic() && d.size == 1)) return false;
  }
  return true;
}

// A graph with matmuls, planned in stages. Each matmul is one kernel, the
// matmul and its epilogue: the elementwise float/bool nodes over its output
// shape that read it (or an earlier node of its epilogue), and otherwise
// only graph parameters, values computed per element from those (recomputed
// in the epilogue: a bias times a scalar), or values that earlier stages
// store. Every other node is planned, by the planner above, in the stage
// of its matmul depth: the number of matmul kernels on its longest path from
// the inputs. So the stages run
//   rest(0), the matmuls of depth 1, rest(1), the matmuls of depth 2, ...
// and a value one stage computes and a later one reads goes through the
// workspace (kiln_mm*): a matmul's operand computed in the graph (a norm's
// output), its product read by a softmax or a reduction, a residual.
Plan planAroundMatmuls(const Graph& g0, const PlanOptions& options) {
  const Graph g = foldMatmulTransposes(g0);
  const std::vector<int> order = g.canonicalOrder();
  std::map<int, int> pos;
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = static_cast<int>(i);
  auto isParam = [&](int id) { return g.node(id).op == Op::Input || g.node(id).op == Op::Scalar; };
  auto isFree = [&](int id) { return isParam(id) || g.node(id).op == Op::Constant; };

  struct Mm {
    int node;
    int level;
  };
  std::vector<Mm> mms;
  std::map<int, int> kernelOf;  // matmul and epilogue nodes → mms index
  std::map<int, int> level;     // every node: its matmul depth
  // Computed per element of mms[m]'s output from parameters only.
  std::map<std::pair<int, int>, bool> preMemo;
  std::function<bool(int, int)> pre = [&](int id, int m) -> bool {
    if (isFree(id)) return true;
    if (auto it = preMemo.find({id, m}); it != preMemo.end()) return it->second;
    const Node& n = g.node(id);
    bool ok = isElementwise(n.op) && cudaElementSupported(g, n) && broadcastsTo(n.shape, g.node(mms[m].node).shape);
    for (int i : n.inputs) ok = ok && pre(i, m);
    return preMemo[{id, m}] = ok;
  };
  auto before = [&](int a, int b) {  // mms[a]'s kernel runs before mms[b]'s
    return std::make_pair(mms[a].level, pos[mms[a].node]) < std::make_pair(mms[b].level, pos[mms[b].node]);
  };
  for (int id : order) {
    const Node& n = g.node(id);
    int lv = 0;
    for (int i : n.inputs) lv = std::max(lv, level.at(i));
    if (n.op == Op::Matmul) {
      kernelOf[id] = static_cast<int>(mms.size());
      level[id] = lv + 1;
      mms.push_back({id, lv + 1});
      continue;
    }
    level[id] = lv;
    if (!isElementwise(n.op) || !cudaElementSupported(g, n)) continue;
    int best = -1;
    for (int i : n.inputs)
      if (kernelOf.count(i) && (best < 0 || before(best, kernelOf[i]))) best = kernelOf[i];
    if (best < 0 || !(n.shape == g.node(mms[best].node).shape)) continue;
    bool ok = true;
    for (int i : n.inputs) {
      if (kernelOf.count(i)) ok = ok && (kernelOf[i] == best || before(kernelOf[i], best));
      else ok = ok && (pre(i, best) || level.at(i) < mms[best].level);
    }
    if (!ok) continue;
    kernelOf[id] = best;
    level[id] = mms[best].level;
  }

  // An epilogue ends where its values are narrowest: a widening unary node
  // (a cast of the bf16 product to f32) whose readers all lie in the rest
  // stages, and which is no graph output, leaves the epilogue; the matmul
  // kernel then stores its narrower operand and the next stage recomputes
  // it (attention scores: the bf16 scores, not their f32 cast, half the
  // bytes written and read back). From the last node back, so that a chain
  // of widenings goes whole.
  {
    std::map<int, std::vector<int>> users;
    for (int id : order)
      for (int i : g.node(id).inputs) users[i].push_back(id);
    std::set<int> outputs;
    for (const GraphOutput& o : g.outputs()) outputs.insert(o.node);
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const int id = *it;
      const Node& n = g.node(id);
      auto k = kernelOf.find(id);
      if (k == kernelOf.end() || n.op == Op::Matmul || n.inputs.size() != 1 || outputs.count(id)) continue;
      const int in = n.inputs[0];
      if (!kernelOf.count(in) || kernelOf.at(in) != k->second || dtypeSize(n.dtype) <= dtypeSize(g.node(in).dtype))
        continue;
      bool restOnly = !users[id].empty();
      for (int u : users[id]) restOnly = restOnly && !kernelOf.count(u);
      if (restOnly) kernelOf.erase(k);
    }
  }

  // A softmax over a matmul's rows joins the matmul's kernel (its row-
  // softmax form) where K is short: computing the product twice costs less
  // than storing it and reading it back (the attention scores: K 128, the
  // product T x T). The form: v computed per element from the product (its
  // epilogue, and the softmax's widening cast), mx = max(v) and
  // s = sum(exp(v - mx)) over the last axis, and outputs computed per
  // element from those; nothing else reads any of them or the product.
  std::set<int> rowSoftmax;  // mms indices
  if (options.matmulRowSoftmax) {
    std::map<int, std::vector<int>> users;
    for (int id : order)
      for (int i : g.node(id).inputs) users[i].push_back(id);
    std::set<int> outputs;
    for (const GraphOutput& o : g.outputs()) outputs.insert(o.node);
    for (int mi = 0; mi < static_cast<int>(mms.size()); ++mi) {
      const int mmId = mms[mi].node;
      const Node& mn = g.node(mmId);
      const Dim K = matmulK(g, mn);
      if (!sm90MatmulOperandsApply(g, mn) || !K.isStatic() || K.size > kRowSoftmaxMaxK || outputs.count(mmId)) continue;
      const int r = static_cast<int>(mn.shape.size());
      auto lastKeep = [&](const Node& x, Op op) {
        return x.op == op && x.keepdim && x.axes == std::vector<int64_t>{r - 1} && x.dtype == DType::F32;
      };
      auto userOf = [&](int id, const std::function<bool(const Node&)>& want) {
        for (int u : users[id])
          if (want(g.node(u))) return u;
        return -1;
      };
      for (int mx : order) {
        if (!lastKeep(g.node(mx), Op::Max)) continue;
        const int v = g.node(mx).inputs[0];
        if (!(g.node(v).shape == mn.shape) || g.node(v).dtype != DType::F32) continue;
        // v's chain from the product: elementwise nodes of its shape whose
        // other operands are computed per element from parameters.
        std::set<int> fused;
        std::map<int, bool> memo;
        std::function<bool(int)> chain = [&](int id) -> bool {
          if (id == mmId) return true;
          if (auto it = memo.find(id); it != memo.end()) return it->second;
          memo[id] = false;
          const Node& n = g.node(id);
          if (!isElementwise(n.op) || !cudaElementSupported(g, n) || !(n.shape == mn.shape)) return false;
          bool reaches = false;
          for (int i : n.inputs) {
            if (i == mmId || (!isFree(i) && !pre(i, mi) && chain(i))) reaches = true;
            else if (!isFree(i) && !pre(i, mi)) return false;
          }
          if (reaches) fused.insert(id);
          return memo[id] = reaches;
        };
        if (!chain(v)) continue;
        const int d = userOf(mx, [&](const Node& n) { return n.op == Op::Sub && n.inputs == std::vector<int>{v, mx}; });
        const int e = d < 0 ? -1 : userOf(d, [&](const Node& n) { return n.op == Op::Exp; });
        const int sm = e < 0 ? -1 : userOf(e, [&](const Node& n) { return lastKeep(n, Op::Sum); });
        if (sm < 0) continue;
        fused.insert({mx, d, e, sm});
        // What is computed per element from those (the outputs).
        for (int id : order) {
          const Node& n = g.node(id);
          if (fused.count(id) || id == mmId || !isElementwise(n.op) || !cudaElementSupported(g, n)) continue;
          bool reads = false, ok = broadcastsTo(n.shape, mn.shape);
          for (int i : n.inputs) {
            if (fused.count(i)) reads = true;
            else ok = ok && (isFree(i) || pre(i, mi));
          }
          if (reads && ok) fused.insert(id);
        }
        // Nothing else reads them or the product; the outputs are full-
        // shaped values; the matmul's epilogue is all in them.
        bool closed = true, anyOutput = false;
        for (int id : fused) {
          for (int u : users[id]) closed = closed && fused.count(u);
          if (outputs.count(id)) {
            anyOutput = true;
            closed = closed && g.node(id).shape == mn.shape;
          }
        }
        for (int u : users[mmId]) closed = closed && fused.count(u);
        for (const auto& [id, k] : kernelOf)
          if (k == mi && id != mmId) closed = closed && fused.count(id);
        if (!closed || !anyOutput) continue;
        for (int id : fused) {
          kernelOf[id] = mi;
          level[id] = mms[mi].level;
        }
        rowSoftmax.insert(mi);
        break;
      }
    }
  }

  // Stages: rest(0), then per depth its matmuls (in topological order) and
  // rest(depth).
  int maxLevel = 0;
  for (const Mm& m : mms) maxLevel = std::max(maxLevel, m.level);
  struct Stage {
    int mm = -1;  // a matmul kernel, or -1: the rest of a depth
  };
  std::vector<Stage> stages;
  std::map<int, int> restStage, mmStage;
  for (int l = 0; l <= maxLevel; ++l) {
    std::vector<int> here;
    for (int m = 0; m < static_cast<int>(mms.size()); ++m)
      if (mms[m].level == l) here.push_back(m);
    std::sort(here.begin(), here.end(), [&](int a, int b) { return pos[mms[a].node] < pos[mms[b].node]; });
    for (int m : here) {
      mmStage[m] = static_cast<int>(stages.size());
      stages.push_back({m});
    }
    restStage[l] = static_cast<int>(stages.size());
    stages.push_back({-1});
  }
  auto home = [&](int id) { return kernelOf.count(id) ? mmStage.at(kernelOf.at(id)) : restStage.at(level.at(id)); };

  // What each stage computes, reads and writes; from the last stage back,
  // so that a stage knows which of its values later stages read.
  const int S = static_cast<int>(stages.size());
  std::vector<std::set<int>> computed(S), reads(S), params(S);
  std::vector<std::vector<std::string>> readNotes(S);
  std::set<int> stored;  // values read by a later stage
  std::map<int, std::string> wsName;
  std::vector<std::vector<int>> outputsOf(S);  // graph output indices
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    const int id = g.outputs()[o].node;
    outputsOf[isFree(id) ? restStage.at(0) : home(id)].push_back(static_cast<int>(o));
  }
  for (int s = S - 1; s >= 0; --s) {
    const int m = stages[s].mm;
    std::function<void(int)> mark = [&](int id) {
      if (!computed[s].insert(id).second) return;
      const Node& n = g.node(id);
      for (size_t j = 0; j < n.inputs.size(); ++j) {
        const int i = n.inputs[j];
        if (isParam(i)) params[s].insert(i);
        else if (g.node(i).op == Op::Constant) computed[s].insert(i);
        else if (home(i) == s || (m >= 0 && id != mms[m].node && pre(i, m))) mark(i);
        else {
          reads[s].insert(i);
          stored.insert(i);
          if (m >= 0)
            readNotes[s].push_back(id == mms[m].node
                                       ? std::string("its operand ") + (j == 0 ? "a" : "b") + " (" +
                                             std::string(opName(g.node(i).op)) + ") is computed by an earlier kernel"
                                       : std::string("its epilogue reads the ") + std::string(opName(g.node(i).op)) +
                                             " computed by an earlier kernel");
        }
      }
    };
    for (int o : outputsOf[s]) {
      const int id = g.outputs()[o].node;
      if (isParam(id)) params[s].insert(id);
      else mark(id);
    }
    for (int v : stored)
      if (home(v) == s) mark(v);
  }
  // Names of the stored values, in topological order: a graph output is
  // read back from the output (not written twice), unless a matmul reads it
  // as an operand (the Hopper kernel's TMA needs the 16-byte alignment that
  // only the workspace guarantees); others are workspace tensors.
  std::vector<int> storedOrder(stored.begin(), stored.end());
  std::sort(storedOrder.begin(), storedOrder.end(), [&](int a, int b) { return pos[a] < pos[b]; });
  std::set<int> operands;
  for (const Mm& m : mms)
    for (int i : g.node(m.node).inputs) operands.insert(i);
  std::set<std::string> crossNames;  // the workspace ones
  int numWs = 0;
  for (int v : storedOrder) {
    for (const GraphOutput& o : g.outputs())
      if (o.node == v && !operands.count(v) && !wsName.count(v)) wsName[v] = o.name;
    if (!wsName.count(v)) {
      wsName[v] = "kiln_mm" + std::to_string(numWs++);
      crossNames.insert(wsName[v]);
    }
  }

  Plan plan;
  for (int v : storedOrder) {
    if (!crossNames.count(wsName[v])) continue;
    KernelTensor t;
    t.name = wsName[v];
    t.dtype = g.node(v).dtype;
    t.shape = g.node(v).shape;
    t.workspace = true;
    plan.workspace.push_back(t);
  }
  std::map<int, int> writer;  // stored value → the launch index of its writer
  for (int s = 0; s < S; ++s) {
    std::vector<int> storedHere;
    for (int v : storedOrder)
      if (home(v) == s) storedHere.push_back(v);
    if (outputsOf[s].empty() && storedHere.empty()) continue;
    Graph sg;
    std::vector<std::pair<int, std::string>> stageReads;
    for (int v : storedOrder)
      if (reads[s].count(v)) stageReads.push_back({v, wsName[v]});
    const std::map<int, int> map = copyKernelNodes(
        sg, g, order, [&](int id) { return params[s].count(id) > 0 || computed[s].count(id) > 0; }, stageReads);
    for (int o : outputsOf[s]) sg.output(g.outputs()[o].name, sg.tensor(map.at(g.outputs()[o].node)));
    for (int v : storedHere)
      if (crossNames.count(wsName[v])) sg.output(wsName[v], sg.tensor(map.at(v)));
    const int first = static_cast<int>(plan.kernels.size());
    // What a kernel of this stage reads from earlier stages, and which
    // kernel wrote it.
    auto readsOf = [&](const Graph& kg) {
      std::string text;
      for (int p : kg.params())
        for (int v : storedOrder)
          if (reads[s].count(v) && wsName[v] == kg.node(p).name)
            text += (text.empty() ? "" : ", ") + wsName[v] + " (kernel " + std::to_string(writer.at(v)) + ")";
      return text;
    };
    if (stages[s].mm < 0) {
      Plan sub = planWithoutMatmuls(sg, {"kiln_ws" + std::to_string(s) + "_", first});
      for (KernelTensor& t : sub.workspace) plan.workspace.push_back(std::move(t));
      for (KernelPlan& kp : sub.kernels) {
        if (const std::string r = readsOf(kp.graph); !r.empty())
          kp.why += "; it reads " + r + ", computed around the graph's matmuls";
        plan.kernels.push_back(std::move(kp));
      }
    } else {
      const Mm& mm = mms[stages[s].mm];
      const Node& mn = g.node(mm.node);
      KernelPlan kp;
      kp.kind = KernelPlan::Kind::Matmul;
      kp.graph = std::move(sg);
      std::string epi;
      int numEpi = 0;
      for (int id : order)
        if (computed[s].count(id) && isElementwise(g.node(id).op)) {
          ++numEpi;
          if (numEpi <= 8) epi += (epi.empty() ? "" : " ") + std::string(opName(g.node(id).op));
        }
      if (numEpi > 8) epi += " ...";
      std::string outs;
      for (const GraphOutput& o : kp.graph.outputs()) outs += (outs.empty() ? "" : ", ") + o.name;
      kp.why = "kernel " + std::to_string(first) + ": matmul " + typeToString(mn.dtype, mn.shape) +
               (mn.transA ? ", A transposed" : "") + (mn.transB ? ", B transposed" : "") +
               (mn.tf32 ? ", through tf32" : "") +
               (rowSoftmax.count(stages[s].mm)
                    ? ", with the softmax over its rows (the product computed twice, for the rows' max and sum and "
                      "then for the outputs, instead of stored and read back: K is " +
                          dimToString(matmulK(g, mn)) + ")"
                    : "") +
               (numEpi ? ", epilogue of " + std::to_string(numEpi) + " fused elementwise op(s) (" + epi + ")" : "") +
               ", writes " + outs;
      if (const std::string r = readsOf(kp.graph); !r.empty()) {
        std::set<std::string> seenNote;
        std::string notes;
        for (const std::string& nt : readNotes[s])
          if (seenNote.insert(nt).second) notes += "; " + nt;
        kp.why += "; reads " + r + notes;
      }
      plan.kernels.push_back(std::move(kp));
    }
    for (int v : storedHere)
      for (int k = first; k < static_cast<int>(plan.kernels.size()); ++k) {
        const KernelPlan& kp = plan.kernels[k];
        for (const GraphOutput& o : kp.graph.outputs())
          if (o.name == wsName[v]) writer[v] = k;
        if (kp.tail)  // (cross_entropy's mean: written by the grid tail)
          for (const GraphOutput& o : kp.tail->outputs())
            if (o.name == wsName[v]) writer[v] = k;
      }
    for (int v : storedHere)
      if (!writer.count(v))
        throw Error("kiln: internal: no kernel of the plan writes " + wsName[v] + " (please report it with `kiln "
                    "compile --emit=graph`)");
  }
  // The values between stages are workspace to every kernel that names them;
  // grid tails' block counters first (their zero must not move with the
  // dims: foldGridTails).
  for (KernelPlan& kp : plan.kernels)
    for (const Graph* kg : {&kp.graph, kp.tail.get()}) {
      if (!kg) continue;
      for (int p : kg->params())
        if (crossNames.count(kg->node(p).name)) kp.workspaceNames.insert(kg->node(p).name);
      for (const GraphOutput& o : kg->outputs())
        if (crossNames.count(o.name)) kp.workspaceNames.insert(o.name);
    }
  std::stable_partition(plan.workspace.begin(), plan.workspace.end(),
                        [](const KernelTensor& t) { return t.name.rfind("kiln_count", 0) == 0; });
  for (const KernelPlan& kp : plan.kernels) plan.explain += kp.why + "\n";
  return plan;
}

}  // namespace

// A value with no elements (a static dim of 0) holds nothing to compute,
// read or store: it becomes a 0 of its dtype broadcast to its shape, so no
// kernel reads one from another. (A reshape of [1, 3, 0] to [0], which
// broadcasts back against [1, 3, 0], needed its operand stored by the
// kernel that read the reshape from the reshape's own kernel: a cycle;
// random graphs, session 48.) A reduction over one keeps its operand's
// shape and so gives its identity, as before.
static Graph emptyValuesAsZeros(const Graph& g) {
  auto empty = [](const Shape& s) {
    return std::any_of(s.begin(), s.end(), [](const Dim& d) { return d.isStatic() && d.size == 0; });
  };
  // Most graphs have none: no rebuild on the compile path for them.
  const std::vector<int> order = g.canonicalOrder();
  if (std::none_of(order.begin(), order.end(), [&](int id) { return empty(g.node(id).shape); })) return g;
  return rewriteNodes(g, [&](Graph& ng, int, Node c) {
    if (!empty(c.shape)) return ng.addNode(std::move(c));
    return expand(ng.constant(0, c.dtype), c.shape).id();
  });
}

Plan planGraph(const Graph& g, const PlanOptions& options) {
  const Graph m = mergeEqualNodes(emptyValuesAsZeros(g));
  for (int id : m.canonicalOrder())
    if (m.node(id).op == Op::Matmul) return planAroundMatmuls(m, options);
  return planWithoutMatmuls(m, {});
}

}  // namespace kiln::compiler
