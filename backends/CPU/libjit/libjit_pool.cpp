// Pooling on NCHW float32. Work splits over the N*C planes. 3-wide stride-2 windows with no
// left padding are computed in registers (poolRow3x2). Other output rows take two
// vectorised passes: the window's input rows are reduced column-wise into a padded row
// buffer (pad cells hold the reduction's identity, so windows need no bounds checks), then
// each output takes the reduction of KW buffer cells, 16 outputs at a time; stride 2 reads
// 32 consecutive cells and splits them into even and odd columns.
#include "libjit.h"
#include "libjit_vec.h"

using namespace libjit;

namespace {

/// Cells of the padded row buffer: every column any window (or a full vector block of
/// 16 windows) reads, and 32 cells of slack for the stride-2 loads that run past it.
LIBJIT_INLINE int64_t poolRowCells(int64_t OW, int64_t KW, int64_t SW) {
  int64_t span = (maxI(OW, 16) - 1) * SW + KW;
  return (span + 32 + 15) / 16 * 16;
}

/// Both reductions start from their identity, so the max drops NaNs like the Interpreter's
/// std::max(acc, v) chain does.
struct MaxOp {
  static float identity() { return -__builtin_inff(); }
  static inline float apply(float acc, float v) { return v > acc ? v : acc; }
  static inline F16 apply(F16 acc, F16 v) { return v > acc ? v : acc; }
};
struct SumOp {
  static float identity() { return 0.0f; }
  static inline float apply(float a, float b) { return a + b; }
  static inline F16 apply(F16 a, F16 b) { return a + b; }
};

/// t[PL + w] = op over rows [hb, he) of x[.][w], for the columns w < n.
template <class Op>
LIBJIT_INLINE void reduceRows(float *__restrict t, const float *__restrict x, int64_t W, int64_t hb,
                              int64_t he, int64_t n) {
  float *d = t;
  const float *r0 = x + hb * W;
  if (he <= hb) {
    for (int64_t w = 0; w < n; w++)
      d[w] = Op::identity();
    return;
  }
  if (n >= 16) {
    for (int64_t w0 = 0;; w0 += 16) {
      // The last block overlaps the previous one instead of running past the row.
      int64_t w = minI(w0, n - 16);
      F16 acc = splat16(Op::identity());
      for (int64_t h = 0; h < he - hb; h++)
        acc = Op::apply(acc, ld16(r0 + h * W + w));
      st16(d + w, acc);
      if (w0 + 16 >= n)
        break;
    }
    return;
  }
  for (int64_t w = 0; w < n; w++) {
    float acc = Op::identity();
    for (int64_t h = 0; h < he - hb; h++)
      acc = Op::apply(acc, r0[h * W + w]);
    d[w] = acc;
  }
}

/// 16 outputs j0 .. j0+15 of the row: op over t[(j0 + i) * SW + kw], kw < KW (SW 1 or 2).
template <class Op>
LIBJIT_INLINE F16 windowBlock(const float *t, int64_t j0, int64_t KW, int64_t SW) {
  if (SW == 1) {
    const float *s = t + j0;
    F16 acc = splat16(Op::identity());
    for (int64_t kw = 0; kw < KW; kw++)
      acc = Op::apply(acc, ld16(s + kw));
    return acc;
  }
  const float *s = t + 2 * j0;
  F16 acc = splat16(Op::identity());
  for (int64_t kw = 0; kw < KW; kw += 2) {
    F32x v = ld32(s + kw);
    acc = Op::apply(acc, evens(v));
    if (kw + 1 < KW)
      acc = Op::apply(acc, odds(v));
  }
  return acc;
}

/// Columns [c0, c0 + 16) of the reduction of rows [hb, he) of the plane x (W columns,
/// c0 >= 0), the identity in lanes at or past column W. \p end bounds the readable input:
/// a vector that would cross it goes through a copy.
template <class Op>
LIBJIT_INLINE F16 reducedColumns(const float *x, int64_t W, int64_t hb, int64_t he, int64_t c0,
                                 const float *end) {
  typedef int32_t I16 __attribute__((vector_size(64)));
  F16 acc = splat16(Op::identity());
  int64_t n = W - c0;
  if (n <= 0)
    return acc;
  F16 id = acc;
  const I16 lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  for (int64_t h = hb; h < he; h++) {
    const float *p = x + h * W + c0;
    F16 v;
    if (n >= 16) {
      v = ld16(p);
    } else {
      if (p + 16 <= end) {
        v = ld16(p);
      } else {
        float buf[16];
        for (int64_t i = 0; i < 16; i++)
          buf[i] = i < n ? p[i] : 0.0f;
        v = ld16(buf);
      }
      v = lane < (int32_t)n ? v : id;
    }
    acc = Op::apply(acc, v);
  }
  return acc;
}

/// One output row of 3-wide stride-2 windows with no left padding (squeezenet's and
/// alexnet's max pools), in registers: the row-buffer path stores the reduced row and
/// reloads it at odd offsets, measured 18-33% slower (kernel_bench). The window rows'
/// column-wise reduction, 16 columns per vector; the even and odd columns of two vectors
/// are the windows' columns 0 and 1, and the evens moved one lane down, with the next
/// vector's first column in the last lane, are column 2. (Padded and 2-wide windows
/// measured slower this way: they keep the row buffer.)
template <class Op, class Fin>
LIBJIT_INLINE void poolRow3x2(float *yr, const float *x, int64_t W, int64_t hb, int64_t he,
                              int64_t OW, int64_t vcnt, const float *end, const Fin &fin) {
  F16 a = reducedColumns<Op>(x, W, hb, he, 0, end);
  for (int64_t j0 = 0; j0 < OW; j0 += 16) {
    F16 b = reducedColumns<Op>(x, W, hb, he, 2 * j0 + 16, end);
    F16 c = reducedColumns<Op>(x, W, hb, he, 2 * j0 + 32, end);
    F16 e = __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    F16 o = __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    F16 e2 = __builtin_shufflevector(e, c, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
    F16 r = Op::apply(Op::apply(e, o), e2);
    fin(r, j0, vcnt);
    if (j0 + 16 <= OW) {
      st16(yr + j0, r);
    } else {
      float buf[16];
      st16(buf, r);
      for (int64_t j = j0; j < OW; j++)
        yr[j] = buf[j - j0];
    }
    a = c;
  }
}

/// The shared pooling loop. Fin maps a block of 16 window results (outputs j0..j0+15 of
/// row oh, whose window has vcnt valid rows) to outputs. Regs: every row by poolRow3x2
/// (a separate instantiation, so that the row-buffer loop compiles as it does alone).
template <class Op, bool Regs, class Fin>
LIBJIT_INLINE void poolPlanesImpl(float *dst, const float *src, int64_t N, int64_t C, int64_t H,
                              int64_t W, int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH,
                              int64_t SW, int64_t PT, int64_t PL, float *t, const Fin &fin,
                              int64_t tid, int64_t nthreads) {
  int64_t p0, p1;
  partition(N * C, 1, tid, nthreads, &p0, &p1);
  if (p0 >= p1)
    return;
  int64_t cells = poolRowCells(OW, KW, SW);
  for (int64_t i = 0; i < cells; i++)
    t[i] = Op::identity();
  // Input columns that land in the buffer: [0, n) at cells [PL, PL + n).
  int64_t n = maxI(0, minI(W, cells - 32 - PL));
  float *tail = t + cells; // 16 outputs of a row shorter than one block
  bool vec = SW <= 2;
  const float *end = src + N * C * H * W;
  for (int64_t p = p0; p < p1; p++) {
    const float *x = src + p * H * W;
    float *y = dst + p * OH * OW;
    for (int64_t oh = 0; oh < OH; oh++) {
      int64_t h0 = oh * SH - PT;
      int64_t hb = maxI(h0, 0), he = minI(h0 + KH, H);
      float *yr = y + oh * OW;
      int64_t vcnt = maxI(he - hb, 0);
      if (Regs) {
        poolRow3x2<Op>(yr, x, W, hb, he, OW, vcnt, end, fin);
        continue;
      }
      reduceRows<Op>(t + PL, x, W, hb, he, n);
      if (!vec) {
        for (int64_t j = 0; j < OW; j++) {
          float acc = Op::identity();
          for (int64_t kw = 0; kw < KW; kw++)
            acc = Op::apply(acc, t[j * SW + kw]);
          F16 b = splat16(acc);
          fin(b, j, vcnt);
          yr[j] = b[0];
        }
        continue;
      }
      if (OW < 16) {
        F16 b = windowBlock<Op>(t, 0, KW, SW);
        fin(b, 0, vcnt);
        st16(tail, b);
        for (int64_t j = 0; j < OW; j++)
          yr[j] = tail[j];
        continue;
      }
      for (int64_t j0 = 0;; j0 += 16) {
        int64_t j = minI(j0, OW - 16);
        F16 b = windowBlock<Op>(t, j, KW, SW);
        fin(b, j, vcnt);
        st16(yr + j, b);
        if (j0 + 16 >= OW)
          break;
      }
    }
  }
}

/// The 32 floats at p, through a copy when they would run past \p end (the lanes past it
/// are 0: the callers drop their results).
LIBJIT_INLINE F32x ld32Bounded(const float *p, const float *end) {
  if (p + 32 <= end)
    return ld32(p);
  float buf[32];
  for (int64_t i = 0; i < 32; i++)
    buf[i] = p + i < end ? p[i] : 0.0f;
  return ld32(buf);
}

/// 2x2 stride-2 windows with no pads, every window inside the image (densenet121's average
/// pools, VGG's max pools), in registers: per block of 16 outputs the two input rows' 32
/// columns combined, then their even and odd columns, from the identity in the row path's
/// order (so max drops NaNs alike and sums round alike). Output rows narrower than 16 are
/// stored as whole vectors, ascending, each overrun rewritten by the next row; the last
/// row of the thread's last plane through a copy. The row path spent its time on the row
/// buffer and the scalar loops of rows under 16.
template <class Op, class Fin>
LIBJIT_INLINE void pool2x2Planes(float *dst, const float *src, int64_t N, int64_t C, int64_t H,
                                 int64_t W, int64_t OH, int64_t OW, const Fin &fin, int64_t tid,
                                 int64_t nthreads) {
  int64_t p0, p1;
  partition(N * C, 1, tid, nthreads, &p0, &p1);
  const float *end = src + N * C * H * W;
  float *yEnd = dst + p1 * OH * OW;
  const F16 idv = splat16(Op::identity());
  for (int64_t p = p0; p < p1; p++) {
    for (int64_t oh = 0; oh < OH; oh++) {
      const float *r0 = src + p * H * W + 2 * oh * W;
      float *yr = dst + (p * OH + oh) * OW;
      for (int64_t j0 = 0;; j0 += 16) {
        // The last block of a row of 16 or more overlaps its predecessor.
        int64_t j = OW >= 16 ? minI(j0, OW - 16) : 0;
        F32x a = ld32Bounded(r0 + 2 * j, end), b = ld32Bounded(r0 + W + 2 * j, end);
        F16 c0 = Op::apply(Op::apply(idv, evens(a)), evens(b));
        F16 c1 = Op::apply(Op::apply(idv, odds(a)), odds(b));
        F16 r = Op::apply(Op::apply(idv, c0), c1);
        fin(r, j, 2);
        if (yr + j + 16 <= yEnd) {
          st16(yr + j, r);
        } else {
          float t[16];
          st16(t, r);
          for (int64_t i = 0; i < minI(16, OW - j); i++)
            yr[j + i] = t[i];
        }
        if (j0 + 16 >= OW)
          break;
      }
    }
  }
}

template <class Op, class Fin>
LIBJIT_INLINE void poolPlanes(float *dst, const float *src, int64_t N, int64_t C, int64_t H,
                              int64_t W, int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH,
                              int64_t SW, int64_t PT, int64_t PL, float *t, const Fin &fin,
                              int64_t tid, int64_t nthreads) {
  if (KH == 2 && KW == 2 && SH == 2 && SW == 2 && PT == 0 && PL == 0 && 2 * OH <= H &&
      2 * OW <= W) {
    pool2x2Planes<Op>(dst, src, N, C, H, W, OH, OW, fin, tid, nthreads);
    return;
  }
  if (SW == 2 && KW == 3 && PL == 0)
    poolPlanesImpl<Op, true>(dst, src, N, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, t, fin, tid,
                             nthreads);
  else
    poolPlanesImpl<Op, false>(dst, src, N, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, t, fin, tid,
                              nthreads);
}

/// Windows of stride 1 whose output plane is the input's size ("same" pooling: inception's
/// 3x3 average pools, googlenet's 3x3 max pools) on planes of up to kFlatMaxCells cells run
/// on the flat plane instead of row by row, where small rows (8 to 35 columns) spent more
/// time in per-row loop control than in arithmetic: output cell p = oh W + ow, 16 at a
/// time across row ends. The plane is copied between PT rows of the identity above and
/// KH - 1 - PT below, so the column-wise reduction of cell p is over the KH cells p + kh W
/// (rows outside the image read the identity), in the row path's order; then the
/// reduction of the KW column results p + kw - PL, each masked to the identity where its
/// column leaves the image (the row path's identity cells). The same operations in the same
/// order as the row path, so the same results.
constexpr int64_t kFlatMaxCells = 4096;
constexpr int64_t kFlatMaxK = 8;

/// The shapes the flat path takes (the scratch is sized for them, whatever the pads).
LIBJIT_INLINE bool flatShape(int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t KH,
                             int64_t KW, int64_t SH, int64_t SW) {
  return SH == 1 && SW == 1 && OH == H && OW == W && H * W >= 16 && H * W <= kFlatMaxCells &&
         KH <= kFlatMaxK && KW <= kFlatMaxK;
}
LIBJIT_INLINE bool flatPool(int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t KH, int64_t KW,
                            int64_t SH, int64_t SW, int64_t PT, int64_t PL) {
  return flatShape(H, W, OH, OW, KH, KW, SH, SW) && PT >= 0 && PT < KH && PL >= 0 && PL < KW;
}

/// The flat path's scratch: the padded plane, the column results between 16 cells of
/// margin on each side, KW masks and one divisor per cell.
struct FlatPoolGeom {
  int64_t planeFloats, colFloats, cells;
  FlatPoolGeom(int64_t H, int64_t W, int64_t KH) {
    cells = H * W;
    planeFloats = ((H + KH) * W + 32 + 15) / 16 * 16;
    colFloats = (cells + 48 + 15) / 16 * 16;
  }
  int64_t floats(int64_t KW) const { return planeFloats + colFloats + (KW + 1) * cells + 16; }
};

/// \p Div: 0 none (max), 1 the constant \p d, 2 the cell's divisor from the table (average
/// without the pads: 0 where no cell of the window is in the image, as the row path).
template <class Op, int Div>
LIBJIT_INLINE void flatPoolPlanes(float *dst, const float *src, int64_t N, int64_t C, int64_t H,
                                  int64_t W, int64_t KH, int64_t KW, int64_t PT, int64_t PL,
                                  float d, float *t, int64_t tid, int64_t nthreads) {
  int64_t p0, p1;
  partition(N * C, 1, tid, nthreads, &p0, &p1);
  if (p0 >= p1)
    return;
  FlatPoolGeom g(H, W, KH);
  const int64_t cells = g.cells;
  float *xb = t, *vb = t + g.planeFloats;
  uint32_t *mask = reinterpret_cast<uint32_t *>(vb + g.colFloats);
  float *div = vb + g.colFloats + KW * cells;
  const float id = Op::identity();
  for (int64_t i = 0; i < g.planeFloats; i++)
    xb[i] = id;
  for (int64_t i = 0; i < g.colFloats; i++)
    vb[i] = id;
  for (int64_t kw = 0; kw < KW; kw++)
    for (int64_t p = 0; p < cells; p++) {
      int64_t c = p % W + kw - PL;
      mask[kw * cells + p] = c >= 0 && c < W ? ~0u : 0u;
    }
  if (Div == 2)
    for (int64_t p = 0; p < cells; p++) {
      int64_t h0 = p / W - PT, w0 = p % W - PL;
      int64_t rows = maxI(0, minI(h0 + KH, H) - maxI(h0, 0));
      int64_t cols = maxI(0, minI(w0 + KW, W) - maxI(w0, 0));
      div[p] = float(cols) * float(rows);
    }
  typedef uint32_t U16 __attribute__((vector_size(64)));
  const F16 idv = splat16(id), dv = splat16(d), zero = splat16(0.0f);
  float *plane = xb + PT * W, *col = vb + 16;
  for (int64_t q = p0; q < p1; q++) {
    const float *x = src + q * cells;
    float *y = dst + q * cells;
    for (int64_t i = 0;; i += 16) {
      int64_t p = minI(i, cells - 16);
      st16(plane + p, ld16(x + p));
      if (i + 16 >= cells)
        break;
    }
    for (int64_t i = 0;; i += 16) {
      int64_t p = minI(i, cells - 16);
      F16 acc = idv;
      for (int64_t kh = 0; kh < KH; kh++)
        acc = Op::apply(acc, ld16(xb + p + kh * W));
      st16(col + p, acc);
      if (i + 16 >= cells)
        break;
    }
    for (int64_t i = 0;; i += 16) {
      int64_t p = minI(i, cells - 16);
      F16 acc = idv;
      for (int64_t kw = 0; kw < KW; kw++) {
        U16 m;
        __builtin_memcpy(&m, mask + kw * cells + p, sizeof(m));
        F16 v = ld16(col + p + kw - PL);
        acc = Op::apply(acc, m != 0u ? v : idv);
      }
      if (Div == 1)
        acc = acc / dv;
      if (Div == 2) {
        F16 dd = ld16(div + p);
        acc = dd > zero ? acc / dd : zero;
      }
      st16(y + p, acc);
      if (i + 16 >= cells)
        break;
    }
  }
}

} // namespace

LIBJIT_EXPORT int64_t libjit_pool_scratch_floats(int64_t H, int64_t W, int64_t OH, int64_t OW,
                                                 int64_t KH, int64_t KW, int64_t SH, int64_t SW,
                                                 int64_t DH, int64_t DW) {
  (void)DH, (void)DW;
  // Row buffer, one block of outputs, and the column divisors of average pooling; or the
  // flat path's buffers.
  int64_t rows = poolRowCells(OW, KW, SW) + 16 + (OW + 31) / 16 * 16;
  if (flatShape(H, W, OH, OW, KH, KW, SH, SW))
    rows = maxI(rows, FlatPoolGeom(H, W, KH).floats(KW));
  return rows;
}

LIBJIT_EXPORT void libjit_maxpool_f32(float *dst, const float *src, int64_t N, int64_t C, int64_t H,
                                      int64_t W, int64_t OH, int64_t OW, int64_t KH, int64_t KW,
                                      int64_t SH, int64_t SW, int64_t PT, int64_t PL,
                                      float *scratch, int64_t tid, int64_t nthreads) {
  float *t = scratch + tid * libjit_pool_scratch_floats(H, W, OH, OW, KH, KW, SH, SW, 1, 1);
  if (flatPool(H, W, OH, OW, KH, KW, SH, SW, PT, PL)) {
    flatPoolPlanes<MaxOp, 0>(dst, src, N, C, H, W, KH, KW, PT, PL, 1.0f, t, tid, nthreads);
    return;
  }
  auto fin = [](F16 &, int64_t, int64_t) {};
  poolPlanes<MaxOp>(dst, src, N, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, t, fin, tid, nthreads);
}

namespace {

template <typename T> struct IntMin;
template <> struct IntMin<int32_t> { static constexpr int32_t value = -2147483647 - 1; };
template <> struct IntMin<int64_t> {
  static constexpr int64_t value = -9223372036854775807LL - 1;
};

template <typename T>
LIBJIT_INLINE void maxPoolInt(T *dst, const T *src, int64_t N, int64_t C, int64_t H, int64_t W,
                              int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH,
                              int64_t SW, int64_t PT, int64_t PL, int64_t tid,
                              int64_t nthreads) {
  int64_t p0, p1;
  partition(N * C, 1, tid, nthreads, &p0, &p1);
  for (int64_t p = p0; p < p1; p++) {
    const T *x = src + p * H * W;
    T *y = dst + p * OH * OW;
    for (int64_t i = 0; i < OH; i++) {
      int64_t h0 = maxI(i * SH - PT, 0), h1 = minI(i * SH - PT + KH, H);
      for (int64_t j = 0; j < OW; j++) {
        int64_t w0 = maxI(j * SW - PL, 0), w1 = minI(j * SW - PL + KW, W);
        T m = IntMin<T>::value;
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++)
            m = x[h * W + w] > m ? x[h * W + w] : m;
        y[i * OW + j] = m;
      }
    }
  }
}

} // namespace

#define LIBJIT_DEFINE_INT_MAXPOOL(K, T)                                                     \
  LIBJIT_EXPORT void libjit_maxpool_##K(T *dst, const T *src, int64_t N, int64_t C,         \
                                        int64_t H, int64_t W, int64_t OH, int64_t OW,       \
                                        int64_t KH, int64_t KW, int64_t SH, int64_t SW,     \
                                        int64_t PT, int64_t PL, int64_t tid,                \
                                        int64_t nthreads) {                                 \
    maxPoolInt<T>(dst, src, N, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, tid, nthreads);     \
  }
LIBJIT_DEFINE_INT_MAXPOOL(i32, int32_t)
LIBJIT_DEFINE_INT_MAXPOOL(i64, int64_t)
#undef LIBJIT_DEFINE_INT_MAXPOOL

/// Average pooling: the window sum over KH * KW when countIncludePads, else over the
/// window's cells inside the image (0 when there are none).
LIBJIT_EXPORT void libjit_avgpool_f32(float *dst, const float *src, int64_t N, int64_t C, int64_t H,
                                      int64_t W, int64_t OH, int64_t OW, int64_t KH, int64_t KW,
                                      int64_t SH, int64_t SW, int64_t PT, int64_t PL,
                                      int64_t countIncludePads, float *scratch, int64_t tid,
                                      int64_t nthreads) {
  float *t = scratch + tid * libjit_pool_scratch_floats(H, W, OH, OW, KH, KW, SH, SW, 1, 1);
  if (flatPool(H, W, OH, OW, KH, KW, SH, SW, PT, PL)) {
    if (countIncludePads)
      flatPoolPlanes<SumOp, 1>(dst, src, N, C, H, W, KH, KW, PT, PL, float(KH * KW), t, tid,
                               nthreads);
    else
      flatPoolPlanes<SumOp, 2>(dst, src, N, C, H, W, KH, KW, PT, PL, 1.0f, t, tid, nthreads);
    return;
  }
  // Valid columns of each output's window, after the row buffer and the tail block.
  float *wcnt = t + poolRowCells(OW, KW, SW) + 16;
  for (int64_t j = 0; j < (OW + 31) / 16 * 16; j++) {
    int64_t w0 = j * SW - PL;
    wcnt[j] = j < OW ? float(maxI(0, minI(w0 + KW, W) - maxI(w0, 0))) : 1.0f;
  }
  if (countIncludePads) {
    F16 d = splat16(float(KH * KW));
    auto fin = [d](F16 &b, int64_t, int64_t) { b = b / d; };
    poolPlanes<SumOp>(dst, src, N, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, t, fin, tid, nthreads);
    return;
  }
  auto fin = [wcnt](F16 &b, int64_t j, int64_t vcnt) {
    F16 d = ld16(wcnt + j) * splat16(float(vcnt));
    F16 zero = splat16(0.0f);
    b = d > zero ? b / d : zero;
  };
  poolPlanes<SumOp>(dst, src, N, C, H, W, OH, OW, KH, KW, SH, SW, PT, PL, t, fin, tid, nthreads);
}

/// Adaptive average pooling; the global case (one output per plane) sums 16 lanes at a
/// time, so the sum does not wait on one add chain.
LIBJIT_EXPORT void libjit_adaptive_avgpool_f32(float *dst, const float *src, int64_t N, int64_t C,
                                               int64_t H, int64_t W, int64_t OH, int64_t OW,
                                               int64_t tid, int64_t nthreads) {
  int64_t p0, p1;
  partition(N * C, 1, tid, nthreads, &p0, &p1);
  for (int64_t p = p0; p < p1; p++) {
    const float *x = src + p * H * W;
    float *y = dst + p * OH * OW;
    if (OH == 1 && OW == 1) {
      int64_t n = H * W, i = 0;
      F16 acc = splat16(0.0f);
      for (; i + 16 <= n; i += 16)
        acc += ld16(x + i);
      float s = 0.0f;
      for (int l = 0; l < 16; l++)
        s += acc[l];
      for (; i < n; i++)
        s += x[i];
      y[0] = s / float(n);
      continue;
    }
    for (int64_t i = 0; i < OH; i++) {
      int64_t hb = i * H / OH, he = ceilDiv((i + 1) * H, OH);
      for (int64_t j = 0; j < OW; j++) {
        int64_t wb = j * W / OW, we = ceilDiv((j + 1) * W, OW);
        float s = 0.0f;
        for (int64_t h = hb; h < he; h++)
          for (int64_t w = wb; w < we; w++)
            s += x[h * W + w];
        y[i * OW + j] = s / float((he - hb) * (we - wb));
      }
    }
  }
}
