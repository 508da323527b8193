// The `lower` pass: asks the backend about each node, dispatches to the family files, and
// repeats, because a lowering may produce nodes the backend also wants lowered (Broadcast
// from BatchNormalization, Tile from Broadcast, Concat from Tile).

#include "Lower.h"

#include "LowerUtil.h"

#include "src/Passes/Graph/PassUtils.h"

#include "kiln/Backend/Backend.h"

#include <glog/logging.h>

namespace kiln {

namespace {

/// The replacement of \p n, or null when no lowering applies.
NodeValue lowerNode(Function *f, Node *n) {
  using namespace lower;
  switch (n->getKind()) {
  case NodeKind::FullyConnected:
    return lowerFullyConnected(f, cast<FullyConnectedNode>(n));
  case NodeKind::BatchMatMul:
    return lowerBatchMatMul(f, cast<BatchMatMulNode>(n));
  case NodeKind::Convolution:
    return lowerGroupedConvolution(f, cast<ConvolutionNode>(n));
  case NodeKind::BatchNormalization:
    return lowerBatchNormalization(f, cast<BatchNormalizationNode>(n));
  case NodeKind::LayerNormalization:
    return lowerLayerNormalization(f, cast<LayerNormalizationNode>(n));
  case NodeKind::LogSoftMax:
    return lowerLogSoftMax(f, cast<LogSoftMaxNode>(n));
  case NodeKind::Gelu:
    return lowerGelu(f, cast<GeluNode>(n));
  case NodeKind::Swish:
    return lowerSwish(f, cast<SwishNode>(n));
  case NodeKind::HardSwish:
    return lowerHardSwish(f, cast<HardSwishNode>(n));
  case NodeKind::LeakyRelu:
    return lowerLeakyRelu(f, cast<LeakyReluNode>(n));
  case NodeKind::PRelu:
    return lowerPRelu(f, cast<PReluNode>(n));
  case NodeKind::Clip:
    return lowerClip(f, cast<ClipNode>(n));
  case NodeKind::Pad:
    return lowerPad(f, cast<PadNode>(n));
  case NodeKind::Tile:
    return lowerTile(f, cast<TileNode>(n));
  case NodeKind::Broadcast:
    return lowerBroadcast(f, cast<BroadcastNode>(n));
  case NodeKind::ReduceMean:
    return lowerReduceMean(f, cast<ReduceMeanNode>(n));
  default: // every other kind is a primitive: nothing to lower
    return NodeValue();
  }
}

} // namespace

bool lowerNodes(Function *f, const PassContext &ctx) {
  constexpr unsigned kMaxRounds = 16;
  passutil::Sweeper sweeper;
  bool changed = false;
  for (unsigned round = 0; round < kMaxRounds; round++) {
    bool any = false;
    for (Node *n : passutil::topoOrder(*f)) {
      if (!n->hasUsers() || n->getNumResults() != 1)
        continue;
      if (ctx.backend && !ctx.backend->shouldLower(*n))
        continue;
      NodeValue r = lowerNode(f, n);
      if (!r)
        continue;
      CHECK(r.getType()->sameShapeAndKind(*n->getType(0)))
          << "lowering " << n->describe() << " produced " << r.getType()->toString();
      passutil::replaceWith(n, r, sweeper);
      any = true;
    }
    if (!any)
      break;
    changed = true;
    sweeper.sweep(f);
  }
  sweeper.sweep(f);
  return changed;
}

} // namespace kiln
