/// \file
/// Graph pass `lower` (src/Passes/Graph/Passes.def): rewrites high-level nodes into
/// simpler primitives, one operator family per file of src/Lower; docs/Lowering.md has
/// the table of what becomes what.
#ifndef KILN_SRC_LOWER_LOWER_H
#define KILN_SRC_LOWER_LOWER_H

#include "kiln/Passes/PassContext.h"

namespace kiln {

class Function;

/// Lowers every node for which the backend's `shouldLower(node)` is true (every node that
/// has a lowering when ctx.backend is null), repeating until the nodes lowering produced
/// need no further lowering. Returns true when it changed \p f.
bool lowerNodes(Function *f, const PassContext &ctx);

} // namespace kiln

#endif // KILN_SRC_LOWER_LOWER_H
