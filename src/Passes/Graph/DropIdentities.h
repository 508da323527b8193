/// \file
/// Graph pass `drop-identities` (Passes.def): Drops identity-like nodes: conversions to the same
/// type, Quantize of Dequantize, unbounded Clip, idempotent (Relu of Relu) and involutive (Neg of
/// Neg) chains.
#ifndef KILN_SRC_PASSES_GRAPH_DROPIDENTITIES_H
#define KILN_SRC_PASSES_GRAPH_DROPIDENTITIES_H

#include "kiln/Passes/PassContext.h"

namespace kiln {

class Function;

/// Drops identity-like nodes: conversions to the same type, Quantize of Dequantize, unbounded Clip,
/// idempotent (Relu of Relu) and involutive (Neg of Neg) chains. Returns true when it changed \p f.
bool dropIdentities(Function *f, const PassContext &ctx);

} // namespace kiln

#endif // KILN_SRC_PASSES_GRAPH_DROPIDENTITIES_H
