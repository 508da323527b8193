/// \file
/// Graph pass `flatten-concats` (Passes.def): Inlines a Concat into a user Concat on the same axis,
/// and joins adjacent Slices of one value.
#ifndef KILN_SRC_PASSES_GRAPH_FLATTENCONCATS_H
#define KILN_SRC_PASSES_GRAPH_FLATTENCONCATS_H

#include "kiln/Passes/PassContext.h"

namespace kiln {

class Function;

/// Inlines a Concat into a user Concat on the same axis, and joins adjacent Slices of one value.
/// Returns true when it changed \p f.
bool flattenConcats(Function *f, const PassContext &ctx);

} // namespace kiln

#endif // KILN_SRC_PASSES_GRAPH_FLATTENCONCATS_H
