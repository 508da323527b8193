// Type rules of the normalization family: BatchNormalization, LayerNormalization,
// SoftMax and LogSoftMax.

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
