/// \file
/// Graph pass `fold-batch-norm` (Passes.def): Folds inference BatchNormalization into the
/// Convolution or FullyConnected that feeds it.
#ifndef KILN_SRC_PASSES_GRAPH_FOLDBATCHNORM_H
#define KILN_SRC_PASSES_GRAPH_FOLDBATCHNORM_H

#include "kiln/Passes/PassContext.h"

namespace kiln {

class Function;

/// Folds inference BatchNormalization into the Convolution or FullyConnected that feeds it. Returns
/// true when it changed \p f.
bool foldBatchNorms(Function *f, const PassContext &ctx);

} // namespace kiln

#endif // KILN_SRC_PASSES_GRAPH_FOLDBATCHNORM_H
