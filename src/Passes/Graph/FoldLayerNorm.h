/// \file
/// Graph pass `fold-layer-norm` (Passes.def): Folds a LayerNorm written out in primitives
/// (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, and an optional scale and shift) into
/// one LayerNormalization.
#ifndef KILN_SRC_PASSES_GRAPH_FOLDLAYERNORM_H
#define KILN_SRC_PASSES_GRAPH_FOLDLAYERNORM_H

#include "kiln/Passes/PassContext.h"

namespace kiln {

class Function;

/// Folds a LayerNorm written out in primitives into one LayerNormalization where the
/// backend runs it whole. Returns true when it changed \p f.
bool foldLayerNorms(Function *f, const PassContext &ctx);

} // namespace kiln

#endif // KILN_SRC_PASSES_GRAPH_FOLDLAYERNORM_H
