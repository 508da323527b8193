// fold-qdq: Quantize(Op(Dequantize(x), W, B)) with Op a float Convolution, FullyConnected
// or MatMul (2-D; its input may also be Reshape(Dequantize(x)), which becomes a Reshape of
// x), x i8q or u8q, and W dequantized 8-bit constant weights becomes one
// ChannelwiseQuantizedConvolution / ChannelwiseQuantizedFullyConnected of x with the
// Quantize's type. An optional Relu between Op and Quantize folds too when the Quantize's
// offset is its kind's minimum (saturation is then the Relu). Each float node must have no
// other user. With a backend, only where it supports the folded node (the float form
// stays otherwise); without one, always (the Interpreter runs both).
//
// W is recognised in the forms the ONNX importer writes for DequantizeLinear: per tensor,
// Dequantize(Constant (s, zp)); per channel along the output-channel axis,
// Mul(Sub(Dequantize(Constant (1, 0)), zero points), scales) with the zero points and
// scales Splats or Broadcasts of Constants that vary along that axis only; a Transpose
// of a 2-D W is transposed into the constant. B is a float Constant, a Splat, absent
// (MatMul), or the importer's dequantized int32 bias Mul(ConvertTo(Constant i32), scale),
// kept in integer accumulator units when its scales are inScale * W's scales (as ONNX
// Runtime writes them) and otherwise folded to float.

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

/// Folds Quantize \p q; returns the replacement or null.
NodeValue fold(Function *f, QuantizeNode *q) {
  TypeRef outTy = q->getResultType();
  if (!isEightBit(outTy->kind))
    return NodeValue();
  Node *p = q->getInput().node;
  if (p->getNumUsesOf(0) != 1)
    return NodeValue();
  if (auto *relu = dyn_cast<ReluNode>(p)) {
    double lowest = outTy->kind == ElemKind::Int8Q ? -128 : 0;
    if (double(outTy->offset) != lowest)
      return NodeValue();
    p = relu->getInput().node;
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
        conv->getGroup());
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
      name, passutil::withDims(f, *outTy, p->getType(0)->dims), x, wc, s, o, bias);
}

} // namespace

bool foldQDQ(Function *f, const PassContext &ctx) {
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
  });
}

} // namespace kiln
