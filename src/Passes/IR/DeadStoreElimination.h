/// \file
/// IR pass `dead-store-elimination` (Passes.def): Deletes instructions whose results are never read.
#ifndef KILN_SRC_PASSES_IR_DEADSTOREELIMINATION_H
#define KILN_SRC_PASSES_IR_DEADSTOREELIMINATION_H

namespace kiln {

class IRFunction;

/// Deletes instructions whose results are never read. Returns true when it changed \p F.
bool eliminateDeadStores(IRFunction &F);

} // namespace kiln

#endif // KILN_SRC_PASSES_IR_DEADSTOREELIMINATION_H
