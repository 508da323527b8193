// The parser of the graph IR's text form (grammar in include/kiln/Graph/TextIR.h). Nodes
// are created generically from the operator table: the kind name selects a generated
// class, `initOperands` wires the operands, an AttrVisitor assigns the attributes by name,
// and the printed result types are set; each function must then pass verify().
//
// Every failure is an Error with ErrorCode::ModelParse and a `line:column:` prefix; the
// parser never aborts on its input and never recurses, so deep or huge inputs are safe.

#include "kiln/Graph/Graph.h"
#include "kiln/Graph/TextIR.h"

#include <cctype>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace kiln {

namespace {

/// Constants larger than this are rejected rather than allocated.
constexpr uint64_t kMaxConstantBytes = uint64_t(1) << 32;

bool isBareNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '.' || c == '$' || c == '-';
}
bool isIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isIdentChar(char c) { return isIdentStart(c) || isDigit(c); }

/// A source position, 1-based.
struct Pos {
  unsigned line = 1, col = 1;
};

/// A numeric literal: its text, and its value as an integer (when it is one) and a double.
struct Number {
  Pos pos;
  std::string text;
  bool isInt = false;
  bool neg = false;
  bool overflow = false; ///< The integer magnitude does not fit in 64 bits.
  uint64_t mag = 0;
  double value = 0;
};

/// A parsed attribute value; its C++ type is decided when the node's visitor asks for it.
struct AttrValue {
  enum Kind { Num, Bool, List, Str } kind = Num;
  Pos pos;
  Number num;
  bool b = false;
  std::vector<Number> list;
  std::string str;
  bool used = false;
};

Error parseError(Pos p, const std::string &msg) {
  return makeError(ErrorCode::ModelParse, p.line, ":", p.col, ": ", msg);
}

Error toInt64(const Number &n, int64_t &out) {
  if (!n.isInt)
    return parseError(n.pos, "expected an integer, found '" + n.text + "'");
  uint64_t lim = n.neg ? uint64_t(1) << 63 : (uint64_t(1) << 63) - 1;
  if (n.overflow || n.mag > lim)
    return parseError(n.pos, "integer '" + n.text + "' is out of range");
  out = n.neg ? int64_t(0 - n.mag) : int64_t(n.mag);
  return Error::success();
}

Error toDim(const Number &n, dim_t &out) {
  if (!n.isInt || (n.neg && n.mag != 0))
    return parseError(n.pos, "expected a non-negative integer, found '" + n.text + "'");
  if (n.overflow)
    return parseError(n.pos, "integer '" + n.text + "' is out of range");
  out = n.mag;
  return Error::success();
}

Error toInRange(const Number &n, int64_t lo, int64_t hi, int64_t &out) {
  KILN_RETURN_IF_ERR(toInt64(n, out));
  if (out < lo || out > hi)
    return parseError(n.pos, "value " + n.text + " is out of range [" + std::to_string(lo) +
                                 ", " + std::to_string(hi) + "]");
  return Error::success();
}

Error toFloat(const Number &n, float &out) {
  // Finite values from FLT_MAX + half an ulp on round to infinity.
  const double limit = double(FLT_MAX) + std::ldexp(1.0, 103);
  if (std::isfinite(n.value) && std::fabs(n.value) >= limit)
    return parseError(n.pos, "value " + n.text + " is out of range for float");
  out = float(n.value);
  return Error::success();
}

template <typename N> Node *makeNode(const std::string &name, const std::vector<NodeValue> &ops) {
  auto *n = new N(name);
  n->initOperands(ops); // appends the operands and the result slots
  return n;
}

/// Creates a node of an operator kind with operands \p ops; null for storage kinds.
Node *newNode(NodeKind k, const std::string &name, const std::vector<NodeValue> &ops) {
  switch (k) {
  case NodeKind::Placeholder:
  case NodeKind::Constant:
    return nullptr;
#define DEF_NODE(NAME)                                                                         \
  case NodeKind::NAME:                                                                         \
    return makeNode<NAME##Node>(name, ops);
#include "kiln/Graph/AutoGenNodes.def"
  }
  return nullptr;
}

/// The operand signature of an operator, read from the generated operand names: fixed
/// operands have their table names, a trailing variadic list is named "List#k", and
/// indices past the end fall back to "Input<k>".
struct OperandShape {
  unsigned fixed = 0;
  bool variadic = false;
  std::string names; ///< "Input, Filter, Bias", for messages.
};
OperandShape operandShape(const Node &n) {
  OperandShape s;
  for (unsigned i = 0; i < 64; i++) {
    std::string nm = n.getInputName(i);
    if (nm.find('#') != std::string::npos) {
      s.variadic = true;
      s.names += std::string(i ? ", " : "") + nm.substr(0, nm.find('#')) + "...";
      break;
    }
    if (nm == "Input" + std::to_string(i))
      break;
    s.names += (i ? ", " : "") + nm;
    s.fixed = i + 1;
  }
  return s;
}

/// Assigns parsed attribute values by name, converting to each attribute's C++ type.
class AttrSetter : public AttrVisitor {
public:
  AttrSetter(std::vector<std::pair<std::string, AttrValue>> &attrs, const std::string &kind,
             Pos kindPos)
      : attrs_(attrs), kind_(kind), kindPos_(kindPos) {}

  Error err = Error::success();
  std::string declared; ///< Names the operator declares, for messages.

  void visit(const char *name, dim_t &v) override {
    if (AttrValue *a = find(name, AttrValue::Num, "an integer"))
      fail(toDim(a->num, v));
  }
  void visit(const char *name, int64_t &v) override {
    if (AttrValue *a = find(name, AttrValue::Num, "an integer"))
      fail(toInt64(a->num, v));
  }
  void visit(const char *name, float &v) override {
    if (AttrValue *a = find(name, AttrValue::Num, "a number"))
      fail(toFloat(a->num, v));
  }
  void visit(const char *name, bool &v) override {
    if (AttrValue *a = find(name, AttrValue::Bool, "true or false"))
      v = a->b;
  }
  void visit(const char *name, std::vector<dim_t> &v) override { list(name, v, toDim); }
  void visit(const char *name, std::vector<int64_t> &v) override { list(name, v, toInt64); }
  void visit(const char *name, std::string &v) override {
    if (AttrValue *a = find(name, AttrValue::Str, "a string"))
      v = a->str;
  }

private:
  template <typename T, typename Conv> void list(const char *name, std::vector<T> &v, Conv c) {
    if (AttrValue *a = find(name, AttrValue::List, "a list [...]")) {
      v.assign(a->list.size(), 0);
      for (size_t i = 0; i < a->list.size(); i++)
        fail(c(a->list[i], v[i]));
    }
  }
  void fail(Error e) {
    if (e && !err)
      err = std::move(e);
  }
  AttrValue *find(const char *name, AttrValue::Kind kind, const char *expected) {
    declared += (declared.empty() ? "" : ", ") + std::string(name);
    for (auto &[n, a] : attrs_) {
      if (n != name)
        continue;
      a.used = true;
      if (a.kind != kind) {
        fail(parseError(a.pos, "attribute '" + n + "' of " + kind_ + " expects " + expected));
        return nullptr;
      }
      return &a;
    }
    fail(parseError(kindPos_, kind_ + " requires attribute '" + name + "'"));
    return nullptr;
  }

  std::vector<std::pair<std::string, AttrValue>> &attrs_;
  const std::string &kind_;
  Pos kindPos_;
};

/// A recursive-descent parser over the raw text that tracks line and column.
class TextParser {
public:
  TextParser(Module &m, const std::string &text) : m_(m), text_(text) {}

  /// Parses declarations until the end of the text.
  Error parseAll() {
    while (true) {
      skipSpace();
      if (atEnd())
        return Error::success();
      Pos p = here();
      std::string kw = isIdentStart(peek()) ? ident() : std::string();
      if (kw == "placeholder")
        KILN_RETURN_IF_ERR(parsePlaceholder());
      else if (kw == "constant")
        KILN_RETURN_IF_ERR(parseConstant());
      else if (kw == "function")
        KILN_RETURN_IF_ERR(parseFunction(p));
      else
        return parseError(p, "expected 'placeholder', 'constant' or 'function', found " +
                                 (kw.empty() ? describeHere() : "'" + kw + "'"));
    }
  }

  std::vector<Function *> addedFunctions;
  std::vector<Constant *> addedConstants;

private:
  // ---- Characters and tokens.

  bool atEnd() const { return pos_ >= text_.size(); }
  char peek() const { return atEnd() ? '\0' : text_[pos_]; }
  Pos here() const { return cur_; }
  void advance() {
    if (atEnd())
      return;
    if (text_[pos_++] == '\n') {
      cur_.line++;
      cur_.col = 1;
    } else {
      cur_.col++;
    }
  }
  /// Skips whitespace and `//` comments.
  void skipSpace() {
    while (!atEnd()) {
      char c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
        while (!atEnd() && peek() != '\n')
          advance();
      } else {
        break;
      }
    }
  }
  std::string describeHere() const {
    if (atEnd())
      return "end of input";
    unsigned char c = static_cast<unsigned char>(peek());
    if (c < 0x20 || c >= 0x7f)
      return "byte " + std::to_string(unsigned(c));
    return "'" + std::string(1, char(c)) + "'";
  }
  /// Skips space; consumes \p c if it is next.
  bool consume(char c) {
    skipSpace();
    if (peek() != c || atEnd())
      return false;
    advance();
    return true;
  }
  Error expect(char c, const char *context) {
    if (consume(c))
      return Error::success();
    return parseError(here(), std::string("expected '") + c + "' " + context + ", found " +
                                  describeHere());
  }
  /// Parses `item (',' item)*` up to \p close (the opener is consumed); may be empty.
  template <typename F> Error commaList(char close, const char *what, F item) {
    if (consume(close))
      return Error::success();
    while (true) {
      KILN_RETURN_IF_ERR(item());
      if (consume(close))
        return Error::success();
      KILN_RETURN_IF_ERR(expect(',', what));
    }
  }
  /// An identifier at the current position (which must start one).
  std::string ident() {
    size_t b = pos_;
    while (!atEnd() && isIdentChar(peek()))
      advance();
    return text_.substr(b, pos_ - b);
  }
  /// True when the identifier at the current position is \p w.
  bool startsWord(const char *w) const {
    size_t n = std::strlen(w);
    return text_.compare(pos_, n, w) == 0 &&
           (pos_ + n >= text_.size() || !isIdentChar(text_[pos_ + n]));
  }
  /// Skips space and reads an identifier, or returns an error naming \p what.
  Expected<std::string> expectIdent(const char *what) {
    skipSpace();
    if (!isIdentStart(peek()))
      return parseError(here(), std::string("expected ") + what + ", found " + describeHere());
    return ident();
  }

  /// A string literal with C escapes (the current character is the opening quote).
  Expected<std::string> quoted() {
    Pos start = here();
    advance();
    std::string s;
    while (true) {
      if (atEnd() || peek() == '\n')
        return parseError(start, "unterminated string");
      char c = peek();
      advance();
      if (c == '"')
        return s;
      if (c != '\\') {
        s += c;
        continue;
      }
      Pos ep = here();
      char e = peek();
      advance();
      if (e == '"' || e == '\\')
        s += e;
      else if (e == 'n')
        s += '\n';
      else if (e == 't')
        s += '\t';
      else if (e == 'x' && pos_ + 1 < text_.size() && std::isxdigit(uint8_t(text_[pos_])) &&
               std::isxdigit(uint8_t(text_[pos_ + 1]))) {
        s += char(std::stoi(text_.substr(pos_, 2), nullptr, 16));
        advance();
        advance();
      } else {
        return parseError(ep, "invalid escape in string (use \\\" \\\\ \\n \\t \\xHH)");
      }
    }
  }

  /// A name after a sigil: bare characters, or a quoted string. No space after the sigil.
  Expected<std::string> name(const char *what) {
    Pos p = here();
    std::string s;
    if (peek() == '"') {
      KILN_ASSIGN_OR_RETURN(s, quoted());
    } else {
      size_t b = pos_;
      while (!atEnd() && isBareNameChar(peek()))
        advance();
      s = text_.substr(b, pos_ - b);
      if (s.empty())
        return parseError(p, std::string("expected ") + what + ", found " + describeHere());
    }
    if (s.empty())
      return parseError(p, "a name must not be empty");
    return s;
  }

  /// A decimal integer or float literal; `inf`, `nan` with an optional sign.
  Expected<Number> number() {
    skipSpace();
    Number n;
    n.pos = here();
    size_t b = pos_;
    if (peek() == '-' || peek() == '+') {
      n.neg = peek() == '-';
      advance();
    }
    if (isIdentStart(peek())) {
      std::string w = ident();
      if (w != "inf" && w != "nan")
        return parseError(n.pos, "expected a number, found '" + text_.substr(b, pos_ - b) + "'");
      n.text = text_.substr(b, pos_ - b);
      n.value = w == "nan" ? std::numeric_limits<double>::quiet_NaN()
                           : (n.neg ? -1 : 1) * std::numeric_limits<double>::infinity();
      return n;
    }
    size_t digits = 0;
    n.isInt = true;
    while (isDigit(peek())) {
      uint64_t d = uint64_t(peek() - '0');
      if (n.mag > (std::numeric_limits<uint64_t>::max() - d) / 10)
        n.overflow = true;
      n.mag = n.mag * 10 + d;
      digits++;
      advance();
    }
    if (peek() == '.') {
      n.isInt = false;
      advance();
      for (; isDigit(peek()); advance())
        digits++;
    }
    if (digits && (peek() == 'e' || peek() == 'E')) {
      n.isInt = false;
      advance();
      if (peek() == '-' || peek() == '+')
        advance();
      if (!isDigit(peek()))
        return parseError(here(), "expected exponent digits, found " + describeHere());
      while (isDigit(peek()))
        advance();
    }
    n.text = text_.substr(b, pos_ - b);
    if (!digits)
      return parseError(n.pos, "expected a number, found " +
                                   (n.text.empty() ? describeHere() : "'" + n.text + "'"));
    n.value = std::strtod(n.text.c_str(), nullptr);
    return n;
  }

  // ---- Types and data.

  Expected<TypeRef> type() {
    skipSpace();
    Pos p = here();
    KILN_ASSIGN_OR_RETURN(std::string kn, expectIdent("a type"));
    ElemKind kind;
    if (!parseElemKind(kn, kind))
      return parseError(p, "unknown element kind '" + kn + "'");
    KILN_RETURN_IF_ERR(expect('<', "after the element kind"));
    Dims dims;
    uint64_t bytes = elemSize(kind);
    skipSpace();
    if (isDigit(peek())) {
      while (true) {
        KILN_ASSIGN_OR_RETURN(Number d, number());
        dim_t v;
        KILN_RETURN_IF_ERR(toDim(d, v));
        if (dims.size() == kMaxDims)
          return parseError(d.pos, "a type has at most " + std::to_string(kMaxDims) +
                                       " dimensions");
        dims.push_back(v);
        bytes = v && bytes > std::numeric_limits<uint64_t>::max() / 2 / v ? ~uint64_t(0)
                                                                          : bytes * v;
        if (!consume('x'))
          break;
        skipSpace();
        if (!isDigit(peek()))
          return parseError(here(), "expected a dimension, found " + describeHere());
      }
    }
    if (bytes == ~uint64_t(0))
      return parseError(p, "type is too large");
    float scale = 1.0f;
    int64_t offset = 0;
    if (isQuantized(kind)) {
      KILN_RETURN_IF_ERR(expect(':', "before the scale of a quantized type"));
      KILN_ASSIGN_OR_RETURN(Number s, number());
      KILN_RETURN_IF_ERR(toFloat(s, scale));
      if (!std::isfinite(scale))
        return parseError(s.pos, "the scale of a quantized type must be finite");
      KILN_RETURN_IF_ERR(expect(':', "before the offset of a quantized type"));
      KILN_ASSIGN_OR_RETURN(Number o, number());
      KILN_RETURN_IF_ERR(toInRange(o, INT32_MIN, INT32_MAX, offset));
    } else if (consume(':')) {
      return parseError(p, "only quantized element kinds have a scale and an offset");
    }
    KILN_RETURN_IF_ERR(expect('>', "to close the type"));
    return m_.uniqueType(Type(kind, dims, scale, int32_t(offset)));
  }

  /// Parses element \p i of \p t from the text (quantized kinds: the raw integer).
  Error element(Tensor &t, size_t i) {
    skipSpace();
    ElemKind k = t.getElementType();
    if (k == ElemKind::Bool && (startsWord("true") || startsWord("false"))) {
      t.getHandle<bool>().raw(i) = ident() == "true";
      return Error::success();
    }
    KILN_ASSIGN_OR_RETURN(Number n, number());
    int64_t v = 0;
    if (isFloatKind(k)) {
      float f;
      KILN_RETURN_IF_ERR(toFloat(n, f));
      t.setFromDouble(i, f); // exact for float; one rounding for float16 and bfloat16
    } else if (k == ElemKind::Int64I) {
      KILN_RETURN_IF_ERR(toInt64(n, v));
      t.getHandle<int64_t>().raw(i) = v; // not through double: all 64 bits are kept
    } else {
      int64_t lo = k == ElemKind::Int8Q ? INT8_MIN : k == ElemKind::UInt8Q ? 0
                   : k == ElemKind::Bool ? 0 : INT32_MIN;
      int64_t hi = k == ElemKind::Int8Q ? INT8_MAX : k == ElemKind::UInt8Q ? UINT8_MAX
                   : k == ElemKind::Bool ? 1 : INT32_MAX;
      KILN_RETURN_IF_ERR(toInRange(n, lo, hi, v));
      t.setFromDouble(i, double(v)); // exact within the range
    }
    return Error::success();
  }

  /// `[v, ...]`, `splat(v)` or `elided(hash)` for a constant of type \p ty.
  Expected<Tensor> payload(TypeRef ty, Pos declPos) {
    if (uint64_t(ty->sizeInBytes()) > kMaxConstantBytes)
      return parseError(declPos, "constant of type " + ty->toString() + " is too large");
    skipSpace();
    Pos p = here();
    Tensor t(*ty);
    size_t n = t.size();
    if (consume('[')) {
      size_t i = 0;
      KILN_RETURN_IF_ERR(commaList(']', "between values", [&]() -> Error {
        skipSpace();
        if (i == n)
          return parseError(here(), "too many values for " + ty->toString() + " (" +
                                        std::to_string(n) + " expected)");
        return element(t, i++);
      }));
      if (i != n)
        return parseError(p, "expected " + std::to_string(n) + " values for " +
                                 ty->toString() + ", found " + std::to_string(i));
      return t;
    }
    std::string w = isIdentStart(peek()) ? ident() : "";
    if (w == "splat") {
      KILN_RETURN_IF_ERR(expect('(', "after 'splat'"));
      if (n == 0)
        return parseError(p, "splat of an empty type");
      KILN_RETURN_IF_ERR(element(t, 0));
      KILN_RETURN_IF_ERR(expect(')', "after the splat value"));
      size_t sz = ty->elemBytes();
      char *d = t.getUnsafePtr();
      for (size_t i = 1; i < n; i++)
        std::memcpy(d + i * sz, d, sz);
      return t;
    }
    if (w == "elided") {
      KILN_RETURN_IF_ERR(expect('(', "after 'elided'"));
      skipSpace();
      while (isIdentChar(peek()))
        advance();
      KILN_RETURN_IF_ERR(expect(')', "after the elided hash"));
      return t; // zero-filled
    }
    return parseError(p, "expected constant data ('[', 'splat' or 'elided'), found " +
                             (w.empty() ? describeHere() : "'" + w + "'"));
  }

  // ---- Declarations.

  Expected<std::string> storageName() {
    KILN_RETURN_IF_ERR(expect('@', "before a storage name"));
    Pos p = here();
    KILN_ASSIGN_OR_RETURN(std::string n, name("a storage name"));
    if (m_.getPlaceholderByName(n) || m_.getConstantByName(n))
      return parseError(p, "duplicate storage name '@" + n + "'");
    return n;
  }

  Error parsePlaceholder() {
    KILN_ASSIGN_OR_RETURN(std::string n, storageName());
    KILN_RETURN_IF_ERR(expect(':', "before the placeholder type"));
    KILN_ASSIGN_OR_RETURN(TypeRef ty, type());
    m_.createPlaceholder(ty, n);
    return Error::success();
  }

  Error parseConstant() {
    Pos p = here();
    KILN_ASSIGN_OR_RETURN(std::string n, storageName());
    KILN_RETURN_IF_ERR(expect(':', "before the constant type"));
    KILN_ASSIGN_OR_RETURN(TypeRef ty, type());
    KILN_RETURN_IF_ERR(expect('=', "before the constant data"));
    KILN_ASSIGN_OR_RETURN(Tensor t, payload(ty, p));
    addedConstants.push_back(m_.createConstant(n, std::move(t)));
    return Error::success();
  }

  Error parseFunction(Pos p) {
    skipSpace();
    Pos np = here();
    KILN_ASSIGN_OR_RETURN(std::string n, name("a function name"));
    if (m_.getFunction(n))
      return parseError(np, "duplicate function name '" + n + "'");
    KILN_RETURN_IF_ERR(expect('{', "to open the function body"));
    Function *f = m_.createFunction(n);
    addedFunctions.push_back(f);
    while (!consume('}')) {
      if (atEnd())
        return parseError(p, "function '" + n + "' is not closed with '}'");
      KILN_RETURN_IF_ERR(statement(f));
    }
    if (Error e = f->verify())
      return parseError(p, "function '" + n + "' is invalid: " + e.message());
    return Error::success();
  }

  Expected<NodeValue> operand(Function *f) {
    skipSpace();
    Pos p = here();
    if (consume('@')) {
      KILN_ASSIGN_OR_RETURN(std::string n, name("a storage name"));
      Node *s = m_.getPlaceholderByName(n);
      if (!s)
        s = m_.getConstantByName(n);
      if (!s)
        return parseError(p, "unknown storage '@" + n + "'");
      return NodeValue(s, 0);
    }
    if (!consume('%'))
      return parseError(p, "expected an operand ('%name' or '@name'), found " + describeHere());
    KILN_ASSIGN_OR_RETURN(std::string n, name("a value name"));
    Node *node = f->getNodeByName(n);
    if (!node)
      return parseError(p, "unknown value '%" + n + "'");
    unsigned resNo = 0;
    if (peek() == '#') {
      advance();
      Pos rp = here();
      if (!isDigit(peek()))
        return parseError(rp, "expected a result number after '#'");
      KILN_ASSIGN_OR_RETURN(Number r, number());
      if (!r.isInt || r.overflow || r.mag >= node->getNumResults())
        return parseError(rp, "'%" + n + "' has " + std::to_string(node->getNumResults()) +
                                  " result(s); #" + r.text + " is out of range");
      resNo = unsigned(r.mag);
    }
    if (node->getNumResults() == 0)
      return parseError(p, "'%" + n + "' (" + node->getKindName() + ") has no result");
    return NodeValue(node, resNo);
  }

  Expected<AttrValue> attrValue() {
    skipSpace();
    AttrValue a;
    a.pos = here();
    if (peek() == '"') {
      a.kind = AttrValue::Str;
      KILN_ASSIGN_OR_RETURN(a.str, quoted());
    } else if (consume('[')) {
      a.kind = AttrValue::List;
      KILN_RETURN_IF_ERR(commaList(']', "between list elements", [&]() -> Error {
        KILN_ASSIGN_OR_RETURN(Number n, number());
        a.list.push_back(std::move(n));
        return Error::success();
      }));
    } else if (isIdentStart(peek()) && !startsWord("inf") && !startsWord("nan")) {
      std::string w = ident();
      if (w != "true" && w != "false")
        return parseError(a.pos, "expected an attribute value, found '" + w + "'");
      a.kind = AttrValue::Bool;
      a.b = w == "true";
    } else {
      KILN_ASSIGN_OR_RETURN(a.num, number());
    }
    return a;
  }

  Error statement(Function *f) {
    skipSpace();
    Pos namePos = here();
    std::string nodeName;
    bool named = false;
    if (consume('%')) {
      namePos = here();
      KILN_ASSIGN_OR_RETURN(nodeName, name("a node name"));
      if (f->getNodeByName(nodeName))
        return parseError(namePos, "duplicate node name '%" + nodeName + "'");
      named = true;
      KILN_RETURN_IF_ERR(expect('=', "after the node name"));
    }
    skipSpace();
    Pos kindPos = here();
    KILN_ASSIGN_OR_RETURN(std::string kindName, expectIdent("an operator name"));
    NodeKind kind;
    if (!parseNodeKind(kindName, kind))
      return parseError(kindPos, "unknown operator '" + kindName + "'");
    if (kind == NodeKind::Placeholder || kind == NodeKind::Constant)
      return parseError(kindPos, "'" + kindName + "' is declared at module level, not in a "
                                                  "function");

    // Operands.
    KILN_RETURN_IF_ERR(expect('(', "before the operands"));
    std::vector<NodeValue> ops;
    KILN_RETURN_IF_ERR(commaList(')', "between operands", [&]() -> Error {
      KILN_ASSIGN_OR_RETURN(NodeValue v, operand(f));
      ops.push_back(v);
      return Error::success();
    }));
    std::unique_ptr<Node> node(newNode(kind, nodeName, ops));
    OperandShape shape = operandShape(*node);
    if (ops.size() < shape.fixed || (!shape.variadic && ops.size() > shape.fixed))
      return parseError(kindPos, kindName + " takes " + (shape.variadic ? "at least " : "") +
                                     std::to_string(shape.fixed) + " operand(s) (" +
                                     shape.names + "), found " + std::to_string(ops.size()));
    if (isa<SaveNode>(node.get()) && !isa<Placeholder>(ops[SaveNode::OutputIdx].node))
      return parseError(kindPos, "the Output operand of Save must be a placeholder ('@name')");
    if (!named)
      nodeName = isa<SaveNode>(node.get()) ? ops[SaveNode::OutputIdx].node->getName()
                                           : std::string(1, char(std::tolower(kindName[0]))) +
                                                 kindName.substr(1);
    node->setName(nodeName);

    // Attributes.
    std::vector<std::pair<std::string, AttrValue>> attrs;
    if (consume('{'))
      KILN_RETURN_IF_ERR(commaList('}', "between attributes", [&]() -> Error {
        skipSpace();
        Pos ap = here();
        KILN_ASSIGN_OR_RETURN(std::string an, expectIdent("an attribute name"));
        for (auto &kv : attrs)
          if (kv.first == an)
            return parseError(ap, "duplicate attribute '" + an + "'");
        KILN_RETURN_IF_ERR(expect('=', "after the attribute name"));
        KILN_ASSIGN_OR_RETURN(AttrValue v, attrValue());
        attrs.emplace_back(an, std::move(v));
        return Error::success();
      }));

    // Result types.
    Pos typesPos = here();
    std::vector<TypeRef> types;
    if (consume(':')) {
      typesPos = here();
      do {
        KILN_ASSIGN_OR_RETURN(TypeRef t, type());
        types.push_back(t);
      } while (consume(','));
    }

    AttrSetter setter(attrs, kindName, kindPos);
    node->visitAttrs(setter);
    KILN_RETURN_IF_ERR(std::move(setter.err));
    for (auto &[an, av] : attrs)
      if (!av.used)
        return parseError(av.pos, kindName + " has no attribute '" + an + "'" +
                                      (setter.declared.empty()
                                           ? std::string(" (it has none)")
                                           : " (attributes: " + setter.declared + ")"));
    if (types.size() != node->getNumResults())
      return parseError(typesPos, kindName + " has " + std::to_string(node->getNumResults()) +
                                      " result(s) but " + std::to_string(types.size()) +
                                      " type(s) are given");
    for (unsigned r = 0; r < types.size(); r++)
      node->setType(r, types[r]);
    f->addNode(node.release());
    return Error::success();
  }

  Module &m_;
  const std::string &text_;
  size_t pos_ = 0;
  Pos cur_;
};

} // namespace

Expected<std::unique_ptr<Module>> parseModule(const std::string &text) {
  auto m = std::make_unique<Module>();
  TextParser p(*m, text);
  KILN_RETURN_IF_ERR(p.parseAll());
  return m;
}

Error parseFunctionInto(Module &m, const std::string &text) {
  TextParser p(m, text);
  Error e = p.parseAll();
  if (!e)
    return e;
  for (Function *f : p.addedFunctions)
    m.eraseFunction(f);
  for (Constant *c : p.addedConstants)
    if (!c->hasUsers())
      m.eraseConstant(c);
  return e;
}

} // namespace kiln
