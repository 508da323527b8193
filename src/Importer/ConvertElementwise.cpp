// Converters of element-wise operators: arithmetic and comparisons with numpy
// broadcasting (explicit Broadcast nodes; one-element constants become Splats), unary math,
// activations (some composed from primitives), Where, Clip, Cast and the logical operators.
// All-constant small nodes are evaluated in the importer.

#include "ONNXImporter.h"

#include <cmath>
#include <limits>

namespace kiln::onnximport {

namespace {

using Node = onnx::NodeProto;

/// Graph operands of \p n broadcast to their common shape. One-element constants become
/// Splats of that shape (cheaper than a constant broadcast).
Expected<std::vector<NodeValue>> broadcastInputs(Importer &I, const Node &n,
                                                 std::vector<int> idx) {
  Dims target;
  bool first = true;
  for (int i : idx) {
    KILN_ASSIGN_OR_RETURN(Dims d, I.inputDims(n, i));
    if (first) {
      target = d;
      first = false;
      continue;
    }
    Dims out;
    if (!broadcastShapes(target, d, out))
      return I.parseError(n, "operand shapes ", dimsToString(target), " and ",
                          dimsToString(d), " do not broadcast");
    target = out;
  }
  std::vector<NodeValue> vs;
  for (int i : idx) {
    const Tensor *c = I.constInput(n, i);
    if (c && c->size() == 1 && !isQuantized(c->getElementType())) {
      vs.push_back(I.splat(I.opName(n, "splat"), c->getElementType(), target, c->getAsDouble(0)));
      continue;
    }
    KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, i));
    if (v.dims() != target)
      v = I.F->createBroadcast(I.opName(n, "broadcast"), v, target.vec());
    vs.push_back(v);
  }
  return vs;
}

Error foldedOr(Importer &I, const Node &n, bool &done,
               const std::function<Expected<Tensor>(const std::vector<const Tensor *> &)> &f) {
  done = false;
  auto ins = I.allConst(n);
  if (!ins)
    return Error::success();
  Expected<Tensor> t = f(*ins);
  if (!t) {
    Error e = t.takeError();
    if (e.code() == ErrorCode::Unsupported)
      return Error::success(); // Build graph nodes instead.
    return I.parseError(n, e.message());
  }
  I.setOutputConst(n, 0, std::move(t).get());
  done = true;
  return Error::success();
}

// ---- Binary arithmetic and comparisons. ----

template <typename B> Converter binary(FoldOp op, B build) {
  return [op, build](Importer &I, const Node &n) -> Error {
    if (n.input_size() != 2)
      return I.parseError(n, "expects 2 inputs, has ", n.input_size());
    bool done;
    KILN_RETURN_IF_ERR(foldedOr(I, n, done, [&](const std::vector<const Tensor *> &t) {
      if (op == FoldOp::Pow && t[1]->getElementType() != t[0]->getElementType())
        return foldBinary(op, *t[0], foldCast(*t[1], t[0]->getElementType()));
      return foldBinary(op, *t[0], *t[1]);
    }));
    if (done)
      return Error::success();
    if (op == FoldOp::Pow) {
      // The exponent may have another type: convert it to the base's.
      KILN_ASSIGN_OR_RETURN(ElemKind bk, I.inputKind(n, 0));
      KILN_ASSIGN_OR_RETURN(ElemKind ek, I.inputKind(n, 1));
      if (bk != ek) {
        KILN_ASSIGN_OR_RETURN(std::vector<NodeValue> vs, broadcastInputs(I, n, {0, 1}));
        Dims d = vs[1].dims();
        NodeValue e = I.F->createConvertTo(I.opName(n, "cast"), I.M->uniqueType(bk, d), vs[1]);
        I.setOutput(n, 0, build(I.F, I.opName(n), vs[0], e));
        return Error::success();
      }
    }
    KILN_ASSIGN_OR_RETURN(std::vector<NodeValue> vs, broadcastInputs(I, n, {0, 1}));
    I.setOutput(n, 0, build(I.F, I.opName(n), vs[0], vs[1]));
    return Error::success();
  };
}

/// Sum, Mean, Max, Min over any number of inputs.
Converter variadic(FoldOp op, bool mean) {
  return [op, mean](Importer &I, const Node &n) -> Error {
    if (n.input_size() < 1)
      return I.parseError(n, "needs at least one input");
    // Every input of Sum/Mean/Max/Min is required: the empty name (ONNX's "absent") is
    // malformed here, not an optional input to skip.
    for (int i = 0; i < n.input_size(); i++)
      if (!I.hasInput(n, i))
        return I.parseError(n, "input " + std::to_string(i) + " is empty; every input of " +
                                   n.op_type() + " is required");
    bool done;
    KILN_RETURN_IF_ERR(foldedOr(I, n, done, [&](const std::vector<const Tensor *> &t)
                                                -> Expected<Tensor> {
      Tensor acc = t[0]->clone();
      for (size_t i = 1; i < t.size(); i++) {
        KILN_ASSIGN_OR_RETURN(acc, foldBinary(op, acc, *t[i]));
      }
      if (mean) {
        Tensor d = tensorFromDoubles(acc.getElementType(), {}, {double(t.size())});
        return foldBinary(FoldOp::Div, acc, d);
      }
      return acc;
    }));
    if (done)
      return Error::success();
    std::vector<int> idx;
    for (int i = 0; i < n.input_size(); i++)
      idx.push_back(i);
    KILN_ASSIGN_OR_RETURN(std::vector<NodeValue> vs, broadcastInputs(I, n, idx));
    NodeValue acc = vs[0];
    for (size_t i = 1; i < vs.size(); i++) {
      std::string nm = I.opName(n, std::to_string(i).c_str());
      switch (op) {
      case FoldOp::Max: acc = I.F->createMax(nm, acc, vs[i]); break;
      case FoldOp::Min: acc = I.F->createMin(nm, acc, vs[i]); break;
      default: acc = I.F->createAdd(nm, acc, vs[i]); break;
      }
    }
    if (mean && vs.size() > 1)
      acc = I.F->createDiv(I.opName(n, "mean"), acc,
                           I.splat(I.opName(n, "count"), acc.getElementType(), acc.dims(),
                                   double(vs.size())));
    I.setOutput(n, 0, acc);
    return Error::success();
  };
}

// ---- Unary. ----

template <typename B> Converter unary(std::optional<FoldUnary> fold, B build) {
  return [fold, build](Importer &I, const Node &n) -> Error {
    if (fold) {
      bool done;
      KILN_RETURN_IF_ERR(foldedOr(I, n, done, [&](const std::vector<const Tensor *> &t) {
        return foldUnary(*fold, *t[0]);
      }));
      if (done)
        return Error::success();
    }
    KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
    KILN_ASSIGN_OR_RETURN(NodeValue y, build(I, n, x));
    I.setOutput(n, 0, y);
    return Error::success();
  };
}

#define UNARY(NAME, FOLD, CREATE)                                                          \
  m[NAME] = unary(FOLD, [](Importer &I, const Node &n, NodeValue x) -> Expected<NodeValue> { \
    return NodeValue(I.F->CREATE(I.opName(n), x));                                          \
  })

NodeValue splatLike(Importer &I, const Node &n, NodeValue x, double v, const char *part) {
  return I.splat(I.opName(n, part), x.getElementType(), x.dims(), v);
}

/// alpha * (exp(x) - 1) where x <= 0, x elsewhere (Elu; scaled for Selu).
NodeValue buildElu(Importer &I, const Node &n, NodeValue x, double alpha, double gamma) {
  Function *F = I.F;
  NodeValue zero = splatLike(I, n, x, 0, "zero");
  NodeValue pos = F->createCmpLT(I.opName(n, "pos"), zero, x);
  NodeValue em1 = F->createSub(I.opName(n, "expm1"), F->createExp(I.opName(n, "exp"), x),
                               splatLike(I, n, x, 1, "one"));
  NodeValue neg = F->createMul(I.opName(n, "neg"), em1, splatLike(I, n, x, alpha, "alpha"));
  NodeValue r = F->createSelect(I.opName(n), pos, x, neg);
  if (gamma != 1.0)
    r = F->createMul(I.opName(n, "gamma"), r, splatLike(I, n, x, gamma, "gammav"));
  return r;
}

Error convertClipRuntime(Importer &I, const Node &n);

Error convertClip(Importer &I, const Node &n) {
  double lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  if (I.opset < 11) {
    lo = I.attrFloat(n, "min", -std::numeric_limits<float>::infinity());
    hi = I.attrFloat(n, "max", std::numeric_limits<float>::infinity());
  } else {
    if ((I.hasInput(n, 1) && !I.constInput(n, 1)) || (I.hasInput(n, 2) && !I.constInput(n, 2)))
      return convertClipRuntime(I, n);
    if (I.hasInput(n, 1)) {
      KILN_ASSIGN_OR_RETURN(const Tensor *t, I.requireConstInput(n, 1, "min"));
      if (t->size() != 1)
        return I.parseError(n, "min must be a scalar");
      lo = t->getAsDouble(0);
    }
    if (I.hasInput(n, 2)) {
      KILN_ASSIGN_OR_RETURN(const Tensor *t, I.requireConstInput(n, 2, "max"));
      if (t->size() != 1)
        return I.parseError(n, "max must be a scalar");
      hi = t->getAsDouble(0);
    }
  }
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  if (isFloatKind(x.getElementType())) {
    I.setOutput(n, 0, I.F->createClip(I.opName(n), x, float(lo), float(hi)));
    return Error::success();
  }
  if (!std::isinf(lo))
    x = I.F->createMax(I.opName(n, "min"), x, splatLike(I, n, x, lo, "lo"));
  if (!std::isinf(hi))
    x = I.F->createMin(I.opName(n, "max"), x, splatLike(I, n, x, hi, "hi"));
  I.setOutput(n, 0, x);
  return Error::success();
}

Error convertCast(Importer &I, const Node &n) {
  ElemKind dst;
  if (n.op_type() == "CastLike") {
    KILN_ASSIGN_OR_RETURN(dst, I.inputKind(n, 1));
  } else {
    const onnx::AttributeProto *to = I.attr(n, "to");
    if (!to)
      return I.parseError(n, "Cast needs a 'to' attribute");
    Expected<ElemKind> k = elemKindFromONNX(int32_t(to->i()));
    if (!k)
      return k.takeError().addContext(I.describe(n));
    dst = *k;
  }
  if (const Tensor *t = I.constInput(n, 0)) {
    if (t->size() <= kMaxFoldElements) {
      I.setOutputConst(n, 0, foldCast(*t, dst));
      return Error::success();
    }
  }
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  ElemKind src = x.getElementType();
  if (src == dst) {
    I.setOutput(n, 0, x);
    return Error::success();
  }
  if (isFloatKind(src) && isIndexKind(dst)) {
    // ONNX truncates toward zero; ConvertTo rounds: truncate first.
    NodeValue neg = I.F->createCmpLT(I.opName(n, "isneg"), x, splatLike(I, n, x, 0, "zero"));
    x = I.F->createSelect(I.opName(n, "trunc"), neg, I.F->createCeil(I.opName(n, "ceil"), x),
                          I.F->createFloor(I.opName(n, "floor"), x));
  }
  I.setOutput(n, 0, I.F->createConvertTo(I.opName(n), I.M->uniqueType(dst, x.dims()), x));
  // The stated type, where kiln widens it (a uint8 result is Int32I): the quantization
  // converters read an 8-bit zero point's signedness from it.
  if (n.op_type() == "Cast" && I.hasOutput(n, 0))
    I.setONNXType(n.output(0), int32_t(I.attr(n, "to")->i()));
  return Error::success();
}

Error convertWhere(Importer &I, const Node &n) {
  bool done;
  KILN_RETURN_IF_ERR(foldedOr(I, n, done, [&](const std::vector<const Tensor *> &t) {
    return foldWhere(*t[0], *t[1], *t[2]);
  }));
  if (done)
    return Error::success();
  KILN_ASSIGN_OR_RETURN(std::vector<NodeValue> vs, broadcastInputs(I, n, {0, 1, 2}));
  if (vs[0].getElementType() != ElemKind::Bool)
    return I.parseError(n, "the condition must be bool");
  I.setOutput(n, 0, I.F->createSelect(I.opName(n), vs[0], vs[1], vs[2]));
  return Error::success();
}

/// And, Or, Xor on bool tensors: computed on int32 and converted back.
Converter logical(FoldOp op) {
  return [op](Importer &I, const Node &n) -> Error {
    bool done;
    KILN_RETURN_IF_ERR(foldedOr(I, n, done, [&](const std::vector<const Tensor *> &t) {
      return foldBinary(op, *t[0], *t[1]);
    }));
    if (done)
      return Error::success();
    KILN_ASSIGN_OR_RETURN(std::vector<NodeValue> vs, broadcastInputs(I, n, {0, 1}));
    Dims d = vs[0].dims();
    TypeRef i32 = I.M->uniqueType(ElemKind::Int32I, d);
    NodeValue a = I.F->createConvertTo(I.opName(n, "a"), i32, vs[0]);
    NodeValue b = I.F->createConvertTo(I.opName(n, "b"), i32, vs[1]);
    NodeValue r = op == FoldOp::And   ? NodeValue(I.F->createMul(I.opName(n, "and"), a, b))
                  : op == FoldOp::Or  ? NodeValue(I.F->createAdd(I.opName(n, "or"), a, b))
                                      : NodeValue(I.F->createSub(I.opName(n, "xor"), a, b));
    I.setOutput(n, 0, I.F->createConvertTo(I.opName(n), I.M->uniqueType(ElemKind::Bool, d), r));
    return Error::success();
  };
}

/// Mod: folded when constant (fmod = 1 truncates, fmod = 0 follows the divisor's sign).
Error convertMod(Importer &I, const Node &n) {
  bool fmod = I.attrInt(n, "fmod", 0) != 0;
  bool done;
  KILN_RETURN_IF_ERR(foldedOr(I, n, done, [&](const std::vector<const Tensor *> &t)
                                              -> Expected<Tensor> {
    bool ints = !isFloatKind(t[0]->getElementType());
    if (!fmod || !ints)
      return foldBinary(FoldOp::Mod, *t[0], *t[1]);
    KILN_ASSIGN_OR_RETURN(Tensor q, foldBinary(FoldOp::Div, *t[0], *t[1]));
    KILN_ASSIGN_OR_RETURN(Tensor p, foldBinary(FoldOp::Mul, q, *t[1]));
    return foldBinary(FoldOp::Sub, *t[0], p);
  }));
  if (done)
    return Error::success();
  KILN_ASSIGN_OR_RETURN(std::vector<NodeValue> vs, broadcastInputs(I, n, {0, 1}));
  if (isFloatKind(vs[0].getElementType()) && !fmod)
    return I.parseError(n, "fmod must be 1 for floating-point inputs");
  I.setOutput(n, 0, I.F->createMod(I.opName(n), vs[0], vs[1], fmod));
  return Error::success();
}

Error convertBitShift(Importer &I, const Node &n) {
  std::string dir = I.attrString(n, "direction", "");
  if (dir != "LEFT" && dir != "RIGHT")
    return I.parseError(n, "direction must be LEFT or RIGHT, not '", dir, "'");
  KILN_ASSIGN_OR_RETURN(std::vector<NodeValue> vs, broadcastInputs(I, n, {0, 1}));
  I.setOutput(n, 0, I.F->createBitShift(I.opName(n), vs[0], vs[1], dir == "LEFT"));
  return Error::success();
}

/// Clip with min / max inputs known only at run time: Max and Min with the broadcast
/// bounds (NaN stays NaN, as Clip's does).
Error convertClipRuntime(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  for (int i = 1; i <= 2; i++) {
    if (!I.hasInput(n, i))
      continue;
    KILN_ASSIGN_OR_RETURN(Dims bd, I.inputDims(n, i));
    if (bd.product() != 1)
      return I.parseError(n, i == 1 ? "min" : "max", " must be a scalar");
    KILN_ASSIGN_OR_RETURN(NodeValue b, I.input(n, i));
    if (b.getElementType() != x.getElementType())
      return I.parseError(n, "bound ", b.getType()->toString(), " and input ",
                          x.getType()->toString(), " differ in type");
    b = I.F->createBroadcastTo(I.opName(n, i == 1 ? "lo" : "hi"),
                               I.reshape(I.opName(n, i == 1 ? "lo1" : "hi1"), b,
                                         Dims(std::vector<dim_t>(x.dims().size(), 1))),
                               x.dims());
    x = i == 1 ? NodeValue(I.F->createMax(I.opName(n, "min"), x, b))
               : NodeValue(I.F->createMin(I.opName(n, "max"), x, b));
  }
  I.setOutput(n, 0, x);
  return Error::success();
}

/// A Bool splat shaped like \p x.
NodeValue boolSplat(Importer &I, const Node &n, NodeValue x, bool v, const char *part) {
  return I.splat(I.opName(n, part), ElemKind::Bool, x.dims(), v ? 1 : 0);
}

/// a || b on Bool tensors.
NodeValue boolOr(Importer &I, const Node &n, NodeValue a, NodeValue b, const char *part) {
  return I.F->createSelect(I.opName(n, part), a, boolSplat(I, n, a, true, "true"), b);
}

/// Unary math: trigonometric and hyperbolic functions, rounding, exp/log, tests for NaN and
/// infinity, Not and Sign.
void registerUnaryConverters(ConverterMap &m) {
  UNARY("Sin", FoldUnary::Sin, createSin);
  UNARY("Cos", FoldUnary::Cos, createCos);
  UNARY("Tan", FoldUnary::Tan, createTan);
  UNARY("Asin", FoldUnary::Asin, createAsin);
  UNARY("Acos", FoldUnary::Acos, createAcos);
  UNARY("Atan", FoldUnary::Atan, createAtan);
  UNARY("Sinh", FoldUnary::Sinh, createSinh);
  UNARY("Cosh", FoldUnary::Cosh, createCosh);
  UNARY("Asinh", FoldUnary::Asinh, createAsinh);
  UNARY("Acosh", FoldUnary::Acosh, createAcosh);
  UNARY("Atanh", FoldUnary::Atanh, createAtanh);
  UNARY("Relu", FoldUnary::Relu, createRelu);
  UNARY("Neg", FoldUnary::Neg, createNeg);
  UNARY("Abs", FoldUnary::Abs, createAbs);
  UNARY("Exp", FoldUnary::Exp, createExp);
  UNARY("Log", FoldUnary::Log, createLog);
  UNARY("Sqrt", FoldUnary::Sqrt, createSqrt);
  UNARY("Reciprocal", FoldUnary::Reciprocal, createReciprocal);
  UNARY("Floor", FoldUnary::Floor, createFloor);
  UNARY("Ceil", FoldUnary::Ceil, createCeil);
  UNARY("Round", FoldUnary::Round, createRound);
  UNARY("Sigmoid", std::nullopt, createSigmoid);
  UNARY("Tanh", std::nullopt, createTanh);
  UNARY("Erf", std::nullopt, createErf);
  UNARY("HardSwish", std::nullopt, createHardSwish);

  m["Not"] = unary(FoldUnary::Not, [](Importer &I, const Node &n,
                                       NodeValue x) -> Expected<NodeValue> {
    NodeValue xi = I.F->createConvertTo(I.opName(n, "int"),
                                        I.M->uniqueType(ElemKind::Int32I, x.dims()), x);
    return NodeValue(I.F->createCmpEQ(I.opName(n), xi, splatLike(I, n, xi, 0, "zero")));
  });
  m["Sign"] = unary(FoldUnary::Sign, [](Importer &I, const Node &n,
                                        NodeValue x) -> Expected<NodeValue> {
    NodeValue zero = splatLike(I, n, x, 0, "zero");
    TypeRef ty = x.getType();
    NodeValue p = I.F->createConvertTo(I.opName(n, "p"), ty, I.F->createCmpLT(I.opName(n, "gt"), zero, x));
    NodeValue q = I.F->createConvertTo(I.opName(n, "q"), ty, I.F->createCmpLT(I.opName(n, "lt"), x, zero));
    return NodeValue(I.F->createSub(I.opName(n), p, q));
  });
  m["IsNaN"] = unary(std::nullopt, [](Importer &I, const Node &n,
                                      NodeValue x) -> Expected<NodeValue> {
    // x != x exactly for NaN.
    NodeValue eq = I.F->createCmpEQ(I.opName(n, "eq"), x, x);
    return NodeValue(I.F->createSelect(I.opName(n), eq, boolSplat(I, n, x, false, "f"),
                                       boolSplat(I, n, x, true, "t")));
  });
  m["IsInf"] = unary(std::nullopt, [](Importer &I, const Node &n,
                                      NodeValue x) -> Expected<NodeValue> {
    bool pos = I.attrInt(n, "detect_positive", 1) != 0;
    bool neg = I.attrInt(n, "detect_negative", 1) != 0;
    double inf = std::numeric_limits<double>::infinity();
    NodeValue r = boolSplat(I, n, x, false, "none");
    if (pos)
      r = I.F->createCmpEQ(I.opName(n, "pos"), x, splatLike(I, n, x, inf, "inf"));
    if (neg) {
      NodeValue c = I.F->createCmpEQ(I.opName(n, "neg"), x, splatLike(I, n, x, -inf, "ninf"));
      r = pos ? boolOr(I, n, r, c, "or") : c;
    }
    return r;
  });
  m["Shrink"] = unary(std::nullopt, [](Importer &I, const Node &n,
                                       NodeValue x) -> Expected<NodeValue> {
    double lambd = I.attrFloat(n, "lambd", 0.5f), bias = I.attrFloat(n, "bias", 0.0f);
    Function *F = I.F;
    NodeValue lo = F->createCmpLT(I.opName(n, "lo"), x, splatLike(I, n, x, -lambd, "nl"));
    NodeValue hi = F->createCmpLT(I.opName(n, "hi"), splatLike(I, n, x, lambd, "l"), x);
    NodeValue up = F->createAdd(I.opName(n, "up"), x, splatLike(I, n, x, bias, "b"));
    NodeValue down = F->createSub(I.opName(n, "down"), x, splatLike(I, n, x, bias, "b2"));
    NodeValue r = F->createSelect(I.opName(n, "sel"), hi, down, splatLike(I, n, x, 0, "z"));
    return NodeValue(F->createSelect(I.opName(n), lo, up, r));
  });

}

/// Binary arithmetic, comparisons, logic, the variadic Sum/Mean/Max/Min, Mod and BitShift.
void registerBinaryConverters(ConverterMap &m) {
  auto mk = [](auto fn) { return fn; };
  m["Add"] = binary(FoldOp::Add, mk([](Function *F, const std::string &s, NodeValue a,
                                       NodeValue b) { return NodeValue(F->createAdd(s, a, b)); }));
  m["Sub"] = binary(FoldOp::Sub, mk([](Function *F, const std::string &s, NodeValue a,
                                       NodeValue b) { return NodeValue(F->createSub(s, a, b)); }));
  m["Mul"] = binary(FoldOp::Mul, mk([](Function *F, const std::string &s, NodeValue a,
                                       NodeValue b) { return NodeValue(F->createMul(s, a, b)); }));
  m["Div"] = binary(FoldOp::Div, mk([](Function *F, const std::string &s, NodeValue a,
                                       NodeValue b) { return NodeValue(F->createDiv(s, a, b)); }));
  m["Pow"] = binary(FoldOp::Pow, mk([](Function *F, const std::string &s, NodeValue a,
                                       NodeValue b) { return NodeValue(F->createPow(s, a, b)); }));
  m["Equal"] = binary(FoldOp::Equal, [](Function *F, const std::string &s, NodeValue a,
                                        NodeValue b) { return NodeValue(F->createCmpEQ(s, a, b)); });
  m["Less"] = binary(FoldOp::Less, [](Function *F, const std::string &s, NodeValue a,
                                      NodeValue b) { return NodeValue(F->createCmpLT(s, a, b)); });
  m["LessOrEqual"] = binary(FoldOp::LessOrEqual, [](Function *F, const std::string &s,
                                                    NodeValue a, NodeValue b) {
    return NodeValue(F->createCmpLTE(s, a, b));
  });
  m["Greater"] = binary(FoldOp::Greater, [](Function *F, const std::string &s, NodeValue a,
                                            NodeValue b) { return NodeValue(F->createCmpLT(s, b, a)); });
  m["GreaterOrEqual"] = binary(FoldOp::GreaterOrEqual, [](Function *F, const std::string &s,
                                                          NodeValue a, NodeValue b) {
    return NodeValue(F->createCmpLTE(s, b, a));
  });
  m["Sum"] = variadic(FoldOp::Add, false);
  m["Mean"] = variadic(FoldOp::Add, true);
  m["Max"] = variadic(FoldOp::Max, false);
  m["Min"] = variadic(FoldOp::Min, false);
  m["And"] = logical(FoldOp::And);
  m["Or"] = logical(FoldOp::Or);
  m["Xor"] = logical(FoldOp::Xor);

  m["Mod"] = convertMod;
  m["BitShift"] = convertBitShift;
}

/// Activations built from other nodes (Elu, Selu, HardSigmoid, Softplus...) or with
/// attributes (LeakyRelu, PRelu, Clip), and Cast / Where.
void registerActivationConverters(ConverterMap &m) {
  m["LeakyRelu"] = unary(std::nullopt, [](Importer &I, const Node &n,
                                          NodeValue x) -> Expected<NodeValue> {
    return NodeValue(I.F->createLeakyRelu(I.opName(n), x, I.attrFloat(n, "alpha", 0.01f)));
  });
  m["Elu"] = unary(std::nullopt, [](Importer &I, const Node &n,
                                    NodeValue x) -> Expected<NodeValue> {
    return buildElu(I, n, x, I.attrFloat(n, "alpha", 1.0f), 1.0);
  });
  m["Selu"] = unary(std::nullopt, [](Importer &I, const Node &n,
                                     NodeValue x) -> Expected<NodeValue> {
    return buildElu(I, n, x, I.attrFloat(n, "alpha", 1.67326319217681884765625f),
                    I.attrFloat(n, "gamma", 1.05070102214813232421875f));
  });
  m["HardSigmoid"] = unary(std::nullopt, [](Importer &I, const Node &n,
                                            NodeValue x) -> Expected<NodeValue> {
    NodeValue ax = I.F->createMul(I.opName(n, "scale"), x,
                                  splatLike(I, n, x, I.attrFloat(n, "alpha", 0.2f), "alpha"));
    NodeValue b = I.F->createAdd(I.opName(n, "shift"), ax,
                                 splatLike(I, n, x, I.attrFloat(n, "beta", 0.5f), "beta"));
    return NodeValue(I.F->createClip(I.opName(n), b, 0.0f, 1.0f));
  });
  m["Softplus"] = unary(std::nullopt, [](Importer &I, const Node &n,
                                         NodeValue x) -> Expected<NodeValue> {
    NodeValue e = I.F->createAdd(I.opName(n, "exp1"), I.F->createExp(I.opName(n, "exp"), x),
                                 splatLike(I, n, x, 1, "one"));
    return NodeValue(I.F->createLog(I.opName(n), e));
  });
  m["Softsign"] = unary(std::nullopt, [](Importer &I, const Node &n,
                                         NodeValue x) -> Expected<NodeValue> {
    NodeValue d = I.F->createAdd(I.opName(n, "den"), I.F->createAbs(I.opName(n, "abs"), x),
                                 splatLike(I, n, x, 1, "one"));
    return NodeValue(I.F->createDiv(I.opName(n), x, d));
  });
  m["ThresholdedRelu"] = unary(std::nullopt, [](Importer &I, const Node &n,
                                                NodeValue x) -> Expected<NodeValue> {
    NodeValue th = splatLike(I, n, x, I.attrFloat(n, "alpha", 1.0f), "alpha");
    NodeValue c = I.F->createCmpLT(I.opName(n, "gt"), th, x);
    return NodeValue(I.F->createSelect(I.opName(n), c, x, splatLike(I, n, x, 0, "zero")));
  });
  m["Celu"] = unary(std::nullopt, [](Importer &I, const Node &n,
                                     NodeValue x) -> Expected<NodeValue> {
    double alpha = I.attrFloat(n, "alpha", 1.0f);
    NodeValue xs = I.F->createDiv(I.opName(n, "xs"), x, splatLike(I, n, x, alpha, "alpha"));
    NodeValue e = buildElu(I, n, xs, alpha, 1.0);
    // Celu(x) = max(0,x) + min(0, alpha*(exp(x/alpha)-1)): Elu(x/alpha) scaled where x > 0.
    NodeValue zero = splatLike(I, n, x, 0, "zero0");
    NodeValue pos = I.F->createCmpLT(I.opName(n, "pos0"), zero, x);
    return NodeValue(I.F->createSelect(I.opName(n, "celu"), pos, x, e));
  });
  m["PRelu"] = [](Importer &I, const Node &n) -> Error {
    KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
    KILN_ASSIGN_OR_RETURN(NodeValue s, I.input(n, 1));
    Dims out;
    const Dims &xd = x.dims();
    if ((!broadcastShapes(xd, s.dims(), out) || out != xd) && xd.size() > 2 &&
        s.dims().size() == 1 && s.dims()[0] == xd[1]) {
      // Before opset 7 (and in old exporters) a [C] slope applies per channel.
      std::vector<dim_t> cd(xd.size() - 1, 1);
      cd[0] = xd[1];
      s = I.reshape(I.opName(n, "slopec"), s, Dims(cd));
    }
    if (!broadcastShapes(xd, s.dims(), out) || out != xd)
      return I.parseError(n, "slope ", s.getType()->toString(), " does not broadcast to ",
                          x.getType()->toString());
    s = I.F->createBroadcastTo(I.opName(n, "slope"), s, x.dims());
    I.setOutput(n, 0, I.F->createPRelu(I.opName(n), x, s));
    return Error::success();
  };
  m["Clip"] = convertClip;
  m["Cast"] = convertCast;
  m["CastLike"] = convertCast;
  m["Where"] = convertWhere;
}

} // namespace

void registerElementwiseConverters(ConverterMap &m) {
  registerUnaryConverters(m);
  registerBinaryConverters(m);
  registerActivationConverters(m);
  for (const char *op : {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Equal", "Less", "LessOrEqual",
                         "Greater", "GreaterOrEqual", "And", "Or", "Xor", "PRelu", "CastLike"})
    m.requireInputs(op, 2);
  m.requireInputs("Where", 3);
}

} // namespace kiln::onnximport
