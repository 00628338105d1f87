// The graph text form's parser: a line-oriented lexer and parser that
// rebuild the graph through the public DSL entry points, so text is validated
// exactly like user code. The grammar lives in text.h; the printer, and the
// canonical details it commits to (which this parser accepts), in
// text_print.cpp.
#include "kiln/dsl/text.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "kiln/dsl/ops.h"
#include "text_common.h"

namespace kiln {
namespace {

// ----------------------------------------------------------------- lexing

enum class Tok { End, Ident, Number, String, NodeRef, Punct };

struct Token {
  Tok kind = Tok::End;
  std::string text;  // identifier, number, punctuation, or the unescaped string
  int col = 0;       // 1-based byte column
  int ref = -1;      // NodeRef: the number
};

bool isIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isIdentChar(char c) { return isIdentStart(c) || isDigit(c); }

// What a token looked like, for "found ..." in messages.
std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::End: return "end of line";
    case Tok::String: return detail::quoted(t.text);
    default: return "'" + t.text + "'";
  }
}

// -------------------------------------------------------------- parsing

// A parse error that already carries its position.
struct TextError : Error {
  using Error::Error;
};

// DSL messages end with the C++ call site, "(at text_parse.cpp:NNN)" here; the
// text position we prefix is the one that helps the reader.
std::string withoutParserSite(std::string msg) {
  const std::string site = " (at " + formatLocation(std::source_location::current());
  const std::string file = site.substr(0, site.rfind(':') + 1);
  size_t at = msg.rfind(file);
  if (at != std::string::npos && !msg.empty() && msg.back() == ')') msg.erase(at);
  return msg;
}

struct AttrValue {
  enum Kind { Int, Bool, List } kind = Int;
  int64_t i = 0;
  bool b = false;
  std::vector<int64_t> list;
  Token token;  // the value's first token, for messages
};

// The attributes each op accepts, in canonical order.
std::vector<std::string_view> allowedAttrs(Op op) {
  switch (op) {
    case Op::Sum: case Op::Mean: case Op::Max: case Op::Min: case Op::Prod:
      return {"axes", "keepdim"};
    case Op::Var: case Op::Std: return {"axes", "keepdim", "correction"};
    case Op::ArgMax: case Op::ArgMin: return {"axis", "keepdim"};
    case Op::Iota: return {"axis"};
    case Op::Matmul: return {"transA", "transB", "tf32"};
    case Op::Permute: return {"perm"};
    case Op::Slice: return {"axis", "start", "end", "step"};
    default: return {};
  }
}

int operandCount(Op op) {
  switch (opClass(op)) {
    case OpClass::Leaf: return 0;
    case OpClass::Binary: case OpClass::Matmul: return 2;
    case OpClass::Ternary: return 3;
    default: return 1;
  }
}

std::string joinNames(const std::vector<std::string_view>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += ", ";
    out += names[i];
  }
  return out;
}

class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source) {}

  Graph parse(std::string_view text) {
    bool sawHeader = false;
    size_t pos = 0;
    line_ = 0;
    while (pos <= text.size()) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string_view::npos) nl = text.size();
      std::string_view raw = text.substr(pos, nl - pos);
      if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
      ++line_;
      lex(raw);
      if (toks_[0].kind != Tok::End) {
        if (!sawHeader) {
          parseHeader();
          sawHeader = true;
        } else {
          parseStatement();
        }
      }
      if (nl == text.size()) break;
      pos = nl + 1;
    }
    if (!sawHeader) {
      line_ = 1;
      fail(1, "header '" + std::string(kGraphTextHeader) + "'", "end of input");
    }
    return graph_;
  }

 private:
  [[noreturn]] void fail(int col, const std::string& expected, const std::string& found) {
    throw TextError(position(col) + "expected " + expected + ", found " + found);
  }
  [[noreturn]] void failAt(const Token& t, const std::string& expected) {
    fail(t.col, expected, describe(t));
  }
  std::string position(int col) const {
    return std::string(source_) + ":" + std::to_string(line_) + ":" + std::to_string(col) + ": ";
  }

  // Splits one line into tokens (a '#' outside a string ends it).
  void lex(std::string_view s) {
    toks_.clear();
    pos_ = 0;
    size_t i = 0;
    while (true) {
      while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
      Token t;
      t.col = static_cast<int>(i) + 1;
      if (i >= s.size() || s[i] == '#') {
        toks_.push_back(t);
        return;
      }
      char c = s[i];
      if (isIdentStart(c)) {
        size_t j = i;
        // '.' is allowed inside words so the header's "kiln.graph" is one.
        while (j < s.size() && (isIdentChar(s[j]) || s[j] == '.')) ++j;
        t.kind = Tok::Ident;
        t.text = std::string(s.substr(i, j - i));
        i = j;
      } else if (isDigit(c) || c == '-' || c == '.') {
        size_t j = i + 1;
        while (j < s.size() &&
               (isIdentChar(s[j]) || s[j] == '.' ||
                ((s[j] == '-' || s[j] == '+') && (s[j - 1] == 'e' || s[j - 1] == 'E'))))
          ++j;
        t.kind = Tok::Number;
        t.text = std::string(s.substr(i, j - i));
        i = j;
      } else if (c == '%') {
        size_t j = i + 1;
        while (j < s.size() && isIdentChar(s[j])) ++j;
        t.kind = Tok::NodeRef;
        t.text = std::string(s.substr(i, j - i));
        std::string_view digits = s.substr(i + 1, j - i - 1);
        int value = -1;
        auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
        if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size() ||
            !std::all_of(digits.begin(), digits.end(), isDigit))
          fail(t.col, "a node number like '%0'", "'" + t.text + "'");
        t.ref = value;
        i = j;
      } else if (c == '"') {
        size_t j = i + 1;
        std::string value;
        while (j < s.size() && s[j] != '"') {
          if (s[j] == '\\' && j + 1 < s.size()) ++j;
          value += s[j++];
        }
        if (j >= s.size()) fail(static_cast<int>(j) + 1, "closing '\"'", "end of line");
        t.kind = Tok::String;
        t.text = std::move(value);
        i = j + 1;
      } else if (c == '=' || c == ':' || c == ',' || c == '{' || c == '}' || c == '[' ||
                 c == ']') {
        t.kind = Tok::Punct;
        t.text = std::string(1, c);
        ++i;
      } else {
        fail(t.col, "a token", "'" + std::string(1, c) + "'");
      }
      toks_.push_back(std::move(t));
    }
  }

  const Token& peek() const { return toks_[pos_]; }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (t.kind != Tok::End) ++pos_;
    return t;
  }
  bool peekPunct(char c) const { return peek().kind == Tok::Punct && peek().text[0] == c; }
  bool peekIdent(std::string_view word) const {
    return peek().kind == Tok::Ident && peek().text == word;
  }
  const Token& expectPunct(char c) {
    if (!peekPunct(c)) failAt(peek(), std::string("'") + c + "'");
    return next();
  }
  const Token& expect(Tok kind, const std::string& what) {
    if (peek().kind != kind) failAt(peek(), what);
    return next();
  }
  void expectEnd(const std::string& what) {
    if (peek().kind != Tok::End) failAt(peek(), what);
  }

  void parseHeader() {
    const Token& magic = peek();
    if (magic.kind != Tok::Ident || magic.text != "kiln.graph")
      failAt(magic, "header '" + std::string(kGraphTextHeader) + "'");
    next();
    const Token& version = peek();
    if (version.kind != Tok::Ident || version.text != "v1")
      failAt(version, "graph text version 'v1'");
    next();
    expectEnd("end of line after the header");
  }

  void parseStatement() {
    if (peek().kind == Tok::NodeRef) return parseNode();
    if (peekIdent("output")) return parseOutput();
    failAt(peek(), "a node '%" + std::to_string(nodes_.size()) + " = ...' or 'output'");
  }

  Tensor operand(const Token& t) {
    if (t.ref < 0 || t.ref >= static_cast<int>(nodes_.size())) {
      std::string range = nodes_.empty() ? "none defined yet"
                                         : "%0 to %" + std::to_string(nodes_.size() - 1);
      failAt(t, "an earlier node (" + range + ")");
    }
    return nodes_[t.ref];
  }

  void parseOutput() {
    next();  // 'output'
    const Token& name = expect(Tok::String, "an output name in quotes");
    expectPunct('=');
    const Token& ref = expect(Tok::NodeRef, "a node like '%0'");
    Tensor t = operand(ref);
    expectEnd("end of line after the output");
    try {
      graph_.output(name.text, t);
    } catch (const Error& e) {
      throw Error(position(name.col) + withoutParserSite(e.what()));
    }
  }

  int64_t parseInt(const Token& t, const std::string& what) {
    int64_t v = 0;
    if (t.kind != Tok::Number) failAt(t, what);
    auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (ec != std::errc() || p != t.text.data() + t.text.size()) failAt(t, what);
    return v;
  }

  double parseFloat(const Token& t) {
    const std::string what = "a number (decimal, 'inf', '-inf' or 'nan')";
    if (t.kind != Tok::Number && !(t.kind == Tok::Ident && (t.text == "inf" || t.text == "nan")))
      failAt(t, what);
    double v = 0;
    auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (ec != std::errc() || p != t.text.data() + t.text.size()) failAt(t, what);
    return v;
  }

  bool parseBool(const Token& t, const std::string& what) {
    if (t.kind == Tok::Ident && t.text == "true") return true;
    if (t.kind == Tok::Ident && t.text == "false") return false;
    failAt(t, what);
  }

  AttrValue parseAttrValue() {
    AttrValue v;
    v.token = peek();
    if (peekPunct('[')) {
      next();
      v.kind = AttrValue::List;
      if (!peekPunct(']')) {
        while (true) {
          v.list.push_back(parseInt(next(), "an integer"));
          if (peekPunct(']')) break;
          if (!peekPunct(',')) failAt(peek(), "',' or ']'");
          next();
        }
      }
      next();  // ']'
    } else if (peek().kind == Tok::Ident && (peek().text == "true" || peek().text == "false")) {
      v.kind = AttrValue::Bool;
      v.b = next().text == "true";
    } else {
      v.kind = AttrValue::Int;
      v.i = parseInt(next(), "an attribute value (integer, true/false or [list])");
    }
    return v;
  }

  // The attributes of one node, checked against what its op accepts.
  class Attrs {
   public:
    Attrs(Parser& p, Op op, int opCol) : p_(p), op_(op), opCol_(opCol) {}
    std::map<std::string, AttrValue, std::less<>> values;

    std::optional<int64_t> getInt(std::string_view key) {
      const AttrValue* v = find(key);
      if (!v) return std::nullopt;
      if (v->kind != AttrValue::Int) p_.failAt(v->token, "an integer for '" + std::string(key) + "'");
      return v->i;
    }
    int64_t requireInt(std::string_view key) {
      auto v = getInt(key);
      if (!v) missing(key);
      return *v;
    }
    bool getBool(std::string_view key, bool dflt) {
      const AttrValue* v = find(key);
      if (!v) return dflt;
      if (v->kind != AttrValue::Bool)
        p_.failAt(v->token, "true or false for '" + std::string(key) + "'");
      return v->b;
    }
    std::optional<std::vector<int64_t>> getList(std::string_view key) {
      const AttrValue* v = find(key);
      if (!v) return std::nullopt;
      if (v->kind != AttrValue::List)
        p_.failAt(v->token, "a list like [0, 1] for '" + std::string(key) + "'");
      return v->list;
    }
    std::vector<int64_t> requireList(std::string_view key) {
      auto v = getList(key);
      if (!v) missing(key);
      return *v;
    }

   private:
    const AttrValue* find(std::string_view key) const {
      auto it = values.find(key);
      return it == values.end() ? nullptr : &it->second;
    }
    [[noreturn]] void missing(std::string_view key) {
      p_.fail(opCol_, "attribute '" + std::string(key) + "' for " + std::string(opName(op_)),
              "none");
    }
    Parser& p_;
    Op op_;
    int opCol_;
  };

  void parseAttrs(Attrs& attrs, Op op) {
    std::vector<std::string_view> allowed = allowedAttrs(op);
    const Token& brace = next();  // '{'
    if (allowed.empty())
      failAt(brace, "':' (" + std::string(opName(op)) + " takes no attributes)");
    while (true) {
      const Token& key = peek();
      bool known = key.kind == Tok::Ident &&
                   std::find(allowed.begin(), allowed.end(), std::string_view(key.text)) != allowed.end();
      if (!known)
        failAt(key, "an attribute of " + std::string(opName(op)) + " (" + joinNames(allowed) + ")");
      if (attrs.values.count(key.text))
        failAt(key, "a new attribute (each at most once)");
      std::string name = next().text;
      expectPunct('=');
      attrs.values[name] = parseAttrValue();
      if (peekPunct('}')) break;
      if (!peekPunct(',')) failAt(peek(), "',' or '}'");
      next();
    }
    next();  // '}'
  }

  Shape parseShape() {
    Shape shape;
    if (!peekPunct('[')) return shape;
    next();
    while (true) {
      const Token& d = peek();
      if (d.kind == Tok::Number) {
        int64_t size = parseInt(d, "a dimension (a size >= 0 or a name)");
        if (size < 0) failAt(d, "a dimension (a size >= 0 or a name)");
        shape.emplace_back(size);
      } else if (d.kind == Tok::Ident) {
        shape.emplace_back(d.text);
      } else {
        failAt(d, "a dimension (a size >= 0 or a name)");
      }
      next();
      if (peekPunct(']')) break;
      if (!peekPunct(',')) failAt(peek(), "',' or ']'");
      next();
    }
    next();  // ']'
    return shape;
  }

  void parseNode() {
    const Token& num = next();
    if (num.ref != static_cast<int>(nodes_.size()))
      failAt(num, "node number '%" + std::to_string(nodes_.size()) + "'");
    expectPunct('=');
    const Token& opTok = peek();
    std::optional<Op> parsedOp =
        opTok.kind == Tok::Ident ? parseOpName(opTok.text) : std::nullopt;
    if (!parsedOp) failAt(opTok, "an op name");
    next();
    const Op op = *parsedOp;

    // Leaf payloads and operands.
    std::string paramName;
    Token constTok;
    std::vector<Tensor> args;
    if (op == Op::Input || op == Op::Scalar) {
      paramName = expect(Tok::String, "a parameter name in quotes").text;
    } else if (op == Op::Constant) {
      constTok = next();
      if (constTok.kind == Tok::End) failAt(constTok, "a constant value");
    } else {
      const int want = operandCount(op);
      int lastCol = opTok.col;
      if (peek().kind == Tok::NodeRef) {
        while (true) {
          const Token& ref = next();
          lastCol = ref.col;
          args.push_back(operand(ref));
          if (!peekPunct(',')) break;
          next();
        }
      }
      if (static_cast<int>(args.size()) != want) {
        std::string expected = std::to_string(want) + " operand" + (want == 1 ? "" : "s") +
                               " for " + std::string(opName(op));
        fail(args.empty() ? peek().col : lastCol, expected, std::to_string(args.size()));
      }
    }

    Attrs attrs(*this, op, opTok.col);
    if (peekPunct('{')) parseAttrs(attrs, op);
    expectPunct(':');
    const Token& dtypeTok = peek();
    std::optional<DType> dtype =
        dtypeTok.kind == Tok::Ident ? parseDType(dtypeTok.text) : std::nullopt;
    if (!dtype) failAt(dtypeTok, "a dtype (bool, i32, i64, f16, bf16, f32)");
    next();
    Shape shape = parseShape();
    bool weak = false;
    if (peekIdent("weak")) {
      next();
      weak = true;
    }
    expectEnd("end of line after the type");

    Tensor t;
    try {
      t = build(op, args, attrs, paramName, constTok, *dtype, shape, weak);
    } catch (const TextError&) {
      throw;  // already positioned
    } catch (const Error& e) {
      throw Error(position(opTok.col) + withoutParserSite(e.what()));
    }
    const Node& n = t.node();
    if (n.dtype != *dtype || n.shape != shape || n.weak != weak) {
      fail(dtypeTok.col,
           "'" + detail::typeText(n.dtype, n.shape, n.weak) + "' (the type the DSL infers)",
           "'" + detail::typeText(*dtype, shape, weak) + "'");
    }
    nodes_.push_back(t);
  }

  Tensor build(Op op, const std::vector<Tensor>& a, Attrs& attrs, const std::string& paramName,
               const Token& constTok, DType dtype, const Shape& shape, bool weak) {
    switch (op) {
      case Op::Input: return graph_.input(paramName, dtype, shape);
      case Op::Scalar: return graph_.scalar(paramName, dtype);
      case Op::Constant: {
        double f = 0;
        int64_t i = 0;
        if (dtype == DType::Bool) {
          i = parseBool(constTok, "true or false for a bool constant") ? 1 : 0;
        } else if (isInteger(dtype)) {
          i = parseInt(constTok, "an integer for an " + std::string(dtypeName(dtype)) + " constant");
        } else {
          f = parseFloat(constTok);
        }
        return makeConstant(graph_, f, i, dtype, weak);
      }
      case Op::Iota: return iota(graph_, shape, attrs.requireInt("axis"), dtype);
      case Op::Where: return kiln::where(a[0], a[1], a[2]);
      case Op::Fma: return fma(a[0], a[1], a[2]);
      case Op::Cast: return cast(a[0], dtype);
      case Op::Sum: case Op::Mean: case Op::Max: case Op::Min: case Op::Prod:
      case Op::Var: case Op::Std: {
        Axes axes = attrs.getList("axes").value_or(std::vector<int64_t>{});
        bool keepdim = attrs.getBool("keepdim", false);
        switch (op) {
          case Op::Sum: return sum(a[0], axes, keepdim);
          case Op::Mean: return mean(a[0], axes, keepdim);
          case Op::Max: return max(a[0], axes, keepdim);
          case Op::Min: return min(a[0], axes, keepdim);
          case Op::Prod: return prod(a[0], axes, keepdim);
          case Op::Var: return var(a[0], axes, attrs.getInt("correction").value_or(1), keepdim);
          default: return kiln::std(a[0], axes, attrs.getInt("correction").value_or(1), keepdim);
        }
      }
      case Op::ArgMax:
        return argmax(a[0], attrs.requireInt("axis"), attrs.getBool("keepdim", false));
      case Op::ArgMin:
        return argmin(a[0], attrs.requireInt("axis"), attrs.getBool("keepdim", false));
      case Op::Matmul:
        return matmul(a[0], a[1],
                      MatmulOptions{attrs.getBool("transA", false), attrs.getBool("transB", false),
                                    attrs.getBool("tf32", false)});
      case Op::Reshape: return reshape(a[0], shape);
      case Op::Expand: return expand(a[0], shape);
      case Op::Permute: return permute(a[0], attrs.requireList("perm"));
      case Op::Slice:
        return slice(a[0], attrs.requireInt("axis"), attrs.requireInt("start"),
                     attrs.requireInt("end"), attrs.getInt("step").value_or(1));
      default:
        break;
    }
    switch (opClass(op)) {
      case OpClass::Unary: return unary(op, a[0]);
      case OpClass::Binary: return binary(op, a[0], a[1]);
      default: throw Error("op " + std::string(opName(op)) + " cannot be parsed");
    }
  }

  std::string_view source_;
  int line_ = 0;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  Graph graph_;
  std::vector<Tensor> nodes_;
};

}  // namespace

Graph parseGraph(std::string_view text, std::string_view sourceName) {
  return Parser(sourceName).parse(text);
}

Graph parseGraphFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read graph file '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error("cannot read graph file '" + path + "'");
  return parseGraph(ss.str(), path);
}

}  // namespace kiln
