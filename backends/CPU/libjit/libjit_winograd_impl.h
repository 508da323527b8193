// The shared parts of the Winograd kernels (libjit_winograd.cpp, tiles as GEMM columns;
// libjit_winograd_rows.cpp, tiles as GEMM rows): lane shuffles that de-interleave a row of
// tiles and the F(4x4, 3x3) input and output transforms of one column of values. Internal
// to the kernel library.
#ifndef KILN_BACKENDS_CPU_LIBJIT_LIBJIT_WINOGRAD_IMPL_H
#define KILN_BACKENDS_CPU_LIBJIT_LIBJIT_WINOGRAD_IMPL_H

#include "libjit_gemm_impl.h"

namespace libjit {

#define WINO_INLINE inline __attribute__((always_inline))

template <int VW> struct IVecOf;
template <> struct IVecOf<16> { typedef int32_t T __attribute__((vector_size(64))); };
template <> struct IVecOf<8> { typedef int32_t T __attribute__((vector_size(32))); };

/// Lane shuffles for VW-lane vectors: de-interleaving four vectors (64 or 32 consecutive
/// floats) by stride 4, the inverse, and shifting one lane in from another vector.
template <int VW> struct Lanes;

template <> struct Lanes<16> {
  typedef VecOf<16>::T V;
  /// e[l] = x[2 l], o[l] = x[2 l + 1] where x = a0 a1.
  static WINO_INLINE void deinterleave2(V a0, V a1, V *e, V *o) {
    *e = __builtin_shufflevector(a0, a1, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    *o = __builtin_shufflevector(a0, a1, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  }
  /// e_j[l] = x[4 l + j] where x = a0 a1 a2 a3.
  static WINO_INLINE void deinterleave4(V a0, V a1, V a2, V a3, V *e) {
#define EVEN16 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30
#define ODD16 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31
    V l01 = __builtin_shufflevector(a0, a1, EVEN16), h01 = __builtin_shufflevector(a0, a1, ODD16);
    V l23 = __builtin_shufflevector(a2, a3, EVEN16), h23 = __builtin_shufflevector(a2, a3, ODD16);
    e[0] = __builtin_shufflevector(l01, l23, EVEN16);
    e[2] = __builtin_shufflevector(l01, l23, ODD16);
    e[1] = __builtin_shufflevector(h01, h23, EVEN16);
    e[3] = __builtin_shufflevector(h01, h23, ODD16);
#undef EVEN16
#undef ODD16
  }
  /// x = a0 a1 a2 a3 with x[4 l + j] = e_j[l].
  static WINO_INLINE void interleave4(const V *e, V *a) {
#define ZIPLO16 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23
#define ZIPHI16 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31
    V l01 = __builtin_shufflevector(e[0], e[2], ZIPLO16),
      l23 = __builtin_shufflevector(e[0], e[2], ZIPHI16);
    V h01 = __builtin_shufflevector(e[1], e[3], ZIPLO16),
      h23 = __builtin_shufflevector(e[1], e[3], ZIPHI16);
    a[0] = __builtin_shufflevector(l01, h01, ZIPLO16);
    a[1] = __builtin_shufflevector(l01, h01, ZIPHI16);
    a[2] = __builtin_shufflevector(l23, h23, ZIPLO16);
    a[3] = __builtin_shufflevector(l23, h23, ZIPHI16);
#undef ZIPLO16
#undef ZIPHI16
  }
  /// [e[1], ..., e[15], n[0]] and [e[1], ..., e[15], n[1]].
  static WINO_INLINE V shiftIn0(V e, V n) {
    return __builtin_shufflevector(e, n, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
  }
  static WINO_INLINE V shiftIn1(V e, V n) {
    return __builtin_shufflevector(e, n, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17);
  }
};

template <> struct Lanes<8> {
  typedef VecOf<8>::T V;
  static WINO_INLINE void deinterleave2(V a0, V a1, V *e, V *o) {
    *e = __builtin_shufflevector(a0, a1, 0, 2, 4, 6, 8, 10, 12, 14);
    *o = __builtin_shufflevector(a0, a1, 1, 3, 5, 7, 9, 11, 13, 15);
  }
  static WINO_INLINE void deinterleave4(V a0, V a1, V a2, V a3, V *e) {
#define EVEN8 0, 2, 4, 6, 8, 10, 12, 14
#define ODD8 1, 3, 5, 7, 9, 11, 13, 15
    V l01 = __builtin_shufflevector(a0, a1, EVEN8), h01 = __builtin_shufflevector(a0, a1, ODD8);
    V l23 = __builtin_shufflevector(a2, a3, EVEN8), h23 = __builtin_shufflevector(a2, a3, ODD8);
    e[0] = __builtin_shufflevector(l01, l23, EVEN8);
    e[2] = __builtin_shufflevector(l01, l23, ODD8);
    e[1] = __builtin_shufflevector(h01, h23, EVEN8);
    e[3] = __builtin_shufflevector(h01, h23, ODD8);
#undef EVEN8
#undef ODD8
  }
  static WINO_INLINE void interleave4(const V *e, V *a) {
#define ZIPLO8 0, 8, 1, 9, 2, 10, 3, 11
#define ZIPHI8 4, 12, 5, 13, 6, 14, 7, 15
    V l01 = __builtin_shufflevector(e[0], e[2], ZIPLO8),
      l23 = __builtin_shufflevector(e[0], e[2], ZIPHI8);
    V h01 = __builtin_shufflevector(e[1], e[3], ZIPLO8),
      h23 = __builtin_shufflevector(e[1], e[3], ZIPHI8);
    a[0] = __builtin_shufflevector(l01, h01, ZIPLO8);
    a[1] = __builtin_shufflevector(l01, h01, ZIPHI8);
    a[2] = __builtin_shufflevector(l23, h23, ZIPLO8);
    a[3] = __builtin_shufflevector(l23, h23, ZIPHI8);
#undef ZIPLO8
#undef ZIPHI8
  }
  static WINO_INLINE V shiftIn0(V e, V n) {
    return __builtin_shufflevector(e, n, 1, 2, 3, 4, 5, 6, 7, 8);
  }
  static WINO_INLINE V shiftIn1(V e, V n) {
    return __builtin_shufflevector(e, n, 1, 2, 3, 4, 5, 6, 7, 9);
  }
};

template <class V> LIBJIT_INLINE void inputT(const V *d, V *t) {
  V four = splatV<V>(4.0f), five = splatV<V>(5.0f), two = splatV<V>(2.0f);
  V a = d[4] - four * d[2], b = d[3] - four * d[1];
  V c = d[4] - d[2], e = two * (d[3] - d[1]);
  t[0] = (d[4] - five * d[2]) + four * d[0];
  t[1] = a + b;
  t[2] = a - b;
  t[3] = c + e;
  t[4] = c - e;
  t[5] = (d[5] - five * d[3]) + four * d[1];
}

/// y = A^T m for one column of six values.
template <class V> LIBJIT_INLINE void outputT(const V *m, V *y) {
  V s1 = m[1] + m[2], d1 = m[1] - m[2], s2 = m[3] + m[4], d2 = m[3] - m[4];
  y[0] = m[0] + s1 + s2;
  y[1] = d1 + splatV<V>(2.0f) * d2;
  y[2] = s1 + splatV<V>(4.0f) * s2;
  y[3] = (d1 + m[5]) + splatV<V>(8.0f) * d2;
}


/// G of F(4x4, 3x3): the filter transform G g G^T (done in double at compile time).
struct WinoG4 {
  static constexpr double G[6][3] = {{1.0 / 4, 0, 0},
                                     {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                     {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                     {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                     {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                     {0, 0, 1}};
};

/// y = A^T m A for one 4x4 output tile from its 36 positions m[k * 6 + c]: rows (m A), then
/// columns.
template <class V> LIBJIT_INLINE void outputTile4(const V *m, V y[4][4]) {
  V z[6][4];
  LIBJIT_UNROLL
  for (int k = 0; k < 6; k++)
    outputT(m + 6 * k, z[k]);
  LIBJIT_UNROLL
  for (int j = 0; j < 4; j++) {
    V a[6], r[4];
    LIBJIT_UNROLL
    for (int k = 0; k < 6; k++)
      a[k] = z[k][j];
    outputT(a, r);
    LIBJIT_UNROLL
    for (int i = 0; i < 4; i++)
      y[i][j] = r[i];
  }
}

/// The input rows of one chunk of tiles in one channel plane: rows ih0 + [0, NROWS) from
/// column iw0, NVEC vectors wide, zero outside the image. Vector v of a row covers columns
/// iw0 + v VW + [0, VW): all inside the image (no mask), none (zero, not loaded), or some
/// (masked). Rows whose loads could leave the input buffer [in, inEnd) go through a
/// padded copy in P (NROWS x NVEC VW floats).
template <int VW, int NROWS, int NVEC> struct ChunkRows {
  typedef typename VecOf<VW>::T V;
  typedef typename IVecOf<VW>::T IV;
  const float *rows[NROWS]; ///< null: outside the image
  IV m[NVEC];
  bool some[NVEC], none[NVEC];

  WINO_INLINE ChunkRows(const float *plane, const float *in, const float *inEnd, int64_t H,
                        int64_t W, int64_t ih0, int64_t iw0, float *P) {
    constexpr int64_t PW = NVEC * VW;
    IV lane;
    for (int l = 0; l < VW; l++)
      lane[l] = l;
    for (int v = 0; v < NVEC; v++) {
      int64_t x0 = iw0 + v * VW;
      none[v] = x0 + VW <= 0 || x0 >= W;
      some[v] = !none[v] && (x0 < 0 || x0 + VW > W);
      IV x = lane + (int32_t)x0;
      m[v] = (x >= 0) & (x < (int32_t)W);
    }
    LIBJIT_UNROLL
    for (int r = 0; r < NROWS; r++) {
      int64_t ih = ih0 + r;
      rows[r] = nullptr;
      if (ih < 0 || ih >= H)
        continue;
      const float *row = plane + ih * W + iw0;
      if (row < in || row + PW > inEnd) {
        float *pr = P + r * PW;
        int64_t xa = minI(maxI(-iw0, 0), PW), xb = maxI(minI(W - iw0, PW), xa);
        for (int64_t x = 0; x < PW; x++)
          pr[x] = x >= xa && x < xb ? row[x] : 0.0f;
        row = pr;
      }
      rows[r] = row;
    }
  }

  /// Vector v of row r.
  WINO_INLINE V at(int r, int v) const {
    V a = rows[r] && !none[v] ? loadV<V>(rows[r] + v * VW) : (V){};
    return some[v] ? (m[v] ? a : (V){}) : a;
  }
};

} // namespace libjit

#endif // KILN_BACKENDS_CPU_LIBJIT_LIBJIT_WINOGRAD_IMPL_H
