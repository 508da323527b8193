/// \file
/// IR pass `copy-elimination` (Passes.def): Makes a copy's source and destination one buffer where neither is observed in between, and deletes the copy.
#ifndef KILN_SRC_PASSES_IR_COPYELIMINATION_H
#define KILN_SRC_PASSES_IR_COPYELIMINATION_H

namespace kiln {

class IRFunction;

/// Makes a copy's source and destination one buffer where neither is observed in between, and deletes the copy. Returns true when it changed \p F.
bool eliminateCopies(IRFunction &F);

} // namespace kiln

#endif // KILN_SRC_PASSES_IR_COPYELIMINATION_H
