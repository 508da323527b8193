// Quantization kernels of the Interpreter: Quantize, Dequantize and RescaleQuantized, and
// the requantizing helper the data-movement kernels share. Quantized values follow
// real = scale * (q - offset); results round half away from zero and saturate. The
// arithmetic is in double, so scales that are powers of two give exact results.

#include "InterpreterUtil.h"

namespace kiln {

using namespace interp;

namespace {

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

} // namespace kiln
