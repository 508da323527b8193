// Type rules of convolution, pooling, linear algebra and normalization
// operators.

#include "TypeRulesUtil.h"

namespace kiln::typerules {

namespace {

/// Bias operands share the input's kind, except that quantized operators take
/// an Int32Q bias.
Error checkBiasKind(const Node &n, unsigned biasIdx, const Type &bias,
                    unsigned inIdx, const Type &in) {
  if (bias.kind == in.kind ||
      (isQuantized(in.kind) && bias.kind == ElemKind::Int32Q))
    return Error::success();
  return invalid("operand ", n.getInputName(biasIdx), " ", bias.toString(),
                 " must have the element kind of ", n.getInputName(inIdx), " ",
                 in.toString(), isQuantized(in.kind) ? " or i32q" : "");
}

/// Normalization parameters share the input's kind; a quantized input may take
/// float ones.
Error checkParamKind(const Node &n, unsigned i, const Type &p, const Type &in) {
  if (p.kind == in.kind || (isQuantized(in.kind) && isFloatKind(p.kind)))
    return Error::success();
  return invalid("operand ", n.getInputName(i), " ", p.toString(),
                 " must have the element kind of Input ", in.toString());
}

/// Checks the window attributes and pads < kernel (so every window has an
/// in-bounds element), then returns [N, C, oH, oW] for a pooling operator.
Expected<Type> inferPool(const Node &n, const std::vector<dim_t> &kernels,
                         const std::vector<dim_t> &strides,
                         const std::vector<dim_t> &pads) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, 0));
  KILN_RETURN_IF_ERR(checkRank(n, 0, in, 4, "[N,C,H,W]"));
  KILN_RETURN_IF_ERR(checkWindowAttrs(kernels, strides, pads, nullptr));
  for (unsigned i = 0; i < 4; i++)
    if (pads[i] >= kernels[i % 2])
      return invalid("attribute Pads = ", listToString(pads),
                     " must be smaller than Kernels = ", listToString(kernels),
                     " (pad ", i, " is ", pads[i], ")");
  KILN_ASSIGN_OR_RETURN(dim_t oh,
                        windowOutputSize(in, 2, kernels[0], strides[0], pads[0],
                                         pads[2], 1, "height"));
  KILN_ASSIGN_OR_RETURN(dim_t ow,
                        windowOutputSize(in, 3, kernels[1], strides[1], pads[1],
                                         pads[3], 1, "width"));
  return Type::withDims(in, {in.dims[0], in.dims[1], oh, ow});
}

} // namespace

// ------------------------------------------------------------------ window
// helpers

Error checkWindowAttrs(const std::vector<dim_t> &kernels,
                       const std::vector<dim_t> &strides,
                       const std::vector<dim_t> &pads,
                       const std::vector<dim_t> *dilations) {
  KILN_RETURN_IF_ERR(checkAttrLength("Kernels", kernels, 2));
  KILN_RETURN_IF_ERR(checkAttrLength("Strides", strides, 2));
  KILN_RETURN_IF_ERR(checkAttrLength("Pads", pads, 4));
  KILN_RETURN_IF_ERR(checkAttrNonZero("Kernels", kernels));
  KILN_RETURN_IF_ERR(checkAttrNonZero("Strides", strides));
  if (dilations) {
    KILN_RETURN_IF_ERR(checkAttrLength("Dilations", *dilations, 2));
    KILN_RETURN_IF_ERR(checkAttrNonZero("Dilations", *dilations));
  }
  return Error::success();
}

Expected<dim_t> windowOutputSize(const Type &in, unsigned dimIdx, dim_t kernel,
                                 dim_t stride, dim_t padBegin, dim_t padEnd,
                                 dim_t dilation, const char *dimName) {
  dim_t padded = in.dims[dimIdx] + padBegin + padEnd;
  dim_t effective = dilation * (kernel - 1) + 1;
  if (padded < effective)
    return invalid("the window ", dimName, " ", effective, " (kernel ", kernel,
                   ", dilation ", dilation,
                   ") is larger than the padded input ", dimName, " ", padded,
                   " (Input ", in.toString(), ", pads ", padBegin, " + ",
                   padEnd, "): the output would be empty");
  return (padded - effective) / stride + 1;
}

// ------------------------------------------------------------------
// convolution, pooling

Expected<std::vector<Type>> inferConvolution(const ConvolutionNode &n) {
  return inferConv2D(n, n.getKernels(), n.getStrides(), n.getPads(), n.getDilations(),
                     n.getGroup());
}

Expected<std::vector<Type>> inferConv2D(const Node &n, const std::vector<dim_t> &kernels,
                                        const std::vector<dim_t> &strides,
                                        const std::vector<dim_t> &pads,
                                        const std::vector<dim_t> &dilations, dim_t group) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, ConvolutionNode::InputIdx));
  KILN_ASSIGN_OR_RETURN(Type filter,
                        operandType(n, ConvolutionNode::FilterIdx));
  KILN_ASSIGN_OR_RETURN(Type bias, operandType(n, ConvolutionNode::BiasIdx));
  KILN_RETURN_IF_ERR(
      checkRank(n, ConvolutionNode::InputIdx, in, 4, "[N,C,H,W]"));
  KILN_RETURN_IF_ERR(
      checkRank(n, ConvolutionNode::FilterIdx, filter, 4, "[O,C/Group,kH,kW]"));
  KILN_RETURN_IF_ERR(checkRank(n, ConvolutionNode::BiasIdx, bias, 1, "[O]"));
  KILN_RETURN_IF_ERR(checkSameKind(n, ConvolutionNode::FilterIdx, filter,
                                   ConvolutionNode::InputIdx, in));
  KILN_RETURN_IF_ERR(checkBiasKind(n, ConvolutionNode::BiasIdx, bias,
                                   ConvolutionNode::InputIdx, in));

  KILN_RETURN_IF_ERR(checkWindowAttrs(kernels, strides, pads, &dilations));

  dim_t c = in.dims[1];
  dim_t o = filter.dims[0];
  if (group == 0)
    return invalid("attribute Group must be positive, not 0");
  if (c % group != 0)
    return invalid("attribute Group = ", group, " does not divide the ", c,
                   " channels of Input ", in.toString());
  if (o % group != 0)
    return invalid("attribute Group = ", group, " does not divide the ", o,
                   " output channels of Filter ", filter.toString());
  if (filter.dims[1] != c / group)
    return invalid("operand Filter ", filter.toString(), " must have ",
                   c / group, " input channels per group in dim 1 (Input ",
                   in.toString(), ", Group ", group, "), not ", filter.dims[1]);
  if (filter.dims[2] != kernels[0] || filter.dims[3] != kernels[1])
    return invalid("operand Filter ", filter.toString(),
                   " must have spatial dims ", kernels[0], "x", kernels[1],
                   " to match Kernels = ", listToString(kernels));
  if (bias.dims[0] != o)
    return invalid("operand Bias ", bias.toString(), " must have ", o,
                   " entries, one per output channel of Filter ",
                   filter.toString());

  KILN_ASSIGN_OR_RETURN(dim_t oh,
                        windowOutputSize(in, 2, kernels[0], strides[0], pads[0],
                                         pads[2], dilations[0], "height"));
  KILN_ASSIGN_OR_RETURN(dim_t ow,
                        windowOutputSize(in, 3, kernels[1], strides[1], pads[1],
                                         pads[3], dilations[1], "width"));
  return std::vector<Type>{Type::withDims(in, {in.dims[0], o, oh, ow})};
}

Expected<std::vector<Type>> inferMaxPool(const MaxPoolNode &n) {
  KILN_ASSIGN_OR_RETURN(
      Type out, inferPool(n, n.getKernels(), n.getStrides(), n.getPads()));
  return std::vector<Type>{out};
}

Expected<std::vector<Type>> inferAvgPool(const AvgPoolNode &n) {
  KILN_ASSIGN_OR_RETURN(
      Type out, inferPool(n, n.getKernels(), n.getStrides(), n.getPads()));
  return std::vector<Type>{out};
}

Expected<std::vector<Type>> inferAdaptiveAvgPool(const AdaptiveAvgPoolNode &n) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, AdaptiveAvgPoolNode::InputIdx));
  KILN_RETURN_IF_ERR(
      checkRank(n, AdaptiveAvgPoolNode::InputIdx, in, 4, "[N,C,H,W]"));
  const std::vector<dim_t> &size = n.getOutputSize();
  KILN_RETURN_IF_ERR(checkAttrLength("OutputSize", size, 2));
  KILN_RETURN_IF_ERR(checkAttrNonZero("OutputSize", size));
  return std::vector<Type>{
      Type::withDims(in, {in.dims[0], in.dims[1], size[0], size[1]})};
}

// ------------------------------------------------------------------ linear
// algebra

Expected<std::vector<Type>> inferFullyConnected(const FullyConnectedNode &n) {
  return inferMatrixLayer(n);
}

Expected<std::vector<Type>> inferMatrixLayer(const Node &n) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, FullyConnectedNode::InputIdx));
  KILN_ASSIGN_OR_RETURN(Type w, operandType(n, FullyConnectedNode::WeightsIdx));
  KILN_ASSIGN_OR_RETURN(Type bias, operandType(n, FullyConnectedNode::BiasIdx));
  KILN_RETURN_IF_ERR(
      checkRank(n, FullyConnectedNode::InputIdx, in, 2, "[N,K]"));
  KILN_RETURN_IF_ERR(
      checkRank(n, FullyConnectedNode::WeightsIdx, w, 2, "[K,M]"));
  KILN_RETURN_IF_ERR(checkRank(n, FullyConnectedNode::BiasIdx, bias, 1, "[M]"));
  KILN_RETURN_IF_ERR(checkSameKind(n, FullyConnectedNode::WeightsIdx, w,
                                   FullyConnectedNode::InputIdx, in));
  KILN_RETURN_IF_ERR(checkBiasKind(n, FullyConnectedNode::BiasIdx, bias,
                                   FullyConnectedNode::InputIdx, in));
  if (w.dims[0] != in.dims[1])
    return invalid("operand Weights ", w.toString(), " must have ", in.dims[1],
                   " rows to match the columns of Input ", in.toString());
  if (bias.dims[0] != w.dims[1])
    return invalid("operand Bias ", bias.toString(), " must have ", w.dims[1],
                   " entries to match the columns of Weights ", w.toString());
  return std::vector<Type>{Type::withDims(in, {in.dims[0], w.dims[1]})};
}

Expected<std::vector<Type>> inferMatMul(const MatMulNode &n) {
  KILN_ASSIGN_OR_RETURN(Type lhs, operandType(n, MatMulNode::LHSIdx));
  KILN_ASSIGN_OR_RETURN(Type rhs, operandType(n, MatMulNode::RHSIdx));
  KILN_RETURN_IF_ERR(checkRank(n, MatMulNode::LHSIdx, lhs, 2, "[N,K]"));
  KILN_RETURN_IF_ERR(checkRank(n, MatMulNode::RHSIdx, rhs, 2, "[K,M]"));
  KILN_RETURN_IF_ERR(
      checkSameKind(n, MatMulNode::RHSIdx, rhs, MatMulNode::LHSIdx, lhs));
  if (rhs.dims[0] != lhs.dims[1])
    return invalid("operand RHS ", rhs.toString(), " must have ", lhs.dims[1],
                   " rows to match the columns of LHS ", lhs.toString());
  return std::vector<Type>{Type::withDims(lhs, {lhs.dims[0], rhs.dims[1]})};
}

Expected<std::vector<Type>> inferBatchMatMul(const BatchMatMulNode &n) {
  KILN_ASSIGN_OR_RETURN(Type lhs, operandType(n, BatchMatMulNode::LHSIdx));
  KILN_ASSIGN_OR_RETURN(Type rhs, operandType(n, BatchMatMulNode::RHSIdx));
  KILN_RETURN_IF_ERR(checkRank(n, BatchMatMulNode::LHSIdx, lhs, 3, "[B,N,K]"));
  KILN_RETURN_IF_ERR(checkRank(n, BatchMatMulNode::RHSIdx, rhs, 3, "[B,K,M]"));
  KILN_RETURN_IF_ERR(checkSameKind(n, BatchMatMulNode::RHSIdx, rhs,
                                   BatchMatMulNode::LHSIdx, lhs));
  if (rhs.dims[0] != lhs.dims[0])
    return invalid("operand RHS ", rhs.toString(), " must have the batch size ",
                   lhs.dims[0], " of LHS ", lhs.toString());
  if (rhs.dims[1] != lhs.dims[2])
    return invalid("operand RHS ", rhs.toString(), " must have ", lhs.dims[2],
                   " rows to match the columns of LHS ", lhs.toString());
  return std::vector<Type>{
      Type::withDims(lhs, {lhs.dims[0], lhs.dims[1], rhs.dims[2]})};
}

Expected<std::vector<Type>> inferBatchedAdd(const BatchedAddNode &n) {
  KILN_ASSIGN_OR_RETURN(Type batch, operandType(n, BatchedAddNode::BatchIdx));
  KILN_ASSIGN_OR_RETURN(Type slice, operandType(n, BatchedAddNode::SliceIdx));
  if (batch.rank() == 0)
    return invalid("operand Batch ", batch.toString(),
                   " must have rank 1 or more");
  KILN_RETURN_IF_ERR(checkBiasKind(n, BatchedAddNode::SliceIdx, slice,
                                   BatchedAddNode::BatchIdx, batch));
  Dims expected;
  for (size_t i = 1; i < batch.rank(); i++)
    expected.push_back(batch.dims[i]);
  if (slice.dims != expected)
    return invalid("operand Slice ", slice.toString(), " must have dims [",
                   dimsToString(expected), "], those of Batch ",
                   batch.toString(), " without the first");
  return std::vector<Type>{batch};
}

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
