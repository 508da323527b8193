/// \file
/// The per-family lowering functions (declared from the operator table, defined beside
/// each family's type rules in src/Graph/<Family>.cpp) that the `lower` pass
/// (src/Lower/Lower.cpp) calls, and a small builder they share. Each
/// lowering returns the value that replaces result 0 of the node, or a null NodeValue
/// when it does not lower that instance (an element kind it has no rule for, say).
#ifndef KILN_SRC_GRAPH_LOWERING_H
#define KILN_SRC_GRAPH_LOWERING_H

#include "kiln/Graph/Graph.h"

#include <string>

namespace kiln::lower {

/// Builds the replacement of one node: names derive from the node's ("bn.scale").
class Builder {
public:
  Builder(Function *f, const Node *n) : f_(f), base_(n->getName()) {}
  Function *F() const { return f_; }
  std::string name(const char *suffix) const { return base_ + "." + suffix; }
  /// A Splat of \p like's type (any dims) filled with \p v.
  NodeValue splat(const Type &like, double v, const char *suffix = "splat") const;
  /// A Splat shaped like \p v.
  NodeValue splatLike(NodeValue v, double x, const char *suffix = "splat") const {
    return splat(*v.getType(), x, suffix);
  }
  /// \p v (numpy-)broadcast to \p dims: a Broadcast, or v itself when already there.
  NodeValue broadcast(NodeValue v, const Dims &dims, const char *suffix = "broadcast") const;
  /// The vector \p v of length dims[axis] reshaped to 1s except at \p axis, then broadcast
  /// to \p dims.
  NodeValue alongAxis(NodeValue v, const Dims &dims, size_t axis, const char *suffix) const;

private:
  Function *f_;
  std::string base_;
};

// One function per lowered operator, declared from the operator table (its `.lowering(fn)`)
// and defined in the operator's family file, src/Graph/<Family>.cpp.
#include "src/ClassGen/AutoGenLowerDecls.inc"

/// True for Float, Float16 and BFloat16 results: arithmetic lowerings are float-only
/// (quantized arithmetic would need a scale for every intermediate).
inline bool isFloatResult(const Node *n) { return isFloatKind(n->getType(0)->kind); }

} // namespace kiln::lower

#endif // KILN_SRC_GRAPH_LOWERING_H
