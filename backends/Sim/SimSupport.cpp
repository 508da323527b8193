// What the Sim chip runs: the Sim column of the operator table (src/ClassGen/NodeTable.cpp,
// docs/Operators.md) lists the chip's operators and data paths (MAC array: Convolution,
// FullyConnected, MatMul; vector unit: Add, Relu, pooling, Concat; Reshape as a view, Save
// as the DMA out). An accelerator opts in to each operator: a new operator in the table
// states "none" for Sim and goes to the host until the chip has it.

#include "Sim.h"

#include "src/ClassGen/OpTable.h"

namespace kiln {

bool SimBackend::isOpSupported(const Node &n) const {
  // The chip must have the operator, and the kernels that simulate it must exist.
  const Backend *interp = interpreter();
  return optable::kindsSupported(n, optable::TableBackend::Sim) && interp &&
         interp->isOpSupported(n);
}

} // namespace kiln
