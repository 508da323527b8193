// Linear algebra:
//   FullyConnected(x, W, b)  ->  BatchedAdd(MatMul(x, W), b)
//   BatchMatMul(L, R)        ->  Concat_b(Reshape(MatMul(Reshape(Slice_b L), Reshape(Slice_b R))))
// (BatchMatMul only for backends that ask: most want it whole.)

#include "LowerUtil.h"

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
