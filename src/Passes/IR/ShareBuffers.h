/// \file
/// IR pass `share-buffers` (Passes.def): Lets an element-wise instruction write into an input that dies there, or into a dead buffer of the same type.
#ifndef KILN_SRC_PASSES_IR_SHAREBUFFERS_H
#define KILN_SRC_PASSES_IR_SHAREBUFFERS_H

namespace kiln {

class IRFunction;

/// Lets an element-wise instruction write into an input that dies there, or into a dead buffer of the same type. Returns true when it changed \p F.
bool shareBuffers(IRFunction &F);

} // namespace kiln

#endif // KILN_SRC_PASSES_IR_SHAREBUFFERS_H
