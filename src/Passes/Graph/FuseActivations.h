/// \file
/// Graph pass `fuse-activations` (Passes.def): Fuses an Add of a residual and/or Relu, Clip,
/// LeakyRelu, Sigmoid or Tanh into the Convolution or FullyConnected that feeds it, where the
/// backend supports the fused node.
#ifndef KILN_SRC_PASSES_GRAPH_FUSEACTIVATIONS_H
#define KILN_SRC_PASSES_GRAPH_FUSEACTIVATIONS_H

#include "kiln/Passes/PassContext.h"

namespace kiln {

class Function;

/// Fuses an Add of a residual and/or Relu, Clip, LeakyRelu, Sigmoid or Tanh into the
/// Convolution or FullyConnected that feeds it, where the backend supports the fused node;
/// for an int8 layer (per tensor or channelwise), a Relu or Clip only.
/// Returns true when it changed \p f.
bool fuseActivations(Function *f, const PassContext &ctx);

} // namespace kiln

#endif // KILN_SRC_PASSES_GRAPH_FUSEACTIVATIONS_H
