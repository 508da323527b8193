// GridSample and RoiAlign, both f32. GridSample (PyTorch's grid_sample semantics):
// bilinear, nearest (half to even) and bicubic (A = -0.75) sampling of [N, C, H, W] at the
// points of a [N, oH, oW, 2] grid, with zeros, border or reflection padding. Coordinates
// and weights are computed in double, the result rounded to float once, as the
// Interpreter does.
#include "libjit.h"

namespace libjit {
namespace {

enum Mode : int64_t { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum Padding : int64_t { kZeros = 0, kBorder = 1, kReflection = 2 };

LIBJIT_INLINE double clampD(double x, double lo, double hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}

/// \p x reflected into [twiceLow / 2, twiceHigh / 2] (the bounds are passed doubled so
/// that half-pixel bounds stay integers).
LIBJIT_INLINE double reflect(double x, double twiceLow, double twiceHigh) {
  if (twiceLow == twiceHigh)
    return 0;
  double lo = twiceLow / 2, span = (twiceHigh - twiceLow) / 2;
  double dist = __builtin_fabs(x - lo);
  double rem = __builtin_fmod(dist, span);
  double turns = __builtin_floor(dist / span);
  return __builtin_fmod(turns, 2.0) == 0 ? lo + rem : lo + span - rem;
}

/// A source coordinate along a dim of \p size under the padding mode.
LIBJIT_INLINE double padded(double x, int64_t size, int64_t pad, bool align) {
  if (pad == kZeros)
    return x;
  if (pad == kReflection)
    x = align ? reflect(x, 0, 2.0 * double(size - 1)) : reflect(x, -1, 2.0 * double(size) - 1);
  return clampD(x, 0.0, double(size - 1));
}

/// The cubic convolution weight of a tap at distance t (near: |t| <= 1).
LIBJIT_INLINE double cubic(double t, bool near) {
  const double a = -0.75;
  return near ? ((a + 2) * t - (a + 3)) * t * t + 1
              : ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
}

} // namespace
} // namespace libjit

using namespace libjit;

LIBJIT_EXPORT void libjit_grid_sample_f32(float *dst, const float *src, const float *grid,
                                          int64_t N, int64_t C, int64_t H, int64_t W,
                                          int64_t oH, int64_t oW, int64_t mode, int64_t pad,
                                          int64_t alignCorners) {
  const bool align = alignCorners != 0;
  for (int64_t n = 0; n < N; n++) {
    const float *img = src + n * C * H * W;
    // A pixel of plane c, 0 outside the image.
    auto pixel = [&](int64_t c, int64_t h, int64_t w) -> double {
      if (h < 0 || w < 0 || h >= H || w >= W)
        return 0;
      return double(img[(c * H + h) * W + w]);
    };
    for (int64_t i = 0; i < oH; i++)
      for (int64_t j = 0; j < oW; j++) {
        const float *g = grid + ((n * oH + i) * oW + j) * 2;
        double gx = double(g[0]), gy = double(g[1]);
        double sx = align ? (gx + 1) / 2 * double(W - 1) : ((gx + 1) * double(W) - 1) / 2;
        double sy = align ? (gy + 1) / 2 * double(H - 1) : ((gy + 1) * double(H) - 1) / 2;
        float *out = dst + (n * C * oH + i) * oW + j;
        if (mode == kBicubic) {
          double fx = __builtin_floor(sx), fy = __builtin_floor(sy);
          double tx = sx - fx, ty = sy - fy;
          double wx[4] = {cubic(tx + 1, false), cubic(tx, true), cubic(1 - tx, true),
                          cubic(2 - tx, false)};
          double wy[4] = {cubic(ty + 1, false), cubic(ty, true), cubic(1 - ty, true),
                          cubic(2 - ty, false)};
          int64_t ty4[4], tx4[4];
          for (int a = 0; a < 4; a++) {
            ty4[a] = int64_t(padded(fy - 1 + a, H, pad, align));
            tx4[a] = int64_t(padded(fx - 1 + a, W, pad, align));
          }
          for (int64_t c = 0; c < C; c++) {
            double v = 0;
            for (int a = 0; a < 4; a++)
              for (int b = 0; b < 4; b++)
                v += wy[a] * wx[b] * pixel(c, ty4[a], tx4[b]);
            out[c * oH * oW] = float(v);
          }
          continue;
        }
        double px = padded(sx, W, pad, align), py = padded(sy, H, pad, align);
        if (mode == kNearest) {
          // nearbyint: the default rounding mode, half to even.
          int64_t h = int64_t(__builtin_nearbyint(py)), w = int64_t(__builtin_nearbyint(px));
          for (int64_t c = 0; c < C; c++)
            out[c * oH * oW] = float(pixel(c, h, w));
          continue;
        }
        double x0 = __builtin_floor(px), y0 = __builtin_floor(py);
        double lx = px - x0, ly = py - y0;
        int64_t ix = int64_t(x0), iy = int64_t(y0);
        for (int64_t c = 0; c < C; c++) {
          double v = (1 - ly) * ((1 - lx) * pixel(c, iy, ix) + lx * pixel(c, iy, ix + 1)) +
                     ly * ((1 - lx) * pixel(c, iy + 1, ix) + lx * pixel(c, iy + 1, ix + 1));
          out[c * oH * oW] = float(v);
        }
      }
  }
}

/// RoiAlign (ONNX's definition, as the operator table describes it): region k of rois
/// [R, 4] (x1, y1, x2, y2) in image bidx[k] of src [N, C, H, W], scaled, less `offset`
/// (0.5 with half pixels); regions are at least 1x1 without half pixels; each of the
/// oH x oW bins averages (or, isMax, takes the largest of) gh x gw bilinear samples
/// (ratio, or ceil(bin size) when 0). Samples outside [-1, size] are 0; in max mode a sample
/// is its largest weighted corner. A batch index outside [0, N) stops the kernel and sets
/// status to {id, region, index}.
namespace libjit {
namespace {
template <class I>
LIBJIT_INLINE void roiAlign(float *dst, const float *src, const float *rois, const I *bidx, int64_t R, int64_t N,
         int64_t C, int64_t H, int64_t W, int64_t oH, int64_t oW, int64_t ratio, double scale,
         double offset, bool half, bool isMax, int64_t *status, int64_t id) {
  for (int64_t k = 0; k < R; k++) {
    int64_t b = int64_t(bidx[k]);
    if (b < 0 || b >= N) {
      if (status[0] == 0) {
        status[0] = id;
        status[1] = k;
        status[2] = b;
      }
      return;
    }
    double x1 = double(rois[k * 4]) * scale - offset, y1 = double(rois[k * 4 + 1]) * scale - offset;
    double x2 = double(rois[k * 4 + 2]) * scale - offset;
    double y2 = double(rois[k * 4 + 3]) * scale - offset;
    double rw = x2 - x1, rh = y2 - y1;
    if (!half) {
      rw = rw < 1.0 ? 1.0 : rw;
      rh = rh < 1.0 ? 1.0 : rh;
    }
    double bh = rh / double(oH), bw = rw / double(oW);
    // A negative (half pixels) or NaN region size gives no samples, as the Interpreter;
    // clamped before the conversion, which is undefined for them.
    double ch = __builtin_ceil(rh / double(oH)), cw = __builtin_ceil(rw / double(oW));
    int64_t gh = ratio ? ratio : (ch > 0 ? int64_t(ch) : 0);
    int64_t gw = ratio ? ratio : (cw > 0 ? int64_t(cw) : 0);
    double count = double(gh * gw > 1 ? gh * gw : 1);
    for (int64_t c = 0; c < C; c++) {
      const float *img = src + (b * C + c) * H * W;
      for (int64_t ph = 0; ph < oH; ph++)
        for (int64_t pw = 0; pw < oW; pw++) {
          double acc = 0;
          bool first = true;
          for (int64_t iy = 0; iy < gh; iy++) {
            double sy = y1 + double(ph) * bh + (double(iy) + 0.5) * bh / double(gh);
            for (int64_t ix = 0; ix < gw; ix++) {
              double sx = x1 + double(pw) * bw + (double(ix) + 0.5) * bw / double(gw);
              double v = 0;
              if (!(sy < -1.0 || sy > double(H) || sx < -1.0 || sx > double(W))) {
                double yy = sy < 0 ? 0.0 : sy, xx = sx < 0 ? 0.0 : sx;
                int64_t y0 = int64_t(yy), x0 = int64_t(xx), y1i, x1i;
                if (y0 >= H - 1) {
                  y0 = y1i = H - 1;
                  yy = double(y0);
                } else {
                  y1i = y0 + 1;
                }
                if (x0 >= W - 1) {
                  x0 = x1i = W - 1;
                  xx = double(x0);
                } else {
                  x1i = x0 + 1;
                }
                double ly = yy - double(y0), lx = xx - double(x0), hy = 1 - ly, hx = 1 - lx;
                double w1 = hy * hx * double(img[y0 * W + x0]);
                double w2 = hy * lx * double(img[y0 * W + x1i]);
                double w3 = ly * hx * double(img[y1i * W + x0]);
                double w4 = ly * lx * double(img[y1i * W + x1i]);
                if (isMax) {
                  double m1 = w1 < w2 ? w2 : w1, m2 = w3 < w4 ? w4 : w3;
                  v = m1 < m2 ? m2 : m1;
                } else {
                  v = w1 + w2 + w3 + w4;
                }
              }
              acc = isMax ? (first || acc < v ? v : acc) : acc + v;
              first = false;
            }
          }
          dst[((k * C + c) * oH + ph) * oW + pw] = float(isMax ? acc : acc / count);
        }
    }
  }
}

} // namespace
} // namespace libjit

#define LIBJIT_ROIALIGN_ENTRY(ISUFFIX, I)                                                   \
  LIBJIT_EXPORT void libjit_roi_align_f32_##ISUFFIX(                                         \
      float *dst, const float *src, const float *rois, const I *bidx, int64_t R, int64_t N,  \
      int64_t C, int64_t H, int64_t W, int64_t oH, int64_t oW, int64_t ratio, double scale,  \
      int64_t halfPixel, int64_t isMax, int64_t *status, int64_t id) {                       \
    roiAlign<I>(dst, src, rois, bidx, R, N, C, H, W, oH, oW, ratio, scale,                   \
                halfPixel ? 0.5 : 0.0, halfPixel != 0, isMax != 0, status, id);              \
  }
LIBJIT_ROIALIGN_ENTRY(i32, int32_t)
LIBJIT_ROIALIGN_ENTRY(i64, int64_t)
