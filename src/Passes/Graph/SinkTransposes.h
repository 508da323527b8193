/// \file
/// Graph pass `sink-transposes` (Passes.def): Cancels Transpose pairs, transposes Constants, and
/// sinks Transposes below element-wise nodes and BatchNormalization.
#ifndef KILN_SRC_PASSES_GRAPH_SINKTRANSPOSES_H
#define KILN_SRC_PASSES_GRAPH_SINKTRANSPOSES_H

#include "kiln/Passes/PassContext.h"

namespace kiln {

class Function;

/// Cancels Transpose pairs, transposes Constants, and sinks Transposes below element-wise nodes and
/// BatchNormalization. Returns true when it changed \p f.
bool sinkTransposes(Function *f, const PassContext &ctx);

} // namespace kiln

#endif // KILN_SRC_PASSES_GRAPH_SINKTRANSPOSES_H
