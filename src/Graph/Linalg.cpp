// The linear-algebra family at graph level: its type rules, then what it lowers to (the
// lowering functions the `lower` pass calls, src/Lower/Lower.cpp).
//
// Type rules: FullyConnected (and FusedFullyConnected),
// MatMul, BatchMatMul and BatchedAdd.

#include "Lowering.h"
#include "TypeRulesUtil.h"

namespace kiln::typerules {

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

// FusedFullyConnected keeps FullyConnected's operands at the same indices.
static_assert(
    unsigned(FusedFullyConnectedNode::InputIdx) == unsigned(FullyConnectedNode::InputIdx) &&
        unsigned(FusedFullyConnectedNode::WeightsIdx) == unsigned(FullyConnectedNode::WeightsIdx) &&
        unsigned(FusedFullyConnectedNode::BiasIdx) == unsigned(FullyConnectedNode::BiasIdx),
    "FusedFullyConnected must keep FullyConnected's operands");

Expected<std::vector<Type>> inferFusedFullyConnected(const FusedFullyConnectedNode &n) {
  KILN_RETURN_IF_ERR(checkActivation(n.getActivation()));
  KILN_RETURN_IF_ERR(checkFusedOperands(n, n.getActivation(), n.getAlpha(), n.getBeta()));
  return checkResidual(n, FusedFullyConnectedNode::BiasIdx + 1, inferMatrixLayer(n));
}

} // namespace kiln::typerules

// ------------------------------------------------------------------ lowering
// Linear algebra:
//   FullyConnected(x, W, b)  ->  BatchedAdd(MatMul(x, W), b)
//   BatchMatMul(L, R)        ->  Concat_b(Reshape(MatMul(Reshape(Slice_b L), Reshape(Slice_b R))))
// (BatchMatMul only for backends that ask: most want it whole.)

namespace kiln::lower {

NodeValue lowerFullyConnected(Function *f, FullyConnectedNode *n) {
  if (!isFloatResult(n))
    return NodeValue();
  Builder b(f, n);
  NodeValue mm = f->createMatMul(b.name("matmul"), n->getInput(), n->getWeights());
  return f->createBatchedAdd(b.name("bias"), mm, n->getBias());
}

NodeValue lowerBatchMatMul(Function *f, BatchMatMulNode *n) {
  if (!isFloatResult(n))
    return NodeValue();
  Builder b(f, n);
  const Dims &l = n->getLHS().dims();
  const Dims &r = n->getRHS().dims();
  dim_t batches = l[0], rows = l[1], inner = l[2], cols = r[2];
  std::vector<NodeValue> parts;
  for (dim_t i = 0; i < batches; i++) {
    std::string s = std::to_string(i);
    NodeValue li = f->createSlice(b.name("lhs") + s, n->getLHS(), {i, 0, 0}, {i + 1, rows, inner});
    NodeValue ri = f->createSlice(b.name("rhs") + s, n->getRHS(), {i, 0, 0}, {i + 1, inner, cols});
    li = f->createReshape(b.name("lhs2d") + s, li, {rows, inner});
    ri = f->createReshape(b.name("rhs2d") + s, ri, {inner, cols});
    NodeValue mm = f->createMatMul(b.name("matmul") + s, li, ri);
    parts.push_back(f->createReshape(b.name("batch") + s, mm, {1, rows, cols}));
  }
  if (parts.size() == 1)
    return parts[0];
  return f->createConcat(b.name("concat"), parts, 0);
}

} // namespace kiln::lower
