// The reduction family at graph level: its type rules, then what it lowers to (the
// lowering functions the `lower` pass calls, src/Lower/Lower.cpp).
//
// Type rules: Reduce*, ArgMax, ArgMin and TopK.

#include "Lowering.h"
#include "TypeRulesUtil.h"

namespace kiln::typerules {

Expected<std::vector<Type>>
inferReduce(const Node &n, const std::vector<dim_t> &axes, bool keepDims) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, 0));
  std::vector<bool> reduced(in.rank(), false);
  for (size_t i = 0; i < axes.size(); i++) {
    if (axes[i] >= in.rank())
      return invalid("attribute Axes = ", listToString(axes), ": entry ", i,
                     " is out of range for operand ", n.getInputName(0), " ",
                     in.toString(), " of rank ", in.rank());
    if (reduced[axes[i]])
      return invalid("attribute Axes = ", listToString(axes), " names axis ",
                     axes[i], " twice (operand ", n.getInputName(0), " ",
                     in.toString(), ")");
    reduced[axes[i]] = true;
  }
  Dims out;
  for (size_t i = 0; i < in.rank(); i++) {
    if (!reduced[i])
      out.push_back(in.dims[i]);
    else if (keepDims)
      out.push_back(1);
  }
  return std::vector<Type>{Type::withDims(in, out)};
}

Expected<std::vector<Type>> inferReduceSum(const ReduceSumNode &n) {
  return inferReduce(n, n.getAxes(), n.getKeepDims());
}

Expected<std::vector<Type>> inferReduceMean(const ReduceMeanNode &n) {
  return inferReduce(n, n.getAxes(), n.getKeepDims());
}

Expected<std::vector<Type>> inferReduceMax(const ReduceMaxNode &n) {
  return inferReduce(n, n.getAxes(), n.getKeepDims());
}

Expected<std::vector<Type>> inferReduceMin(const ReduceMinNode &n) {
  return inferReduce(n, n.getAxes(), n.getKeepDims());
}

Expected<std::vector<Type>> inferReduceProd(const ReduceProdNode &n) {
  return inferReduce(n, n.getAxes(), n.getKeepDims());
}

Expected<std::vector<Type>> inferArgReduce(const Node &n, dim_t axis,
                                           bool keepDims) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, 0));
  KILN_RETURN_IF_ERR(checkAxis(n, "Axis", axis, 0, in));
  Dims out;
  for (size_t i = 0; i < in.rank(); i++) {
    if (i != axis)
      out.push_back(in.dims[i]);
    else if (keepDims)
      out.push_back(1);
  }
  return std::vector<Type>{Type(ElemKind::Int64I, out)};
}

Expected<std::vector<Type>> inferArgMax(const ArgMaxNode &n) {
  return inferArgReduce(n, n.getAxis(), n.getKeepDims());
}

Expected<std::vector<Type>> inferArgMin(const ArgMinNode &n) {
  return inferArgReduce(n, n.getAxis(), n.getKeepDims());
}

Expected<std::vector<Type>> inferTopK(const TopKNode &n) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, TopKNode::InputIdx));
  if (in.rank() == 0)
    return invalid("operand Input ", in.toString(),
                   " must have rank 1 or more");
  dim_t last = in.dims[in.rank() - 1];
  if (n.getK() == 0 || n.getK() > last)
    return invalid("attribute K = ", n.getK(),
                   " must be between 1 and the last dim ", last, " of Input ",
                   in.toString());
  Dims out = in.dims;
  out[in.rank() - 1] = n.getK();
  return std::vector<Type>{Type::withDims(in, out),
                           Type(ElemKind::Int64I, out)};
}

} // namespace kiln::typerules

// ------------------------------------------------------------------ lowering
// Reductions: ReduceMean(x, axes) -> Div(ReduceSum(x, axes), Splat(count)), count being
// the number of elements reduced into each result.

namespace kiln::lower {

NodeValue lowerReduceMean(Function *f, ReduceMeanNode *n) {
  if (!isFloatResult(n))
    return NodeValue();
  Builder b(f, n);
  const Dims &in = n->getInput().dims();
  std::vector<int64_t> axes;
  double count = 1;
  for (dim_t a : n->getAxes()) {
    axes.push_back(int64_t(a));
    count *= double(in[a]);
  }
  NodeValue sum = f->createReduceSum(b.name("sum"), n->getInput(), axes, n->getKeepDims());
  return f->createDiv(b.name("mean"), sum, b.splatLike(sum, count, "count"));
}

} // namespace kiln::lower
