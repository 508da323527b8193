// prune-conv-taps: a Convolution whose outer kernel rows or columns read only padding
// (dilated convolutions on small maps: DeepLabV3's ASPP branches, dilation 12-36 on a 14x14
// map with pads equal to the dilation) becomes the Convolution of the live taps alone. Tap
// k' = k - first of the new kernel reads what tap k read: new pads begin - first * dilation
// and end - (kernel - 1 - last) * dilation keep every position and the output size. Where
// most of what remains still reads padding (dilation 12 on a 14x14 map: 18 of 42
// (position, tap) pairs per axis read the map), the output is split into bands of equal
// live taps, each an unpadded Convolution of the input Slice it reads.

#include "PruneConvTaps.h"

#include "PassUtils.h"

#include <algorithm>
#include <cstring>

namespace kiln {

namespace {

/// floor(a / b) for b > 0.
int64_t floorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/// ceil(a / b) for b > 0.
int64_t ceilDiv(int64_t a, int64_t b) { return -floorDiv(-a, b); }

/// Whether tap k reads real input for some output position.
bool tapIsLive(int64_t k, int64_t inSize, int64_t outSize, int64_t stride, int64_t padBegin,
               int64_t dilation) {
  // o * stride + k * dilation - padBegin in [0, inSize) for some o in [0, outSize).
  int64_t base = k * dilation - padBegin;
  int64_t lo = std::max<int64_t>(0, ceilDiv(-base, stride));
  int64_t hi = std::min<int64_t>(outSize - 1, floorDiv(inSize - 1 - base, stride));
  return lo <= hi;
}

/// \p filter's kernel window [h0, h0 + kh) x [w0, w0 + kw), any element kind.
Tensor sliceKernel(const Tensor &filter, dim_t h0, dim_t kh, dim_t w0, dim_t kw) {
  const Type &ty = filter.getType();
  const Dims &d = ty.dims;
  Tensor out(Type::withDims(ty, {d[0], d[1], kh, kw}));
  size_t es = ty.elemBytes();
  const char *src = filter.getUnsafePtr();
  char *dst = out.getUnsafePtr();
  for (dim_t oc = 0; oc < d[0] * d[1]; oc++)
    for (dim_t h = 0; h < kh; h++)
      std::memcpy(dst + ((oc * kh + h) * kw) * es, src + ((oc * d[2] + h0 + h) * d[3] + w0) * es,
                  kw * es);
  return out;
}

/// The taps of output position \p o that read real input: [first, last], first > last
/// when none (for fixed o, input positions grow with k, so they are an interval).
TapBand liveTapsAt(int64_t o, int64_t inSize, int64_t kernel, int64_t stride, int64_t padBegin,
                   int64_t dilation) {
  // 0 <= o * stride + k * dilation - padBegin < inSize.
  int64_t base = o * stride - padBegin;
  int64_t first = std::max<int64_t>(0, ceilDiv(-base, dilation));
  int64_t last = std::min<int64_t>(kernel - 1, floorDiv(inSize - 1 - base, dilation));
  return {o, o + 1, first, last};
}

/// Output positions [lo, hi] along one axis where tap \p k reads real input (lo > hi: none).
std::pair<int64_t, int64_t> tapOutputs(int64_t k, int64_t inSize, int64_t outSize,
                                       int64_t stride, int64_t padBegin, int64_t dilation) {
  int64_t base = k * dilation - padBegin;
  return {std::max<int64_t>(0, ceilDiv(-base, stride)),
          std::min<int64_t>(outSize - 1, floorDiv(inSize - 1 - base, stride))};
}

/// \p conv as a sum over its live taps: each tap a 1x1 Convolution of the input block it
/// reads, computing only the output block where it reads real input, padded with zeros to
/// the whole output and added; the tap whose block is the whole output carries the bias.
/// Each tap's weights are read once, where bands read a tap's weights once per band that
/// uses it. Null when no tap covers the whole output.
NodeValue splitByTaps(Function *f, ConvolutionNode *conv, Constant *w) {
  const Dims &in = conv->getInput().dims(), &out = conv->getResultType()->dims;
  const std::vector<dim_t> &kernels = conv->getKernels(), &strides = conv->getStrides(),
                           &pads = conv->getPads(), &dilations = conv->getDilations();
  struct Tap {
    dim_t k[2];
    std::pair<int64_t, int64_t> o[2];
    bool whole;
  };
  std::vector<Tap> taps;
  for (dim_t kh = 0; kh < kernels[0]; kh++)
    for (dim_t kw = 0; kw < kernels[1]; kw++) {
      Tap t{{kh, kw}, {}, true};
      for (unsigned d = 0; d < 2; d++) {
        t.o[d] = tapOutputs(int64_t(t.k[d]), in[2 + d], out[2 + d], strides[d], pads[d],
                            dilations[d]);
        t.whole = t.whole && t.o[d].first == 0 && t.o[d].second == int64_t(out[2 + d]) - 1;
      }
      if (t.o[0].first <= t.o[0].second && t.o[1].first <= t.o[1].second)
        taps.push_back(t);
    }
  auto whole = std::find_if(taps.begin(), taps.end(), [](const Tap &t) { return t.whole; });
  if (whole == taps.end())
    return NodeValue();
  std::rotate(taps.begin(), whole, whole + 1);
  const std::string &name = conv->getName();
  Tensor zero(*conv->getBias().getType());
  NodeValue zeroBias = passutil::makeConstant(f, name + ".no_bias", std::move(zero));
  NodeValue sum;
  for (const Tap &t : taps) {
    std::string tag = ".tap" + std::to_string(t.k[0]) + "_" + std::to_string(t.k[1]);
    std::vector<dim_t> starts = {0, 0, 0, 0}, ends = {in[0], in[1], 0, 0};
    std::vector<dim_t> padding(8, 0);
    Dims part = {out[0], out[1], 0, 0};
    for (unsigned d = 0; d < 2; d++) {
      int64_t S = strides[d], first = t.o[d].first, last = t.o[d].second;
      int64_t at = int64_t(t.k[d] * dilations[d]) - int64_t(pads[d]);
      starts[2 + d] = dim_t(first * S + at);
      ends[2 + d] = dim_t(last * S + at + 1);
      part[2 + d] = dim_t(last - first + 1);
      padding[2 + d] = dim_t(first);
      padding[6 + d] = out[2 + d] - 1 - dim_t(last);
    }
    NodeValue x = f->createSlice(name + ".in" + tag, conv->getInput(), starts, ends);
    Constant *wt = passutil::makeConstant(f, w->getName() + tag,
                                          sliceKernel(w->getPayload(), t.k[0], 1, t.k[1], 1));
    NodeValue y = f->createConvolution(name + tag, passutil::withDims(f, *conv->getResultType(), part),
                                       x, wt, sum.node ? zeroBias : conv->getBias(), {1, 1},
                                       strides, {0, 0, 0, 0}, {1, 1}, conv->getGroup());
    if (!sum.node) {
      sum = y;
      continue;
    }
    sum = f->createAdd(name + ".sum" + tag, conv->getResultType(), sum,
                       f->createPad(name + ".pad" + tag, y, padding, 0.0f));
  }
  return sum;
}

/// True when summing \p conv's taps (splitByTaps: every tap live, as after pruning) reads
/// fewer bytes than its \p bands: each tap's weights once, and per tap but the first a
/// padded partial output written, then read by its Add, which writes the sum; against each
/// band's taps' weights.
bool tapsReadLess(const ConvolutionNode &conv, const Type &filter,
                  const std::vector<TapBand> (&bands)[2]) {
  const std::vector<dim_t> &kernels = conv.getKernels();
  double taps = double(kernels[0] * kernels[1]);
  double tapBytes = double(filter.sizeInBytes()) / taps, bandTaps = 0;
  for (const TapBand &bh : bands[0])
    for (const TapBand &bw : bands[1])
      bandTaps += double((bh.last - bh.first + 1) * (bw.last - bw.first + 1));
  double sumBytes = 3.0 * double(conv.getResultType()->sizeInBytes()) * (taps - 1);
  return taps * tapBytes + sumBytes < bandTaps * tapBytes;
}

/// Splits \p conv (float, constant filter \p w) into the bands of tapBands along both axes
/// when at most half of its (output position, tap) pairs read real input; null otherwise.
/// Where summing the live taps reads fewer bytes (each tap's weights once, plus a padded
/// partial output per tap to add) than the bands (each band its taps' weights), the taps.
NodeValue splitIntoBands(Function *f, ConvolutionNode *conv, Constant *w) {
  const Dims &in = conv->getInput().dims(), &out = conv->getResultType()->dims;
  const std::vector<dim_t> &kernels = conv->getKernels(), &strides = conv->getStrides(),
                           &pads = conv->getPads(), &dilations = conv->getDilations();
  std::vector<TapBand> bands[2];
  double live = 1, all = 1;
  for (unsigned d = 0; d < 2; d++) {
    bands[d] = tapBands(in[2 + d], out[2 + d], kernels[d], strides[d], pads[d], dilations[d]);
    int64_t sum = 0;
    for (const TapBand &b : bands[d]) {
      if (b.first > b.last || bands[d].size() > 3)
        return NodeValue();
      sum += (b.end - b.begin) * (b.last - b.first + 1);
    }
    live *= double(sum);
    all *= double(out[2 + d] * kernels[d]);
  }
  if (bands[0].size() * bands[1].size() < 2 || live > 0.5 * all)
    return NodeValue();
  if (conv->getGroup() == 1 && tapsReadLess(*conv, *w->getType(), bands))
    if (NodeValue byTaps = splitByTaps(f, conv, w); byTaps.node)
      return byTaps;
  const std::string &name = conv->getName();
  std::vector<NodeValue> rows;
  for (const TapBand &bh : bands[0]) {
    std::vector<NodeValue> cols;
    for (const TapBand &bw : bands[1]) {
      std::string tag = "." + std::to_string(bh.begin) + "_" + std::to_string(bw.begin);
      const TapBand *b[2] = {&bh, &bw};
      std::vector<dim_t> starts = {0, 0, 0, 0}, ends = {in[0], in[1], 0, 0};
      std::vector<dim_t> k(2), dil(2);
      for (unsigned d = 0; d < 2; d++) {
        int64_t S = strides[d], D = dilations[d], P = pads[d];
        starts[2 + d] = dim_t(b[d]->begin * S + b[d]->first * D - P);
        ends[2 + d] = dim_t((b[d]->end - 1) * S + b[d]->last * D - P + 1);
        k[d] = dim_t(b[d]->last - b[d]->first + 1);
        dil[d] = k[d] == 1 ? 1 : dim_t(D);
      }
      NodeValue x = f->createSlice(name + ".in" + tag, conv->getInput(), starts, ends);
      Constant *wb = passutil::makeConstant(
          f, w->getName() + ".taps" + tag,
          sliceKernel(w->getPayload(), dim_t(bh.first), k[0], dim_t(bw.first), k[1]));
      TypeRef ty = passutil::withDims(f, *conv->getResultType(),
                                      {out[0], out[1], dim_t(bh.end - bh.begin),
                                       dim_t(bw.end - bw.begin)});
      cols.push_back(f->createConvolution(name + tag, ty, x, wb, conv->getBias(), k, strides,
                                          {0, 0, 0, 0}, dil, conv->getGroup()));
    }
    rows.push_back(cols.size() == 1 ? cols[0]
                                    : NodeValue(f->createConcat(name + ".cols" +
                                                                    std::to_string(bh.begin),
                                                                cols, 3)));
  }
  if (rows.size() == 1)
    return rows[0];
  return f->createConcat(name + ".rows", rows, 2);
}

} // namespace

std::vector<TapBand> tapBands(int64_t inSize, int64_t outSize, int64_t kernel, int64_t stride,
                              int64_t padBegin, int64_t dilation) {
  std::vector<TapBand> bands;
  for (int64_t o = 0; o < outSize; o++) {
    TapBand t = liveTapsAt(o, inSize, kernel, stride, padBegin, dilation);
    if (t.first > t.last)
      t.first = kernel, t.last = -1;
    if (!bands.empty() && bands.back().first == t.first && bands.back().last == t.last)
      bands.back().end = o + 1;
    else
      bands.push_back(t);
  }
  return bands;
}

LiveTaps liveTapRange(int64_t inSize, int64_t outSize, int64_t kernel, int64_t stride,
                      int64_t padBegin, int64_t dilation) {
  LiveTaps r{kernel, -1};
  for (int64_t k = 0; k < kernel; k++)
    if (tapIsLive(k, inSize, outSize, stride, padBegin, dilation)) {
      r.first = std::min(r.first, k);
      r.last = k;
    }
  return r;
}

bool pruneConvTaps(Function *f, const PassContext &) {
  return passutil::rewriteNodes(f, [&](Node *n) -> NodeValue {
    auto *conv = dyn_cast<ConvolutionNode>(n);
    if (!conv || !isFloatKind(conv->getResultType()->kind))
      return NodeValue();
    Constant *w = passutil::asConstant(conv->getFilter());
    if (!w)
      return NodeValue();
    const Dims &in = conv->getInput().dims(), &out = conv->getResultType()->dims;
    std::vector<dim_t> kernels = conv->getKernels(), strides = conv->getStrides(),
                       pads = conv->getPads(), dilations = conv->getDilations();
    if (!w || in.size() != 4 || kernels.size() != 2 || pads.size() != 4 ||
        dilations.size() != 2 || w->getType()->dims.size() != 4)
      return NodeValue();
    LiveTaps live[2];
    bool pruned = false;
    for (unsigned d = 0; d < 2; d++) {
      int64_t K = kernels[d], D = dilations[d];
      live[d] = liveTapRange(in[2 + d], out[2 + d], K, strides[d], pads[d], D);
      // No live tap (the output is the bias alone) is left as it is.
      if (live[d].first > live[d].last)
        return NodeValue();
      int64_t dropBegin = live[d].first, dropEnd = K - 1 - live[d].last;
      if (dropBegin == 0 && dropEnd == 0)
        continue;
      if (int64_t(pads[d]) < dropBegin * D || int64_t(pads[d + 2]) < dropEnd * D)
        return NodeValue();
      pruned = true;
    }
    if (!pruned)
      return splitIntoBands(f, conv, w);
    std::vector<dim_t> newKernels(2), newPads(4), newDilations(2);
    for (unsigned d = 0; d < 2; d++) {
      int64_t K = kernels[d], D = dilations[d];
      newKernels[d] = dim_t(live[d].last - live[d].first + 1);
      newPads[d] = dim_t(int64_t(pads[d]) - live[d].first * D);
      newPads[d + 2] = dim_t(int64_t(pads[d + 2]) - (K - 1 - live[d].last) * D);
      newDilations[d] = newKernels[d] == 1 ? 1 : dim_t(D);
    }
    Tensor sliced = sliceKernel(w->getPayload(), dim_t(live[0].first), newKernels[0],
                                dim_t(live[1].first), newKernels[1]);
    Constant *nw = passutil::makeConstant(f, w->getName() + ".live_taps", std::move(sliced));
    return f->createConvolution(conv->getName(), conv->getResultType(), conv->getInput(), nw,
                                conv->getBias(), newKernels, strides, newPads, newDilations,
                                conv->getGroup());
  });
}

} // namespace kiln
