/// \file
/// Graph pass `prune-conv-taps` (Passes.def): Removes the kernel rows and columns of a
/// Convolution that read only padding.
#ifndef KILN_SRC_PASSES_GRAPH_PRUNECONVTAPS_H
#define KILN_SRC_PASSES_GRAPH_PRUNECONVTAPS_H

#include "kiln/Passes/PassContext.h"

#include <cstdint>

namespace kiln {

class Function;

/// The kernel taps [first, last] along one spatial axis that read real input for some
/// output position: tap k reads input o * stride + k * dilation - padBegin of output
/// position o in [0, outSize). Taps outside the range read only padding (interior taps may
/// too; they are kept). first > last when no tap reads real input.
struct LiveTaps {
  int64_t first, last;
};
LiveTaps liveTapRange(int64_t inSize, int64_t outSize, int64_t kernel, int64_t stride,
                      int64_t padBegin, int64_t dilation);

/// Removes the kernel rows and columns of a float Convolution with a constant filter that
/// read only padding for every output position: the filter is sliced to the live taps,
/// the pads shrink by the removed taps' reach (the result is the same), and a kernel left
/// with one tap along an axis gets dilation 1 there (one left with only its centre tap is
/// a 1x1 convolution). Not where a pad would become negative. Returns true when it
/// changed \p f.
bool pruneConvTaps(Function *f, const PassContext &ctx);

} // namespace kiln

#endif // KILN_SRC_PASSES_GRAPH_PRUNECONVTAPS_H
