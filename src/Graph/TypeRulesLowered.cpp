// Type rules of the nodes that lowering and fusion produce (see defineLoweringTargets in
// src/ClassGen/NodeTable.cpp): InsertTensor, FusedConvolution, FusedFullyConnected.

#include "TypeRulesUtil.h"

#include <initializer_list>
#include <utility>

namespace kiln::typerules {

namespace {

Error checkActivation(const std::string &act) {
  if (act == "None" || act == "Relu" || act == "Clip" || act == "LeakyRelu" || act == "Sigmoid" ||
      act == "Tanh")
    return Error::success();
  return invalid("attribute Activation = \"", act,
                 "\" must be one of None, Relu, Clip, LeakyRelu, Sigmoid, Tanh");
}

/// A fused node's Residual: none, or one operand of exactly the result's type.
Expected<std::vector<Type>> checkResidual(const Node &n, unsigned first,
                                          Expected<std::vector<Type>> result) {
  if (!result || n.getNumInputs() == first)
    return result;
  if (n.getNumInputs() > first + 1)
    return invalid("takes at most one Residual operand, not ", n.getNumInputs() - first);
  KILN_ASSIGN_OR_RETURN(Type r, operandType(n, first));
  if (r != result->front())
    return invalid("operand ", n.getInputName(first), " ", r.toString(),
                   " must have the result's type ", result->front().toString());
  return result;
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

// The fused nodes keep the operands of the node they fuse, at the same indices.
constexpr bool sameIndices(std::initializer_list<std::pair<unsigned, unsigned>> pairs) {
  for (const auto &p : pairs)
    if (p.first != p.second)
      return false;
  return true;
}
static_assert(sameIndices({{FusedConvolutionNode::InputIdx, ConvolutionNode::InputIdx},
                           {FusedConvolutionNode::FilterIdx, ConvolutionNode::FilterIdx},
                           {FusedConvolutionNode::BiasIdx, ConvolutionNode::BiasIdx}}),
              "FusedConvolution must keep Convolution's operands");
static_assert(sameIndices({{FusedFullyConnectedNode::InputIdx, FullyConnectedNode::InputIdx},
                           {FusedFullyConnectedNode::WeightsIdx, FullyConnectedNode::WeightsIdx},
                           {FusedFullyConnectedNode::BiasIdx, FullyConnectedNode::BiasIdx}}),
              "FusedFullyConnected must keep FullyConnected's operands");

Expected<std::vector<Type>> inferFusedConvolution(const FusedConvolutionNode &n) {
  KILN_RETURN_IF_ERR(checkFloatOperands(n));
  KILN_RETURN_IF_ERR(checkActivation(n.getActivation()));
  return checkResidual(n, FusedConvolutionNode::BiasIdx + 1,
                       inferConv2D(n, n.getKernels(), n.getStrides(), n.getPads(),
                                   n.getDilations(), n.getGroup()));
}

Expected<std::vector<Type>> inferFusedFullyConnected(const FusedFullyConnectedNode &n) {
  KILN_RETURN_IF_ERR(checkFloatOperands(n));
  KILN_RETURN_IF_ERR(checkActivation(n.getActivation()));
  return checkResidual(n, FusedFullyConnectedNode::BiasIdx + 1, inferMatrixLayer(n));
}

} // namespace kiln::typerules
