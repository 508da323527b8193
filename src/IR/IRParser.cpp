// The text form of the low-level IR, read back (see kiln/IR/IRParser.h for the grammar).
//
// Instructions are built generically from their kind: every generated instruction class
// has exactly one constructor (name, type, operands..., attributes...), so the parser
// constructs a blank instance with placeholder arguments (AnyArg), then sets operands with
// setOperand() and attributes through visitAttrs(). A new kind in the operator table needs
// no change here. Tokens, types, attributes and errors are the shared text front end's
// (src/Text), read in line form: one item per line.

#include "kiln/IR/IRParser.h"

#include "src/Text/Values.h"

#include <cctype>
#include <map>
#include <set>
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

// ---- The function ----

/// Parses the text line by line with the shared lexer (src/Text) in line form.
class Parser : public text::Lexer {
  using Operands = std::vector<std::pair<Value *, OperandKind>>;

public:
  Parser(Module &m, const std::string &text) : Lexer(text, Lines), m_(m), src_(text) {}

  Expected<std::unique_ptr<IRFunction>> parse() {
    collectValueNames();
    KILN_RETURN_IF_ERR(header());
    for (skipBlankLines(); !atEnd(); skipBlankLines())
      KILN_RETURN_IF_ERR(instr());
    return std::move(F_);
  }

private:
  /// Consumes `kw` followed by ':' (a section line such as `weights:`), if next.
  bool section(const char *kw) {
    if (!startsWord(kw))
      return false;
    ident();
    return consume(':');
  }

  Error expectLineEnd() {
    if (!atLineEnd())
      return text::parseError(here(), "unexpected text at the end of the line");
    return Error::success();
  }

  /// `function name`, `weights:`, the weights, `code:`.
  Error header() {
    skipBlankLines();
    text::Pos p = here();
    if (!startsWord("function"))
      return text::parseError(p, "expected 'function <name>'");
    ident();
    skipSpace();
    KILN_ASSIGN_OR_RETURN(std::string name, this->name("a function name"));
    F_ = std::make_unique<IRFunction>(name);
    KILN_RETURN_IF_ERR(expectLineEnd());
    skipBlankLines();
    if (!section("weights"))
      return text::parseError(here(), "expected 'weights:' after the function line");
    KILN_RETURN_IF_ERR(expectLineEnd());
    while (true) {
      skipBlankLines();
      if (atEnd())
        return text::parseError(here(), "expected 'function', 'weights:' and 'code:'");
      if (peek() == '@') {
        KILN_RETURN_IF_ERR(weight());
        continue;
      }
      if (!section("code"))
        return text::parseError(here(),
                                "expected a weight '@name : type const|mutable' or 'code:'");
      return expectLineEnd();
    }
  }

  /// Names defined with `%name =`, so that instructions without a printed name get names
  /// that cannot collide with them.
  void collectValueNames() {
    Lexer lx(src_, Lines);
    for (lx.skipBlankLines(); !lx.atEnd(); lx.skipBlankLines()) {
      if (lx.consume('%'))
        if (auto n = lx.name("name"))
          valueNames_.insert(*n);
      lx.skipLine();
    }
  }

  Expected<TypeRef> type() {
    KILN_ASSIGN_OR_RETURN(Type t, text::parseType(*this));
    return m_.uniqueType(t);
  }

  Error weight() {
    KILN_RETURN_IF_ERR(expect('@', "to start a weight declaration (or 'code:')"));
    text::Pos p = here();
    KILN_ASSIGN_OR_RETURN(std::string name, this->name("a weight name"));
    KILN_RETURN_IF_ERR(expect(':', "after the weight name"));
    KILN_ASSIGN_OR_RETURN(TypeRef ty, type());
    skipSpace();
    bool isConst = startsWord("const");
    if (!isConst && !startsWord("mutable"))
      return text::parseError(here(), "expected 'const' or 'mutable' after the weight type");
    ident();
    KILN_RETURN_IF_ERR(expectLineEnd());
    if (weights_.count(name))
      return text::parseError(p, "weight @" + name + " declared twice");
    Storage *origin = nullptr;
    if (isConst)
      origin = m_.getConstantByName(name);
    else
      origin = m_.getPlaceholderByName(name);
    if (origin && *origin->getType() != *ty)
      return text::parseError(p, "weight @" + name + " : " + ty->toString() +
                                     " does not match the module's " +
                                     origin->getType()->toString());
    weights_[name] = F_->createWeightVar(
        name, ty, isConst ? WeightVar::Mutability::Constant : WeightVar::Mutability::Mutable,
        origin);
    return Error::success();
  }

  /// `@in|@out|@inout (%name | @name)`.
  Error operand(Operands &ops, std::vector<text::Pos> &pos) {
    skipSpace();
    pos.push_back(here());
    KILN_RETURN_IF_ERR(expect('@', "to start an operand kind"));
    std::string k = text::isIdentStart(peek()) ? ident() : "";
    OperandKind ok;
    if (k == "in")
      ok = OperandKind::In;
    else if (k == "out")
      ok = OperandKind::Out;
    else if (k == "inout")
      ok = OperandKind::InOut;
    else
      return text::parseError(here(), "expected @in, @out or @inout, got @" + k);
    KILN_ASSIGN_OR_RETURN(Value *v, valueRef());
    ops.push_back({v, ok});
    return Error::success();
  }

  /// A new instruction of kind \p kind (named \p kindName at \p kindPos) with operands
  /// \p ops, whose markers (at \p opPos) must match the kind's operand kinds.
  Expected<std::unique_ptr<Instruction>> withOperands(InstrKind kind, const std::string &kindName,
                                                      text::Pos kindPos, const Operands &ops,
                                                      const std::vector<text::Pos> &opPos) {
    std::unique_ptr<Instruction> I(createBlank(kind, 0));
    unsigned fixed = I->getNumOperands();
    if (ops.size() != fixed) {
      // Variadic kinds: rebuild with the extra operands.
      std::unique_ptr<Instruction> J(createBlank(kind, ops.size() > fixed ? ops.size() - fixed : 0));
      if (J->getNumOperands() != ops.size())
        return text::parseError(kindPos, kindName + " takes " + std::to_string(fixed) +
                                             " operands, got " + std::to_string(ops.size()));
      I = std::move(J);
    }
    for (unsigned i = 0; i < ops.size(); i++) {
      if (I->getOperand(i).second != ops[i].second)
        return text::parseError(opPos[i], kindName + " operand " + I->getOperandName(i) +
                                              " is " + operandKindName(I->getOperand(i).second) +
                                              ", not " + operandKindName(ops[i].second));
      I->setOperand(i, ops[i].first);
    }
    return I;
  }

  Error instr() {
    std::string result;
    if (consume('%')) {
      KILN_ASSIGN_OR_RETURN(result, name("a result name"));
      KILN_RETURN_IF_ERR(expect('=', "after the result name"));
    }
    skipSpace();
    text::Pos kindPos = here();
    KILN_ASSIGN_OR_RETURN(std::string kindName, expectIdent("an instruction"));
    InstrKind kind;
    if (!parseInstrKind(kindName, kind))
      return text::parseError(kindPos, "unknown instruction '" + kindName + "'");
    bool definesValue = kind == InstrKind::AllocActivation || kind == InstrKind::TensorView;
    if (definesValue != !result.empty())
      return text::parseError(here(), definesValue ? kindName + " needs a result: '%name = " +
                                                         kindName + " ...'"
                                                   : kindName + " defines no result");

    Operands ops;
    std::vector<text::Pos> opPos;
    skipSpace();
    if (peek() == '@') {
      do
        KILN_RETURN_IF_ERR(operand(ops, opPos));
      while (consume(','));
    }
    KILN_ASSIGN_OR_RETURN(text::AttrList attrs, text::parseAttrList(*this));
    TypeRef ty = nullptr;
    if (consume(':')) {
      KILN_ASSIGN_OR_RETURN(ty, type());
    }
    KILN_RETURN_IF_ERR(expectLineEnd());
    if (definesValue && !ty)
      return text::parseError(here(), kindName + " needs its buffer type: '... : float<...>'");

    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Instruction> I,
                          withOperands(kind, kindName, kindPos, ops, opPos));
    KILN_RETURN_IF_ERR(text::assignAttrs(attrs, kindName, kindPos,
                                         [&](AttrVisitor &v) { I->visitAttrs(v); }));
    I->setType(ty);
    if (definesValue) {
      if (values_.count(result))
        return text::parseError(here(), "%" + result + " defined twice");
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
        return text::parseError(here(), "%" + result + " clashes with another instruction's name");
      values_[result] = raw;
    }
    return Error::success();
  }

  std::string freshName(const std::string &base) {
    std::string n = base;
    for (unsigned k = 1; valueNames_.count(n) || usedNames_.count(n); k++)
      n = base + "." + std::to_string(k);
    usedNames_.insert(n);
    return n;
  }

  Expected<Value *> valueRef() {
    skipSpace();
    text::Pos at = here();
    if (consume('%')) {
      KILN_ASSIGN_OR_RETURN(std::string n, name("a buffer name"));
      auto it = values_.find(n);
      if (it == values_.end())
        return text::parseError(at, "%" + n + " is not defined before this use");
      return it->second;
    }
    if (consume('@')) {
      KILN_ASSIGN_OR_RETURN(std::string n, name("a weight name"));
      auto it = weights_.find(n);
      if (it == weights_.end())
        return text::parseError(at, "@" + n + " is not a declared weight");
      return it->second;
    }
    return text::parseError(at, "expected %buffer or @weight" + found());
  }

  Module &m_;
  const std::string &src_;
  std::unique_ptr<IRFunction> F_;
  std::map<std::string, WeightVar *> weights_;
  std::map<std::string, Value *> values_;
  std::set<std::string> valueNames_, usedNames_;
};

} // namespace

Expected<std::unique_ptr<IRFunction>> parseIR(const std::string &text, Module &m) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<IRFunction> F, Parser(m, text).parse());
  if (Error e = F->verify())
    return makeError(ErrorCode::ModelParse, "parsed IR does not verify: ", e.message());
  return F;
}

} // namespace kiln
