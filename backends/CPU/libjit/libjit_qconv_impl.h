// The int8 convolution and fully connected kernels, written once over a dot-product ISA
// (libjit_qconv.cpp includes this once per ISA, inside that ISA's target region and
// namespace, with QISA naming the ISA's struct). Internal to libjit_qconv.cpp.

constexpr int64_t kMR = 4; ///< output channels per convolution micro-kernel call
constexpr int64_t kNV = 2; ///< vectors of pixels (conv) or columns (FC) per call

/// Convolution micro-kernel: acc[r][p] = sum over K4 quads of w[q][r] (s8, broadcast) times
/// patch[q][p] (u8, T = kNV * L pixels).
static inline __attribute__((always_inline)) void convTile(const uint32_t *w, const uint32_t *patch, int64_t K4,
                            int32_t *acc /* [kMR][T] */) {
  constexpr int L = QISA::L, T = kNV * L;
  QISA::V c[kMR][kNV];
  LIBJIT_UNROLL
  for (int r = 0; r < kMR; r++)
    LIBJIT_UNROLL
    for (int v = 0; v < kNV; v++)
      c[r][v] = QISA::zero();
  for (int64_t q = 0; q < K4; q++) {
    QISA::V u[kNV];
    LIBJIT_UNROLL
    for (int v = 0; v < kNV; v++)
      u[v] = QISA::load(patch + q * T + v * L);
    LIBJIT_UNROLL
    for (int r = 0; r < kMR; r++) {
      QISA::V s = QISA::bcast(w[q * kMR + r]);
      LIBJIT_UNROLL
      for (int v = 0; v < kNV; v++)
        c[r][v] = QISA::dot(c[r][v], u[v], s);
    }
  }
  LIBJIT_UNROLL
  for (int r = 0; r < kMR; r++)
    LIBJIT_UNROLL
    for (int v = 0; v < kNV; v++)
      QISA::store(acc + r * T + v * L, c[r][v]);
}

/// Packs the im2col patch of pixels [p0, p0 + T) of group input \p xg ([cg][H][W]) as
/// [K4][T] quads of a = x + 128 (out-of-image taps: xOffset + 128; k >= K: 0), and when
/// \p sums, the per-pixel sum of a over the K taps into colsum.
static inline __attribute__((always_inline)) void packPatch(uint32_t *patch, int32_t *colsum, bool sums, const int8_t *xg,
                             int64_t T, int64_t p0, int64_t P, int64_t cg, int64_t H, int64_t W,
                             int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW,
                             int64_t PT, int64_t PL, int64_t DH, int64_t DW, int32_t xOff) {
  const int64_t K = cg * KH * KW, K4 = ceilDiv(K, 4);
  uint8_t *b = (uint8_t *)patch;
  const uint8_t padA = uint8_t(xOff + 128);
  // The tile's pixels: top-left input corner of each window (pixels past P read nothing).
  int32_t ih0[64], iw0[64];
  const int64_t np = minI(T, P - p0);
  for (int64_t j = 0; j < T; j++) {
    int64_t p = p0 + (j < np ? j : 0);
    ih0[j] = int32_t((p / OW) * SH - PT);
    iw0[j] = int32_t((p % OW) * SW - PL);
  }
  if (sums)
    for (int64_t j = 0; j < T; j++)
      colsum[j] = 0;
  // One patch row (tap k) at a time: T bytes at stride 4 in its quad row.
  int64_t k = 0;
  for (int64_t c = 0; c < cg; c++) {
    const int8_t *xc = xg + c * H * W;
    for (int64_t kh = 0; kh < KH; kh++)
      for (int64_t kw = 0; kw < KW; kw++, k++) {
        uint8_t *dk = b + (k >> 2) * T * 4 + (k & 3);
        const int64_t dh = kh * DH, dw = kw * DW;
        for (int64_t j = 0; j < np; j++) {
          int64_t ih = ih0[j] + dh, iw = iw0[j] + dw;
          bool in = ih >= 0 && ih < H && iw >= 0 && iw < W;
          uint8_t a = in ? uint8_t(int32_t(xc[ih * W + iw]) + 128) : padA;
          dk[j * 4] = a;
          if (sums)
            colsum[j] += a;
        }
        for (int64_t j = np; j < T; j++)
          dk[j * 4] = 0;
      }
  }
  for (; k < 4 * K4; k++) {
    uint8_t *dk = b + (k >> 2) * T * 4 + (k & 3);
    for (int64_t j = 0; j < T; j++)
      dk[j * 4] = 0;
  }
}

/// 1x1 stride-1 unpadded convolutions: the patch rows are input rows (faster packing).
static inline __attribute__((always_inline)) void packPointwise(uint32_t *patch, int32_t *colsum, bool sums, const int8_t *xg,
                                 int64_t T, int64_t p0, int64_t P, int64_t cg) {
  const int64_t K4 = ceilDiv(cg, 4);
  uint8_t *b = (uint8_t *)patch;
  const int64_t n = minI(T, P - p0);
  for (int64_t q = 0; q < K4; q++) {
    uint8_t *dq = b + q * T * 4;
    for (int64_t r = 0; r < 4; r++) {
      int64_t c = q * 4 + r;
      if (c < cg) {
        const int8_t *xr = xg + c * P + p0;
        for (int64_t j = 0; j < n; j++)
          dq[j * 4 + r] = uint8_t(int32_t(xr[j]) + 128);
      } else {
        for (int64_t j = 0; j < n; j++)
          dq[j * 4 + r] = 0;
      }
      for (int64_t j = n; j < T; j++)
        dq[j * 4 + r] = 0;
    }
  }
  if (sums) {
    for (int64_t j = 0; j < T; j++)
      colsum[j] = 0;
    for (int64_t c = 0; c < cg; c++) {
      const int8_t *xr = xg + c * P + p0;
      for (int64_t j = 0; j < n; j++)
        colsum[j] += int32_t(xr[j]) + 128;
    }
  }
}

static inline __attribute__((always_inline)) void qconv(int8_t *out, const int8_t *in, const uint32_t *wpack,
                         const void *params, int64_t N, int64_t C, int64_t H, int64_t W,
                         int64_t O, int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH,
                         int64_t SW, int64_t PT, int64_t PL, int64_t DH, int64_t DW, int64_t G,
                         int64_t xOff, float outScale, int64_t outOff, int64_t lo, int64_t hi,
                         int64_t anyFOff, char *scratch, int64_t scratchStride, int64_t tid,
                         int64_t nthreads) {
  constexpr int64_t T = kNV * QISA::L;
  const int64_t cg = C / G, og = O / G, K = cg * KH * KW, K4 = ceilDiv(K, 4);
  const int64_t ogPad = ceilDiv(og, kMR) * kMR, P = OH * OW, tiles = ceilDiv(P, T);
  const QParams qp = qparams(params, G * ogPad);
  const bool pointwise = KH == 1 && KW == 1 && SH == 1 && SW == 1 && PT == 0 && PL == 0 &&
                         OH == H && OW == W;
  const bool sums = anyFOff != 0;
  char *mine = scratch + tid * scratchStride;
  uint32_t *patch = (uint32_t *)mine;
  int32_t *colsum = (int32_t *)(mine + K4 * T * 4);
  int32_t *acc = colsum + T;
  const double dScale = double(outScale), dOff = double(outOff), dLo = double(lo),
               dHi = double(hi);
  int64_t b, e;
  partition(N * G * tiles, 1, tid, nthreads, &b, &e);
  for (int64_t u = b; u < e; u++) {
    const int64_t n = u / (G * tiles), g = (u / tiles) % G, t = u % tiles, p0 = t * T;
    const int8_t *xg = in + (n * C + g * cg) * H * W;
    if (pointwise)
      packPointwise(patch, colsum, sums, xg, T, p0, P, cg);
    else
      packPatch(patch, colsum, sums, xg, T, p0, P, cg, H, W, OW, KH, KW, SH, SW, PT, PL, DH, DW,
                int32_t(xOff));
    const int64_t np = minI(T, P - p0);
    for (int64_t ob = 0; ob < og; ob += kMR) {
      convTile(wpack + (g * ogPad + ob) * K4, patch, K4, acc);
      const int64_t nr = minI(kMR, og - ob);
      for (int64_t r = 0; r < nr; r++) {
        const int64_t oi = g * ogPad + ob + r, o = g * og + ob + r;
        const double as = qp.accScale[oi], br = qp.biasReal[oi];
        const int32_t corr = qp.corr[oi], fo = qp.fOff[oi];
        int8_t *y = out + (n * O + o) * P + p0;
        const int32_t *ar = acc + r * T;
        if (sums)
          for (int64_t j = 0; j < np; j++)
            y[j] = requant(int32_t(uint32_t(ar[j]) + uint32_t(corr) -
                                   uint32_t(fo) * uint32_t(colsum[j])),
                           as, br, dScale, dOff, dLo, dHi);
        else
          for (int64_t j = 0; j < np; j++)
            y[j] = requant(int32_t(uint32_t(ar[j]) + uint32_t(corr)), as, br, dScale, dOff, dLo,
                           dHi);
      }
    }
  }
}

/// Fully connected: out [N, M] = in [N, K] x W; W packed as [ceil(M / T)][K4][T] quads.
template <int R>
static inline __attribute__((always_inline)) void fcTile(const int8_t *const *rows, const uint32_t *w, int64_t K,
                          int32_t *acc /* [R][T] */) {
  constexpr int L = QISA::L, T = kNV * L;
  const int64_t K4 = ceilDiv(K, 4), full = K / 4;
  QISA::V c[R][kNV];
  LIBJIT_UNROLL
  for (int r = 0; r < R; r++)
    LIBJIT_UNROLL
    for (int v = 0; v < kNV; v++)
      c[r][v] = QISA::zero();
  for (int64_t q = 0; q < K4; q++) {
    QISA::V s[kNV];
    LIBJIT_UNROLL
    for (int v = 0; v < kNV; v++)
      s[v] = QISA::load(w + q * T + v * L);
    LIBJIT_UNROLL
    for (int r = 0; r < R; r++) {
      uint32_t a;
      if (q < full) {
        a = load32(rows[r] + 4 * q) ^ 0x80808080u;
      } else {
        a = 0;
        for (int64_t k = 4 * q; k < K; k++)
          a |= uint32_t(uint8_t(int32_t(rows[r][k]) + 128)) << (8 * (k - 4 * q));
      }
      QISA::V ub = QISA::bcast(a);
      LIBJIT_UNROLL
      for (int v = 0; v < kNV; v++)
        c[r][v] = QISA::dot(c[r][v], ub, s[v]);
    }
  }
  LIBJIT_UNROLL
  for (int r = 0; r < R; r++)
    LIBJIT_UNROLL
    for (int v = 0; v < kNV; v++)
      QISA::store(acc + r * T + v * L, c[r][v]);
}

static inline __attribute__((always_inline)) void qfc(int8_t *out, const int8_t *in, const uint32_t *wpack, const void *params,
                       int64_t N, int64_t K, int64_t M, float outScale, int64_t outOff,
                       int64_t lo, int64_t hi, int64_t anyFOff, char *scratch,
                       int64_t scratchStride, int64_t tid, int64_t nthreads) {
  constexpr int64_t T = kNV * QISA::L;
  const int64_t K4 = ceilDiv(K, 4), tiles = ceilDiv(M, T), Mpad = tiles * T;
  const QParams qp = qparams(params, Mpad);
  int32_t *acc = (int32_t *)(scratch + tid * scratchStride);
  const double dScale = double(outScale), dOff = double(outOff), dLo = double(lo),
               dHi = double(hi);
  int64_t b, e;
  partition(tiles, 1, tid, nthreads, &b, &e);
  for (int64_t t = b; t < e; t++) {
    const int64_t m0 = t * T, nm = minI(T, M - m0);
    const uint32_t *w = wpack + t * K4 * T;
    for (int64_t n0 = 0; n0 < N; n0 += 4) {
      const int64_t nr = minI(4, N - n0);
      const int8_t *rows[4];
      for (int64_t r = 0; r < nr; r++)
        rows[r] = in + (n0 + r) * K;
      switch (nr) {
      case 4: fcTile<4>(rows, w, K, acc); break;
      case 3: fcTile<3>(rows, w, K, acc); break;
      case 2: fcTile<2>(rows, w, K, acc); break;
      default: fcTile<1>(rows, w, K, acc); break;
      }
      for (int64_t r = 0; r < nr; r++) {
        int32_t rowsum = 0;
        if (anyFOff)
          for (int64_t k = 0; k < K; k++)
            rowsum += int32_t(rows[r][k]) + 128;
        int8_t *y = out + (n0 + r) * M + m0;
        const int32_t *ar = acc + r * T;
        for (int64_t j = 0; j < nm; j++) {
          const int64_t m = m0 + j;
          int32_t a = int32_t(uint32_t(ar[j]) + uint32_t(qp.corr[m]) -
                              uint32_t(qp.fOff[m]) * uint32_t(rowsum));
          y[j] = requant(a, qp.accScale[m], qp.biasReal[m], dScale, dOff, dLo, dHi);
        }
      }
    }
  }
}

