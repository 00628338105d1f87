// Shape inference, type promotion and validation for every primitive op.
// Every failure goes through fail(), so messages share one shape:
//   kiln: <op>(<operand types>): <problem>; expected <what> (at file:line)
#include "kiln/dsl/ops.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "graph_data.h"

namespace kiln {

namespace {

std::string describe(const std::vector<const Node*>& operands) {
  std::string out;
  for (size_t i = 0; i < operands.size(); ++i) {
    if (i) out += ", ";
    const Node* n = operands[i];
    if (n->op == Op::Constant && n->weak) {
      out += "scalar ";
    }
    out += typeToString(n->dtype, n->shape);
  }
  return out;
}

[[noreturn]] void fail(std::string_view op, const std::vector<const Node*>& operands,
                       const std::string& problem, const Loc& loc) {
  throw Error("kiln: " + std::string(op) + "(" + describe(operands) + "): " + problem +
              " (at " + formatLocation(loc) + ")");
}

[[noreturn]] void failPlain(std::string_view what, const std::string& problem, const Loc& loc) {
  throw Error("kiln: " + std::string(what) + ": " + problem + " (at " + formatLocation(loc) + ")");
}

bool isIdentifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

void checkShapeDims(std::string_view what, const Shape& shape, const Loc& loc) {
  for (size_t i = 0; i < shape.size(); ++i) {
    const Dim& d = shape[i];
    if (d.isDynamic() && !isIdentifier(d.name))
      failPlain(what, "dim " + std::to_string(i) + " has the name '" + d.name +
                          "'; expected an identifier like N or seq_len", loc);
    if (d.isStatic() && d.size < 0)
      failPlain(what, "dim " + std::to_string(i) + " is " + std::to_string(d.size) +
                          "; expected a size >= 0 or a named dynamic dim", loc);
  }
}

std::vector<const Node*> nodesOf(const std::vector<Tensor>& ts) {
  std::vector<const Node*> out;
  for (const Tensor& t : ts) out.push_back(&t.node());
  return out;
}

void checkValid(std::string_view op, const std::vector<Tensor>& ts, const Loc& loc) {
  for (size_t i = 0; i < ts.size(); ++i)
    if (!ts[i].valid())
      failPlain(op, "operand " + std::to_string(i) +
                        " is an empty Tensor handle; expected a tensor built in a Graph", loc);
  for (size_t i = 1; i < ts.size(); ++i)
    if (!ts[i].sameGraph(ts[0]))
      fail(op, nodesOf(ts), "operand " + std::to_string(i) +
                                " belongs to another Graph; expected all operands in one graph", loc);
}

Tensor append(const Tensor& anyOperand, Node n) {
  Graph g = anyOperand.graph();
  return g.tensor(g.addNode(std::move(n)));
}

DType defaultDTypeOf(DTypeCategory c) {
  switch (c) {
    case DTypeCategory::Bool: return DType::Bool;
    case DTypeCategory::Integer: return DType::I64;
    case DTypeCategory::Float: return DType::F32;
  }
  return DType::F32;
}

DType promotePair(DType a, DType b) {
  DTypeCategory ca = dtypeCategory(a), cb = dtypeCategory(b);
  if (ca != cb) return ca > cb ? a : b;
  if (a == b) return a;
  switch (ca) {
    case DTypeCategory::Bool: return DType::Bool;
    case DTypeCategory::Integer: return dtypeSize(a) >= dtypeSize(b) ? a : b;
    case DTypeCategory::Float:
      // f16 + bf16, or either with f32.
      return DType::F32;
  }
  return a;
}

int normalizeAxis(std::string_view op, const std::vector<const Node*>& operands, int64_t axis,
                  int rank, const Loc& loc) {
  int64_t r = rank == 0 ? 1 : rank;  // a 0-dim tensor accepts axis 0 / -1 where allowed
  if (axis < -r || axis >= r)
    fail(op, operands,
         "axis " + std::to_string(axis) + " is out of range; expected an axis in [" +
             std::to_string(-r) + ", " + std::to_string(r - 1) + "]",
         loc);
  return static_cast<int>(axis < 0 ? axis + r : axis);
}

// numpy broadcasting of several shapes; fails naming the offending dim.
Shape broadcastShapes(std::string_view op, const std::vector<const Node*>& operands, const Loc& loc) {
  size_t rank = 0;
  for (const Node* n : operands) rank = std::max(rank, n->shape.size());
  Shape out(rank, Dim(int64_t{1}));
  for (size_t i = 0; i < rank; ++i) {  // i counts from the right
    std::optional<Dim> chosen;
    size_t chosenFrom = 0;
    for (size_t k = 0; k < operands.size(); ++k) {
      const Shape& s = operands[k]->shape;
      if (i >= s.size()) continue;
      const Dim& d = s[s.size() - 1 - i];
      if (d.isStatic() && d.size == 1) continue;
      if (!chosen) {
        chosen = d;
        chosenFrom = k;
      } else if (!(*chosen == d)) {
        fail(op, operands,
             "cannot broadcast: dim " + std::to_string(static_cast<int64_t>(rank - 1 - i)) +
                 " (from the left of the result) is " + dimToString(*chosen) + " in operand " +
                 std::to_string(chosenFrom) + " but " + dimToString(d) + " in operand " +
                 std::to_string(k) + "; expected equal dims or 1",
             loc);
      }
    }
    if (chosen) out[rank - 1 - i] = *chosen;
  }
  return out;
}

Tensor toTensor(const Operand& o, const Tensor& like, const Loc& loc) {
  if (const Tensor* t = std::get_if<Tensor>(&o.value)) return *t;
  Graph g = like.graph();
  if (const double* d = std::get_if<double>(&o.value))
    return makeConstant(g, *d, 0, DType::F32, true, loc);
  if (const int64_t* i = std::get_if<int64_t>(&o.value))
    return makeConstant(g, 0, *i, DType::I64, true, loc);
  return makeConstant(g, 0, std::get<bool>(o.value) ? 1 : 0, DType::Bool, true, loc);
}

// Turns operands into tensors of one graph (literals become weak constants).
std::vector<Tensor> resolveOperands(std::string_view op, const std::vector<const Operand*>& ops,
                                    const Loc& loc) {
  const Tensor* anchor = nullptr;
  for (const Operand* o : ops)
    if (const Tensor* t = std::get_if<Tensor>(&o->value)) {
      if (!t->valid())
        failPlain(op, "an operand is an empty Tensor handle; expected a tensor built in a Graph", loc);
      anchor = t;
      break;
    }
  if (!anchor)
    failPlain(op, "every operand is a C++ number; expected at least one tensor operand", loc);
  std::vector<Tensor> out;
  for (const Operand* o : ops) out.push_back(toTensor(*o, *anchor, loc));
  checkValid(op, out, loc);
  return out;
}

bool allWeak(const std::vector<const Node*>& ns) {
  return std::all_of(ns.begin(), ns.end(), [](const Node* n) { return n->weak; });
}

enum class Rule {
  Arithmetic,     // promoted; bool is an error
  TrueDivision,   // promoted; integer results become f32
  Comparison,     // promoted operands; bool result
  Logical,        // any operands; bool result
};

Rule ruleFor(Op op) {
  switch (op) {
    case Op::Div: return Rule::TrueDivision;
    case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge:
      return Rule::Comparison;
    case Op::LogicalAnd: case Op::LogicalOr: return Rule::Logical;
    default: return Rule::Arithmetic;
  }
}

DType binaryResultType(Op op, const std::vector<const Node*>& ns, const Loc& loc) {
  DType promoted = promoteTypes(ns);
  switch (ruleFor(op)) {
    case Rule::Arithmetic:
    case Rule::TrueDivision:
      if (promoted == DType::Bool)
        fail(opName(op), ns,
             "arithmetic on bool operands; expected numeric operands (use logical_and/logical_or, "
             "or cast to an integer or float dtype)",
             loc);
      if (ruleFor(op) == Rule::TrueDivision && !isFloat(promoted)) return DType::F32;
      return promoted;
    case Rule::Comparison:
    case Rule::Logical:
      return DType::Bool;
  }
  return promoted;
}

DType unaryResultType(Op op, const Node& x, const Loc& loc) {
  switch (op) {
    case Op::IsNan: case Op::IsInf: case Op::LogicalNot:
      return DType::Bool;
    case Op::Neg: case Op::Abs: case Op::Relu: case Op::Floor: case Op::Ceil: case Op::Round:
      if (x.dtype == DType::Bool)
        fail(opName(op), {&x}, "bool operand; expected a numeric dtype (cast it first)", loc);
      return x.dtype;
    default:  // transcendental and friends: integers compute in f32
      return isFloat(x.dtype) ? x.dtype : DType::F32;
  }
}

std::vector<int64_t> normalizeAxes(std::string_view op, const Node& x, const Axes& axes,
                                   const Loc& loc) {
  std::vector<int64_t> out;
  if (axes.list.empty()) {
    for (int i = 0; i < x.rank(); ++i) out.push_back(i);
    return out;
  }
  for (int64_t a : axes.list) {
    if (x.rank() == 0)
      fail(op, {&x}, "axis " + std::to_string(a) + " given for a 0-dim tensor; expected no axes", loc);
    int n = normalizeAxis(op, {&x}, a, x.rank(), loc);
    if (std::find(out.begin(), out.end(), n) != out.end())
      fail(op, {&x}, "axis " + std::to_string(a) + " is listed twice; expected distinct axes", loc);
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

// ---------------------------------------------------------------- promotion

DType promoteTypes(const std::vector<const Node*>& operands) {
  std::optional<DType> dimT, zeroT, weakT;
  auto merge = [](std::optional<DType>& acc, DType t) { acc = acc ? promotePair(*acc, t) : t; };
  for (const Node* n : operands) {
    if (n->weak) merge(weakT, n->dtype);
    else if (n->rank() > 0) merge(dimT, n->dtype);
    else merge(zeroT, n->dtype);
  }
  std::optional<DType> result = dimT;
  if (zeroT && (!result || dtypeCategory(*zeroT) > dtypeCategory(*result))) result = zeroT;
  if (weakT) {
    if (!result) result = weakT;
    else if (dtypeCategory(*weakT) > dtypeCategory(*result)) result = defaultDTypeOf(dtypeCategory(*weakT));
  }
  return result.value_or(DType::F32);
}

// --------------------------------------------------------------- leaves

namespace {

// A parameter's name: an identifier, not used by another parameter.
void checkParamName(const detail::GraphData& d, const std::string& kind, const std::string& name, const Loc& loc) {
  if (!isIdentifier(name))
    failPlain(kind, "the name '" + name + "' is not an identifier; expected [A-Za-z_][A-Za-z0-9_]*", loc);
  for (int id : d.params)
    if (d.nodes[id].name == name)
      failPlain(kind + " '" + name + "'", "a parameter named '" + name + "' already exists; expected unique names",
                loc);
}

}  // namespace

Tensor Graph::input(const std::string& name, DType dtype, const Shape& shape, Loc loc) {
  checkParamName(*data_, "input", name, loc);
  checkShapeDims("input '" + name + "'", shape, loc);
  Node n;
  n.op = Op::Input;
  n.dtype = dtype;
  n.shape = shape;
  n.name = name;
  int id = addNode(std::move(n));
  data_->params.push_back(id);
  return tensor(id);
}

Tensor Graph::scalar(const std::string& name, DType dtype, Loc loc) {
  checkParamName(*data_, "scalar", name, loc);
  if (dtype != DType::F32 && dtype != DType::I32 && dtype != DType::I64)
    failPlain("scalar '" + name + "'",
              "dtype " + std::string(dtypeName(dtype)) + " is not a runtime scalar type; expected f32, i32 or i64",
              loc);
  Node n;
  n.op = Op::Scalar;
  n.dtype = dtype;
  n.name = name;
  n.weak = true;
  int id = addNode(std::move(n));
  data_->params.push_back(id);
  return tensor(id);
}

Tensor Graph::constant(double value, DType dtype, Loc loc) {
  return makeConstant(*this, value, static_cast<int64_t>(roundToDType(value, dtype == DType::Bool ? DType::Bool : DType::I64)),
                      dtype, false, loc);
}

Tensor makeConstant(Graph& g, double fvalue, int64_t ivalue, DType dtype, bool weak, Loc loc) {
  (void)loc;
  Node n;
  n.op = Op::Constant;
  n.dtype = dtype;
  n.weak = weak;
  if (isFloat(dtype)) {
    n.fvalue = roundToDType(fvalue, dtype);
  } else if (dtype == DType::Bool) {
    n.ivalue = ivalue != 0 ? 1 : 0;
  } else {
    n.ivalue = dtype == DType::I32 ? static_cast<int64_t>(static_cast<int32_t>(ivalue)) : ivalue;
  }
  return g.tensor(g.addNode(std::move(n)));
}

void Graph::output(const std::string& name, const Tensor& t, Loc loc) {
  if (!isIdentifier(name))
    failPlain("output", "the name '" + name + "' is not an identifier; expected [A-Za-z_][A-Za-z0-9_]*", loc);
  if (!t.valid()) failPlain("output '" + name + "'", "the tensor is an empty handle", loc);
  if (t.graph().data_ != data_)
    failPlain("output '" + name + "'", "the tensor belongs to another Graph", loc);
  for (const GraphOutput& o : data_->outputs)
    if (o.name == name) failPlain("output '" + name + "'", "an output with this name already exists; expected unique names", loc);
  for (int id : data_->params)
    if (data_->nodes[id].name == name)
      failPlain("output '" + name + "'", "a parameter has this name; expected outputs and parameters to differ", loc);
  data_->outputs.push_back({name, t.id()});
}

Tensor iota(Graph& g, const Shape& shape, int64_t axis, DType dtype, Loc loc) {
  checkShapeDims("iota", shape, loc);
  if (shape.empty()) failPlain("iota", "shape is 0-dim; expected at least one dim", loc);
  if (dtype == DType::Bool) failPlain("iota", "dtype bool; expected an integer or float dtype", loc);
  int64_t r = static_cast<int64_t>(shape.size());
  if (axis < -r || axis >= r)
    failPlain("iota", "axis " + std::to_string(axis) + " is out of range for shape " + shapeToString(shape), loc);
  Node n;
  n.op = Op::Iota;
  n.dtype = dtype;
  n.shape = shape;
  n.axis = axis < 0 ? axis + r : axis;
  return g.tensor(g.addNode(std::move(n)));
}

// ---------------------------------------------------------------- elementwise

Tensor unary(Op op, const Tensor& x, Loc loc) {
  if (opClass(op) != OpClass::Unary) failPlain(opName(op), "is not a unary op", loc);
  checkValid(opName(op), {x}, loc);
  const Node& xn = x.node();
  Node n;
  n.op = op;
  n.dtype = unaryResultType(op, xn, loc);
  n.shape = xn.shape;
  n.inputs = {x.id()};
  n.weak = xn.weak;
  return append(x, std::move(n));
}

#define KILN_UNARY(fn, OP) \
  Tensor fn(const Tensor& x, Loc loc) { return unary(Op::OP, x, loc); }
KILN_UNARY(neg, Neg)
KILN_UNARY(abs, Abs)
KILN_UNARY(exp, Exp)
KILN_UNARY(exp2, Exp2)
KILN_UNARY(log, Log)
KILN_UNARY(log2, Log2)
KILN_UNARY(log1p, Log1p)
KILN_UNARY(expm1, Expm1)
KILN_UNARY(sqrt, Sqrt)
KILN_UNARY(rsqrt, Rsqrt)
KILN_UNARY(reciprocal, Reciprocal)
KILN_UNARY(sin, Sin)
KILN_UNARY(cos, Cos)
KILN_UNARY(tanh, Tanh)
KILN_UNARY(sigmoid, Sigmoid)
KILN_UNARY(erf, Erf)
KILN_UNARY(relu, Relu)
KILN_UNARY(floor, Floor)
KILN_UNARY(ceil, Ceil)
KILN_UNARY(round, Round)
KILN_UNARY(isnan, IsNan)
KILN_UNARY(isinf, IsInf)
KILN_UNARY(logical_not, LogicalNot)
#undef KILN_UNARY

Tensor binary(Op op, const Operand& a, const Operand& b, Loc loc) {
  if (opClass(op) != OpClass::Binary) failPlain(opName(op), "is not a binary op", loc);
  std::vector<Tensor> ts = resolveOperands(opName(op), {&a, &b}, loc);
  std::vector<const Node*> ns = nodesOf(ts);
  Node n;
  n.op = op;
  n.shape = broadcastShapes(opName(op), ns, loc);
  n.dtype = binaryResultType(op, ns, loc);
  n.inputs = {ts[0].id(), ts[1].id()};
  n.weak = allWeak(ns);
  return append(ts[0], std::move(n));
}

#define KILN_BINARY(fn, OP) \
  Tensor fn(const Operand& a, const Operand& b, Loc loc) { return binary(Op::OP, a, b, loc); }
KILN_BINARY(add, Add)
KILN_BINARY(sub, Sub)
KILN_BINARY(mul, Mul)
KILN_BINARY(div, Div)
KILN_BINARY(pow, Pow)
KILN_BINARY(maximum, Maximum)
KILN_BINARY(minimum, Minimum)
KILN_BINARY(remainder, Remainder)
KILN_BINARY(eq, Eq)
KILN_BINARY(ne, Ne)
KILN_BINARY(lt, Lt)
KILN_BINARY(le, Le)
KILN_BINARY(gt, Gt)
KILN_BINARY(ge, Ge)
KILN_BINARY(logical_and, LogicalAnd)
KILN_BINARY(logical_or, LogicalOr)
#undef KILN_BINARY

#define KILN_OPERATOR(sym, OP) \
  Tensor operator sym(const Operand& a, const Operand& b) { return binary(Op::OP, a, b, b.loc); }
KILN_OPERATOR(+, Add)
KILN_OPERATOR(-, Sub)
KILN_OPERATOR(*, Mul)
KILN_OPERATOR(/, Div)
KILN_OPERATOR(%, Remainder)
KILN_OPERATOR(<, Lt)
KILN_OPERATOR(<=, Le)
KILN_OPERATOR(>, Gt)
KILN_OPERATOR(>=, Ge)
KILN_OPERATOR(==, Eq)
KILN_OPERATOR(!=, Ne)
KILN_OPERATOR(&, LogicalAnd)
KILN_OPERATOR(|, LogicalOr)
#undef KILN_OPERATOR

namespace {
Tensor unaryOperand(Op op, const Operand& x) {
  const Tensor* t = std::get_if<Tensor>(&x.value);
  if (!t) failPlain(opName(op), "the operand is a C++ number; expected a tensor", x.loc);
  return unary(op, *t, x.loc);
}
}  // namespace

Tensor operator-(const Operand& x) { return unaryOperand(Op::Neg, x); }
Tensor operator!(const Operand& x) { return unaryOperand(Op::LogicalNot, x); }

Tensor where(const Tensor& cond, const Operand& a, const Operand& b, Loc loc) {
  Operand c(cond, loc);
  std::vector<Tensor> ts = resolveOperands("where", {&c, &a, &b}, loc);
  std::vector<const Node*> ns = nodesOf(ts);
  if (ns[0]->dtype != DType::Bool)
    fail("where", ns,
         "the condition is " + std::string(dtypeName(ns[0]->dtype)) +
             "; expected a bool condition (compare it, e.g. x != 0)",
         loc);
  Node n;
  n.op = Op::Where;
  n.shape = broadcastShapes("where", ns, loc);
  n.dtype = promoteTypes({ns[1], ns[2]});
  n.inputs = {ts[0].id(), ts[1].id(), ts[2].id()};
  n.weak = allWeak(ns);
  return append(ts[0], std::move(n));
}

Tensor fma(const Operand& a, const Operand& b, const Operand& c, Loc loc) {
  std::vector<Tensor> ts = resolveOperands("fma", {&a, &b, &c}, loc);
  std::vector<const Node*> ns = nodesOf(ts);
  Node n;
  n.op = Op::Fma;
  n.shape = broadcastShapes("fma", ns, loc);
  n.dtype = promoteTypes(ns);
  if (n.dtype == DType::Bool)
    fail("fma", ns, "arithmetic on bool operands; expected numeric operands", loc);
  n.inputs = {ts[0].id(), ts[1].id(), ts[2].id()};
  n.weak = allWeak(ns);
  return append(ts[0], std::move(n));
}

Tensor cast(const Tensor& x, DType to, Loc loc) {
  checkValid("cast", {x}, loc);
  Node n;
  n.op = Op::Cast;
  n.dtype = to;
  n.shape = x.shape();
  n.inputs = {x.id()};
  return append(x, std::move(n));
}

// ---------------------------------------------------------------- reductions

Tensor reduce(Op op, const Tensor& x, const Axes& axes, bool keepdim, int64_t correction, Loc loc) {
  if (opClass(op) != OpClass::Reduction) failPlain(opName(op), "is not a reduction", loc);
  checkValid(opName(op), {x}, loc);
  const Node& xn = x.node();
  std::string_view name = opName(op);
  Node n;
  n.op = op;
  n.axes = normalizeAxes(name, xn, axes, loc);
  n.keepdim = keepdim;
  n.inputs = {x.id()};
  switch (op) {
    case Op::Sum:
    case Op::Prod:
      n.dtype = isFloat(xn.dtype) ? xn.dtype : DType::I64;
      break;
    case Op::Mean:
    case Op::Var:
    case Op::Std:
      if (!isFloat(xn.dtype))
        fail(name, {&xn},
             "input dtype " + std::string(dtypeName(xn.dtype)) +
                 "; expected a float dtype (f32, f16, bf16): cast it first",
             loc);
      n.dtype = xn.dtype;
      if (op != Op::Mean) {
        if (correction < 0)
          fail(name, {&xn}, "correction " + std::to_string(correction) + "; expected >= 0", loc);
        n.correction = correction;
      }
      break;
    case Op::Max:
    case Op::Min:
      n.dtype = xn.dtype;
      break;
    case Op::ArgMax:
    case Op::ArgMin:
      if (xn.dtype == DType::Bool)
        fail(name, {&xn}, "bool input; expected a numeric dtype", loc);
      if (n.axes.size() != 1 && xn.rank() > 0)
        fail(name, {&xn}, "reduces " + std::to_string(n.axes.size()) + " axes; expected exactly one axis", loc);
      n.dtype = DType::I64;
      break;
    default:
      break;
  }
  for (int i = 0; i < xn.rank(); ++i) {
    bool reduced = std::find(n.axes.begin(), n.axes.end(), i) != n.axes.end();
    if (!reduced) n.shape.push_back(xn.shape[i]);
    else if (keepdim) n.shape.push_back(Dim(int64_t{1}));
  }
  return append(x, std::move(n));
}

Tensor sum(const Tensor& x, const Axes& axes, bool keepdim, Loc loc) { return reduce(Op::Sum, x, axes, keepdim, 1, loc); }
Tensor mean(const Tensor& x, const Axes& axes, bool keepdim, Loc loc) { return reduce(Op::Mean, x, axes, keepdim, 1, loc); }
Tensor max(const Tensor& x, const Axes& axes, bool keepdim, Loc loc) { return reduce(Op::Max, x, axes, keepdim, 1, loc); }
Tensor min(const Tensor& x, const Axes& axes, bool keepdim, Loc loc) { return reduce(Op::Min, x, axes, keepdim, 1, loc); }
Tensor prod(const Tensor& x, const Axes& axes, bool keepdim, Loc loc) { return reduce(Op::Prod, x, axes, keepdim, 1, loc); }
Tensor argmax(const Tensor& x, int64_t axis, bool keepdim, Loc loc) { return reduce(Op::ArgMax, x, Axes(axis), keepdim, 1, loc); }
Tensor argmin(const Tensor& x, int64_t axis, bool keepdim, Loc loc) { return reduce(Op::ArgMin, x, Axes(axis), keepdim, 1, loc); }
namespace {
// argmax/argmin over the flattened tensor: a reshape to one axis, then the
// reduction over it (the planner splits a long one into parts).
Tensor argFlat(Op op, const char* name, const Tensor& x, Loc loc) {
  checkValid(name, {x}, loc);
  const Node& xn = x.node();
  for (const Dim& d : xn.shape)
    if (d.isDynamic())
      fail(name, {&xn}, "over the whole tensor needs static dims, but dim " + d.name +
                            " is dynamic (it cannot be flattened); expected an axis", loc);
  if (xn.rank() == 0) return reduce(op, reshape(x, {Dim(1)}, loc), Axes(0), false, 1, loc);
  Tensor flat = xn.rank() == 1 ? x : reshape(x, {Dim(staticElementCount(xn.shape))}, loc);
  return reduce(op, flat, Axes(0), false, 1, loc);
}
}  // namespace

Tensor argmax(const Tensor& x, Loc loc) { return argFlat(Op::ArgMax, "argmax", x, loc); }
Tensor argmin(const Tensor& x, Loc loc) { return argFlat(Op::ArgMin, "argmin", x, loc); }

Tensor var(const Tensor& x, const Axes& axes, int64_t correction, bool keepdim, Loc loc) {
  return reduce(Op::Var, x, axes, keepdim, correction, loc);
}
Tensor std(const Tensor& x, const Axes& axes, int64_t correction, bool keepdim, Loc loc) {
  return reduce(Op::Std, x, axes, keepdim, correction, loc);
}
Tensor stddev(const Tensor& x, const Axes& axes, int64_t correction, bool keepdim, Loc loc) {
  return reduce(Op::Std, x, axes, keepdim, correction, loc);
}

// ---------------------------------------------------------------- matmul

Tensor matmul(const Tensor& a, const Tensor& b, MatmulOptions opts, Loc loc) {
  checkValid("matmul", {a, b}, loc);
  const Node& an = a.node();
  const Node& bn = b.node();
  std::vector<const Node*> ns = {&an, &bn};
  if (an.rank() < 2 || bn.rank() < 2)
    fail("matmul", ns, "operand " + std::string(an.rank() < 2 ? "a" : "b") +
                           " has rank " + std::to_string(std::min(an.rank(), bn.rank())) +
                           "; expected rank >= 2 ([..., rows, cols]); reshape vectors first", loc);
  if (an.dtype != bn.dtype)
    fail("matmul", ns, "operand dtypes differ; expected both f16, both bf16 or both f32 (cast one)", loc);
  if (!isFloat(an.dtype))
    fail("matmul", ns, "dtype " + std::string(dtypeName(an.dtype)) + "; expected f16, bf16 or f32", loc);
  if (opts.tf32 && an.dtype != DType::F32)
    fail("matmul", ns, "tf32 applies to f32 operands, these are " + std::string(dtypeName(an.dtype)) +
                           "; drop tf32 (16-bit operands always use the tensor cores)", loc);
  const Dim& m = opts.transA ? an.shape[an.rank() - 1] : an.shape[an.rank() - 2];
  const Dim& ka = opts.transA ? an.shape[an.rank() - 2] : an.shape[an.rank() - 1];
  const Dim& kb = opts.transB ? bn.shape[bn.rank() - 1] : bn.shape[bn.rank() - 2];
  const Dim& nn = opts.transB ? bn.shape[bn.rank() - 2] : bn.shape[bn.rank() - 1];
  if (!(ka == kb))
    fail("matmul", ns,
         "contraction dims differ: a has K = " + dimToString(ka) + ", b has K = " + dimToString(kb) +
             (opts.transA || opts.transB
                  ? std::string(" (transA = ") + (opts.transA ? "true" : "false") +
                        ", transB = " + (opts.transB ? "true" : "false") + ")"
                  : std::string()) +
             "; expected equal K",
         loc);
  // Broadcast batch dims through the shared broadcasting rule.
  Node ba, bb;
  ba.shape.assign(an.shape.begin(), an.shape.end() - 2);
  bb.shape.assign(bn.shape.begin(), bn.shape.end() - 2);
  ba.dtype = an.dtype;
  bb.dtype = bn.dtype;
  Shape batch;
  try {
    batch = broadcastShapes("matmul", {&ba, &bb}, loc);
  } catch (const Error&) {
    fail("matmul", ns, "batch dims " + shapeToString(ba.shape) + " and " + shapeToString(bb.shape) +
                           " do not broadcast; expected equal dims or 1", loc);
  }
  Node n;
  n.op = Op::Matmul;
  n.dtype = an.dtype;
  n.shape = batch;
  n.shape.push_back(m);
  n.shape.push_back(nn);
  n.transA = opts.transA;
  n.transB = opts.transB;
  n.tf32 = opts.tf32;
  n.inputs = {a.id(), b.id()};
  return append(a, std::move(n));
}

// ---------------------------------------------------------------- views

Tensor reshape(const Tensor& x, const Shape& shape, Loc loc) {
  checkValid("reshape", {x}, loc);
  const Node& xn = x.node();
  std::string target = shapeToString(shape);
  int inferAt = -1;
  Shape out = shape;
  for (size_t i = 0; i < shape.size(); ++i) {
    const Dim& d = shape[i];
    if (d.isStatic() && d.size == -1) {
      if (inferAt >= 0) fail("reshape", {&xn}, "target " + target + " has two -1 dims; expected at most one", loc);
      inferAt = static_cast<int>(i);
    } else if (d.isStatic() && d.size < 0) {
      fail("reshape", {&xn}, "target " + target + " has dim " + std::to_string(d.size) + "; expected sizes >= 0 or -1", loc);
    } else if (d.isDynamic()) {
      checkShapeDims("reshape", {d}, loc);
    }
  }
  auto dynNames = [](const Shape& s) {
    std::vector<std::string> v;
    for (const Dim& d : s)
      if (d.isDynamic()) v.push_back(d.name);
    std::sort(v.begin(), v.end());
    return v;
  };
  if (dynNames(xn.shape) != dynNames(shape))
    fail("reshape", {&xn}, "target " + target +
                               " does not carry the same dynamic dims; expected every dynamic dim of the input exactly once",
         loc);
  int64_t have = staticElementCount(xn.shape);
  int64_t want = 1;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i].isStatic() && static_cast<int>(i) != inferAt) want *= shape[i].size;
  if (inferAt >= 0) {
    if (want == 0 || have % want != 0)
      fail("reshape", {&xn}, "cannot infer the -1 in " + target + " from " + std::to_string(have) +
                                 " elements; expected a divisor", loc);
    out[inferAt] = Dim(have / want);
  } else if (have != want) {
    fail("reshape", {&xn}, "target " + target + " holds " + std::to_string(want) + " elements but the input holds " +
                               std::to_string(have) + "; expected equal element counts", loc);
  }
  Node n;
  n.op = Op::Reshape;
  n.dtype = xn.dtype;
  n.shape = out;
  n.inputs = {x.id()};
  return append(x, std::move(n));
}

Tensor expand(const Tensor& x, const Shape& shape, Loc loc) {
  checkValid("expand", {x}, loc);
  const Node& xn = x.node();
  if (shape.size() < xn.shape.size())
    fail("expand", {&xn}, "target " + shapeToString(shape) + " has fewer dims than the input; expected rank >= " +
                              std::to_string(xn.rank()), loc);
  Shape out = shape;
  size_t off = shape.size() - xn.shape.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    const Dim& t = shape[i];
    if (t.isStatic() && t.size < -1)
      fail("expand", {&xn}, "target dim " + std::to_string(i) + " is " + std::to_string(t.size) + "; expected a size >= 0", loc);
    if (t.isDynamic()) checkShapeDims("expand", {t}, loc);
    if (i < off) {
      if (t.isStatic() && t.size == -1)
        fail("expand", {&xn}, "target dim " + std::to_string(i) + " is -1 where the input has no dim; expected a size", loc);
      continue;
    }
    const Dim& s = xn.shape[i - off];
    if (t.isStatic() && t.size == -1) {
      out[i] = s;
    } else if (!(s == t) && !(s.isStatic() && s.size == 1)) {
      fail("expand", {&xn}, "input dim " + std::to_string(i - off) + " is " + dimToString(s) +
                                " but the target " + shapeToString(shape) + " has " + dimToString(t) +
                                "; expected equal dims or an input dim of 1", loc);
    }
  }
  Node n;
  n.op = Op::Expand;
  n.dtype = xn.dtype;
  n.shape = out;
  n.inputs = {x.id()};
  return append(x, std::move(n));
}

Tensor broadcast_to(const Tensor& x, const Shape& shape, Loc loc) { return expand(x, shape, loc); }

Tensor permute(const Tensor& x, const std::vector<int64_t>& perm, Loc loc) {
  checkValid("permute", {x}, loc);
  const Node& xn = x.node();
  auto permStr = [&] {
    std::string s = "[";
    for (size_t i = 0; i < perm.size(); ++i) s += (i ? ", " : "") + std::to_string(perm[i]);
    return s + "]";
  };
  if (static_cast<int>(perm.size()) != xn.rank())
    fail("permute", {&xn}, "permutation " + permStr() + " has " + std::to_string(perm.size()) +
                               " entries; expected " + std::to_string(xn.rank()), loc);
  std::vector<int64_t> p;
  std::vector<bool> seen(perm.size(), false);
  for (int64_t a : perm) {
    int n = normalizeAxis("permute", {&xn}, a, xn.rank(), loc);
    if (seen[n]) fail("permute", {&xn}, "permutation " + permStr() + " repeats axis " + std::to_string(n) +
                                             "; expected each axis once", loc);
    seen[n] = true;
    p.push_back(n);
  }
  Node n;
  n.op = Op::Permute;
  n.dtype = xn.dtype;
  for (int64_t a : p) n.shape.push_back(xn.shape[a]);
  n.axes = p;
  n.inputs = {x.id()};
  return append(x, std::move(n));
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1, Loc loc) {
  checkValid("transpose", {x}, loc);
  const Node& xn = x.node();
  if (xn.rank() < 2) fail("transpose", {&xn}, "rank " + std::to_string(xn.rank()) + "; expected rank >= 2", loc);
  int a = normalizeAxis("transpose", {&xn}, dim0, xn.rank(), loc);
  int b = normalizeAxis("transpose", {&xn}, dim1, xn.rank(), loc);
  std::vector<int64_t> perm(xn.rank());
  for (int i = 0; i < xn.rank(); ++i) perm[i] = i;
  std::swap(perm[a], perm[b]);
  return permute(x, perm, loc);
}

Tensor slice(const Tensor& x, int64_t axis, int64_t start, int64_t end, int64_t step, Loc loc) {
  checkValid("slice", {x}, loc);
  const Node& xn = x.node();
  if (xn.rank() == 0) fail("slice", {&xn}, "0-dim input; expected rank >= 1", loc);
  int a = normalizeAxis("slice", {&xn}, axis, xn.rank(), loc);
  const Dim& d = xn.shape[a];
  if (d.isDynamic())
    fail("slice", {&xn}, "axis " + std::to_string(a) + " is the dynamic dim " + d.name +
                             "; expected a static axis (slicing dynamic dims is not supported)", loc);
  if (step < 1) fail("slice", {&xn}, "step " + std::to_string(step) + "; expected step >= 1", loc);
  int64_t size = d.size;
  auto clampIdx = [&](int64_t i) {
    if (i < 0) i += size;
    return std::clamp<int64_t>(i, 0, size);
  };
  int64_t s = clampIdx(start), e = clampIdx(end);
  int64_t len = e > s ? (e - s + step - 1) / step : 0;
  Node n;
  n.op = Op::Slice;
  n.dtype = xn.dtype;
  n.shape = xn.shape;
  n.shape[a] = Dim(len);
  n.axis = a;
  n.start = s;
  n.end = std::max(s, e);
  n.step = step;
  n.inputs = {x.id()};
  return append(x, std::move(n));
}

}  // namespace kiln
