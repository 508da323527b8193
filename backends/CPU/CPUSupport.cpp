// What the CPU backend runs: float32 compute, and data movement of every element kind.
// The switch names every node kind and has no default, so a new operator in the table does
// not compile until someone decides its support here. Every kind claimed here has a kernel
// (an emitter in codegen/Emit*.cpp, or the table-driven element-wise default) and runs in
// the operator suite against the Interpreter.

#include "CPUBackend.h"

namespace kiln::cpu {

namespace {

constexpr auto F32 = ElemKind::Float;

ElemKind kindOf(const Node &n, unsigned i) { return n.getNthInput(i).getElementType(); }
ElemKind resultKind(const Node &n) { return n.getType(0)->kind; }

/// Every operand and every result is float32.
bool allFloat(const Node &n) {
  for (unsigned i = 0; i < n.getNumInputs(); i++)
    if (kindOf(n, i) != F32)
      return false;
  for (unsigned i = 0; i < n.getNumResults(); i++)
    if (n.getType(i)->kind != F32)
      return false;
  return true;
}

/// Same element kind and quantization parameters.
bool sameElemType(const Type &a, const Type &b) {
  return a.kind == b.kind && (!a.isQuantizedType() || (a.scale == b.scale && a.offset == b.offset));
}

/// Every input and the result have one element type (any kind: kernels move bytes, so
/// quantized values pass unchanged only when no requantization is needed).
bool sameKind(const Node &n) {
  const Type &r = *n.getType(0);
  for (unsigned i = 0; i < n.getNumInputs(); i++)
    if (!sameElemType(*n.getNthInput(i).getType(), r))
      return false;
  return true;
}

unsigned rankOf(const Node &n, unsigned i) { return unsigned(n.getNthInput(i).dims().size()); }

} // namespace

bool CPUBackend::isOpSupported(const Node &n) const {
  switch (n.getKind()) {
  case NodeKind::Placeholder:
  case NodeKind::Constant:
    return true;

  case NodeKind::Convolution:
    return allFloat(n) && rankOf(n, 0) == 4 && rankOf(n, 1) == 4;
  case NodeKind::FusedConvolution: {
    // The GEMM kernels' epilogue: a residual and/or a clamp. The depthwise kernel has the
    // clamp only.
    auto *c = cast<FusedConvolutionNode>(&n);
    const std::string &act = c->getActivation();
    const Type &in = *c->getInput().getType(), &out = *c->getType(0);
    bool depthwise = rankOf(n, 0) == 4 && c->getGroup() > 1 && c->getGroup() == in.dims[1] &&
                     out.dims[1] == in.dims[1];
    return opts_.fuseEpilogues && allFloat(n) && rankOf(n, 0) == 4 && rankOf(n, 1) == 4 &&
           (act == "None" || act == "Relu" || act == "Clip") &&
           !(depthwise && !c->getResidual().empty());
  }
  case NodeKind::FusedFullyConnected: {
    const std::string &act = cast<FusedFullyConnectedNode>(&n)->getActivation();
    return opts_.fuseEpilogues && allFloat(n) && rankOf(n, 0) == 2 && rankOf(n, 1) == 2 &&
           (act == "None" || act == "Relu" || act == "Clip");
  }
  case NodeKind::MaxPool:
  case NodeKind::AvgPool:
  case NodeKind::AdaptiveAvgPool:
    return allFloat(n) && rankOf(n, 0) == 4;
  case NodeKind::FullyConnected:
    return allFloat(n) && rankOf(n, 0) == 2 && rankOf(n, 1) == 2;
  case NodeKind::MatMul:
    return allFloat(n) && rankOf(n, 0) == 2 && rankOf(n, 1) == 2;
  case NodeKind::BatchMatMul:
    return allFloat(n) && rankOf(n, 0) == 3 && rankOf(n, 1) == 3;
  case NodeKind::BatchedAdd:
  case NodeKind::BatchNormalization:
  case NodeKind::LayerNormalization:
  case NodeKind::SoftMax:
  case NodeKind::LogSoftMax:
    return allFloat(n);

  case NodeKind::Relu:
  case NodeKind::Sigmoid:
  case NodeKind::Tanh:
  case NodeKind::Gelu:
  case NodeKind::HardSwish:
  case NodeKind::Swish:
  case NodeKind::Clip:
  case NodeKind::LeakyRelu:
  case NodeKind::PRelu:
  case NodeKind::Neg:
  case NodeKind::Abs:
  case NodeKind::Exp:
  case NodeKind::Log:
  case NodeKind::Sqrt:
  case NodeKind::Rsqrt:
  case NodeKind::Reciprocal:
  case NodeKind::Erf:
  case NodeKind::Floor:
  case NodeKind::Ceil:
  case NodeKind::Round:
  case NodeKind::Add:
  case NodeKind::Sub:
  case NodeKind::Mul:
  case NodeKind::Div:
  case NodeKind::Max:
  case NodeKind::Min:
  case NodeKind::Pow:
    return allFloat(n);

  case NodeKind::ReduceSum:
  case NodeKind::ReduceMean:
  case NodeKind::ReduceMax:
  case NodeKind::ReduceMin:
  case NodeKind::ReduceProd:
    return allFloat(n) && rankOf(n, 0) <= 16;

  case NodeKind::Concat:
  case NodeKind::Slice:
  case NodeKind::Reshape:
  case NodeKind::Transpose:
  case NodeKind::Broadcast:
    return sameKind(n);
  case NodeKind::Save:
    return sameElemType(*n.getNthInput(0).getType(), *n.getNthInput(1).getType());
  case NodeKind::Tile:
    return sameKind(n) && rankOf(n, 0) <= 8;
  case NodeKind::Pad:
    return allFloat(n);
  case NodeKind::InsertTensor:
    return sameKind(n);
  case NodeKind::Splat:
    return resultKind(n) == F32 || resultKind(n) == ElemKind::Int32I ||
           resultKind(n) == ElemKind::Int64I || resultKind(n) == ElemKind::Bool;

  // Not yet: comparisons and selection, index outputs, gathers, conversions, quantization.
  case NodeKind::CmpEQ:
  case NodeKind::CmpLT:
  case NodeKind::CmpLTE:
  case NodeKind::Select:
  case NodeKind::ArgMax:
  case NodeKind::ArgMin:
  case NodeKind::TopK:
  case NodeKind::Gather:
  case NodeKind::ConvertTo:
  case NodeKind::Quantize:
  case NodeKind::Dequantize:
  case NodeKind::RescaleQuantized:
    return false;
  }
  return false;
}

} // namespace kiln::cpu
