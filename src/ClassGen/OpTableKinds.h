/// \file
/// The predicates the generated support tables (AutoGenOpTable.cpp, from the operator
/// table's per-backend kind notation, docs/Operators.md) are written in. Private to the
/// op_table library.
#ifndef KILN_SRC_CLASSGEN_OPTABLEKINDS_H
#define KILN_SRC_CLASSGEN_OPTABLEKINDS_H

#include "kiln/Graph/Graph.h"

namespace kiln::optable::kinds {

/// True when kind \p k is in \p mask (bit i: ElemKind i).
inline bool in(ElemKind k, unsigned mask) { return (mask >> unsigned(k)) & 1u; }
inline ElemKind kindOf(const Node &n, unsigned i) { return n.getNthInput(i).getElementType(); }
inline ElemKind resultKind(const Node &n) { return n.getType(0)->kind; }

/// The type every other operand and result is compared with: result 0, or operand 0 of a
/// node without results.
inline const Type &firstType(const Node &n) {
  return n.getNumResults() ? *n.getType(0) : *n.getNthInput(0).getType();
}

/// `uniform(SET)`: every operand and result has one element kind, from \p mask.
inline bool uniformKind(const Node &n, unsigned mask) {
  const Type &first = firstType(n);
  if (!in(first.kind, mask))
    return false;
  for (unsigned i = 0; i < n.getNumInputs(); i++)
    if (kindOf(n, i) != first.kind)
      return false;
  for (unsigned i = 0; i < n.getNumResults(); i++)
    if (n.getType(i)->kind != first.kind)
      return false;
  return true;
}

/// Same element kind, and same scale and offset when quantized.
inline bool sameElemType(const Type &a, const Type &b) {
  return a.kind == b.kind && (!a.isQuantizedType() || (a.scale == b.scale && a.offset == b.offset));
}

/// `uniform type`: every operand and result has one element type.
inline bool uniformType(const Node &n) {
  const Type &first = firstType(n);
  for (unsigned i = 0; i < n.getNumInputs(); i++)
    if (!sameElemType(*n.getNthInput(i).getType(), first))
      return false;
  for (unsigned i = 0; i < n.getNumResults(); i++)
    if (!sameElemType(*n.getType(i), first))
      return false;
  return true;
}

} // namespace kiln::optable::kinds

#endif // KILN_SRC_CLASSGEN_OPTABLEKINDS_H
