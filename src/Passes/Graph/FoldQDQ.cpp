// fold-qdq: Quantize(Op(Dequantize(x), W, B)) with Op a float Convolution, FullyConnected
// or MatMul (2-D; its input may also be Reshape(Dequantize(x)), which becomes a Reshape of
// x), x i8q or u8q, and W dequantized 8-bit constant weights becomes one
// ChannelwiseQuantizedConvolution / ChannelwiseQuantizedFullyConnected of x with the
// Quantize's type. An optional Relu or Clip between Op and Quantize folds too when the
// Quantize's saturation clamps at least as much (a Relu: the offset is its kind's minimum;
// a ReLU6: also 6 quantizes to the kind's maximum or above).
//
// Element-wise arithmetic and pooling between Dequantize and Quantize nodes
// (Quantize(Add(Dequantize(a), Dequantize(b))), as around a residual Add or a pool) become
// the same node on the 8-bit values with the Quantize's type, where the backend runs it;
// Reshape and Transpose too when the Quantize keeps the input's scale and offset. Each
// float node must have no other user. With a backend, only where it supports the folded
// node (the float form stays otherwise); without one, always (the Interpreter runs both).
//
// W is recognised in the forms the ONNX importer writes for DequantizeLinear: per tensor,
// Dequantize(Constant (s, zp)); per channel along the output-channel axis,
// Mul(Sub(Dequantize(Constant (1, 0)), zero points), scales) with the zero points and
// scales Splats or Broadcasts of Constants that vary along that axis only; a Transpose
// of a 2-D W is transposed into the constant. B is a float Constant, a Splat, absent
// (MatMul), or the importer's dequantized int32 bias Mul(ConvertTo(Constant i32), scale),
// kept in integer accumulator units when its scales are inScale * W's scales (as ONNX
// Runtime writes them) and otherwise folded to float.
//
// Unsigned activations first become signed ones: a u8q value (scale s, offset z) holds the
// numbers of the i8q value (s, z - 128), whose raw values are 128 less, saturation bounds
// included (Quantize adds the offset after rounding). ONNX Runtime's quantizer writes uint8
// activations and the backends' int8 kernels read int8, so a Quantize to u8q read only by
// Dequantize nodes quantizes to i8q instead; the Dequantize results are the same floats.

#include "FoldQDQ.h"

#include "PassUtils.h"

#include "kiln/Backend/Backend.h"

#include <cmath>
#include <cstring>

namespace kiln {

namespace {

bool isEightBit(ElemKind k) { return k == ElemKind::Int8Q || k == ElemKind::UInt8Q; }

/// Per-channel float values of \p v (a Splat, a scalar-like Constant, or a Broadcast of a
/// Constant whose dims are 1 except \p axis of a value of rank \p rank) for \p count
/// channels; false otherwise.
bool channelValues(NodeValue v, size_t rank, size_t axis, size_t count, std::vector<double> &out) {
  if (auto *s = dyn_cast<SplatNode>(v.node)) {
    if (v.getElementType() != ElemKind::Float)
      return false;
    out.assign(count, s->getValue());
    return true;
  }
  if (auto *b = dyn_cast<BroadcastNode>(v.node))
    v = b->getInput();
  Constant *c = passutil::asConstant(v);
  if (!c || c->getType()->kind != ElemKind::Float)
    return false;
  const Dims &cd = c->getType()->dims;
  if (cd.size() > rank)
    return false;
  size_t lead = rank - cd.size();
  for (size_t i = 0; i < cd.size(); i++)
    if (cd[i] != 1 && !(i + lead == axis && cd[i] == count))
      return false;
  const Tensor &t = c->getPayload();
  out.clear();
  for (size_t i = 0; i < count; i++)
    out.push_back(t.getAsDouble(t.size() == 1 ? 0 : i));
  return true;
}

/// Weights recognised behind a float operand: 8-bit raw values (type scale 1, offset 0)
/// and a scale and offset per channel along the channel axis.
struct QWeights {
  Tensor raw;
  std::vector<float> scales;
  std::vector<int32_t> offsets;
};

/// \p c's payload re-typed to scale 1 and offset 0 (the same raw bytes).
Tensor rawCopy(const Constant *c) {
  const Tensor &p = c->getPayload();
  Tensor t(Type(p.getElementType(), p.dims(), 1.0f, 0));
  if (p.getSizeInBytes())
    std::memcpy(t.getUnsafePtr(), p.getUnsafePtr(), p.getSizeInBytes());
  return t;
}

/// The quantized weights behind \p w, channels along \p axis; false if \p w is not one of
/// the forms in the file comment.
bool matchWeights(NodeValue w, size_t axis, QWeights &q) {
  if (auto *tr = dyn_cast<TransposeNode>(w.node)) {
    const std::vector<dim_t> &sh = tr->getShuffle();
    if (sh.size() != 2 || sh[0] != 1 || sh[1] != 0 || !matchWeights(tr->getInput(), 1 - axis, q))
      return false;
    q.raw = passutil::transposeTensor(q.raw, {1, 0});
    return true;
  }
  const size_t rank = w.dims().size();
  if (axis >= rank)
    return false;
  const size_t count = w.dims()[axis];
  if (auto *dq = dyn_cast<DequantizeNode>(w.node)) {
    Constant *c = passutil::asConstant(dq->getInput());
    if (!c || !isEightBit(c->getType()->kind))
      return false;
    q.raw = rawCopy(c);
    q.scales.assign(count, c->getType()->scale);
    q.offsets.assign(count, c->getType()->offset);
    return true;
  }
  auto *mul = dyn_cast<MulNode>(w.node);
  if (!mul)
    return false;
  for (unsigned side = 0; side < 2; side++) {
    auto *sub = dyn_cast<SubNode>(mul->getNthInput(side).node);
    auto *dq = sub ? dyn_cast<DequantizeNode>(sub->getLHS().node) : nullptr;
    Constant *c = dq ? passutil::asConstant(dq->getInput()) : nullptr;
    if (!c || !isEightBit(c->getType()->kind) || c->getType()->scale != 1.0f ||
        c->getType()->offset != 0)
      continue;
    std::vector<double> s, z;
    if (!channelValues(mul->getNthInput(1 - side), rank, axis, count, s) ||
        !channelValues(sub->getRHS(), rank, axis, count, z))
      continue;
    q.raw = rawCopy(c);
    q.scales.clear();
    q.offsets.clear();
    for (size_t i = 0; i < count; i++) {
      if (!(std::isfinite(s[i]) && s[i] > 0) || z[i] != std::round(z[i]) ||
          std::fabs(z[i]) > 255)
        return false;
      q.scales.push_back(float(s[i]));
      q.offsets.push_back(int32_t(z[i]));
    }
    return true;
  }
  return false;
}

/// The bias of a folded node with \p count channels, from float operand \p b (null: none),
/// as an i32 Constant in accumulator units when \p b is the importer's dequantized int32
/// bias with scales inScale * wScales, else as a float Constant; null when \p b has
/// another form.
Constant *matchBias(Function *f, const std::string &name, NodeValue b, size_t count,
                    float inScale, const std::vector<float> &wScales) {
  if (!b.node)
    return passutil::makeConstant(f, name, Tensor(ElemKind::Float, {dim_t(count)}));
  if (b.dims() != Dims({dim_t(count)}) || b.getElementType() != ElemKind::Float)
    return nullptr;
  if (auto *mul = dyn_cast<MulNode>(b.node)) {
    for (unsigned side = 0; side < 2; side++) {
      auto *cv = dyn_cast<ConvertToNode>(mul->getNthInput(side).node);
      Constant *c = cv ? passutil::asConstant(cv->getInput()) : nullptr;
      std::vector<double> s;
      if (!c || c->getType()->kind != ElemKind::Int32I ||
          !channelValues(mul->getNthInput(1 - side), 1, 0, count, s))
        continue;
      const Tensor &bi = c->getPayload();
      bool accUnits = true;
      for (size_t i = 0; i < count; i++) {
        double want = double(inScale) * double(wScales[i]);
        accUnits &= std::fabs(s[i] - want) <= 1e-6 * want;
      }
      if (accUnits)
        return passutil::makeConstant(f, name, bi.clone());
      Tensor t(ElemKind::Float, {dim_t(count)});
      for (size_t i = 0; i < count; i++)
        t.getHandle<float>().raw(i) = float(bi.getAsDouble(i)) * float(s[i]);
      return passutil::makeConstant(f, name, std::move(t));
    }
    return nullptr;
  }
  std::vector<double> v;
  if (!channelValues(b, 1, 0, count, v))
    return nullptr;
  Tensor t(ElemKind::Float, {dim_t(count)});
  for (size_t i = 0; i < count; i++)
    t.getHandle<float>().raw(i) = float(v[i]);
  return passutil::makeConstant(f, name, std::move(t));
}

/// Constants of the per-channel scales and offsets.
std::pair<Constant *, Constant *> channelConstants(Function *f, const std::string &name,
                                                   const QWeights &q) {
  Tensor s(ElemKind::Float, {dim_t(q.scales.size())});
  Tensor o(ElemKind::Int32I, {dim_t(q.offsets.size())});
  for (size_t i = 0; i < q.scales.size(); i++) {
    s.getHandle<float>().raw(i) = q.scales[i];
    o.getHandle<int32_t>().raw(i) = q.offsets[i];
  }
  return {passutil::makeConstant(f, name + ".scales", std::move(s)),
          passutil::makeConstant(f, name + ".offsets", std::move(o))};
}

/// The quantized value behind float operand \p x: Dequantize of an i8q / u8q value, or a
/// Reshape of one (with \p f, the Reshape is then made on the quantized value; without, only
/// whether there is one is answered).
NodeValue quantizedInput(NodeValue x, Function *f = nullptr) {
  if (auto *r = dyn_cast<ReshapeNode>(x.node)) {
    NodeValue inner = quantizedInput(r->getInput());
    if (!inner || !f)
      return inner;
    return f->createReshape(r->getName(), inner, r->getDims());
  }
  auto *dq = dyn_cast<DequantizeNode>(x.node);
  if (!dq || !isEightBit(dq->getInput().getElementType()))
    return NodeValue();
  return dq->getInput();
}

/// True when quantizing to \p t saturates wherever clamping to [\p lo, \p hi] would act, so
/// Quantize(Clamp(v)) = Quantize(v) for every v: lo quantizes to the type's lowest value or
/// below, hi to its highest or above (Quantize is monotonic; its rounding as the
/// Interpreter's, round(r / scale) + offset). A Relu is the clamp [0, inf), which this allows
/// when the offset is the lowest value.
bool saturationClamps(const Type &t, double lo, double hi) {
  double qmin = t.kind == ElemKind::Int8Q ? -128 : 0, qmax = qmin + 255;
  auto quantized = [&](double r) { return std::round(r / double(t.scale)) + double(t.offset); };
  return quantized(lo) <= qmin && quantized(hi) >= qmax;
}

/// Whether \p k computes on quantized operands what it computes on their real values, up to
/// the result's rounding: element-wise arithmetic and pooling, whose quantized forms take
/// operands and a result of any scales (the table's i8q rules).
bool quantizedAlike(NodeKind k) {
  switch (k) {
  case NodeKind::Add:
  case NodeKind::Sub:
  case NodeKind::Mul:
  case NodeKind::Max:
  case NodeKind::Min:
  case NodeKind::Relu:
  case NodeKind::MaxPool:
  case NodeKind::AvgPool:
  case NodeKind::AdaptiveAvgPool:
    return true;
  default:
    return false;
  }
}

/// Quantize(Op(Dequantize(x1), ..., Dequantize(xn))) with Op quantizedAlike, or a Reshape or
/// Transpose whose Quantize has x's scale and offset, becomes Op(x1, ..., xn) with the
/// Quantize's type; null otherwise.
NodeValue foldAlike(Function *f, Node *p, TypeRef outTy) {
  bool moves = isa<ReshapeNode>(p) || isa<TransposeNode>(p);
  if ((!quantizedAlike(p->getKind()) && !moves) || p->getNumResults() != 1 ||
      p->getType(0)->kind != ElemKind::Float || p->getNumUsesOf(0) != 1)
    return NodeValue();
  std::vector<NodeValue> ins;
  for (unsigned i = 0; i < p->getNumInputs(); i++) {
    auto *dq = dyn_cast<DequantizeNode>(p->getNthInput(i).node);
    if (!dq || !isEightBit(dq->getInput().getElementType()))
      return NodeValue();
    ins.push_back(dq->getInput());
  }
  if (moves && (ins[0].getType()->kind != outTy->kind || ins[0].getType()->scale != outTy->scale ||
                ins[0].getType()->offset != outTy->offset))
    return NodeValue();
  return passutil::cloneWith(f, p, ins, {passutil::withDims(f, *outTy, p->getType(0)->dims)})
      ->getNthResult(0);
}

/// Folds Quantize \p q; returns the replacement or null.
NodeValue fold(Function *f, QuantizeNode *q) {
  TypeRef outTy = q->getResultType();
  if (!isEightBit(outTy->kind))
    return NodeValue();
  if (NodeValue r = foldAlike(f, q->getInput().node, outTy))
    return r;
  Node *p = q->getInput().node;
  if (p->getNumUsesOf(0) != 1)
    return NodeValue();
  if (isa<ReluNode>(p) || isa<ClipNode>(p)) {
    auto *clip = dyn_cast<ClipNode>(p);
    double lo = clip ? clip->getMin() : 0.0;
    double hi = clip ? clip->getMax() : HUGE_VAL;
    if (!saturationClamps(*outTy, lo, hi))
      return NodeValue();
    p = p->getNthInput(0).node;
    if (p->getNumUsesOf(0) != 1)
      return NodeValue();
  }
  if (p->getNumResults() != 1 || p->getType(0)->kind != ElemKind::Float)
    return NodeValue();
  const std::string name = p->getName();
  if (auto *conv = dyn_cast<ConvolutionNode>(p)) {
    NodeValue x = quantizedInput(conv->getInput());
    QWeights w;
    if (!x || !matchWeights(conv->getFilter(), 0, w))
      return NodeValue();
    Constant *bias = matchBias(f, name + ".bias", conv->getBias(), w.scales.size(),
                               x.getType()->scale, w.scales);
    if (!bias)
      return NodeValue();
    auto [s, o] = channelConstants(f, name, w);
    Constant *filter = passutil::makeConstant(f, name + ".filter", std::move(w.raw));
    return f->createChannelwiseQuantizedConvolution(
        name, passutil::withDims(f, *outTy, conv->getResultType()->dims), x, filter, s, o, bias,
        conv->getKernels(), conv->getStrides(), conv->getPads(), conv->getDilations(),
        conv->getGroup(), "None", 0.0f, 0.0f);
  }
  NodeValue in, weights, b;
  if (auto *fc = dyn_cast<FullyConnectedNode>(p)) {
    in = fc->getInput(), weights = fc->getWeights(), b = fc->getBias();
  } else if (auto *mm = dyn_cast<MatMulNode>(p)) {
    in = mm->getLHS(), weights = mm->getRHS();
  } else {
    return NodeValue();
  }
  NodeValue x = quantizedInput(in);
  QWeights w;
  if (!x || in.dims().size() != 2 || weights.dims().size() != 2 || !matchWeights(weights, 1, w))
    return NodeValue();
  Constant *bias = matchBias(f, name + ".bias", b, w.scales.size(), x.getType()->scale, w.scales);
  if (!bias)
    return NodeValue();
  x = quantizedInput(in, f);
  auto [s, o] = channelConstants(f, name, w);
  Constant *wc = passutil::makeConstant(f, name + ".weights", std::move(w.raw));
  return f->createChannelwiseQuantizedFullyConnected(
      name, passutil::withDims(f, *outTy, p->getType(0)->dims), x, wc, s, o, bias, "None", 0.0f, 0.0f);
}

/// Retypes each Quantize to u8q whose users are all Dequantize nodes to the i8q type with
/// the same numbers (offset - 128). Returns true when it changed \p f.
bool signUnsignedQuantizes(Function *f) {
  bool changed = false;
  for (Node *n : passutil::topoOrder(*f)) {
    auto *q = dyn_cast<QuantizeNode>(n);
    if (!q || q->getResultType()->kind != ElemKind::UInt8Q || !q->hasUsers())
      continue;
    bool onlyDequantized = true;
    for (const NodeUse &u : q->getUsers())
      onlyDequantized &= isa<DequantizeNode>(u.user);
    if (!onlyDequantized)
      continue;
    const Type &t = *q->getResultType();
    q->setType(0, f->getParent()->uniqueType(ElemKind::Int8Q, t.dims, t.scale, t.offset - 128));
    changed = true;
  }
  return changed;
}

} // namespace

bool foldQDQ(Function *f, const PassContext &ctx) {
  bool signedAny = signUnsignedQuantizes(f);
  return passutil::rewriteNodes(f, [&](Node *n) {
    auto *q = dyn_cast<QuantizeNode>(n);
    NodeValue r = q ? fold(f, q) : NodeValue();
    if (r && ctx.backend && !ctx.backend->isOpSupported(*r.node)) {
      // The backend runs the float form: drop the folded node and its new constants.
      std::vector<Constant *> made;
      for (unsigned i = 1; i < r.node->getNumInputs(); i++)
        if (Constant *c = passutil::asConstant(r.node->getNthInput(i)))
          made.push_back(c);
      f->eraseNode(r.node);
      for (Constant *c : made)
        if (!c->hasUsers())
          f->getParent()->eraseConstant(c);
      return NodeValue();
    }
    return r;
  }) || signedAny;
}

} // namespace kiln
