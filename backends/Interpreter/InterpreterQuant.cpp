// Quantization kernels of the Interpreter: Quantize, Dequantize and RescaleQuantized, the
// per-channel quantized ChannelwiseQuantizedConvolution and ChannelwiseQuantizedFullyConnected,
// and the requantizing helper the data-movement kernels share. Quantized values follow
// real = scale * (q - offset); results round half away from zero and saturate. The
// arithmetic is in double, so scales that are powers of two give exact results.

#include "InterpreterUtil.h"

namespace kiln {

using namespace interp;

namespace {

/// The raw values of an i8q or u8q tensor less \p offset, as 64-bit integers.
Expected<std::vector<int64_t>> centredEightBit(const Instruction *I, const Tensor &t,
                                               int64_t offset) {
  std::vector<int64_t> v(t.size());
  if (t.getElementType() == ElemKind::Int8Q) {
    const int8_t *x = elems<int8_t>(t);
    for (size_t i = 0; i < v.size(); i++)
      v[i] = int64_t(x[i]) - offset;
  } else if (t.getElementType() == ElemKind::UInt8Q) {
    const uint8_t *x = elems<uint8_t>(t);
    for (size_t i = 0; i < v.size(); i++)
      v[i] = int64_t(x[i]) - offset;
  } else {
    return unsupportedKinds(I);
  }
  return v;
}

/// The per-channel parameters of a channelwise quantized instruction, checked: \p count
/// positive finite scales, int32 offsets, and an int32 (accumulator units) or float bias.
struct ChannelParams {
  const float *scales = nullptr;
  const int32_t *offsets = nullptr;
  const int32_t *intBias = nullptr;
  const float *floatBias = nullptr;
};

Expected<ChannelParams> channelParams(const Instruction *I, const Tensor &scales,
                                      const Tensor &offsets, const Tensor &bias, size_t count) {
  if (scales.getElementType() != ElemKind::Float || offsets.getElementType() != ElemKind::Int32I ||
      (bias.getElementType() != ElemKind::Int32I && bias.getElementType() != ElemKind::Float))
    return unsupportedKinds(I);
  if (scales.size() != count || offsets.size() != count || bias.size() != count)
    return operandError(I, "per-channel operands ", scales.getType().toString(), ", ",
                        offsets.getType().toString(), " and ", bias.getType().toString(),
                        " must have ", count, " entries");
  ChannelParams p;
  p.scales = elems<float>(scales);
  p.offsets = elems<int32_t>(offsets);
  if (bias.getElementType() == ElemKind::Int32I)
    p.intBias = elems<int32_t>(bias);
  else
    p.floatBias = elems<float>(bias);
  for (size_t i = 0; i < count; i++)
    if (!(std::isfinite(p.scales[i]) && p.scales[i] > 0))
      return makeError(ErrorCode::InvalidArgument, I->getKindName(), " '", I->getName(),
                       "': scale ", i, " is ", p.scales[i], "; scales must be positive and finite");
  return p;
}

/// The result of a channelwise instruction: the exact accumulators (int32 bias included)
/// for an i32 result, else the real values.
struct ChannelResult {
  std::vector<int64_t> accs;
  std::vector<double> reals;
};

/// Stores \p res into \p out: an i32 result takes the accumulators wrapped to 32 bits; an
/// i8q or u8q result round(r / scale) + offset of the reals, halves away from zero,
/// saturated.
Error storeChannelResult(const Instruction *I, const ChannelResult &res, Tensor &out) {
  const Type &ot = out.getType();
  if (ot.kind == ElemKind::Int32I) {
    int32_t *y = elems<int32_t>(out);
    for (size_t i = 0; i < res.accs.size(); i++)
      y[i] = int32_t(uint32_t(uint64_t(res.accs[i])));
    return Error::success();
  }
  const std::vector<double> &reals = res.reals;
  if (ot.kind == ElemKind::Int8Q) {
    int8_t *y = elems<int8_t>(out);
    for (size_t i = 0; i < reals.size(); i++)
      y[i] = quantizeValue<int8_t>(reals[i], ot.scale, ot.offset);
    return Error::success();
  }
  if (ot.kind == ElemKind::UInt8Q) {
    uint8_t *y = elems<uint8_t>(out);
    for (size_t i = 0; i < reals.size(); i++)
      y[i] = quantizeValue<uint8_t>(reals[i], ot.scale, ot.offset);
    return Error::success();
  }
  return unsupportedKinds(I);
}

/// Adds output \p i of channel \p c with accumulator \p acc to \p res: the int32 bias joins
/// the exact integer sum; the real value is inScale * scale[c] * acc plus the float bias,
/// through the activation \p act (a fused Relu or Clip, None for an i32 result).
void addChannelOutput(ChannelResult &res, const ChannelParams &p, float inScale, size_t i,
                      size_t c, int64_t acc, const RealActivation &act) {
  if (p.intBias)
    acc += p.intBias[c];
  res.accs[i] = acc;
  double r = double(inScale) * double(p.scales[c]) * double(acc);
  res.reals[i] = act.apply(p.floatBias ? r + double(p.floatBias[c]) : r);
}

/// The activation of a channelwise instruction \p I: None, Relu or Clip, and None for an
/// i32 result (whose accumulators it could not change).
template <typename InstT> Expected<RealActivation> channelActivation(const InstT *I) {
  KILN_ASSIGN_OR_RETURN(RealActivation act,
                        realActivation(I, I->getActivation(), I->getAlpha(), I->getBeta()));
  if (act.clamps && I->getDest()->getType()->kind == ElemKind::Int32I)
    return operandError(I, "activation ", I->getActivation(), " needs a quantized result, not ",
                        I->getDest()->getType()->toString());
  return act;
}

/// Requantizes \p in into \p out (same storage type T, any parameters).
template <typename T> void rescale(const Tensor &in, Tensor &out) {
  const Type &it = in.getType(), &ot = out.getType();
  const T *x = elems<T>(in);
  T *y = elems<T>(out);
  for (size_t i = 0, e = in.size(); i < e; i++)
    y[i] = quantizeValue<T>(dequantizeValue(x[i], it.scale, it.offset), ot.scale, ot.offset);
}

} // namespace

Expected<const Tensor *> interp::withQuantParamsOf(const Instruction *I, const Tensor &src,
                                                   const Type &want, Tensor &scratch) {
  if (!quantParamsDiffer(src.getType(), want))
    return &src;
  if (src.getElementType() != want.kind)
    return operandError(I, "cannot requantize ", src.getType().toString(), " to ",
                        want.toString());
  scratch = Tensor(Type::withDims(want, src.dims()));
  KILN_RETURN_IF_ERR(dispatchQuantized(I, want.kind, [&](auto tag) {
    rescale<typename decltype(tag)::type>(src, scratch);
    return Error::success();
  }));
  return &scratch;
}

Error InterpreterRun::fwdQuantize(const QuantizeInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &in = getTensor(I->getInput());
  if (in.getElementType() != ElemKind::Float)
    return unsupportedKinds(I);
  KILN_RETURN_IF_ERR(checkSameSize(I, out, in));
  const Type &ot = out.getType();
  return dispatchQuantized(I, ot.kind, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const float *x = elems<float>(in);
    T *y = elems<T>(out);
    for (size_t i = 0, e = in.size(); i < e; i++)
      y[i] = quantizeValue<T>(x[i], ot.scale, ot.offset);
    return Error::success();
  });
}

Error InterpreterRun::fwdDequantize(const DequantizeInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &in = getTensor(I->getInput());
  if (out.getElementType() != ElemKind::Float)
    return unsupportedKinds(I);
  KILN_RETURN_IF_ERR(checkSameSize(I, out, in));
  const Type &it = in.getType();
  return dispatchQuantized(I, it.kind, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *x = elems<T>(in);
    float *y = elems<float>(out);
    for (size_t i = 0, e = in.size(); i < e; i++)
      y[i] = float(dequantizeValue(x[i], it.scale, it.offset));
    return Error::success();
  });
}

Error InterpreterRun::fwdRescaleQuantized(const RescaleQuantizedInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &in = getTensor(I->getInput());
  KILN_RETURN_IF_ERR(checkSameKind(I, out, in));
  KILN_RETURN_IF_ERR(checkSameSize(I, out, in));
  return dispatchQuantized(I, in.getElementType(), [&](auto tag) {
    rescale<typename decltype(tag)::type>(in, out);
    return Error::success();
  });
}

Error InterpreterRun::fwdChannelwiseQuantizedConvolution(
    const ChannelwiseQuantizedConvolutionInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &in = getTensor(I->getInput()), &filter = getTensor(I->getFilter());
  const Type &it = in.getType(), &ft = filter.getType(), &ot = out.getType();
  const std::vector<dim_t> &k = I->getKernels(), &st = I->getStrides(), &pd = I->getPads(),
                           &dl = I->getDilations();
  const dim_t group = I->getGroup();
  if (it.rank() != 4 || ft.rank() != 4 || ot.rank() != 4 || k.size() != 2 || st.size() != 2 ||
      pd.size() != 4 || dl.size() != 2 || group == 0 || ot.dims[0] != it.dims[0] ||
      ot.dims[1] != ft.dims[0] || it.dims[1] % group != 0 || ft.dims[0] % group != 0 ||
      ft.dims[1] != it.dims[1] / group || ft.dims[2] != k[0] || ft.dims[3] != k[1])
    return operandError(I, "malformed operands or attributes (input ", it.toString(),
                        ", filter ", ft.toString(), ", output ", ot.toString(), ")");
  const dim_t N = it.dims[0], C = it.dims[1], H = it.dims[2], W = it.dims[3];
  const dim_t O = ot.dims[1], OH = ot.dims[2], OW = ot.dims[3];
  const dim_t cg = C / group, og = O / group;
  KILN_ASSIGN_OR_RETURN(ChannelParams p,
                        channelParams(I, getTensor(I->getFilterScales()),
                                      getTensor(I->getFilterOffsets()), getTensor(I->getBias()), O));
  KILN_ASSIGN_OR_RETURN(RealActivation act, channelActivation(I));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> x, centredEightBit(I, in, it.offset));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> f, centredEightBit(I, filter, 0));
  ChannelResult res{std::vector<int64_t>(out.size()), std::vector<double>(out.size())};
  size_t idx = 0;
  for (dim_t n = 0; n < N; n++)
    for (dim_t o = 0; o < O; o++) {
      const dim_t g = o / og;
      const int64_t fOff = p.offsets[o];
      for (dim_t oh = 0; oh < OH; oh++)
        for (dim_t ow = 0; ow < OW; ow++) {
          int64_t acc = 0;
          for (dim_t c = 0; c < cg; c++)
            for (dim_t kh = 0; kh < k[0]; kh++) {
              sdim_t ih = sdim_t(oh * st[0] + kh * dl[0]) - sdim_t(pd[0]);
              if (ih < 0 || ih >= sdim_t(H))
                continue;
              for (dim_t kw = 0; kw < k[1]; kw++) {
                sdim_t iw = sdim_t(ow * st[1] + kw * dl[1]) - sdim_t(pd[1]);
                if (iw < 0 || iw >= sdim_t(W))
                  continue;
                int64_t xv = x[((n * C + g * cg + c) * H + dim_t(ih)) * W + dim_t(iw)];
                int64_t fv = f[((o * cg + c) * k[0] + kh) * k[1] + kw] - fOff;
                acc += xv * fv;
              }
            }
          addChannelOutput(res, p, it.scale, idx++, o, acc, act);
        }
    }
  return storeChannelResult(I, res, out);
}

Error InterpreterRun::fwdChannelwiseQuantizedFullyConnected(
    const ChannelwiseQuantizedFullyConnectedInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &in = getTensor(I->getInput()), &weights = getTensor(I->getWeights());
  const Type &it = in.getType(), &wt = weights.getType(), &ot = out.getType();
  if (it.rank() != 2 || wt.rank() != 2 || ot.rank() != 2 || wt.dims[0] != it.dims[1] ||
      ot.dims[0] != it.dims[0] || ot.dims[1] != wt.dims[1])
    return operandError(I, "operand shapes ", it.toString(), " and ", wt.toString(),
                        " do not fit output ", ot.toString());
  const dim_t N = it.dims[0], K = it.dims[1], M = wt.dims[1];
  KILN_ASSIGN_OR_RETURN(ChannelParams p,
                        channelParams(I, getTensor(I->getWeightScales()),
                                      getTensor(I->getWeightOffsets()), getTensor(I->getBias()), M));
  KILN_ASSIGN_OR_RETURN(RealActivation act, channelActivation(I));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> x, centredEightBit(I, in, it.offset));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> w, centredEightBit(I, weights, 0));
  ChannelResult res{std::vector<int64_t>(out.size()), std::vector<double>(out.size())};
  for (dim_t n = 0; n < N; n++)
    for (dim_t m = 0; m < M; m++) {
      int64_t acc = 0;
      for (dim_t j = 0; j < K; j++)
        acc += x[n * K + j] * (w[j * M + m] - int64_t(p.offsets[m]));
      addChannelOutput(res, p, it.scale, n * M + m, m, acc, act);
    }
  return storeChannelResult(I, res, out);
}

} // namespace kiln
