/// \file
/// Graph pass `simplify-arithmetic` (Passes.def): Applies arithmetic identities: x*1, x+0, x-0, x/1
/// are x; x-x is 0; max(x,x) and min(x,x) are x.
#ifndef KILN_SRC_PASSES_GRAPH_SIMPLIFYARITHMETIC_H
#define KILN_SRC_PASSES_GRAPH_SIMPLIFYARITHMETIC_H

#include "kiln/Passes/PassContext.h"

namespace kiln {

class Function;

/// Applies arithmetic identities: x*1, x+0, x-0, x/1 are x; x-x is 0; max(x,x) and min(x,x) are x.
/// Returns true when it changed \p f.
bool simplifyArithmetic(Function *f, const PassContext &ctx);

} // namespace kiln

#endif // KILN_SRC_PASSES_GRAPH_SIMPLIFYARITHMETIC_H
