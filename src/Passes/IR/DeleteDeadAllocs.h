/// \file
/// IR pass `delete-dead-allocs` (Passes.def): Deletes activations and views that no instruction uses.
#ifndef KILN_SRC_PASSES_IR_DELETEDEADALLOCS_H
#define KILN_SRC_PASSES_IR_DELETEDEADALLOCS_H

namespace kiln {

class IRFunction;

/// Deletes activations and views that no instruction uses. Returns true when it changed \p F.
bool deleteDeadAllocs(IRFunction &F);

} // namespace kiln

#endif // KILN_SRC_PASSES_IR_DELETEDEADALLOCS_H
