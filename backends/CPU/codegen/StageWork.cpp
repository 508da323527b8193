#include "StageWork.h"

#include <unordered_set>

namespace kiln::cpu {

namespace {

/// Multiply-adds per output element of a GEMM-like instruction (operand 0 the result,
/// 1 the input, 2 the weights or right-hand side), 0 for other kinds.
double macsPerOutput(const Instruction &I) {
  auto dims = [&](unsigned k) { return I.getOperand(k).first->getType()->dims; };
  switch (I.getKind()) {
  case InstrKind::Convolution:
  case InstrKind::FusedConvolution:
  case InstrKind::ChannelwiseQuantizedConvolution: {
    // Filter [O, C / group, KH, KW]: each output sums C / group x KH x KW products.
    const auto &w = dims(2);
    double m = 1;
    for (size_t i = 1; i < w.size(); i++)
      m *= double(w[i]);
    return m;
  }
  case InstrKind::FullyConnected:
  case InstrKind::FusedFullyConnected:
  case InstrKind::ChannelwiseQuantizedFullyConnected:
  case InstrKind::MatMul:
  case InstrKind::BatchMatMul:
    // Input [.., K]: each output sums K products.
    return dims(1).size() ? double(dims(1)[dims(1).size() - 1]) : 0.0;
  default:
    return 0;
  }
}

} // namespace

StageWork stageWork(const std::vector<const Instruction *> &instrs) {
  StageWork w;
  std::unordered_set<const Value *> seen;
  for (const Instruction *I : instrs) {
    if (I->getNumOperands())
      w.flops += 2 * macsPerOutput(*I) * double(I->getOperand(0).first->getType()->numElements());
    for (const auto &o : I->getOperands())
      if (seen.insert(o.first).second)
        w.bytes += double(o.first->getType()->sizeInBytes());
  }
  return w;
}

} // namespace kiln::cpu
