/// \file
/// IR pass `peephole` (Passes.def): Drops self-copies, identity and unused views, and folds views of views.
#ifndef KILN_SRC_PASSES_IR_PEEPHOLE_H
#define KILN_SRC_PASSES_IR_PEEPHOLE_H

namespace kiln {

class IRFunction;

/// Drops self-copies, identity and unused views, and folds views of views. Returns true when it changed \p F.
bool peepholeIR(IRFunction &F);

} // namespace kiln

#endif // KILN_SRC_PASSES_IR_PEEPHOLE_H
