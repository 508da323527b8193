// Operator type rules: the shared helpers, the generic checks the generated
// rules call (checkSameShapeAndKind, checkSave), element-wise Select, and the
// Explicit-type operators (ConvertTo and the quantization family). The other
// families have a file each, beside their lowerings: {Conv,Linalg,Norm,Reduce,Data,Quant}.cpp.

#include "TypeRulesUtil.h"

#include "kiln/Graph/FusedActivation.h"

#include <cmath>
#include <sstream>

namespace kiln::typerules {

// ------------------------------------------------------------------ helpers

std::string listToString(const std::vector<dim_t> &v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); i++)
    os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

Expected<Type> operandType(const Node &n, unsigned i) {
  if (i >= n.getNumInputs())
    return invalid("operand ", n.getInputName(i), " is missing (the node has ",
                   n.getNumInputs(), " operands)");
  NodeValue v = n.getNthInput(i);
  if (!v.node)
    return invalid("operand ", n.getInputName(i), " is missing");
  if (v.resNo >= v.node->getNumResults())
    return invalid("operand ", n.getInputName(i), " uses result ", v.resNo,
                   " of '", v.node->getName(), "', which has ",
                   v.node->getNumResults(), " results");
  TypeRef t = v.node->getType(v.resNo);
  if (!t)
    return invalid("operand ", n.getInputName(i), " ('", v.node->getName(),
                   "') has no type");
  return *t;
}

Expected<Type> explicitResultType(const Node &n) {
  if (n.getNumResults() == 0 || !n.getType(0))
    return invalid("the result type must be given explicitly, but it is null");
  return *n.getType(0);
}

Error checkRank(const Node &n, unsigned i, const Type &t, size_t rank,
                const char *layout) {
  if (t.rank() == rank)
    return Error::success();
  std::ostringstream os;
  if (layout)
    os << " (" << layout << ")";
  return invalid("operand ", n.getInputName(i), " ", t.toString(),
                 " must have rank ", rank, os.str(), ", not ", t.rank());
}

Error checkSameKind(const Node &n, unsigned i, const Type &t, unsigned other,
                    const Type &otherTy) {
  if (t.kind == otherTy.kind)
    return Error::success();
  return invalid("operand ", n.getInputName(i), " ", t.toString(),
                 " must have the element kind of ", n.getInputName(other), " ",
                 otherTy.toString(), " (", elemKindName(otherTy.kind), ")");
}

Error checkBiasKind(const Node &n, unsigned biasIdx, const Type &bias,
                    unsigned inIdx, const Type &in) {
  if (bias.kind == in.kind ||
      (isQuantized(in.kind) && bias.kind == ElemKind::Int32Q))
    return Error::success();
  return invalid("operand ", n.getInputName(biasIdx), " ", bias.toString(),
                 " must have the element kind of ", n.getInputName(inIdx), " ",
                 in.toString(), isQuantized(in.kind) ? " or i32q" : "");
}

Error checkActivation(const std::string &act) {
  if (parseFusedActivation(act))
    return Error::success();
  return invalid("attribute Activation = \"", act, "\" must be one of ",
                 fusedActivationNames());
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

Error checkQuantActivation(const std::string &act, float alpha, float beta,
                           ElemKind resultKind) {
  std::optional<FusedActivation> a = parseFusedActivation(act);
  if (!a || (*a != FusedActivation::None && *a != FusedActivation::Relu &&
             *a != FusedActivation::Clip))
    return invalid("attribute Activation = \"", act, "\" of a quantized layer must be None, "
                   "Relu or Clip");
  if (*a != FusedActivation::None && resultKind == ElemKind::Int32I)
    return invalid("attribute Activation = \"", act, "\" needs a quantized result, not i32");
  if (*a == FusedActivation::Clip && !(std::isfinite(alpha) && std::isfinite(beta) && alpha <= beta))
    return invalid("attributes Alpha = ", alpha, " and Beta = ", beta,
                   " of a quantized Clip must be finite with Alpha <= Beta");
  return Error::success();
}

/// The int8 operands of a fused node: i8q Input and weights, i32q Bias, an i8q result, no
/// Residual, and a quantized activation.
Error checkInt8FusedOperands(const Node &n, const std::string &act, float alpha, float beta) {
  const ElemKind want[3] = {ElemKind::Int8Q, ElemKind::Int8Q, ElemKind::Int32Q};
  for (unsigned i = 0; i < 3; i++) {
    KILN_ASSIGN_OR_RETURN(Type t, operandType(n, i));
    if (t.kind != want[i])
      return invalid("operand ", n.getInputName(i), " ", t.toString(), " must be ",
                     elemKindName(want[i]), " as for the int8 layer");
  }
  if (n.getNumInputs() > 3)
    return invalid("takes no Residual operand when quantized");
  if (n.getType(0)->kind != ElemKind::Int8Q)
    return invalid("result type ", n.getType(0)->toString(), " must be i8q");
  return checkQuantActivation(act, alpha, beta, ElemKind::Int8Q);
}

/// The fused nodes take float operands of one kind, or the int8 layer's.
Error checkFusedOperands(const Node &n, const std::string &act, float alpha, float beta) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, 0));
  if (in.kind == ElemKind::Int8Q)
    return checkInt8FusedOperands(n, act, alpha, beta);
  if (!isFloatKind(in.kind))
    return invalid("operand ", n.getInputName(0), " ", in.toString(),
                   " must have a float element kind or be i8q");
  for (unsigned i = 1; i < n.getNumInputs(); i++) {
    KILN_ASSIGN_OR_RETURN(Type t, operandType(n, i));
    KILN_RETURN_IF_ERR(checkSameKind(n, i, t, 0, in));
  }
  return Error::success();
}

Error checkAttrLength(const char *attr, const std::vector<dim_t> &v,
                      size_t len) {
  if (v.size() == len)
    return Error::success();
  return invalid("attribute ", attr, " = ", listToString(v), " must have ", len,
                 " entries, not ", v.size());
}

Error checkAttrNonZero(const char *attr, const std::vector<dim_t> &v) {
  for (size_t i = 0; i < v.size(); i++)
    if (v[i] == 0)
      return invalid("attribute ", attr, " = ", listToString(v),
                     " has a zero entry at ", i);
  return Error::success();
}

Error checkAxis(const Node &n, const char *attr, dim_t axis, unsigned i,
                const Type &t) {
  if (axis < t.rank())
    return Error::success();
  return invalid("attribute ", attr, " is out of range for operand ",
                 n.getInputName(i), " ", t.toString(), " of rank ", t.rank());
}

Error checkAxisOfInput(const Node &n, const char *attr, dim_t axis) {
  KILN_ASSIGN_OR_RETURN(Type t, operandType(n, 0));
  return checkAxis(n, attr, axis, 0, t);
}

Error checkResultRank(size_t rank, const char *what) {
  if (rank <= kMaxDims)
    return Error::success();
  return invalid("the result would have rank ", rank, " (", what,
                 "), above the maximum of ", kMaxDims);
}

// ------------------------------------------------------------------ generic
// checks

Error checkSameShapeAndKind(const Node &n) {
  if (n.getNumInputs() == 0)
    return Error::success();
  KILN_ASSIGN_OR_RETURN(Type first, operandType(n, 0));
  for (unsigned i = 1; i < n.getNumInputs(); i++) {
    KILN_ASSIGN_OR_RETURN(Type t, operandType(n, i));
    if (!t.sameShapeAndKind(first))
      return invalid("operand ", n.getInputName(i), " ", t.toString(),
                     " must have the element kind and shape of ",
                     n.getInputName(0), " ", first.toString());
  }
  return Error::success();
}

Error checkSave(const SaveNode &n) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, SaveNode::InputIdx));
  KILN_ASSIGN_OR_RETURN(Type out, operandType(n, SaveNode::OutputIdx));
  const Node *dst = n.getOutput().node;
  if (!isa<Placeholder>(dst))
    return invalid("operand Output must be a Placeholder, but '",
                   dst->getName(), "' is a ", dst->getKindName(), " of type ",
                   out.toString());
  if (!out.sameShapeAndKind(in))
    return invalid("placeholder '", dst->getName(), "' ", out.toString(),
                   " must have the element kind and shape of Input ",
                   in.toString());
  return Error::success();
}

// ------------------------------------------------------------------
// element-wise

Expected<std::vector<Type>> inferSelect(const SelectNode &n) {
  KILN_ASSIGN_OR_RETURN(Type cond, operandType(n, SelectNode::CondIdx));
  KILN_ASSIGN_OR_RETURN(Type lhs, operandType(n, SelectNode::LHSIdx));
  KILN_ASSIGN_OR_RETURN(Type rhs, operandType(n, SelectNode::RHSIdx));
  if (cond.kind != ElemKind::Bool)
    return invalid("operand Cond ", cond.toString(),
                   " must have element kind bool");
  if (cond.dims != lhs.dims)
    return invalid("operand Cond ", cond.toString(),
                   " must have the shape of LHS ", lhs.toString());
  if (!rhs.sameShapeAndKind(lhs))
    return invalid("operand RHS ", rhs.toString(),
                   " must have the element kind and shape of LHS ",
                   lhs.toString());
  return std::vector<Type>{lhs};
}

// ------------------------------------------------------------------ explicit
// types

Expected<std::vector<Type>> inferSplat(const SplatNode &n) {
  KILN_ASSIGN_OR_RETURN(Type out, explicitResultType(n));
  return std::vector<Type>{out};
}

namespace {

/// Checks that the explicit result \p out has the dims of Input \p in.
Error checkSameDims(const Type &in, const Type &out) {
  if (in.dims == out.dims)
    return Error::success();
  return invalid("result type ", out.toString(),
                 " must have the dims of Input ", in.toString());
}

/// Checks that a quantized result type has a usable scale.
Error checkQuantParams(const Type &out) {
  if (std::isfinite(out.scale) && out.scale > 0)
    return Error::success();
  return invalid("result type ", out.toString(),
                 " must have a positive, finite scale");
}

} // namespace

Expected<std::vector<Type>> inferConvertTo(const ConvertToNode &n) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, ConvertToNode::InputIdx));
  KILN_ASSIGN_OR_RETURN(Type out, explicitResultType(n));
  KILN_RETURN_IF_ERR(checkSameDims(in, out));
  return std::vector<Type>{out};
}

Expected<std::vector<Type>> inferQuantize(const QuantizeNode &n) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, QuantizeNode::InputIdx));
  KILN_ASSIGN_OR_RETURN(Type out, explicitResultType(n));
  if (!isFloatKind(in.kind))
    return invalid("operand Input ", in.toString(),
                   " must have a float element kind");
  if (!isQuantized(out.kind))
    return invalid("result type ", out.toString(),
                   " must be quantized (i8q, u8q or i32q)");
  KILN_RETURN_IF_ERR(checkQuantParams(out));
  KILN_RETURN_IF_ERR(checkSameDims(in, out));
  return std::vector<Type>{out};
}

Expected<std::vector<Type>> inferDequantize(const DequantizeNode &n) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, DequantizeNode::InputIdx));
  KILN_ASSIGN_OR_RETURN(Type out, explicitResultType(n));
  if (!isQuantized(in.kind))
    return invalid("operand Input ", in.toString(), " must be quantized");
  if (!isFloatKind(out.kind))
    return invalid(
        "result type ", out.toString(),
        " must have a float element kind (float, float16 or bfloat16)");
  KILN_RETURN_IF_ERR(checkSameDims(in, out));
  return std::vector<Type>{out};
}

Expected<std::vector<Type>>
inferRescaleQuantized(const RescaleQuantizedNode &n) {
  KILN_ASSIGN_OR_RETURN(Type in,
                        operandType(n, RescaleQuantizedNode::InputIdx));
  KILN_ASSIGN_OR_RETURN(Type out, explicitResultType(n));
  if (!isQuantized(in.kind))
    return invalid("operand Input ", in.toString(), " must be quantized");
  if (!isQuantized(out.kind))
    return invalid("result type ", out.toString(),
                   " must be quantized (i8q, u8q or i32q)");
  KILN_RETURN_IF_ERR(checkQuantParams(out));
  KILN_RETURN_IF_ERR(checkSameDims(in, out));
  return std::vector<Type>{out};
}

} // namespace kiln::typerules
