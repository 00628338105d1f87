#include "kiln/dsl/graph.h"

#include <algorithm>
#include <array>
#include <unordered_set>

#include "graph_data.h"
#include "kiln/dsl/text.h"

namespace kiln {

std::string dimToString(const Dim& d) {
  return d.isStatic() ? std::to_string(d.size) : d.name;
}

std::string shapeToString(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += dimToString(s[i]);
  }
  return out + "]";
}

std::string typeToString(DType t, const Shape& s) {
  std::string out(dtypeName(t));
  if (!s.empty()) out += shapeToString(s);
  return out;
}

bool isStaticShape(const Shape& s) {
  return std::all_of(s.begin(), s.end(), [](const Dim& d) { return d.isStatic(); });
}

int64_t staticElementCount(const Shape& s) {
  int64_t n = 1;
  for (const Dim& d : s)
    if (d.isStatic()) n *= d.size;
  return n;
}

namespace {

struct OpInfo {
  Op op;
  std::string_view name;
  OpClass cls;
};

constexpr std::array<OpInfo, kNumOps> kOps = {{
    {Op::Input, "input", OpClass::Leaf},
    {Op::Scalar, "scalar", OpClass::Leaf},
    {Op::Constant, "const", OpClass::Leaf},
    {Op::Iota, "iota", OpClass::Leaf},
    {Op::Neg, "neg", OpClass::Unary},
    {Op::Abs, "abs", OpClass::Unary},
    {Op::Exp, "exp", OpClass::Unary},
    {Op::Exp2, "exp2", OpClass::Unary},
    {Op::Log, "log", OpClass::Unary},
    {Op::Log2, "log2", OpClass::Unary},
    {Op::Log1p, "log1p", OpClass::Unary},
    {Op::Expm1, "expm1", OpClass::Unary},
    {Op::Sqrt, "sqrt", OpClass::Unary},
    {Op::Rsqrt, "rsqrt", OpClass::Unary},
    {Op::Reciprocal, "reciprocal", OpClass::Unary},
    {Op::Sin, "sin", OpClass::Unary},
    {Op::Cos, "cos", OpClass::Unary},
    {Op::Tanh, "tanh", OpClass::Unary},
    {Op::Sigmoid, "sigmoid", OpClass::Unary},
    {Op::Erf, "erf", OpClass::Unary},
    {Op::Relu, "relu", OpClass::Unary},
    {Op::Floor, "floor", OpClass::Unary},
    {Op::Ceil, "ceil", OpClass::Unary},
    {Op::Round, "round", OpClass::Unary},
    {Op::IsNan, "isnan", OpClass::Unary},
    {Op::IsInf, "isinf", OpClass::Unary},
    {Op::LogicalNot, "logical_not", OpClass::Unary},
    {Op::Add, "add", OpClass::Binary},
    {Op::Sub, "sub", OpClass::Binary},
    {Op::Mul, "mul", OpClass::Binary},
    {Op::Div, "div", OpClass::Binary},
    {Op::Pow, "pow", OpClass::Binary},
    {Op::Maximum, "maximum", OpClass::Binary},
    {Op::Minimum, "minimum", OpClass::Binary},
    {Op::Remainder, "remainder", OpClass::Binary},
    {Op::Eq, "eq", OpClass::Binary},
    {Op::Ne, "ne", OpClass::Binary},
    {Op::Lt, "lt", OpClass::Binary},
    {Op::Le, "le", OpClass::Binary},
    {Op::Gt, "gt", OpClass::Binary},
    {Op::Ge, "ge", OpClass::Binary},
    {Op::LogicalAnd, "logical_and", OpClass::Binary},
    {Op::LogicalOr, "logical_or", OpClass::Binary},
    {Op::Where, "where", OpClass::Ternary},
    {Op::Fma, "fma", OpClass::Ternary},
    {Op::Cast, "cast", OpClass::Cast},
    {Op::Sum, "sum", OpClass::Reduction},
    {Op::Mean, "mean", OpClass::Reduction},
    {Op::Max, "max", OpClass::Reduction},
    {Op::Min, "min", OpClass::Reduction},
    {Op::Prod, "prod", OpClass::Reduction},
    {Op::ArgMax, "argmax", OpClass::Reduction},
    {Op::ArgMin, "argmin", OpClass::Reduction},
    {Op::Var, "var", OpClass::Reduction},
    {Op::Std, "std", OpClass::Reduction},
    {Op::Matmul, "matmul", OpClass::Matmul},
    {Op::Reshape, "reshape", OpClass::View},
    {Op::Expand, "expand", OpClass::View},
    {Op::Permute, "permute", OpClass::View},
    {Op::Slice, "slice", OpClass::View},
}};

constexpr bool tableInOrder() {
  for (int i = 0; i < kNumOps; ++i)
    if (static_cast<int>(kOps[i].op) != i) return false;
  return true;
}
static_assert(tableInOrder(), "kOps must list ops in enum order");

}  // namespace

OpClass opClass(Op op) { return kOps[static_cast<int>(op)].cls; }
std::string_view opName(Op op) { return kOps[static_cast<int>(op)].name; }

std::optional<Op> parseOpName(std::string_view name) {
  for (const OpInfo& info : kOps)
    if (info.name == name) return info.op;
  return std::nullopt;
}

bool isElementwise(Op op) {
  OpClass c = opClass(op);
  return c == OpClass::Unary || c == OpClass::Binary || c == OpClass::Ternary ||
         c == OpClass::Cast;
}

Graph::Graph() : data_(std::make_shared<detail::GraphData>()) {}

int Graph::numNodes() const { return static_cast<int>(data_->nodes.size()); }

const Node& Graph::node(int id) const {
  if (id < 0 || id >= numNodes())
    throw Error("kiln: node id " + std::to_string(id) + " out of range (graph has " +
                std::to_string(numNodes()) + " nodes)");
  return data_->nodes[id];
}

const std::vector<int>& Graph::params() const { return data_->params; }
const std::vector<GraphOutput>& Graph::outputs() const { return data_->outputs; }

std::vector<std::string> Graph::dynamicDims() const {
  std::vector<std::string> names;
  auto note = [&](const Shape& s) {
    for (const Dim& d : s)
      if (d.isDynamic() && std::find(names.begin(), names.end(), d.name) == names.end())
        names.push_back(d.name);
  };
  for (int id : data_->params) note(data_->nodes[id].shape);
  // Dims that appear only inside (e.g. through reshape) still need values.
  for (int id : canonicalOrder()) note(data_->nodes[id].shape);
  return names;
}

std::vector<int> Graph::canonicalOrder() const {
  const auto& nodes = data_->nodes;
  std::vector<char> state(nodes.size(), 0);  // 0 new, 1 on stack, 2 done
  std::vector<int> order;
  order.reserve(nodes.size());
  for (int id : data_->params) {
    state[id] = 2;
    order.push_back(id);
  }
  // Iterative post-order DFS, operands left to right.
  std::vector<std::pair<int, size_t>> stack;
  for (const GraphOutput& out : data_->outputs) {
    if (state[out.node] == 2) continue;
    stack.push_back({out.node, 0});
    state[out.node] = 1;
    while (!stack.empty()) {
      auto& [id, next] = stack.back();
      const Node& n = nodes[id];
      if (next < n.inputs.size()) {
        int operand = n.inputs[next++];
        if (state[operand] == 0) {
          state[operand] = 1;
          stack.push_back({operand, 0});
        }
        continue;
      }
      state[id] = 2;
      order.push_back(id);
      stack.pop_back();
    }
  }
  return order;
}

Tensor Graph::tensor(int id) const {
  node(id);  // range check
  return Tensor(data_, id);
}

std::string Graph::toText() const { return printGraph(*this); }

bool Graph::operator==(const Graph& other) const {
  return data_ == other.data_ || toText() == other.toText();
}

int Graph::addNode(Node n) {
  data_->nodes.push_back(std::move(n));
  return numNodes() - 1;
}

Graph bindDims(const Graph& g, const std::vector<std::pair<std::string, int64_t>>& values) {
  auto subst = [&](Shape s) {
    for (Dim& d : s)
      for (const auto& [name, v] : values)
        if (d.isDynamic() && d.name == name) d = Dim(v);
    return s;
  };
  for (const auto& [name, v] : values)
    if (v < 0) throw Error("kiln: dim " + name + " = " + std::to_string(v) + "; expected a size >= 0");
  Graph out;
  std::vector<int> remap(g.numNodes(), -1);
  const auto& params = g.params();
  for (int id : g.canonicalOrder()) {
    Node n = g.node(id);
    n.shape = subst(n.shape);
    for (int& in : n.inputs) in = remap[in];
    remap[id] = out.addNode(std::move(n));
    if (std::find(params.begin(), params.end(), id) != params.end()) out.data()->params.push_back(remap[id]);
  }
  for (const GraphOutput& o : g.outputs()) out.data()->outputs.push_back({o.name, remap[o.node]});
  return out;
}

const Node& Tensor::node() const {
  if (!data_) throw Error("kiln: use of an empty Tensor handle (default-constructed, never assigned)");
  return data_->nodes[id_];
}

}  // namespace kiln
