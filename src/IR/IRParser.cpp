// The text form of the low-level IR, read back (see kiln/IR/IRParser.h for the grammar).
//
// Instructions are built generically from their kind: every generated instruction class
// has exactly one constructor (name, type, operands..., attributes...), so the parser
// constructs a blank instance with placeholder arguments (AnyArg), then sets operands with
// setOperand() and attributes through visitAttrs(). A new kind in the operator table needs
// no change here.

#include "kiln/IR/IRParser.h"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <type_traits>
#include <utility>

namespace kiln {

namespace {

// ---- Blank instructions of any kind ----

/// Converts to any constructor parameter: a default value, or a list of \p variadic null
/// operands for a variadic operand list.
struct AnyArg {
  size_t variadic = 0;
  template <typename T, typename = std::enable_if_t<!std::is_same_v<T, std::vector<Value *>>>>
  operator T() const {
    return T{};
  }
  operator std::vector<Value *>() const { return std::vector<Value *>(variadic, nullptr); }
};

template <typename T, size_t... I> constexpr bool constructibleWith(std::index_sequence<I...>) {
  return std::is_constructible_v<T, decltype((void)I, AnyArg{})...>;
}

/// The number of parameters of T's constructor (at least 2: name and type; 0 if none
/// fits, which fails to compile below).
template <typename T, size_t N = 2> constexpr size_t ctorArity() {
  if constexpr (N > 24)
    return 0;
  else if constexpr (constructibleWith<T>(std::make_index_sequence<N>()))
    return N;
  else
    return ctorArity<T, N + 1>();
}

template <typename T, size_t... I>
Instruction *constructBlank(size_t variadic, std::index_sequence<I...>) {
  AnyArg a{variadic};
  return new T(((void)I, a)...);
}

/// A new instruction of kind \p k with null operands (\p variadic of them in a variadic
/// list) and default attributes.
Instruction *createBlank(InstrKind k, size_t variadic) {
  switch (k) {
#define DEF_INSTR(NAME)                                                                    \
  case InstrKind::NAME: {                                                                  \
    constexpr size_t n = ctorArity<NAME##Inst>();                                          \
    static_assert(n != 0, "no constructor of " #NAME "Inst fits the generated pattern");   \
    return constructBlank<NAME##Inst>(variadic, std::make_index_sequence<n>());            \
  }
#include "kiln/IR/AutoGenInstrs.def"
  }
  return nullptr;
}

// ---- Lexing one line ----

struct ParseError {
  size_t line, col;
  std::string msg;
};

class Cursor {
public:
  Cursor(const std::string &s, size_t line) : s_(s), line_(line) {}

  void skipSpace() {
    while (p_ < s_.size() && std::isspace((unsigned char)s_[p_]))
      p_++;
  }
  bool atEnd() {
    skipSpace();
    return p_ >= s_.size();
  }
  char peek() {
    skipSpace();
    return p_ < s_.size() ? s_[p_] : '\0';
  }
  bool consume(char c) {
    if (peek() != c)
      return false;
    p_++;
    return true;
  }
  void expect(char c, const char *what) {
    if (!consume(c))
      fail(std::string("expected '") + c + "' " + what);
  }
  /// A bare word of [A-Za-z0-9_.$-+] characters (kinds, keywords, numbers).
  std::string word() {
    skipSpace();
    size_t b = tok_ = p_;
    while (p_ < s_.size() && (std::isalnum((unsigned char)s_[p_]) || strchr("_.$-+", s_[p_])))
      p_++;
    return s_.substr(b, p_ - b);
  }
  /// A name: bare or quoted.
  std::string name(const char *what) {
    skipSpace();
    tok_ = p_;
    if (p_ < s_.size() && s_[p_] == '"') {
      std::string r;
      for (p_++; p_ < s_.size() && s_[p_] != '"'; p_++) {
        if (s_[p_] == '\\' && p_ + 1 < s_.size())
          p_++;
        r += s_[p_];
      }
      if (p_ >= s_.size())
        fail(std::string("unterminated quoted ") + what);
      p_++;
      return r;
    }
    std::string w = word();
    if (w.empty())
      fail(std::string("expected ") + what);
    return w;
  }
  /// Characters up to (not including) any of \p stops.
  std::string until(const char *stops) {
    skipSpace();
    size_t b = p_;
    while (p_ < s_.size() && !strchr(stops, s_[p_]))
      p_++;
    return s_.substr(b, p_ - b);
  }
  /// Fails at the current position.
  [[noreturn]] void fail(const std::string &msg) const { throw ParseError{line_, p_ + 1, msg}; }
  /// Fails at column \p col (1-based).
  [[noreturn]] void failAt(size_t col, const std::string &msg) const {
    throw ParseError{line_, col, msg};
  }
  /// Column of the start of the last word or name read, and of the next character.
  size_t tokenCol() const { return tok_ + 1; }
  size_t col() {
    skipSpace();
    return p_ + 1;
  }

private:
  const std::string &s_;
  size_t line_;
  size_t p_ = 0, tok_ = 0;
};

bool parseInteger(const std::string &s, int64_t &out) {
  if (s.empty())
    return false;
  char *end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (*end)
    return false;
  out = v;
  return true;
}

TypeRef parseType(Cursor &c, Module &m) {
  std::string kindName = c.word();
  ElemKind kind;
  if (!parseElemKind(kindName, kind))
    c.failAt(c.tokenCol(), "unknown element kind '" + kindName + "'");
  c.expect('<', "after the element kind");
  Type t;
  t.kind = kind;
  std::string dims = c.until(":>");
  if (!dims.empty()) {
    std::stringstream ss(dims);
    std::string d;
    while (std::getline(ss, d, 'x')) {
      int64_t v;
      if (!parseInteger(d, v) || v < 0)
        c.fail("bad dimension '" + d + "' in type");
      if (t.dims.size() == kMaxDims)
        c.fail("type has more than " + std::to_string(kMaxDims) + " dimensions");
      t.dims.push_back(dim_t(v));
    }
  }
  if (c.consume(':')) {
    if (!isQuantized(kind))
      c.fail(std::string("scale and offset given for non-quantized kind ") + elemKindName(kind));
    std::string scale = c.until(":");
    c.expect(':', "between scale and offset");
    std::string off = c.until(">");
    char *end = nullptr;
    t.scale = std::strtof(scale.c_str(), &end);
    int64_t o;
    if (scale.empty() || *end || !parseInteger(off, o))
      c.fail("bad quantization parameters '" + scale + ":" + off + "'");
    t.offset = int32_t(o);
  } else if (isQuantized(kind)) {
    c.fail(std::string("quantized kind ") + elemKindName(kind) + " needs :scale:offset");
  }
  c.expect('>', "to close the type");
  return m.uniqueType(t);
}

// ---- Attributes ----

struct AttrValue {
  enum Kind { Scalar, List, String } kind = Scalar;
  std::string scalar;
  std::vector<std::string> list;
  size_t col = 0;
};

AttrValue parseAttrValue(Cursor &c) {
  AttrValue v;
  if (c.consume('[')) {
    v.kind = AttrValue::List;
    if (!c.consume(']')) {
      do {
        std::string w = c.word();
        if (w.empty())
          c.fail("expected a number in a list attribute");
        v.list.push_back(w);
      } while (c.consume(','));
      c.expect(']', "to close a list attribute");
    }
  } else if (c.peek() == '"') {
    v.kind = AttrValue::String;
    v.scalar = c.name("string attribute");
  } else {
    v.scalar = c.word();
    if (v.scalar.empty())
      c.fail("expected an attribute value");
  }
  return v;
}

/// Sets each attribute of an instruction from the parsed values, by name.
class AttrSetter : public AttrVisitor {
public:
  AttrSetter(std::map<std::string, AttrValue> vals, Cursor &c) : vals_(std::move(vals)), c_(c) {}

  void visit(const char *n, dim_t &v) override {
    if (const AttrValue *a = get(n, AttrValue::Scalar))
      v = toDim(n, a->scalar);
  }
  void visit(const char *n, int64_t &v) override {
    if (const AttrValue *a = get(n, AttrValue::Scalar))
      v = toInt(n, a->scalar);
  }
  void visit(const char *n, float &v) override {
    if (const AttrValue *a = get(n, AttrValue::Scalar)) {
      char *end = nullptr;
      v = std::strtof(a->scalar.c_str(), &end);
      if (*end)
        c_.fail(std::string("attribute ") + n + ": bad number '" + a->scalar + "'");
    }
  }
  void visit(const char *n, bool &v) override {
    if (const AttrValue *a = get(n, AttrValue::Scalar)) {
      if (a->scalar != "true" && a->scalar != "false")
        c_.fail(std::string("attribute ") + n + ": expected true or false");
      v = a->scalar == "true";
    }
  }
  void visit(const char *n, std::vector<dim_t> &v) override {
    if (const AttrValue *a = get(n, AttrValue::List)) {
      v.clear();
      for (const std::string &s : a->list)
        v.push_back(toDim(n, s));
    }
  }
  void visit(const char *n, std::vector<int64_t> &v) override {
    if (const AttrValue *a = get(n, AttrValue::List)) {
      v.clear();
      for (const std::string &s : a->list)
        v.push_back(toInt(n, s));
    }
  }
  void visit(const char *n, std::string &v) override {
    if (const AttrValue *a = get(n, AttrValue::String))
      v = a->scalar;
  }

  /// Fails on attributes the kind does not have.
  void checkAllUsed(const Instruction *I) {
    for (const auto &kv : vals_)
      if (!used_.count(kv.first))
        c_.fail(std::string(I->getKindName()) + " has no attribute '" + kv.first + "'");
  }

private:
  const AttrValue *get(const char *n, AttrValue::Kind k) {
    auto it = vals_.find(n);
    if (it == vals_.end())
      c_.fail(std::string("missing attribute '") + n + "'");
    used_.insert(n);
    if (it->second.kind != k)
      c_.fail(std::string("attribute ") + n + " expects " +
              (k == AttrValue::List ? "a list" : k == AttrValue::String ? "a string" : "a scalar"));
    return &it->second;
  }
  int64_t toInt(const char *n, const std::string &s) {
    int64_t v;
    if (!parseInteger(s, v))
      c_.fail(std::string("attribute ") + n + ": bad integer '" + s + "'");
    return v;
  }
  dim_t toDim(const char *n, const std::string &s) {
    int64_t v = toInt(n, s);
    if (v < 0)
      c_.fail(std::string("attribute ") + n + ": negative dimension " + s);
    return dim_t(v);
  }

  std::map<std::string, AttrValue> vals_;
  std::set<std::string> used_;
  Cursor &c_;
};

// ---- The function ----

class Parser {
public:
  Parser(Module &m) : m_(m) {}

  std::unique_ptr<IRFunction> parse(const std::string &text) {
    std::vector<std::string> lines;
    {
      std::stringstream ss(text);
      std::string l;
      while (std::getline(ss, l)) {
        size_t cm = l.find("//");
        if (cm != std::string::npos && !insideQuotes(l, cm))
          l = l.substr(0, cm);
        lines.push_back(l);
      }
    }
    enum { Header, Weights, Code } section = Header;
    collectValueNames(lines);
    for (size_t i = 0; i < lines.size(); i++) {
      Cursor c(lines[i], i + 1);
      if (c.atEnd())
        continue;
      if (section == Header) {
        if (c.word() != "function")
          c.fail("expected 'function <name>'");
        F_ = std::make_unique<IRFunction>(c.name("function name"));
        expectEnd(c);
        section = Weights;
        if (!nextSection(lines, i, "weights:"))
          c.fail("expected 'weights:' after the function line");
        continue;
      }
      if (section == Weights) {
        if (c.peek() == '@') {
          parseWeight(c);
          continue;
        }
        if (c.word() != "code" || !c.consume(':'))
          c.fail("expected a weight '@name : type const|mutable' or 'code:'");
        expectEnd(c);
        section = Code;
        continue;
      }
      parseInstr(c);
    }
    if (section != Code)
      throw ParseError{lines.size(), 1, "expected 'function', 'weights:' and 'code:'"};
    return std::move(F_);
  }

private:
  static bool insideQuotes(const std::string &l, size_t pos) {
    bool in = false;
    for (size_t i = 0; i < pos; i++) {
      if (l[i] == '\\' && in)
        i++;
      else if (l[i] == '"')
        in = !in;
    }
    return in;
  }

  /// Skips blank lines after \p i; true (advancing \p i) when the next line is \p kw.
  static bool nextSection(const std::vector<std::string> &lines, size_t &i, const char *kw) {
    for (size_t j = i + 1; j < lines.size(); j++) {
      Cursor c(lines[j], j + 1);
      if (c.atEnd())
        continue;
      if (c.until(" \t") != kw)
        return false;
      i = j;
      return true;
    }
    return false;
  }

  static void expectEnd(Cursor &c) {
    if (!c.atEnd())
      c.fail("unexpected text at the end of the line");
  }

  /// Names defined with `%name =`, so that instructions without a printed name get names
  /// that cannot collide with them.
  void collectValueNames(const std::vector<std::string> &lines) {
    for (size_t i = 0; i < lines.size(); i++) {
      Cursor c(lines[i], i + 1);
      if (c.consume('%')) {
        try {
          valueNames_.insert(c.name("name"));
        } catch (const ParseError &) {
        }
      }
    }
  }

  void parseWeight(Cursor &c) {
    c.expect('@', "to start a weight declaration (or 'code:')");
    std::string name = c.name("weight name");
    c.expect(':', "after the weight name");
    TypeRef ty = parseType(c, m_);
    std::string mut = c.word();
    if (mut != "const" && mut != "mutable")
      c.fail("expected 'const' or 'mutable' after the weight type");
    expectEnd(c);
    if (weights_.count(name))
      c.fail("weight @" + name + " declared twice");
    bool isConst = mut == "const";
    Storage *origin = nullptr;
    if (isConst)
      origin = m_.getConstantByName(name);
    else
      origin = m_.getPlaceholderByName(name);
    if (origin && *origin->getType() != *ty)
      c.fail("weight @" + name + " : " + ty->toString() + " does not match the module's " +
             origin->getType()->toString());
    weights_[name] = F_->createWeightVar(
        name, ty, isConst ? WeightVar::Mutability::Constant : WeightVar::Mutability::Mutable,
        origin);
  }

  void parseInstr(Cursor &c) {
    std::string result;
    if (c.consume('%')) {
      result = c.name("result name");
      c.expect('=', "after the result name");
    }
    std::string kindName = c.word();
    size_t kindCol = c.tokenCol();
    InstrKind kind;
    if (!parseInstrKind(kindName, kind))
      c.failAt(kindCol, "unknown instruction '" + kindName + "'");
    bool definesValue = kind == InstrKind::AllocActivation || kind == InstrKind::TensorView;
    if (definesValue != !result.empty())
      c.fail(definesValue ? kindName + " needs a result: '%name = " + kindName + " ...'"
                          : kindName + " defines no result");

    std::vector<std::pair<Value *, OperandKind>> ops;
    std::vector<size_t> opCols;
    if (c.peek() == '@') {
      do {
        opCols.push_back(c.col());
        c.expect('@', "to start an operand kind");
        std::string k = c.word();
        OperandKind ok;
        if (k == "in")
          ok = OperandKind::In;
        else if (k == "out")
          ok = OperandKind::Out;
        else if (k == "inout")
          ok = OperandKind::InOut;
        else
          c.fail("expected @in, @out or @inout, got @" + k);
        ops.push_back({parseValueRef(c), ok});
      } while (c.consume(','));
    }
    std::map<std::string, AttrValue> attrs;
    if (c.consume('{')) {
      if (!c.consume('}')) {
        do {
          std::string an = c.word();
          if (an.empty())
            c.fail("expected an attribute name");
          c.expect('=', "after the attribute name");
          if (attrs.count(an))
            c.fail("attribute '" + an + "' given twice");
          attrs[an] = parseAttrValue(c);
        } while (c.consume(','));
        c.expect('}', "to close the attributes");
      }
    }
    TypeRef ty = nullptr;
    if (c.consume(':'))
      ty = parseType(c, m_);
    expectEnd(c);
    if (definesValue && !ty)
      c.fail(kindName + " needs its buffer type: '... : float<...>'");

    std::unique_ptr<Instruction> I(createBlank(kind, 0));
    unsigned fixed = I->getNumOperands();
    if (ops.size() != fixed) {
      // Variadic kinds: rebuild with the extra operands.
      std::unique_ptr<Instruction> J(createBlank(kind, ops.size() > fixed ? ops.size() - fixed : 0));
      if (J->getNumOperands() != ops.size())
        c.failAt(kindCol, kindName + " takes " + std::to_string(fixed) + " operands, got " +
               std::to_string(ops.size()));
      I = std::move(J);
    }
    for (unsigned i = 0; i < ops.size(); i++) {
      if (I->getOperand(i).second != ops[i].second)
        c.failAt(opCols[i], kindName + " operand " + I->getOperandName(i) + " is " +
               operandKindName(I->getOperand(i).second) + ", not " +
               operandKindName(ops[i].second));
      I->setOperand(i, ops[i].first);
    }
    AttrSetter setter(std::move(attrs), c);
    I->visitAttrs(setter);
    setter.checkAllUsed(I.get());
    I->setType(ty);
    if (definesValue) {
      if (values_.count(result))
        c.fail("%" + result + " defined twice");
      I->setName(result);
    } else if (kind == InstrKind::DeallocActivation && ops.size() == 1) {
      I->setName(freshName("dealloc." + ops[0].first->getName()));
    } else {
      std::string base = kindName;
      base[0] = char(std::tolower((unsigned char)base[0]));
      I->setName(freshName(base));
    }
    Instruction *raw = F_->push_back(I.release());
    if (definesValue) {
      if (raw->getName() != result)
        c.fail("%" + result + " clashes with another instruction's name");
      values_[result] = raw;
    }
  }

  std::string freshName(const std::string &base) {
    std::string n = base;
    for (unsigned k = 1; valueNames_.count(n) || usedNames_.count(n); k++)
      n = base + "." + std::to_string(k);
    usedNames_.insert(n);
    return n;
  }

  Value *parseValueRef(Cursor &c) {
    size_t at = c.col();
    if (c.consume('%')) {
      std::string n = c.name("buffer name");
      auto it = values_.find(n);
      if (it == values_.end())
        c.failAt(at, "%" + n + " is not defined before this use");
      return it->second;
    }
    if (c.consume('@')) {
      std::string n = c.name("weight name");
      auto it = weights_.find(n);
      if (it == weights_.end())
        c.failAt(at, "@" + n + " is not a declared weight");
      return it->second;
    }
    c.fail("expected %buffer or @weight");
  }

  Module &m_;
  std::unique_ptr<IRFunction> F_;
  std::map<std::string, WeightVar *> weights_;
  std::map<std::string, Value *> values_;
  std::set<std::string> valueNames_, usedNames_;
};

} // namespace

Expected<std::unique_ptr<IRFunction>> parseIR(const std::string &text, Module &m) {
  std::unique_ptr<IRFunction> F;
  try {
    Parser p(m);
    F = p.parse(text);
  } catch (const ParseError &e) {
    return makeError(ErrorCode::ModelParse, e.line, ":", e.col, ": ", e.msg);
  }
  if (Error e = F->verify())
    return makeError(ErrorCode::ModelParse, "parsed IR does not verify: ", e.message());
  return F;
}

} // namespace kiln
