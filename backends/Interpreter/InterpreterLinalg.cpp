// Interpreter kernels of the linear-algebra operators: FullyConnected, MatMul,
// BatchMatMul and BatchedAdd. Float products use Eigen on float copies of the operands
// (Float16 and BFloat16 round once when storing); Int8Q products are direct loops that
// accumulate (a - aOffset) * (b - bOffset) in int32 and requantize each output once.
// FusedFullyConnected runs the plain kernel, then the fused epilogue (applyEpilogue,
// InterpreterElementwise.cpp).

#include "InterpreterKernels.h"

#include <Eigen/Core>

namespace kiln {

using namespace interp;

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Float \p batches products of [n, k] x [k, m] matrices stored back to back.
std::vector<float> matMulFloat(const std::vector<float> &lhs, const std::vector<float> &rhs,
                               dim_t batches, dim_t n, dim_t k, dim_t m) {
  std::vector<float> out(batches * n * m);
  for (dim_t b = 0; b < batches; b++) {
    Eigen::Map<const RowMatrix> L(&lhs[b * n * k], n, k);
    Eigen::Map<const RowMatrix> R(&rhs[b * k * m], k, m);
    Eigen::Map<RowMatrix> Y(&out[b * n * m], n, m);
    Y.noalias() = L * R;
  }
  return out;
}

/// Int32 sum over j of (lhs[i, j] - lhsOffset) * (rhs[j, c] - rhsOffset) for matrices stored
/// row-major at element offsets \p lBase and \p rBase.
int32_t dotInt8(const Tensor &lhs, size_t lBase, const Tensor &rhs, size_t rBase, dim_t i, dim_t c,
                dim_t k, dim_t m) {
  auto l = lhs.getHandle<int8_t>();
  auto r = rhs.getHandle<int8_t>();
  const int32_t lOff = lhs.getType().offset, rOff = rhs.getType().offset;
  int32_t acc = 0;
  for (dim_t j = 0; j < k; j++)
    acc += (int32_t(l.raw(lBase + i * k + j)) - lOff) * (int32_t(r.raw(rBase + j * m + c)) - rOff);
  return acc;
}

/// Int8 \p batches products of [n, k] x [k, m] matrices, requantized to \p out.
void matMulInt8(const Tensor &lhs, const Tensor &rhs, Tensor &out, dim_t batches, dim_t n, dim_t k,
                dim_t m) {
  const double accScale = double(lhs.getType().scale) * double(rhs.getType().scale);
  const Type &outTy = out.getType();
  auto y = out.getHandle<int8_t>();
  for (dim_t b = 0; b < batches; b++)
    for (dim_t i = 0; i < n; i++)
      for (dim_t c = 0; c < m; c++) {
        int32_t acc = dotInt8(lhs, b * n * k, rhs, b * k * m, i, c, k, m);
        y.raw((b * n + i) * m + c) =
            quantizeValue<int8_t>(accScale * acc, outTy.scale, outTy.offset);
      }
}

/// Checks that \p t has rank \p rank.
bool hasRank(const Tensor &t, size_t rank) { return t.getType().rank() == rank; }

Error shapeError(const Instruction *I, const Tensor &a, const Tensor &b, const Tensor &out) {
  return makeError(ErrorCode::InvalidArgument, I->getKindName(), " '", I->getName(),
                   "': operand shapes ", a.getType().toString(), " and ", b.getType().toString(),
                   " do not fit output ", out.getType().toString());
}

/// Runs a (batched) matrix product [B, n, k] x [B, k, m] -> [B, n, m] of any supported kind.
Error matMul(const Instruction *I, const Tensor &lhs, const Tensor &rhs, Tensor &out, dim_t batches,
             dim_t n, dim_t k, dim_t m) {
  if (lhs.size() != batches * n * k || rhs.size() != batches * k * m ||
      out.size() != batches * n * m)
    return shapeError(I, lhs, rhs, out);
  if (sameFloatKind(out, lhs, rhs)) {
    storeFloats(out, matMulFloat(loadFloats(lhs), loadFloats(rhs), batches, n, k, m));
    return Error::success();
  }
  if (lhs.getElementType() == ElemKind::Int8Q && rhs.getElementType() == ElemKind::Int8Q &&
      out.getElementType() == ElemKind::Int8Q) {
    matMulInt8(lhs, rhs, out, batches, n, k, m);
    return Error::success();
  }
  return unsupportedKinds(I);
}

/// A FullyConnected or FusedFullyConnected \p I without its float epilogue: float kinds,
/// or int8 with the activation \p act before the rounding.
template <typename FCInst>
Error fullyConnected(const FCInst *I, const Tensor &in, const Tensor &weights,
                     const Tensor &bias, Tensor &out, const RealActivation &act) {
  if (!hasRank(in, 2) || !hasRank(weights, 2) || !hasRank(out, 2) ||
      weights.dims()[0] != in.dims()[1] || out.dims()[0] != in.dims()[0] ||
      out.dims()[1] != weights.dims()[1] || bias.size() != weights.dims()[1])
    return shapeError(I, in, weights, out);
  const dim_t n = in.dims()[0], k = in.dims()[1], m = weights.dims()[1];

  if (sameFloatKind(out, in, weights, bias)) {
    std::vector<float> y = matMulFloat(loadFloats(in), loadFloats(weights), 1, n, k, m);
    std::vector<float> b = loadFloats(bias);
    for (dim_t i = 0; i < n; i++)
      for (dim_t c = 0; c < m; c++)
        y[i * m + c] += b[c];
    storeFloats(out, y);
    return Error::success();
  }
  if (in.getElementType() == ElemKind::Int8Q && weights.getElementType() == ElemKind::Int8Q &&
      bias.getElementType() == ElemKind::Int32Q && out.getElementType() == ElemKind::Int8Q) {
    const double accScale = double(in.getType().scale) * double(weights.getType().scale);
    const Type &outTy = out.getType();
    auto b = bias.getHandle<int32_t>();
    auto y = out.getHandle<int8_t>();
    for (dim_t i = 0; i < n; i++)
      for (dim_t c = 0; c < m; c++) {
        int32_t acc = dotInt8(in, 0, weights, 0, i, c, k, m);
        double real = act.apply(accScale * acc + dequantizeValue(b.raw(c), bias.getType()));
        y.raw(i * m + c) = quantizeValue<int8_t>(real, outTy.scale, outTy.offset);
      }
    return Error::success();
  }
  return unsupportedKinds(I);
}

} // namespace

Error InterpreterRun::fwdFullyConnected(const FullyConnectedInst *I) {
  return fullyConnected(I, getTensor(I->getInput()), getTensor(I->getWeights()),
                        getTensor(I->getBias()), getTensor(I->getDest()), RealActivation());
}

Error InterpreterRun::fwdMatMul(const MatMulInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &lhs = getTensor(I->getLHS());
  const Tensor &rhs = getTensor(I->getRHS());
  if (!hasRank(lhs, 2) || !hasRank(rhs, 2))
    return shapeError(I, lhs, rhs, out);
  return matMul(I, lhs, rhs, out, 1, lhs.dims()[0], lhs.dims()[1], rhs.dims()[1]);
}

Error InterpreterRun::fwdBatchMatMul(const BatchMatMulInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &lhs = getTensor(I->getLHS());
  const Tensor &rhs = getTensor(I->getRHS());
  if (!hasRank(lhs, 3) || !hasRank(rhs, 3) || rhs.dims()[0] != lhs.dims()[0])
    return shapeError(I, lhs, rhs, out);
  return matMul(I, lhs, rhs, out, lhs.dims()[0], lhs.dims()[1], lhs.dims()[2], rhs.dims()[2]);
}

Error InterpreterRun::fwdBatchedAdd(const BatchedAddInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &batch = getTensor(I->getBatch());
  const Tensor &slice = getTensor(I->getSlice());
  const size_t sliceSize = slice.size();
  if (batch.size() != out.size() || sliceSize == 0 || batch.size() % sliceSize != 0)
    return shapeError(I, batch, slice, out);

  if (sameFloatKind(out, batch, slice)) {
    std::vector<float> y = loadFloats(batch), s = loadFloats(slice);
    for (size_t i = 0; i < y.size(); i++)
      y[i] += s[i % sliceSize];
    storeFloats(out, y);
    return Error::success();
  }
  if (batch.getElementType() == ElemKind::Int8Q && slice.getElementType() == ElemKind::Int8Q &&
      out.getElementType() == ElemKind::Int8Q) {
    auto x = batch.getHandle<int8_t>();
    auto s = slice.getHandle<int8_t>();
    auto y = out.getHandle<int8_t>();
    const Type &outTy = out.getType();
    for (size_t i = 0; i < out.size(); i++) {
      double real = dequantizeValue(x.raw(i), batch.getType()) +
                    dequantizeValue(s.raw(i % sliceSize), slice.getType());
      y.raw(i) = quantizeValue<int8_t>(real, outTy.scale, outTy.offset);
    }
    return Error::success();
  }
  return unsupportedKinds(I);
}

Error InterpreterRun::fwdFusedFullyConnected(const FusedFullyConnectedInst *I) {
  const Tensor &in = getTensor(I->getInput());
  Tensor &out = getTensor(I->getDest());
  const Value *res = residualOf(I);
  if (in.getElementType() == ElemKind::Int8Q) {
    // One rounding: the activation acts on the real value (a Residual is not taken).
    if (res)
      return unsupportedKinds(I);
    KILN_ASSIGN_OR_RETURN(RealActivation act,
                          realActivation(I, I->getActivation(), I->getAlpha(), I->getBeta()));
    return fullyConnected(I, in, getTensor(I->getWeights()), getTensor(I->getBias()), out, act);
  }
  KILN_RETURN_IF_ERR(fullyConnected(I, in, getTensor(I->getWeights()), getTensor(I->getBias()),
                                    out, RealActivation()));
  return applyEpilogue(I, getTensor(I->getDest()), res ? &getTensor(res) : nullptr,
                       I->getActivation(), I->getAlpha(), I->getBeta());
}

} // namespace kiln
