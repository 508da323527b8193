// Type rules of the nodes that lowering and fusion produce (see defineLoweringTargets in
// src/ClassGen/NodeTable.cpp): InsertTensor, FusedConvolution, FusedFullyConnected.

#include "TypeRulesUtil.h"

namespace kiln::typerules {

namespace {

Error checkActivation(const std::string &act) {
  if (act == "Relu" || act == "Clip" || act == "LeakyRelu" || act == "Sigmoid" || act == "Tanh")
    return Error::success();
  return invalid("attribute Activation = \"", act,
                 "\" must be one of Relu, Clip, LeakyRelu, Sigmoid, Tanh");
}

/// The fused nodes take float operands of one kind (quantized fusion would also need a
/// requantisation rule).
Error checkFloatOperands(const Node &n) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, 0));
  if (!isFloatKind(in.kind))
    return invalid("operand ", n.getInputName(0), " ", in.toString(),
                   " must have a float element kind");
  for (unsigned i = 1; i < n.getNumInputs(); i++) {
    KILN_ASSIGN_OR_RETURN(Type t, operandType(n, i));
    KILN_RETURN_IF_ERR(checkSameKind(n, i, t, 0, in));
  }
  return Error::success();
}

} // namespace

Expected<std::vector<Type>> inferInsertTensor(const InsertTensorNode &n) {
  KILN_ASSIGN_OR_RETURN(Type big, operandType(n, InsertTensorNode::BigIdx));
  KILN_ASSIGN_OR_RETURN(Type small, operandType(n, InsertTensorNode::SmallIdx));
  KILN_RETURN_IF_ERR(
      checkSameKind(n, InsertTensorNode::SmallIdx, small, InsertTensorNode::BigIdx, big));
  KILN_RETURN_IF_ERR(checkRank(n, InsertTensorNode::SmallIdx, small, big.rank()));
  const std::vector<dim_t> &offsets = n.getOffsets();
  KILN_RETURN_IF_ERR(checkAttrLength("Offsets", offsets, big.rank()));
  for (size_t i = 0; i < big.rank(); i++)
    if (offsets[i] + small.dims[i] > big.dims[i])
      return invalid("operand Small ", small.toString(), " at Offsets = ", listToString(offsets),
                     " does not fit in Big ", big.toString(), " (dimension ", i, ")");
  return std::vector<Type>{big};
}

Expected<std::vector<Type>> inferFusedConvolution(const FusedConvolutionNode &n) {
  KILN_RETURN_IF_ERR(checkFloatOperands(n));
  KILN_RETURN_IF_ERR(checkActivation(n.getActivation()));
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, FusedConvolutionNode::InputIdx));
  KILN_ASSIGN_OR_RETURN(Type filter, operandType(n, FusedConvolutionNode::FilterIdx));
  KILN_ASSIGN_OR_RETURN(Type bias, operandType(n, FusedConvolutionNode::BiasIdx));
  KILN_RETURN_IF_ERR(checkRank(n, FusedConvolutionNode::InputIdx, in, 4, "[N,C,H,W]"));
  KILN_RETURN_IF_ERR(checkRank(n, FusedConvolutionNode::FilterIdx, filter, 4, "[O,C/Group,kH,kW]"));
  KILN_RETURN_IF_ERR(checkRank(n, FusedConvolutionNode::BiasIdx, bias, 1, "[O]"));
  const std::vector<dim_t> &kernels = n.getKernels();
  const std::vector<dim_t> &strides = n.getStrides();
  const std::vector<dim_t> &pads = n.getPads();
  const std::vector<dim_t> &dilations = n.getDilations();
  KILN_RETURN_IF_ERR(checkWindowAttrs(kernels, strides, pads, &dilations));
  dim_t group = n.getGroup();
  dim_t o = filter.dims[0];
  if (group == 0 || in.dims[1] % group || o % group || filter.dims[1] != in.dims[1] / group ||
      filter.dims[2] != kernels[0] || filter.dims[3] != kernels[1] || bias.dims[0] != o)
    return invalid("operands Input ", in.toString(), ", Filter ", filter.toString(), ", Bias ",
                   bias.toString(), " do not form a convolution with Group = ", group,
                   " and Kernels = ", listToString(kernels));
  KILN_ASSIGN_OR_RETURN(dim_t oh, windowOutputSize(in, 2, kernels[0], strides[0], pads[0], pads[2],
                                                   dilations[0], "height"));
  KILN_ASSIGN_OR_RETURN(dim_t ow, windowOutputSize(in, 3, kernels[1], strides[1], pads[1], pads[3],
                                                   dilations[1], "width"));
  return std::vector<Type>{Type::withDims(in, {in.dims[0], o, oh, ow})};
}

Expected<std::vector<Type>> inferFusedFullyConnected(const FusedFullyConnectedNode &n) {
  KILN_RETURN_IF_ERR(checkFloatOperands(n));
  KILN_RETURN_IF_ERR(checkActivation(n.getActivation()));
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, FusedFullyConnectedNode::InputIdx));
  KILN_ASSIGN_OR_RETURN(Type w, operandType(n, FusedFullyConnectedNode::WeightsIdx));
  KILN_ASSIGN_OR_RETURN(Type bias, operandType(n, FusedFullyConnectedNode::BiasIdx));
  KILN_RETURN_IF_ERR(checkRank(n, FusedFullyConnectedNode::InputIdx, in, 2, "[N,K]"));
  KILN_RETURN_IF_ERR(checkRank(n, FusedFullyConnectedNode::WeightsIdx, w, 2, "[K,M]"));
  KILN_RETURN_IF_ERR(checkRank(n, FusedFullyConnectedNode::BiasIdx, bias, 1, "[M]"));
  if (w.dims[0] != in.dims[1] || bias.dims[0] != w.dims[1])
    return invalid("operands Input ", in.toString(), ", Weights ", w.toString(), ", Bias ",
                   bias.toString(), " do not form a fully connected layer");
  return std::vector<Type>{Type::withDims(in, {in.dims[0], w.dims[1]})};
}

} // namespace kiln::typerules
