/// \file
/// Graph pass `dce` (Passes.def): Deletes nodes whose results are unused (Saves stay).
#ifndef KILN_SRC_PASSES_GRAPH_DCE_H
#define KILN_SRC_PASSES_GRAPH_DCE_H

#include "kiln/Passes/PassContext.h"

namespace kiln {

class Function;

/// Deletes nodes whose results are unused (Saves stay). Returns true when it changed \p f.
bool eliminateDeadCode(Function *f, const PassContext &ctx);

} // namespace kiln

#endif // KILN_SRC_PASSES_GRAPH_DCE_H
