/// \file
/// A parser for the text form of the low-level IR that IRFunction::toString() prints, so
/// that IR passes can be tested on small hand-written functions.
///
/// Grammar (one item per line; `//` starts a comment; blank lines are ignored):
/// \code
///   function   := 'function' name NL 'weights:' NL weight* 'code:' NL instr*
///   weight     := '@'name ':' type ('const' | 'mutable')
///   instr      := ('%'name '=')? Kind (operand (',' operand)*)? attrs? (':' type)?
///   operand    := ('@in' | '@out' | '@inout') ('%'name | '@'name)
///   attrs      := '{' Attr '=' value (',' Attr '=' value)* '}'
///   value      := number | 'true' | 'false' | '[' (number (',' number)*)? ']' | string
///   type       := kind '<' (dim ('x' dim)*)? (':' scale ':' offset)? '>'
///   name       := [A-Za-z0-9_.$-]+ | '"' chars with \" \\ \n \t \xHH escapes '"'
/// \endcode
/// Tokens, types and attribute values are those of the graph IR's text form (src/Text).
/// AllocActivation and TensorView define `%name` and carry their buffer type after `:`;
/// other instructions name no result. Every attribute of the kind must be given, and the
/// operand markers must match the kind's declared operand kinds. `%x` refers to a buffer
/// defined earlier; `@x` to a weight declared in the header.
///
/// Example:
/// \code
///   function main
///   weights:
///     @x : float<1x4> mutable
///     @y : float<1x4> mutable
///   code:
///     %r = AllocActivation : float<1x4>
///     Relu @out %r, @in @x
///     Copy @out @y, @in %r
///     DeallocActivation @out %r
/// \endcode
#ifndef KILN_IR_IRPARSER_H
#define KILN_IR_IRPARSER_H

#include "kiln/IR/IR.h"

#include <memory>
#include <string>

namespace kiln {

/// Parses one function. Types are uniqued in \p m. A weight whose name matches a
/// placeholder (mutable) or constant (const) of \p m with the same type stands for that
/// storage, so the function can run on a backend; other weights have no origin. Failures
/// are ErrorCode::ModelParse errors whose message starts with `line:column:`; the parsed
/// function must also pass IRFunction::verify().
Expected<std::unique_ptr<IRFunction>> parseIR(const std::string &text, Module &m);

} // namespace kiln

#endif // KILN_IR_IRPARSER_H
