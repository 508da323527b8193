/// \file
/// A ResNet-50-shaped graph built with the C++ API: a 7x7 stem, four stages of
/// bottleneck blocks (3, 4, 6, 3) of Convolution / BatchNormalization / Relu with residual
/// Adds (projection shortcuts where the shape changes), global average pooling, and a
/// 1000-way FullyConnected. Weights are seeded random (He-uniform); BatchNormalization
/// statistics are seeded random too, so folding them changes every weight.
#ifndef KILN_TEST_PASSES_RESNET50_H
#define KILN_TEST_PASSES_RESNET50_H

#include "kiln/Graph/Graph.h"

namespace kiln::test {

/// Builds ResNet-50 for a [batch, 3, imageSize, imageSize] input into a new function of
/// \p m named \p name; its input placeholder is "data", its outputs "logits" (the
/// FullyConnected) and "prob" (the SoftMax).
Function *buildResNet50(Module &m, const std::string &name = "resnet50", dim_t batch = 1,
                        dim_t imageSize = 224);

} // namespace kiln::test

#endif // KILN_TEST_PASSES_RESNET50_H
