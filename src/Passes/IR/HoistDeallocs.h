/// \file
/// IR pass `hoist-deallocs` (Passes.def): Moves each DeallocActivation to just after the last use of its buffer.
#ifndef KILN_SRC_PASSES_IR_HOISTDEALLOCS_H
#define KILN_SRC_PASSES_IR_HOISTDEALLOCS_H

namespace kiln {

class IRFunction;

/// Moves each DeallocActivation to just after the last use of its buffer. Returns true when it changed \p F.
bool hoistDeallocs(IRFunction &F);

} // namespace kiln

#endif // KILN_SRC_PASSES_IR_HOISTDEALLOCS_H
