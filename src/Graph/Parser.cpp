// The parser of the graph IR's text form (grammar in include/kiln/Graph/TextIR.h): module
// declarations, function bodies and node construction. Nodes are created generically from
// the operator table: the kind name selects a generated class (createNodeOfKind), whose
// generated operand signature checks the operand count; the attributes are assigned by
// name (src/Text/Values.h) and the printed result types are set; each function must then
// pass verify(). The token layer is src/Text/Lexer.h.
//
// Every failure is an Error with ErrorCode::ModelParse and a `line:column:` prefix; the
// parser never aborts on its input and never recurses, so deep or huge inputs are safe.

#include "src/Text/Values.h"

#include "kiln/Graph/Graph.h"
#include "kiln/Graph/TextIR.h"

#include <cctype>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

namespace text {

namespace {

/// Constants larger than this are rejected rather than allocated.
constexpr uint64_t kMaxConstantBytes = uint64_t(1) << 32;

/// The operands the table declares for \p n, for messages: "Input, Filter, Bias", or
/// "Inputs..." for a variadic list.
std::string operandSignature(const Node &n) {
  std::string s;
  for (unsigned i = 0; i < n.getNumFixedInputs(); i++)
    s += (i ? ", " : "") + n.getInputName(i);
  if (const char *list = n.getVariadicInputName())
    s += std::string(s.empty() ? "" : ", ") + list + "...";
  return s;
}

/// Checks that \p n (of kind \p kindName at \p kindPos) has as many operands as its
/// operator declares.
Error checkOperandCount(const Node &n, const std::string &kindName, Pos kindPos) {
  unsigned fixed = n.getNumFixedInputs(), found = n.getNumInputs();
  bool variadic = n.getVariadicInputName() != nullptr;
  if (found >= fixed && (variadic || found == fixed))
    return Error::success();
  return parseError(kindPos, kindName + " takes " + (variadic ? "at least " : "") +
                                 std::to_string(fixed) + " operand(s) (" + operandSignature(n) +
                                 "), found " + std::to_string(found));
}

/// A parser over the text of a module, adding what it declares to the module it is given.
class TextParser : public Lexer {
public:
  TextParser(Module &m, const std::string &text) : Lexer(text), m_(m) {}

  /// Parses declarations until the end of the text.
  Error parseAll();

  std::vector<Function *> addedFunctions;
  std::vector<Constant *> addedConstants;

private:
  Expected<TypeRef> type();
  /// Parses element \p i of \p t from the text (quantized kinds: the raw integer).
  Error element(Tensor &t, size_t i);
  /// `[v, ...]`, `splat(v)` or `elided(hash)` for a constant of type \p ty.
  Expected<Tensor> payload(TypeRef ty, Pos declPos);
  Expected<std::string> storageName();
  Error parsePlaceholder();
  Error parseConstant();
  Error parseFunction(Pos p);
  Expected<NodeValue> operand(Function *f);
  Error statement(Function *f);

  Module &m_;
};

} // namespace

Error TextParser::parseAll() {
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

// ---- Declarations.

Expected<std::string> TextParser::storageName() {
  KILN_RETURN_IF_ERR(expect('@', "before a storage name"));
  Pos p = here();
  KILN_ASSIGN_OR_RETURN(std::string n, name("a storage name"));
  if (m_.getPlaceholderByName(n) || m_.getConstantByName(n))
    return parseError(p, "duplicate storage name '@" + n + "'");
  return n;
}

Error TextParser::parsePlaceholder() {
  KILN_ASSIGN_OR_RETURN(std::string n, storageName());
  KILN_RETURN_IF_ERR(expect(':', "before the placeholder type"));
  KILN_ASSIGN_OR_RETURN(TypeRef ty, type());
  m_.createPlaceholder(ty, n);
  return Error::success();
}

Error TextParser::parseConstant() {
  Pos p = here();
  KILN_ASSIGN_OR_RETURN(std::string n, storageName());
  KILN_RETURN_IF_ERR(expect(':', "before the constant type"));
  KILN_ASSIGN_OR_RETURN(TypeRef ty, type());
  KILN_RETURN_IF_ERR(expect('=', "before the constant data"));
  KILN_ASSIGN_OR_RETURN(Tensor t, payload(ty, p));
  addedConstants.push_back(m_.createConstant(n, std::move(t)));
  return Error::success();
}

Error TextParser::parseFunction(Pos p) {
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

// ---- Types and data.

Expected<TypeRef> TextParser::type() {
  KILN_ASSIGN_OR_RETURN(Type t, parseType(*this));
  return m_.uniqueType(t);
}

Error TextParser::element(Tensor &t, size_t i) {
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
    int64_t lo = k == ElemKind::Int8Q    ? INT8_MIN
                 : k == ElemKind::UInt8Q ? 0
                 : k == ElemKind::Bool   ? 0
                                         : INT32_MIN;
    int64_t hi = k == ElemKind::Int8Q    ? INT8_MAX
                 : k == ElemKind::UInt8Q ? UINT8_MAX
                 : k == ElemKind::Bool   ? 1
                                         : INT32_MAX;
    KILN_RETURN_IF_ERR(toInRange(n, lo, hi, v));
    t.setFromDouble(i, double(v)); // exact within the range
  }
  return Error::success();
}

Expected<Tensor> TextParser::payload(TypeRef ty, Pos declPos) {
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
      return parseError(p, "expected " + std::to_string(n) + " values for " + ty->toString() +
                               ", found " + std::to_string(i));
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
    skipIdentChars();
    KILN_RETURN_IF_ERR(expect(')', "after the elided hash"));
    return t; // zero-filled
  }
  return parseError(p, "expected constant data ('[', 'splat' or 'elided'), found " +
                           (w.empty() ? describeHere() : "'" + w + "'"));
}

// ---- Statements.

Expected<NodeValue> TextParser::operand(Function *f) {
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

Error TextParser::statement(Function *f) {
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
    return parseError(kindPos, "'" + kindName + "' is declared at module level, not in a function");

  // Operands.
  KILN_RETURN_IF_ERR(expect('(', "before the operands"));
  std::vector<NodeValue> ops;
  KILN_RETURN_IF_ERR(commaList(')', "between operands", [&]() -> Error {
    KILN_ASSIGN_OR_RETURN(NodeValue v, operand(f));
    ops.push_back(v);
    return Error::success();
  }));
  std::unique_ptr<Node> node(createNodeOfKind(kind, nodeName, ops));
  KILN_RETURN_IF_ERR(checkOperandCount(*node, kindName, kindPos));
  if (isa<SaveNode>(node.get()) && !isa<Placeholder>(ops[SaveNode::OutputIdx].node))
    return parseError(kindPos, "the Output operand of Save must be a placeholder ('@name')");
  if (!named)
    nodeName = isa<SaveNode>(node.get())
                   ? ops[SaveNode::OutputIdx].node->getName()
                   : std::string(1, char(std::tolower(kindName[0]))) + kindName.substr(1);
  node->setName(nodeName);

  // Attributes and result types.
  KILN_ASSIGN_OR_RETURN(AttrList attrs, parseAttrList(*this));
  Pos typesPos = here();
  std::vector<TypeRef> types;
  if (consume(':')) {
    typesPos = here();
    do {
      KILN_ASSIGN_OR_RETURN(TypeRef t, type());
      types.push_back(t);
    } while (consume(','));
  }
  KILN_RETURN_IF_ERR(
      assignAttrs(attrs, kindName, kindPos, [&](AttrVisitor &v) { node->visitAttrs(v); }));
  if (types.size() != node->getNumResults())
    return parseError(typesPos, kindName + " has " + std::to_string(node->getNumResults()) +
                                    " result(s) but " + std::to_string(types.size()) +
                                    " type(s) are given");
  for (unsigned r = 0; r < types.size(); r++)
    node->setType(r, types[r]);
  f->addNode(node.release());
  return Error::success();
}

} // namespace text

Expected<std::unique_ptr<Module>> parseModule(const std::string &text) {
  auto m = std::make_unique<Module>();
  text::TextParser p(*m, text);
  KILN_RETURN_IF_ERR(p.parseAll());
  return m;
}

Error parseFunctionInto(Module &m, const std::string &text) {
  text::TextParser p(m, text);
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
