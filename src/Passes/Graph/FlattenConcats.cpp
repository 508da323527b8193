// flatten-concats: Concat(a, Concat(b, c), d) on one axis is Concat(a, b, c, d); and
// neighbouring operands that are Slices of one value, adjacent along the concat axis and
// equal in every other dimension, are one Slice. (A Slice that covers its whole input is
// then left to remove-no-ops.)

#include "FlattenConcats.h"

#include "PassUtils.h"

namespace kiln {

namespace {

/// True when \p b continues \p a along \p axis: same input, same bounds elsewhere.
bool adjacent(const SliceNode *a, const SliceNode *b, dim_t axis) {
  if (a->getInput() != b->getInput())
    return false;
  for (size_t i = 0; i < a->getStarts().size(); i++) {
    if (i == axis) {
      if (a->getEnds()[i] != b->getStarts()[i])
        return false;
    } else if (a->getStarts()[i] != b->getStarts()[i] || a->getEnds()[i] != b->getEnds()[i]) {
      return false;
    }
  }
  return true;
}

} // namespace

bool flattenConcats(Function *f, const PassContext &) {
  return passutil::rewriteNodes(f, [&](Node *n, passutil::Sweeper &sweeper) {
    auto *cat = dyn_cast<ConcatNode>(n);
    if (!cat)
      return NodeValue();
    dim_t axis = cat->getAxis();
    std::vector<NodeValue> flat;
    bool rewrote = false;
    for (const NodeValue &v : cat->getInputs()) {
      auto *inner = dyn_cast<ConcatNode>(v.node);
      if (inner && inner->getAxis() == axis) {
        for (const NodeValue &w : inner->getInputs())
          flat.push_back(w);
        rewrote = true;
        continue;
      }
      flat.push_back(v);
    }
    std::vector<NodeValue> merged;
    for (const NodeValue &v : flat) {
      auto *s = dyn_cast<SliceNode>(v.node);
      auto *prev = merged.empty() ? nullptr : dyn_cast<SliceNode>(merged.back().node);
      if (s && prev && adjacent(prev, s, axis)) {
        std::vector<dim_t> ends = prev->getEnds();
        ends[axis] = s->getEnds()[axis];
        sweeper.add(prev);
        merged.back() =
            f->createSlice(prev->getName() + ".merged", s->getInput(), prev->getStarts(), ends);
        rewrote = true;
        continue;
      }
      merged.push_back(v);
    }
    if (!rewrote)
      return NodeValue();
    return merged.size() == 1
               ? merged[0]
               : NodeValue(f->createConcat(cat->getName(), cat->getType(0), merged, int64_t(axis)));
  });
}

} // namespace kiln
