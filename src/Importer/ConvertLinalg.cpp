// Converters of the linear-algebra family: Gemm and MatMul.

#include "ONNXImporter.h"

#include <algorithm>
#include <cmath>

namespace kiln::onnximport {

namespace {

using Node = onnx::NodeProto;

/// The transpose of the 2-D tensor \p t (any kind), copied in cache-sized blocks.
template <typename T> void transposeBlocks(const T *s, T *d, dim_t r, dim_t k) {
  // Output rows outer, so that writes stream through a few rows at a time.
  constexpr dim_t B = 16;
  for (dim_t j0 = 0; j0 < k; j0 += B)
    for (dim_t i0 = 0; i0 < r; i0 += B) {
      dim_t i1 = std::min(r, i0 + B), j1 = std::min(k, j0 + B);
      for (dim_t j = j0; j < j1; j++)
        for (dim_t i = i0; i < i1; i++)
          d[j * r + i] = s[i * k + j];
    }
}

Tensor transpose2D(const Tensor &t) {
  dim_t r = t.dims()[0], k = t.dims()[1];
  Tensor out(Type::withDims(t.getType(), Dims({k, r})));
  const char *s = t.getUnsafePtr();
  char *d = out.getUnsafePtr();
  switch (t.getType().elemBytes()) {
  case 1: transposeBlocks(reinterpret_cast<const uint8_t *>(s), reinterpret_cast<uint8_t *>(d), r, k); break;
  case 2: transposeBlocks(reinterpret_cast<const uint16_t *>(s), reinterpret_cast<uint16_t *>(d), r, k); break;
  case 4: transposeBlocks(reinterpret_cast<const uint32_t *>(s), reinterpret_cast<uint32_t *>(d), r, k); break;
  case 8: transposeBlocks(reinterpret_cast<const uint64_t *>(s), reinterpret_cast<uint64_t *>(d), r, k); break;
  default:
    return gatherElements(t, Dims({k, r}), [&](size_t j) { return (j % r) * k + j / r; });
  }
  return out;
}

/// Operand \p i of a Gemm, transposed when \p trans; a constant is transposed in the
/// importer (the original is never materialised).
Expected<NodeValue> gemmOperand(Importer &I, const Node &n, int i, bool trans,
                                const char *part) {
  const Tensor *t = I.constInput(n, i);
  if (trans && t && t->dims().size() == 2) {
    Tensor tt = transpose2D(*t);
    return I.makeConstant(I.opName(n, part), std::move(tt));
  }
  KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, i));
  if (v.dims().size() != 2)
    return I.parseError(n, "operand ", i, " ", v.getType()->toString(), " must be 2-D");
  if (trans)
    v = I.F->createTranspose(I.opName(n, part), v, {1, 0});
  return v;
}

Error convertGemm(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue a, gemmOperand(I, n, 0, I.attrInt(n, "transA", 0), "transA"));
  KILN_ASSIGN_OR_RETURN(NodeValue b, gemmOperand(I, n, 1, I.attrInt(n, "transB", 0), "transB"));
  float alpha = I.attrFloat(n, "alpha", 1.0f), beta = I.attrFloat(n, "beta", 1.0f);
  dim_t m = a.dims()[0], k = a.dims()[1], nn = b.dims()[1];
  if (b.dims()[0] != k)
    return I.parseError(n, "inner dimensions differ: A' is ", dimsToString(a.dims()),
                        ", B' is ", dimsToString(b.dims()));
  Function *F = I.F;
  ElemKind ek = a.getElementType();
  if (alpha != 1.0f)
    a = F->createMul(I.opName(n, "alpha"), a, I.splat(I.opName(n, "alphav"), ek, a.dims(), alpha));
  if (!I.hasInput(n, 2) || beta == 0.0f) {
    I.setOutput(n, 0, F->createMatMul(I.opName(n), a, b));
    return Error::success();
  }
  KILN_ASSIGN_OR_RETURN(Dims cd, I.inputDims(n, 2));
  Dims od;
  if (!broadcastShapes(cd, Dims({m, nn}), od) || od != Dims({m, nn}))
    return I.parseError(n, "C ", dimsToString(cd), " does not broadcast to [", m, ", ", nn, "]");
  bool rowBias = cd.product() == nn && (cd.size() < 2 || cd[0] == 1);
  if (rowBias) {
    // C is one row: the bias of a FullyConnected.
    NodeValue c;
    if (const Tensor *ct = I.constInput(n, 2)) {
      Tensor bt(ct->getElementType(), {nn});
      for (dim_t i = 0; i < nn; i++)
        bt.setFromDouble(i, beta * ct->getAsDouble(ct->size() == 1 ? 0 : i));
      c = I.makeConstant(I.opName(n, "bias"), std::move(bt));
    } else {
      KILN_ASSIGN_OR_RETURN(c, I.input(n, 2));
      c = I.reshape(I.opName(n, "bias"), c, Dims({nn}));
      if (beta != 1.0f)
        c = F->createMul(I.opName(n, "beta"), c, I.splat(I.opName(n, "betav"), ek, c.dims(), beta));
    }
    I.setOutput(n, 0, F->createFullyConnected(I.opName(n), a, b, c));
    return Error::success();
  }
  KILN_ASSIGN_OR_RETURN(NodeValue c, I.input(n, 2));
  if (beta != 1.0f)
    c = F->createMul(I.opName(n, "beta"), c, I.splat(I.opName(n, "betav"), ek, c.dims(), beta));
  NodeValue y = F->createMatMul(I.opName(n, "matmul"), a, b);
  I.setOutput(n, 0, F->createAdd(I.opName(n), y, F->createBroadcastTo(I.opName(n, "c"), c, od)));
  return Error::success();
}

Error convertMatMul(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue a, I.input(n, 0));
  KILN_ASSIGN_OR_RETURN(NodeValue b, I.input(n, 1));
  Dims ad = a.dims(), bd = b.dims();
  if (ad.size() == 0 || bd.size() == 0)
    return I.parseError(n, "MatMul operands must have rank >= 1");
  bool aVec = ad.size() == 1, bVec = bd.size() == 1;
  if (aVec)
    ad = Dims({1, ad[0]});
  if (bVec)
    bd = Dims({bd[0], 1});
  size_t ra = ad.size(), rb = bd.size();
  dim_t N = ad[ra - 2], K = ad[ra - 1], M = bd[rb - 1];
  if (bd[rb - 2] != K)
    return I.parseError(n, "inner dimensions differ: ", a.getType()->toString(), " x ",
                        b.getType()->toString());
  std::vector<dim_t> ab(ad.begin(), ad.end() - 2), bb(bd.begin(), bd.end() - 2);
  Dims batch;
  if (!broadcastShapes(Dims(ab), Dims(bb), batch))
    return I.parseError(n, "batch dimensions of ", a.getType()->toString(), " and ",
                        b.getType()->toString(), " do not broadcast");
  std::vector<dim_t> outv(batch.begin(), batch.end());
  if (!aVec)
    outv.push_back(N);
  if (!bVec)
    outv.push_back(M);
  KILN_ASSIGN_OR_RETURN(Dims outDims, I.toDims(n, outv));
  Function *F = I.F;
  a = I.reshape(I.opName(n, "lhs"), a, ad);
  b = I.reshape(I.opName(n, "rhs"), b, bd);
  NodeValue y;
  if (rb == 2) {
    // [..., N, K] x [K, M]: one matrix product over all rows.
    dim_t rows = ad.product() / K;
    NodeValue a2 = I.reshape(I.opName(n, "rows"), a, Dims({rows, K}));
    y = F->createMatMul(I.opName(n), a2, b);
  } else {
    dim_t bt = batch.product();
    std::vector<dim_t> at = batch.vec(), btv = batch.vec();
    at.push_back(N), at.push_back(K);
    btv.push_back(K), btv.push_back(M);
    KILN_ASSIGN_OR_RETURN(Dims atd, I.toDims(n, at));
    KILN_ASSIGN_OR_RETURN(Dims btd, I.toDims(n, btv));
    a = I.F->createBroadcastTo(I.opName(n, "lhsb"), a, atd);
    b = I.F->createBroadcastTo(I.opName(n, "rhsb"), b, btd);
    a = I.reshape(I.opName(n, "lhs3"), a, Dims({bt, N, K}));
    b = I.reshape(I.opName(n, "rhs3"), b, Dims({bt, K, M}));
    y = F->createBatchMatMul(I.opName(n), a, b);
  }
  I.setOutput(n, 0, I.reshape(I.opName(n, "out"), y, outDims));
  return Error::success();
}

} // namespace

void registerLinalgConverters(ConverterMap &m) {
  m["Gemm"] = convertGemm;
  m["MatMul"] = convertMatMul;
}

} // namespace kiln::onnximport
