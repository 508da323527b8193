// The Sim's cost model: work counted from shapes, turned into cycles by a SimConfig.
// Deliberately simple (no overlap of DMA and compute, no tiling effects); a hardware team
// replaces it with its own performance model.

#include "Sim.h"

#include <unordered_set>

namespace kiln {

namespace {

uint64_t ceilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

uint64_t product(const std::vector<dim_t> &v) {
  uint64_t p = 1;
  for (dim_t d : v)
    p *= d;
  return p;
}

void addMacs(SimWork &w, ElemKind k, uint64_t macs) {
  if (k == ElemKind::Int8Q)
    w.macsI8 += macs;
  else if (k == ElemKind::Float16)
    w.macsF16 += macs;
  else
    w.macsF32 += macs;
}

} // namespace

void countNodeWork(const Node &n, SimWork &w) {
  uint64_t outElems = n.getNumResults() ? n.getType(0)->numElements() : 0;
  ElemKind k = n.getNumInputs() ? n.getNthInput(0).getElementType() : ElemKind::Float;
  switch (n.getKind()) {
  case NodeKind::Convolution: {
    // Each output element: (C / group) * kH * kW MACs, which the filter's dims give.
    const Dims &fd = cast<ConvolutionNode>(&n)->getFilter().dims();
    addMacs(w, k, outElems * fd[1] * fd[2] * fd[3]);
    break;
  }
  case NodeKind::FullyConnected:
    addMacs(w, k, outElems * cast<FullyConnectedNode>(&n)->getWeights().dims()[0]);
    break;
  case NodeKind::MatMul:
    addMacs(w, k, outElems * cast<MatMulNode>(&n)->getRHS().dims()[0]);
    break;
  case NodeKind::MaxPool:
    w.vectorElems += outElems * product(cast<MaxPoolNode>(&n)->getKernels());
    break;
  case NodeKind::AvgPool:
    w.vectorElems += outElems * product(cast<AvgPoolNode>(&n)->getKernels());
    break;
  case NodeKind::AdaptiveAvgPool: // every input element is summed once
    w.vectorElems += n.getNthInput(0).getType()->numElements();
    break;
  case NodeKind::Add:
  case NodeKind::Relu:
  case NodeKind::Concat:
  case NodeKind::Quantize:
  case NodeKind::Dequantize:
    w.vectorElems += outElems;
    break;
  default: // Reshape and Save cost no compute.
    break;
  }
}

SimWork countWork(const Function &f) {
  SimWork w;
  std::unordered_set<const Node *> storage;
  for (const auto &p : f.getNodes()) {
    const Node *n = p.get();
    // Storage: constants are loaded once; placeholders move every run.
    for (unsigned i = 0; i < n->getNumInputs(); i++) {
      const Node *in = n->getNthInput(i).node;
      if (!isa<Storage>(in) || !storage.insert(in).second)
        continue;
      uint64_t bytes = in->getType()->sizeInBytes();
      if (isa<Constant>(in))
        w.weightBytes += bytes;
      else if (isa<SaveNode>(n) && i == SaveNode::OutputIdx)
        w.outputBytes += bytes;
      else
        w.inputBytes += bytes;
    }
    countNodeWork(*n, w);
  }
  return w;
}

SimCost estimateCost(const SimWork &w, const SimConfig &c) {
  SimCost cost;
  cost.computeCycles = ceilDiv(w.macsF32, c.macsPerCycleF32) +
                       ceilDiv(w.macsF16, c.macsPerCycleF16) + ceilDiv(w.macsI8, c.macsPerCycleI8) +
                       ceilDiv(w.vectorElems, c.vectorLanes);
  cost.dmaBytes = w.inputBytes + w.outputBytes;
  cost.dmaCycles = ceilDiv(cost.dmaBytes, c.dmaBytesPerCycle);
  cost.cycles = c.launchCycles + cost.computeCycles + cost.dmaCycles;
  cost.seconds = double(cost.cycles) / (c.clockMHz * 1e6);
  return cost;
}

} // namespace kiln
