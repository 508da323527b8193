// The convolution cost model (ConvCost.h): per kernel, the multiply-adds it issues over
// the register tiles it fills, its copies and transforms, its epilogue and the bytes it
// streams from memory, over the machine's limits.
#include "backends/CPU/codegen/ConvCost.h"

#include "backends/CPU/libjit/libjit.h"
#include "backends/CPU/libjit/libjit_gemm_config.h"

#include <algorithm>

namespace kiln::cpu {

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t roundUp(int64_t a, int64_t b) { return ceilDiv(a, b) * b; }

/// The register tiles of the kernels on one instruction set.
struct Tiles {
  int64_t VW;        ///< floats per vector
  int64_t MR, NR;    ///< GEMM micro-kernel: MR rows x NR columns
  int64_t stripMR;   ///< strip kernel: output channels per tile (x kStripVectors vectors)
  int64_t groupedMR; ///< grouped kernel: output channels per tile (x 2 vectors)
};

Tiles tilesOf(Isa isa) {
  if (isa == Isa::Avx512)
    return {libjit::GemmAvx512::VW, libjit::GemmAvx512::MR, libjit::GemmAvx512::NR, 8, 8};
  return {libjit::GemmAvx2::VW, libjit::GemmAvx2::MR, libjit::GemmAvx2::NR, 4, 4};
}

/// Whether the transposed GEMM packs its rows from a zero-padded copy of the input, whole
/// vectors per run of pixels (libjit_conv.cpp conv2dT: kernels with taps, column stride 1
/// or 2; the copy's scratch limit is left out).
bool convTPacksPadded(const ConvShape &s) {
  return (s.KH > 1 || s.KW > 1) && (s.SW == 1 || s.SW == 2);
}

bool pointwiseInPlace(const ConvShape &s) {
  return s.KH == 1 && s.KW == 1 && s.SH == 1 && s.SW == 1 && s.PT == 0 && s.PL == 0 &&
         s.OH == s.H && s.OW == s.W;
}

/// Whether the AVX-512 strip kernel reads the taps from tap planes (no im2col copy):
/// 3x3 at strides 1 and 2 and 5x5 at stride 1, undilated, up to 4608 taps (libjit_conv.cpp).
bool stripTapPlanes(const ConvShape &s, Isa isa) {
  if (isa != Isa::Avx512 || (s.KH == 1 && s.KW == 1) || s.DH != 1 || s.DW != 1)
    return false;
  bool k3 = s.KH == 3 && s.KW == 3 && s.SH == s.SW && (s.SH == 1 || s.SH == 2);
  bool k5 = s.KH == 5 && s.KW == 5 && s.SH == 1 && s.SW == 1;
  return (k3 || k5) && s.C * s.KH * s.KW <= 4608;
}

/// The grouped kernel's issued flops, efficiency and copies besides its padded planes
/// (libjit_conv.cpp). Where the kernel takes the lanes path (libjit::groupedLanesPath, the
/// predicate it dispatches on) the group's channels are the vector lanes: exactly Og of
/// them, the pixels in tiles of 14 x 1 (7 x 2 on narrower rows; the last tile of a row and
/// the last block of rows overlap), the results transposed into the output planes.
/// Otherwise tiles of groupedMR output channels x 2 vectors of cells.
void groupedCost(const ConvShape &s, Isa isa, const ConvKernelTerms &t, double &flops, double &eff,
                 double &copies) {
  const Tiles tl = tilesOf(isa);
  const int64_t G = std::max<int64_t>(s.group, 1), Og = s.O / G;
  const double K = double(s.C / G * s.KH * s.KW);
  if (libjit::groupedLanesPath(tl.VW, Og, s.OW, s.KW, s.SW, s.DW, s.PT, s.PL)) {
    const int64_t RW = s.OW >= 14 ? 14 : 7, rows = s.OW >= 14 ? s.OH : roundUp(s.OH, 2);
    flops = 2.0 * double(s.N * s.O) * double(rows * roundUp(s.OW, RW)) * K;
    eff = t.groupedLanesEff;
    copies = double(s.N * s.O * s.OH * s.OW) * t.transposeCost;
    return;
  }
  flops = 2.0 * double(s.N * G) * double(roundUp(Og, tl.groupedMR)) *
          double(roundUp(s.OH * s.OW, 2 * tl.VW)) * K;
  eff = t.groupedEff;
  copies = 0;
}

/// A GEMM's issued flops: M x N over MR x NR tiles, K deep.
double gemmFlops(int64_t M, int64_t N, int64_t K, int64_t MR, int64_t NR) {
  return 2.0 * double(roundUp(M, MR)) * double(roundUp(N, NR)) * double(K);
}

/// The parts of one kernel's estimate: issued flops at an efficiency, copies (floats times
/// their cost terms), weight bytes from memory, the strip's block read again from L3 (per
/// core) and the Winograd kernels' GEMM calls.
struct KernelWork {
  double flops = 0, eff = 1, copies = 0, weightBytes = 0, reloadSeconds = 0, gemmCalls = 0;
};

/// The strip kernel: output channels in tiles of stripMR rows, pixels in strips of
/// kStripVectors vectors; the remainder in whole vectors at a higher cost per flop.
KernelWork stripWork(const ConvShape &s, Isa isa, const ConvKernelTerms &t) {
  const Tiles tl = tilesOf(isa);
  const int64_t N = s.N, C = s.C, O = s.O, P = s.OH * s.OW;
  const int64_t K = C / std::max<int64_t>(s.group, 1) * s.KH * s.KW;
  const int64_t strip = tl.VW * libjit::kStripVectors;
  const int64_t full = P / strip * strip, tail = roundUp(P % strip, tl.VW);
  KernelWork w;
  w.flops = 2.0 * double(N) * double(roundUp(O, tl.stripMR)) * double(K) *
            (double(full) + double(tail) * t.stripTailCost);
  w.eff = isa == Isa::Avx512 ? t.stripEff : t.stripEffAvx2;
  if (pointwiseInPlace(s))
    w.copies = 0;
  else if (s.KH == 1 && s.KW == 1)
    w.copies = double(N * C * P) * t.copyCost; // strided 1x1: the phase planes
  else if (stripTapPlanes(s, isa))
    w.copies = double(N * C * s.KW * s.SH * P) * t.copyCost; // tap planes
  else
    w.copies = double(N * K * P) * t.copyCost; // im2col from phase planes
  w.weightBytes = 4.0 * double(O * K);
  if (4.0 * double(K * (strip + tl.stripMR)) > t.stripBlockKB * 1024)
    w.reloadSeconds = 4.0 * double(N * ceilDiv(P, strip) * ceilDiv(O, tl.stripMR) * K * strip) /
                      (t.stripReloadGBs * 1e9);
  return w;
}

/// The Winograd kernels: (m + 2)^2 GEMMs of the tiles' transformed inputs by the
/// transformed weights.
KernelWork winogradWork(ConvAlgorithm a, const ConvShape &s, Isa isa, const ConvKernelTerms &t) {
  const Tiles tl = tilesOf(isa);
  const int64_t N = s.N, C = s.C, O = s.O;
  const int64_t tile = a == ConvAlgorithm::WinogradRows2 ? 2 : 4, alpha = (tile + 2) * (tile + 2);
  const int64_t perImage = ceilDiv(s.OH, tile) * ceilDiv(s.OW, tile), T = N * perImage;
  // F(2x2) layers of few tiles per image take shorter register tiles on AVX-512.
  const int64_t MR = a == ConvAlgorithm::WinogradRows2 && isa == Isa::Avx512 &&
                             perImage <= ::kWinoShortTiles
                         ? ::kWinoShortMR
                         : tl.MR;
  KernelWork w;
  if (a == ConvAlgorithm::Winograd) // tiles as columns, padded to whole vectors
    w.flops = double(alpha) * 2.0 * double(roundUp(O, tl.MR)) * double(roundUp(T, tl.VW)) *
              double(C);
  else
    w.flops = double(alpha) * gemmFlops(T, O, C, MR, tl.NR);
  if (tile == 4) { // channel sums in blocks: the extra flushes, as k-steps of the tile
    const int64_t kc = isa == Isa::Avx512 ? libjit::GemmAvx512::KC : libjit::GemmAvx2::KC;
    const int64_t extra = ceilDiv(C, ::kWinoSumBlock) - ceilDiv(C, kc);
    w.flops *= 1.0 + t.winogradSumFlushSteps * double(extra) / double(C);
  }
  w.eff = t.winogradEff;
  w.copies = double(alpha * T) * (double(C) * t.winogradInCost + double(O) * t.winogradOutCost);
  w.weightBytes = 4.0 * double(alpha * C * roundUp(O, tl.NR));
  // Blocks of tiles whose transformed inputs and outputs stay in L2 (libjit_wino.cpp,
  // WinoRows): (m + 2)^2 GEMM calls per block; a block holds several whole images where
  // they fit it (WinoRows::IB; the rows kernels).
  const int64_t perTile = alpha * (C + 2 + O);
  int64_t Tb = std::min(std::max<int64_t>(131072 / perTile, O * C / (C + O)),
                        int64_t(4194304) / perTile);
  Tb = std::max(Tb / MR * MR, MR);
  const int64_t IB = std::min(N, Tb / roundUp(perImage, MR));
  Tb = std::min(Tb, roundUp(perImage, MR));
  w.gemmCalls = a != ConvAlgorithm::Winograd && IB > 1
                    ? double(alpha * ceilDiv(N, IB))
                    : double(alpha * N * ceilDiv(perImage, Tb));
  return w;
}

/// The bytes of \p c's layout beyond the filter's that are charged (past heldBytesFree).
double chargedBytes(const ConvCost &c, const ConvKernelTerms &t) {
  return std::max(0.0, c.heldBytes - t.heldBytesFree);
}

/// Marks the candidates \p r of \p s whose layouts hold more charged bytes than the one
/// first at one thread by estimate plus heldBytePrice per charged byte: their extra bytes
/// buy less than that price there. A layout is held whatever the thread count, so its
/// worth is weighed at one thread (at more, the model's shared weight stream makes the
/// memory-bound F(2x2) layers look slower than they measured).
void markHeldBytesPaid(std::vector<ConvCost> &r, const ConvShape &s, Isa isa, const ConvMachine &m,
                       const ConvKernelTerms &t) {
  double bestKey = 0, bestCharged = 0;
  for (size_t i = 0; i < r.size(); i++) {
    double key = estimateConvCost(r[i].algorithm, s, isa, 1, m, t).seconds +
                 chargedBytes(r[i], t) * t.heldBytePrice;
    if (i == 0 || key < bestKey)
      bestKey = key, bestCharged = chargedBytes(r[i], t);
  }
  for (ConvCost &c : r)
    c.paysForHeldBytes = chargedBytes(c, t) <= bestCharged;
}

} // namespace

const ConvKernelTerms &defaultConvKernelTerms() {
  static const ConvKernelTerms terms;
  return terms;
}

ConvCost estimateConvCost(ConvAlgorithm a, const ConvShape &s, Isa isa, unsigned threads,
                          const ConvMachine &m, const ConvKernelTerms &t) {
  const Tiles tl = tilesOf(isa);
  const int64_t N = s.N, C = s.C, O = s.O, G = std::max<int64_t>(s.group, 1);
  const int64_t Cg = C / G, Og = O / G, P = s.OH * s.OW, K = Cg * s.KH * s.KW;
  const double outFloats = double(N * O * P);
  const double paddedIn = double(N * C * (s.H + 2 * s.PT) * (s.W + 2 * s.PL));
  ConvCost c;
  c.algorithm = a;
  // Compute seconds per issued flop at each kernel's efficiency; copies in floats.
  double eff = 1, copies = 0, weightBytes = 0;
  double reloadSeconds = 0; // the strip's block read again from L3, per core
  double gemmCalls = 0;     // the Winograd kernels' GEMM calls
  switch (a) {
  case ConvAlgorithm::Depthwise:
    c.flops = 2.0 * double(N * C * s.KH * s.KW * P);
    eff = t.depthwiseEff;
    copies = paddedIn * t.copyCost;
    weightBytes = 4.0 * double(C * s.KH * s.KW);
    break;
  case ConvAlgorithm::Grouped:
    groupedCost(s, isa, t, c.flops, eff, copies);
    copies += paddedIn * t.copyCost;
    weightBytes = 4.0 * double(O * K);
    break;
  case ConvAlgorithm::PackedGemm:
    // One GEMM per image and group: Og rows x P columns; B is the im2col matrix packed in
    // NR-column panels (a packing copy, and the im2col copy before it unless the input is
    // the matrix itself).
    c.flops = double(N * G) * gemmFlops(Og, P, K, tl.MR, tl.NR);
    eff = isa == Isa::Avx512 ? t.gemmEff : t.gemmEffAvx2;
    copies = double(N * G * K * P) * (pointwiseInPlace(s) ? 1 : 2) * t.copyCost;
    weightBytes = 4.0 * double(G * roundUp(Og, tl.MR) * K);
    break;
  case ConvAlgorithm::Transposed:
    // Pixels as rows: P x O over K, the rows packed from the input (im2col included), the
    // result transposed back.
    c.flops = double(N) * gemmFlops(P, O, K, tl.MR, tl.NR);
    eff = t.transposedEff;
    copies = double(N * K * P) * (convTPacksPadded(s) ? t.paddedPackCost : t.copyCost) +
             outFloats * t.transposeCost +
             (pointwiseInPlace(s) ? 0.0 : paddedIn * t.copyCost);
    weightBytes = 4.0 * double(K * roundUp(O, tl.NR));
    break;
  case ConvAlgorithm::Strip:
  case ConvAlgorithm::WinogradRows2:
  case ConvAlgorithm::WinogradRows4:
  case ConvAlgorithm::Winograd: {
    KernelWork w = a == ConvAlgorithm::Strip ? stripWork(s, isa, t) : winogradWork(a, s, isa, t);
    c.flops = w.flops;
    eff = w.eff;
    copies = w.copies;
    weightBytes = w.weightBytes;
    reloadSeconds = w.reloadSeconds;
    gemmCalls = w.gemmCalls;
    break;
  }
  }
  c.copyFloats = copies;
  // Weights come from memory (a network's do not fit the caches); activations from the
  // caches, where the layer before left them.
  c.memoryBytes = weightBytes;
  const double computeSeconds = c.flops / (m.peakGflops * 1e9 * eff);
  const double copySeconds = (copies + outFloats * t.outputCost) * 8.0 / (m.cacheGBs * 1e9);
  // The kernels prefetch, so the weight stream overlaps the work: the time is the larger of
  // the two (and of the strip's reloads of its block).
  const double memorySeconds =
      c.memoryBytes / (m.memoryGBs * 1e9 * (a == ConvAlgorithm::Strip ? t.stripMemEff : 1.0));
  const double T = double(std::max(threads, 1u));
  const double work = (computeSeconds + copySeconds + gemmCalls * t.winogradGemmMicros * 1e-6) / T;
  c.seconds = std::max({work, memorySeconds, reloadSeconds / T});
  c.heldBytes = std::max(0.0, weightBytes - 4.0 * double(O * K));
  return c;
}

std::vector<ConvCost> rankConvAlgorithms(const ConvShape &s, Isa isa, unsigned threads,
                                         const ConvAlgorithmSet &allowed,
                                         const ConvKernelTerms &terms) {
  static constexpr ConvAlgorithm kOrder[] = {
      ConvAlgorithm::Depthwise,  ConvAlgorithm::Grouped,   ConvAlgorithm::WinogradRows2,
      ConvAlgorithm::WinogradRows4, ConvAlgorithm::Winograd, ConvAlgorithm::Transposed,
      ConvAlgorithm::Strip,      ConvAlgorithm::PackedGemm,
  };
  std::vector<ConvCost> r;
  for (ConvAlgorithm a : kOrder) {
    if (!convAlgorithmApplies(a, s))
      continue;
    bool winograd = a == ConvAlgorithm::WinogradRows2 || a == ConvAlgorithm::WinogradRows4 ||
                    a == ConvAlgorithm::Winograd;
    if (winograd && !allowed.winograd)
      continue;
    // The accuracy rule: F(4x4, 3x3) from kWino4MinChannels input channels, below only
    // when asked for (README, "Accuracy").
    if ((a == ConvAlgorithm::WinogradRows4 || a == ConvAlgorithm::Winograd) &&
        !allowed.fastWinograd && s.C < kWino4MinChannels)
      continue;
    // The transposed GEMM: when allowed and its transposed result fits an 8 MB scratch.
    if (a == ConvAlgorithm::Transposed &&
        (!allowed.transposed || uint64_t(s.OH * s.OW * s.O) * 4 > (8u << 20)))
      continue;
    r.push_back(estimateConvCost(a, s, isa, threads, allowed.machine, terms));
  }
  markHeldBytesPaid(r, s, isa, allowed.machine, terms);
  std::stable_sort(r.begin(), r.end(), [](const ConvCost &x, const ConvCost &y) {
    if (x.paysForHeldBytes != y.paysForHeldBytes)
      return x.paysForHeldBytes;
    return x.seconds < y.seconds;
  });
  return r;
}

double dilationPhaseCopySeconds(const ConvShape &s, const ConvPhases &p, unsigned threads,
                                const ConvMachine &m, const ConvKernelTerms &t) {
  const ConvShape &q = p.shape;
  const double split = double(q.N * q.C * q.H * q.W), merge = double(s.N * s.O * s.OH * s.OW);
  return (split + merge) * t.copyCost * 8.0 / (m.cacheGBs * 1e9) /
         double(std::max(threads, 1u));
}

} // namespace kiln::cpu
