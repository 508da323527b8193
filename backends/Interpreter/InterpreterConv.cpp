// Interpreter kernels of 2-D convolution and pooling (NCHW). Float convolution runs as
// im2col plus one Eigen GEMM per image and group, so whole models run in seconds; every
// other path is a direct loop nest. Float16 and BFloat16 run the float kernels on converted
// copies and round once when storing. Quantized kernels accumulate int8 products in int32
// and requantize each output once. FusedConvolution runs the plain kernel, then the fused
// epilogue (applyEpilogue, InterpreterElementwise.cpp).

#include "InterpreterKernels.h"

#include <Eigen/Core>

namespace kiln {

using namespace interp;

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// Geometry of a 2-D window operator: input [N, C, H, W], output [N, OC, OH, OW], window
/// kH x kW with strides, dilations and the top/left pads (bottom/right pads only shape the
/// output, which the type already holds).
struct Window {
  dim_t N, C, H, W, OC, OH, OW;
  dim_t kH, kW, sH, sW, padT, padL, dH = 1, dW = 1;

  /// Input row of output row \p oh and kernel row \p kh (negative or >= H when in the pad).
  sdim_t inRow(dim_t oh, dim_t kh) const { return sdim_t(oh * sH + kh * dH) - sdim_t(padT); }
  sdim_t inCol(dim_t ow, dim_t kw) const { return sdim_t(ow * sW + kw * dW) - sdim_t(padL); }
  bool inBounds(sdim_t h, sdim_t w) const {
    return h >= 0 && h < sdim_t(H) && w >= 0 && w < sdim_t(W);
  }
};

/// Builds the window of a convolution or pooling instruction from its attributes, checking
/// their lengths (the verifier already did for graphs built through the API).
Expected<Window> makeWindow(const Instruction *I, const Type &in, const Type &out,
                            const std::vector<dim_t> &kernels, const std::vector<dim_t> &strides,
                            const std::vector<dim_t> &pads, const std::vector<dim_t> *dilations) {
  if (in.rank() != 4 || out.rank() != 4 || out.dims[0] != in.dims[0] || kernels.size() != 2 ||
      strides.size() != 2 || pads.size() != 4 || (dilations && dilations->size() != 2))
    return makeError(ErrorCode::InvalidArgument, I->getKindName(), " '", I->getName(),
                     "': malformed window attributes or operand ranks (input ", in.toString(),
                     ", output ", out.toString(), ")");
  Window w;
  w.N = in.dims[0], w.C = in.dims[1], w.H = in.dims[2], w.W = in.dims[3];
  w.OC = out.dims[1], w.OH = out.dims[2], w.OW = out.dims[3];
  w.kH = kernels[0], w.kW = kernels[1], w.sH = strides[0], w.sW = strides[1];
  w.padT = pads[0], w.padL = pads[1];
  if (dilations)
    w.dH = (*dilations)[0], w.dW = (*dilations)[1];
  return w;
}

/// Pooling keeps the channels: an error unless the output has the input's channel count.
Error checkPoolChannels(const Instruction *I, const Window &w, const Tensor &in,
                        const Tensor &out) {
  if (w.OC == w.C)
    return Error::success();
  return makeError(ErrorCode::InvalidArgument, I->getKindName(), " '", I->getName(), "': output ",
                   out.getType().toString(), " must have the channels of input ",
                   in.getType().toString());
}

// ------------------------------------------------------------------ convolution

/// Float convolution: for each image and group, gathers the input patches into a
/// [Cg*kH*kW, OH*OW] matrix (im2col, zeros in the padding) and multiplies the group's
/// filter rows [Og, Cg*kH*kW] by it, then adds the bias.
std::vector<float> convFloat(const std::vector<float> &in, const std::vector<float> &filter,
                             const std::vector<float> &bias, const Window &w, dim_t group) {
  const dim_t cg = w.C / group, og = w.OC / group;
  const dim_t patch = cg * w.kH * w.kW, pixels = w.OH * w.OW;
  std::vector<float> out(w.N * w.OC * pixels);
  std::vector<float> cols(patch * pixels);
  for (dim_t n = 0; n < w.N; n++) {
    for (dim_t g = 0; g < group; g++) {
      for (dim_t c = 0; c < cg; c++) {
        const float *plane = &in[(n * w.C + g * cg + c) * w.H * w.W];
        for (dim_t kh = 0; kh < w.kH; kh++) {
          for (dim_t kw = 0; kw < w.kW; kw++) {
            float *row = &cols[((c * w.kH + kh) * w.kW + kw) * pixels];
            for (dim_t oh = 0; oh < w.OH; oh++) {
              for (dim_t ow = 0; ow < w.OW; ow++) {
                sdim_t ih = w.inRow(oh, kh), iw = w.inCol(ow, kw);
                row[oh * w.OW + ow] = w.inBounds(ih, iw) ? plane[ih * w.W + iw] : 0.0f;
              }
            }
          }
        }
      }
      Eigen::Map<const RowMatrix> F(&filter[g * og * patch], og, patch);
      Eigen::Map<const RowMatrix> X(cols.data(), patch, pixels);
      Eigen::Map<RowMatrix> Y(&out[(n * w.OC + g * og) * pixels], og, pixels);
      Y.noalias() = F * X;
      for (dim_t o = 0; o < og; o++)
        Y.row(o).array() += bias[g * og + o];
    }
  }
  return out;
}

/// Int8 convolution: sum of (x - xOffset) * (f - fOffset) in int32 per output (the pad is
/// real zero, so it adds nothing), plus the dequantized bias, through the activation \p act
/// (a fused Relu or Clip), requantized to the output.
void convInt8(const Tensor &in, const Tensor &filter, const Tensor &bias, Tensor &out,
              const Window &w, dim_t group, const RealActivation &act) {
  const Type &inTy = in.getType(), &fTy = filter.getType(), &outTy = out.getType();
  auto x = in.getHandle<int8_t>();
  auto f = filter.getHandle<int8_t>();
  auto b = bias.getHandle<int32_t>();
  auto y = out.getHandle<int8_t>();
  const int8_t *xp = x.begin(), *fp = f.begin();
  int8_t *yp = y.begin();
  const dim_t cg = w.C / group, og = w.OC / group, taps = cg * w.kH * w.kW;
  const double accScale = double(inTy.scale) * double(fTy.scale);
  // Filter values minus their offset, one output channel at a time (same integers as
  // f - fOffset per tap; the sum is exact in int32 whatever the order).
  std::vector<int32_t> fo(taps);
  for (dim_t n = 0; n < w.N; n++) {
    for (dim_t o = 0; o < w.OC; o++) {
      const dim_t g = o / og;
      for (dim_t t = 0; t < taps; t++)
        fo[t] = int32_t(fp[o * taps + t]) - fTy.offset;
      const double biasReal = dequantizeValue(b.raw(o), bias.getType());
      const int8_t *xg = xp + (n * w.C + g * cg) * w.H * w.W;
      int8_t *yo = yp + (n * w.OC + o) * w.OH * w.OW;
      for (dim_t oh = 0; oh < w.OH; oh++) {
        for (dim_t ow = 0; ow < w.OW; ow++) {
          int32_t acc = 0;
          for (dim_t c = 0; c < cg; c++) {
            const int8_t *xc = xg + c * w.H * w.W;
            const int32_t *fc = fo.data() + c * w.kH * w.kW;
            for (dim_t kh = 0; kh < w.kH; kh++) {
              sdim_t ih = w.inRow(oh, kh);
              if (ih < 0 || ih >= sdim_t(w.H))
                continue;
              const int8_t *xr = xc + dim_t(ih) * w.W;
              const int32_t *fr = fc + kh * w.kW;
              for (dim_t kw = 0; kw < w.kW; kw++) {
                sdim_t iw = w.inCol(ow, kw);
                if (iw < 0 || iw >= sdim_t(w.W))
                  continue; // the pad is real zero: it adds nothing
                acc += (int32_t(xr[iw]) - inTy.offset) * fr[kw];
              }
            }
          }
          double real = act.apply(accScale * acc + biasReal);
          yo[oh * w.OW + ow] = quantizeValue<int8_t>(real, outTy.scale, outTy.offset);
        }
      }
    }
  }
}

// ------------------------------------------------------------------ pooling

/// The in-bounds input rows [h0, h1) and columns [w0, w1) of one pooling cell.
struct Rect {
  dim_t h0, h1, w0, w1;
  dim_t area() const { return (h1 - h0) * (w1 - w0); }
};

/// The in-bounds part of the window of output cell (oh, ow).
Rect windowRect(const Window &w, dim_t oh, dim_t ow) {
  auto clip = [](sdim_t v, dim_t hi) { return dim_t(std::clamp<sdim_t>(v, 0, sdim_t(hi))); };
  sdim_t h = w.inRow(oh, 0), c = w.inCol(ow, 0);
  return {clip(h, w.H), clip(h + sdim_t(w.kH), w.H), clip(c, w.W), clip(c + sdim_t(w.kW), w.W)};
}

/// Calls \p fn(outIndex, planeOffset, rect) for every output cell of an [N, C, OH, OW]
/// pooling result, where planeOffset is the flat index of input element (n, c, 0, 0).
template <typename RectFn, typename CellFn>
void forEachCell(const Window &w, RectFn rectOf, CellFn fn) {
  size_t o = 0;
  for (dim_t nc = 0; nc < w.N * w.C; nc++)
    for (dim_t oh = 0; oh < w.OH; oh++)
      for (dim_t ow = 0; ow < w.OW; ow++)
        fn(o++, nc * w.H * w.W, rectOf(oh, ow));
}

/// Max pooling. Float kinds take the max in float (-inf for an empty window); Int8Q takes
/// the max of the raw values and requantizes it (a copy when the types agree).
template <typename RectFn>
Error maxPool(const Instruction *I, const Tensor &in, Tensor &out, const Window &w, RectFn rectOf) {
  if (sameFloatKind(in, out)) {
    std::vector<float> x = loadFloats(in), y(out.size());
    forEachCell(w, rectOf, [&](size_t o, size_t base, Rect r) {
      float m = -std::numeric_limits<float>::infinity();
      for (dim_t h = r.h0; h < r.h1; h++)
        for (dim_t c = r.w0; c < r.w1; c++)
          m = std::max(m, x[base + h * w.W + c]);
      y[o] = m;
    });
    storeFloats(out, y);
    return Error::success();
  }
  if (isIndexKind(in.getElementType()) && in.getElementType() == out.getElementType()) {
    return dispatchNumeric(I, in.getElementType(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *x = elems<T>(in);
      T *y = elems<T>(out);
      forEachCell(w, rectOf, [&](size_t o, size_t base, Rect r) {
        T m = std::numeric_limits<T>::min();
        for (dim_t h = r.h0; h < r.h1; h++)
          for (dim_t c = r.w0; c < r.w1; c++)
            m = std::max(m, x[base + h * w.W + c]);
        y[o] = m;
      });
      return Error::success();
    });
  }
  if (in.getElementType() == ElemKind::Int8Q && out.getElementType() == ElemKind::Int8Q) {
    auto x = in.getHandle<int8_t>();
    auto y = out.getHandle<int8_t>();
    const Type &outTy = out.getType();
    forEachCell(w, rectOf, [&](size_t o, size_t base, Rect r) {
      int32_t m = std::numeric_limits<int8_t>::min();
      for (dim_t h = r.h0; h < r.h1; h++)
        for (dim_t c = r.w0; c < r.w1; c++)
          m = std::max<int32_t>(m, x.raw(base + h * w.W + c));
      y.raw(o) = quantizeValue<int8_t>(dequantizeValue(m, in.getType()), outTy.scale, outTy.offset);
    });
    return Error::success();
  }
  return unsupportedKinds(I);
}

/// Average pooling: the sum over the in-bounds rectangle divided by divisor(rect). Int8Q
/// sums x - offset in int32 and requantizes the mean.
template <typename RectFn, typename DivisorFn>
Error avgPool(const Instruction *I, const Tensor &in, Tensor &out, const Window &w, RectFn rectOf,
              DivisorFn divisor) {
  if (sameFloatKind(in, out)) {
    std::vector<float> x = loadFloats(in), y(out.size());
    forEachCell(w, rectOf, [&](size_t o, size_t base, Rect r) {
      float sum = 0;
      for (dim_t h = r.h0; h < r.h1; h++)
        for (dim_t c = r.w0; c < r.w1; c++)
          sum += x[base + h * w.W + c];
      y[o] = sum / float(divisor(r));
    });
    storeFloats(out, y);
    return Error::success();
  }
  if (in.getElementType() == ElemKind::Int8Q && out.getElementType() == ElemKind::Int8Q) {
    auto x = in.getHandle<int8_t>();
    auto y = out.getHandle<int8_t>();
    const Type &inTy = in.getType(), &outTy = out.getType();
    forEachCell(w, rectOf, [&](size_t o, size_t base, Rect r) {
      int32_t sum = 0;
      for (dim_t h = r.h0; h < r.h1; h++)
        for (dim_t c = r.w0; c < r.w1; c++)
          sum += x.raw(base + h * w.W + c) - inTy.offset;
      double real = double(inTy.scale) * sum / double(divisor(r));
      y.raw(o) = quantizeValue<int8_t>(real, outTy.scale, outTy.offset);
    });
    return Error::success();
  }
  return unsupportedKinds(I);
}

/// A Convolution or FusedConvolution \p I without its float epilogue: float kinds, or int8
/// with the activation \p act before the rounding.
template <typename ConvInst>
Error convolution(const ConvInst *I, const Tensor &in, const Tensor &filter, const Tensor &bias,
                  Tensor &out, const RealActivation &act) {
  KILN_ASSIGN_OR_RETURN(Window w, makeWindow(I, in.getType(), out.getType(), I->getKernels(),
                                             I->getStrides(), I->getPads(), &I->getDilations()));
  const dim_t group = I->getGroup();
  if (group == 0 || w.C % group || w.OC % group || filter.getType().rank() != 4 ||
      filter.dims()[0] != w.OC || filter.dims()[1] != w.C / group || filter.dims()[2] != w.kH ||
      filter.dims()[3] != w.kW || bias.size() != w.OC)
    return makeError(ErrorCode::InvalidArgument, I->getKindName(), " '", I->getName(), "': filter ",
                     filter.getType().toString(), ", bias ", bias.getType().toString(),
                     " and group ", group, " do not fit input ", in.getType().toString(),
                     " and output ", out.getType().toString());

  if (sameFloatKind(out, in, filter, bias)) {
    storeFloats(out, convFloat(loadFloats(in), loadFloats(filter), loadFloats(bias), w, group));
    return Error::success();
  }
  if (in.getElementType() == ElemKind::Int8Q && filter.getElementType() == ElemKind::Int8Q &&
      bias.getElementType() == ElemKind::Int32Q && out.getElementType() == ElemKind::Int8Q) {
    convInt8(in, filter, bias, out, w, group, act);
    return Error::success();
  }
  return unsupportedKinds(I);
}

} // namespace

Error InterpreterRun::fwdConvolution(const ConvolutionInst *I) {
  return convolution(I, getTensor(I->getInput()), getTensor(I->getFilter()),
                     getTensor(I->getBias()), getTensor(I->getDest()), RealActivation());
}

Error InterpreterRun::fwdMaxPool(const MaxPoolInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &in = getTensor(I->getInput());
  KILN_ASSIGN_OR_RETURN(Window w, makeWindow(I, in.getType(), out.getType(), I->getKernels(),
                                             I->getStrides(), I->getPads(), nullptr));
  KILN_RETURN_IF_ERR(checkPoolChannels(I, w, in, out));
  return maxPool(I, in, out, w, [&](dim_t oh, dim_t ow) { return windowRect(w, oh, ow); });
}

Error InterpreterRun::fwdAvgPool(const AvgPoolInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &in = getTensor(I->getInput());
  KILN_ASSIGN_OR_RETURN(Window w, makeWindow(I, in.getType(), out.getType(), I->getKernels(),
                                             I->getStrides(), I->getPads(), nullptr));
  KILN_RETURN_IF_ERR(checkPoolChannels(I, w, in, out));
  const bool countPads = I->getCountIncludePads();
  // An empty window (impossible when pads < kernel, as the verifier requires) divides by
  // one rather than zero.
  auto divisor = [&](Rect r) { return countPads ? w.kH * w.kW : std::max<dim_t>(r.area(), 1); };
  return avgPool(
      I, in, out, w, [&](dim_t oh, dim_t ow) { return windowRect(w, oh, ow); }, divisor);
}

Error InterpreterRun::fwdAdaptiveAvgPool(const AdaptiveAvgPoolInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &in = getTensor(I->getInput());
  if (in.getType().rank() != 4 || out.getType().rank() != 4 || out.dims()[0] != in.dims()[0] ||
      out.dims()[1] != in.dims()[1])
    return makeError(ErrorCode::InvalidArgument, "AdaptiveAvgPool '", I->getName(), "': input ",
                     in.getType().toString(), " and output ", out.getType().toString(),
                     " must be [N,C,H,W] with the same N and C");
  Window w{};
  w.N = in.dims()[0], w.C = in.dims()[1], w.H = in.dims()[2], w.W = in.dims()[3];
  w.OC = out.dims()[1], w.OH = out.dims()[2], w.OW = out.dims()[3];
  // Cell (i, j) covers rows floor(i*H/OH) .. ceil((i+1)*H/OH) - 1, likewise columns.
  auto rectOf = [&](dim_t oh, dim_t ow) {
    return Rect{oh * w.H / w.OH, ((oh + 1) * w.H + w.OH - 1) / w.OH, ow * w.W / w.OW,
                ((ow + 1) * w.W + w.OW - 1) / w.OW};
  };
  return avgPool(I, in, out, w, rectOf, [](Rect r) { return std::max<dim_t>(r.area(), 1); });
}

Error InterpreterRun::fwdFusedConvolution(const FusedConvolutionInst *I) {
  const Tensor &in = getTensor(I->getInput());
  Tensor &out = getTensor(I->getDest());
  const Value *res = residualOf(I);
  if (in.getElementType() == ElemKind::Int8Q) {
    // One rounding: the activation acts on the real value (a Residual is not taken).
    if (res)
      return unsupportedKinds(I);
    KILN_ASSIGN_OR_RETURN(RealActivation act,
                          realActivation(I, I->getActivation(), I->getAlpha(), I->getBeta()));
    return convolution(I, in, getTensor(I->getFilter()), getTensor(I->getBias()), out, act);
  }
  KILN_RETURN_IF_ERR(convolution(I, in, getTensor(I->getFilter()), getTensor(I->getBias()), out,
                                 RealActivation()));
  return applyEpilogue(I, getTensor(I->getDest()), res ? &getTensor(res) : nullptr,
                       I->getActivation(), I->getAlpha(), I->getBeta());
}

} // namespace kiln

// ------------------------------------------------------------------ RoiAlign

namespace kiln {

using namespace interp;

namespace {

/// One region's sampling grid: its corner, bin sizes, samples per bin and their count.
struct RoiGrid {
  double x1, y1, bh, bw, count;
  dim_t gh, gw;
};

/// The grid of region box = (x1, y1, x2, y2) for oh x ow bins.
RoiGrid roiGrid(const double box[4], double scale, bool half, dim_t oh, dim_t ow,
                dim_t ratio) {
  RoiGrid g;
  double off = half ? 0.5 : 0.0;
  g.x1 = box[0] * scale - off;
  g.y1 = box[1] * scale - off;
  double rw = box[2] * scale - off - g.x1, rh = box[3] * scale - off - g.y1;
  if (!half) {
    rw = std::max(rw, 1.0);
    rh = std::max(rh, 1.0);
  }
  g.bh = rh / double(oh);
  g.bw = rw / double(ow);
  // With half pixels a region may have a negative size: no samples (as the CPU kernel);
  // NaN too. Converting a negative double to dim_t would be undefined.
  auto samples = [&](double size, dim_t bins) -> dim_t {
    double n = std::ceil(size / double(bins));
    return ratio ? ratio : (n > 0 ? dim_t(n) : 0);
  };
  g.gh = samples(rh, oh);
  g.gw = samples(rw, ow);
  g.count = double(std::max<dim_t>(g.gh * g.gw, 1));
  return g;
}

/// The bilinear sample of an H x W plane at (sy, sx): 0 outside [-1, size], otherwise
/// clamped into the plane; in max mode the largest of the four weighted corners.
template <class T>
double roiSample(const T *img, dim_t H, dim_t W, double sy, double sx, bool isMax) {
  if (sy < -1.0 || sy > double(H) || sx < -1.0 || sx > double(W))
    return 0.0;
  auto px = [&](dim_t yy, dim_t xx) { return double(float(img[yy * W + xx])); };
  double yy = std::max(sy, 0.0), xx = std::max(sx, 0.0);
  dim_t yl = dim_t(yy), xl = dim_t(xx), yh, xh;
  if (yl >= H - 1) {
    yh = yl = H - 1;
    yy = double(yl);
  } else {
    yh = yl + 1;
  }
  if (xl >= W - 1) {
    xh = xl = W - 1;
    xx = double(xl);
  } else {
    xh = xl + 1;
  }
  double ly = yy - double(yl), lx = xx - double(xl), hy = 1 - ly, hx = 1 - lx;
  double w1 = hy * hx * px(yl, xl), w2 = hy * lx * px(yl, xh), w3 = ly * hx * px(yh, xl),
         w4 = ly * lx * px(yh, xh);
  return isMax ? std::max(std::max(w1, w2), std::max(w3, w4)) : w1 + w2 + w3 + w4;
}

/// The oh x ow bins of one region over one H x W plane into y: the average of each bin's
/// samples, or their maximum in max mode.
template <class T>
void roiAlignPlane(T *y, const T *img, dim_t H, dim_t W, const RoiGrid &g, dim_t oh, dim_t ow,
                   bool isMax) {
  for (dim_t ph = 0; ph < oh; ph++)
    for (dim_t pw = 0; pw < ow; pw++) {
      double acc = 0;
      bool first = true;
      for (dim_t iy = 0; iy < g.gh; iy++) {
        double sy = g.y1 + double(ph) * g.bh + (double(iy) + 0.5) * g.bh / double(g.gh);
        for (dim_t ix = 0; ix < g.gw; ix++) {
          double sx = g.x1 + double(pw) * g.bw + (double(ix) + 0.5) * g.bw / double(g.gw);
          double v = roiSample(img, H, W, sy, sx, isMax);
          acc = isMax ? (first ? v : std::max(acc, v)) : acc + v;
          first = false;
        }
      }
      y[ph * ow + pw] = T(float(isMax ? acc : acc / g.count));
    }
}

} // namespace

/// As ONNX's reference (and ONNX Runtime): samples outside [-1, size] count as 0; others
/// are clamped into the image and interpolated bilinearly; max mode takes, per sample, the
/// largest of the four weighted corners.
Error InterpreterRun::fwdRoiAlign(const RoiAlignInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &in = getTensor(I->getInput());
  const Tensor &rois = getTensor(I->getRois());
  const Tensor &bidx = getTensor(I->getBatchIndices());
  if (in.getElementType() != out.getElementType() || rois.getElementType() != in.getElementType() ||
      !isIndexKind(bidx.getElementType()))
    return unsupportedKinds(I);
  const Dims &id = in.dims(), &rd = rois.dims();
  const dim_t oh = I->getOutputHeight(), ow = I->getOutputWidth();
  if (id.size() != 4 || rd.size() != 2 || rd[1] != 4 || bidx.size() != rd[0] ||
      out.dims() != Dims({rd[0], id[1], oh, ow}))
    return operandError(I, "Input ", in.getType().toString(), ", Rois ",
                        rois.getType().toString(), " and result ", out.getType().toString(),
                        " do not fit");
  const dim_t N = id[0], C = id[1], H = id[2], W = id[3];
  const bool isMax = I->getMode() == "max", half = I->getHalfPixel();
  const double scale = I->getSpatialScale();
  const dim_t ratio = I->getSamplingRatio();
  return dispatchFloat(I, in.getElementType(), [&](auto tag) -> Error {
    using T = typename decltype(tag)::type;
    const T *x = elems<T>(in), *r = elems<T>(rois);
    T *y = elems<T>(out);
    for (dim_t k = 0; k < rd[0]; k++) {
      int64_t b = bidx.getElementType() == ElemKind::Int64I ? elems<int64_t>(bidx)[k]
                                                             : elems<int32_t>(bidx)[k];
      if (b < 0 || b >= int64_t(N))
        return makeError(ErrorCode::InvalidArgument, "RoiAlign '", I->getName(),
                         "': batch index ", b, " of region ", k, " is out of range for ",
                         in.getType().toString());
      double box[4];
      for (int i = 0; i < 4; i++)
        box[i] = double(float(r[k * 4 + i]));
      RoiGrid g = roiGrid(box, scale, half, oh, ow, ratio);
      for (dim_t c = 0; c < C; c++)
        roiAlignPlane(y + (k * C + c) * oh * ow, x + (dim_t(b) * C + c) * H * W, H, W, g, oh,
                      ow, isMax);
    }
    return Error::success();
  });
}

} // namespace kiln
