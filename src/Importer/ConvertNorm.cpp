// Converters of the normalization family: BatchNormalization, LayerNormalization,
// InstanceNormalization, Softmax and LogSoftmax.

#include "ONNXImporter.h"

#include <algorithm>
#include <cmath>

namespace kiln::onnximport {

namespace {

using Node = onnx::NodeProto;

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

} // namespace

void registerNormConverters(ConverterMap &m) {
  m["BatchNormalization"] = convertBatchNorm;
  m["LayerNormalization"] = convertLayerNorm;
  m["InstanceNormalization"] = convertInstanceNorm;
  m["Softmax"] = convertSoftmax;
  m["LogSoftmax"] = convertSoftmax;
}

} // namespace kiln::onnximport
