// The data-movement family at graph level: its type rules, then what it lowers to (the
// lowering functions the `lower` pass calls, src/Lower/Lower.cpp).
//
// Type rules: Concat, Slice, Reshape, Transpose, Gather,
// Tile, Pad, Broadcast and InsertTensor (what Pad lowers to).

#include "Lowering.h"
#include "TypeRulesUtil.h"

namespace kiln::typerules {

Expected<std::vector<Type>> inferConcat(const ConcatNode &n) {
  if (n.getNumInputs() == 0)
    return invalid("operand Inputs is empty; Concat needs at least one input");
  KILN_ASSIGN_OR_RETURN(Type first, operandType(n, 0));
  dim_t axis = n.getAxis();
  KILN_RETURN_IF_ERR(checkAxis(n, "Axis", axis, 0, first));
  Dims out = first.dims;
  for (unsigned i = 1; i < n.getNumInputs(); i++) {
    KILN_ASSIGN_OR_RETURN(Type t, operandType(n, i));
    KILN_RETURN_IF_ERR(checkSameKind(n, i, t, 0, first));
    bool agree = t.rank() == first.rank();
    for (size_t d = 0; agree && d < t.rank(); d++)
      agree = d == axis || t.dims[d] == first.dims[d];
    if (!agree)
      return invalid("operand ", n.getInputName(i), " ", t.toString(),
                     " must match ", n.getInputName(0), " ", first.toString(),
                     " in every dimension except Axis ", axis);
    out[axis] += t.dims[axis];
  }
  return std::vector<Type>{Type::withDims(first, out)};
}

Expected<std::vector<Type>> inferSlice(const SliceNode &n) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, SliceNode::InputIdx));
  const std::vector<dim_t> &starts = n.getStarts();
  const std::vector<dim_t> &ends = n.getEnds();
  KILN_RETURN_IF_ERR(checkAttrLength("Starts", starts, in.rank()));
  KILN_RETURN_IF_ERR(checkAttrLength("Ends", ends, in.rank()));
  Dims out;
  for (size_t i = 0; i < in.rank(); i++) {
    if (starts[i] >= ends[i] || ends[i] > in.dims[i])
      return invalid("attributes Starts = ", listToString(starts),
                     " and Ends = ", listToString(ends),
                     " must satisfy Starts < Ends <= dims of Input ",
                     in.toString(), " (violated in dim ", i, ")");
    out.push_back(ends[i] - starts[i]);
  }
  return std::vector<Type>{Type::withDims(in, out)};
}

Expected<std::vector<Type>> inferReshape(const ReshapeNode &n) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, ReshapeNode::InputIdx));
  const std::vector<dim_t> &dims = n.getDims();
  if (dims.size() > kMaxDims)
    return invalid("attribute Dims = ", listToString(dims), " has ",
                   dims.size(), " entries, above the maximum rank ", kMaxDims);
  Dims out(dims);
  if (out.product() != in.numElements())
    return invalid("attribute Dims = ", listToString(dims), " has ",
                   out.product(), " elements but Input ", in.toString(),
                   " has ", in.numElements());
  return std::vector<Type>{Type::withDims(in, out)};
}

Expected<std::vector<Type>> inferTranspose(const TransposeNode &n) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, TransposeNode::InputIdx));
  const std::vector<dim_t> &shuffle = n.getShuffle();
  KILN_RETURN_IF_ERR(checkAttrLength("Shuffle", shuffle, in.rank()));
  std::vector<bool> seen(in.rank(), false);
  Dims out;
  for (dim_t s : shuffle) {
    if (s >= in.rank() || seen[s])
      return invalid("attribute Shuffle = ", listToString(shuffle),
                     " is not a permutation of the dims of Input ",
                     in.toString());
    seen[s] = true;
    out.push_back(in.dims[s]);
  }
  return std::vector<Type>{Type::withDims(in, out)};
}

Expected<std::vector<Type>> inferGather(const GatherNode &n) {
  KILN_ASSIGN_OR_RETURN(Type data, operandType(n, GatherNode::DataIdx));
  KILN_ASSIGN_OR_RETURN(Type indices, operandType(n, GatherNode::IndicesIdx));
  dim_t axis = n.getAxis();
  KILN_RETURN_IF_ERR(checkAxis(n, "Axis", axis, GatherNode::DataIdx, data));
  if (!isIndexKind(indices.kind))
    return invalid("operand Indices ", indices.toString(),
                   " must have element kind i32 or i64");
  KILN_RETURN_IF_ERR(checkResultRank(data.rank() - 1 + indices.rank(),
                                     "Data rank - 1 + Indices rank"));
  Dims out;
  for (size_t i = 0; i < axis; i++)
    out.push_back(data.dims[i]);
  for (dim_t d : indices.dims)
    out.push_back(d);
  for (size_t i = axis + 1; i < data.rank(); i++)
    out.push_back(data.dims[i]);
  return std::vector<Type>{Type::withDims(data, out)};
}

Expected<std::vector<Type>> inferTile(const TileNode &n) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, TileNode::InputIdx));
  const std::vector<dim_t> &repeats = n.getRepeats();
  KILN_RETURN_IF_ERR(checkAttrLength("Repeats", repeats, in.rank()));
  KILN_RETURN_IF_ERR(checkAttrNonZero("Repeats", repeats));
  Dims out = in.dims;
  for (size_t i = 0; i < in.rank(); i++)
    out[i] *= repeats[i];
  return std::vector<Type>{Type::withDims(in, out)};
}

Expected<std::vector<Type>> inferPad(const PadNode &n) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, PadNode::InputIdx));
  const std::vector<dim_t> &pads = n.getPads();
  if (pads.size() != 2 * in.rank())
    return invalid("attribute Pads = ", listToString(pads), " must have ",
                   2 * in.rank(),
                   " entries (begin then end counts for each dim of Input ",
                   in.toString(), "), not ", pads.size());
  Dims out = in.dims;
  for (size_t i = 0; i < in.rank(); i++)
    out[i] += pads[i] + pads[i + in.rank()];
  return std::vector<Type>{Type::withDims(in, out)};
}

Expected<std::vector<Type>> inferBroadcast(const BroadcastNode &n) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, BroadcastNode::InputIdx));
  const std::vector<dim_t> &target = n.getTargetDims();
  if (target.size() > kMaxDims)
    return invalid("attribute TargetDims = ", listToString(target), " has ",
                   target.size(), " entries, above the maximum rank ",
                   kMaxDims);
  if (target.size() < in.rank())
    return invalid("attribute TargetDims = ", listToString(target),
                   " has rank ", target.size(), ", below the rank of Input ",
                   in.toString());
  size_t shift = target.size() - in.rank();
  for (size_t i = 0; i < in.rank(); i++) {
    dim_t d = in.dims[i];
    if (d != 1 && d != target[shift + i])
      return invalid("Input ", in.toString(),
                     " cannot be broadcast to TargetDims = ",
                     listToString(target), ": input dim ", i, " is ", d,
                     " but must be 1 or ", target[shift + i]);
  }
  return std::vector<Type>{Type::withDims(in, Dims(target))};
}

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

} // namespace kiln::typerules

// ---- Gathers and scatters by element index (ONNX breadth). ----

namespace kiln::typerules {

namespace {

Error checkIndexKind(const Node &n, unsigned i, const Type &t) {
  if (isIndexKind(t.kind))
    return Error::success();
  return invalid("operand ", n.getInputName(i), " ", t.toString(),
                 " must have element kind i32 or i64");
}

Error checkReduction(const std::string &r) {
  if (r == "none" || r == "add" || r == "mul" || r == "max" || r == "min")
    return Error::success();
  return invalid("attribute Reduction = '", r, "' must be none, add, mul, max or min");
}

} // namespace

Expected<std::vector<Type>> inferGatherElements(const GatherElementsNode &n) {
  KILN_ASSIGN_OR_RETURN(Type data, operandType(n, GatherElementsNode::DataIdx));
  KILN_ASSIGN_OR_RETURN(Type indices, operandType(n, GatherElementsNode::IndicesIdx));
  KILN_RETURN_IF_ERR(checkAxis(n, "Axis", n.getAxis(), GatherElementsNode::DataIdx, data));
  KILN_RETURN_IF_ERR(checkIndexKind(n, GatherElementsNode::IndicesIdx, indices));
  bool fits = indices.rank() == data.rank();
  for (size_t d = 0; fits && d < data.rank(); d++)
    fits = d == n.getAxis() || indices.dims[d] <= data.dims[d];
  if (!fits)
    return invalid("operand Indices ", indices.toString(), " must have the rank of Data ",
                   data.toString(), " and no larger dim outside Axis ", n.getAxis());
  return std::vector<Type>{Type::withDims(data, indices.dims)};
}

Expected<std::vector<Type>> inferScatterElements(const ScatterElementsNode &n) {
  KILN_ASSIGN_OR_RETURN(Type data, operandType(n, ScatterElementsNode::DataIdx));
  KILN_ASSIGN_OR_RETURN(Type indices, operandType(n, ScatterElementsNode::IndicesIdx));
  KILN_ASSIGN_OR_RETURN(Type updates, operandType(n, ScatterElementsNode::UpdatesIdx));
  KILN_RETURN_IF_ERR(checkAxis(n, "Axis", n.getAxis(), ScatterElementsNode::DataIdx, data));
  KILN_RETURN_IF_ERR(checkIndexKind(n, ScatterElementsNode::IndicesIdx, indices));
  KILN_RETURN_IF_ERR(checkSameKind(n, ScatterElementsNode::UpdatesIdx, updates,
                                   ScatterElementsNode::DataIdx, data));
  KILN_RETURN_IF_ERR(checkReduction(n.getReduction()));
  bool fits = indices.rank() == data.rank() && updates.dims == indices.dims;
  for (size_t d = 0; fits && d < data.rank(); d++)
    fits = d == n.getAxis() || indices.dims[d] <= data.dims[d];
  if (!fits)
    return invalid("operands Indices ", indices.toString(), " and Updates ",
                   updates.toString(), " must have one shape, of the rank of Data ",
                   data.toString(), " and no larger dim outside Axis ", n.getAxis());
  return std::vector<Type>{data};
}

Expected<std::vector<Type>> inferScatterND(const ScatterNDNode &n) {
  KILN_ASSIGN_OR_RETURN(Type data, operandType(n, ScatterNDNode::DataIdx));
  KILN_ASSIGN_OR_RETURN(Type indices, operandType(n, ScatterNDNode::IndicesIdx));
  KILN_ASSIGN_OR_RETURN(Type updates, operandType(n, ScatterNDNode::UpdatesIdx));
  KILN_RETURN_IF_ERR(checkIndexKind(n, ScatterNDNode::IndicesIdx, indices));
  KILN_RETURN_IF_ERR(checkSameKind(n, ScatterNDNode::UpdatesIdx, updates,
                                   ScatterNDNode::DataIdx, data));
  KILN_RETURN_IF_ERR(checkReduction(n.getReduction()));
  if (indices.rank() == 0 || indices.dims[indices.rank() - 1] > data.rank())
    return invalid("operand Indices ", indices.toString(), " must end in a dim of at most ",
                   "the rank of Data ", data.toString());
  size_t k = indices.dims[indices.rank() - 1];
  Dims want;
  for (size_t d = 0; d + 1 < indices.rank(); d++)
    want.push_back(indices.dims[d]);
  for (size_t d = k; d < data.rank(); d++)
    want.push_back(data.dims[d]);
  if (!want.valid() || updates.dims != want)
    return invalid("operand Updates ", updates.toString(), " must have dims ",
                   dimsToString(want), " (Indices ", indices.toString(), ", Data ",
                   data.toString(), ")");
  return std::vector<Type>{data};
}

Expected<std::vector<Type>> inferGatherND(const GatherNDNode &n) {
  KILN_ASSIGN_OR_RETURN(Type data, operandType(n, GatherNDNode::DataIdx));
  KILN_ASSIGN_OR_RETURN(Type indices, operandType(n, GatherNDNode::IndicesIdx));
  KILN_RETURN_IF_ERR(checkIndexKind(n, GatherNDNode::IndicesIdx, indices));
  size_t b = n.getBatchDims();
  if (indices.rank() == 0 || b >= indices.rank() || b >= data.rank())
    return invalid("attribute BatchDims = ", b, " must be below the ranks of Data ",
                   data.toString(), " and Indices ", indices.toString());
  for (size_t d = 0; d < b; d++)
    if (indices.dims[d] != data.dims[d])
      return invalid("the first BatchDims = ", b, " dims of Indices ", indices.toString(),
                     " and Data ", data.toString(), " must agree");
  size_t k = indices.dims[indices.rank() - 1];
  if (k < 1 || b + k > data.rank())
    return invalid("the last dim of Indices ", indices.toString(), " must be between 1 and ",
                   "the rank of Data ", data.toString(), " minus BatchDims = ", b);
  std::vector<dim_t> out;
  for (size_t d = 0; d + 1 < indices.rank(); d++)
    out.push_back(indices.dims[d]);
  for (size_t d = b + k; d < data.rank(); d++)
    out.push_back(data.dims[d]);
  KILN_RETURN_IF_ERR(checkResultRank(out.size(), "Indices rank - 1 + Data rank - BatchDims - k"));
  return std::vector<Type>{Type::withDims(data, Dims(out))};
}

Expected<std::vector<Type>> inferGridSample(const GridSampleNode &n) {
  KILN_ASSIGN_OR_RETURN(Type in, operandType(n, GridSampleNode::InputIdx));
  KILN_ASSIGN_OR_RETURN(Type grid, operandType(n, GridSampleNode::GridIdx));
  KILN_RETURN_IF_ERR(checkRank(n, GridSampleNode::InputIdx, in, 4, "[N,C,H,W]"));
  KILN_RETURN_IF_ERR(checkRank(n, GridSampleNode::GridIdx, grid, 4, "[N,oH,oW,2]"));
  KILN_RETURN_IF_ERR(checkSameKind(n, GridSampleNode::GridIdx, grid, GridSampleNode::InputIdx, in));
  if (grid.dims[0] != in.dims[0] || grid.dims[3] != 2)
    return invalid("operand Grid ", grid.toString(), " must be [N,oH,oW,2] for Input ",
                   in.toString());
  const std::string &m = n.getMode(), &p = n.getPaddingMode();
  if (m != "bilinear" && m != "nearest" && m != "bicubic")
    return invalid("attribute Mode = '", m, "' must be bilinear, nearest or bicubic");
  if (p != "zeros" && p != "border" && p != "reflection")
    return invalid("attribute PaddingMode = '", p, "' must be zeros, border or reflection");
  return std::vector<Type>{Type::withDims(in, Dims({in.dims[0], in.dims[1], grid.dims[1], grid.dims[2]}))};
}

} // namespace kiln::typerules

// ------------------------------------------------------------------ lowering
// Data movement:
//   Pad(x, pads, v)        -> InsertTensor(Splat(v, result type), x, offsets = begin pads)
//   Tile(x, repeats)       -> per dimension with repeats r > 1: Concat of r copies
//   Broadcast(x, dims)     -> Tile(Reshape(x, x's dims left-padded with 1s), dims / those)
// All element kinds.

namespace kiln::lower {

NodeValue lowerPad(Function *f, PadNode *n) {
  Builder b(f, n);
  size_t rank = n->getInput().dims().size();
  const std::vector<dim_t> &pads = n->getPads();
  std::vector<dim_t> offsets(pads.begin(), pads.begin() + rank);
  NodeValue fill = b.splat(*n->getResultType(), n->getValue(), "fill");
  return f->createInsertTensor(b.name("insert"), fill, n->getInput(), offsets);
}

NodeValue lowerTile(Function *f, TileNode *n) {
  Builder b(f, n);
  NodeValue cur = n->getInput();
  const std::vector<dim_t> &repeats = n->getRepeats();
  for (size_t d = 0; d < repeats.size(); d++) {
    if (repeats[d] <= 1)
      continue;
    std::vector<NodeValue> copies(repeats[d], cur);
    cur = f->createConcat(b.name("tile") + std::to_string(d), copies, int64_t(d));
  }
  if (cur == n->getInput())
    return NodeValue(); // all repeats 1: a no-op, left to remove-no-ops
  return cur;
}

NodeValue lowerBroadcast(Function *f, BroadcastNode *n) {
  Builder b(f, n);
  NodeValue x = n->getInput();
  const std::vector<dim_t> &target = n->getTargetDims();
  const Dims &in = x.dims();
  std::vector<dim_t> padded(target.size() - in.size(), 1);
  for (dim_t d : in)
    padded.push_back(d);
  if (in.size() != target.size())
    x = f->createReshape(b.name("rank"), x, padded);
  std::vector<dim_t> repeats(target.size(), 1);
  bool any = false;
  for (size_t d = 0; d < target.size(); d++)
    if (padded[d] != target[d]) {
      repeats[d] = target[d]; // padded[d] is 1 by the Broadcast rule
      any = true;
    }
  if (!any)
    return x == n->getInput() ? NodeValue() : x;
  return f->createTile(b.name("tile"), x, repeats);
}

} // namespace kiln::lower
