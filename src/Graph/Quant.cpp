// The quantization family at graph level (no lowering): the type rules of the per-channel
// quantized operators, ChannelwiseQuantizedConvolution and
// ChannelwiseQuantizedFullyConnected. Both take their result type explicitly (the caller
// chooses its scale and offset); the rule checks it against the shapes.

#include "TypeRulesUtil.h"

#include <cmath>

namespace kiln::typerules {

namespace {

bool isEightBitQuantized(ElemKind k) { return k == ElemKind::Int8Q || k == ElemKind::UInt8Q; }

/// The operands shared by both nodes: the quantized input at \p inIdx, the 8-bit weights at
/// \p wIdx (scale 1, offset 0 in its type: the scales are per channel), then Scales [C]
/// float, Offsets [C] i32 and Bias [C] i32 or float at \p scalesIdx and the two after it,
/// where C is \p channels; and the explicit i8q, u8q or i32 result (i32: an i32 bias).
Error checkChannelwise(const Node &n, unsigned inIdx, unsigned wIdx, unsigned scalesIdx,
                       dim_t channels, const char *what) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, inIdx));
  KILN_ASSIGN_OR_RETURN(Type w, operandType(n, wIdx));
  KILN_ASSIGN_OR_RETURN(Type scales, operandType(n, scalesIdx));
  KILN_ASSIGN_OR_RETURN(Type offsets, operandType(n, scalesIdx + 1));
  KILN_ASSIGN_OR_RETURN(Type bias, operandType(n, scalesIdx + 2));
  KILN_ASSIGN_OR_RETURN(Type out, explicitResultType(n));
  if (!isEightBitQuantized(in.kind))
    return invalid("operand ", n.getInputName(inIdx), " ", in.toString(),
                   " must be i8q or u8q");
  if (!(std::isfinite(in.scale) && in.scale > 0))
    return invalid("operand ", n.getInputName(inIdx), " ", in.toString(),
                   " must have a positive, finite scale");
  if (!isEightBitQuantized(w.kind))
    return invalid("operand ", n.getInputName(wIdx), " ", w.toString(),
                   " must be i8q or u8q");
  if (w.scale != 1.0f || w.offset != 0)
    return invalid("operand ", n.getInputName(wIdx), " ", w.toString(),
                   " must have scale 1 and offset 0: its scales and offsets are ",
                   n.getInputName(scalesIdx), " and ", n.getInputName(scalesIdx + 1));
  const char *names[3] = {"float", "i32", "i32 or float"};
  const Type *vecs[3] = {&scales, &offsets, &bias};
  bool kindOk[3] = {scales.kind == ElemKind::Float, offsets.kind == ElemKind::Int32I,
                    bias.kind == ElemKind::Int32I || bias.kind == ElemKind::Float};
  for (unsigned i = 0; i < 3; i++) {
    const Type &t = *vecs[i];
    if (!kindOk[i] || t.rank() != 1 || t.dims[0] != channels)
      return invalid("operand ", n.getInputName(scalesIdx + i), " ", t.toString(),
                     " must be a ", names[i], " vector of ", channels, " entries, one per ",
                     what, " of ", n.getInputName(wIdx), " ", w.toString());
  }
  // Scales given as constants are checked now; others by the kernels at run time.
  NodeValue sv = n.getNthInput(scalesIdx);
  if (const auto *c = dyn_cast<Constant>(sv.node)) {
    auto h = c->getPayload().getHandle<float>();
    for (size_t i = 0; i < h.size(); i++)
      if (!(std::isfinite(h.raw(i)) && h.raw(i) > 0))
        return invalid("operand ", n.getInputName(scalesIdx), " ", scales.toString(),
                       " has entry ", i, " = ", h.raw(i),
                       ": scales must be positive and finite");
  }
  if (out.kind == ElemKind::Int32I) {
    if (bias.kind != ElemKind::Int32I)
      return invalid("operand ", n.getInputName(scalesIdx + 2), " ", bias.toString(),
                     " must be i32 for the i32 result ", out.toString());
    return Error::success();
  }
  if (!isEightBitQuantized(out.kind))
    return invalid("result type ", out.toString(), " must be i8q, u8q or i32");
  if (!(std::isfinite(out.scale) && out.scale > 0))
    return invalid("result type ", out.toString(), " must have a positive, finite scale");
  return Error::success();
}

} // namespace

Expected<std::vector<Type>>
inferChannelwiseQuantizedConvolution(const ChannelwiseQuantizedConvolutionNode &n) {
  using N = ChannelwiseQuantizedConvolutionNode;
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, N::InputIdx));
  KILN_ASSIGN_OR_RETURN(Type filter, operandType(n, N::FilterIdx));
  KILN_RETURN_IF_ERR(checkRank(n, N::InputIdx, in, 4, "[N,C,H,W]"));
  KILN_RETURN_IF_ERR(checkRank(n, N::FilterIdx, filter, 4, "[O,C/Group,kH,kW]"));
  const std::vector<dim_t> &kernels = n.getKernels(), &strides = n.getStrides(),
                           &pads = n.getPads(), &dilations = n.getDilations();
  KILN_RETURN_IF_ERR(checkWindowAttrs(kernels, strides, pads, &dilations));
  const dim_t c = in.dims[1], o = filter.dims[0], group = n.getGroup();
  if (group == 0)
    return invalid("attribute Group must be positive, not 0");
  if (c % group != 0 || o % group != 0)
    return invalid("attribute Group = ", group, " must divide the ", c,
                   " channels of Input ", in.toString(), " and the ", o,
                   " output channels of Filter ", filter.toString());
  if (filter.dims[1] != c / group)
    return invalid("operand Filter ", filter.toString(), " must have ", c / group,
                   " input channels per group in dim 1 (Input ", in.toString(), ", Group ",
                   group, "), not ", filter.dims[1]);
  if (filter.dims[2] != kernels[0] || filter.dims[3] != kernels[1])
    return invalid("operand Filter ", filter.toString(), " must have spatial dims ",
                   kernels[0], "x", kernels[1], " to match Kernels = ", listToString(kernels));
  KILN_RETURN_IF_ERR(
      checkChannelwise(n, N::InputIdx, N::FilterIdx, N::FilterScalesIdx, o, "output channel"));
  KILN_ASSIGN_OR_RETURN(dim_t oh, windowOutputSize(in, 2, kernels[0], strides[0], pads[0],
                                                   pads[2], dilations[0], "height"));
  KILN_ASSIGN_OR_RETURN(dim_t ow, windowOutputSize(in, 3, kernels[1], strides[1], pads[1],
                                                   pads[3], dilations[1], "width"));
  KILN_ASSIGN_OR_RETURN(Type out, explicitResultType(n));
  KILN_RETURN_IF_ERR(checkQuantActivation(n.getActivation(), n.getAlpha(), n.getBeta(), out.kind));
  return std::vector<Type>{Type::withDims(out, {in.dims[0], o, oh, ow})};
}

Expected<std::vector<Type>>
inferChannelwiseQuantizedFullyConnected(const ChannelwiseQuantizedFullyConnectedNode &n) {
  using N = ChannelwiseQuantizedFullyConnectedNode;
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, N::InputIdx));
  KILN_ASSIGN_OR_RETURN(Type w, operandType(n, N::WeightsIdx));
  KILN_RETURN_IF_ERR(checkRank(n, N::InputIdx, in, 2, "[N,K]"));
  KILN_RETURN_IF_ERR(checkRank(n, N::WeightsIdx, w, 2, "[K,M]"));
  if (w.dims[0] != in.dims[1])
    return invalid("operand Weights ", w.toString(), " must have ", in.dims[1],
                   " rows to match the columns of Input ", in.toString());
  KILN_RETURN_IF_ERR(
      checkChannelwise(n, N::InputIdx, N::WeightsIdx, N::WeightScalesIdx, w.dims[1], "column"));
  KILN_ASSIGN_OR_RETURN(Type out, explicitResultType(n));
  KILN_RETURN_IF_ERR(checkQuantActivation(n.getActivation(), n.getAlpha(), n.getBeta(), out.kind));
  return std::vector<Type>{Type::withDims(out, {in.dims[0], w.dims[1]})};
}

} // namespace kiln::typerules
