// cse: value numbering over a topological order. Two nodes are the same value when they
// have the same kind, operands, attributes and result types (Node::hash / isEqual); the
// later one is replaced by the earlier. Operands are canonical by the time a node is
// visited, so chains of duplicates collapse in one walk. Saves have side effects and are
// never merged.

#include "CSE.h"

#include "PassUtils.h"

#include <unordered_set>

namespace kiln {

namespace {

struct NodeHash {
  size_t operator()(const Node *n) const { return n->hash(); }
};
struct NodeEq {
  bool operator()(const Node *a, const Node *b) const { return a->isEqual(*b); }
};

} // namespace

bool eliminateCommonSubexpressions(Function *f, const PassContext &) {
  std::unordered_set<Node *, NodeHash, NodeEq> seen;
  passutil::Sweeper sweeper;
  bool changed = false;
  for (Node *n : passutil::topoOrder(*f)) {
    if (n->getKind() == NodeKind::Save || !n->hasUsers())
      continue;
    auto [it, inserted] = seen.insert(n);
    if (inserted)
      continue;
    for (unsigned r = 0; r < n->getNumResults(); r++)
      n->replaceAllUsesOfWith(r, NodeValue(*it, r));
    sweeper.add(n);
    changed = true;
  }
  sweeper.sweep(f);
  return changed;
}

} // namespace kiln
