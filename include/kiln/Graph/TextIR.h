/// \file
/// The text form of the graph IR: a printer and a parser that round-trip a Module.
///
/// Grammar (whitespace and newlines are insignificant; `//` starts a comment):
/// \code
///   module     := decl*
///   decl       := 'placeholder' '@'name ':' type
///               | 'constant' '@'name ':' type '=' data
///               | 'function' name '{' stmt* '}'
///   data       := '[' (number (',' number)*)? ']'   // row-major, exact
///               | 'splat' '(' number ')'            // every element equal
///               | 'elided' '(' hex ')'              // data not printed; parses zero-filled
///   stmt       := ('%'name '=')? Kind '(' (operand (',' operand)*)? ')'
///                 ('{' (Attr '=' value (',' Attr '=' value)*)? '}')?
///                 (':' type (',' type)*)?
///   operand    := '%'name ('#' resNo)? | '@'name
///   value      := number | 'true' | 'false' | '[' numbers ']' | string
///   type       := kind '<' (dim ('x' dim)*)? (':' scale ':' offset)? '>'
///   name       := [A-Za-z0-9_.$-]+ | '"' escaped chars '"'
/// \endcode
/// `%n` is result 0 of node n and `%n#k` result k; `@n` is module storage. The result
/// types after `:` are one per result of the operator (none for Save). A statement without
/// `%name =` gets a default name (Save: the name of its Output placeholder). Numbers are
/// decimal integers or floats (`inf`, `-inf`, `nan` allowed); floats print with 9
/// significant digits, which is exact for float32.
///
/// Example:
/// \code
///   placeholder @x : float<1x3x8x8>
///   constant @w : float<4x3x3x3> = [0.5, -1, ...]
///   constant @b : float<4> = splat(0)
///   placeholder @y : float<1x4x8x8>
///
///   function main {
///     %c = Convolution(@x, @w, @b) {Kernels=[3,3], Strides=[1,1], Pads=[1,1,1,1],
///                                   Dilations=[1,1], Group=1} : float<1x4x8x8>
///     %r = Relu(%c) : float<1x4x8x8>
///     Save(%r, @y)
///   }
/// \endcode
#ifndef KILN_GRAPH_TEXTIR_H
#define KILN_GRAPH_TEXTIR_H

#include "kiln/Base/Error.h"

#include <cstddef>
#include <memory>
#include <string>

namespace kiln {

class Module;
class Function;
class Node;

/// Options of the printer.
struct PrintOptions {
  /// Constants with more elements than this print as `elided(<hash>)` unless all their
  /// elements are equal (then `splat(v)`). Below the limit data prints exactly.
  size_t maxConstantElements = 4096;
};

/// Text form of \p m: placeholders, constants, then each function. Module::toString() is
/// printModule(m) with default options.
std::string printModule(const Module &m, const PrintOptions &opts = PrintOptions());

/// Text form of one function (Function::toString()); storage is referenced by `@name`.
/// Nodes print in a topological order (operands first), creation order where free.
std::string printFunction(const Function &f);

/// The attributes of \p n as printed in the text IR: `{Kernels=[3,3], Group=1}`, or an
/// empty string when the operator has none.
std::string printNodeAttrs(const Node &n);

/// Parses a whole module. Every failure is an Error with ErrorCode::ModelParse whose
/// message starts with `line:column:`; each parsed function must also pass verify().
Expected<std::unique_ptr<Module>> parseModule(const std::string &text);

/// Parses declarations (usually one or more `function` blocks) into the existing module
/// \p m; statements may reference storage already in \p m or declared in \p text. On
/// failure the functions and constants this call added are removed again (placeholders it
/// declared stay, as Module cannot erase placeholders).
Error parseFunctionInto(Module &m, const std::string &text);

} // namespace kiln

#endif // KILN_GRAPH_TEXTIR_H
