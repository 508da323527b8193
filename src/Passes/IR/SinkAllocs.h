/// \file
/// IR pass `sink-allocs` (Passes.def): Moves each AllocActivation and TensorView to just before its first use.
#ifndef KILN_SRC_PASSES_IR_SINKALLOCS_H
#define KILN_SRC_PASSES_IR_SINKALLOCS_H

namespace kiln {

class IRFunction;

/// Moves each AllocActivation and TensorView to just before its first use. Returns true when it changed \p F.
bool sinkAllocs(IRFunction &F);

} // namespace kiln

#endif // KILN_SRC_PASSES_IR_SINKALLOCS_H
