// The convolution family at graph level: its type rules, then what it lowers to (the
// lowering functions the `lower` pass calls, src/Lower/Lower.cpp).
//
// Type rules: convolution (and FusedConvolution), pooling, and
// the window helpers they share.

#include "Lowering.h"
#include "TypeRulesUtil.h"

namespace kiln::typerules {

namespace {

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

// FusedConvolution keeps Convolution's operands at the same indices.
static_assert(unsigned(FusedConvolutionNode::InputIdx) == unsigned(ConvolutionNode::InputIdx) &&
                  unsigned(FusedConvolutionNode::FilterIdx) ==
                      unsigned(ConvolutionNode::FilterIdx) &&
                  unsigned(FusedConvolutionNode::BiasIdx) == unsigned(ConvolutionNode::BiasIdx),
              "FusedConvolution must keep Convolution's operands");

Expected<std::vector<Type>> inferFusedConvolution(const FusedConvolutionNode &n) {
  KILN_RETURN_IF_ERR(checkActivation(n.getActivation()));
  KILN_RETURN_IF_ERR(checkFusedOperands(n, n.getActivation(), n.getAlpha(), n.getBeta()));
  return checkResidual(n, FusedConvolutionNode::BiasIdx + 1,
                       inferConv2D(n, n.getKernels(), n.getStrides(), n.getPads(),
                                   n.getDilations(), n.getGroup()));
}

Expected<std::vector<Type>> inferRoiAlign(const RoiAlignNode &n) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, RoiAlignNode::InputIdx));
  KILN_ASSIGN_OR_RETURN(Type rois, operandType(n, RoiAlignNode::RoisIdx));
  KILN_ASSIGN_OR_RETURN(Type bi, operandType(n, RoiAlignNode::BatchIndicesIdx));
  KILN_RETURN_IF_ERR(checkRank(n, RoiAlignNode::InputIdx, in, 4, "[N,C,H,W]"));
  KILN_RETURN_IF_ERR(checkRank(n, RoiAlignNode::RoisIdx, rois, 2, "[R,4]"));
  KILN_RETURN_IF_ERR(checkSameKind(n, RoiAlignNode::RoisIdx, rois, RoiAlignNode::InputIdx, in));
  if (rois.dims[1] != 4 || bi.rank() != 1 || bi.dims[0] != rois.dims[0] || !isIndexKind(bi.kind))
    return invalid("operands Rois ", rois.toString(), " and BatchIndices ", bi.toString(),
                   " must be [R,4] and an index vector [R]");
  if (n.getMode() != "avg" && n.getMode() != "max")
    return invalid("attribute Mode = '", n.getMode(), "' must be avg or max");
  if (n.getOutputHeight() == 0 || n.getOutputWidth() == 0)
    return invalid("attributes OutputHeight and OutputWidth must be positive");
  return std::vector<Type>{Type::withDims(
      in, Dims({rois.dims[0], in.dims[1], n.getOutputHeight(), n.getOutputWidth()}))};
}

} // namespace kiln::typerules

// ------------------------------------------------------------------ lowering
// Convolution with Group > 1 -> one Convolution per group on channel Slices of the input,
// filter and bias, joined by a Concat on the channel axis. Only for backends that ask
// (depthwise kernels usually beat Group separate convolutions).

namespace kiln::lower {

NodeValue lowerGroupedConvolution(Function *f, ConvolutionNode *n) {
  dim_t groups = n->getGroup();
  if (groups <= 1)
    return NodeValue();
  Builder b(f, n);
  const Dims &in = n->getInput().dims();
  const Dims &w = n->getFilter().dims();
  const Type &out = *n->getResultType();
  dim_t cg = in[1] / groups, og = w[0] / groups;
  TypeRef partTy =
      f->getParent()->uniqueType(Type::withDims(out, {out.dims[0], og, out.dims[2], out.dims[3]}));
  std::vector<NodeValue> parts;
  for (dim_t g = 0; g < groups; g++) {
    std::string s = std::to_string(g);
    NodeValue x = f->createSlice(b.name("input") + s, n->getInput(), {0, g * cg, 0, 0},
                                 {in[0], (g + 1) * cg, in[2], in[3]});
    NodeValue fw = f->createSlice(b.name("filter") + s, n->getFilter(), {g * og, 0, 0, 0},
                                  {(g + 1) * og, w[1], w[2], w[3]});
    NodeValue fb = f->createSlice(b.name("bias") + s, n->getBias(), {g * og}, {(g + 1) * og});
    parts.push_back(f->createConvolution(b.name("group") + s, partTy, x, fw, fb, n->getKernels(),
                                         n->getStrides(), n->getPads(), n->getDilations(), 1));
  }
  return f->createConcat(b.name("concat"), parts, 1);
}

} // namespace kiln::lower
