// The normalization family at graph level: its type rules, then what it lowers to (the
// lowering functions the `lower` pass calls, src/Lower/Lower.cpp).
//
// Type rules: BatchNormalization, LayerNormalization,
// SoftMax and LogSoftMax.

#include "Lowering.h"
#include "TypeRulesUtil.h"

namespace kiln::typerules {

namespace {

/// Normalization parameters share the input's kind; a quantized input may take
/// float ones.
Error checkParamKind(const Node &n, unsigned i, const Type &p, const Type &in) {
  if (p.kind == in.kind || (isQuantized(in.kind) && isFloatKind(p.kind)))
    return Error::success();
  return invalid("operand ", n.getInputName(i), " ", p.toString(),
                 " must have the element kind of Input ", in.toString());
}

} // namespace

// ------------------------------------------------------------------
// normalization

Expected<std::vector<Type>>
inferBatchNormalization(const BatchNormalizationNode &n) {
  KILN_ASSIGN_OR_RETURN(Type in,
                        operandType(n, BatchNormalizationNode::InputIdx));
  dim_t axis = n.getChannelIdx();
  KILN_RETURN_IF_ERR(
      checkAxis(n, "ChannelIdx", axis, BatchNormalizationNode::InputIdx, in));
  dim_t c = in.dims[axis];
  for (unsigned i = BatchNormalizationNode::ScaleIdx;
       i <= BatchNormalizationNode::VarIdx; i++) {
    KILN_ASSIGN_OR_RETURN(Type p, operandType(n, i));
    if (p.rank() != 1 || p.dims[0] != c)
      return invalid("operand ", n.getInputName(i), " ", p.toString(),
                     " must be a vector of ", c, " entries, the size of dim ",
                     axis, " (ChannelIdx) of Input ", in.toString());
    KILN_RETURN_IF_ERR(checkParamKind(n, i, p, in));
  }
  return std::vector<Type>{in};
}

Expected<std::vector<Type>>
inferLayerNormalization(const LayerNormalizationNode &n) {
  KILN_ASSIGN_OR_RETURN(Type in,
                        operandType(n, LayerNormalizationNode::InputIdx));
  dim_t axis = n.getAxis();
  KILN_RETURN_IF_ERR(
      checkAxis(n, "Axis", axis, LayerNormalizationNode::InputIdx, in));
  Dims expected;
  for (size_t i = axis; i < in.rank(); i++)
    expected.push_back(in.dims[i]);
  for (unsigned i : {unsigned(LayerNormalizationNode::ScaleIdx),
                     unsigned(LayerNormalizationNode::BiasIdx)}) {
    KILN_ASSIGN_OR_RETURN(Type p, operandType(n, i));
    if (p.dims != expected)
      return invalid("operand ", n.getInputName(i), " ", p.toString(),
                     " must have dims [", dimsToString(expected),
                     "], those of Input ", in.toString(), " from Axis ", axis,
                     " on");
    KILN_RETURN_IF_ERR(checkParamKind(n, i, p, in));
  }
  return std::vector<Type>{in};
}

Expected<std::vector<Type>> inferSoftMaxLike(const Node &n, dim_t axis) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, 0));
  KILN_RETURN_IF_ERR(checkAxis(n, "Axis", axis, 0, in));
  return std::vector<Type>{in};
}

Expected<std::vector<Type>> inferSoftMax(const SoftMaxNode &n) {
  return inferSoftMaxLike(n, n.getAxis());
}

Expected<std::vector<Type>> inferLogSoftMax(const LogSoftMaxNode &n) {
  return inferSoftMaxLike(n, n.getAxis());
}

} // namespace kiln::typerules

// ------------------------------------------------------------------ lowering
// Normalization:
//   BatchNormalization(x, s, b, m, v, eps, ch) -> x * A + B along ch, with
//       A = s / sqrt(v + eps), B = b - m * A        (vectors; constant-fold evaluates them)
//   LayerNormalization(x, s, b, axis, eps)      -> with R = ReduceSum over axis..rank-1
//       (kept dims) and n the number of elements reduced:
//       mean = R(x) / n, d = x - mean, var = R(d * d) / n,
//       y = d * Rsqrt(var + eps) * s + b        (mean, rstd, s, b broadcast to x)
//   LogSoftMax(x, axis) -> d = x - ReduceMax(x), y = d - Log(ReduceSum(Exp(d)))

namespace kiln::lower {

NodeValue lowerBatchNormalization(Function *f, BatchNormalizationNode *n) {
  if (!isFloatResult(n) || n->getInput().getElementType() != n->getScale().getElementType())
    return NodeValue();
  Builder b(f, n);
  NodeValue var = n->getVar();
  NodeValue denom =
      f->createSqrt(b.name("std"),
                    f->createAdd(b.name("var_eps"), var, b.splatLike(var, n->getEpsilon(), "eps")));
  NodeValue a = f->createDiv(b.name("a"), n->getScale(), denom);
  NodeValue shift =
      f->createSub(b.name("b"), n->getBias(), f->createMul(b.name("mean_a"), n->getMean(), a));
  const Dims &dims = n->getInput().dims();
  size_t ch = n->getChannelIdx();
  NodeValue scaled =
      f->createMul(b.name("scale"), n->getInput(), b.alongAxis(a, dims, ch, "a_bcast"));
  return f->createAdd(b.name("shift"), scaled, b.alongAxis(shift, dims, ch, "b_bcast"));
}

NodeValue lowerLayerNormalization(Function *f, LayerNormalizationNode *n) {
  if (!isFloatResult(n))
    return NodeValue();
  Builder b(f, n);
  NodeValue x = n->getInput();
  const Dims &dims = x.dims();
  std::vector<int64_t> axes;
  double count = 1;
  for (size_t a = n->getAxis(); a < dims.size(); a++) {
    axes.push_back(int64_t(a));
    count *= double(dims[a]);
  }
  NodeValue sum = f->createReduceSum(b.name("sum"), x, axes, true);
  NodeValue mean = f->createDiv(b.name("mean"), sum, b.splatLike(sum, count, "count"));
  NodeValue d = f->createSub(b.name("centered"), x, b.broadcast(mean, dims, "mean_bcast"));
  NodeValue sq = f->createMul(b.name("square"), d, d);
  NodeValue sqSum = f->createReduceSum(b.name("square_sum"), sq, axes, true);
  NodeValue var = f->createDiv(b.name("var"), sqSum, b.splatLike(sqSum, count, "count2"));
  NodeValue rstd =
      f->createRsqrt(b.name("rstd"), f->createAdd(b.name("var_eps"), var,
                                                  b.splatLike(var, n->getEpsilon(), "eps")));
  NodeValue norm = f->createMul(b.name("normalized"), d, b.broadcast(rstd, dims, "rstd_bcast"));
  NodeValue scaled =
      f->createMul(b.name("scaled"), norm, b.broadcast(n->getScale(), dims, "scale_bcast"));
  return f->createAdd(b.name("shifted"), scaled, b.broadcast(n->getBias(), dims, "bias_bcast"));
}

NodeValue lowerLogSoftMax(Function *f, LogSoftMaxNode *n) {
  if (!isFloatResult(n))
    return NodeValue();
  Builder b(f, n);
  NodeValue x = n->getInput();
  const Dims &dims = x.dims();
  std::vector<int64_t> axis{int64_t(n->getAxis())};
  NodeValue max = f->createReduceMax(b.name("max"), x, axis, true);
  NodeValue d = f->createSub(b.name("shifted"), x, b.broadcast(max, dims, "max_bcast"));
  NodeValue sum = f->createReduceSum(b.name("sum"), f->createExp(b.name("exp"), d), axis, true);
  NodeValue lse = f->createLog(b.name("log"), sum);
  return f->createSub(b.name("result"), d, b.broadcast(lse, dims, "log_bcast"));
}

} // namespace kiln::lower
