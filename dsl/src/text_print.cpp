// The graph text form's printer: walks the canonical order and prints one
// line per node, then the outputs. The grammar lives in text.h; the parser
// is in text_parse.cpp.
//
// Canonical details the printer commits to (and the parser accepts):
//  - floats print as the shortest decimal that reads back to the same double
//    (std::to_chars), with ".0" added when that decimal looks like an integer
//    ("2.0", "-0.0", "1e+20"); infinities are "inf"/"-inf", every NaN "nan";
//  - attributes print in a fixed order per op, with every attribute the op
//    has (defaults included), so equal nodes print equal lines;
//  - " weak" ends a node's line whenever the node is weak (runtime scalars
//    included), so the line states the node's whole result type.
#include "kiln/dsl/text.h"

#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "text_common.h"

namespace kiln {

// ---------------------------------------------------------------- printing

namespace detail {

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

std::string typeText(DType dtype, const Shape& shape, bool weak) {
  std::string out(dtypeName(dtype));
  if (!shape.empty()) {
    out += '[';
    for (size_t i = 0; i < shape.size(); ++i) {
      if (i) out += ", ";
      out += shape[i].isDynamic() ? shape[i].name : std::to_string(shape[i].size);
    }
    out += ']';
  }
  if (weak) out += " weak";
  return out;
}

}  // namespace detail

namespace {

std::string formatFloat(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, end);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string intList(const std::vector<int64_t>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(v[i]);
  }
  return out + "]";
}

const char* boolText(bool b) { return b ? "true" : "false"; }

// argmax/argmin reduce one axis; the DSL may keep it in `axes` or `axis`.
int64_t argAxis(const Node& n) { return n.axes.size() == 1 ? n.axes[0] : n.axis; }

// " {key = value, ...}" for ops that carry attributes, "" otherwise.
std::string attrText(const Node& n) {
  std::string a;
  auto add = [&](const char* key, const std::string& value) {
    a += a.empty() ? " {" : ", ";
    a += key;
    a += " = ";
    a += value;
  };
  switch (n.op) {
    case Op::Sum: case Op::Mean: case Op::Max: case Op::Min: case Op::Prod:
    case Op::Var: case Op::Std:
      add("axes", intList(n.axes));
      add("keepdim", boolText(n.keepdim));
      if (n.op == Op::Var || n.op == Op::Std) add("correction", std::to_string(n.correction));
      break;
    case Op::ArgMax: case Op::ArgMin:
      add("axis", std::to_string(argAxis(n)));
      add("keepdim", boolText(n.keepdim));
      break;
    case Op::Iota:
      add("axis", std::to_string(n.axis));
      break;
    case Op::Matmul:
      add("transA", boolText(n.transA));
      add("transB", boolText(n.transB));
      if (n.tf32) add("tf32", boolText(true));  // only when set: older texts stay as they were
      break;
    case Op::Permute:
      add("perm", intList(n.axes));
      break;
    case Op::Slice:
      add("axis", std::to_string(n.axis));
      add("start", std::to_string(n.start));
      add("end", std::to_string(n.end));
      add("step", std::to_string(n.step));
      break;
    default:
      break;
  }
  if (!a.empty()) a += '}';
  return a;
}

std::string constantText(const Node& n) {
  if (n.dtype == DType::Bool) return boolText(n.ivalue != 0);
  if (isInteger(n.dtype)) return std::to_string(n.ivalue);
  return formatFloat(n.fvalue);
}

}  // namespace

std::string printGraph(const Graph& g) {
  std::vector<int> order = g.canonicalOrder();
  std::vector<int> number(g.numNodes(), -1);
  for (size_t i = 0; i < order.size(); ++i) number[order[i]] = static_cast<int>(i);

  std::string out(kGraphTextHeader);
  out += '\n';
  for (size_t i = 0; i < order.size(); ++i) {
    const Node& n = g.node(order[i]);
    out += '%';
    out += std::to_string(i);
    out += " = ";
    out += opName(n.op);
    if (n.op == Op::Input || n.op == Op::Scalar) {
      out += ' ';
      out += detail::quoted(n.name);
    } else if (n.op == Op::Constant) {
      out += ' ';
      out += constantText(n);
    }
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      out += k ? ", %" : " %";
      out += std::to_string(number[n.inputs[k]]);
    }
    out += attrText(n);
    out += " : ";
    out += detail::typeText(n.dtype, n.shape, n.weak);
    out += '\n';
  }
  for (const GraphOutput& o : g.outputs()) {
    out += "output ";
    out += detail::quoted(o.name);
    out += " = %";
    out += std::to_string(number[o.node]);
    out += '\n';
  }
  return out;
}

}  // namespace kiln
