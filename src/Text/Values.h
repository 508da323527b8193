/// \file
/// The value layer shared by the text parsers of both IRs: types (`float<1x3>`,
/// `i8q<4:0.5:-3>`), attribute lists (`{Kernels=[3,3], Alpha=0.1, Mode="x"}`) and the
/// assignment of parsed attribute values to a node's or instruction's attributes by name,
/// through its AttrVisitor, converting each to the attribute's C++ type. Errors follow
/// Lexer.h: ModelParse with a `line:column:` prefix.
#ifndef KILN_TEXT_VALUES_H
#define KILN_TEXT_VALUES_H

#include "src/Text/Lexer.h"

#include "kiln/Graph/Node.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::text {

/// `kind '<' (dim ('x' dim)*)? (':' scale ':' offset)? '>'`; the scale and offset are
/// required for quantized kinds and rejected for others.
Expected<Type> parseType(Lexer &lx);

/// A parsed attribute value; its C++ type is decided when the visitor asks for it.
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

/// `number | 'true' | 'false' | '[' numbers ']' | string`.
Expected<AttrValue> parseAttrValue(Lexer &lx);

/// `{Name=value, ...}` if the next character is `{`, else an empty list.
Expected<AttrList> parseAttrList(Lexer &lx);

/// Assigns \p attrs to the attributes that \p visitAttrs visits (a node's or instruction's
/// visitAttrs), converting each to its C++ type. A missing attribute is reported at
/// \p kindPos, the position of the operator name \p kind; a mistyped or unknown one at its
/// own position.
Error assignAttrs(AttrList &attrs, const std::string &kind, Pos kindPos,
                  const std::function<void(AttrVisitor &)> &visitAttrs);

} // namespace kiln::text

#endif // KILN_TEXT_VALUES_H
