// Converters of the quantization family: QuantizeLinear, DequantizeLinear, QLinearConv,
// ConvInteger, QLinearMatMul, MatMulInteger, DynamicQuantizeLinear, and com.microsoft's
// QLinearAdd and QLinearMul.
//
// An ONNX INT8 / UINT8 value becomes an Int8Q / UInt8Q value whose raw integers are the
// ONNX ones and whose scale and offset are the scale and zero point the consuming operator
// names (a constant is re-typed; a value of other parameters, or an Int32I value from a
// graph input, is turned into that type by float arithmetic that reproduces its integers
// exactly). Scales and zero points must be known at load time. Per-tensor QuantizeLinear is
// a Quantize node and rounds half away from zero (Kiln's rule); ONNX rounds halves to even,
// so the two differ only where x / scale is exactly half-way. Per-axis QuantizeLinear and
// DynamicQuantizeLinear compute in float as ONNX does (halves to even) and give raw 8-bit
// values (scale 1, offset 0).

#include "ONNXImporter.h"

#include <cmath>
#include <limits>

namespace kiln::onnximport {

namespace {

using Node = onnx::NodeProto;
using TP = onnx::TensorProto;

int32_t onnxTypeOfKind(ElemKind k) { return k == ElemKind::Int8Q ? TP::INT8 : TP::UINT8; }

double kindMin(ElemKind k) { return k == ElemKind::Int8Q ? -128 : 0; }
double kindMax(ElemKind k) { return k == ElemKind::Int8Q ? 127 : 255; }

/// The 8-bit kind of input \p i: from the stored constant or graph value when it is 8-bit,
/// else from the ONNX type the model states; \p def when the input is absent.
Expected<ElemKind> eightBitKindOf(Importer &I, const Node &n, int i, const char *what,
                                  ElemKind def = ElemKind::UInt8Q) {
  if (!I.hasInput(n, i))
    return def;
  if (const Tensor *t = I.constInputAsStored(n, i))
    if (isEightBitKind(t->getElementType()))
      return t->getElementType();
  int32_t t = I.onnxType(n.input(i));
  if (t == TP::INT8)
    return ElemKind::Int8Q;
  if (t == TP::UINT8)
    return ElemKind::UInt8Q;
  if (!I.constInputAsStored(n, i)) {
    KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, i));
    if (isEightBitKind(v.getElementType()))
      return v.getElementType();
  }
  return I.unsupported(n, "the ", what, " input '", n.input(i), "' must be int8 or uint8",
                       t ? std::string(" (it is ONNX type ") + std::to_string(t) + ")" : "");
}

/// The float constant input \p i (a scale): \p count entries or, with count 0, any number;
/// every entry positive and finite.
Expected<std::vector<float>> scalesOf(Importer &I, const Node &n, int i, const char *what) {
  KILN_ASSIGN_OR_RETURN(const Tensor *t, I.requireConstInput(n, i, what));
  if (t->size() == 0 || t->dims().size() > 1)
    return I.unsupported(n, "the ", what, " input ", t->getType().toString(),
                         " must be a scalar or a vector");
  std::vector<float> v;
  for (double d : tensorToDoubles(*t)) {
    if (!(std::isfinite(d) && d > 0))
      return I.parseError(n, "the ", what, " input holds ", d,
                          "; scales must be positive and finite");
    v.push_back(float(d));
  }
  return v;
}

/// The zero points of input \p i for 8-bit kind \p k (zeros, \p count of them, when absent).
Expected<std::vector<int32_t>> zeroPointsOf(Importer &I, const Node &n, int i, ElemKind k,
                                            size_t count, const char *what) {
  if (!I.hasInput(n, i))
    return std::vector<int32_t>(count, 0);
  KILN_ASSIGN_OR_RETURN(const Tensor *t, I.requireConstInput(n, i, what));
  if (t->size() == 0 || t->dims().size() > 1)
    return I.unsupported(n, "the ", what, " input ", t->getType().toString(),
                         " must be a scalar or a vector");
  std::vector<int32_t> v;
  for (int64_t z : tensorToInts(*t)) {
    if (double(z) < kindMin(k) || double(z) > kindMax(k))
      return I.parseError(n, "the ", what, " input holds ", z, ", outside ",
                          elemKindName(k));
    v.push_back(int32_t(z));
  }
  return v;
}

/// The scales and zero points of the two 8-bit operands of a QLinear op (a's scale and zero
/// point at inputs 1 and 2, b's at 4 and 5) or of its Integer form (zero points at 2 and 3,
/// scales 1). \p a and \p b name the operands in errors ("x" and "w" for convolutions).
struct OperandQuantParams {
  std::vector<float> aScales{1.0f}, bScales{1.0f};
  std::vector<int32_t> aZeroPoints, bZeroPoints;
};
Expected<OperandQuantParams> operandQuantParams(Importer &I, const Node &n, bool integer,
                                                ElemKind ak, ElemKind bk, const std::string &a,
                                                const std::string &b) {
  const std::string aScale = a + "_scale", aZp = a + "_zero_point";
  const std::string bScale = b + "_scale", bZp = b + "_zero_point";
  OperandQuantParams p;
  if (!integer) {
    KILN_ASSIGN_OR_RETURN(p.aScales, scalesOf(I, n, 1, aScale.c_str()));
  }
  KILN_ASSIGN_OR_RETURN(p.aZeroPoints, zeroPointsOf(I, n, 2, ak, 1, aZp.c_str()));
  if (!integer) {
    KILN_ASSIGN_OR_RETURN(p.bScales, scalesOf(I, n, 4, bScale.c_str()));
  }
  KILN_ASSIGN_OR_RETURN(p.bZeroPoints, zeroPointsOf(I, n, integer ? 3 : 5, bk, 1, bZp.c_str()));
  return p;
}

/// The element type of a quantized product's result dims od: int32 for ConvInteger and
/// MatMulInteger (integer), otherwise y quantized per tensor by y_scale (input 6) and
/// y_zero_point (input 7).
Expected<TypeRef> productResultType(Importer &I, const Node &n, bool integer, const Dims &od) {
  if (integer)
    return I.M->uniqueType(ElemKind::Int32I, od);
  KILN_ASSIGN_OR_RETURN(ElemKind yk, eightBitKindOf(I, n, 7, "y_zero_point"));
  KILN_ASSIGN_OR_RETURN(std::vector<float> ys, scalesOf(I, n, 6, "y_scale"));
  KILN_ASSIGN_OR_RETURN(std::vector<int32_t> yzp, zeroPointsOf(I, n, 7, yk, 1, "y_zero_point"));
  if (ys.size() != 1 || yzp.size() != 1)
    return I.unsupported(n, "y must be quantized per tensor");
  return I.M->uniqueType(yk, od, ys[0], yzp[0]);
}

/// \p v repeated to \p count entries when it has one; an error unless it then has \p count.
template <typename T>
Expected<std::vector<T>> perChannel(Importer &I, const Node &n, std::vector<T> v, size_t count,
                                    const char *what) {
  if (v.size() == 1)
    v.assign(count, v[0]);
  if (v.size() != count)
    return I.unsupported(n, "the ", what, " input has ", v.size(), " entries; expected 1 or ",
                         count);
  return v;
}

/// The raw integers of 8-bit or Int32I graph value \p v, as float (exact).
NodeValue rawAsFloat(Importer &I, const Node &n, NodeValue v) {
  Function *F = I.F;
  TypeRef fty = I.M->uniqueType(ElemKind::Float, v.dims());
  if (!isQuantized(v.getElementType()))
    return F->createConvertTo(I.opName(n, "raw"), fty, v);
  const Type &t = *v.getType();
  NodeValue r = F->createDequantize(I.opName(n, "raw"), fty, v);
  if (t.scale != 1.0f)
    r = F->createDiv(I.opName(n, "raw.unscale"), r,
                     I.splat(I.opName(n, "raw.scale"), ElemKind::Float, v.dims(), t.scale));
  if (t.offset != 0)
    r = F->createAdd(I.opName(n, "raw.offset"), r,
                     I.splat(I.opName(n, "raw.zp"), ElemKind::Float, v.dims(), t.offset));
  return r;
}

/// Input \p i as a value of kind \p k with scale \p scale and offset \p zp holding the ONNX
/// raw integers.
Expected<NodeValue> quantizedOperand(Importer &I, const Node &n, int i, ElemKind k, float scale,
                                     int32_t zp, const char *what) {
  if (const Tensor *t = I.constInputAsStored(n, i)) {
    Tensor q(Type(k, t->dims(), scale, zp));
    for (size_t j = 0; j < t->size(); j++) {
      double v = t->getAsDouble(j);
      if (v < kindMin(k) || v > kindMax(k))
        return I.parseError(n, "the ", what, " input holds ", v, ", outside ", elemKindName(k));
      q.setFromDouble(j, v);
    }
    return I.makeConstant(I.opName(n, what), std::move(q));
  }
  KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, i));
  const Type &t = *v.getType();
  if (t.kind == k && t.scale == scale && t.offset == zp)
    return v;
  if (!isEightBitKind(t.kind) && t.kind != ElemKind::Int32I)
    return I.unsupported(n, "the ", what, " input '", n.input(i), "' is ", t.toString(),
                         "; expected 8-bit integers");
  // real = scale * (raw - zp), quantized back to (scale, zp): the raw integers again (the
  // float error is far below half a step).
  NodeValue r = rawAsFloat(I, n, v);
  Function *F = I.F;
  if (zp != 0)
    r = F->createSub(I.opName(n, "centre"), r,
                     I.splat(I.opName(n, "zp"), ElemKind::Float, v.dims(), zp));
  if (scale != 1.0f)
    r = F->createMul(I.opName(n, "scaled"), r,
                     I.splat(I.opName(n, "scale"), ElemKind::Float, v.dims(), scale));
  return NodeValue(F->createQuantize(I.opName(n, what), I.M->uniqueType(k, v.dims(), scale, zp), r));
}

/// A constant vector of \p v (Float or Int32I).
NodeValue vectorConst(Importer &I, const std::string &name, ElemKind k,
                      const std::vector<double> &v) {
  Tensor t(k, {dim_t(v.size())});
  for (size_t i = 0; i < v.size(); i++)
    t.setFromDouble(i, v[i]);
  return I.makeConstant(name, std::move(t));
}

/// \p v ([C]) as a constant of rank \p rank with C at \p axis and 1 elsewhere, broadcast to
/// \p dims.
NodeValue alongAxis(Importer &I, const Node &n, const char *part, const std::vector<double> &v,
                    const Dims &dims, size_t axis) {
  Dims shape;
  for (size_t d = 0; d < dims.size(); d++)
    shape.push_back(d == axis ? dims[d] : 1);
  Tensor t(ElemKind::Float, shape);
  for (size_t i = 0; i < v.size(); i++)
    t.setFromDouble(i, v[i]);
  NodeValue c = I.makeConstant(I.opName(n, part), std::move(t));
  return I.F->createBroadcast(I.opName(n, part), c, dims.vec());
}

/// The axis attribute of a per-axis (De)QuantizeLinear over a value of \p dims.
Expected<size_t> quantAxis(Importer &I, const Node &n, const Dims &dims, size_t count) {
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        I.normAxis(n, I.attrInt(n, "axis", 1), int64_t(dims.size())));
  if (dims[size_t(axis)] != count)
    return I.parseError(n, "per-axis scales have ", count, " entries but axis ", axis,
                        " of the input ", dimsToString(dims), " has ", dims[size_t(axis)]);
  return size_t(axis);
}

// ------------------------------------------------------------------ Q / DQ

/// Run-time input \p i of a QuantizeLinear (a scale, or with \p zeroPoint a zero point) as
/// float values broadcast to \p d: one value for the whole tensor, or one per entry of the
/// axis attribute's dimension.
Expected<NodeValue> runTimeQuantParam(Importer &I, const Node &n, int i, const Dims &d,
                                      bool zeroPoint, const char *what) {
  KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, i));
  const Type &t = *v.getType();
  // A zero point computed at run time is 8-bit, or the raw integers of a Cast to an 8-bit
  // type (which kiln holds as Int32I).
  if (zeroPoint ? !isEightBitKind(t.kind) && t.kind != ElemKind::Int32I
                : t.kind != ElemKind::Float)
    return I.unsupported(n, "the ", what, " input '", n.input(i), "' is ", t.toString(),
                         zeroPoint ? "; expected 8-bit integers" : "; expected float");
  if (v.dims().size() > 1)
    return I.unsupported(n, "the ", what, " input ", t.toString(),
                         " must be a scalar or a vector");
  NodeValue f = zeroPoint ? rawAsFloat(I, n, v) : v;
  const dim_t count = v.dims().product();
  std::vector<dim_t> shape(d.size(), 1);
  if (count != 1) {
    if (d.empty())
      return I.parseError(n, "per-axis ", what, " for a scalar input");
    KILN_ASSIGN_OR_RETURN(size_t axis, quantAxis(I, n, d, count));
    shape[axis] = count;
  }
  const std::string name = I.opName(n, what);
  f = I.reshape(name + ".shape", f, Dims(shape));
  return NodeValue(I.F->createBroadcast(name, f, d.vec()));
}

/// QuantizeLinear whose scale or zero point is computed at run time (DynamicQuantizeLinear's
/// expansion computes both from the input's range): ONNX's arithmetic in float,
/// saturate(round_half_even(x / scale) + zero_point), into raw integers of kind \p k.
Error quantizeAtRunTime(Importer &I, const Node &n, ElemKind k, NodeValue x) {
  Function *F = I.F;
  const Dims &d = x.dims();
  KILN_ASSIGN_OR_RETURN(NodeValue scale, runTimeQuantParam(I, n, 1, d, false, "y_scale"));
  NodeValue q = F->createRound(I.opName(n, "round"), F->createDiv(I.opName(n, "div"), x, scale));
  if (I.hasInput(n, 2)) {
    KILN_ASSIGN_OR_RETURN(NodeValue zp, runTimeQuantParam(I, n, 2, d, true, "y_zero_point"));
    q = F->createAdd(I.opName(n, "addzp"), q, zp);
  }
  q = F->createClip(I.opName(n, "sat"), q, float(kindMin(k)), float(kindMax(k)));
  I.setOutput(n, 0, F->createQuantize(I.opName(n), I.M->uniqueType(k, d, 1.0f, 0), q));
  I.setONNXType(n.output(0), onnxTypeOfKind(k));
  return Error::success();
}

Error convertQuantizeLinear(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(ElemKind k, eightBitKindOf(I, n, 2, "y_zero_point"));
  if (!I.constInput(n, 1) || (I.hasInput(n, 2) && !I.constInput(n, 2))) {
    KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
    if (x.getElementType() != ElemKind::Float)
      x = I.F->createConvertTo(I.opName(n, "float"), I.M->uniqueType(ElemKind::Float, x.dims()),
                               x);
    return quantizeAtRunTime(I, n, k, x);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<float> s, scalesOf(I, n, 1, "y_scale"));
  KILN_ASSIGN_OR_RETURN(std::vector<int32_t> zp, zeroPointsOf(I, n, 2, k, s.size(), "y_zero_point"));
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  Function *F = I.F;
  if (x.getElementType() != ElemKind::Float)
    x = F->createConvertTo(I.opName(n, "float"), I.M->uniqueType(ElemKind::Float, x.dims()), x);
  const Dims &d = x.dims();
  if (s.size() == 1 && zp.size() == 1) {
    I.setOutput(n, 0, F->createQuantize(I.opName(n), I.M->uniqueType(k, d, s[0], zp[0]), x));
  } else {
    if (d.empty())
      return I.parseError(n, "per-axis scales for a scalar input");
    KILN_ASSIGN_OR_RETURN(size_t axis, quantAxis(I, n, d, s.size()));
    KILN_ASSIGN_OR_RETURN(zp, perChannel(I, n, zp, s.size(), "y_zero_point"));
    // ONNX's arithmetic: saturate(round_half_even(x / scale) + zero_point), in float.
    NodeValue q = F->createDiv(I.opName(n, "div"), x,
                               alongAxis(I, n, "scale", {s.begin(), s.end()}, d, axis));
    q = F->createRound(I.opName(n, "round"), q);
    q = F->createAdd(I.opName(n, "addzp"), q,
                     alongAxis(I, n, "zp", {zp.begin(), zp.end()}, d, axis));
    q = F->createClip(I.opName(n, "sat"), q, float(kindMin(k)), float(kindMax(k)));
    I.setOutput(n, 0, F->createQuantize(I.opName(n), I.M->uniqueType(k, d, 1.0f, 0), q));
  }
  if (I.hasOutput(n, 0))
    I.setONNXType(n.output(0), onnxTypeOfKind(k));
  return Error::success();
}

Error convertDequantizeLinear(Importer &I, const Node &n) {
  Function *F = I.F;
  KILN_ASSIGN_OR_RETURN(std::vector<float> s, scalesOf(I, n, 1, "x_scale"));
  KILN_ASSIGN_OR_RETURN(Dims d, I.inputDims(n, 0));
  int32_t xt = I.onnxType(n.input(0));
  if (xt == TP::INT32) {
    // int32 x (zero point 0; biases): x * scale, per tensor or per axis.
    KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
    NodeValue r = rawAsFloat(I, n, x), scale;
    if (s.size() == 1) {
      scale = I.splat(I.opName(n, "scale"), ElemKind::Float, d, s[0]);
    } else {
      if (d.empty())
        return I.parseError(n, "per-axis scales for a scalar input");
      KILN_ASSIGN_OR_RETURN(size_t axis, quantAxis(I, n, d, s.size()));
      scale = alongAxis(I, n, "scale", {s.begin(), s.end()}, d, axis);
    }
    I.setOutput(n, 0, F->createMul(I.opName(n), r, scale));
    return Error::success();
  }
  KILN_ASSIGN_OR_RETURN(ElemKind k, eightBitKindOf(I, n, 0, "x"));
  KILN_ASSIGN_OR_RETURN(std::vector<int32_t> zp, zeroPointsOf(I, n, 2, k, s.size(), "x_zero_point"));
  TypeRef fty = I.M->uniqueType(ElemKind::Float, d);
  if (s.size() == 1 && zp.size() == 1) {
    KILN_ASSIGN_OR_RETURN(NodeValue x, quantizedOperand(I, n, 0, k, s[0], zp[0], "x"));
    I.setOutput(n, 0, F->createDequantize(I.opName(n), fty, x));
    return Error::success();
  }
  if (d.empty())
    return I.parseError(n, "per-axis scales for a scalar input");
  KILN_ASSIGN_OR_RETURN(size_t axis, quantAxis(I, n, d, s.size()));
  KILN_ASSIGN_OR_RETURN(zp, perChannel(I, n, zp, s.size(), "x_zero_point"));
  // (x - zero_point) * scale per channel, in float as ONNX computes it. Constant weights
  // stay an 8-bit constant under this arithmetic, which fold-qdq recognises (and
  // constant-fold folds otherwise).
  NodeValue x;
  if (I.constInputAsStored(n, 0)) {
    KILN_ASSIGN_OR_RETURN(x, quantizedOperand(I, n, 0, k, 1.0f, 0, "x"));
  } else {
    KILN_ASSIGN_OR_RETURN(x, I.input(n, 0));
  }
  NodeValue r = rawAsFloat(I, n, x);
  r = F->createSub(I.opName(n, "centre"), r, alongAxis(I, n, "zp", {zp.begin(), zp.end()}, d, axis));
  I.setOutput(n, 0, F->createMul(I.opName(n), r,
                                 alongAxis(I, n, "scale", {s.begin(), s.end()}, d, axis)));
  return Error::success();
}

// ------------------------------------------------------------------ convolution

/// QLinearConv (quantized result) and ConvInteger (int32 result) as one
/// ChannelwiseQuantizedConvolution.
Error convertQuantConv(Importer &I, const Node &n) {
  bool integer = n.op_type() == "ConvInteger";
  const int xi = 0, wi = integer ? 1 : 3;
  KILN_ASSIGN_OR_RETURN(Dims xd, I.inputDims(n, xi));
  KILN_ASSIGN_OR_RETURN(Dims wd, I.inputDims(n, wi));
  KILN_ASSIGN_OR_RETURN(ConvWindow2D w, readConvWindow2D(I, n, xd, wd));
  const dim_t M = wd[0];
  KILN_ASSIGN_OR_RETURN(ElemKind xk, eightBitKindOf(I, n, xi, "x"));
  KILN_ASSIGN_OR_RETURN(ElemKind wk, eightBitKindOf(I, n, wi, "w"));
  KILN_ASSIGN_OR_RETURN(OperandQuantParams q, operandQuantParams(I, n, integer, xk, wk, "x", "w"));
  std::vector<float> &xs = q.aScales, &ws = q.bScales;
  std::vector<int32_t> &xzp = q.aZeroPoints, &wzp = q.bZeroPoints;
  if (xs.size() != 1 || xzp.size() != 1)
    return I.unsupported(n, "x must be quantized per tensor; x_scale has ", xs.size(),
                         " entries and x_zero_point ", xzp.size());
  KILN_ASSIGN_OR_RETURN(ws, perChannel(I, n, ws, M, "w_scale"));
  KILN_ASSIGN_OR_RETURN(wzp, perChannel(I, n, wzp, M, "w_zero_point"));

  KILN_ASSIGN_OR_RETURN(NodeValue x, quantizedOperand(I, n, xi, xk, xs[0], xzp[0], "x"));
  KILN_ASSIGN_OR_RETURN(NodeValue f, quantizedOperand(I, n, wi, wk, 1.0f, 0, "w"));
  if (w.is1D) {
    x = I.reshape(I.opName(n, "x2d"), x, Dims({xd[0], xd[1], 1, xd[2]}));
    f = I.reshape(I.opName(n, "w2d"), f, Dims({wd[0], wd[1], 1, wd[2]}));
  }
  NodeValue bias;
  if (!integer && I.hasInput(n, 8)) {
    KILN_ASSIGN_OR_RETURN(bias, I.input(n, 8));
    if (bias.getElementType() != ElemKind::Int32I || bias.dims() != Dims({M}))
      return I.parseError(n, "the bias B ", bias.getType()->toString(), " must be int32 [", M,
                          "]");
  } else {
    bias = vectorConst(I, I.opName(n, "bias"), ElemKind::Int32I, std::vector<double>(M, 0));
  }
  const Dims x4 = x.dims();
  auto outSize = [&](unsigned a) -> sdim_t {
    sdim_t padded = sdim_t(x4[2 + a] + w.pads[a] + w.pads[a + 2]);
    sdim_t span = sdim_t(w.dilations[a] * (w.kernels[a] - 1) + 1);
    return padded < span ? 0 : (padded - span) / sdim_t(w.strides[a]) + 1;
  };
  Dims od({x4[0], M, dim_t(outSize(0)), dim_t(outSize(1))});
  KILN_ASSIGN_OR_RETURN(TypeRef outTy, productResultType(I, n, integer, od));
  NodeValue y = I.F->createChannelwiseQuantizedConvolution(
      I.opName(n), outTy, x, f,
      vectorConst(I, I.opName(n, "w_scales"), ElemKind::Float, {ws.begin(), ws.end()}),
      vectorConst(I, I.opName(n, "w_offsets"), ElemKind::Int32I, {wzp.begin(), wzp.end()}), bias,
      w.kernels, w.strides, w.pads, w.dilations, w.group, "None", 0.0f, 0.0f);
  if (w.is1D)
    y = I.reshape(I.opName(n, "to1d"), y, Dims({od[0], od[1], od[3]}));
  I.setOutput(n, 0, y);
  if (I.hasOutput(n, 0))
    I.setONNXType(n.output(0), integer ? int32_t(TP::INT32) : onnxTypeOfKind(outTy->kind));
  return Error::success();
}

// ------------------------------------------------------------------ matrix products

/// The number of [M, K] x [K, N] products of a numpy matmul of a [..., M, K] and b [K, N]
/// or [..., K, N] (b's leading dims those of a: broadcasting b is not supported).
Expected<dim_t> matMulBatches(Importer &I, const Node &n, const Dims &ad, const Dims &bd) {
  if (ad.size() < 2 || bd.size() < 2)
    return I.unsupported(n, "a ", dimsToString(ad), " and b ", dimsToString(bd),
                         " must have rank 2 or more");
  if (bd[bd.size() - 2] != ad[ad.size() - 1])
    return I.parseError(n, "a ", dimsToString(ad), " and b ", dimsToString(bd),
                        " do not multiply");
  dim_t batches = 1;
  for (size_t i = 0; i + 2 < ad.size(); i++)
    batches *= ad[i];
  if (bd.size() > 2) {
    bool same = bd.size() == ad.size();
    for (size_t i = 0; same && i + 2 < ad.size(); i++)
      same = ad[i] == bd[i];
    if (!same)
      return I.unsupported(n, "a batched b ", dimsToString(bd),
                           " must have the leading dims of a ", dimsToString(ad),
                           " (broadcasting b is not supported)");
  }
  return batches;
}

/// QLinearMatMul (quantized result) and MatMulInteger (int32 result): numpy matmul of
/// a [..., M, K] and b [K, N] or [..., K, N] (the same leading dims), one
/// ChannelwiseQuantizedFullyConnected per batch.
Error convertQuantMatMul(Importer &I, const Node &n) {
  bool integer = n.op_type() == "MatMulInteger";
  const int ai = 0, bi = integer ? 1 : 3;
  KILN_ASSIGN_OR_RETURN(Dims ad, I.inputDims(n, ai));
  KILN_ASSIGN_OR_RETURN(Dims bd, I.inputDims(n, bi));
  KILN_ASSIGN_OR_RETURN(dim_t batches, matMulBatches(I, n, ad, bd));
  const dim_t M = ad[ad.size() - 2], K = ad[ad.size() - 1], N = bd[bd.size() - 1];
  KILN_ASSIGN_OR_RETURN(ElemKind ak, eightBitKindOf(I, n, ai, "a"));
  KILN_ASSIGN_OR_RETURN(ElemKind bk, eightBitKindOf(I, n, bi, "b"));
  KILN_ASSIGN_OR_RETURN(OperandQuantParams q, operandQuantParams(I, n, integer, ak, bk, "a", "b"));
  std::vector<float> &as = q.aScales, &bs = q.bScales;
  std::vector<int32_t> &azp = q.aZeroPoints, &bzp = q.bZeroPoints;
  // A per-row zero point of a whose rows all agree is a per-tensor one.
  if (azp.size() > 1 && std::all_of(azp.begin(), azp.end(), [&](int32_t z) { return z == azp[0]; }))
    azp.resize(1);
  if (as.size() != 1 || azp.size() != 1)
    return I.unsupported(n, "a must be quantized per tensor; a_scale has ", as.size(),
                         " entries and a_zero_point ", azp.size(), " (a ", dimsToString(ad), ")");
  KILN_ASSIGN_OR_RETURN(bs, perChannel(I, n, bs, N, "b_scale"));
  KILN_ASSIGN_OR_RETURN(bzp, perChannel(I, n, bzp, N, "b_zero_point"));
  KILN_ASSIGN_OR_RETURN(NodeValue a, quantizedOperand(I, n, ai, ak, as[0], azp[0], "a"));
  KILN_ASSIGN_OR_RETURN(NodeValue b, quantizedOperand(I, n, bi, bk, 1.0f, 0, "b"));
  KILN_ASSIGN_OR_RETURN(TypeRef rowTy, productResultType(I, n, integer, Dims({M, N})));

  Function *F = I.F;
  NodeValue scales = vectorConst(I, I.opName(n, "b_scales"), ElemKind::Float, {bs.begin(), bs.end()});
  NodeValue offsets =
      vectorConst(I, I.opName(n, "b_offsets"), ElemKind::Int32I, {bzp.begin(), bzp.end()});
  NodeValue bias = vectorConst(I, I.opName(n, "bias"), ElemKind::Int32I, std::vector<double>(N, 0));
  auto product = [&](const std::string &name, NodeValue lhs, NodeValue rhs) -> NodeValue {
    TypeRef ty = I.M->uniqueType(Type::withDims(*rowTy, Dims({lhs.dims()[0], N})));
    return F->createChannelwiseQuantizedFullyConnected(name, ty, lhs, rhs, scales, offsets, bias, "None", 0.0f, 0.0f);
  };
  Dims outDims = ad;
  outDims[outDims.size() - 1] = N;
  NodeValue y;
  if (bd.size() == 2) {
    NodeValue a2 = I.reshape(I.opName(n, "rows"), a, Dims({batches * M, K}));
    y = product(I.opName(n), a2, b);
  } else {
    NodeValue a3 = I.reshape(I.opName(n, "a3"), a, Dims({batches, M, K}));
    NodeValue b3 = I.reshape(I.opName(n, "b3"), b, Dims({batches, K, N}));
    std::vector<NodeValue> parts;
    for (dim_t j = 0; j < batches; j++) {
      std::string p = I.opName(n, ("batch" + std::to_string(j)).c_str());
      NodeValue aj = F->createSlice(p + ".a", a3, {j, 0, 0}, {j + 1, M, K});
      NodeValue bj = F->createSlice(p + ".b", b3, {j, 0, 0}, {j + 1, K, N});
      parts.push_back(product(p, I.reshape(p + ".a2", aj, Dims({M, K})),
                              I.reshape(p + ".b2", bj, Dims({K, N}))));
    }
    y = parts.size() == 1 ? parts[0] : NodeValue(F->createConcat(I.opName(n, "join"), parts, 0));
  }
  I.setOutput(n, 0, I.reshape(I.opName(n, "shape"), y, outDims));
  if (I.hasOutput(n, 0))
    I.setONNXType(n.output(0), integer ? int32_t(TP::INT32) : onnxTypeOfKind(rowTy->kind));
  return Error::success();
}

// ------------------------------------------------------------------ dynamic quantization

/// DynamicQuantizeLinear, as ONNX computes it in float: scale = (max(x, 0) - min(x, 0)) /
/// 255, zero point = saturate(round(-min / scale)), y = saturate(round(x / scale) + zero
/// point), rounding halves to even; y and the zero point are uint8 (raw values).
Error convertDynamicQuantizeLinear(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  if (x.getElementType() != ElemKind::Float)
    return I.unsupported(n, "the input ", x.getType()->toString(), " must be float");
  Function *F = I.F;
  const Dims d = x.dims();
  std::vector<int64_t> axes;
  for (size_t i = 0; i < d.size(); i++)
    axes.push_back(int64_t(i));
  auto scalar = [&](const char *part, double v) {
    return I.splat(I.opName(n, part), ElemKind::Float, Dims(), v);
  };
  NodeValue mn = F->createReduceMin(I.opName(n, "min"), x, axes, false);
  NodeValue mx = F->createReduceMax(I.opName(n, "max"), x, axes, false);
  mn = F->createMin(I.opName(n, "min0"), mn, scalar("zero", 0));
  mx = F->createMax(I.opName(n, "max0"), mx, scalar("zero.b", 0));
  NodeValue scale =
      F->createDiv(I.opName(n, "scale"), F->createSub(I.opName(n, "range"), mx, mn),
                   scalar("qrange", 255));
  NodeValue zp = F->createDiv(I.opName(n, "zpdiv"), F->createNeg(I.opName(n, "negmin"), mn), scale);
  zp = F->createClip(I.opName(n, "zpsat"), F->createRound(I.opName(n, "zpround"), zp), 0, 255);
  NodeValue q = F->createDiv(I.opName(n, "div"), x,
                             F->createBroadcast(I.opName(n, "scale.b"), scale, d.vec()));
  q = F->createAdd(I.opName(n, "addzp"), F->createRound(I.opName(n, "round"), q),
                   F->createBroadcast(I.opName(n, "zp.b"), zp, d.vec()));
  q = F->createClip(I.opName(n, "sat"), q, 0, 255);
  I.setOutput(n, 0, F->createQuantize(I.opName(n), I.M->uniqueType(ElemKind::UInt8Q, d, 1.0f, 0), q));
  I.setOutput(n, 1, scale);
  I.setOutput(n, 2, F->createQuantize(I.opName(n, "zp"),
                                      I.M->uniqueType(ElemKind::UInt8Q, Dims(), 1.0f, 0), zp));
  for (int i : {0, 2})
    if (I.hasOutput(n, i))
      I.setONNXType(n.output(i), TP::UINT8);
  return Error::success();
}

// ------------------------------------------------------------------ com.microsoft

/// QLinearAdd / QLinearMul: both operands dequantized, added or multiplied in float with
/// numpy broadcasting, and quantized to (C_scale, C_zero_point).
Error convertQLinearBinary(Importer &I, const Node &n) {
  bool add = n.op_type() == "QLinearAdd";
  std::vector<NodeValue> vs;
  for (int i : {0, 3}) {
    const char *what = i == 0 ? "A" : "B";
    KILN_ASSIGN_OR_RETURN(ElemKind k, eightBitKindOf(I, n, i, what));
    KILN_ASSIGN_OR_RETURN(std::vector<float> s, scalesOf(I, n, i + 1, "scale"));
    KILN_ASSIGN_OR_RETURN(std::vector<int32_t> zp, zeroPointsOf(I, n, i + 2, k, 1, "zero_point"));
    if (s.size() != 1 || zp.size() != 1)
      return I.unsupported(n, "operand ", what, " must be quantized per tensor");
    KILN_ASSIGN_OR_RETURN(NodeValue q, quantizedOperand(I, n, i, k, s[0], zp[0], what));
    vs.push_back(I.F->createDequantize(I.opName(n, what),
                                       I.M->uniqueType(ElemKind::Float, q.dims()), q));
  }
  KILN_RETURN_IF_ERR(I.broadcastAll(n, vs));
  KILN_ASSIGN_OR_RETURN(ElemKind ck, eightBitKindOf(I, n, 7, "C_zero_point"));
  KILN_ASSIGN_OR_RETURN(std::vector<float> cs, scalesOf(I, n, 6, "C_scale"));
  KILN_ASSIGN_OR_RETURN(std::vector<int32_t> czp, zeroPointsOf(I, n, 7, ck, 1, "C_zero_point"));
  if (cs.size() != 1 || czp.size() != 1)
    return I.unsupported(n, "C must be quantized per tensor");
  NodeValue r = add ? NodeValue(I.F->createAdd(I.opName(n, "sum"), vs[0], vs[1]))
                    : NodeValue(I.F->createMul(I.opName(n, "product"), vs[0], vs[1]));
  I.setOutput(n, 0, I.F->createQuantize(I.opName(n), I.M->uniqueType(ck, r.dims(), cs[0], czp[0]), r));
  if (I.hasOutput(n, 0))
    I.setONNXType(n.output(0), onnxTypeOfKind(ck));
  return Error::success();
}

} // namespace

void registerQuantConverters(ConverterMap &m) {
  m["QuantizeLinear"] = convertQuantizeLinear;
  m["DequantizeLinear"] = convertDequantizeLinear;
  m["QLinearConv"] = convertQuantConv;
  m["ConvInteger"] = convertQuantConv;
  m["QLinearMatMul"] = convertQuantMatMul;
  m["MatMulInteger"] = convertQuantMatMul;
  m["DynamicQuantizeLinear"] = convertDynamicQuantizeLinear;
  m["com.microsoft.QLinearAdd"] = convertQLinearBinary;
  m["com.microsoft.QLinearMul"] = convertQLinearBinary;
}

} // namespace kiln::onnximport
