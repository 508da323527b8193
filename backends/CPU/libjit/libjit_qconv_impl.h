// The int8 convolution and fully connected kernels, written once over a dot-product ISA
// (libjit_qconv.cpp includes this once per ISA, inside that ISA's target region and
// namespace, with QISA naming the ISA's struct). Internal to libjit_qconv.cpp.

constexpr int64_t kMR = 4; ///< output channels per convolution micro-kernel call
constexpr int64_t kNV = 2; ///< vectors of pixels (conv) or columns (FC) per call
/// Vectors of pixels per call of the direct path (3 and 4 were no faster natively).
constexpr int64_t kNVD = 2;

/// Blocks of kMR output channels per micro-kernel call: 2 with 32 vector registers
/// (AVX-512: 16 accumulators, more independent dot-product chains in flight than 8;
/// docs/Quantization.md, fifth round), 1 with 16 (AVX2: its dot product needs 4
/// temporaries).
constexpr int64_t kNB = QISA::L == 16 ? 2 : 1;
/// Accumulator rows of the micro-kernels (the scratch the emitter reserves: kAccRows).
constexpr int64_t kAccRows = 2 * kMR;
static_assert(kNB * kMR <= kAccRows, "the emitter reserves 8 accumulator rows");

/// Convolution micro-kernel: acc[b kMR + r][p] = sum over K4 quads of w[b][q][r] (s8,
/// broadcast; block b at w + b wb) times patch[q][p] (u8, T = kNV * L pixels), for NB
/// blocks of kMR output channels; the patch's quads \p ps entries apart, acc's rows \p as
/// apart.
template <int NB>
static inline __attribute__((always_inline)) void convTile(const uint32_t *w, int64_t wb,
                                                           const uint32_t *patch, int64_t K4,
                                                           int32_t *acc, int64_t ps,
                                                           int64_t as) {
  constexpr int L = QISA::L;
  QISA::V c[NB * kMR][kNV];
  LIBJIT_UNROLL
  for (int r = 0; r < NB * kMR; r++)
    LIBJIT_UNROLL
    for (int v = 0; v < kNV; v++)
      c[r][v] = QISA::zero();
  for (int64_t q = 0; q < K4; q++) {
    QISA::V u[kNV];
    LIBJIT_UNROLL
    for (int v = 0; v < kNV; v++)
      u[v] = QISA::load(patch + q * ps + v * L);
    LIBJIT_UNROLL
    for (int r = 0; r < NB * kMR; r++) {
      QISA::V s = QISA::bcast(w[(r / kMR) * wb + q * kMR + r % kMR]);
      LIBJIT_UNROLL
      for (int v = 0; v < kNV; v++)
        c[r][v] = QISA::dot(c[r][v], u[v], s);
    }
  }
  LIBJIT_UNROLL
  for (int r = 0; r < NB * kMR; r++)
    LIBJIT_UNROLL
    for (int v = 0; v < kNV; v++)
      QISA::store(acc + r * as + v * L, c[r][v]);
}

/// Writes T pixels of four patch rows (bytes at \p r0.. \p r3, each XORed with \p flip) as
/// T k-quads at \p dq.
static inline __attribute__((always_inline)) void interleave4(uint8_t *dq, const uint8_t *r0,
                                                              const uint8_t *r1,
                                                              const uint8_t *r2,
                                                              const uint8_t *r3, int64_t T,
                                                              uint8_t flip) {
#if defined(__x86_64__)
  if (T % 16 == 0) {
    const __m128i f = _mm_set1_epi8(char(flip));
    for (int64_t j = 0; j < T; j += 16) {
      __m128i a0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(r0 + j)), f);
      __m128i a1 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(r1 + j)), f);
      __m128i a2 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(r2 + j)), f);
      __m128i a3 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(r3 + j)), f);
      __m128i a01l = _mm_unpacklo_epi8(a0, a1), a01h = _mm_unpackhi_epi8(a0, a1);
      __m128i a23l = _mm_unpacklo_epi8(a2, a3), a23h = _mm_unpackhi_epi8(a2, a3);
      __m128i *d = (__m128i *)(dq + j * 4);
      _mm_storeu_si128(d, _mm_unpacklo_epi16(a01l, a23l));
      _mm_storeu_si128(d + 1, _mm_unpackhi_epi16(a01l, a23l));
      _mm_storeu_si128(d + 2, _mm_unpacklo_epi16(a01h, a23h));
      _mm_storeu_si128(d + 3, _mm_unpackhi_epi16(a01h, a23h));
    }
    return;
  }
#endif
  for (int64_t j = 0; j < T; j++) {
    dq[j * 4] = r0[j] ^ flip;
    dq[j * 4 + 1] = r1[j] ^ flip;
    dq[j * 4 + 2] = r2[j] ^ flip;
    dq[j * 4 + 3] = r3[j] ^ flip;
  }
}

/// Height and width of the padded input planes of packPadded (every window inside).
static inline __attribute__((always_inline)) void padDims(int64_t H, int64_t W, int64_t OH,
                                                          int64_t OW, int64_t KH, int64_t KW,
                                                          int64_t SH, int64_t SW, int64_t PT,
                                                          int64_t PL, int64_t DH, int64_t DW,
                                                          int64_t *Hp, int64_t *Wp) {
  *Hp = maxI(PT + H, (OH - 1) * SH + (KH - 1) * DH + 1);
  *Wp = maxI(PL + W, (OW - 1) * SW + (KW - 1) * DW + 1);
}

/// Where padded column phase \p ph (columns ph, ph + SW, ...) starts in a row of padPlanes:
/// the phases are stored one after the other (for SW = 1, the row as it is).
static inline __attribute__((always_inline)) int64_t phaseStart(int64_t Wp, int64_t SW,
                                                                int64_t ph) {
  int64_t at = 0;
  for (int64_t p = 0; p < ph; p++)
    at += (Wp - p + SW - 1) / SW;
  return at;
}

/// The group's input \p xg ([cg][H][W]) as bytes a = x + 128 in [cg][Hp][Wp] with the pads
/// (and the rows and columns past them) at xOffset + 128, what a padding tap reads. For a
/// column stride SW > 1 each row's columns are grouped by phase c % SW (phaseStart), so
/// that the columns one tap reads for consecutive outputs are contiguous.
/// Rows no window reads (between the windows of a row stride SH > 1, e.g. the odd rows of a
/// 1x1 stride-2 layer) are skipped: their bytes are left as they are.
static inline __attribute__((always_inline)) void padPlanes(uint8_t *pp, const int8_t *xg,
                                                            int64_t cg, int64_t H, int64_t W,
                                                            int64_t Hp, int64_t Wp, int64_t OH,
                                                            int64_t KH, int64_t SH, int64_t DH,
                                                            int64_t KW, int64_t SW, int64_t DW,
                                                            int64_t PT, int64_t PL, uint8_t padA) {
  for (int64_t r = 0; r < Hp; r++) {
    bool read = SH == 1;
    for (int64_t kh = 0; kh < KH && !read; kh++) {
      const int64_t t = r - kh * DH;
      read = t >= 0 && t % SH == 0 && t / SH < OH;
    }
    if (!read)
      continue;
    const int64_t h = r - PT;
    for (int64_t c = 0; c < cg; c++) {
      uint8_t *d = pp + (c * Hp + r) * Wp;
      if (h < 0 || h >= H) {
        for (int64_t i = 0; i < Wp; i++)
          d[i] = padA;
        continue;
      }
      const int8_t *xr = xg + (c * H + h) * W;
      if (SW == 1) {
        for (int64_t i = 0; i < PL; i++)
          d[i] = padA;
        for (int64_t i = 0; i < W; i++)
          d[PL + i] = uint8_t(xr[i]) ^ 0x80;
        for (int64_t i = PL + W; i < Wp; i++)
          d[i] = padA;
        continue;
      }
      for (int64_t ph = 0, at = 0; ph < SW; ph++) {
        // Entries i of the phase hold padded columns ph + i SW; input columns for
        // i in [i0, i1). A phase no tap reads (the odd columns of 1x1 stride 2) is skipped.
        const int64_t len = (Wp - ph + SW - 1) / SW;
        bool used = false;
        for (int64_t kw = 0; kw < KW && !used; kw++)
          used = (kw * DW) % SW == ph;
        if (!used) {
          at += len;
          continue;
        }
        const int64_t i0 = minI(len, PL > ph ? (PL - ph + SW - 1) / SW : 0);
        const int64_t i1 = maxI(i0, minI(len, (PL + W - ph + SW - 1) / SW));
        uint8_t *dp = d + at;
        const int8_t *xs = xr + ph - PL;
        for (int64_t i = 0; i < i0; i++)
          dp[i] = padA;
        for (int64_t i = i0; i < i1; i++)
          dp[i] = uint8_t(xs[i * SW]) ^ 0x80;
        for (int64_t i = i1; i < len; i++)
          dp[i] = padA;
        at += len;
      }
    }
  }
}

/// Packs the im2col patch of pixels [p0, p0 + T) as [K4][T] k-quads of a = x + 128 (k >= K:
/// 0; pixels past P: 0), and when \p sums the per-pixel sum of a over the K taps into
/// colsum, from the padded planes \p pp (padPlanes): each patch row (tap) of the tile is
/// a few contiguous runs (one per output row the tile spans; strided for SW > 1), copied
/// without bounds checks, four rows then interleaved into k-quads.
static inline __attribute__((always_inline)) void packPadded(
    uint32_t *patch, int32_t *colsum, bool sums, const uint8_t *pp, int64_t T, int64_t p0,
    int64_t P, int64_t cg, int64_t Hp, int64_t Wp, int64_t OW, int64_t KH, int64_t KW,
    int64_t SH, int64_t SW, int64_t DH, int64_t DW) {
  const int64_t KK = KH * KW, K = cg * KK, K4 = ceilDiv(K, 4);
  uint8_t *b = (uint8_t *)patch;
  const int64_t np = minI(T, P - p0);
  int64_t segJ[64], segLen[64], segBase[64], nseg = 0;
  for (int64_t j = 0, p = p0; j < np; nseg++) {
    const int64_t oh = p / OW, ow = p % OW, len = minI(OW - ow, np - j);
    segJ[nseg] = j, segLen[nseg] = len, segBase[nseg] = oh * SH * Wp + ow;
    j += len, p += len;
  }
  alignas(64) uint8_t rows[4][64];
  if (sums)
    for (int64_t j = 0; j < T; j++)
      colsum[j] = 0;
  for (int64_t q = 0; q < K4; q++) {
    for (int64_t r = 0; r < 4; r++) {
      const int64_t k = q * 4 + r;
      uint8_t *t = rows[r];
      if (k >= K) {
        for (int64_t j = 0; j < T; j++)
          t[j] = 0;
        continue;
      }
      const int64_t c = k / KK, kh = (k % KK) / KW, kw = k % KW;
      // Column ow SW + kw DW: phase (kw DW) % SW, index ow + (kw DW) / SW.
      const int64_t off = kw * DW;
      const uint8_t *src = pp + (c * Hp + kh * DH) * Wp +
                           (SW == 1 ? off : phaseStart(Wp, SW, off % SW) + off / SW);
      for (int64_t sg = 0; sg < nseg; sg++) {
        const uint8_t *sp = src + segBase[sg];
        uint8_t *dp = t + segJ[sg];
        const int64_t len = segLen[sg];
        for (int64_t i = 0; i < len; i++)
          dp[i] = sp[i];
      }
      for (int64_t j = np; j < T; j++)
        t[j] = 0;
      if (sums)
        for (int64_t j = 0; j < T; j++)
          colsum[j] += t[j];
    }
    interleave4(b + q * T * 4, rows[0], rows[1], rows[2], rows[3], T, 0);
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
    if (n == T && q * 4 + 4 <= cg) {
      // Four whole channel rows.
      const uint8_t *x0 = (const uint8_t *)(xg + (q * 4) * P + p0);
      interleave4(dq, x0, x0 + P, x0 + 2 * P, x0 + 3 * P, T, 0x80);
      continue;
    }
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
  if (!sums)
    return;
  // The pixel sums of a as dot products of the packed quads with ones (the quads past cg
  // and the pixels past n are 0): one per quad and vector instead of one add per channel
  // and pixel.
  const typename QISA::V ones = QISA::bcast(0x01010101u);
  for (int64_t v = 0; v < T; v += QISA::L) {
    typename QISA::V s = QISA::zero();
    for (int64_t q = 0; q < K4; q++)
      s = QISA::dot(s, QISA::load(patch + q * T + v), ones);
    QISA::store(colsum + v, s);
  }
}

/// Windowed convolutions (directConv in libjit_qconv.cpp: every layer but the 1x1 stride-1
/// unpadded ones): the weights are packed with k ordered (channel quad, tap, channel in
/// quad), K4 = ceil(cg / 4) KH KW quads, and the group's input is laid out once per image
/// as ceil(cg / 4) blocks of k-quads (entries of 4 bytes a = x + 128 of channels 4q..4q+3,
/// pads at xOffset + 128, channels past cg 0). A block holds the padded plane (Hp x Wp)
/// split by phase: entry (r, c) at ((r % SH) SW + c % SW) Hq Wq + (r / SH) Wq + c / SW
/// with Hq = ceil(Hp / SH), Wq = ceil(Wp / SW) (for stride 1 the padded plane as it is),
/// then T zero entries (qstride = directQStride). The outputs are computed on the phase
/// grid, flattened: output f = oh Wq + ow reads entry f + offs[tap] of each block, with
/// offs = ((kh DH) % SH SW + (kw DW) % SW) Hq Wq + (kh DH / SH) Wq + kw DW / SW, so the patch
/// of T consecutive outputs at one tap is T consecutive entries, loaded in place (no
/// im2col); outputs with ow >= OW are computed and dropped.
template <int NB>
static inline __attribute__((always_inline)) void convTileDirect(
    const uint32_t *w, int64_t wb, const uint32_t *planes, int64_t qstride,
    const int64_t *offs, int64_t cq4, int64_t KK, int32_t *acc /* [NB kMR][T] */) {
  constexpr int L = QISA::L, T = kNVD * L;
  QISA::V c[NB * kMR][kNVD];
  LIBJIT_UNROLL
  for (int r = 0; r < NB * kMR; r++)
    LIBJIT_UNROLL
    for (int v = 0; v < kNVD; v++)
      c[r][v] = QISA::zero();
  for (int64_t q = 0; q < cq4; q++) {
    const uint32_t *base = planes + q * qstride;
    const uint32_t *wq = w + q * KK * kMR;
    for (int64_t t = 0; t < KK; t++) {
      const uint32_t *pt = base + offs[t];
      QISA::V u[kNVD];
      LIBJIT_UNROLL
      for (int v = 0; v < kNVD; v++)
        u[v] = QISA::load(pt + v * L);
      LIBJIT_UNROLL
      for (int r = 0; r < NB * kMR; r++) {
        QISA::V s = QISA::bcast(wq[(r / kMR) * wb + t * kMR + r % kMR]);
        LIBJIT_UNROLL
        for (int v = 0; v < kNVD; v++)
          c[r][v] = QISA::dot(c[r][v], u[v], s);
      }
    }
  }
  LIBJIT_UNROLL
  for (int r = 0; r < NB * kMR; r++)
    LIBJIT_UNROLL
    for (int v = 0; v < kNVD; v++)
      QISA::store(acc + r * T + v * L, c[r][v]);
}

/// The blocks of convTileDirect from the group's input \p xg ([cg][H][W]), and when \p S is
/// not null the per-entry sum over the cg channels of a (int32, the layout of one block).
/// Phases no tap reads (the odd rows and columns of a 1x1 stride-2 layer) are not built.
static inline __attribute__((always_inline)) void directPlanes(
    uint32_t *planes, int32_t *S, const int8_t *xg, int64_t cg, int64_t H, int64_t W,
    int64_t Hp, int64_t Wp, int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t DH,
    int64_t DW, int64_t PT, int64_t PL, int64_t qstride, uint8_t padA, uint32_t *tmp) {
  const int64_t cq4 = ceilDiv(cg, 4), Hq = ceilDiv(Hp, SH), Wq = ceilDiv(Wp, SW);
  const int64_t HWq = Hq * Wq, phases = SH * SW;
  bool rowUsed[16] = {}, colUsed[16] = {};
  for (int64_t kh = 0; kh < KH; kh++)
    rowUsed[(kh * DH) % SH] = true;
  for (int64_t kw = 0; kw < KW; kw++)
    colUsed[(kw * DW) % SW] = true;
  // Row r of the padded plane (Wp entries at src) into its phases of block dst.
  auto scatter = [&](uint32_t *dst, const uint32_t *src, int64_t r) {
    for (int64_t pw = 0; pw < SW; pw++) {
      if (!colUsed[pw])
        continue;
      uint32_t *d = dst + ((r % SH) * SW + pw) * HWq + (r / SH) * Wq;
      for (int64_t i = 0, c = pw; c < Wp; i++, c += SW)
        d[i] = src[c];
    }
  };
  for (int64_t q = 0; q < cq4; q++) {
    const int64_t rc = minI(4, cg - 4 * q); // real channels in this quad
    uint32_t padQ = 0;
    for (int64_t i = 0; i < rc; i++)
      padQ |= uint32_t(padA) << (8 * i);
    uint32_t *pl = planes + q * qstride;
    const int8_t *x0 = xg + 4 * q * H * W;
    for (int64_t r = 0; r < Hp; r++) {
      if (!rowUsed[r % SH])
        continue;
      uint32_t *d = SW == 1 ? pl + (r % SH) * HWq + (r / SH) * Wq : tmp;
      const int64_t h = r - PT;
      if (h < 0 || h >= H) {
        for (int64_t i = 0; i < Wp; i++)
          d[i] = padQ;
      } else {
        for (int64_t i = 0; i < PL; i++)
          d[i] = padQ;
        const int8_t *xr = x0 + h * W;
        uint32_t *dm = d + PL;
        int64_t i = 0;
#if defined(__x86_64__)
        if (rc == 4) {
          const __m128i f = _mm_set1_epi8(char(0x80));
          for (; i + 16 <= W; i += 16) {
            __m128i a0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(xr + i)), f);
            __m128i a1 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(xr + H * W + i)), f);
            __m128i a2 =
                _mm_xor_si128(_mm_loadu_si128((const __m128i *)(xr + 2 * H * W + i)), f);
            __m128i a3 =
                _mm_xor_si128(_mm_loadu_si128((const __m128i *)(xr + 3 * H * W + i)), f);
            __m128i a01l = _mm_unpacklo_epi8(a0, a1), a01h = _mm_unpackhi_epi8(a0, a1);
            __m128i a23l = _mm_unpacklo_epi8(a2, a3), a23h = _mm_unpackhi_epi8(a2, a3);
            __m128i *dv = (__m128i *)(dm + i);
            _mm_storeu_si128(dv, _mm_unpacklo_epi16(a01l, a23l));
            _mm_storeu_si128(dv + 1, _mm_unpackhi_epi16(a01l, a23l));
            _mm_storeu_si128(dv + 2, _mm_unpacklo_epi16(a01h, a23h));
            _mm_storeu_si128(dv + 3, _mm_unpackhi_epi16(a01h, a23h));
          }
        }
#endif
        for (; i < W; i++) {
          uint32_t v = 0;
          for (int64_t k = 0; k < rc; k++)
            v |= uint32_t(uint8_t(xr[k * H * W + i]) ^ 0x80) << (8 * k);
          dm[i] = v;
        }
        for (int64_t j = PL + W; j < Wp; j++)
          d[j] = padQ;
      }
      if (SW > 1)
        scatter(pl, tmp, r);
    }
    for (int64_t j = phases * HWq; j < qstride; j++)
      pl[j] = 0;
  }
  if (!S)
    return;
  for (int64_t j = phases * HWq; j < qstride; j++)
    S[j] = 0;
  int32_t *st = (int32_t *)tmp;
  for (int64_t r = 0; r < Hp; r++) {
    if (!rowUsed[r % SH])
      continue;
    int32_t *d = SW == 1 ? S + (r % SH) * HWq + (r / SH) * Wq : st;
    for (int64_t i = 0; i < Wp; i++)
      d[i] = int32_t(cg) * int32_t(padA);
    const int64_t h = r - PT;
    if (h >= 0 && h < H)
      for (int64_t c = 0; c < cg; c++) {
        const int8_t *xr = xg + (c * H + h) * W;
        int32_t *dm = d + PL;
        for (int64_t i = 0; i < W; i++)
          dm[i] += int32_t(xr[i]) + 128 - int32_t(padA);
      }
    if (SW > 1)
      scatter((uint32_t *)S, (const uint32_t *)st, r);
  }
}

/// The output side of one micro-kernel call: rows r < nr of \p acc (\p as apart; output
/// channel o0 + r, constants at oi0 + r), each run sg of the tile (flat offset segJ, segLen
/// outputs at output pixel segAt of the image's plane at y0 of channel 0) requantized, or
/// stored as i32 when \p out32.
static inline __attribute__((always_inline)) void tileRowsOut(
    int8_t *out, int32_t *out32, const int32_t *acc, int64_t as, int64_t nr, int64_t y0,
    int64_t o0, int64_t oi0, int64_t P, const int64_t *segJ, const int64_t *segLen,
    const int64_t *segAt, int64_t nseg, const int32_t *colsum, const QParams &qp,
    const FastRQ *frq, const bool *fok, double dScale, double dOff, double dLo, double dHi) {
  for (int64_t r = 0; r < nr; r++) {
    const int64_t oi = oi0 + r, y = y0 + (o0 + r) * P;
    const RQ rq{qp.accScale[oi], qp.biasReal[oi], dScale, dOff, dLo, dHi};
    for (int64_t sg = 0; sg < nseg; sg++) {
      const int32_t *a = acc + r * as + segJ[sg];
      const int32_t *cs = colsum ? colsum + segJ[sg] : nullptr;
      if (out32)
        storeRow32(out32 + y + segAt[sg], a, segLen[sg], qp.corr[oi], qp.fOff[oi], cs);
      else
        QISA::requantRowF(out + y + segAt[sg], a, segLen[sg], qp.corr[oi], qp.fOff[oi], cs,
                          rq, frq[oi], fok[oi]);
    }
  }
}

/// The fast requantization constants of channels [0, n) (set up once per kernel call).
static inline __attribute__((always_inline)) void setupFastRQ(FastRQ *frq, bool *fok,
                                                              const QParams &qp, int64_t n,
                                                              double dScale, double dOff,
                                                              double dLo, double dHi) {
  for (int64_t oi = 0; oi < n; oi++) {
    const RQ rq{qp.accScale[oi], qp.biasReal[oi], dScale, dOff, dLo, dHi};
    frq[oi] = FastRQ{};
    fok[oi] = fastRequantSetup(rq, frq[oi]);
  }
}

/// The runs of real outputs of the direct path's tile [p0, p0 + np) of the flat grid of
/// width Wq (columns past OW dropped): flat offset segJ, length segLen, output pixel segAt.
/// Returns their number.
static inline __attribute__((always_inline)) int64_t directSegments(int64_t p0, int64_t np,
                                                                    int64_t Wq, int64_t OW,
                                                                    int64_t *segJ,
                                                                    int64_t *segLen,
                                                                    int64_t *segAt) {
  int64_t nseg = 0;
  for (int64_t j = 0; j < np;) {
    const int64_t f = p0 + j, oh = f / Wq, ow = f % Wq;
    if (ow >= OW) {
      j += Wq - ow;
      continue;
    }
    const int64_t len = minI(OW - ow, np - j);
    segJ[nseg] = j, segLen[nseg] = len, segAt[nseg] = oh * OW + ow, nseg++;
    j += len;
  }
  return nseg;
}

/// How qconvDirect and qconvPointwise share their units (tiles, patches) among the threads:
/// whole, or where whole units leave them uneven (unevenShares) each unit's og output
/// channels in two halves, the first of `mid` channels (whole micro-kernel steps). Unit
/// index u covers the channels [first(u), end(u, og)).
struct ChannelHalves {
  int64_t halves, mid;
  int64_t first(int64_t u) const { return u % halves ? mid : 0; }
  int64_t end(int64_t u, int64_t og) const { return u % halves ? og : mid; }
};
static inline ChannelHalves channelHalves(int64_t units, int64_t og, int64_t nthreads) {
  if (og <= kMR * kNB || !unevenShares(units, nthreads))
    return {1, og};
  return {2, ceilDiv(og, 2 * kMR * kNB) * kMR * kNB};
}

/// The direct path of qconv (convTileDirect). Scratch: acc [kAccRows][T], colsum [T], the
/// fast requantization constants of the G ogPad channels, the blocks, S, a row of Wp
/// entries.
static inline __attribute__((always_inline)) void qconvDirect(
    int8_t *out, int32_t *out32, const int8_t *in, const uint32_t *wpack, const QParams &qp, int64_t N,
    int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH, int64_t OW, int64_t KH, int64_t KW,
    int64_t SH, int64_t SW, int64_t PT, int64_t PL, int64_t DH, int64_t DW, int64_t G,
    int64_t xOff, double dScale,
    double dOff, double dLo, double dHi, bool sums, char *mine, int64_t tid, int64_t nthreads) {
  constexpr int64_t T = kNVD * QISA::L;
  const int64_t cg = C / G, og = O / G, KK = KH * KW, cq4 = ceilDiv(cg, 4), K4 = cq4 * KK;
  const int64_t ogPad = ceilDiv(og, kMR) * kMR, P = OH * OW;
  int64_t Hp, Wp;
  padDims(H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, &Hp, &Wp);
  const int64_t Hq = ceilDiv(Hp, SH), Wq = ceilDiv(Wp, SW);
  const int64_t qstride = directQStride(Hp, Wp, SH, SW, T);
  const int64_t F = (OH - 1) * Wq + OW, tiles = ceilDiv(F, T);
  int32_t *acc = (int32_t *)mine;
  int32_t *colsum = acc + kAccRows * T;
  FastRQ *frq = (FastRQ *)(colsum + T);
  bool *fok = (bool *)(frq + G * ogPad);
  uint32_t *planes = (uint32_t *)(mine + directFixedBytes(G * ogPad, T));
  int32_t *S = (int32_t *)(planes + cq4 * qstride);
  uint32_t *tmp = (uint32_t *)(S + qstride);
  int64_t offs[64];
  for (int64_t kh = 0; kh < KH; kh++)
    for (int64_t kw = 0; kw < KW; kw++)
      offs[kh * KW + kw] = (((kh * DH) % SH) * SW + (kw * DW) % SW) * Hq * Wq +
                           (kh * DH / SH) * Wq + kw * DW / SW;
  setupFastRQ(frq, fok, qp, G * ogPad, dScale, dOff, dLo, dHi);
  int64_t ppFor = -1;
  // Units: the tiles, or where whole tiles leave the threads uneven (14x14: 7 tiles) each
  // tile's channels in two halves (ChannelHalves).
  const ChannelHalves ch = channelHalves(N * G * tiles, og, nthreads);
  int64_t b, e;
  partition(N * G * tiles * ch.halves, 1, tid, nthreads, &b, &e);
  for (int64_t u = b; u < e; u++) {
    const int64_t unit = u / ch.halves, o0 = ch.first(u), o1 = ch.end(u, og);
    const int64_t n = unit / (G * tiles), g = (unit / tiles) % G, t = unit % tiles, p0 = t * T;
    if (ppFor != n * G + g) {
      directPlanes(planes, sums ? S : nullptr, in + (n * C + g * cg) * H * W, cg, H, W, Hp, Wp,
                   KH, KW, SH, SW, DH, DW, PT, PL, qstride, uint8_t(xOff + 128), tmp);
      ppFor = n * G + g;
    }
    const int64_t np = minI(T, F - p0);
    if (sums) {
      for (int64_t j = 0; j < T; j++)
        colsum[j] = 0;
      for (int64_t k = 0; k < KK; k++) {
        const int32_t *sk = S + p0 + offs[k];
        for (int64_t j = 0; j < T; j++)
          colsum[j] += sk[j];
      }
    }
    int64_t segJ[T], segLen[T], segAt[T];
    const int64_t nseg = directSegments(p0, np, Wq, OW, segJ, segLen, segAt);
    for (int64_t ob = o0; ob < o1;) {
      const uint32_t *wb = wpack + (g * ogPad + ob) * K4;
      const int64_t nb = kNB == 2 && ob + kMR < o1 ? 2 : 1;
      if (nb == 2)
        convTileDirect<kNB>(wb, kMR * K4, planes + p0, qstride, offs, cq4, KK, acc);
      else
        convTileDirect<1>(wb, kMR * K4, planes + p0, qstride, offs, cq4, KK, acc);
      tileRowsOut(out, out32, acc, T, minI(nb * kMR, o1 - ob), n * O * P, g * og + ob,
                  g * ogPad + ob, P, segJ, segLen, segAt, nseg, sums ? colsum : nullptr, qp, frq,
                  fok, dScale, dOff, dLo, dHi);
      ob += nb * kMR;
    }
  }
}

/// 1x1 stride-1 unpadded convolutions: the patch of TB pixels (pointwiseTB: several tiles
/// of T, fewer when the threads would lack work) is packed once (packPointwise) and each
/// block of kMR output channels (kNB blocks at a time) runs the micro-kernel on its tiles,
/// then requantizes its rows of TB outputs (one setup of the row's constants per TB outputs
/// instead of T: the layers with few input channels are bound by the requantization).
/// Scratch: patch [K4][TBmax], colsum [TBmax], acc [kAccRows][TBmax], the G ogPad FastRQ.
static inline __attribute__((always_inline)) void qconvPointwise(
    int8_t *out, int32_t *out32, const int8_t *in, const uint32_t *wpack, const QParams &qp, int64_t N,
    int64_t C, int64_t O, int64_t P, int64_t G, double dScale, double dOff, double dLo,
    double dHi, bool sums, char *mine, int64_t tid, int64_t nthreads) {
  constexpr int64_t T = kNV * QISA::L;
  const int64_t cg = C / G, og = O / G, K4 = ceilDiv(cg, 4), ogPad = ceilDiv(og, kMR) * kMR;
  const int64_t TBmax = pointwiseTB(K4, T);
  int64_t TB = TBmax;
  while (TB > T && N * G * ceilDiv(P, TB) < 2 * nthreads)
    TB -= T;
  uint32_t *patch = (uint32_t *)mine;
  int32_t *colsum = (int32_t *)(patch + K4 * TBmax);
  int32_t *acc = colsum + TBmax;
  FastRQ *frq = (FastRQ *)(acc + kAccRows * TBmax);
  bool *fok = (bool *)(frq + G * ogPad);
  setupFastRQ(frq, fok, qp, G * ogPad, dScale, dOff, dLo, dHi);
  const int64_t btiles = ceilDiv(P, TB);
  // Units: the patches, or where whole patches leave the threads uneven (28x28: 7 of 128
  // pixels) each patch's channels in two halves (ChannelHalves), each half packing it.
  const ChannelHalves ch = channelHalves(N * G * btiles, og, nthreads);
  int64_t b, e;
  partition(N * G * btiles * ch.halves, 1, tid, nthreads, &b, &e);
  for (int64_t u = b; u < e; u++) {
    const int64_t unit = u / ch.halves, o0 = ch.first(u), o1 = ch.end(u, og);
    const int64_t n = unit / (G * btiles), g = (unit / btiles) % G, p0 = (unit % btiles) * TB;
    const int64_t np = minI(TB, P - p0), subs = ceilDiv(np, T);
    packPointwise(patch, colsum, sums, in + (n * C + g * cg) * P, TB, p0, P, cg);
    const int64_t segJ = 0;
    for (int64_t ob = o0; ob < o1;) {
      const uint32_t *w = wpack + (g * ogPad + ob) * K4;
      const int64_t nb = kNB == 2 && ob + kMR < o1 ? 2 : 1;
      for (int64_t sb = 0; sb < subs; sb++)
        if (nb == 2)
          convTile<kNB>(w, kMR * K4, patch + sb * T, K4, acc + sb * T, TB, TB);
        else
          convTile<1>(w, kMR * K4, patch + sb * T, K4, acc + sb * T, TB, TB);
      tileRowsOut(out, out32, acc, TB, minI(nb * kMR, o1 - ob), n * O * P, g * og + ob,
                  g * ogPad + ob, P, &segJ, &np, &p0, 1, sums ? colsum : nullptr, qp, frq, fok,
                  dScale, dOff, dLo, dHi);
      ob += nb * kMR;
    }
  }
}

/// Windowed layers the direct path does not take (more than 64 taps, strides above 16, or
/// with 8 lanes fewer than 4 input channels per group): each tile's im2col patch packed
/// from the group's padded planes (padPlanes, packPadded). Scratch: patch [K4][T], colsum
/// [T], acc [kMR][T], the G ogPad FastRQ and flags, then (64-byte aligned) the planes.
static inline __attribute__((always_inline)) void qconvIm2col(
    int8_t *out, int32_t *out32, const int8_t *in, const uint32_t *wpack, const QParams &qp,
    int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH, int64_t OW, int64_t KH,
    int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL, int64_t DH, int64_t DW,
    int64_t G, int64_t xOff, double dScale, double dOff, double dLo, double dHi, bool sums,
    char *mine, int64_t tid, int64_t nthreads) {
  constexpr int64_t T = kNV * QISA::L;
  const int64_t cg = C / G, og = O / G, K = cg * KH * KW, K4 = ceilDiv(K, 4);
  const int64_t ogPad = ceilDiv(og, kMR) * kMR, P = OH * OW, tiles = ceilDiv(P, T);
  uint32_t *patch = (uint32_t *)mine;
  int32_t *colsum = (int32_t *)(mine + K4 * T * 4);
  int32_t *acc = colsum + T;
  int64_t Hp, Wp;
  padDims(H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, &Hp, &Wp);
  FastRQ *frq = (FastRQ *)(acc + kMR * T);
  bool *fok = (bool *)(frq + G * ogPad);
  static_assert(sizeof(FastRQ) == 24, "the emitter reserves 24 bytes per FastRQ");
  uint8_t *pp = (uint8_t *)mine + ceilDiv((K4 + 1 + kMR) * T * 4 + G * ogPad * 25, 64) * 64;
  int64_t ppFor = -1;
  setupFastRQ(frq, fok, qp, G * ogPad, dScale, dOff, dLo, dHi);
  int64_t b, e;
  partition(N * G * tiles, 1, tid, nthreads, &b, &e);
  for (int64_t u = b; u < e; u++) {
    const int64_t n = u / (G * tiles), g = (u / tiles) % G, t = u % tiles, p0 = t * T;
    if (ppFor != n * G + g) {
      padPlanes(pp, in + (n * C + g * cg) * H * W, cg, H, W, Hp, Wp, OH, KH, SH, DH, KW, SW,
                DW, PT, PL, uint8_t(xOff + 128));
      ppFor = n * G + g;
    }
    packPadded(patch, colsum, sums, pp, T, p0, P, cg, Hp, Wp, OW, KH, KW, SH, SW, DH, DW);
    const int64_t np = minI(T, P - p0), segJ = 0;
    for (int64_t ob = 0; ob < og; ob += kMR) {
      convTile<1>(wpack + (g * ogPad + ob) * K4, 0, patch, K4, acc, T, T);
      tileRowsOut(out, out32, acc, T, minI(kMR, og - ob), n * O * P, g * og + ob,
                  g * ogPad + ob, P, &segJ, &np, &p0, 1, sums ? colsum : nullptr, qp, frq, fok,
                  dScale, dOff, dLo, dHi);
    }
  }
}

/// \p out32 non-null: the i32 result (the accumulators with the i32 bias, wrapped; \p out
/// is unused), else the int8 result in \p out. The path: qconvPointwise (1x1 stride-1
/// unpadded), qconvDirect (directConv), else qconvIm2col.
static inline __attribute__((always_inline)) void qconv(int8_t *out, int32_t *out32, const int8_t *in, const uint32_t *wpack,
                         const void *params, int64_t N, int64_t C, int64_t H, int64_t W,
                         int64_t O, int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH,
                         int64_t SW, int64_t PT, int64_t PL, int64_t DH, int64_t DW, int64_t G,
                         int64_t xOff, float outScale, int64_t outOff, int64_t lo, int64_t hi,
                         int64_t anyFOff, char *scratch, int64_t scratchStride, int64_t tid,
                         int64_t nthreads) {
  const int64_t cg = C / G, og = O / G, ogPad = ceilDiv(og, kMR) * kMR;
  const QParams qp = qparams(params, G * ogPad);
  const bool pointwise = KH == 1 && KW == 1 && SH == 1 && SW == 1 && PT == 0 && PL == 0 &&
                         OH == H && OW == W;
  const bool sums = anyFOff != 0;
  char *mine = scratch + tid * scratchStride;
  const double dScale = double(outScale), dOff = double(outOff), dLo = double(lo),
               dHi = double(hi);
  if (pointwise)
    qconvPointwise(out, out32, in, wpack, qp, N, C, O, OH * OW, G, dScale, dOff, dLo, dHi, sums,
                   mine, tid, nthreads);
  else if (directConv(KH, KW, SH, SW, pointwise, cg, QISA::L))
    qconvDirect(out, out32, in, wpack, qp, N, C, H, W, O, OH, OW, KH, KW, SH, SW, PT, PL, DH,
                DW, G, xOff, dScale, dOff, dLo, dHi, sums, mine, tid, nthreads);
  else
    qconvIm2col(out, out32, in, wpack, qp, N, C, H, W, O, OH, OW, KH, KW, SH, SW, PT, PL, DH,
                DW, G, xOff, dScale, dOff, dLo, dHi, sums, mine, tid, nthreads);
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

static inline __attribute__((always_inline)) void qfc(int8_t *out, int32_t *out32, const int8_t *in, const uint32_t *wpack, const void *params,
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
        const int64_t y = (n0 + r) * M + m0;
        const int32_t *ar = acc + r * T;
        for (int64_t j = 0; j < nm; j++) {
          const int64_t m = m0 + j;
          int32_t a = int32_t(uint32_t(ar[j]) + uint32_t(qp.corr[m]) -
                              uint32_t(qp.fOff[m]) * uint32_t(rowsum));
          if (out32)
            out32[y + j] = a;
          else
            out[y + j] = requant(a, qp.accScale[m], qp.biasReal[m], dScale, dOff, dLo, dHi);
        }
      }
    }
  }
}


/// Rows of a (batched) int8 matrix product (qbmm) per unit of work: a multiple of 8 (the
/// micro-kernel's rows), so that one product of few column tiles still splits between
/// threads.
constexpr int64_t kBmmRows = 64;

/// Rows of the bmm micro-kernel per step: 8 with 32 vector registers (16 accumulators),
/// 4 with 16 (the FC's).
constexpr int64_t kBmmStepRows = QISA::L == 16 ? 8 : 4;

/// Rows [n0, n1) and column tile \p t of one product y [N, M] = x [N, K] x W (W packed as
/// qfc's, its column constants \p qp): the FC micro-kernel, then per row the column
/// corrections added to the accumulators and the row requantized by the convolutions'
/// vector requantRowF (one accScale and no bias for every column: \p rq, \p f, \p fast).
static inline __attribute__((always_inline)) void bmmTile(
    int8_t *y, const int8_t *x, const uint32_t *w, const QParams &qp, int64_t K, int64_t M,
    int64_t t, int64_t n0, int64_t n1, bool sums, const RQ &rq, const FastRQ &f, bool fast,
    int32_t *acc) {
  constexpr int64_t T = kNV * QISA::L;
  const int64_t m0 = t * T, nm = minI(T, M - m0);
  for (int64_t r0 = n0; r0 < n1; r0 += kBmmStepRows) {
    const int64_t nr = minI(kBmmStepRows, n1 - r0);
    const int8_t *rows[8];
    for (int64_t r = 0; r < nr; r++)
      rows[r] = x + (r0 + r) * K;
    switch (nr) {
    case 8: fcTile<kBmmStepRows == 8 ? 8 : 4>(rows, w, K, acc); break;
    case 7: fcTile<kBmmStepRows == 8 ? 7 : 4>(rows, w, K, acc); break;
    case 6: fcTile<kBmmStepRows == 8 ? 6 : 4>(rows, w, K, acc); break;
    case 5: fcTile<kBmmStepRows == 8 ? 5 : 4>(rows, w, K, acc); break;
    case 4: fcTile<4>(rows, w, K, acc); break;
    case 3: fcTile<3>(rows, w, K, acc); break;
    case 2: fcTile<2>(rows, w, K, acc); break;
    default: fcTile<1>(rows, w, K, acc); break;
    }
    for (int64_t r = 0; r < nr; r++) {
      uint32_t rowsum = 0;
      if (sums)
        for (int64_t k = 0; k < K; k++)
          rowsum += uint32_t(int32_t(rows[r][k]) + 128);
      int32_t *ar = acc + r * T;
      // Wrapping 32-bit arithmetic, as qfc's.
      for (int64_t j = 0; j < nm; j++)
        ar[j] = int32_t(uint32_t(ar[j]) + uint32_t(qp.corr[m0 + j]) -
                        uint32_t(qp.fOff[m0 + j]) * rowsum);
      QISA::requantRowF(y + (r0 + r) * M + m0, ar, nm, 0, 0, nullptr, rq, f, fast);
    }
  }
}

/// Batched int8 matrix product (MatMul: B = 1; BatchMatMul): y[b] [N, M] = x[b] [N, K] x
/// W[b], each W[b] packed as qfc's [ceil(M / T)][K4][T] quads at wpack + b wStride (uint32
/// entries) with its column constants at params + b pStride bytes. Per-tensor scales and
/// no bias, so every output has batch 0's first accScale and biasReal 0. The units of work,
/// (batch, column tile, kBmmRows rows), split between the threads in that order.
static inline __attribute__((always_inline)) void qbmm(
    int8_t *out, const int8_t *in, const uint32_t *wpack, const void *params, int64_t B,
    int64_t N, int64_t K, int64_t M, int64_t wStride, int64_t pStride, float outScale,
    int64_t outOff, int64_t anyFOff, char *scratch, int64_t scratchStride, int64_t tid,
    int64_t nthreads) {
  constexpr int64_t T = kNV * QISA::L;
  const int64_t tiles = ceilDiv(M, T), Mpad = tiles * T, chunks = ceilDiv(N, kBmmRows);
  if (B * tiles * chunks == 0) // an empty result: no column constants to read
    return;
  int32_t *acc = (int32_t *)(scratch + tid * scratchStride);
  const RQ rq{qparams(params, Mpad).accScale[0], 0.0, double(outScale), double(outOff),
              -128.0, 127.0};
  FastRQ f{};
  const bool fast = fastRequantSetup(rq, f);
  int64_t b, e;
  partition(B * tiles * chunks, 1, tid, nthreads, &b, &e);
  for (int64_t u = b; u < e; u++) {
    const int64_t bt = u / (tiles * chunks), t = u / chunks % tiles, c = u % chunks;
    const QParams qp = qparams((const char *)params + bt * pStride, Mpad);
    const uint32_t *w = wpack + bt * wStride + t * ceilDiv(K, 4) * T;
    bmmTile(out + bt * N * M, in + bt * N * K, w, qp, K, M, t, c * kBmmRows,
            minI(N, (c + 1) * kBmmRows), anyFOff != 0, rq, f, fast, acc);
  }
}

/// acc[q] = sum over t < np of the 2 x int16 dot product of d[q + off[t]] with the pair
/// w[t], for q < n (a multiple of L). Four vectors at a time with their own accumulators:
/// one accumulator chains its np dot products at their latency (5 cycles for vpdpwssd),
/// four keep the unit busy.
static inline __attribute__((always_inline)) void dwPairDots(int32_t *acc, const int32_t *d,
                                                             const int64_t *off,
                                                             const uint32_t *w, int64_t np,
                                                             int64_t n) {
  constexpr int64_t L = QISA::L;
  int64_t q = 0;
  for (; q + 4 * L <= n; q += 4 * L) {
    typename QISA::V s0 = QISA::zero(), s1 = QISA::zero(), s2 = QISA::zero(),
                     s3 = QISA::zero();
    for (int64_t t = 0; t < np; t++) {
      const int32_t *p = d + q + off[t];
      s0 = QISA::dot16x2(s0, p, w[t]);
      s1 = QISA::dot16x2(s1, p + L, w[t]);
      s2 = QISA::dot16x2(s2, p + 2 * L, w[t]);
      s3 = QISA::dot16x2(s3, p + 3 * L, w[t]);
    }
    QISA::store(acc + q, s0);
    QISA::store(acc + q + L, s1);
    QISA::store(acc + q + 2 * L, s2);
    QISA::store(acc + q + 3 * L, s3);
  }
  for (; q < n; q += L) {
    typename QISA::V s = QISA::zero();
    for (int64_t t = 0; t < np; t++)
      s = QISA::dot16x2(s, d + q + off[t], w[t]);
    QISA::store(acc + q, s);
  }
}

/// acc[0, m) (m <= 2L) from the even-output lanes \p e and odd-output lanes \p o.
static inline __attribute__((always_inline)) void dwStoreEO(int32_t *acc, typename QISA::V e,
                                                            typename QISA::V o, int64_t m) {
  typename QISA::V lo, hi;
  QISA::interleave(e, o, lo, hi);
  QISA::store(acc, lo);
  if (m > QISA::L)
    QISA::store(acc + QISA::L, hi);
}

/// dwPairDots on the padded plane \p xp itself where a tap's pair partner is the next
/// column (DW = 1, or KW = 1 with partners weighted 0): the L int32 at int16 entry p are the
/// pairs (xp[p + 2i], xp[p + 2i + 1]), so at p = q + off[t] they are tap pair t of the even
/// outputs q + 2i and at p = q + 1 + off[t] that of the odd ones; 2L outputs per pair of
/// accumulators, put back in order by QISA::interleave (no pair plane to build).
static inline __attribute__((always_inline)) void dwPairDotsEO(int32_t *acc, const int16_t *xp,
                                                               const int64_t *off,
                                                               const uint32_t *w, int64_t np,
                                                               int64_t n) {
  constexpr int64_t L = QISA::L;
  int64_t q = 0;
  for (; q + 4 * L <= n; q += 4 * L) {
    typename QISA::V e0 = QISA::zero(), o0 = QISA::zero(), e1 = QISA::zero(),
                     o1 = QISA::zero();
    for (int64_t t = 0; t < np; t++) {
      const int16_t *p = xp + q + off[t];
      e0 = QISA::dot16x2At(e0, p, w[t]);
      o0 = QISA::dot16x2At(o0, p + 1, w[t]);
      e1 = QISA::dot16x2At(e1, p + 2 * L, w[t]);
      o1 = QISA::dot16x2At(o1, p + 2 * L + 1, w[t]);
    }
    dwStoreEO(acc + q, e0, o0, 2 * L);
    dwStoreEO(acc + q + 2 * L, e1, o1, 2 * L);
  }
  for (; q < n; q += 2 * L) {
    typename QISA::V e = QISA::zero(), o = QISA::zero();
    for (int64_t t = 0; t < np; t++) {
      e = QISA::dot16x2At(e, xp + q + off[t], w[t]);
      o = QISA::dot16x2At(o, xp + q + off[t] + 1, w[t]);
    }
    dwStoreEO(acc + q, e, o, n - q);
  }
}

/// The OH x OW outputs of a depthwise plane requantized from accumulators in rows of \p ld
/// (the flat grids of qdwconv; columns past OW are dropped). With 16 lanes (masked last
/// vectors) row by row in place, the channel's fast constants set up once; with 8 lanes
/// (scalar tails) rows narrower than 4 vectors are compacted to rows of OW first and
/// requantized as one.
static inline __attribute__((always_inline)) void dwRequantRows(int8_t *y, int32_t *acc,
                                                                int64_t OH, int64_t OW,
                                                                int64_t ld, int32_t corr,
                                                                const RQ &rq) {
  constexpr int64_t L = QISA::L;
  if (ld != OW && (L == 16 || OW >= 4 * L)) {
    FastRQ f{};
    const bool fast = fastRequantSetup(rq, f);
    for (int64_t oh = 0; oh < OH; oh++)
      QISA::requantRowF(y + oh * OW, acc + oh * ld, OW, corr, 0, nullptr, rq, f, fast);
    return;
  }
  if (ld != OW)
    for (int64_t oh = 1; oh < OH; oh++)
      for (int64_t ow = 0; ow < OW; ow++)
        acc[oh * OW + ow] = acc[oh * ld + ow];
  QISA::requantRow(y, acc, OH * OW, corr, 0, nullptr, rq);
}

/// The centred filter pairs of one channel, in the order of qdwconv's tap-pair offsets:
/// (wc[kh][kw], wc[kh][kw + 1]) for even kw as the low and high int16, the partner 0 past
/// the row's end.
static inline __attribute__((always_inline)) void dwWeightPairs(uint32_t *wp, const int16_t *wc,
                                                                int64_t KH, int64_t KW) {
  for (int64_t kh = 0, t = 0; kh < KH; kh++)
    for (int64_t kw = 0; kw < KW; kw += 2, t++) {
      const int16_t *wr = wc + kh * KW;
      wp[t] = uint32_t(uint16_t(wr[kw])) |
              (uint32_t(uint16_t(kw + 1 < KW ? wr[kw + 1] : int16_t(0))) << 16);
    }
}

/// The H x W input plane \p x centred by \p xo into the zeroed int16 rows of a padded
/// plane: image row h at padded row r = h + PT, column PL on, which lies at \p xp + r ld
/// (\p split 0), or at \p xp + (r % 2) split + (r / 2) ld (the row-parity planes of flat2).
static inline __attribute__((always_inline)) void dwCentreRows(int16_t *xp, const int8_t *x,
                                                               int64_t H, int64_t W, int64_t PT,
                                                               int64_t PL, int64_t ld,
                                                               int64_t split, int32_t xo) {
  for (int64_t h = 0; h < H; h++) {
    const int64_t r = h + PT;
    int16_t *dr = xp + (split ? (r % 2) * split + (r / 2) * ld : r * ld) + PL;
    QISA::centre16(dr, x + h * W, W, xo);
  }
}

/// Stride 2 (qdwconv's flat2): the padded, centred rows of input plane \p x split by row
/// parity into the two flat planes at \p pln (rows of Wq2 int32 = 2 Wq2 int16, pe2 int32
/// per plane), the pads and the slack the last vectors read zeros.
static inline __attribute__((always_inline)) void dwFlat2Plane(int32_t *pln, const int8_t *x,
                                                               int64_t H, int64_t W, int64_t PT,
                                                               int64_t PL, int64_t Wq2,
                                                               int64_t pe2, int32_t xo) {
  for (int64_t i = 0; i < 2 * pe2; i++)
    pln[i] = 0;
  dwCentreRows((int16_t *)pln, x, H, W, PT, PL, 2 * Wq2, 2 * pe2, xo);
}

/// Stride 1 (qdwconv's flat): the padded, centred plane of input plane \p x as rows of Wp
/// int16 at \p xp, its first \p nz entries (the plane and the slack the last vectors read)
/// zeroed first; then, where \p dp is given, the pair plane dp[q] = (xp[q], xp[q + pdw]) up
/// to entry \p nd.
static inline __attribute__((always_inline)) void dwFlatPlane(int16_t *xp, int32_t *dp,
                                                              const int8_t *x, int64_t H,
                                                              int64_t W, int64_t Wp, int64_t PT,
                                                              int64_t PL, int32_t xo,
                                                              int64_t pdw, int64_t nd,
                                                              int64_t nz) {
  for (int64_t i = 0; i < nz; i++)
    xp[i] = 0;
  dwCentreRows(xp, x, H, W, PT, PL, Wp, 0, xo);
  if (dp)
    QISA::pairs16(dp, xp, pdw, nd);
}

/// Other strides (qdwconv's phased path): the padded, centred plane of input plane \p x at
/// \p xp, Hp rows of Wr int16, each row's Wp columns grouped in SW phases (column c at
/// phase c % SW, index c / SW), each phase followed by L zero columns. Stride 2 builds each
/// padded row in a line after the plane (Wp + 1 entries), then splits it into even and odd
/// columns in one pass.
static inline __attribute__((always_inline)) void dwPhasedPlane(int16_t *xp, const int8_t *x,
                                                                int64_t H, int64_t W,
                                                                int64_t Hp, int64_t Wp,
                                                                int64_t Wr, int64_t SW,
                                                                int64_t PT, int64_t PL,
                                                                int32_t xo) {
  constexpr int64_t L = QISA::L;
  for (int64_t r = 0; r < Hp; r++) {
    int16_t *dr = xp + r * Wr;
    const int64_t h = r - PT;
    const bool rowIn = h >= 0 && h < H;
    const int8_t *xr = x + h * W;
    if (SW == 2) {
      int16_t *line = xp + Hp * Wr;
      const int64_t in0 = rowIn ? minI(PL, Wp) : Wp, in1 = rowIn ? minI(PL + W, Wp) : Wp;
      for (int64_t i = 0; i < in0; i++)
        line[i] = 0;
      for (int64_t i = in0; i < in1; i++)
        line[i] = int16_t(int32_t(xr[i - PL]) - xo);
      for (int64_t i = in1; i < Wp + 1; i++)
        line[i] = 0;
      const int64_t lenE = (Wp + 1) / 2, lenO = Wp / 2;
      int16_t *de = dr, *dO = dr + lenE + L;
      for (int64_t i = 0; i < lenE; i++) {
        de[i] = line[2 * i];
        dO[i] = line[2 * i + 1];
      }
      for (int64_t i = lenE; i < lenE + L; i++)
        de[i] = 0;
      for (int64_t i = lenO; i < lenO + L; i++)
        dO[i] = 0;
      continue;
    }
    for (int64_t ph = 0, at = 0; ph < SW; ph++) {
      const int64_t len = ph < Wp ? (Wp - ph + SW - 1) / SW : 0;
      int16_t *dp = dr + at;
      // Entries i in [i0, i1) hold input columns ph + i SW - PL in [0, W).
      int64_t i0 = 0, i1 = 0;
      if (rowIn) {
        i0 = minI(len, PL > ph ? (PL - ph + SW - 1) / SW : 0);
        i1 = maxI(i0, minI(len, (W + PL - ph + SW - 1) / SW));
      }
      for (int64_t i = 0; i < i0; i++)
        dp[i] = 0;
      if (SW == 1) {
        const int8_t *xs = xr - PL;
        for (int64_t i = i0; i < i1; i++)
          dp[i] = int16_t(int32_t(xs[i]) - xo);
      } else {
        const int8_t *xs = xr + ph - PL;
        for (int64_t i = i0; i < i1; i++)
          dp[i] = int16_t(int32_t(xs[i * SW]) - xo);
      }
      for (int64_t i = i1; i < len + L; i++)
        dp[i] = 0;
      at += len + L;
    }
  }
}

/// The phased path's accumulators (OH rows of OW at \p accPlane) from the plane \p xp of
/// dwPhasedPlane and the centred filter \p wc: tap (kh, kw) of output column ow reads padded
/// column ow SW + kw DW of padded row oh SH + kh DH, that is phase (kw DW) % SW, index
/// ow + (kw DW) / SW. Up to 64 taps, L outputs at a time accumulate every tap in one
/// register (widened int16 times the filter, exact in int32); more, tap by tap in wrapping
/// scalar arithmetic.
static inline __attribute__((always_inline)) void dwPhasedDots(int32_t *accPlane,
                                                               const int16_t *xp,
                                                               const int16_t *wc, int64_t OH,
                                                               int64_t OW, int64_t KH,
                                                               int64_t KW, int64_t SH,
                                                               int64_t SW, int64_t DH,
                                                               int64_t DW, int64_t Wp,
                                                               int64_t Wr) {
  constexpr int64_t L = QISA::L;
  const int64_t KK = KH * KW;
  const int16_t *taps[64];
  for (int64_t oh = 0; oh < OH; oh++) {
    int32_t *acc = accPlane + oh * OW; // a vector's overrun lands in the next row or slack
    auto tap = [&](int64_t kh, int64_t kw) -> const int16_t * {
      const int64_t off = kw * DW, ph = off % SW;
      int64_t at = 0;
      for (int64_t p = 0; p < ph; p++)
        at += (p < Wp ? (Wp - p + SW - 1) / SW : 0) + L;
      return xp + (oh * SH + kh * DH) * Wr + at + off / SW;
    };
    if (KK <= 64) {
      for (int64_t kh = 0; kh < KH; kh++)
        for (int64_t kw = 0; kw < KW; kw++)
          taps[kh * KW + kw] = tap(kh, kw);
      for (int64_t ow = 0; ow < OW; ow += L) {
        typename QISA::V s = QISA::zero();
        for (int64_t t = 0; t < KK; t++)
          s = QISA::mla16(s, taps[t] + ow, wc[t]);
        QISA::store(acc + ow, s);
      }
      continue;
    }
    for (int64_t ow = 0; ow < OW; ow++)
      acc[ow] = 0;
    for (int64_t kh = 0; kh < KH; kh++)
      for (int64_t kw = 0; kw < KW; kw++) {
        const int16_t *xs = tap(kh, kw);
        const int32_t wv = wc[kh * KW + kw];
        for (int64_t ow = 0; ow < OW; ow++)
          acc[ow] = int32_t(uint32_t(acc[ow]) + uint32_t(int32_t(xs[ow]) * wv));
      }
  }
}

/// The offsets of qdwconv's tap pairs (kh, kw) for even kw, in int32 entries of the pair
/// plane (flat: kh DH Wp + kw DW) or of the row-parity planes (flat2: (kh % 2) pe2 +
/// (kh / 2) Wq2 + kw / 2). Returns their number.
static inline __attribute__((always_inline)) int64_t dwPairOffsets(int64_t *off, bool flat2,
                                                                   int64_t KH, int64_t KW,
                                                                   int64_t DH, int64_t DW,
                                                                   int64_t Wp, int64_t Wq2,
                                                                   int64_t pe2) {
  int64_t np = 0;
  for (int64_t kh = 0; kh < KH; kh++)
    for (int64_t kw = 0; kw < KW; kw += 2)
      off[np++] = flat2 ? (kh % 2) * pe2 + (kh / 2) * Wq2 + kw / 2 : kh * DH * Wp + kw * DW;
  return np;
}

/// qdwconv's stride-1 path where every tap pair's partner is the next column (DW = 1 or
/// KW = 1: dwPairDotsEO, no pair plane), over planes [b, e) with output constants \p rq
/// (its as and br set per channel): dwFlatBatch planes (xs int16 apart at \p xp, what the
/// emitter reserves) are built before any of them is computed, so the dot products'
/// unaligned loads do not wait on the stores that have just written their plane.
static inline __attribute__((always_inline)) void dwFlatRun(
    int8_t *out, const int8_t *in, const int16_t *w, const QParams &qp, RQ rq, int64_t b,
    int64_t e, int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t KH, int64_t KW,
    int64_t Hp, int64_t Wp, int64_t PT, int64_t PL, int32_t xo, const int64_t *off, int64_t np,
    int32_t *accPlane, int16_t *xp) {
  constexpr int64_t L = QISA::L;
  const int64_t xs = dwFlatXpElems(Hp, Wp, L), nb = dwFlatBatch(xs);
  const int64_t n = ceilDiv(OH * Wp, L) * L;
  // Entries the even and odd loads reach (dwPairDotsEO): the plane, then zeros.
  const int64_t nz = maxI(Hp * Wp, n + off[np - 1] + L + 2);
  uint32_t wp[64];
  for (int64_t p0 = b; p0 < e; p0 += nb) {
    const int64_t pn = minI(nb, e - p0);
    for (int64_t k = 0; k < pn; k++)
      dwFlatPlane(xp + k * xs, nullptr, in + (p0 + k) * H * W, H, W, Wp, PT, PL, xo, 0, 0, nz);
    for (int64_t k = 0; k < pn; k++) {
      const int64_t c = (p0 + k) % C;
      rq.as = qp.accScale[c], rq.br = qp.biasReal[c];
      dwWeightPairs(wp, w + c * KH * KW, KH, KW);
      dwPairDotsEO(accPlane, xp + k * xs, off, wp, np, n);
      dwRequantRows(out + (p0 + k) * OH * OW, accPlane, OH, OW, Wp, qp.corr[c], rq);
    }
  }
}

/// The quad path's plane (dwQuadRun): the padded plane as Hp rows of Wp unsigned bytes, x
/// as x + 128 (x ^ 0x80) and the pads as \p pad = xOffset + 128 (their x - xOffset is 0),
/// its first \p nz bytes (the plane and the slack the last loads reach) written.
static inline __attribute__((always_inline)) void dwBytePlane(uint8_t *__restrict xb,
                                                              const int8_t *__restrict x,
                                                              int64_t H, int64_t W, int64_t Wp,
                                                              int64_t PT, int64_t PL,
                                                              uint8_t pad, int64_t nz) {
  const int64_t in0 = PT * Wp, in1 = (PT + H) * Wp;
  for (int64_t i = 0; i < in0; i++)
    xb[i] = pad;
  for (int64_t h = 0; h < H; h++)
    QISA::flipRow(xb + (h + PT) * Wp, x + h * W, W, PL, Wp, pad);
  for (int64_t i = in1; i < nz; i++)
    xb[i] = pad;
}

/// The quad path's dot products: acc[q] = sum over kernel rows kh of the u8 x s8 quad dot
/// product of bytes xb[q + kh rs .. + 3] (rs = DH Wp) with the row's taps wq[kh] (the taps
/// past KW 0),
/// for q < n (a multiple of L). The L lanes loaded at byte q + r are the quads of outputs
/// q + 4 i + r, so four loads per kernel row give 4 L outputs (one accumulator per r),
/// put back in order by QISA::interleave4.
static inline __attribute__((always_inline)) void dwQuadDots(int32_t *acc, const uint8_t *xb,
                                                             const uint32_t *wq, int64_t KH,
                                                             int64_t rs, int64_t n) {
  constexpr int64_t L = QISA::L;
  for (int64_t q = 0; q < n; q += 4 * L) {
    typename QISA::V p0 = QISA::zero(), p1 = QISA::zero(), p2 = QISA::zero(),
                     p3 = QISA::zero();
    for (int64_t kh = 0; kh < KH; kh++) {
      const uint8_t *r = xb + q + kh * rs;
      const typename QISA::V s = QISA::bcast(wq[kh]);
      p0 = QISA::dot(p0, QISA::load((const uint32_t *)(const void *)r), s);
      p1 = QISA::dot(p1, QISA::load((const uint32_t *)(const void *)(r + 1)), s);
      p2 = QISA::dot(p2, QISA::load((const uint32_t *)(const void *)(r + 2)), s);
      p3 = QISA::dot(p3, QISA::load((const uint32_t *)(const void *)(r + 3)), s);
    }
    QISA::interleave4(acc + q, p0, p1, p2, p3, minI(4 * L, n - q));
  }
}

/// The smallest flat grid (OH Wp outputs) qdwconv gives the quad path: on smaller planes
/// (14 x 14 and below) its last block of 64 outputs and the plane's pads cost more than
/// the int16 path's pair products save.
constexpr int64_t kDwQuadMin = 512;

/// Whether qdwconv's stride-1 layer can take the quad path: kernel rows of at most 4 taps,
/// undilated, and every centred tap of the \p n in \p w an int8.
static inline __attribute__((always_inline)) bool dwQuadShape(const int16_t *w, int64_t n,
                                                              int64_t KW, int64_t DW) {
  bool fits = KW <= 4 && DW == 1;
  for (int64_t i = 0; i < n; i++)
    fits &= w[i] >= -128 && w[i] <= 127;
  return fits;
}

/// qdwconv's stride-1 path for dwQuadShape layers with 16 lanes (vpdpbusd): per plane the
/// sum over the taps of (x + 128) f, from byte planes (dwBytePlane, dwFlatBatch planes
/// built before any is computed) by dwQuadDots, with (xOffset + 128) sum f taken out of
/// the channel's constant: the same accumulator as the int16 paths', requantized alike.
static inline __attribute__((always_inline)) void dwQuadRun(
    int8_t *out, const int8_t *in, const int16_t *w, const QParams &qp, RQ rq, int64_t b,
    int64_t e, int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t KH, int64_t KW,
    int64_t DH, int64_t Hp, int64_t Wp, int64_t PT, int64_t PL, int32_t xo, int32_t *accPlane,
    int16_t *xp) {
  constexpr int64_t L = QISA::L;
  const int64_t xs = dwFlatXpElems(Hp, Wp, L), nb = dwFlatBatch(xs);
  const int64_t n = ceilDiv(OH * Wp, L) * L;
  const int64_t nz = ceilDiv(n, 4 * L) * 4 * L + (KH - 1) * DH * Wp + 4; // within 2 xs bytes
  const uint8_t pad = uint8_t(xo + 128);
  uint32_t wq[64];
  for (int64_t p0 = b; p0 < e; p0 += nb) {
    const int64_t pn = minI(nb, e - p0);
    for (int64_t k = 0; k < pn; k++)
      dwBytePlane((uint8_t *)(xp + k * xs), in + (p0 + k) * H * W, H, W, Wp, PT, PL, pad, nz);
    for (int64_t k = 0; k < pn; k++) {
      const int64_t c = (p0 + k) % C;
      const int16_t *wc = w + c * KH * KW;
      uint32_t sumF = 0;
      for (int64_t kh = 0; kh < KH; kh++) {
        wq[kh] = 0;
        for (int64_t kw = 0; kw < KW; kw++) {
          wq[kh] |= uint32_t(uint8_t(int8_t(wc[kh * KW + kw]))) << (8 * kw);
          sumF += uint32_t(int32_t(wc[kh * KW + kw]));
        }
      }
      rq.as = qp.accScale[c], rq.br = qp.biasReal[c];
      const int32_t corr = int32_t(uint32_t(qp.corr[c]) - uint32_t(xo + 128) * sumF);
      dwQuadDots(accPlane, (const uint8_t *)(xp + k * xs), wq, KH, DH * Wp, n);
      dwRequantRows(out + (p0 + k) * OH * OW, accPlane, OH, OW, Wp, corr, rq);
    }
  }
}

/// qdwconv's stride-1 layers where every tap pair's partner is the next column (DW = 1 or
/// KW = 1): the quad path (dwQuadRun) on 16 lanes for grids of kDwQuadMin outputs or more
/// whose taps dwQuadShape accepts, else dwFlatRun.
static inline __attribute__((always_inline)) void dwStride1Run(
    int8_t *out, const int8_t *in, const int16_t *w, const QParams &qp, const RQ &rq, int64_t b,
    int64_t e, int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t KH, int64_t KW,
    int64_t DH, int64_t DW, int64_t Hp, int64_t Wp, int64_t PT, int64_t PL, int32_t xo,
    const int64_t *off, int64_t np, int32_t *accPlane, int16_t *xp) {
  if (QISA::L == 16 && OH * Wp >= kDwQuadMin && dwQuadShape(w, C * KH * KW, KW, DW))
    return dwQuadRun(out, in, w, qp, rq, b, e, C, H, W, OH, OW, KH, KW, DH, Hp, Wp, PT, PL, xo,
                     accPlane, xp);
  dwFlatRun(out, in, w, qp, rq, b, e, C, H, W, OH, OW, KH, KW, Hp, Wp, PT, PL, xo, off, np,
            accPlane, xp);
}

/// The per-lane requantization constants of a block of channels (dwLanesRun).
struct DwLanesRq {
  float A[16], B[16], hmc[16];
  double as[16], br[16];
  int32_t corr[16];
  RQ rq;
  float loF, hiF;
  int32_t off;
  bool fast, sat;
};

/// One vector of accumulators (lane c: channel c of the block) requantized to int32:
/// FastRQ where every lane allows it, else the Interpreter's double path (lnRequantExact).
template <class I>
static inline __attribute__((always_inline)) typename I::V
dwLanesRequant(typename I::V a, const DwLanesRq &k, typename I::V corr, typename I::F A,
               typename I::F B, typename I::F hmc) {
  typename I::F r;
  a = I::lnAdd(a, corr);
  if (I::lnQuot(a, A, B, hmc, r) && k.fast)
    return I::lnFinish(r, k.sat, k.loF, k.hiF, k.off);
  return I::lnRequantExact(a, k.as, k.br, k.rq);
}

/// The block's constants: lanes c < nl are channels c0 + c (the rest 0), their centred
/// taps in \p wt as int32 (the int16 tap low, 0 high: lnDot's weight operand).
template <class I>
static inline __attribute__((always_inline)) void dwLanesSetup(DwLanesRq &k, int32_t *wt,
                                                               const int16_t *w,
                                                               const QParams &qp, int64_t c0,
                                                               int64_t nl, int64_t KK) {
  k.fast = true;
  for (int64_t c = 0; c < I::L; c++) {
    const bool in = c < nl;
    const RQ r{in ? qp.accScale[c0 + c] : 0.0, in ? qp.biasReal[c0 + c] : 0.0, k.rq.scale,
               k.rq.off, k.rq.lo, k.rq.hi};
    FastRQ f{};
    k.fast &= !in || fastRequantSetup(r, f);
    k.A[c] = f.A, k.B[c] = f.B, k.hmc[c] = in ? f.hmc : 0.25f; // unused lanes: s = 0
    k.as[c] = r.as, k.br[c] = r.br, k.corr[c] = in ? qp.corr[c0 + c] : 0;
    for (int64_t t = 0; t < KK; t++)
      wt[t * I::L + c] = in ? int32_t(uint16_t(w[(c0 + c) * KK + t])) : 0;
  }
}

/// The block's input planes (nl channels of H x W bytes, HW apart at \p x) as the padded
/// plane \p xt of Hp Wp pixels of L int32 lanes (x - xOffset; the pads 0): 4L pixels of
/// the L planes at a time, loaded as L rows of L quads and transposed; input pixel p goes
/// to vector \p idx[p] of xt (dwLanesRun: pixels past HW to one past the plane).
template <class I>
static inline __attribute__((always_inline)) void dwLanesInput(int32_t *xt, const int8_t *x,
                                                               const int32_t *idx, int64_t nl,
                                                               int64_t H, int64_t W, int64_t Hp,
                                                               int64_t Wp, int64_t PT,
                                                               int64_t PL, int32_t xo) {
  constexpr int64_t L = I::L;
  typedef typename I::V V;
  const V z = I::zero(), vo = I::bcast(uint32_t(xo));
  for (int64_t r = 0; r < Hp; r++)
    for (int64_t c = 0; c < Wp; c++)
      if (r < PT || r >= PT + H || c < PL || c >= PL + W)
        I::store(xt + (r * Wp + c) * L, z);
  const int64_t HW = H * W;
  for (int64_t p0 = 0; p0 < HW; p0 += 4 * L) {
    const int64_t n = minI(4 * L, HW - p0);
    V r[L];
    for (int64_t c = 0; c < L; c++)
      r[c] = c < nl ? I::lnLoadBytes(x + c * HW + p0, n) : z;
    I::lnTranspose(r);
    for (int64_t g = 0; g < L; g++)
      for (int j = 0; j < 4; j++)
        I::store(xt + int64_t(idx[p0 + 4 * g + j]) * L, I::lnByte(r[g], j, vo));
  }
}

/// The block's requantized outputs as int32 vectors of L channels, one per output pixel,
/// at \p st (OH OW vectors): every tap one lnDot from the padded plane \p xt. \p KKc: the
/// taps as a constant (their weights then loaded once), or 0.
template <class I, int KKc>
static inline __attribute__((always_inline)) void dwLanesDots(
    int32_t *st, const int32_t *xt, const int32_t *wt, const int64_t *off, int64_t KKr,
    int64_t OH, int64_t OW, int64_t SH, int64_t SW, int64_t Wp, const DwLanesRq &k) {
  constexpr int64_t L = I::L;
  typedef typename I::V V;
  const int64_t KK = KKc ? KKc : KKr;
  V wv[KKc ? KKc : 1];
  for (int t = 0; t < KKc; t++)
    wv[t] = I::load((const uint32_t *)(wt + t * L));
  const typename I::F A = I::lnLoadF(k.A), B = I::lnLoadF(k.B), hmc = I::lnLoadF(k.hmc);
  const V corr = I::load((const uint32_t *)k.corr);
  for (int64_t oh = 0; oh < OH; oh++)
    for (int64_t ow = 0; ow < OW; ow++) {
      const int32_t *base = xt + (oh * SH * Wp + ow * SW) * L;
      // Three chains of taps (t mod 3), added at the end (wrapping int32: the same sum).
      V acc[3] = {I::zero(), I::zero(), I::zero()};
      for (int64_t t = 0; t < KK; t++)
        acc[t % 3] =
            I::lnDot(acc[t % 3], I::load((const uint32_t *)(base + off[t])),
                     KKc ? wv[KKc ? t : 0] : I::load((const uint32_t *)(wt + t * L)));
      I::store(st + (oh * OW + ow) * L, dwLanesRequant<I>(I::lnAdd(acc[0], I::lnAdd(acc[1], acc[2])), k, corr, A, B, hmc));
    }
}

/// The block's outputs (nl channels of \p OHW bytes at \p y) from the vectors of
/// dwLanesDots at \p st (pixels past OHW read and dropped): 4L pixels at a time packed
/// four to a lane and transposed into L rows of bytes.
template <class I>
static inline __attribute__((always_inline)) void dwLanesStore(int8_t *y, const int32_t *st,
                                                               int64_t nl, int64_t OHW) {
  constexpr int64_t L = I::L;
  for (int64_t p0 = 0; p0 < OHW; p0 += 4 * L) {
    typename I::V g[L];
    for (int64_t gi = 0; gi < L; gi++) {
      const uint32_t *q = (const uint32_t *)(st + (p0 + 4 * gi) * L);
      g[gi] = I::lnPack4(I::load(q), I::load(q + L), I::load(q + 2 * L), I::load(q + 3 * L));
    }
    I::lnTranspose(g);
    const int64_t n = minI(4 * L, OHW - p0);
    for (int64_t c = 0; c < nl; c++)
      I::lnStoreBytes(y + c * OHW + p0, g[c], n);
  }
}

/// qdwconv with channels as lanes (small planes: kDwLanesMaxPixels): blocks of L channels
/// of one image, each laid out once as a padded plane of L-lane int32 pixels
/// (dwLanesInput), so a tap of L outputs is one vector load and one lnDot and the
/// requantization's per-channel constants are vectors (no per-plane set-up or rows).
template <class I>
static inline __attribute__((always_inline)) void dwLanesRun(
    int8_t *out, const int8_t *in, const int16_t *w, const QParams &qp, const RQ &rq, int64_t N,
    int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH,
    int64_t SW, int64_t DH, int64_t DW, int64_t Hp, int64_t Wp, int64_t PT, int64_t PL,
    int32_t xo, int32_t *xt, int64_t tid, int64_t nthreads) {
  constexpr int64_t L = I::L;
  const int64_t KK = KH * KW, nbc = ceilDiv(C, L);
  int64_t off[64];
  for (int64_t kh = 0; kh < KH; kh++)
    for (int64_t kw = 0; kw < KW; kw++)
      off[kh * KW + kw] = (kh * DH * Wp + kw * DW) * L;
  alignas(64) int32_t wt[64 * L];
  DwLanesRq k{};
  k.rq = rq;
  k.loF = float(rq.lo - rq.off), k.hiF = float(rq.hi - rq.off), k.off = int32_t(rq.off);
  k.sat = rq.lo == -128.0 && rq.hi == 127.0;
  int32_t *st = xt + Hp * Wp * L; // dwLanesScratch
  // Where input pixel p lies in the padded plane; pixels of the last 4L past H W go to
  // the first output vector (written after the plane is read).
  int32_t idx[kDwLanesMaxPixels + 4 * L];
  for (int64_t p = 0; p < ceilDiv(H * W, 4 * L) * 4 * L; p++)
    idx[p] = p < H * W ? int32_t((p / W + PT) * Wp + p % W + PL) : int32_t(Hp * Wp);
  int64_t b, e;
  partition(N * nbc, 1, tid, nthreads, &b, &e);
  for (int64_t blk = b; blk < e; blk++) {
    const int64_t img = blk / nbc, c0 = (blk % nbc) * L, nl = minI(L, C - c0);
    dwLanesSetup<I>(k, wt, w, qp, c0, nl, KK);
    dwLanesInput<I>(xt, in + (img * C + c0) * H * W, idx, nl, H, W, Hp, Wp, PT, PL, xo);
    if (KK == 9)
      dwLanesDots<I, 9>(st, xt, wt, off, KK, OH, OW, SH, SW, Wp, k);
    else
      dwLanesDots<I, 0>(st, xt, wt, off, KK, OH, OW, SH, SW, Wp, k);
    dwLanesStore<I>(out + (img * C + c0) * OH * OW, st, nl, OH * OW);
  }
}

/// qdwconv's planes [b, e) one at a time on the paths that are not dwLanesRun's or
/// dwStride1Run's: stride 2 (flat2), stride 1 with dilated kernel rows (flat, a pair plane),
/// or phase-grouped rows; \p rq0: the output side of the requantization.
static inline __attribute__((always_inline)) void dwPlanesRun(
    int8_t *out, const int8_t *in, const int16_t *w, const QParams &qp, const RQ &rq0, int64_t b,
    int64_t e, int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t KH, int64_t KW,
    int64_t SH, int64_t SW, int64_t DH, int64_t DW, int64_t Hp, int64_t Wp, int64_t Wr,
    int64_t PT, int64_t PL, int32_t xo, bool flat, bool flat2, const int64_t *off, int64_t np,
    int64_t Wq2, int64_t pe2, int32_t *accPlane, int16_t *xp) {
  constexpr int64_t L = QISA::L;
  const int64_t KK = KH * KW, pdw = KW > 1 ? DW : 0;
  int32_t *dp = (int32_t *)(xp + dwFlatXpElems(Hp, Wp, L));
  const int64_t nv = flat ? ceilDiv(OH * Wp, L) : 0, nd = flat ? nv * L + off[np - 1] : 0;
  uint32_t wp[64];
  for (int64_t pl = b; pl < e; pl++) {
    const int64_t c = pl % C;
    const int8_t *x = in + pl * H * W;
    const int16_t *wc = w + c * KK;
    int8_t *y = out + pl * OH * OW;
    const RQ rq{qp.accScale[c], qp.biasReal[c], rq0.scale, rq0.off, rq0.lo, rq0.hi};
    if (flat2) {
      dwFlat2Plane((int32_t *)xp, x, H, W, PT, PL, Wq2, pe2, xo);
      dwWeightPairs(wp, wc, KH, KW);
      dwPairDots(accPlane, (int32_t *)xp, off, wp, np, ceilDiv(OH * Wq2, L) * L);
      dwRequantRows(y, accPlane, OH, OW, Wq2, qp.corr[c], rq);
    } else if (flat) {
      dwFlatPlane(xp, dp, x, H, W, Wp, PT, PL, xo, pdw, nd, maxI(Hp * Wp, nd + pdw));
      dwWeightPairs(wp, wc, KH, KW);
      dwPairDots(accPlane, dp, off, wp, np, nv * L);
      dwRequantRows(y, accPlane, OH, OW, Wp, qp.corr[c], rq);
    } else {
      dwPhasedPlane(xp, x, H, W, Hp, Wp, Wr, SW, PT, PL, xo);
      dwPhasedDots(accPlane, xp, wc, OH, OW, KH, KW, SH, SW, DH, DW, Wp, Wr);
      // The whole plane at once: rows shorter than a vector still requantize in vectors.
      QISA::requantRow(y, accPlane, OH * OW, qp.corr[c], 0, nullptr, rq);
    }
  }
}

/// Depthwise convolution (Group == C == O) over [N*C planes][H][W]. Per plane the input,
/// centred (x - xOffset, in [-255, 255], so padding is 0 and adds nothing, as in the
/// Interpreter), is copied once into scratch as int16 with the pads written as zeros, in
/// the layout of its path, and the plane's accumulators are requantized together with
/// corr[c] (the channelwise i32 bias, else 0).
///  - Stride 1 (flat, up to 64 taps): the plane padded as Hp rows of Wp (no slack per row),
///    the outputs computed on that grid, flattened: output q = oh Wp + ow reads xp[q + kh DH
///    Wp + kw DW], so every tap is one contiguous run over the whole plane and L outputs at
///    a time span rows (columns ow >= OW are computed and dropped; 7x7 and 14x14 planes need
///    far fewer vectors than row by row). Taps in pairs along a kernel row, (kw, kw + 1) (a
///    last odd one with weight 0; with KW = 1 every tap is single, its partner read at offset
///    0), from the pair plane d[q] = (xp[q], xp[q + DW]), one 2 x int16 dot product per pair
///    (vpdpwssd, vpmaddwd): |x - xOffset| and |f - fOffset| are at most 255, so each product
///    and pair sum is exact in int32.
///  - Stride 2 (flat2, no dilation, up to 64 taps): the padded rows split by row parity into
///    two flat planes (rows of 2 Wq int16, Wq = ceil(Wp / 2)) and the outputs computed on a
///    grid of width Wq, flattened: output q = oh Wq + ow with tap (kh, kw) at padded row
///    2 oh + kh, column 2 ow + kw, that is plane kh % 2, int16 entry 2 (q + (kh / 2) Wq) + kw.
///    The taps (kw, kw + 1) of even kw are then the int32 entry q + (kh / 2) Wq + kw / 2 of
///    the plane as it lies in memory, one 2 x int16 dot product per pair with no pair plane
///    to build (a last odd tap's partner, weighted 0, is the next column or the next row's
///    first).
///  - Otherwise: phase-grouped rows (dwPhasedPlane, dwPhasedDots).
/// Before all of these, on ISAs with kDwLanes, padded planes of at most kDwLanesMaxPixels
/// pixels take dwLanesRun (channels as lanes, no per-plane work).
static inline __attribute__((always_inline)) void qdwconv(
    int8_t *out, const int8_t *in, const int16_t *w, const void *params, int64_t N, int64_t C,
    int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW,
    int64_t PT, int64_t PL, int64_t DH, int64_t DW, int64_t xOff, float outScale, int64_t outOff,
    int64_t lo, int64_t hi, char *scratch, int64_t scratchStride, int64_t tid,
    int64_t nthreads) {
  constexpr int64_t L = QISA::L;
  const QParams qp = qparams(params, C);
  int64_t Hp, Wp, Wr;
  dwPaddedDims(H, W, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, L, &Hp, &Wp, &Wr);
  int32_t *accPlane = (int32_t *)(scratch + tid * scratchStride);
  int16_t *xp = (int16_t *)((char *)accPlane + dwAccBytes(OH, Wp, L));
  const int32_t xo = int32_t(xOff);
  const int64_t KK = KH * KW;
  const bool flat = SH == 1 && SW == 1 && KK <= 64;
  const bool flat2 = SH == 2 && SW == 2 && DH == 1 && DW == 1 && KK <= 64;
  int64_t off[64], np = 0, Wq2 = 0, Hq2 = 0, pe2 = 0;
  if (flat2)
    dwFlat2Dims(Hp, Wp, OH, KH, KW, L, &Wq2, &Hq2, &pe2);
  if (flat || flat2)
    np = dwPairOffsets(off, flat2, KH, KW, DH, DW, Wp, Wq2, pe2);
  const RQ rq0{0, 0, double(outScale), double(outOff), double(lo), double(hi)};
  if constexpr (QISA::kDwLanes)
    if (dwLanesShape(KK, Hp, Wp))
      return dwLanesRun<QISA>(out, in, w, qp, rq0, N, C, H, W, OH, OW, KH, KW, SH, SW, DH, DW,
                              Hp, Wp, PT, PL, xo, accPlane, tid, nthreads);
  int64_t b, e;
  partition(N * C, 1, tid, nthreads, &b, &e);
  if (flat && (DW == 1 || KW == 1))
    return dwStride1Run(out, in, w, qp, rq0, b, e, C, H, W, OH, OW, KH, KW, DH, DW, Hp, Wp, PT,
                        PL, xo, off, np, accPlane, xp);
  dwPlanesRun(out, in, w, qp, rq0, b, e, C, H, W, OH, OW, KH, KW, SH, SW, DH, DW, Hp, Wp, Wr, PT,
              PL, xo, flat, flat2, off, np, Wq2, pe2, accPlane, xp);
}
