/// \file
/// Graph pass `prune-conv-taps` (Passes.def): Removes the kernel rows and columns of a
/// Convolution that read only padding.
#ifndef KILN_SRC_PASSES_GRAPH_PRUNECONVTAPS_H
#define KILN_SRC_PASSES_GRAPH_PRUNECONVTAPS_H

#include "kiln/Passes/PassContext.h"

#include <cstdint>
#include <vector>

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

/// A run of output positions [begin, end) along one axis whose taps reading real input are
/// the same: taps [first, last].
struct TapBand {
  int64_t begin, end, first, last;
};
/// The output positions along one axis split into maximal runs of equal live taps (taps
/// first..last of position o are those with 0 <= o stride + k dilation - padBegin < inSize,
/// an interval for each o); positions without a live tap get first > last.
std::vector<TapBand> tapBands(int64_t inSize, int64_t outSize, int64_t kernel, int64_t stride,
                              int64_t padBegin, int64_t dilation);

/// Removes the kernel rows and columns of a float Convolution with a constant filter that
/// read only padding for every output position: the filter is sliced to the live taps,
/// the pads shrink by the removed taps' reach (the result is the same), and a kernel left
/// with one tap along an axis gets dilation 1 there (one left with only its centre tap is
/// a 1x1 convolution). Not where a pad would become negative. Where most of the remaining
/// work still multiplies padding (at most half of the taps read input, summed over the
/// output positions: dilation 12 with pads 12 on a 14x14 map), the convolution is split
/// into the bands of tapBands along both axes, at most 3 per axis: one unpadded
/// Convolution per pair of bands over the Slice of the input its taps read, with the
/// filter sliced to those taps, joined by Concats. Returns true when it changed \p f.
bool pruneConvTaps(Function *f, const PassContext &ctx);

} // namespace kiln

#endif // KILN_SRC_PASSES_GRAPH_PRUNECONVTAPS_H
