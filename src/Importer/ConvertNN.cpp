// Converters of neural-network layers: convolution, pooling, normalizations, Gemm and
// MatMul, Softmax. 1-D convolution and pooling run as 2-D with a height of 1.

#include "ONNXImporter.h"

#include <algorithm>
#include <cmath>

namespace kiln::onnximport {

namespace {

using Node = onnx::NodeProto;

/// Window geometry of a Conv or pooling node, in 2-D form.
struct Window {
  std::vector<dim_t> kernels, strides, dilations, pads; // pads: top, left, bottom, right
  bool is1D = false;
};

/// Reads kernel, strides, dilations, pads and auto_pad for input spatial dims \p in (one or
/// two of them); \p ceil adds end padding so that floor division yields ceil_mode sizes.
Expected<Window> readWindow(Importer &I, const Node &n, const std::vector<dim_t> &in,
                            std::vector<int64_t> kernel, bool ceil, bool *extraPad = nullptr) {
  size_t s = in.size();
  Window w;
  w.is1D = s == 1;
  auto attrOr = [&](const char *name, int64_t def) {
    std::vector<int64_t> v = I.attrInts(n, name);
    if (v.empty())
      v.assign(s, def);
    return v;
  };
  std::vector<int64_t> st = attrOr("strides", 1), dil = attrOr("dilations", 1);
  std::vector<int64_t> pads = I.attrInts(n, "pads");
  if (pads.empty())
    pads.assign(2 * s, 0);
  if (kernel.size() != s || st.size() != s || dil.size() != s || pads.size() != 2 * s)
    return I.parseError(n, "kernel_shape, strides, dilations and pads do not match the ",
                        s, " spatial dimensions of the input");
  for (size_t i = 0; i < s; i++)
    if (kernel[i] <= 0 || st[i] <= 0 || dil[i] <= 0 || pads[i] < 0 || pads[i + s] < 0)
      return I.parseError(n, "kernel, strides and dilations must be positive, pads not "
                          "negative");
  std::string autoPad = I.attrString(n, "auto_pad", "NOTSET");
  for (size_t i = 0; i < s; i++) {
    int64_t x = int64_t(in[i]), k = (kernel[i] - 1) * dil[i] + 1;
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      int64_t out = (x + st[i] - 1) / st[i];
      int64_t total = std::max<int64_t>((out - 1) * st[i] + k - x, 0);
      int64_t small = total / 2, big = total - small;
      pads[i] = autoPad == "SAME_UPPER" ? small : big;
      pads[i + s] = autoPad == "SAME_UPPER" ? big : small;
    } else if (autoPad == "VALID") {
      pads[i] = pads[i + s] = 0;
    } else if (autoPad != "NOTSET") {
      return I.parseError(n, "unknown auto_pad '", autoPad, "'");
    }
    if (x + pads[i] + pads[i + s] < k)
      return I.parseError(n, "the window (", k, ") is larger than the padded input (",
                          x + pads[i] + pads[i + s], ")");
    if (ceil) {
      int64_t span = x + pads[i] + pads[i + s] - k;
      int64_t out = (span + st[i] - 1) / st[i] + 1;
      if ((out - 1) * st[i] >= x + pads[i])
        out--; // The last window must start inside the input or its begin padding.
      int64_t extra = (out - 1) * st[i] + k - (x + pads[i] + pads[i + s]);
      if (extra > 0) {
        pads[i + s] += extra;
        if (extraPad)
          *extraPad = true;
      }
    }
  }
  if (w.is1D) {
    w.kernels = {1, dim_t(kernel[0])};
    w.strides = {1, dim_t(st[0])};
    w.dilations = {1, dim_t(dil[0])};
    w.pads = {0, dim_t(pads[0]), 0, dim_t(pads[1])};
  } else {
    w.kernels = {dim_t(kernel[0]), dim_t(kernel[1])};
    w.strides = {dim_t(st[0]), dim_t(st[1])};
    w.dilations = {dim_t(dil[0]), dim_t(dil[1])};
    w.pads = {dim_t(pads[0]), dim_t(pads[1]), dim_t(pads[2]), dim_t(pads[3])};
  }
  return w;
}

/// The 4-D input of a 1-D or 2-D window op ([N,C,L] becomes [N,C,1,L]).
Expected<NodeValue> input4D(Importer &I, const Node &n, int i) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, i));
  const Dims &d = x.dims();
  if (d.size() == 3)
    return I.reshape(I.opName(n, "to2d"), x, Dims({d[0], d[1], 1, d[2]}));
  if (d.size() != 4)
    return I.unsupported(n, "only 1-D and 2-D windows are supported; the input is ",
                         x.getType()->toString());
  return x;
}

std::vector<dim_t> spatial(const Dims &d) {
  std::vector<dim_t> v;
  for (size_t i = 2; i < d.size(); i++)
    v.push_back(d[i]);
  return v;
}

/// Binds the output of a window op, reshaping back to 3-D for 1-D windows.
void bindWindowResult(Importer &I, const Node &n, NodeValue y, bool is1D) {
  if (is1D) {
    const Dims &d = y.dims();
    y = I.reshape(I.opName(n, "to1d"), y, Dims({d[0], d[1], d[3]}));
  }
  I.setOutput(n, 0, y);
}

Error convertConv(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(Dims xd, I.inputDims(n, 0));
  KILN_ASSIGN_OR_RETURN(Dims wd, I.inputDims(n, 1));
  if (xd.size() != 3 && xd.size() != 4)
    return I.unsupported(n, "only 1-D and 2-D convolutions are supported; the input is ",
                         dimsToString(xd));
  if (wd.size() != xd.size())
    return I.parseError(n, "the filter ", dimsToString(wd), " does not match the input ",
                        dimsToString(xd));
  std::vector<int64_t> kernel = I.attrInts(n, "kernel_shape");
  if (kernel.empty())
    for (size_t i = 2; i < wd.size(); i++)
      kernel.push_back(int64_t(wd[i]));
  KILN_ASSIGN_OR_RETURN(Window w, readWindow(I, n, spatial(xd), kernel, false));
  int64_t group = I.attrInt(n, "group", 1);
  if (group <= 0 || xd[1] % dim_t(group) || wd[0] % dim_t(group) || wd[1] * dim_t(group) != xd[1])
    return I.parseError(n, "group ", group, " does not fit input ", dimsToString(xd),
                        " and filter ", dimsToString(wd));
  KILN_ASSIGN_OR_RETURN(NodeValue x, input4D(I, n, 0));
  KILN_ASSIGN_OR_RETURN(NodeValue f, I.input(n, 1));
  if (w.is1D)
    f = I.reshape(I.opName(n, "filter2d"), f, Dims({wd[0], wd[1], 1, wd[2]}));
  NodeValue b;
  if (I.hasInput(n, 2)) {
    KILN_ASSIGN_OR_RETURN(b, I.input(n, 2));
  } else {
    b = I.makeConstant(I.opName(n, "bias"), Tensor(f.getElementType(), {wd[0]}));
  }
  NodeValue y = I.F->createConvolution(I.opName(n), x, f, b, w.kernels, w.strides, w.pads,
                                       w.dilations, dim_t(group));
  bindWindowResult(I, n, y, w.is1D);
  return Error::success();
}

Error convertPool(Importer &I, const Node &n) {
  bool isMax = n.op_type() == "MaxPool";
  KILN_ASSIGN_OR_RETURN(Dims xd, I.inputDims(n, 0));
  if (xd.size() != 3 && xd.size() != 4)
    return I.unsupported(n, "only 1-D and 2-D pooling is supported; the input is ",
                         dimsToString(xd));
  if (isMax && I.isOutputUsed(n, 1))
    return I.unsupported(n, "the Indices output of MaxPool is not supported");
  bool ceil = I.attrInt(n, "ceil_mode", 0) != 0, extra = false;
  KILN_ASSIGN_OR_RETURN(Window w, readWindow(I, n, spatial(xd), I.attrInts(n, "kernel_shape"),
                                             ceil, &extra));
  for (dim_t d : w.dilations)
    if (d != 1)
      return I.unsupported(n, "pooling with dilations is not supported");
  KILN_ASSIGN_OR_RETURN(NodeValue x, input4D(I, n, 0));
  NodeValue y;
  if (isMax) {
    y = I.F->createMaxPool(I.opName(n), x, w.kernels, w.strides, w.pads);
  } else {
    bool countPads = I.attrInt(n, "count_include_pad", 0) != 0;
    if (countPads && extra)
      return I.unsupported(n, "ceil_mode with count_include_pad is not supported");
    y = I.F->createAvgPool(I.opName(n), x, w.kernels, w.strides, w.pads, countPads);
  }
  bindWindowResult(I, n, y, w.is1D);
  return Error::success();
}

Error convertGlobalPool(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  const Dims &d = x.dims();
  if (d.size() < 3)
    return I.parseError(n, "the input ", x.getType()->toString(), " has no spatial dims");
  if (n.op_type() == "GlobalAveragePool" && d.size() == 4) {
    I.setOutput(n, 0, I.F->createAdaptiveAvgPool(I.opName(n), x, {1, 1}));
    return Error::success();
  }
  std::vector<int64_t> axes;
  for (size_t i = 2; i < d.size(); i++)
    axes.push_back(int64_t(i));
  if (n.op_type() == "GlobalAveragePool")
    I.setOutput(n, 0, I.F->createReduceMean(I.opName(n), x, axes, true));
  else
    I.setOutput(n, 0, I.F->createReduceMax(I.opName(n), x, axes, true));
  return Error::success();
}

Error convertBatchNorm(Importer &I, const Node &n) {
  if (I.attrInt(n, "training_mode", 0) != 0)
    return I.unsupported(n, "training mode is not supported");
  if (I.opset < 9 && I.attrInt(n, "spatial", 1) != 1)
    return I.unsupported(n, "spatial = 0 is not supported");
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  if (x.dims().size() < 2)
    return I.parseError(n, "the input ", x.getType()->toString(), " has no channel dim");
  std::vector<NodeValue> p;
  for (int i = 1; i <= 4; i++) {
    KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, i));
    if (v.dims().size() != 1 || v.dims()[0] != x.dims()[1])
      return I.parseError(n, "parameter ", i, " ", v.getType()->toString(),
                          " does not match the ", x.dims()[1], " channels of ",
                          x.getType()->toString());
    p.push_back(v);
  }
  float eps = I.attrFloat(n, "epsilon", 1e-5f);
  I.setOutput(n, 0, I.F->createBatchNormalization(I.opName(n), x, p[0], p[1], p[2], p[3], eps, 1));
  return Error::success();
}

/// Bias-free parameter of LayerNormalization / InstanceNormalization shaped \p d.
Expected<NodeValue> paramOrSplat(Importer &I, const Node &n, int i, ElemKind k, const Dims &d,
                                 double v) {
  if (!I.hasInput(n, i))
    return I.splat(I.opName(n, "default"), k, d, v);
  KILN_ASSIGN_OR_RETURN(NodeValue p, I.input(n, i));
  Dims out;
  if (!broadcastShapes(p.dims(), d, out) || out != d)
    return I.parseError(n, "parameter ", p.getType()->toString(), " does not broadcast to ",
                        dimsToString(d));
  return I.F->createBroadcastTo(I.opName(n, "param"), p, d);
}

Error convertLayerNorm(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  const Dims &d = x.dims();
  KILN_ASSIGN_OR_RETURN(int64_t axis, I.normAxis(n, I.attrInt(n, "axis", -1), int64_t(d.size())));
  if (I.isOutputUsed(n, 1) || I.isOutputUsed(n, 2)) {
    // Mean and 1/sqrt(var + eps) over the normalized dims, kept as size 1.
    Function *F = I.F;
    std::vector<int64_t> axes;
    for (size_t i = axis; i < d.size(); i++)
      axes.push_back(int64_t(i));
    NodeValue mean = F->createReduceMean(I.opName(n, "mean"), x, axes, true);
    NodeValue xc = F->createSub(I.opName(n, "center"), x,
                                F->createBroadcastTo(I.opName(n, "meanb"), mean, d));
    NodeValue var = F->createReduceMean(I.opName(n, "var"),
                                        F->createMul(I.opName(n, "sq"), xc, xc), axes, true);
    NodeValue eps = I.splat(I.opName(n, "eps"), x.getElementType(), var.dims(),
                            I.attrFloat(n, "epsilon", 1e-5f));
    I.setOutput(n, 1, mean);
    I.setOutput(n, 2, F->createRsqrt(I.opName(n, "invstd"),
                                     F->createAdd(I.opName(n, "vareps"), var, eps)));
  }
  std::vector<dim_t> nd;
  for (size_t i = axis; i < d.size(); i++)
    nd.push_back(d[i]);
  Dims pd(nd);
  KILN_ASSIGN_OR_RETURN(NodeValue scale, paramOrSplat(I, n, 1, x.getElementType(), pd, 1));
  KILN_ASSIGN_OR_RETURN(NodeValue bias, paramOrSplat(I, n, 2, x.getElementType(), pd, 0));
  I.setOutput(n, 0, I.F->createLayerNormalization(I.opName(n), x, scale, bias, axis,
                                                  I.attrFloat(n, "epsilon", 1e-5f)));
  return Error::success();
}

/// InstanceNormalization: per-sample, per-channel normalization over the spatial dims.
Error convertInstanceNorm(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  const Dims &d = x.dims();
  if (d.size() < 3)
    return I.parseError(n, "the input ", x.getType()->toString(), " has no spatial dims");
  Function *F = I.F;
  std::vector<int64_t> axes;
  std::vector<dim_t> cd(d.size(), 1);
  cd[1] = d[1];
  for (size_t i = 2; i < d.size(); i++)
    axes.push_back(int64_t(i));
  NodeValue mean = F->createBroadcastTo(I.opName(n, "meanb"),
                                        F->createReduceMean(I.opName(n, "mean"), x, axes, true), d);
  NodeValue xc = F->createSub(I.opName(n, "center"), x, mean);
  NodeValue var = F->createReduceMean(I.opName(n, "var"), F->createMul(I.opName(n, "sq"), xc, xc),
                                      axes, true);
  NodeValue eps = I.splat(I.opName(n, "eps"), x.getElementType(), var.dims(),
                          I.attrFloat(n, "epsilon", 1e-5f));
  NodeValue inv = F->createRsqrt(I.opName(n, "rstd"), F->createAdd(I.opName(n, "vareps"), var, eps));
  NodeValue y = F->createMul(I.opName(n, "norm"), xc, F->createBroadcastTo(I.opName(n, "rstdb"), inv, d));
  KILN_ASSIGN_OR_RETURN(NodeValue s, I.input(n, 1));
  KILN_ASSIGN_OR_RETURN(NodeValue b, I.input(n, 2));
  if (s.dims().product() != d[1] || b.dims().product() != d[1])
    return I.parseError(n, "scale and B must have ", d[1], " elements");
  s = F->createBroadcastTo(I.opName(n, "scaleb"), I.reshape(I.opName(n, "scale"), s, Dims(cd)), d);
  b = F->createBroadcastTo(I.opName(n, "biasb"), I.reshape(I.opName(n, "bias"), b, Dims(cd)), d);
  I.setOutput(n, 0, F->createAdd(I.opName(n), F->createMul(I.opName(n, "scaled"), y, s), b));
  return Error::success();
}

/// Operand \p i of a Gemm, transposed when \p trans; a constant is transposed in the
/// importer (the original is never materialised).
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

/// Softmax and LogSoftmax: before opset 13 the input is coerced to 2-D at axis.
Error convertSoftmax(Importer &I, const Node &n) {
  bool isLog = n.op_type() == "LogSoftmax";
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  Dims d = x.dims();
  int64_t r = int64_t(d.size());
  if (r == 0)
    return I.parseError(n, "the input is a scalar");
  int64_t def = I.opset < 13 ? 1 : -1;
  KILN_ASSIGN_OR_RETURN(int64_t axis, I.normAxis(n, I.attrInt(n, "axis", def), r));
  Function *F = I.F;
  auto make = [&](NodeValue v, int64_t ax) -> NodeValue {
    return isLog ? NodeValue(F->createLogSoftMax(I.opName(n), v, ax))
                 : NodeValue(F->createSoftMax(I.opName(n), v, ax));
  };
  if (I.opset >= 13 || axis == r - 1) {
    I.setOutput(n, 0, make(x, axis));
    return Error::success();
  }
  dim_t outer = 1, inner = 1;
  for (int64_t i = 0; i < r; i++)
    (i < axis ? outer : inner) *= d[i];
  NodeValue y = make(I.reshape(I.opName(n, "2d"), x, Dims({outer, inner})), 1);
  I.setOutput(n, 0, I.reshape(I.opName(n, "nd"), y, d));
  return Error::success();
}

/// DepthToSpace / SpaceToDepth as reshape, transpose, reshape.
Error convertDepthSpace(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  const Dims &d = x.dims();
  int64_t bs = I.attrInt(n, "blocksize", 0);
  if (d.size() != 4 || bs <= 0)
    return I.parseError(n, "needs a 4-D input and a positive blocksize");
  dim_t b = dim_t(bs), N = d[0], C = d[1], H = d[2], W = d[3];
  Function *F = I.F;
  NodeValue y;
  if (n.op_type() == "DepthToSpace") {
    if (C % (b * b))
      return I.parseError(n, "channels ", C, " are not divisible by blocksize^2");
    bool crd = I.attrString(n, "mode", "DCR") == "CRD";
    dim_t c = C / (b * b);
    y = crd ? I.reshape(I.opName(n, "split"), x, Dims({N, c, b, b, H, W}))
            : I.reshape(I.opName(n, "split"), x, Dims({N, b, b, c, H, W}));
    y = crd ? F->createTranspose(I.opName(n, "perm"), y, {0, 1, 4, 2, 5, 3})
            : F->createTranspose(I.opName(n, "perm"), y, {0, 3, 4, 1, 5, 2});
    y = I.reshape(I.opName(n), y, Dims({N, c, H * b, W * b}));
  } else {
    if (H % b || W % b)
      return I.parseError(n, "spatial dims are not divisible by blocksize");
    y = I.reshape(I.opName(n, "split"), x, Dims({N, C, H / b, b, W / b, b}));
    y = F->createTranspose(I.opName(n, "perm"), y, {0, 3, 5, 1, 2, 4});
    y = I.reshape(I.opName(n), y, Dims({N, C * b * b, H / b, W / b}));
  }
  I.setOutput(n, 0, y);
  return Error::success();
}

/// Resize and Upsample in nearest mode with integer scales: every element repeats s times
/// along each scaled dimension (Reshape, Broadcast, Reshape). Other modes are unsupported.
Error convertResize(Importer &I, const Node &n) {
  bool isUpsample = n.op_type() == "Upsample";
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  const Dims &d = x.dims();
  std::string mode = I.attrString(n, "mode", "nearest");
  if (mode != "nearest")
    return I.unsupported(n, "mode '", mode, "' is not supported (only nearest)");
  std::string ctm = I.attrString(n, "coordinate_transformation_mode",
                                 isUpsample || I.opset < 11 ? "asymmetric" : "half_pixel");
  std::string nm = I.attrString(n, "nearest_mode", isUpsample || I.opset < 11
                                                      ? "floor" : "round_prefer_floor");
  // With an integer scale s, output j*s..j*s+s-1 maps to source j under these modes.
  bool ok = ((ctm == "half_pixel" || ctm == "pytorch_half_pixel") &&
             (nm == "round_prefer_floor" || nm == "round_prefer_ceil")) ||
            (ctm == "asymmetric" && (nm == "floor" || nm == "round_prefer_floor"));
  if (!ok)
    return I.unsupported(n, "coordinate_transformation_mode '", ctm, "' with nearest_mode '",
                         nm, "' is not supported");
  std::vector<double> scales;
  if (isUpsample && I.opset < 9) {
    const onnx::AttributeProto *a = I.attr(n, "scales");
    if (a)
      scales.assign(a->floats().begin(), a->floats().end());
  } else {
    int si = isUpsample || I.opset < 11 ? 1 : 2;
    const Tensor *s = I.hasInput(n, si) ? I.constInput(n, si) : nullptr;
    if (I.hasInput(n, si) && !s)
      return I.unsupported(n, "the scales input is computed at run time; kiln needs it "
                           "constant at load time");
    if (s && s->size())
      scales = tensorToDoubles(*s);
    if (scales.empty() && !isUpsample && I.hasInput(n, 3)) {
      KILN_ASSIGN_OR_RETURN(const Tensor *sz, I.requireConstInput(n, 3, "sizes"));
      std::vector<int64_t> sizes = tensorToInts(*sz);
      if (sizes.size() != d.size())
        return I.parseError(n, "sizes has ", sizes.size(), " entries for rank ", d.size());
      for (size_t i = 0; i < d.size(); i++)
        scales.push_back(double(sizes[i]) / double(d[i]));
    }
  }
  if (scales.size() != d.size())
    return I.parseError(n, "scales has ", scales.size(), " entries for rank ", d.size());
  std::vector<dim_t> expanded, target, out;
  for (size_t i = 0; i < d.size(); i++) {
    double s = scales[i];
    if (s < 1 || s != std::floor(s))
      return I.unsupported(n, "scale ", s, " is not supported (only integer upscaling)");
    expanded.push_back(d[i]);
    target.push_back(d[i]);
    out.push_back(d[i] * dim_t(s));
    if (s > 1) {
      expanded.push_back(1);
      target.push_back(dim_t(s));
    }
  }
  KILN_ASSIGN_OR_RETURN(Dims ed, I.toDims(n, expanded));
  KILN_ASSIGN_OR_RETURN(Dims td, I.toDims(n, target));
  KILN_ASSIGN_OR_RETURN(Dims od, I.toDims(n, out));
  NodeValue y = I.reshape(I.opName(n, "expand"), x, ed);
  y = I.F->createBroadcastTo(I.opName(n, "repeat"), y, td);
  I.setOutput(n, 0, I.reshape(I.opName(n), y, od));
  return Error::success();
}

} // namespace

void registerNNConverters(ConverterMap &m) {
  m["Resize"] = convertResize;
  m["Upsample"] = convertResize;
  m["Conv"] = convertConv;
  m["MaxPool"] = convertPool;
  m["AveragePool"] = convertPool;
  m["GlobalAveragePool"] = convertGlobalPool;
  m["GlobalMaxPool"] = convertGlobalPool;
  m["BatchNormalization"] = convertBatchNorm;
  m["LayerNormalization"] = convertLayerNorm;
  m["InstanceNormalization"] = convertInstanceNorm;
  m["Gemm"] = convertGemm;
  m["MatMul"] = convertMatMul;
  m["Softmax"] = convertSoftmax;
  m["LogSoftmax"] = convertSoftmax;
  m["DepthToSpace"] = convertDepthSpace;
  m["SpaceToDepth"] = convertDepthSpace;
}

} // namespace kiln::onnximport
