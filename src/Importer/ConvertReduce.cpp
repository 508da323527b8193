// Converters of reductions (ReduceSum/Mean/Max/Min/Prod and the composed L1, L2, LogSum,
// LogSumExp, SumSquare), ArgMax/ArgMin and TopK.

#include "ONNXImporter.h"

#include <cmath>

namespace kiln::onnximport {

namespace {

using Node = onnx::NodeProto;

enum class Red { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

/// Evaluates a reduction of a small constant.
Tensor foldReduce(Red r, const Tensor &t, const std::vector<bool> &reduced, bool keep) {
  const Dims &d = t.dims();
  std::vector<dim_t> kd, od;
  for (size_t i = 0; i < d.size(); i++) {
    kd.push_back(reduced[i] ? 1 : d[i]);
    if (!reduced[i] || keep)
      od.push_back(kd.back());
  }
  Dims kdims(kd);
  size_t n = kdims.product();
  bool ints = !isFloatKind(t.getElementType());
  std::vector<double> acc(n, 0);
  std::vector<int64_t> iacc(n, 0);
  std::vector<size_t> cnt(n, 0);
  std::vector<int64_t> iv = ints ? tensorToInts(t) : std::vector<int64_t>();
  std::vector<double> dv = tensorToDoubles(t);
  Dims ks = Type(ElemKind::Float, kdims).strides();
  for (size_t i = 0; i < t.size(); i++) {
    std::vector<dim_t> idx = unflatten(i, d);
    size_t o = 0;
    for (size_t k = 0; k < d.size(); k++)
      o += (reduced[k] ? 0 : idx[k]) * ks[k];
    double x = dv[i];
    int64_t xi = ints ? iv[i] : 0;
    bool first = cnt[o]++ == 0;
    switch (r) {
    case Red::Max: acc[o] = first ? x : std::max(acc[o], x); iacc[o] = first ? xi : std::max(iacc[o], xi); break;
    case Red::Min: acc[o] = first ? x : std::min(acc[o], x); iacc[o] = first ? xi : std::min(iacc[o], xi); break;
    case Red::Prod: acc[o] = first ? x : acc[o] * x; iacc[o] = first ? xi : iacc[o] * xi; break;
    default: acc[o] += x; iacc[o] += xi; break;
    }
  }
  if (ints)
    return tensorFromInts(t.getElementType(), Dims(od), iacc);
  if (r == Red::Mean)
    for (size_t o = 0; o < n; o++)
      acc[o] /= double(std::max<size_t>(cnt[o], 1));
  return tensorFromDoubles(t.getElementType(), Dims(od), acc);
}

Converter reduce(Red r) {
  return [r](Importer &I, const Node &n) -> Error {
    KILN_ASSIGN_OR_RETURN(Dims d, I.inputDims(n, 0));
    std::vector<int64_t> axes;
    if (n.op_type() == "ReduceSum" && I.opset >= 13) {
      if (I.hasInput(n, 1)) {
        KILN_ASSIGN_OR_RETURN(const Tensor *t, I.requireConstInput(n, 1, "axes"));
        axes = tensorToInts(*t);
      }
    } else {
      axes = I.attrInts(n, "axes");
    }
    bool keep = I.attrInt(n, "keepdims", 1) != 0;
    if (axes.empty() && I.attrInt(n, "noop_with_empty_axes", 0)) {
      KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
      I.setOutput(n, 0, x);
      return Error::success();
    }
    std::vector<bool> reduced(d.size(), axes.empty());
    std::vector<int64_t> norm;
    for (int64_t a : axes) {
      KILN_ASSIGN_OR_RETURN(int64_t ax, I.normAxis(n, a, int64_t(d.size())));
      if (reduced[ax])
        return I.parseError(n, "axis ", a, " is repeated");
      reduced[ax] = true;
    }
    for (size_t i = 0; i < d.size(); i++)
      if (reduced[i])
        norm.push_back(int64_t(i));
    const Tensor *c = I.constInput(n, 0);
    if (c && c->size() <= kMaxFoldElements &&
        (r == Red::Sum || r == Red::Mean || r == Red::Max || r == Red::Min || r == Red::Prod)) {
      I.setOutputConst(n, 0, foldReduce(r, *c, reduced, keep));
      return Error::success();
    }
    KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
    Function *F = I.F;
    std::string nm = I.opName(n);
    NodeValue y;
    switch (r) {
    case Red::Sum: y = F->createReduceSum(nm, x, norm, keep); break;
    case Red::Mean: y = F->createReduceMean(nm, x, norm, keep); break;
    case Red::Max: y = F->createReduceMax(nm, x, norm, keep); break;
    case Red::Min: y = F->createReduceMin(nm, x, norm, keep); break;
    case Red::Prod: y = F->createReduceProd(nm, x, norm, keep); break;
    case Red::L1:
      y = F->createReduceSum(nm, F->createAbs(I.opName(n, "abs"), x), norm, keep);
      break;
    case Red::SumSquare:
    case Red::L2:
      y = F->createReduceSum(I.opName(n, "sumsq"), F->createMul(I.opName(n, "sq"), x, x), norm,
                             keep);
      if (r == Red::L2)
        y = F->createSqrt(nm, y);
      break;
    case Red::LogSum:
      y = F->createLog(nm, F->createReduceSum(I.opName(n, "sum"), x, norm, keep));
      break;
    case Red::LogSumExp: {
      // log(sum(exp(x - max))) + max, stable for large inputs.
      NodeValue m = F->createReduceMax(I.opName(n, "max"), x, norm, true);
      NodeValue e = F->createExp(I.opName(n, "exp"),
                                 F->createSub(I.opName(n, "shift"), x,
                                              F->createBroadcastTo(I.opName(n, "maxb"), m, d)));
      NodeValue s = F->createLog(I.opName(n, "log"),
                                 F->createReduceSum(I.opName(n, "sum"), e, norm, true));
      y = F->createAdd(I.opName(n, "lse"), s, m);
      if (!keep) {
        std::vector<dim_t> od;
        for (size_t i = 0; i < d.size(); i++)
          if (!reduced[i])
            od.push_back(d[i]);
        y = I.reshape(nm, y, Dims(od));
      }
      break;
    }
    }
    I.setOutput(n, 0, y);
    return Error::success();
  };
}

Error convertArgMinMax(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        I.normAxis(n, I.attrInt(n, "axis", 0), int64_t(x.dims().size())));
  bool keep = I.attrInt(n, "keepdims", 1) != 0;
  bool last = I.attrInt(n, "select_last_index", 0) != 0;
  int64_t len = int64_t(x.dims()[axis]);
  if (last) {
    // The last extreme index is len-1 minus the first one of the reversed input.
    std::vector<int64_t> rev(len);
    for (int64_t i = 0; i < len; i++)
      rev[i] = len - 1 - i;
    NodeValue ic = I.makeConstant(I.opName(n, "reverse"),
                                  tensorFromInts(ElemKind::Int64I, {dim_t(len)}, rev));
    x = I.F->createGather(I.opName(n, "reversed"), x, ic, axis);
  }
  NodeValue y = n.op_type() == "ArgMax" ? NodeValue(I.F->createArgMax(I.opName(n), x, axis, keep))
                                        : NodeValue(I.F->createArgMin(I.opName(n), x, axis, keep));
  if (last)
    y = I.F->createSub(I.opName(n, "last"),
                       I.splat(I.opName(n, "lenm1"), ElemKind::Int64I, y.dims(), double(len - 1)),
                       y);
  I.setOutput(n, 0, y);
  return Error::success();
}

Error convertTopK(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  int64_t r = int64_t(x.dims().size());
  KILN_ASSIGN_OR_RETURN(int64_t axis, I.normAxis(n, I.attrInt(n, "axis", -1), r));
  if (axis != r - 1)
    return I.unsupported(n, "TopK along a dimension other than the last");
  int64_t k;
  if (I.opset < 10) {
    k = I.attrInt(n, "k", -1);
  } else {
    KILN_ASSIGN_OR_RETURN(const Tensor *t, I.requireConstInput(n, 1, "K"));
    if (t->size() != 1)
      return I.parseError(n, "K must hold one value");
    k = tensorToInts(*t)[0];
  }
  if (k <= 0 || k > int64_t(x.dims()[axis]))
    return I.parseError(n, "K = ", k, " is out of range for ", x.getType()->toString());
  bool largest = I.attrInt(n, "largest", 1) != 0;
  if (!largest && !isFloatKind(x.getElementType()))
    return I.unsupported(n, "largest = 0 on integer tensors");
  NodeValue in = largest ? x : NodeValue(I.F->createNeg(I.opName(n, "neg"), x));
  TopKNode *t = I.F->createTopK(I.opName(n), in, dim_t(k));
  NodeValue vals = t->getNthResult(0);
  if (!largest)
    vals = I.F->createNeg(I.opName(n, "values"), vals);
  I.setOutput(n, 0, vals);
  I.setOutput(n, 1, t->getNthResult(1));
  return Error::success();
}

Error convertCumSum(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor *at, I.requireConstInput(n, 1, "axis"));
  if (at->size() != 1)
    return I.parseError(n, "axis must hold one value");
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        I.normAxis(n, tensorToInts(*at)[0], int64_t(x.dims().size())));
  I.setOutput(n, 0, I.F->createCumSum(I.opName(n), x, axis, I.attrInt(n, "exclusive", 0) != 0,
                                      I.attrInt(n, "reverse", 0) != 0));
  return Error::success();
}

/// Hardmax: 1 at the first largest element along the axis, 0 elsewhere (ArgMax compared
/// with 0..len-1); before opset 13 over the input coerced to 2-D at the axis.
Error convertHardmax(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  Dims d = x.dims();
  int64_t r = int64_t(d.size());
  if (r == 0)
    return I.parseError(n, "the input is a scalar");
  KILN_ASSIGN_OR_RETURN(int64_t axis, I.normAxis(n, I.attrInt(n, "axis", I.opset < 13 ? 1 : -1), r));
  Function *F = I.F;
  NodeValue v = x;
  if (I.opset < 13) {
    dim_t outer = 1, inner = 1;
    for (int64_t i = 0; i < r; i++)
      (i < axis ? outer : inner) *= d[i];
    v = I.reshape(I.opName(n, "2d"), x, Dims({outer, inner}));
    axis = 1;
  }
  const Dims vd = v.dims();
  NodeValue am = F->createArgMax(I.opName(n, "argmax"), v, axis, true);
  std::vector<dim_t> iotaDims(vd.size(), 1);
  iotaDims[axis] = vd[axis];
  std::vector<int64_t> iv(vd[axis]);
  for (size_t i = 0; i < iv.size(); i++)
    iv[i] = int64_t(i);
  NodeValue iota = I.makeConstant(I.opName(n, "iota"),
                                  tensorFromInts(ElemKind::Int64I, Dims(iotaDims), iv));
  NodeValue hit = F->createCmpEQ(I.opName(n, "hit"), F->createBroadcastTo(I.opName(n, "amb"), am, vd),
                                 F->createBroadcastTo(I.opName(n, "iotab"), iota, vd));
  NodeValue y = F->createConvertTo(I.opName(n, "y"), I.M->uniqueType(x.getElementType(), vd), hit);
  I.setOutput(n, 0, I.reshape(I.opName(n), y, d));
  return Error::success();
}

} // namespace

void registerReduceConverters(ConverterMap &m) {
  m["CumSum"] = convertCumSum;
  m["Hardmax"] = convertHardmax;
  m["ReduceSum"] = reduce(Red::Sum);
  m["ReduceMean"] = reduce(Red::Mean);
  m["ReduceMax"] = reduce(Red::Max);
  m["ReduceMin"] = reduce(Red::Min);
  m["ReduceProd"] = reduce(Red::Prod);
  m["ReduceL1"] = reduce(Red::L1);
  m["ReduceL2"] = reduce(Red::L2);
  m["ReduceLogSum"] = reduce(Red::LogSum);
  m["ReduceLogSumExp"] = reduce(Red::LogSumExp);
  m["ReduceSumSquare"] = reduce(Red::SumSquare);
  m["ArgMax"] = convertArgMinMax;
  m["ArgMin"] = convertArgMinMax;
  m["TopK"] = convertTopK;
  m.requireInputs("TopK", 2, 10);
}

} // namespace kiln::onnximport
