/// \file
/// Graph pass `simplify-splats` (Passes.def): Replaces shape operators and arithmetic whose
/// operands are Splats by Splats.
#ifndef KILN_SRC_PASSES_GRAPH_SIMPLIFYSPLATS_H
#define KILN_SRC_PASSES_GRAPH_SIMPLIFYSPLATS_H

#include "kiln/Passes/PassContext.h"

namespace kiln {

class Function;

/// Replaces shape operators and arithmetic whose operands are Splats by Splats. Returns true when
/// it changed \p f.
bool simplifySplats(Function *f, const PassContext &ctx);

} // namespace kiln

#endif // KILN_SRC_PASSES_GRAPH_SIMPLIFYSPLATS_H
