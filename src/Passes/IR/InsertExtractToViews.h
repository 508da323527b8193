/// \file
/// IR pass `insert-extract-to-views` (Passes.def): Turns a Slice of a contiguous block, and a Concat whose operands are contiguous blocks of the result, into TensorViews.
#ifndef KILN_SRC_PASSES_IR_INSERTEXTRACTTOVIEWS_H
#define KILN_SRC_PASSES_IR_INSERTEXTRACTTOVIEWS_H

namespace kiln {

class IRFunction;

/// Turns a Slice of a contiguous block, and a Concat whose operands are contiguous blocks of the result, into TensorViews. Returns true when it changed \p F.
bool insertExtractToViews(IRFunction &F);

} // namespace kiln

#endif // KILN_SRC_PASSES_IR_INSERTEXTRACTTOVIEWS_H
