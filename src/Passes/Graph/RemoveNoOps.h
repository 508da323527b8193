/// \file
/// Graph pass `remove-no-ops` (Passes.def): Removes Slice, Reshape, Transpose, Concat, Pad, Tile,
/// Broadcast and pooling nodes that return their input unchanged.
#ifndef KILN_SRC_PASSES_GRAPH_REMOVENOOPS_H
#define KILN_SRC_PASSES_GRAPH_REMOVENOOPS_H

#include "kiln/Passes/PassContext.h"

namespace kiln {

class Function;

/// Removes Slice, Reshape, Transpose, Concat, Pad, Tile, Broadcast and pooling nodes that return
/// their input unchanged. Returns true when it changed \p f.
bool removeNoOps(Function *f, const PassContext &ctx);

} // namespace kiln

#endif // KILN_SRC_PASSES_GRAPH_REMOVENOOPS_H
