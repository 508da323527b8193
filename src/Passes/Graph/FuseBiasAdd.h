/// \file
/// Graph pass `fuse-bias-add` (Passes.def): Folds a per-channel constant Add into the bias of the
/// Convolution or FullyConnected that feeds it.
#ifndef KILN_SRC_PASSES_GRAPH_FUSEBIASADD_H
#define KILN_SRC_PASSES_GRAPH_FUSEBIASADD_H

#include "kiln/Passes/PassContext.h"

namespace kiln {

class Function;

/// Folds a per-channel constant Add into the bias of the Convolution or FullyConnected that feeds
/// it. Returns true when it changed \p f.
bool fuseBiasAdds(Function *f, const PassContext &ctx);

} // namespace kiln

#endif // KILN_SRC_PASSES_GRAPH_FUSEBIASADD_H
