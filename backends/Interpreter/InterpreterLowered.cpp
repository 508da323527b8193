// Kernels of the instructions that lowering and fusion produce: InsertTensor, and the
// Convolution / FullyConnected with a fused epilogue. The fused ones run the plain kernel,
// then add the residual (if any) and apply the activation to each stored element,
// computed in float and rounded after each step for 16-bit kinds, exactly as the unfused
// Add and activation would.

#include "Interpreter.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kiln {

namespace {

float activate(const std::string &act, float x, float alpha, float beta) {
  if (act == "None")
    return x;
  if (act == "Relu")
    return x > 0 ? x : 0.0f;
  if (act == "Clip")
    return std::min(std::max(x, alpha), beta);
  if (act == "LeakyRelu")
    return x >= 0 ? x : alpha * x;
  if (act == "Sigmoid")
    return 1.0f / (1.0f + std::exp(-x));
  return std::tanh(x); // "Tanh"; the type rule admits nothing else
}

/// The epilogue of a fused instruction on its result \p t: the residual \p res (null for
/// none) added, then the activation.
Error applyEpilogue(const Instruction *I, Tensor &t, const Tensor *res, const std::string &act,
                    float alpha, float beta) {
  if (!isFloatKind(t.getElementType()) || (res && res->getType() != t.getType()))
    return unsupportedKinds(I);
  if (t.getElementType() == ElemKind::Float) {
    auto h = t.getHandle<float>();
    if (res) {
      auto r = res->getHandle<float>();
      for (size_t i = 0, e = t.size(); i < e; i++)
        h.raw(i) = activate(act, h.raw(i) + r.raw(i), alpha, beta);
    } else {
      for (size_t i = 0, e = t.size(); i < e; i++)
        h.raw(i) = activate(act, h.raw(i), alpha, beta);
    }
    return Error::success();
  }
  // 16-bit kinds: computed in float and rounded when stored, after the Add and after the
  // activation, as the unfused Add and activation would.
  for (size_t i = 0, e = t.size(); i < e; i++) {
    if (res)
      t.setFromDouble(i, float(t.getAsDouble(i)) + float(res->getAsDouble(i)));
    t.setFromDouble(i, activate(act, float(t.getAsDouble(i)), alpha, beta));
  }
  return Error::success();
}

/// The residual operand of a fused instruction, or null.
template <typename InstT> const Value *residualOf(const InstT *I) {
  std::vector<Value *> r = I->getResidual();
  return r.empty() ? nullptr : r.front();
}

} // namespace

Error InterpreterRun::fwdInsertTensor(const InsertTensorInst *I) {
  Tensor &dst = getTensor(I->getDest());
  const Tensor &big = getTensor(I->getBig());
  const Tensor &small = getTensor(I->getSmall());
  const Type &dt = dst.getType();
  const Type &st = small.getType();
  const std::vector<dim_t> &offsets = I->getOffsets();
  if (big.getSizeInBytes() != dst.getSizeInBytes() || st.rank() != dt.rank() ||
      offsets.size() != dt.rank() || st.kind != dt.kind)
    return makeError(ErrorCode::Internal, "InsertTensor '", I->getName(), "': ", st.toString(),
                     " into ", dt.toString());
  for (size_t d = 0; d < dt.rank(); d++)
    if (offsets[d] + st.dims[d] > dt.dims[d])
      return makeError(ErrorCode::Internal, "InsertTensor '", I->getName(), "': ", st.toString(),
                       " does not fit in ", dt.toString());
  if (dst.getUnsafePtr() != big.getUnsafePtr())
    std::memmove(dst.getUnsafePtr(), big.getUnsafePtr(), big.getSizeInBytes());
  size_t rank = dt.rank();
  size_t es = dt.elemBytes();
  if (st.numElements() == 0)
    return Error::success();
  if (rank == 0) {
    std::memcpy(dst.getUnsafePtr(), small.getUnsafePtr(), es);
    return Error::success();
  }
  // Copy rows of the innermost dimension.
  Dims dStrides = dt.strides();
  size_t row = st.dims[rank - 1] * es;
  size_t rows = st.numElements() / st.dims[rank - 1];
  std::vector<dim_t> idx(rank, 0);
  const char *src = small.getUnsafePtr();
  char *out = dst.getUnsafePtr();
  for (size_t r = 0; r < rows; r++) {
    size_t off = 0;
    for (size_t d = 0; d < rank; d++)
      off += (idx[d] + offsets[d]) * dStrides[d];
    std::memcpy(out + off * es, src + r * row, row);
    for (size_t d = rank - 1; d-- > 0;) {
      if (++idx[d] < st.dims[d])
        break;
      idx[d] = 0;
    }
  }
  return Error::success();
}

Error InterpreterRun::fwdFusedConvolution(const FusedConvolutionInst *I) {
  ConvolutionInst conv(I->getName(), I->getType(), I->getDest(), I->getInput(), I->getFilter(),
                       I->getBias(), I->getKernels(), I->getStrides(), I->getPads(),
                       I->getDilations(), I->getGroup());
  KILN_RETURN_IF_ERR(fwdConvolution(&conv));
  const Value *res = residualOf(I);
  return applyEpilogue(I, getTensor(I->getDest()), res ? &getTensor(res) : nullptr,
                       I->getActivation(), I->getAlpha(), I->getBeta());
}

Error InterpreterRun::fwdFusedFullyConnected(const FusedFullyConnectedInst *I) {
  FullyConnectedInst fc(I->getName(), I->getType(), I->getDest(), I->getInput(), I->getWeights(),
                        I->getBias());
  KILN_RETURN_IF_ERR(fwdFullyConnected(&fc));
  const Value *res = residualOf(I);
  return applyEpilogue(I, getTensor(I->getDest()), res ? &getTensor(res) : nullptr,
                       I->getActivation(), I->getAlpha(), I->getBeta());
}

} // namespace kiln
