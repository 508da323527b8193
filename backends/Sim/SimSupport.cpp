// What the Sim chip runs. Unlike the Interpreter's switch, this one has a default: an
// accelerator opts in to each operator, and new operators in the table go to the host
// until someone adds them here.

#include "Sim.h"

namespace kiln {

namespace {

constexpr auto F32 = ElemKind::Float;
constexpr auto F16 = ElemKind::Float16;
constexpr auto I8Q = ElemKind::Int8Q;

ElemKind kindOf(const Node &n, unsigned i) { return n.getNthInput(i).getElementType(); }
ElemKind resultKind(const Node &n) { return n.getType(0)->kind; }

/// The three data paths of the chip.
bool isDataKind(ElemKind k) { return k == F32 || k == F16 || k == I8Q; }

/// Every operand and the result share one of the chip's float kinds.
bool isUniformFloat(const Node &n) {
  ElemKind k = resultKind(n);
  if (k != F32 && k != F16)
    return false;
  for (unsigned i = 0; i < n.getNumInputs(); i++)
    if (kindOf(n, i) != k)
      return false;
  return true;
}

/// The int8 path of the MAC array: int8 data and weights, int32 bias, int8 result.
bool isInt8Linear(const Node &n) {
  return kindOf(n, 0) == I8Q && kindOf(n, 1) == I8Q && kindOf(n, 2) == ElemKind::Int32Q &&
         resultKind(n) == I8Q;
}

bool simSupports(const Node &n) {
  switch (n.getKind()) {
  case NodeKind::Placeholder:
  case NodeKind::Constant:
    return true;
  // MAC array.
  case NodeKind::Convolution:
  case NodeKind::FullyConnected:
    return isUniformFloat(n) || isInt8Linear(n);
  case NodeKind::MatMul:
    return isUniformFloat(n) ||
           (kindOf(n, 0) == I8Q && kindOf(n, 1) == I8Q && resultKind(n) == I8Q);
  // Vector unit.
  case NodeKind::Add:
  case NodeKind::Relu:
  case NodeKind::MaxPool:
  case NodeKind::AvgPool:
  case NodeKind::Concat:
    return isDataKind(kindOf(n, 0)) && resultKind(n) == kindOf(n, 0);
  case NodeKind::Quantize:
    return kindOf(n, 0) == F32 && resultKind(n) == I8Q;
  case NodeKind::Dequantize:
    return kindOf(n, 0) == I8Q && resultKind(n) == F32;
  // Data movement: a Reshape is a view, a Save is the DMA out.
  case NodeKind::Reshape:
  case NodeKind::Save:
    return isDataKind(kindOf(n, 0));
  default:
    return false;
  }
}

} // namespace

bool SimBackend::isOpSupported(const Node &n) const {
  // The chip must have the operator, and the kernels that simulate it must exist.
  const Backend *interp = interpreter();
  return simSupports(n) && interp && interp->isOpSupported(n);
}

} // namespace kiln
