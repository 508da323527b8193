/// \file
/// Graph pass `merge-reshapes` (Passes.def): Merges chains of Reshapes into one Reshape.
#ifndef KILN_SRC_PASSES_GRAPH_MERGERESHAPES_H
#define KILN_SRC_PASSES_GRAPH_MERGERESHAPES_H

#include "kiln/Passes/PassContext.h"

namespace kiln {

class Function;

/// Merges chains of Reshapes into one Reshape. Returns true when it changed \p f.
bool mergeReshapes(Function *f, const PassContext &ctx);

} // namespace kiln

#endif // KILN_SRC_PASSES_GRAPH_MERGERESHAPES_H
