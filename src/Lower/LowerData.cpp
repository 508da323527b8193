// Data movement:
//   Pad(x, pads, v)        -> InsertTensor(Splat(v, result type), x, offsets = begin pads)
//   Tile(x, repeats)       -> per dimension with repeats r > 1: Concat of r copies
//   Broadcast(x, dims)     -> Tile(Reshape(x, x's dims left-padded with 1s), dims / those)
// All element kinds.

#include "LowerUtil.h"

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
