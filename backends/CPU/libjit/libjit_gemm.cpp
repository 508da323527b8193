// float32 GEMM: packing, register-blocked micro-kernels and the blocked driver, and the
// operators built on it (MatMul, BatchMatMul, FullyConnected, Convolution). Written with
// vector extensions so that LLVM emits the host's widest FMA for the variant the backend
// picks (libjit_*_avx512 on AVX-512 hosts, libjit_*_avx2 elsewhere); native builds of the
// same code are slower but compute the same values.
#include "libjit.h"
#include "libjit_gemm_config.h"

namespace libjit {
namespace {

template <int VW> struct VecOf;
template <> struct VecOf<16> { typedef float T __attribute__((vector_size(64))); };
template <> struct VecOf<8> { typedef float T __attribute__((vector_size(32))); };

template <class V> LIBJIT_INLINE V loadV(const float *p) {
  V v;
  __builtin_memcpy(&v, p, sizeof(V));
  return v;
}
template <class V> LIBJIT_INLINE void storeV(float *p, V v) { __builtin_memcpy(p, &v, sizeof(V)); }
/// All lanes = s. (Not `(V){} + s`: without fast-math 0 + s does not fold, and the add
/// costs an instruction per broadcast in the inner loop.)
template <class V> LIBJIT_INLINE V splatV(float s) {
  V v;
  LIBJIT_UNROLL
  for (unsigned i = 0; i < sizeof(V) / sizeof(float); i++)
    v[i] = s;
  return v;
}

/// What happens to a finished tile: C = (accumulate ? C : 0) + A*B, and on the last K
/// block + biasRow[r] + biasCol[c] + add[r][c], then clamped to [lo, hi] when act.
struct Epilogue {
  const float *biasRow;
  const float *biasCol;
  const float *add;
  int64_t ldadd;
  int act;
  float lo, hi;
};

/// C[0:mr, 0:nr] (+)= A panel x B panel over kc, computed as an MRr-row tile (mr <= MRr;
/// the packed A panel is zero-padded, so the extra rows are computed and not stored).
/// a: [kc][Cfg::MR], b: [kc][Cfg::NR].
template <class Cfg, int MRr>
LIBJIT_NOINLINE void microKernel(int64_t kc, const float *__restrict a, const float *__restrict b,
                                 float *__restrict c, int64_t ldc, int64_t mr, int64_t nr,
                                 int accumulate, int last, const Epilogue *epi) {
  typedef typename VecOf<Cfg::VW>::T V;
  constexpr int VW = Cfg::VW, NV = Cfg::NV, MR = Cfg::MR, NR = Cfg::NR;
  V acc[MRr][NV];
  LIBJIT_UNROLL
  for (int r = 0; r < MRr; r++)
    LIBJIT_UNROLL
    for (int v = 0; v < NV; v++)
      acc[r][v] = (V){};
  for (int64_t k = 0; k < kc; k++) {
    V bv[NV];
    LIBJIT_UNROLL
    for (int v = 0; v < NV; v++)
      bv[v] = loadV<V>(b + k * NR + v * VW);
    LIBJIT_UNROLL
    for (int r = 0; r < MRr; r++) {
      V av = splatV<V>(a[k * MR + r]);
      LIBJIT_UNROLL
      for (int v = 0; v < NV; v++)
        acc[r][v] += av * bv[v];
    }
  }
  if (nr == NR) {
    LIBJIT_UNROLL
    for (int r = 0; r < MRr; r++) {
      if (r >= mr)
        break;
      LIBJIT_UNROLL
      for (int v = 0; v < NV; v++) {
        float *p = c + r * ldc + v * VW;
        V x = acc[r][v];
        if (accumulate)
          x += loadV<V>(p);
        if (last) {
          if (epi->biasRow)
            x += epi->biasRow[r];
          if (epi->biasCol)
            x += loadV<V>(epi->biasCol + v * VW);
          if (epi->add)
            x += loadV<V>(epi->add + r * epi->ldadd + v * VW);
          if (epi->act) {
            x = x < epi->lo ? splatV<V>(epi->lo) : x;
            x = x > epi->hi ? splatV<V>(epi->hi) : x;
          }
        }
        storeV(p, x);
      }
    }
    return;
  }
  // A partial tile: the same, one column at a time.
  for (int r = 0; r < MRr && r < mr; r++) {
    float row[NR];
    LIBJIT_UNROLL
    for (int v = 0; v < NV; v++)
      storeV(row + v * VW, acc[r][v]);
    for (int64_t j = 0; j < nr; j++) {
      float x = row[j];
      float *p = c + r * ldc + j;
      if (accumulate)
        x += *p;
      if (last) {
        if (epi->biasRow)
          x += epi->biasRow[r];
        if (epi->biasCol)
          x += epi->biasCol[j];
        if (epi->add)
          x += epi->add[r * epi->ldadd + j];
        if (epi->act) {
          x = x < epi->lo ? epi->lo : x;
          x = x > epi->hi ? epi->hi : x;
        }
      }
      *p = x;
    }
  }
}

/// Picks the smallest instantiated tile height that covers mr rows: MR, 8, 4, 2 or 1
/// (few instantiations keep the kernel library quick to compile).
template <class Cfg>
LIBJIT_INLINE void microKernelDispatch(int64_t mr, int64_t kc, const float *a, const float *b,
                                       float *c, int64_t ldc, int64_t nr, int accumulate,
                                       int last, const Epilogue *epi) {
  constexpr int MR = Cfg::MR;
  constexpr int H8 = MR > 8 ? 8 : MR, H4 = MR > 4 ? 4 : MR, H2 = MR > 2 ? 2 : MR;
  if (mr > H8)
    microKernel<Cfg, MR>(kc, a, b, c, ldc, mr, nr, accumulate, last, epi);
  else if (mr > H4)
    microKernel<Cfg, H8>(kc, a, b, c, ldc, mr, nr, accumulate, last, epi);
  else if (mr > H2)
    microKernel<Cfg, H4>(kc, a, b, c, ldc, mr, nr, accumulate, last, epi);
  else if (mr > 1)
    microKernel<Cfg, H2>(kc, a, b, c, ldc, mr, nr, accumulate, last, epi);
  else
    microKernel<Cfg, 1>(kc, a, b, c, ldc, mr, nr, accumulate, last, epi);
}

// ---- Operand sources: already packed (constant weights) or packed per block. ----

/// A operand packed at compile time: panels of MR rows over the full K.
template <class Cfg> struct PackedA {
  static constexpr bool packed = true;
  const float *p;
  int64_t K;
  const float *panel(int64_t row, int64_t pc) const { return p + (row / Cfg::MR) * K * Cfg::MR + pc * Cfg::MR; }
  void pack(float *, int64_t, int64_t, int64_t, int64_t) const {}
};

/// A operand in row-major memory with leading dimension lda.
template <class Cfg> struct RawA {
  static constexpr bool packed = false;
  const float *p;
  int64_t lda;
  const float *panel(int64_t, int64_t) const { return nullptr; }
  /// Packs rows [i0, i0+mc) x columns [pc, pc+kc) into panels [kc][MR].
  void pack(float *dst, int64_t i0, int64_t mc, int64_t pc, int64_t kc) const {
    for (int64_t ip = 0; ip < mc; ip += Cfg::MR) {
      int64_t rows = minI(Cfg::MR, mc - ip);
      float *d = dst + (ip / Cfg::MR) * kc * Cfg::MR;
      for (int64_t r = 0; r < Cfg::MR; r++) {
        if (r < rows) {
          const float *s = p + (i0 + ip + r) * lda + pc;
          for (int64_t k = 0; k < kc; k++)
            d[k * Cfg::MR + r] = s[k];
        } else {
          for (int64_t k = 0; k < kc; k++)
            d[k * Cfg::MR + r] = 0.0f;
        }
      }
    }
  }
};

/// B operand packed at compile time: panels of NR columns over the full K.
template <class Cfg> struct PackedB {
  static constexpr bool packed = true;
  const float *p;
  int64_t K;
  const float *panel(int64_t col, int64_t pc) const { return p + (col / Cfg::NR) * K * Cfg::NR + pc * Cfg::NR; }
  void pack(float *, int64_t, int64_t, int64_t, int64_t) const {}
};

/// B operand in row-major memory with leading dimension ldb.
template <class Cfg> struct RawB {
  static constexpr bool packed = false;
  const float *p;
  int64_t ldb;
  const float *panel(int64_t, int64_t) const { return nullptr; }
  /// Packs rows [pc, pc+kc) x columns [j0, j0+nc) into panels [kc][NR].
  void pack(float *dst, int64_t j0, int64_t nc, int64_t pc, int64_t kc) const {
    for (int64_t jp = 0; jp < nc; jp += Cfg::NR) {
      int64_t cols = minI(Cfg::NR, nc - jp);
      float *d = dst + (jp / Cfg::NR) * kc * Cfg::NR;
      if (cols == Cfg::NR) {
        for (int64_t k = 0; k < kc; k++) {
          const float *s = p + (pc + k) * ldb + j0 + jp;
          for (int64_t c = 0; c < Cfg::NR; c++)
            d[k * Cfg::NR + c] = s[c];
        }
      } else {
        for (int64_t k = 0; k < kc; k++) {
          const float *s = p + (pc + k) * ldb + j0 + jp;
          for (int64_t c = 0; c < Cfg::NR; c++)
            d[k * Cfg::NR + c] = c < cols ? s[c] : 0.0f;
        }
      }
    }
  }
};

/// B operand of a convolution: the im2col matrix [C*KH*KW, OH*OW] of one image and group,
/// packed straight from the NCHW input.
template <class Cfg> struct Im2colB {
  static constexpr bool packed = false;
  const float *in; // [C][H][W] of this image and group
  int64_t H, W, KH, KW, OW, SH, SW, PT, PL, DH, DW;
  const float *panel(int64_t, int64_t) const { return nullptr; }
  void pack(float *dst, int64_t j0, int64_t nc, int64_t pc, int64_t kc) const {
    constexpr int64_t NR = Cfg::NR;
    for (int64_t jp = 0; jp < nc; jp += NR) {
      int64_t cols = minI(NR, nc - jp);
      float *d = dst + (jp / NR) * kc * NR;
      int64_t oh0 = (j0 + jp) / OW, ow0 = (j0 + jp) % OW;
      int64_t kk = pc;
      int64_t c = kk / (KH * KW), rem = kk % (KH * KW);
      int64_t kh = rem / KW, kw = rem % KW;
      for (int64_t k = 0; k < kc; k++) {
        const float *plane = in + c * H * W;
        float *drow = d + k * NR;
        int64_t q = 0, oh = oh0, ow = ow0;
        while (q < cols) {
          int64_t seg = minI(cols - q, OW - ow);
          int64_t ih = oh * SH - PT + kh * DH;
          if (ih < 0 || ih >= H) {
            for (int64_t t = 0; t < seg; t++)
              drow[q + t] = 0.0f;
          } else {
            const float *row = plane + ih * W;
            int64_t iw0 = ow * SW - PL + kw * DW;
            // t in [tLo, tHi) reads inside the row.
            int64_t tLo = iw0 >= 0 ? 0 : ceilDiv(-iw0, SW);
            int64_t tHi = W - iw0 <= 0 ? 0 : ceilDiv(W - iw0, SW);
            tLo = minI(tLo, seg);
            tHi = maxI(minI(tHi, seg), tLo);
            for (int64_t t = 0; t < tLo; t++)
              drow[q + t] = 0.0f;
            if (SW == 1) {
              const float *s = row + iw0;
              for (int64_t t = tLo; t < tHi; t++)
                drow[q + t] = s[t];
            } else {
              for (int64_t t = tLo; t < tHi; t++)
                drow[q + t] = row[iw0 + t * SW];
            }
            for (int64_t t = tHi; t < seg; t++)
              drow[q + t] = 0.0f;
          }
          q += seg;
          ow += seg;
          if (ow == OW) {
            ow = 0;
            oh++;
          }
        }
        for (; q < NR; q++)
          drow[q] = 0.0f;
        if (++kw == KW) {
          kw = 0;
          if (++kh == KH) {
            kh = 0;
            c++;
          }
        }
      }
    }
  }
};

/// The thread split of an M x N GEMM: columns when there are enough, else rows.
template <class Cfg>
LIBJIT_INLINE void gemmPartition(int64_t M, int64_t N, int64_t tid, int64_t nthreads,
                                 int64_t *m0, int64_t *m1, int64_t *n0, int64_t *n1) {
  *m0 = 0, *m1 = M, *n0 = 0, *n1 = N;
  if (nthreads > 1) {
    if (N >= nthreads * Cfg::NR * 4 || M < nthreads * Cfg::MR * 2)
      partition(N, Cfg::NR, tid, nthreads, n0, n1);
    else
      partition(M, Cfg::MR, tid, nthreads, m0, m1);
  }
}

/// C[m0:m1, n0:n1] (ldc) = A x B + epilogue, using \p scratch (gemmScratchFloats floats).
template <class Cfg, class ASrc, class BSrc>
LIBJIT_INLINE void gemmRange(int64_t m0, int64_t m1, int64_t n0, int64_t n1, int64_t K,
                             const ASrc &A, const BSrc &B, float *C, int64_t ldc,
                             const Epilogue &epi, float *scratch) {
  constexpr int64_t MR = Cfg::MR, NR = Cfg::NR, KC = Cfg::KC, MC = Cfg::MC, NC = Cfg::NC;
  if (m0 >= m1 || n0 >= n1)
    return;
  float *bbuf = scratch;
  float *abuf = bbuf + KC * (NC + NR);
  for (int64_t jc = n0; jc < n1; jc += NC) {
    int64_t nc = minI(NC, n1 - jc);
    for (int64_t pc = 0; pc < K; pc += KC) {
      int64_t kc = minI(KC, K - pc);
      int accumulate = pc > 0;
      int last = pc + kc == K;
      if (!BSrc::packed)
        B.pack(bbuf, jc, nc, pc, kc);
      for (int64_t ic = m0; ic < m1; ic += MC) {
        int64_t mc = minI(MC, m1 - ic);
        if (!ASrc::packed)
          A.pack(abuf, ic, mc, pc, kc);
        for (int64_t jr = 0; jr < nc; jr += NR) {
          int64_t nr = minI(NR, nc - jr);
          const float *bp = BSrc::packed ? B.panel(jc + jr, pc) : bbuf + (jr / NR) * kc * NR;
          for (int64_t ir = 0; ir < mc; ir += MR) {
            int64_t mr = minI(MR, mc - ir);
            const float *ap = ASrc::packed ? A.panel(ic + ir, pc) : abuf + (ir / MR) * kc * MR;
            int64_t row = ic + ir, col = jc + jr;
            Epilogue e;
            e.biasRow = epi.biasRow ? epi.biasRow + row : nullptr;
            e.biasCol = epi.biasCol ? epi.biasCol + col : nullptr;
            e.add = epi.add ? epi.add + row * epi.ldadd + col : nullptr;
            e.ldadd = epi.ldadd;
            e.act = epi.act;
            e.lo = epi.lo;
            e.hi = epi.hi;
            microKernelDispatch<Cfg>(mr, kc, ap, bp, C + row * ldc + col, ldc, nr, accumulate,
                                     last, &e);
          }
        }
      }
    }
  }
}

/// C[M x N] (ldc) = A x B + epilogue, the share of thread tid of nthreads; each thread uses
/// its own slice of scratch.
template <class Cfg, class ASrc, class BSrc>
LIBJIT_INLINE void gemmDriver(int64_t M, int64_t N, int64_t K, const ASrc &A, const BSrc &B,
                              float *C, int64_t ldc, const Epilogue &epi, float *scratch,
                              int64_t tid, int64_t nthreads) {
  int64_t m0, m1, n0, n1;
  gemmPartition<Cfg>(M, N, tid, nthreads, &m0, &m1, &n0, &n1);
  gemmRange<Cfg>(m0, m1, n0, n1, K, A, B, C, ldc, epi, scratch + tid * gemmScratchFloats<Cfg>());
}

/// A operand of a transposed convolution: the im2col matrix transposed, [OH*OW, C*KH*KW]
/// of one image, packed straight from the NCHW input (rows are output pixels).
template <class Cfg> struct Im2colA {
  static constexpr bool packed = false;
  const float *in; // [C][H][W]
  int64_t H, W, KH, KW, OW, SH, SW, PT, PL, DH, DW;
  const float *panel(int64_t, int64_t) const { return nullptr; }
  void pack(float *dst, int64_t i0, int64_t mc, int64_t pc, int64_t kc) const {
    constexpr int64_t MR = Cfg::MR;
    for (int64_t ip = 0; ip < mc; ip += MR) {
      int64_t rows = minI(MR, mc - ip);
      float *d = dst + (ip / MR) * kc * MR;
      int64_t ih0[MR], iw0[MR];
      for (int64_t r = 0; r < MR; r++) {
        int64_t p = i0 + ip + (r < rows ? r : 0);
        ih0[r] = (p / OW) * SH - PT;
        iw0[r] = r < rows ? (p % OW) * SW - PL : -(int64_t(1) << 40);
      }
      int64_t c = pc / (KH * KW), rem = pc % (KH * KW);
      int64_t kh = rem / KW, kw = rem % KW;
      for (int64_t k = 0; k < kc; k++) {
        const float *plane = in + c * H * W;
        float *drow = d + k * MR;
        for (int64_t r = 0; r < MR; r++) {
          int64_t ih = ih0[r] + kh * DH, iw = iw0[r] + kw * DW;
          bool ok = ih >= 0 && ih < H && iw >= 0 && iw < W;
          drow[r] = ok ? plane[ih * W + iw] : 0.0f;
        }
        if (++kw == KW) {
          kw = 0;
          if (++kh == KH) {
            kh = 0;
            c++;
          }
        }
      }
    }
  }
};

template <class Cfg>
LIBJIT_INLINE void sgemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                         const float *B, int64_t ldb, float *C, int64_t ldc, float *scratch,
                         int64_t tid, int64_t nthreads) {
  Epilogue epi = {nullptr, nullptr, nullptr, 0, 0, 0.0f, 0.0f};
  gemmDriver<Cfg>(M, N, K, RawA<Cfg>{A, lda}, RawB<Cfg>{B, ldb}, C, ldc, epi, scratch, tid,
                  nthreads);
}

template <class Cfg>
LIBJIT_INLINE void fc(float *out, const float *in, const float *packedW, const float *bias,
                      const float *add, int64_t N, int64_t K, int64_t M, int64_t act, float lo,
                      float hi, float *scratch, int64_t tid, int64_t nthreads) {
  Epilogue epi = {nullptr, bias, add, M, (int)act, lo, hi};
  gemmDriver<Cfg>(N, M, K, RawA<Cfg>{in, K}, PackedB<Cfg>{packedW, K}, out, M, epi, scratch,
                  tid, nthreads);
}

template <class Cfg>
LIBJIT_INLINE void batchMatMul(float *out, const float *lhs, const float *rhs, int64_t B,
                               int64_t N, int64_t K, int64_t M, float *scratch, int64_t tid,
                               int64_t nthreads) {
  Epilogue epi = {nullptr, nullptr, nullptr, 0, 0, 0.0f, 0.0f};
  for (int64_t b = 0; b < B; b++)
    gemmDriver<Cfg>(N, M, K, RawA<Cfg>{lhs + b * N * K, K}, RawB<Cfg>{rhs + b * K * M, M},
                    out + b * N * M, M, epi, scratch, tid, nthreads);
}

template <class Cfg>
LIBJIT_INLINE void conv2d(float *out, const float *in, const float *packedW, const float *bias,
                          const float *add, int64_t N, int64_t C, int64_t H, int64_t W,
                          int64_t O, int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH,
                          int64_t SW, int64_t PT, int64_t PL, int64_t DH, int64_t DW,
                          int64_t G, int64_t act, float lo, float hi, float *scratch,
                          int64_t tid, int64_t nthreads) {
  int64_t Cg = C / G, Og = O / G, K = Cg * KH * KW, P = OH * OW;
  int64_t groupW = packedAFloats<Cfg>(Og, K);
  bool pointwise = KH == 1 && KW == 1 && SH == 1 && SW == 1 && PT == 0 && PL == 0 &&
                   OH == H && OW == W;
  for (int64_t n = 0; n < N; n++) {
    for (int64_t g = 0; g < G; g++) {
      const float *x = in + (n * C + g * Cg) * H * W;
      float *y = out + (n * O + g * Og) * P;
      Epilogue epi = {bias ? bias + g * Og : nullptr, nullptr,
                      add ? add + (n * O + g * Og) * P : nullptr, P, (int)act, lo, hi};
      PackedA<Cfg> A{packedW + g * groupW, K};
      if (pointwise) {
        gemmDriver<Cfg>(Og, P, K, A, RawB<Cfg>{x, H * W}, y, P, epi, scratch, tid, nthreads);
      } else {
        Im2colB<Cfg> B{x, H, W, KH, KW, OW, SH, SW, PT, PL, DH, DW};
        gemmDriver<Cfg>(Og, P, K, A, B, y, P, epi, scratch, tid, nthreads);
      }
    }
  }
}

/// Convolution computed transposed, for small images: T[P x O] = im2col^T x W^T with the
/// pixels as GEMM rows (so P need not fill whole NR-column panels), then transposed into
/// the NCHW output with the residual add and the clamp. packedWT holds W^T [K x O] as
/// packed B panels; t is P*O floats of scratch. Group 1 only.
template <class Cfg>
LIBJIT_INLINE void conv2dT(float *out, const float *in, const float *packedWT,
                           const float *bias, const float *add, int64_t N, int64_t C,
                           int64_t H, int64_t W, int64_t O, int64_t OH, int64_t OW, int64_t KH,
                           int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL,
                           int64_t DH, int64_t DW, int64_t act, float lo, float hi, float *t,
                           float *scratch, int64_t tid, int64_t nthreads) {
  int64_t K = C * KH * KW, P = OH * OW;
  int64_t m0, m1, n0, n1;
  gemmPartition<Cfg>(P, O, tid, nthreads, &m0, &m1, &n0, &n1);
  float *s = scratch + tid * gemmScratchFloats<Cfg>();
  Epilogue epi = {nullptr, bias, nullptr, 0, 0, 0.0f, 0.0f};
  for (int64_t n = 0; n < N; n++) {
    const float *x = in + n * C * H * W;
    float *y = out + n * O * P;
    const float *a = add ? add + n * O * P : nullptr;
    Im2colA<Cfg> A{x, H, W, KH, KW, OW, SH, SW, PT, PL, DH, DW};
    gemmRange<Cfg>(m0, m1, n0, n1, K, A, PackedB<Cfg>{packedWT, K}, t, O, epi, s);
    // Transpose this thread's block [m0, m1) x [n0, n1) into y[o][p], 16 x 16 at a time.
    for (int64_t ob = n0; ob < n1; ob += 16) {
      int64_t oe = minI(ob + 16, n1);
      for (int64_t pb = m0; pb < m1; pb += 16) {
        int64_t pe = minI(pb + 16, m1);
        for (int64_t o = ob; o < oe; o++) {
          for (int64_t p = pb; p < pe; p++) {
            float v = t[p * O + o];
            if (a)
              v += a[o * P + p];
            if (act) {
              v = v < lo ? lo : v;
              v = v > hi ? hi : v;
            }
            y[o * P + p] = v;
          }
        }
      }
    }
  }
}

/// Packs W [O x K] (row-major) as the B operand W^T [K x O] in NR-column panels.
template <class Cfg> void packBT(float *dst, const float *Wt, int64_t K, int64_t O) {
  for (int64_t q = 0; q < ceilDiv(O, Cfg::NR); q++)
    for (int64_t k = 0; k < K; k++)
      for (int64_t c = 0; c < Cfg::NR; c++) {
        int64_t j = q * Cfg::NR + c;
        dst[(q * K + k) * Cfg::NR + c] = j < O ? Wt[j * K + k] : 0.0f;
      }
}

/// Packs row-major A [M x K] (lda) into MR-row panels.
template <class Cfg> void packA(float *dst, const float *A, int64_t M, int64_t K, int64_t lda) {
  for (int64_t p = 0; p < ceilDiv(M, Cfg::MR); p++)
    for (int64_t k = 0; k < K; k++)
      for (int64_t r = 0; r < Cfg::MR; r++) {
        int64_t i = p * Cfg::MR + r;
        dst[(p * K + k) * Cfg::MR + r] = i < M ? A[i * lda + k] : 0.0f;
      }
}

/// Packs row-major B [K x N] (ldb) into NR-column panels.
template <class Cfg> void packB(float *dst, const float *B, int64_t K, int64_t N, int64_t ldb) {
  for (int64_t q = 0; q < ceilDiv(N, Cfg::NR); q++)
    for (int64_t k = 0; k < K; k++)
      for (int64_t c = 0; c < Cfg::NR; c++) {
        int64_t j = q * Cfg::NR + c;
        dst[(q * K + k) * Cfg::NR + c] = j < N ? B[k * ldb + j] : 0.0f;
      }
}

} // namespace
} // namespace libjit

using namespace libjit;

#define LIBJIT_GEMM_ENTRY_POINTS(SUFFIX, CFG)                                               \
  LIBJIT_EXPORT void libjit_sgemm_f32_##SUFFIX(int64_t M, int64_t N, int64_t K,             \
                                               const float *A, int64_t lda, const float *B,  \
                                               int64_t ldb, float *C, int64_t ldc,           \
                                               float *scratch, int64_t tid,                  \
                                               int64_t nthreads) {                           \
    sgemm<CFG>(M, N, K, A, lda, B, ldb, C, ldc, scratch, tid, nthreads);                     \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_fc_f32_##SUFFIX(float *out, const float *in,                    \
                                            const float *packedW, const float *bias,         \
                                            const float *add, int64_t N, int64_t K,          \
                                            int64_t M, int64_t act, float lo, float hi,      \
                                            float *scratch, int64_t tid, int64_t nthreads) { \
    fc<CFG>(out, in, packedW, bias, add, N, K, M, act, lo, hi, scratch, tid, nthreads);      \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_batchmatmul_f32_##SUFFIX(                                       \
      float *out, const float *lhs, const float *rhs, int64_t B, int64_t N, int64_t K,       \
      int64_t M, float *scratch, int64_t tid, int64_t nthreads) {                            \
    batchMatMul<CFG>(out, lhs, rhs, B, N, K, M, scratch, tid, nthreads);                     \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_conv2d_f32_##SUFFIX(                                            \
      float *out, const float *in, const float *packedW, const float *bias,                  \
      const float *add, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH,   \
      int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL,    \
      int64_t DH, int64_t DW, int64_t G, int64_t act, float lo, float hi, float *scratch,    \
      int64_t tid, int64_t nthreads) {                                                       \
    conv2d<CFG>(out, in, packedW, bias, add, N, C, H, W, O, OH, OW, KH, KW, SH, SW, PT, PL,  \
                DH, DW, G, act, lo, hi, scratch, tid, nthreads);                             \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_conv2d_t_f32_##SUFFIX(                                          \
      float *out, const float *in, const float *packedWT, const float *bias,                 \
      const float *add, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH,   \
      int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL,    \
      int64_t DH, int64_t DW, int64_t act, float lo, float hi, float *t, float *scratch,     \
      int64_t tid, int64_t nthreads) {                                                       \
    conv2dT<CFG>(out, in, packedWT, bias, add, N, C, H, W, O, OH, OW, KH, KW, SH, SW, PT,    \
                 PL, DH, DW, act, lo, hi, t, scratch, tid, nthreads);                        \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_pack_bt_f32_##SUFFIX(float *dst, const float *Wt, int64_t K,    \
                                                 int64_t O) {                                \
    packBT<CFG>(dst, Wt, K, O);                                                              \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_pack_a_f32_##SUFFIX(float *dst, const float *A, int64_t M,      \
                                                int64_t K, int64_t lda) {                    \
    packA<CFG>(dst, A, M, K, lda);                                                           \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_pack_b_f32_##SUFFIX(float *dst, const float *B, int64_t K,      \
                                                int64_t N, int64_t ldb) {                    \
    packB<CFG>(dst, B, K, N, ldb);                                                           \
  }

LIBJIT_GEMM_ENTRY_POINTS(avx512, GemmAvx512)
LIBJIT_GEMM_ENTRY_POINTS(avx2, GemmAvx2)
