/// \file
/// Graph pass `merge-pads` (Passes.def): Merges a constant Pad of the spatial dimensions into the
/// pads of the Convolution or pooling it feeds.
#ifndef KILN_SRC_PASSES_GRAPH_MERGEPADS_H
#define KILN_SRC_PASSES_GRAPH_MERGEPADS_H

#include "kiln/Passes/PassContext.h"

namespace kiln {

class Function;

/// Merges a constant Pad of the spatial dimensions into the pads of the Convolution or pooling it
/// feeds. Returns true when it changed \p f.
bool mergePads(Function *f, const PassContext &ctx);

} // namespace kiln

#endif // KILN_SRC_PASSES_GRAPH_MERGEPADS_H
