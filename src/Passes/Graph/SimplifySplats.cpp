// simplify-splats: a Splat costs no memory and no work, so nodes whose operands are all
// Splats become Splats too (cheaper than constant folding them into dense Constants):
//  - Reshape, Transpose, Broadcast, Tile, Slice of a Splat: a Splat of the result type;
//  - Concat of Splats of one value: a Splat;
//  - ConvertTo between float kinds;
//  - element-wise arithmetic (unary and binary) on float Splats, computed in float on the
//    values as stored (16-bit kinds rounded) exactly like the reference kernels.

#include "SimplifySplats.h"

#include "PassUtils.h"

#include <cmath>

namespace kiln {

namespace {

/// \p v as stored in an element of float kind \p k.
float stored(double v, ElemKind k) {
  switch (k) {
  case ElemKind::Float16:
    return float(float16(float(v)));
  case ElemKind::BFloat16:
    return float(bfloat16(float(v)));
  default:
    return float(v);
  }
}

/// The value of a float, non-quantized Splat operand, as stored.
bool splatValue(NodeValue v, float &out) {
  auto *s = dyn_cast<SplatNode>(v.node);
  if (!s || !isFloatKind(v.getElementType()))
    return false;
  out = stored(s->getValue(), v.getElementType());
  return true;
}

bool evalUnary(NodeKind k, float x, float &r) {
  switch (k) {
  case NodeKind::Neg:
    r = -x;
    return true;
  case NodeKind::Abs:
    r = std::fabs(x);
    return true;
  case NodeKind::Relu:
    r = x > 0 ? x : 0.0f;
    return true;
  case NodeKind::Sqrt:
    r = std::sqrt(x);
    return true;
  case NodeKind::Rsqrt:
    r = 1.0f / std::sqrt(x);
    return true;
  case NodeKind::Reciprocal:
    r = 1.0f / x;
    return true;
  case NodeKind::Exp:
    r = std::exp(x);
    return true;
  case NodeKind::Log:
    r = std::log(x);
    return true;
  case NodeKind::Tanh:
    r = std::tanh(x);
    return true;
  case NodeKind::Sigmoid:
    r = 1.0f / (1.0f + std::exp(-x));
    return true;
  case NodeKind::Floor:
    r = std::floor(x);
    return true;
  case NodeKind::Ceil:
    r = std::ceil(x);
    return true;
  default:
    return false;
  }
}

bool evalBinary(NodeKind k, float a, float b, float &r) {
  switch (k) {
  case NodeKind::Add:
    r = a + b;
    return true;
  case NodeKind::Sub:
    r = a - b;
    return true;
  case NodeKind::Mul:
    r = a * b;
    return true;
  case NodeKind::Div:
    r = a / b;
    return true;
  case NodeKind::Max:
    r = std::fmax(a, b);
    return true;
  case NodeKind::Min:
    r = std::fmin(a, b);
    return true;
  case NodeKind::Pow:
    r = std::pow(a, b);
    return true;
  default:
    return false;
  }
}

/// The value of the Splat \p n can become, when it can.
bool simplified(Node *n, float &value) {
  if (n->getNumResults() != 1 || n->getNumInputs() == 0)
    return false;
  switch (n->getKind()) {
  case NodeKind::Reshape:
  case NodeKind::Transpose:
  case NodeKind::Broadcast:
  case NodeKind::Tile:
  case NodeKind::Slice: {
    auto *s = dyn_cast<SplatNode>(n->getNthInput(0).node);
    if (!s ||
        *n->getNthInput(0).getType() != Type::withDims(*n->getType(0), n->getNthInput(0).dims()))
      return false;
    value = s->getValue();
    return true;
  }
  case NodeKind::Concat: {
    auto *first = dyn_cast<SplatNode>(n->getNthInput(0).node);
    if (!first)
      return false;
    for (unsigned i = 1; i < n->getNumInputs(); i++) {
      auto *s = dyn_cast<SplatNode>(n->getNthInput(i).node);
      if (!s || s->getValue() != first->getValue())
        return false;
    }
    value = first->getValue();
    return true;
  }
  case NodeKind::ConvertTo: {
    float x;
    if (!splatValue(n->getNthInput(0), x) || !isFloatKind(n->getType(0)->kind))
      return false;
    value = x;
    return true;
  }
  default:
    break;
  }
  if (!n->isDataParallel() || !isFloatKind(n->getType(0)->kind))
    return false;
  float a, b;
  if (n->getNumInputs() == 1)
    return splatValue(n->getNthInput(0), a) && evalUnary(n->getKind(), a, value);
  if (n->getNumInputs() == 2)
    return splatValue(n->getNthInput(0), a) && splatValue(n->getNthInput(1), b) &&
           evalBinary(n->getKind(), a, b, value);
  return false;
}

} // namespace

bool simplifySplats(Function *f, const PassContext &) {
  return passutil::rewriteNodes(f, [&](Node *n) {
    float value;
    if (isa<SplatNode>(n) || !simplified(n, value))
      return NodeValue();
    return NodeValue(f->createSplat(n->getName(), n->getType(0), value));
  });
}

} // namespace kiln
