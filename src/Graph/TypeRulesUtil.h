/// \file
/// Private helpers shared by the hand-written operator type rules
/// (the family files <Family>.cpp and TypeRules.cpp).
///
/// A rule returns the result types of a node or an Error whose message says
/// which operand or attribute is wrong and shows the shapes involved; the
/// caller (Function::finishNode or the verifier) prepends the node's
/// description (its name, kind and operand types).
#ifndef KILN_SRC_GRAPH_TYPERULESUTIL_H
#define KILN_SRC_GRAPH_TYPERULESUTIL_H

#include "kiln/Graph/Graph.h"

#include <string>
#include <vector>

namespace kiln::typerules {

/// An InvalidArgument error built from streamed parts.
template <typename... Args> Error invalid(const Args &...args) {
  return makeError(ErrorCode::InvalidArgument, args...);
}

/// "[1, 2, 3]", for attribute values in messages.
std::string listToString(const std::vector<dim_t> &v);

/// The type of operand \p i of \p n; an error when the operand is missing,
/// names a result its node does not have, or has no type yet.
Expected<Type> operandType(const Node &n, unsigned i);

/// The stored type of result 0 of an Explicit-type node; an error when it is
/// null.
Expected<Type> explicitResultType(const Node &n);

/// Checks that operand \p i (of type \p t) has rank \p rank; \p layout
/// describes the expected dims for the message ("[N,C,H,W]").
Error checkRank(const Node &n, unsigned i, const Type &t, size_t rank,
                const char *layout = nullptr);

/// Checks that operand \p i (of type \p t) has element kind \p kind; \p other
/// names the operand whose kind it must share.
Error checkSameKind(const Node &n, unsigned i, const Type &t, unsigned other,
                    const Type &otherTy);

/// Checks that attribute \p attr has exactly \p len entries.
Error checkAttrLength(const char *attr, const std::vector<dim_t> &v,
                      size_t len);

/// Checks that no entry of attribute \p attr is zero.
Error checkAttrNonZero(const char *attr, const std::vector<dim_t> &v);

/// Checks that axis attribute \p attr (already normalised by the builder) is
/// below the rank of \p t, the type of operand \p i.
Error checkAxis(const Node &n, const char *attr, dim_t axis, unsigned i,
                const Type &t);

/// Checks that a result of \p rank dimensions fits in a Dims.
Error checkResultRank(size_t rank, const char *what);

/// Output extent of a 2-D window along one dimension, or an error when the
/// (dilated) window does not fit in the padded input. \p dimName is "height" or
/// "width".
Expected<dim_t> windowOutputSize(const Type &in, unsigned dimIdx, dim_t kernel,
                                 dim_t stride, dim_t padBegin, dim_t padEnd,
                                 dim_t dilation, const char *dimName);

/// The rules shared by FusedConvolution and FusedFullyConnected: the activation is one of
/// the fused activations (kiln/Graph/FusedActivation.h); the operands are of one float
/// kind, or those of the int8 layer (i8q Input and weights, i32q Bias, i8q result) with
/// activation None, Relu or Clip and no Residual (checkFusedOperands); the Residual
/// operands from index \p first are none, or one of exactly the result's type.
Error checkActivation(const std::string &act);
Error checkFusedOperands(const Node &n, const std::string &act, float alpha, float beta);
/// The activation of a quantized layer, applied before its one rounding: None, Relu, or
/// Clip with finite Alpha <= Beta; a result of kind \p resultKind Int32I takes None only.
Error checkQuantActivation(const std::string &act, float alpha, float beta,
                           ElemKind resultKind);
Expected<std::vector<Type>> checkResidual(const Node &n, unsigned first,
                                          Expected<std::vector<Type>> result);

/// Bias operands share the input's kind, except that quantized operators take an Int32Q
/// bias.
Error checkBiasKind(const Node &n, unsigned biasIdx, const Type &bias, unsigned inIdx,
                    const Type &in);

/// Checks the Kernels/Strides/Pads(/Dilations) attributes of a 2-D window
/// operator. \p dilations may be null for pooling.
Error checkWindowAttrs(const std::vector<dim_t> &kernels,
                       const std::vector<dim_t> &strides,
                       const std::vector<dim_t> &pads,
                       const std::vector<dim_t> *dilations);

/// The rule of Convolution, shared with FusedConvolution: operands Input [N,C,H,W],
/// Filter [O,C/Group,kH,kW] and Bias [O] at ConvolutionNode's indices.
Expected<std::vector<Type>> inferConv2D(const Node &n, const std::vector<dim_t> &kernels,
                                        const std::vector<dim_t> &strides,
                                        const std::vector<dim_t> &pads,
                                        const std::vector<dim_t> &dilations, dim_t group);

/// The rule of FullyConnected, shared with FusedFullyConnected: operands Input [N,K],
/// Weights [K,M] and Bias [M] at FullyConnectedNode's indices.
Expected<std::vector<Type>> inferMatrixLayer(const Node &n);

/// Shared rule of the Reduce* operators.
Expected<std::vector<Type>>
inferReduce(const Node &n, const std::vector<dim_t> &axes, bool keepDims);

/// Shared rule of ArgMax and ArgMin.
Expected<std::vector<Type>> inferArgReduce(const Node &n, dim_t axis,
                                           bool keepDims);

/// Shared rule of SoftMax and LogSoftMax.
Expected<std::vector<Type>> inferSoftMaxLike(const Node &n, dim_t axis);

} // namespace kiln::typerules

#endif // KILN_SRC_GRAPH_TYPERULESUTIL_H
