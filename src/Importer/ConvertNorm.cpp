// Converters of the normalization family: BatchNormalization, LayerNormalization,
// InstanceNormalization, Softmax and LogSoftmax.

#include "ONNXImporter.h"

#include <algorithm>
#include <cmath>

namespace kiln::onnximport {

namespace {

using Node = onnx::NodeProto;

Error convertBatchNormTraining(Importer &I, const Node &n);

Error convertBatchNorm(Importer &I, const Node &n) {
  if (I.attrInt(n, "training_mode", 0) != 0)
    return convertBatchNormTraining(I, n);
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

/// NegativeLogLikelihoodLoss of log-probabilities \p x [N, C, d...] and int targets
/// \p t [N, d...]: loss = -x[n, t, d...] * w[t] (w = 1 without weights; 0 where t is
/// ignore_index), reduced by none, sum or mean (sum / sum of the weights used).
Expected<NodeValue> buildNLL(Importer &I, const Node &n, NodeValue x, NodeValue t,
                             int weightInput) {
  Function *F = I.F;
  const Dims xd = x.dims(), td = t.dims();
  if (xd.size() < 2 || td.size() != xd.size() - 1 || td[0] != xd[0])
    return I.parseError(n, "input ", x.getType()->toString(), " and target ",
                        t.getType()->toString(), " do not match");
  for (size_t i = 1; i < td.size(); i++)
    if (td[i] != xd[i + 1])
      return I.parseError(n, "input ", x.getType()->toString(), " and target ",
                          t.getType()->toString(), " do not match");
  if (!isIndexKind(t.getElementType()))
    return I.parseError(n, "the target must be int32 or int64");
  std::string red = I.attrString(n, "reduction", "mean");
  if (red != "none" && red != "sum" && red != "mean")
    return I.parseError(n, "unknown reduction '", red, "'");
  ElemKind fk = x.getElementType();
  const onnx::AttributeProto *iia = I.attr(n, "ignore_index");
  NodeValue ignored;
  if (iia) {
    ignored = F->createCmpEQ(I.opName(n, "ignored"), t,
                             I.splat(I.opName(n, "ii"), t.getElementType(), td, double(iia->i())));
    t = F->createSelect(I.opName(n, "target0"), ignored,
                        I.splat(I.opName(n, "zero"), t.getElementType(), td, 0), t);
  }
  std::vector<dim_t> t1 = td.vec();
  t1.insert(t1.begin() + 1, 1);
  NodeValue g = F->createGatherElements(I.opName(n, "pick"), x,
                                        I.reshape(I.opName(n, "target1"), t, Dims(t1)), 1);
  g = I.reshape(I.opName(n, "picked"), g, td);
  NodeValue w;
  if (weightInput >= 0 && I.hasInput(n, weightInput)) {
    KILN_ASSIGN_OR_RETURN(NodeValue wt, I.input(n, weightInput));
    if (wt.dims().size() != 1 || wt.dims()[0] != xd[1] || wt.getElementType() != fk)
      return I.parseError(n, "weight ", wt.getType()->toString(), " must be [", xd[1], "] of ",
                          "the input's type");
    w = F->createGather(I.opName(n, "weight"), wt, t, 0);
  }
  if (ignored) {
    if (!w)
      w = I.splat(I.opName(n, "one"), fk, td, 1);
    w = F->createSelect(I.opName(n, "weightii"), ignored, I.splat(I.opName(n, "zw"), fk, td, 0), w);
  }
  NodeValue loss = F->createNeg(I.opName(n, "neg"), w ? NodeValue(F->createMul(I.opName(n, "wx"), g, w)) : g);
  if (red == "none")
    return loss;
  std::vector<int64_t> all;
  for (size_t i = 0; i < td.size(); i++)
    all.push_back(int64_t(i));
  if (red == "sum")
    return NodeValue(F->createReduceSum(I.opName(n, "sum"), loss, all, false));
  if (!w)
    return NodeValue(F->createReduceMean(I.opName(n, "mean"), loss, all, false));
  return NodeValue(F->createDiv(I.opName(n, "mean"),
                                F->createReduceSum(I.opName(n, "sum"), loss, all, false),
                                F->createReduceSum(I.opName(n, "wsum"), w, all, false)));
}

Error convertNLL(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  KILN_ASSIGN_OR_RETURN(NodeValue t, I.input(n, 1));
  KILN_ASSIGN_OR_RETURN(NodeValue y, buildNLL(I, n, x, t, 2));
  I.setOutput(n, 0, y);
  return Error::success();
}

/// SoftmaxCrossEntropyLoss: LogSoftmax over the classes (output 1), then the NLL.
Error convertSCE(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  KILN_ASSIGN_OR_RETURN(NodeValue t, I.input(n, 1));
  if (x.dims().size() < 2)
    return I.parseError(n, "scores ", x.getType()->toString(), " have no class dim");
  NodeValue lp = I.F->createLogSoftMax(I.opName(n, "logprob"), x, 1);
  KILN_ASSIGN_OR_RETURN(NodeValue y, buildNLL(I, n, lp, t, 2));
  I.setOutput(n, 0, y);
  I.setOutput(n, 1, lp);
  return Error::success();
}

/// MeanVarianceNormalization as ONNX's function body: (x - E[x]) / (sqrt(E[x^2] - E[x]^2)
/// + 1e-9) over axes (default 0, 2, 3).
Error convertMVN(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  const Dims d = x.dims();
  std::vector<int64_t> axes = I.attrInts(n, "axes");
  if (!I.attr(n, "axes"))
    axes = {0, 2, 3};
  std::vector<int64_t> norm;
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int64_t ax, I.normAxis(n, a, int64_t(d.size())));
    norm.push_back(ax);
  }
  Function *F = I.F;
  NodeValue mean = F->createReduceMean(I.opName(n, "mean"), x, norm, true);
  NodeValue ex2 = F->createReduceMean(I.opName(n, "meansq"), F->createMul(I.opName(n, "sq"), x, x),
                                      norm, true);
  NodeValue var = F->createSub(I.opName(n, "var"), ex2, F->createMul(I.opName(n, "m2"), mean, mean));
  NodeValue sd = F->createAdd(I.opName(n, "sdeps"), F->createSqrt(I.opName(n, "sd"), var),
                              I.splat(I.opName(n, "eps"), x.getElementType(), var.dims(), 1e-9));
  NodeValue xc = F->createSub(I.opName(n, "center"), x,
                              F->createBroadcastTo(I.opName(n, "meanb"), mean, d));
  I.setOutput(n, 0, F->createDiv(I.opName(n), xc, F->createBroadcastTo(I.opName(n, "sdb"), sd, d)));
  return Error::success();
}

/// LRN across channels: x / (bias + alpha / size * sum of x^2 over the channel window)^beta,
/// the window sum a sum of shifted slices of the zero-padded squares.
Error convertLRN(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  const Dims d = x.dims();
  if (d.size() < 3)
    return I.parseError(n, "the input ", x.getType()->toString(), " has no spatial dims");
  int64_t size = I.attrInt(n, "size", 0);
  if (size <= 0)
    return I.parseError(n, "size must be positive");
  double alpha = I.attrFloat(n, "alpha", 1e-4f), beta = I.attrFloat(n, "beta", 0.75f),
         bias = I.attrFloat(n, "bias", 1.0f);
  Function *F = I.F;
  ElemKind k = x.getElementType();
  size_t r = d.size();
  dim_t before = dim_t((size - 1) / 2), after = dim_t(size - 1) - before;
  std::vector<dim_t> pads(2 * r, 0);
  pads[1] = before;
  pads[r + 1] = after;
  NodeValue sq = F->createPad(I.opName(n, "pad"), F->createMul(I.opName(n, "sq"), x, x), pads, 0);
  NodeValue sum;
  for (dim_t j = 0; j < dim_t(size); j++) {
    std::vector<dim_t> b(r, 0), e = sq.dims().vec();
    b[1] = j;
    e[1] = j + d[1];
    NodeValue s = F->createSlice(I.opName(n, "win"), sq, b, e);
    sum = sum ? NodeValue(F->createAdd(I.opName(n, "sum"), sum, s)) : s;
  }
  NodeValue base = F->createAdd(
      I.opName(n, "base"),
      F->createMul(I.opName(n, "scale"), sum, I.splat(I.opName(n, "alpha"), k, d, alpha / double(size))),
      I.splat(I.opName(n, "bias"), k, d, bias));
  NodeValue den = F->createPow(I.opName(n, "pow"), base, I.splat(I.opName(n, "beta"), k, d, beta));
  I.setOutput(n, 0, F->createDiv(I.opName(n), x, den));
  return Error::success();
}

/// BatchNormalization in training mode: the batch's mean and (biased) variance over every
/// axis but the channels normalise; running_mean / running_var outputs are
/// input * momentum + batch * (1 - momentum).
Error convertBatchNormTraining(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  const Dims d = x.dims();
  if (d.size() < 2)
    return I.parseError(n, "the input ", x.getType()->toString(), " has no channel dim");
  Function *F = I.F;
  ElemKind k = x.getElementType();
  std::vector<int64_t> axes;
  std::vector<dim_t> cd(d.size(), 1);
  cd[1] = d[1];
  for (size_t i = 0; i < d.size(); i++)
    if (i != 1)
      axes.push_back(int64_t(i));
  NodeValue mean = F->createReduceMean(I.opName(n, "mean"), x, axes, true);
  NodeValue xc = F->createSub(I.opName(n, "center"), x, F->createBroadcastTo(I.opName(n, "mb"), mean, d));
  NodeValue var = F->createReduceMean(I.opName(n, "var"), F->createMul(I.opName(n, "sq"), xc, xc), axes, true);
  float eps = I.attrFloat(n, "epsilon", 1e-5f);
  double mom = I.attrFloat(n, "momentum", 0.9f);
  NodeValue inv = F->createRsqrt(I.opName(n, "rstd"),
                                 F->createAdd(I.opName(n, "veps"), var, I.splat(I.opName(n, "eps"), k, var.dims(), eps)));
  std::vector<NodeValue> p;
  for (int i = 1; i <= 4; i++) {
    KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, i));
    if (v.dims().product() != d[1])
      return I.parseError(n, "parameter ", i, " ", v.getType()->toString(), " does not match the ",
                          d[1], " channels");
    p.push_back(I.reshape(I.opName(n, "param"), v, Dims(cd)));
  }
  NodeValue y = F->createMul(I.opName(n, "norm"), xc, F->createBroadcastTo(I.opName(n, "rb"), inv, d));
  y = F->createMul(I.opName(n, "scaled"), y, F->createBroadcastTo(I.opName(n, "sb"), p[0], d));
  y = F->createAdd(I.opName(n), y, F->createBroadcastTo(I.opName(n, "bb"), p[1], d));
  I.setOutput(n, 0, y);
  auto running = [&](NodeValue old, NodeValue batch, const char *part) {
    NodeValue a = F->createMul(I.opName(n, part), old, I.splat(I.opName(n, "mom"), k, Dims(cd), mom));
    NodeValue b = F->createMul(I.opName(n, part), batch, I.splat(I.opName(n, "mom1"), k, Dims(cd), 1 - mom));
    return I.reshape(I.opName(n, part), F->createAdd(I.opName(n, part), a, b), Dims({d[1]}));
  };
  if (I.hasOutput(n, 1))
    I.setOutput(n, 1, running(p[2], mean, "running_mean"));
  if (I.hasOutput(n, 2))
    I.setOutput(n, 2, running(p[3], var, "running_var"));
  return Error::success();
}

} // namespace

void registerNormConverters(ConverterMap &m) {
  m["NegativeLogLikelihoodLoss"] = convertNLL;
  m["SoftmaxCrossEntropyLoss"] = convertSCE;
  m["MeanVarianceNormalization"] = convertMVN;
  m["LRN"] = convertLRN;
  m["BatchNormalization"] = convertBatchNorm;
  m["LayerNormalization"] = convertLayerNorm;
  m["InstanceNormalization"] = convertInstanceNorm;
  m.requireInputs("BatchNormalization", 5);
  m.requireInputs("LayerNormalization", 2);
  m.requireInputs("InstanceNormalization", 3);
  m["Softmax"] = convertSoftmax;
  m["LogSoftmax"] = convertSoftmax;
}

} // namespace kiln::onnximport
