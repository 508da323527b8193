// Normalization:
//   BatchNormalization(x, s, b, m, v, eps, ch) -> x * A + B along ch, with
//       A = s / sqrt(v + eps), B = b - m * A        (vectors; constant-fold evaluates them)
//   LayerNormalization(x, s, b, axis, eps)      -> with R = ReduceSum over axis..rank-1
//       (kept dims) and n the number of elements reduced:
//       mean = R(x) / n, d = x - mean, var = R(d * d) / n,
//       y = d * Rsqrt(var + eps) * s + b        (mean, rstd, s, b broadcast to x)
//   LogSoftMax(x, axis) -> d = x - ReduceMax(x), y = d - Log(ReduceSum(Exp(d)))

#include "LowerUtil.h"

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
