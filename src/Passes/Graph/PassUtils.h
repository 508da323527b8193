/// \file
/// Helpers shared by the graph passes and the lowering (private to src/Passes and
/// src/Lower): topological snapshots, replacing a node and sweeping what it leaves dead,
/// recognising splat-like values, and re-typed copies of nodes.
#ifndef KILN_SRC_PASSES_GRAPH_PASSUTILS_H
#define KILN_SRC_PASSES_GRAPH_PASSUTILS_H

#include "kiln/Graph/Graph.h"
#include "kiln/Passes/PassContext.h"

#include <type_traits>
#include <unordered_set>
#include <vector>

namespace kiln::passutil {

/// The nodes of \p f, operands before users (creation order where free). A snapshot: a
/// pass may rewrite while walking it, but must skip nodes it made dead (see isLive).
std::vector<Node *> topoOrder(const Function &f);

/// True for a Save, or a node some other node uses.
inline bool isLive(const Node *n) { return n->hasUsers() || n->getKind() == NodeKind::Save; }

/// Collects nodes a pass replaced; sweep() erases those left without users, and then the
/// operands that become dead in turn. Nodes that were dead before the pass are not
/// touched (that is dce's business). Pointers queued here stay valid until sweep().
class Sweeper {
public:
  void add(Node *n) { queue_.push_back(n); }
  /// Erases the dead queued nodes; returns how many nodes were erased.
  size_t sweep(Function *f);

private:
  std::vector<Node *> queue_;
};

/// Points every use of result 0 of \p old at \p v and queues \p old for sweeping.
void replaceWith(Node *old, NodeValue v, Sweeper &sweeper);

/// The loop of a local rewrite pass. Visits the nodes of \p f that have users, operands
/// before users (a snapshot: rewrites may add nodes); where \p rewrite(n) returns a value,
/// points the uses of n's result 0 at it and queues n for sweeping. A rewrite that also
/// replaces other nodes takes the Sweeper too, \p rewrite(n, sweeper), and queues them.
/// Sweeps what the rewrites left dead at the end; returns whether any node was rewritten.
template <typename F> bool rewriteNodes(Function *f, F &&rewrite) {
  Sweeper sweeper;
  bool changed = false;
  for (Node *n : topoOrder(*f)) {
    if (!n->hasUsers())
      continue;
    NodeValue r;
    if constexpr (std::is_invocable_v<F &, Node *, Sweeper &>)
      r = rewrite(n, sweeper);
    else
      r = rewrite(n);
    if (r) {
      replaceWith(n, r, sweeper);
      changed = true;
    }
  }
  sweeper.sweep(f);
  return changed;
}

/// The Constant behind \p v, or null.
inline Constant *asConstant(NodeValue v) { return v.node ? dyn_cast<Constant>(v.node) : nullptr; }

/// True when every element of \p v is the same known number: a Splat (not quantized), a
/// Broadcast of such a value, or a non-quantized Constant whose elements are all equal
/// (scanned; at most \p maxScan elements). Sets \p out.
bool getUniformValue(NodeValue v, double &out, size_t maxScan = size_t(1) << 24);
/// True when every element of \p v is \p value (see getUniformValue).
bool isUniformValue(NodeValue v, double value);

/// A Splat of \p ty filled with \p value.
SplatNode *makeSplat(Function *f, const std::string &name, const Type &ty, double value);

/// \p like with new dims, uniqued in f's module.
TypeRef withDims(Function *f, const Type &like, const Dims &dims);

/// A copy of \p n (kind and attributes) with new operands and result types, added to \p f.
Node *cloneWith(Function *f, const Node *n, const std::vector<NodeValue> &inputs,
                const std::vector<TypeRef> &resultTypes);

/// The inverse permutation of \p shuffle.
std::vector<dim_t> inversePermutation(const std::vector<dim_t> &shuffle);
/// True when \p shuffle is 0, 1, ..., n-1.
bool isIdentityPermutation(const std::vector<dim_t> &shuffle);
/// Dims of a value of \p dims transposed by \p shuffle (result dim i = dims[shuffle[i]]).
Dims permuteDims(const Dims &dims, const std::vector<dim_t> &shuffle);
/// A new tensor holding \p t transposed by \p shuffle (any element kind).
Tensor transposeTensor(const Tensor &t, const std::vector<dim_t> &shuffle);

/// A Constant owned by \p f's module, holding \p payload.
Constant *makeConstant(Function *f, const std::string &name, Tensor payload);

/// True when the payload of \p c may be rewritten in place by a pass: \p c has exactly one
/// use, and that use is \p user.
bool isOnlyUse(const Constant *c, const Node *user);

} // namespace kiln::passutil

#endif // KILN_SRC_PASSES_GRAPH_PASSUTILS_H
