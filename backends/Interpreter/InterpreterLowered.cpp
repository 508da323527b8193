// Kernels of the instructions that lowering and fusion produce: InsertTensor, and the
// Convolution / FullyConnected with a fused activation. The fused ones run the plain
// kernel and then apply the activation to each stored element, computed in float and
// rounded once for 16-bit kinds, exactly as the unfused pair would.

#include "Interpreter.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kiln {

namespace {

float activate(const std::string &act, float x, float alpha, float beta) {
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

Error applyActivation(const Instruction *I, Tensor &t, const std::string &act, float alpha,
                      float beta) {
  if (!isFloatKind(t.getElementType()))
    return unsupportedKinds(I);
  if (t.getElementType() == ElemKind::Float) {
    for (float &x : t.getHandle<float>())
      x = activate(act, x, alpha, beta);
    return Error::success();
  }
  // 16-bit kinds: computed in float, rounded once when stored.
  for (size_t i = 0, e = t.size(); i < e; i++)
    t.setFromDouble(i, activate(act, float(t.getAsDouble(i)), alpha, beta));
  return Error::success();
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
  return applyActivation(I, getTensor(I->getDest()), I->getActivation(), I->getAlpha(),
                         I->getBeta());
}

Error InterpreterRun::fwdFusedFullyConnected(const FusedFullyConnectedInst *I) {
  FullyConnectedInst fc(I->getName(), I->getType(), I->getDest(), I->getInput(), I->getWeights(),
                        I->getBias());
  KILN_RETURN_IF_ERR(fwdFullyConnected(&fc));
  return applyActivation(I, getTensor(I->getDest()), I->getActivation(), I->getAlpha(),
                         I->getBeta());
}

} // namespace kiln
