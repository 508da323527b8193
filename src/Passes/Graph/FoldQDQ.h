/// \file
/// Graph pass `fold-qdq` (Passes.def): folds the QDQ form of quantized layers (a float
/// Convolution, FullyConnected or MatMul between Dequantize and Quantize nodes, as ONNX
/// Runtime's quantizer writes them) into one ChannelwiseQuantizedConvolution or
/// ChannelwiseQuantizedFullyConnected with integer arithmetic.
#ifndef KILN_SRC_PASSES_GRAPH_FOLDQDQ_H
#define KILN_SRC_PASSES_GRAPH_FOLDQDQ_H

#include "kiln/Passes/PassContext.h"

namespace kiln {

class Function;

/// Folds Quantize(Op(Dequantize(x), dequantized constant weights, bias)) into one quantized
/// node. Returns true when it changed \p f.
bool foldQDQ(Function *f, const PassContext &ctx);

} // namespace kiln

#endif // KILN_SRC_PASSES_GRAPH_FOLDQDQ_H
