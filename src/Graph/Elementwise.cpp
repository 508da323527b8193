// The element-wise family at graph level. Its type rule is the generated same-shape check
// (checkSameShapeAndKind, TypeRules.cpp; Select's inferSelect is there too); what follows
// is what it lowers to (the lowering functions the `lower` pass calls, src/Lower/Lower.cpp).
//
// Activations, in element-wise arithmetic (Splats for the constants):
//   Gelu(x)            -> 0.5 * x * (1 + Erf(x / sqrt(2)))
//   Gelu(x, approx)    -> 0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
//   Swish(x)           -> x * Sigmoid(x)
//   HardSwish(x)       -> x * Min(Max(x + 3, 0), 6) / 6
//   LeakyRelu(x, a)    -> Max(x, 0) + a * Min(x, 0)
//   PRelu(x, s)        -> Max(x, 0) + s * Min(x, 0)
//   Clip(x, lo, hi)    -> Min(Max(x, lo), hi)   (an infinite bound is dropped)

#include "Lowering.h"

#include <cmath>

namespace kiln::lower {

NodeValue lowerGelu(Function *f, GeluNode *n) {
  if (!isFloatResult(n))
    return NodeValue();
  Builder b(f, n);
  NodeValue x = n->getInput();
  NodeValue inner;
  if (n->getApproximate()) {
    NodeValue x3 = f->createMul(b.name("x3"), f->createMul(b.name("x2"), x, x), x);
    NodeValue poly = f->createAdd(b.name("poly"), x,
                                  f->createMul(b.name("cubic"), x3, b.splatLike(x, 0.044715, "c")));
    NodeValue arg =
        f->createMul(b.name("arg"), poly, b.splatLike(x, std::sqrt(2.0 / M_PI), "sqrt_2_pi"));
    inner = f->createTanh(b.name("tanh"), arg);
  } else {
    NodeValue arg = f->createMul(b.name("arg"), x, b.splatLike(x, 1.0 / std::sqrt(2.0), "rsqrt2"));
    inner = f->createErf(b.name("erf"), arg);
  }
  NodeValue onePlus = f->createAdd(b.name("one_plus"), inner, b.splatLike(x, 1.0, "one"));
  NodeValue half = f->createMul(b.name("half_x"), x, b.splatLike(x, 0.5, "half"));
  return f->createMul(b.name("result"), half, onePlus);
}

NodeValue lowerSwish(Function *f, SwishNode *n) {
  if (!isFloatResult(n))
    return NodeValue();
  Builder b(f, n);
  return f->createMul(b.name("result"), n->getInput(),
                      f->createSigmoid(b.name("sigmoid"), n->getInput()));
}

NodeValue lowerHardSwish(Function *f, HardSwishNode *n) {
  if (!isFloatResult(n))
    return NodeValue();
  Builder b(f, n);
  NodeValue x = n->getInput();
  NodeValue shifted = f->createAdd(b.name("plus3"), x, b.splatLike(x, 3.0, "three"));
  NodeValue lo = f->createMax(b.name("max0"), shifted, b.splatLike(x, 0.0, "zero"));
  NodeValue clipped = f->createMin(b.name("min6"), lo, b.splatLike(x, 6.0, "six"));
  NodeValue prod = f->createMul(b.name("mul"), x, clipped);
  return f->createDiv(b.name("result"), prod, b.splatLike(x, 6.0, "six_div"));
}

namespace {
/// Max(x, 0) + slope * Min(x, 0).
NodeValue piecewiseLinear(Function *f, const Builder &b, NodeValue x, NodeValue slope) {
  NodeValue zero = b.splatLike(x, 0.0, "zero");
  NodeValue pos = f->createMax(b.name("pos"), x, zero);
  NodeValue neg = f->createMin(b.name("neg"), x, zero);
  return f->createAdd(b.name("result"), pos, f->createMul(b.name("neg_scaled"), neg, slope));
}
} // namespace

NodeValue lowerLeakyRelu(Function *f, LeakyReluNode *n) {
  if (!isFloatResult(n))
    return NodeValue();
  Builder b(f, n);
  return piecewiseLinear(f, b, n->getInput(), b.splatLike(n->getInput(), n->getAlpha(), "alpha"));
}

NodeValue lowerPRelu(Function *f, PReluNode *n) {
  if (!isFloatResult(n))
    return NodeValue();
  Builder b(f, n);
  return piecewiseLinear(f, b, n->getInput(), n->getSlope());
}

NodeValue lowerClip(Function *f, ClipNode *n) {
  if (!isFloatResult(n))
    return NodeValue();
  Builder b(f, n);
  NodeValue x = n->getInput();
  NodeValue r = x;
  if (!(std::isinf(n->getMin()) && n->getMin() < 0))
    r = f->createMax(b.name("min"), r, b.splatLike(x, n->getMin(), "lo"));
  if (!(std::isinf(n->getMax()) && n->getMax() > 0))
    r = f->createMin(b.name("max"), r, b.splatLike(x, n->getMax(), "hi"));
  if (r == x) // Clip(-inf, inf): nothing to compute, but still a distinct value
    return NodeValue();
  return r;
}

} // namespace kiln::lower
