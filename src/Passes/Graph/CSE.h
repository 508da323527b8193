/// \file
/// Graph pass `cse` (Passes.def): Merges nodes of equal kind, operands, attributes and result
/// types.
#ifndef KILN_SRC_PASSES_GRAPH_CSE_H
#define KILN_SRC_PASSES_GRAPH_CSE_H

#include "kiln/Passes/PassContext.h"

namespace kiln {

class Function;

/// Merges nodes of equal kind, operands, attributes and result types. Returns true when it changed
/// \p f.
bool eliminateCommonSubexpressions(Function *f, const PassContext &ctx);

} // namespace kiln

#endif // KILN_SRC_PASSES_GRAPH_CSE_H
