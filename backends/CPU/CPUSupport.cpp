// What the CPU backend runs. The element kinds are the CPU column of the operator table
// (src/ClassGen/NodeTable.cpp, docs/Operators.md): float32 compute, and data movement of
// every element type; this file adds what the table cannot say, the ranks and fused
// activations the kernels handle. Every kind claimed has a kernel (an emitter in
// codegen/Emit*.cpp, or the table-driven element-wise default) and runs in the operator
// suite against the Interpreter.

#include "CPUBackend.h"

#include "src/ClassGen/OpTable.h"

namespace kiln::cpu {

namespace {

unsigned rankOf(const Node &n, unsigned i) { return unsigned(n.getNthInput(i).dims().size()); }

/// Rank and attribute conditions of the CPU kernels, for a node whose kinds the table
/// accepts. A new operator needs no case here unless its kernel has such a limit.
bool shapeSupported(const Node &n) {
  switch (n.getKind()) {
  case NodeKind::Convolution:
    return rankOf(n, 0) == 4 && rankOf(n, 1) == 4;
  case NodeKind::FusedConvolution: {
    const std::string &act = cast<FusedConvolutionNode>(&n)->getActivation();
    return rankOf(n, 0) == 4 && rankOf(n, 1) == 4 && (act == "Relu" || act == "Clip");
  }
  case NodeKind::FusedFullyConnected: {
    const std::string &act = cast<FusedFullyConnectedNode>(&n)->getActivation();
    return rankOf(n, 0) == 2 && rankOf(n, 1) == 2 && (act == "Relu" || act == "Clip");
  }
  case NodeKind::MaxPool:
  case NodeKind::AvgPool:
  case NodeKind::AdaptiveAvgPool:
    return rankOf(n, 0) == 4;
  case NodeKind::FullyConnected:
  case NodeKind::MatMul:
    return rankOf(n, 0) == 2 && rankOf(n, 1) == 2;
  case NodeKind::BatchMatMul:
    return rankOf(n, 0) == 3 && rankOf(n, 1) == 3;
  case NodeKind::ReduceSum:
  case NodeKind::ReduceMean:
  case NodeKind::ReduceMax:
  case NodeKind::ReduceMin:
  case NodeKind::ReduceProd:
    return rankOf(n, 0) <= 16;
  case NodeKind::Tile:
    return rankOf(n, 0) <= 8;
  default:
    return true;
  }
}

} // namespace

bool CPUBackend::isOpSupported(const Node &n) const {
  return optable::kindsSupported(n, optable::TableBackend::CPU) && shapeSupported(n);
}

} // namespace kiln::cpu
