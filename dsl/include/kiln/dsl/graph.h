// The graph IR: nodes with an op, a dtype, a shape and operand ids, owned by
// a Graph. Users hold Tensor handles; every op in ops.h appends one node and
// validates it on the spot (see ops.h). Nodes are immutable once added.
//
// Identity: a Graph's meaning is its parameter list (inputs and runtime
// scalars, in declaration order: that order is the kernel signature), its
// outputs (in order, named) and the DAG reachable from them. Nodes that no
// output reaches are dead and do not take part in printing or equality.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/error.h"

namespace kiln {

// One dimension: a static size, or a named dynamic size bound at launch.
struct Dim {
  int64_t size = 0;   // static size; -1 when dynamic
  std::string name;   // the dynamic dim's name; empty when static

  Dim() = default;
  Dim(int64_t s) : size(s) {}  // NOLINT: implicit so {32, 4096} works
  Dim(int s) : size(s) {}      // NOLINT
  Dim(const char* n) : size(-1), name(n) {}         // NOLINT: {"N", 4096}
  Dim(std::string n) : size(-1), name(std::move(n)) {}  // NOLINT
  bool isStatic() const { return name.empty(); }
  bool isDynamic() const { return !name.empty(); }
  bool operator==(const Dim&) const = default;
};
using Shape = std::vector<Dim>;

std::string dimToString(const Dim& d);
std::string shapeToString(const Shape& s);            // "[N, 4096]"
std::string typeToString(DType t, const Shape& s);    // "bf16[N, 4096]"
bool isStaticShape(const Shape& s);
// Product of the static dims (dynamic ones excluded).
int64_t staticElementCount(const Shape& s);

enum class Op : uint8_t {
  // leaves
  Input, Scalar, Constant, Iota,
  // unary
  Neg, Abs, Exp, Exp2, Log, Log2, Log1p, Expm1, Sqrt, Rsqrt, Reciprocal, Sin,
  Cos, Tanh, Sigmoid, Erf, Relu, Floor, Ceil, Round, IsNan, IsInf, LogicalNot,
  // binary
  Add, Sub, Mul, Div, Pow, Maximum, Minimum, Remainder, Eq, Ne, Lt, Le, Gt,
  Ge, LogicalAnd, LogicalOr,
  // ternary
  Where, Fma,
  // conversion
  Cast,
  // reductions
  Sum, Mean, Max, Min, Prod, ArgMax, ArgMin, Var, Std,
  // contraction
  Matmul,
  // views
  Reshape, Expand, Permute, Slice,
};
inline constexpr int kNumOps = static_cast<int>(Op::Slice) + 1;

enum class OpClass : uint8_t {
  Leaf, Unary, Binary, Ternary, Cast, Reduction, Matmul, View
};

OpClass opClass(Op op);
std::string_view opName(Op op);                 // "add", "rsqrt", ...
std::optional<Op> parseOpName(std::string_view name);
// True for ops computed element by element (unary, binary, ternary, cast).
bool isElementwise(Op op);

struct Node {
  Op op = Op::Input;
  DType dtype = DType::F32;
  Shape shape;
  std::vector<int> inputs;  // operand node ids
  // A Python-like scalar for type promotion: literal constants, runtime
  // scalars and elementwise results of only those. Weak values never
  // promote a tensor (bf16 tensor * 2.5 stays bf16).
  bool weak = false;

  // Attributes; which ones mean something depends on `op`.
  std::string name;           // Input, Scalar: parameter name
  double fvalue = 0;          // Constant of a float dtype
  int64_t ivalue = 0;         // Constant of an int or bool dtype
  std::vector<int64_t> axes;  // reductions: sorted reduced axes;
                              // Permute: the permutation
  int64_t axis = 0;           // Iota: the counting axis; Slice: the axis
  bool keepdim = false;       // reductions
  int64_t correction = 1;     // Var, Std
  bool transA = false;        // Matmul: a is stored [..., K, M]
  bool transB = false;        // Matmul: b is stored [..., N, K]
  bool tf32 = false;          // Matmul of f32: operands rounded to tf32
  int64_t start = 0, end = 0, step = 1;  // Slice, in the input's axis

  int rank() const { return static_cast<int>(shape.size()); }
};

namespace detail {
struct GraphData;
}

class Tensor;

struct GraphOutput {
  std::string name;
  int node = -1;
};

class Graph {
 public:
  Graph();

  // A tensor parameter. Names are unique among parameters and outputs and
  // are identifiers ([A-Za-z_][A-Za-z0-9_]*).
  Tensor input(const std::string& name, DType dtype, const Shape& shape,
               std::source_location loc = std::source_location::current());
  // A runtime scalar parameter (a value passed at launch). Weak for type
  // promotion, like a Python number.
  Tensor scalar(const std::string& name, DType dtype = DType::F32,
                std::source_location loc = std::source_location::current());
  // A 0-dim constant tensor of `dtype` (strong, unlike a literal in an
  // expression). The value is rounded to the dtype.
  Tensor constant(double value, DType dtype,
                  std::source_location loc = std::source_location::current());
  // Marks `t` as an output named `name`. A node may be several outputs.
  void output(const std::string& name, const Tensor& t,
              std::source_location loc = std::source_location::current());

  // --- introspection ---
  int numNodes() const;
  const Node& node(int id) const;
  // Input and Scalar node ids in declaration order: the kernel signature.
  const std::vector<int>& params() const;
  const std::vector<GraphOutput>& outputs() const;
  // Dynamic dim names in order of first appearance among the parameters.
  std::vector<std::string> dynamicDims() const;
  // Live node ids in canonical order: parameters in declaration order, then
  // the rest in post-order from the outputs (operands left to right).
  std::vector<int> canonicalOrder() const;
  Tensor tensor(int id) const;

  // Canonical text form (see text.h for the grammar).
  std::string toText() const;
  // Structural equality of meaning: equal canonical text.
  bool operator==(const Graph& other) const;

  // Appends a node without validation; ops.h validates before calling this.
  int addNode(Node n);
  const std::shared_ptr<detail::GraphData>& data() const { return data_; }

 private:
  explicit Graph(std::shared_ptr<detail::GraphData> d) : data_(std::move(d)) {}
  friend class Tensor;
  std::shared_ptr<detail::GraphData> data_;
};

// A handle on one node of a graph. Cheap to copy.
class Tensor {
 public:
  Tensor() = default;
  bool valid() const { return data_ != nullptr; }
  int id() const { return id_; }
  const Node& node() const;
  DType dtype() const { return node().dtype; }
  const Shape& shape() const { return node().shape; }
  int rank() const { return node().rank(); }
  Graph graph() const { return Graph(data_); }
  bool sameGraph(const Tensor& o) const { return data_ == o.data_; }

 private:
  Tensor(std::shared_ptr<detail::GraphData> d, int id) : data_(std::move(d)), id_(id) {}
  friend class Graph;
  std::shared_ptr<detail::GraphData> data_;
  int id_ = -1;
};

// A copy of `g` with the named dynamic dims replaced by static sizes (the
// others stay dynamic): what `kiln compile --dim N=4096` specializes.
Graph bindDims(const Graph& g, const std::vector<std::pair<std::string, int64_t>>& values);

}  // namespace kiln
