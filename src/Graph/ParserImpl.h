/// \file
/// The graph IR's text parser, shared by its two files: Parser.cpp (declarations,
/// statements and node construction, the entry points of kiln/Graph/TextIR.h) and
/// ParserTypes.cpp (types, constant data, attribute values and their assignment to a
/// node). The token layer is ParserLexer.h. Private to src/Graph.
#ifndef KILN_GRAPH_PARSERIMPL_H
#define KILN_GRAPH_PARSERIMPL_H

#include "ParserLexer.h"

#include "kiln/Graph/Graph.h"

#include <string>
#include <utility>
#include <vector>

namespace kiln::textparse {

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

/// Attribute values by name, in the order written.
using AttrList = std::vector<std::pair<std::string, AttrValue>>;

/// Assigns \p attrs to the attributes \p n declares, converting each to its C++ type; a
/// missing, mistyped or unknown attribute is an error. \p kindPos is the position of the
/// operator name, where a missing attribute is reported.
Error assignAttrs(Node &n, AttrList &attrs, Pos kindPos);

/// A recursive-descent parser over the text of a module, adding what it declares to the
/// module it is given.
class TextParser : public Lexer {
public:
  TextParser(Module &m, const std::string &text) : Lexer(text), m_(m) {}

  /// Parses declarations until the end of the text.
  Error parseAll();

  std::vector<Function *> addedFunctions;
  std::vector<Constant *> addedConstants;

private:
  // Types, data and attributes (ParserTypes.cpp).
  Expected<TypeRef> type();
  /// Parses element \p i of \p t from the text (quantized kinds: the raw integer).
  Error element(Tensor &t, size_t i);
  /// `[v, ...]`, `splat(v)` or `elided(hash)` for a constant of type \p ty.
  Expected<Tensor> payload(TypeRef ty, Pos declPos);
  Expected<AttrValue> attrValue();
  /// `{Name=value, ...}` after the operands, if present.
  Expected<AttrList> attrList();

  // Declarations and statements (Parser.cpp).
  Expected<std::string> storageName();
  Error parsePlaceholder();
  Error parseConstant();
  Error parseFunction(Pos p);
  Expected<NodeValue> operand(Function *f);
  Error statement(Function *f);

  Module &m_;
};

} // namespace kiln::textparse

#endif // KILN_GRAPH_PARSERIMPL_H
