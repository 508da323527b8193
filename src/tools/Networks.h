/// \file
/// Reference network shapes built with the C++ API (random weights): ResNet-50,
/// MobileNetV2 and a BERT-style transformer encoder. Used by kiln-plan and the memory
/// planner's tests and report, where only the shapes matter. BatchNorm is taken as folded
/// into the convolutions (as the graph passes leave it), and the attention scale as folded
/// into the query weights.
#ifndef KILN_TOOLS_NETWORKS_H
#define KILN_TOOLS_NETWORKS_H

#include "kiln/Graph/Graph.h"

#include <string>
#include <vector>

namespace kiln::networks {

struct CNNOptions {
  dim_t batch = 1;
  dim_t imageSize = 224;
  /// Channel counts are divided by this (at least 1 channel), for small test versions.
  dim_t widthDivisor = 1;
  dim_t numClasses = 1000;
};

struct TransformerOptions {
  dim_t seqLen = 128;
  dim_t dModel = 768;
  dim_t heads = 12;
  dim_t ffDim = 3072;
  unsigned layers = 12;
};

/// ResNet-50 v1.5 on input placeholder "input" [batch,3,S,S]; saves softmax probabilities
/// to "probs". Returns the function.
Function *buildResNet50(Module &m, const CNNOptions &o = {});
/// MobileNetV2 (width 1.0) on "input" [batch,3,S,S]; saves probabilities to "probs".
Function *buildMobileNetV2(Module &m, const CNNOptions &o = {});
/// A transformer encoder on "tokens" [seqLen, dModel] (embeddings already looked up):
/// per layer, multi-head self-attention, residual add, LayerNorm, a Gelu feed-forward
/// block, residual add, LayerNorm; saves the last hidden state to "hidden".
Function *buildTransformerEncoder(Module &m, const TransformerOptions &o = {});

/// "resnet50", "mobilenetv2", "transformer".
std::vector<std::string> getNetworkNames();
/// Builds the network named \p name at its default size; null for an unknown name.
Function *buildNetwork(const std::string &name, Module &m);

} // namespace kiln::networks

#endif // KILN_TOOLS_NETWORKS_H
