/// \file
/// Graph pass `constant-fold` (Passes.def): Evaluates constant subgraphs on the Interpreter backend
/// and replaces them by Constants.
#ifndef KILN_SRC_PASSES_GRAPH_CONSTANTFOLD_H
#define KILN_SRC_PASSES_GRAPH_CONSTANTFOLD_H

#include "kiln/Passes/PassContext.h"

namespace kiln {

class Function;

/// Evaluates constant subgraphs on the Interpreter backend and replaces them by Constants. Returns
/// true when it changed \p f.
bool foldConstants(Function *f, const PassContext &ctx);

} // namespace kiln

#endif // KILN_SRC_PASSES_GRAPH_CONSTANTFOLD_H
