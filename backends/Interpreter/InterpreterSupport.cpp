// Which nodes and element kinds the Interpreter runs. This is the contract its kernels
// implement and the operator test-suite checks: every kind claimed here has a kernel and a
// test. The switch names every node kind and has no default, so a new operator in the
// table does not compile until someone decides its support here.

#include "Interpreter.h"

#include <initializer_list>

namespace kiln {

namespace {

bool in(ElemKind k, std::initializer_list<ElemKind> set) {
  for (ElemKind s : set)
    if (s == k)
      return true;
  return false;
}

constexpr auto F32 = ElemKind::Float;
constexpr auto F16 = ElemKind::Float16;
constexpr auto BF16 = ElemKind::BFloat16;
constexpr auto I8Q = ElemKind::Int8Q;
constexpr auto U8Q = ElemKind::UInt8Q;
constexpr auto I32Q = ElemKind::Int32Q;
constexpr auto I32 = ElemKind::Int32I;
constexpr auto I64 = ElemKind::Int64I;
constexpr auto BOOL = ElemKind::Bool;

/// Float kinds, and float kinds plus int8 quantized.
const std::initializer_list<ElemKind> kFloats = {F32, F16, BF16};
const std::initializer_list<ElemKind> kFloatsQ = {F32, F16, BF16, I8Q};
const std::initializer_list<ElemKind> kNumeric = {F32, F16, BF16, I32, I64};
const std::initializer_list<ElemKind> kNumericQ = {F32, F16, BF16, I8Q, I32, I64};
const std::initializer_list<ElemKind> kAll = {F32, F16, BF16, I8Q, U8Q, I32Q, I32, I64, BOOL};

ElemKind kindOf(const Node &n, unsigned i) { return n.getNthInput(i).getElementType(); }
ElemKind resultKind(const Node &n) { return n.getType(0)->kind; }

/// Quantized convolution and FC: int8 data and weights, int32 bias, int8 result.
bool isInt8Linear(const Node &n, unsigned biasIdx) {
  return kindOf(n, 0) == I8Q && kindOf(n, 1) == I8Q && kindOf(n, biasIdx) == I32Q &&
         resultKind(n) == I8Q;
}

/// Float kinds: every operand and the result share it.
bool isUniformFloat(const Node &n) {
  ElemKind k = resultKind(n);
  if (!in(k, kFloats))
    return false;
  for (unsigned i = 0; i < n.getNumInputs(); i++)
    if (kindOf(n, i) != k)
      return false;
  return true;
}

} // namespace

bool InterpreterBackend::isOpSupported(const Node &n) const {
  switch (n.getKind()) {
  case NodeKind::Placeholder:
  case NodeKind::Constant:
    return true;

  case NodeKind::Convolution:
    return isUniformFloat(n) || isInt8Linear(n, 2);
  case NodeKind::FullyConnected:
    return isUniformFloat(n) || isInt8Linear(n, 2);
  case NodeKind::MatMul:
  case NodeKind::BatchMatMul:
  case NodeKind::BatchedAdd:
    return isUniformFloat(n) ||
           (kindOf(n, 0) == I8Q && kindOf(n, 1) == I8Q && resultKind(n) == I8Q);
  case NodeKind::MaxPool:
  case NodeKind::AvgPool:
  case NodeKind::AdaptiveAvgPool:
    return in(kindOf(n, 0), kFloatsQ) && resultKind(n) == kindOf(n, 0);

  case NodeKind::BatchNormalization:
  case NodeKind::LayerNormalization:
  case NodeKind::SoftMax:
  case NodeKind::LogSoftMax:
    return isUniformFloat(n);

  case NodeKind::Relu:
    return in(kindOf(n, 0), kFloatsQ) && resultKind(n) == kindOf(n, 0);
  case NodeKind::Sigmoid:
  case NodeKind::Tanh:
  case NodeKind::Gelu:
  case NodeKind::HardSwish:
  case NodeKind::Swish:
  case NodeKind::Clip:
  case NodeKind::LeakyRelu:
  case NodeKind::PRelu:
  case NodeKind::Exp:
  case NodeKind::Log:
  case NodeKind::Sqrt:
  case NodeKind::Rsqrt:
  case NodeKind::Reciprocal:
  case NodeKind::Erf:
  case NodeKind::Floor:
  case NodeKind::Ceil:
  case NodeKind::Round:
  case NodeKind::Pow:
    return isUniformFloat(n);
  case NodeKind::Neg:
  case NodeKind::Abs:
    return in(kindOf(n, 0), kNumeric);

  case NodeKind::Add:
  case NodeKind::Sub:
  case NodeKind::Mul:
  case NodeKind::Max:
  case NodeKind::Min:
    return in(kindOf(n, 0), kNumericQ) && resultKind(n) == kindOf(n, 0);
  case NodeKind::Div:
    return in(kindOf(n, 0), kNumeric);
  case NodeKind::CmpEQ:
  case NodeKind::CmpLT:
  case NodeKind::CmpLTE:
    return in(kindOf(n, 0), kNumeric);
  case NodeKind::Select:
    return kindOf(n, 0) == BOOL && in(kindOf(n, 1), kAll);

  case NodeKind::ReduceSum:
  case NodeKind::ReduceMax:
  case NodeKind::ReduceMin:
  case NodeKind::ReduceProd:
    return in(kindOf(n, 0), kNumeric);
  case NodeKind::ReduceMean:
    return in(kindOf(n, 0), kFloats);
  case NodeKind::ArgMax:
  case NodeKind::ArgMin:
  case NodeKind::TopK:
    return in(kindOf(n, 0), kNumericQ);

  case NodeKind::Concat:
  case NodeKind::Slice:
  case NodeKind::Reshape:
  case NodeKind::Transpose:
  case NodeKind::Gather:
  case NodeKind::Tile:
  case NodeKind::Pad:
  case NodeKind::Broadcast:
  case NodeKind::Save:
    return in(kindOf(n, 0), kAll);
  case NodeKind::Splat:
    return in(resultKind(n), kAll);
  case NodeKind::ConvertTo:
    return in(kindOf(n, 0), {F32, F16, BF16, I32, I64, BOOL}) &&
           in(resultKind(n), {F32, F16, BF16, I32, I64, BOOL});

  case NodeKind::InsertTensor:
    return in(kindOf(n, 0), kAll) && kindOf(n, 1) == kindOf(n, 0);
  case NodeKind::FusedConvolution:
  case NodeKind::FusedFullyConnected:
    return isUniformFloat(n);

  case NodeKind::Quantize:
    return kindOf(n, 0) == F32 && in(resultKind(n), {I8Q, U8Q, I32Q});
  case NodeKind::Dequantize:
    return in(kindOf(n, 0), {I8Q, U8Q, I32Q}) && resultKind(n) == F32;
  case NodeKind::RescaleQuantized:
    return in(kindOf(n, 0), {I8Q, U8Q, I32Q}) && resultKind(n) == kindOf(n, 0);
  }
  return false;
}

} // namespace kiln
