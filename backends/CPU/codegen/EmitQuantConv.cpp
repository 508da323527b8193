// Emitters of the int8 convolution and fully connected kernels (libjit/libjit_qconv.cpp):
// Convolution and FullyConnected on Int8Q operands (per-tensor weights), their fused forms
// with a Relu or Clip (FusedConvolution / FusedFullyConnected on Int8Q),
// ChannelwiseQuantizedConvolution / ChannelwiseQuantizedFullyConnected (per-channel weights,
// Int8Q input and result, an optional Relu or Clip), and MatMul / BatchMatMul on Int8Q
// operands (the FC's packing and micro-kernel with no bias, per batch). Float ones go on to
// the float emitters. A fused Relu or Clip is the kernels' saturation bounds: the
// activation's bounds quantized on the result's grid, as the Interpreter rounds them.
//
// At compile time the weights are packed as the kernels read them (k-quads of bytes) and
// each output channel gets its constants: the accumulator scale and real bias in double
// (as the Interpreter computes them), and the integer correction of the u8 x s8 scheme
// (see libjit_qconv.cpp): corr = -(128 + xOffset) sum_k f + K (128 + xOffset) fOffset, plus
// the i32 bias of the channelwise nodes. The ISA: vpdpbusd where the target has AVX-512
// VNNI, vpmaddwd (AVX2) otherwise, plain C on targets without AVX2.
#include "Emitter.h"

#include "backends/CPU/libjit/libjit.h"
#include "kiln/Graph/FusedActivation.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

namespace kiln::cpu {

namespace {

/// The values of a constant operand, or null when it is not a constant.
const Tensor *payloadOf(const Value *v) {
  auto *w = dyn_cast<WeightVar>(v);
  if (!w || !w->isConstant())
    return nullptr;
  auto *c = dyn_cast<Constant>(w->getOrigin());
  return c ? &c->getPayload() : nullptr;
}

/// Per-channel constants of one int8 convolution or FC, in the order of QParams.
struct ChannelConsts {
  std::vector<double> accScale, biasReal;
  std::vector<int32_t> corr, fOff;
  explicit ChannelConsts(size_t n) : accScale(n, 0.0), biasReal(n, 0.0), corr(n, 0), fOff(n, 0) {}
  std::vector<char> bytes() const {
    size_t n = accScale.size();
    std::vector<char> b(n * (2 * sizeof(double) + 2 * sizeof(int32_t)));
    char *p = b.data();
    std::memcpy(p, accScale.data(), n * sizeof(double));
    std::memcpy(p + n * 8, biasReal.data(), n * sizeof(double));
    std::memcpy(p + n * 16, corr.data(), n * sizeof(int32_t));
    std::memcpy(p + n * 20, fOff.data(), n * sizeof(int32_t));
    return b;
  }
};

/// The weight-side quantization of output channel o: per-tensor from the filter's type, or
/// the channelwise node's scales and offsets, and the bias (i32q per-tensor: a real bias;
/// channelwise: i32 in accumulator units, or float real).
struct WeightQuant {
  const Type *filterTy = nullptr, *biasTy = nullptr;
  const Tensor *bias = nullptr, *scales = nullptr, *offsets = nullptr;
  float inScale = 1.0f;

  int32_t offset(size_t o) const {
    return scales ? offsets->getHandle<int32_t>().raw(o) : filterTy->offset;
  }
  double accScale(size_t o) const {
    return scales ? double(inScale) * double(scales->getHandle<float>().raw(o))
                  : double(inScale) * double(filterTy->scale);
  }
  /// (integer bias joining the accumulator, real bias added after scaling).
  std::pair<int32_t, double> bias_(size_t o) const {
    if (!bias) // MatMul, BatchMatMul
      return {0, 0.0};
    if (!scales) {
      int64_t b = bias->getHandle<int32_t>().raw(o);
      return {0, double(biasTy->scale) * double(b - int64_t(biasTy->offset))};
    }
    if (bias->getElementType() == ElemKind::Float)
      return {0, double(bias->getHandle<float>().raw(o))};
    return {bias->getHandle<int32_t>().raw(o), 0.0};
  }
};

/// The saturation bounds [lo, hi] of a result of type \p ot (in the kernels' int8 domain:
/// a uint8 value less 128) under the quantized activation \p act: the activation's real
/// bounds quantized on the result's grid. Rounding is monotone, so clamping the rounded
/// value there equals rounding the clamped real value (the node's semantics).
bool activationBounds(const std::string &act, float alpha, float beta, const Type &ot,
                      int64_t &lo, int64_t &hi) {
  const int64_t shift = ot.kind == ElemKind::UInt8Q ? 128 : 0;
  auto quantized = [&](double real) {
    double q = std::round(real / double(ot.scale)) + double(ot.offset) - double(shift);
    return int64_t(std::min(127.0, std::max(-128.0, q)));
  };
  lo = -128, hi = 127;
  std::optional<FusedActivation> a = parseFusedActivation(act);
  if (a == FusedActivation::None)
    return true;
  if (a == FusedActivation::Relu) {
    lo = quantized(0.0);
    return true;
  }
  if (a != FusedActivation::Clip || !(alpha <= beta))
    return false;
  lo = quantized(alpha), hi = quantized(beta);
  return true;
}

} // namespace

std::string Emitter::qIsa(int64_t &lanes) {
  if (qIsa_.empty()) {
    HostInfo h = detectHost(opts_.jit);
    bool vnni = h.avx512 && h.features.find("+avx512vnni") != std::string::npos;
    qIsa_ = vnni ? "vnni" : h.avx2 ? "avx2" : "generic";
  }
  lanes = qIsa_ == "vnni" ? 16 : 8;
  return qIsa_;
}

Expected<uint64_t> Emitter::constBytes(const void *data, uint64_t bytes) {
  uint64_t off = alignUp(consts_.size());
  if (!consts_.resize(off + alignUp(std::max<uint64_t>(bytes, 1))))
    return makeError(ErrorCode::OutOfMemory, "CPU backend: cannot grow the constant arena by ",
                     bytes, " bytes");
  if (bytes)
    std::memcpy(consts_.data() + off, data, bytes);
  return off;
}

namespace {

/// The 8-bit kinds the int8 kernels take (uint8 shifted by 128: libjit_qconv.cpp).
bool eightBit(ElemKind k) { return k == ElemKind::Int8Q || k == ElemKind::UInt8Q; }

/// 0x80 for a uint8 operand (its bytes flipped to the int8 value 128 less), else 0.
int64_t flipOf(ElemKind k) { return k == ElemKind::UInt8Q ? 0x80 : 0; }

} // namespace

Expected<Emitter::QuantIO> Emitter::quantIO(Instruction *I, Value *dest, Value *in,
                                            std::vector<Item> &items) {
  const Type &it = *in->getType(), &ot = *dest->getType();
  QuantIO io;
  io.xOff = int64_t(it.offset) - (it.kind == ElemKind::UInt8Q ? 128 : 0);
  io.outOff = int64_t(ot.offset) - (ot.kind == ElemKind::UInt8Q ? 128 : 0);
  io.i32 = ot.kind == ElemKind::Int32I;
  io.flipOut = ot.kind == ElemKind::UInt8Q;
  if (io.xOff < -128 || io.xOff > 127)
    return unsupported(I);
  KILN_ASSIGN_OR_RETURN(io.in, loc(in));
  if (it.kind == ElemKind::UInt8Q) {
    // The uint8 input as int8 (x - 128) in a buffer of the plan.
    const int64_t n = int64_t(it.numElements());
    Location xl{kActivationBase, reserveExtra(uint64_t(n))};
    Location src = io.in;
    items.push_back({false, "qflip in", [=] { call("libjit_qflip_i8", {at(xl), at(src), I64(n)}); },
                     StageWork{}});
    io.in = xl;
  }
  return io;
}

void Emitter::quantFlipOut(Value *dest, const QuantIO &io, std::vector<Item> &items) {
  if (!io.flipOut)
    return;
  const int64_t n = int64_t(dest->getType()->numElements());
  items.push_back({false, "qflip out", [=] { call("libjit_qflip_i8", {ptr(dest), ptr(dest), I64(n)}); },
                   StageWork{}});
}

/// The operands and geometry of an int8 convolution (planQuantConv and its parts).
struct Emitter::QConv {
  Instruction *I = nullptr;
  Value *dest = nullptr, *in = nullptr, *filter = nullptr, *bias = nullptr;
  Value *scalesV = nullptr, *offsetsV = nullptr;
  WeightQuant wq;
  const Tensor *fp = nullptr; ///< the filter's values, null when it is not a constant
  int64_t N = 0, C = 0, H = 0, W = 0, O = 0, OH = 0, OW = 0, G = 1;
  int64_t KH = 1, KW = 1, SH = 1, SW = 1, PT = 0, PL = 0, DH = 1, DW = 1;
  int64_t L = 8, T = 16, cg = 0, og = 0, K = 0, K4 = 0, KK = 1, cq4 = 0, ogPad = 0, Opad = 0;
  int64_t Hp = 0, Wp = 0, fXor = 0;
  float outScale = 1.0f;
  int64_t lo = -128, hi = 127; ///< the result's saturation bounds (a fused Relu or Clip)
  std::string isa;
  /// Weights packed per run (a Filter or Bias that is not a constant); a 1x1 stride-1
  /// unpadded layer (qconvPointwise); the direct path (directConv); a non-zero weight offset.
  bool runtime = false, pointwise = false, direct = false, anyFOff = false;
  /// The layer's own strides where it runs as a stride-1 one on its subsampled input
  /// (quantConvSubsample), else 1.
  int64_t subSH = 1, subSW = 1;
};

namespace {

constexpr int64_t kQMR = 4; ///< output channels per micro-kernel step (libjit_qconv_impl.h)

/// The numbers the packing, the scratch and the kernel call derive from q's shape.
void quantConvDerived(Emitter::QConv &q) {
  q.T = 2 * q.L;
  q.cg = q.C / q.G, q.og = q.O / q.G, q.KK = q.KH * q.KW, q.K = q.cg * q.KK;
  q.K4 = (q.K + 3) / 4, q.cq4 = (q.cg + 3) / 4;
  q.ogPad = (q.og + kQMR - 1) / kQMR * kQMR, q.Opad = q.G * q.ogPad;
  q.Hp = std::max(q.PT + q.H, (q.OH - 1) * q.SH + (q.KH - 1) * q.DH + 1);
  q.Wp = std::max(q.PL + q.W, (q.OW - 1) * q.SW + (q.KW - 1) * q.DW + 1);
  q.runtime = !q.fp || !q.wq.bias;
  q.pointwise = q.KH == 1 && q.KW == 1 && q.SH == 1 && q.SW == 1 && q.PT == 0 && q.PL == 0 &&
                q.OH == q.H && q.OW == q.W;
  // Every layer but the pointwise ones (and, with 8 lanes, those with fewer than 4 input
  // channels per group) takes the kernel's direct path (directConv in
  // libjit/libjit_qconv.cpp): k ordered (channel quad, tap, channel in quad), ceil(cg / 4)
  // KH KW quads.
  q.direct = !q.pointwise && q.KK <= 64 && q.SH <= 16 && q.SW <= 16 && (q.L == 16 || q.cg >= 4);
  q.anyFOff = false;
  for (int64_t o = 0; o < q.O; o++)
    q.anyFOff |= q.wq.offset(size_t(o)) - (q.fXor ? 128 : 0) != 0;
}

/// The compile-time weights of q packed as [G][ogPad / MR][K4p][MR] quads (channels past og
/// zero) and the constants of its Opad channels, for input offset xOff.
void packQuantConvWeights(const Emitter::QConv &q, int64_t xOff, std::vector<int8_t> &packed,
                          ChannelConsts &cc) {
  const int64_t K4p = q.direct ? q.cq4 * q.KK : q.K4, cIn = 128 + xOff, KK = q.KK, K = q.K;
  packed.assign(size_t(q.Opad * K4p * 4), 0);
  const int8_t *f = reinterpret_cast<const int8_t *>(q.fp->getUnsafePtr());
  for (int64_t g = 0; g < q.G; g++)
    for (int64_t j = 0; j < q.og; j++) {
      const int64_t o = g * q.og + j, oi = g * q.ogPad + j;
      const int64_t blk = (g * q.ogPad + j / kQMR * kQMR) * K4p * 4, r = j % kQMR;
      int64_t sum = 0;
      for (int64_t k = 0; k < K; k++) {
        int8_t v = int8_t(uint8_t(f[o * K + k]) ^ q.fXor);
        // Direct: k = c KK + tap goes to quad (c / 4) KK + tap, byte c % 4.
        const int64_t quad = q.direct ? (k / KK / 4) * KK + k % KK : k / 4;
        const int64_t byte = q.direct ? (k / KK) % 4 : k % 4;
        packed[size_t(blk + (quad * kQMR + r) * 4 + byte)] = v;
        sum += v;
      }
      const int64_t fo = q.wq.offset(size_t(o)) - (q.fXor ? 128 : 0);
      auto [ib, br] = q.wq.bias_(size_t(o));
      // Wrapping 32-bit arithmetic, as the kernel's.
      uint32_t corr = uint32_t(-cIn * sum) + uint32_t(K * cIn) * uint32_t(fo) + uint32_t(ib);
      cc.corr[size_t(oi)] = int32_t(corr);
      cc.fOff[size_t(oi)] = int32_t(fo);
      cc.accScale[size_t(oi)] = q.wq.accScale(size_t(o));
      cc.biasReal[size_t(oi)] = br;
    }
}

/// Scratch floats per thread of the GEMM convolution kernel: the patch, the pixel sums, the
/// accumulators and (windowed layers) the group's padded input planes
/// (libjit_qconv_impl.h, padDims / padPlanes).
int64_t quantConvScratch(const Emitter::QConv &q) {
  const int64_t MR = kQMR, T = q.T, K4 = q.K4, Opad = q.Opad, Hp = q.Hp, Wp = q.Wp;
  if (q.direct) {
    // libjit_qconv.cpp: directFixedBytes, then ceil(cg / 4) blocks of directQStride
    // entries, the channel sums S (one more block of int32) and a row of Wp entries.
    // acc: 2 MR rows (kAccRows); FastRQ: 24 bytes.
    const int64_t fixed = ((2 * MR + 1) * T * 4 + Opad * (24 + 1) + 63) / 64 * 64;
    const int64_t qstride =
        (q.SH * q.SW * ((Hp + q.SH - 1) / q.SH) * ((Wp + q.SW - 1) / q.SW) + T + 15) / 16 * 16;
    return (fixed + (q.cq4 + 1) * qstride * 4 + Wp * 4) / 4 + 16;
  }
  if (q.pointwise) {
    // libjit_qconv_impl.h, qconvPointwise: the patch of TB (pointwiseTB) pixels, colsum,
    // acc (2 MR rows: kAccRows), Opad FastRQ (24 bytes) and flags.
    const int64_t m = std::min<int64_t>(8, std::max<int64_t>(1, 4096 / (K4 * T)));
    const int64_t TB = T * m;
    return ((K4 + 1 + 2 * MR) * TB * 4 + Opad * 25) / 4 + 16;
  }
  // The patch, colsum, acc, Opad FastRQ (24 bytes) and flags, rounded up to 64 bytes, then
  // the padded planes (libjit_qconv_impl.h, qconv).
  return ((K4 + 1 + MR) * T * 4 + Opad * 25 + 63) / 64 * 64 / 4 + q.cg * Hp * Wp / 4 + 16;
}

/// Scratch floats per thread of the depthwise kernel (libjit_qconv.cpp, dwPaddedDims and
/// dwAccBytes): the plane's accumulators (OH Wp + L int32, 64-byte aligned) and the padded,
/// phase-grouped centred plane (Hp rows of Wr int16, each of the SW phases followed by L
/// columns of slack, and one more row: stride 2 builds each padded row in a line of
/// Wp + 1 <= Wr entries), or at stride 1 the flat padded plane and its pair plane
/// (dwFlatXpElems, dwFlatPairElems), at stride 2 two row-parity planes of pe int32
/// (dwFlat2Dims).
int64_t quantDepthwiseScratch(const Emitter::QConv &q) {
  const int64_t L = q.L, Hp = q.Hp, Wp = q.Wp, KH = q.KH, KW = q.KW, OH = q.OH;
  int64_t Wr = 0;
  for (int64_t ph = 0; ph < q.SW; ph++)
    Wr += (ph < Wp ? (Wp - ph + q.SW - 1) / q.SW : 0) + L;
  const int64_t accBytes = ((OH * Wp + L) * 4 + 63) / 64 * 64;
  int64_t planeBytes = (Hp + 1) * Wr * 2;
  if (q.SH == 1 && q.SW == 1 && KH * KW <= 64) {
    const int64_t xpElems = ((Hp * Wp + 2 * L + 2 * Wp) * 2 + 63) / 64 * 32;
    planeBytes = std::max(planeBytes, xpElems * 2 + (Hp * Wp + 2 * L + Wp) * 4);
    // Without a pair plane (DW = 1 or KW = 1): up to 4 planes within 16 KB (dwFlatBatch).
    if (q.DW == 1 || KW == 1)
      planeBytes = std::max(planeBytes,
                            std::max<int64_t>(1, std::min<int64_t>(4, 8192 / xpElems)) *
                                xpElems * 2);
  }
  if (q.SH == 2 && q.SW == 2 && q.DH == 1 && q.DW == 1 && KH * KW <= 64) {
    const int64_t Wq = (Wp + 1) / 2, Hq = (Hp + 1) / 2, nv = (OH * Wq + L - 1) / L;
    const int64_t reach = nv * L + ((KH - 1) / 2) * Wq + (KW + 1) / 2;
    const int64_t pe = (std::max(Hq * Wq, reach) + 15) / 16 * 16;
    planeBytes = std::max(planeBytes, 2 * pe * 4);
  }
  // Small planes with channels as lanes (the kernel's dwLanesRun).
  if (libjit::dwLanesShape(KH * KW, Hp, Wp))
    planeBytes = std::max(planeBytes, libjit::dwLanesScratch(Hp, Wp, q.OH, q.OW, L));
  return (accBytes + planeBytes) / 4 + 16;
}

} // namespace

Error Emitter::quantConvOperands(Instruction *I, QConv &q) {
  std::vector<dim_t> kernels, strides, pads, dilations;
  dim_t group;
  std::string act = "None";
  float alpha = 0, beta = 0;
  q.I = I;
  if (auto *c = dyn_cast<ConvolutionInst>(I)) {
    q.dest = c->getDest(), q.in = c->getInput(), q.filter = c->getFilter();
    q.bias = c->getBias(), kernels = c->getKernels(), strides = c->getStrides();
    pads = c->getPads(), dilations = c->getDilations(), group = c->getGroup();
  } else if (auto *fc = dyn_cast<FusedConvolutionInst>(I)) {
    if (!fc->getResidual().empty())
      return unsupported(I);
    q.dest = fc->getDest(), q.in = fc->getInput(), q.filter = fc->getFilter();
    q.bias = fc->getBias(), kernels = fc->getKernels(), strides = fc->getStrides();
    pads = fc->getPads(), dilations = fc->getDilations(), group = fc->getGroup();
    act = fc->getActivation(), alpha = fc->getAlpha(), beta = fc->getBeta();
  } else {
    auto *cw = cast<ChannelwiseQuantizedConvolutionInst>(I);
    q.dest = cw->getDest(), q.in = cw->getInput(), q.filter = cw->getFilter();
    q.bias = cw->getBias(), kernels = cw->getKernels(), strides = cw->getStrides();
    pads = cw->getPads(), dilations = cw->getDilations(), group = cw->getGroup();
    q.scalesV = cw->getFilterScales(), q.offsetsV = cw->getFilterOffsets();
    act = cw->getActivation(), alpha = cw->getAlpha(), beta = cw->getBeta();
    q.wq.scales = payloadOf(q.scalesV);
    q.wq.offsets = payloadOf(q.offsetsV);
    if (!q.wq.scales || !q.wq.offsets)
      return unsupported(I);
  }
  const Type &it = *q.in->getType(), &ft = *q.filter->getType(), &ot = *q.dest->getType();
  const Type &bt = *q.bias->getType();
  q.fp = payloadOf(q.filter);
  q.wq.bias = payloadOf(q.bias);
  q.wq.filterTy = &ft, q.wq.biasTy = &bt, q.wq.inScale = it.scale;
  // Per-tensor: int8 throughout, i32q bias; channelwise: int8 or uint8 input and filter,
  // an int8, uint8 or i32 result, an i32 or float bias.
  const bool kindsOk =
      q.wq.scales ? eightBit(it.kind) && eightBit(ft.kind) &&
                        (eightBit(ot.kind) || ot.kind == ElemKind::Int32I) &&
                        (bt.kind == ElemKind::Int32I || bt.kind == ElemKind::Float)
                  : it.kind == ElemKind::Int8Q && ft.kind == ElemKind::Int8Q &&
                        ot.kind == ElemKind::Int8Q && bt.kind == ElemKind::Int32Q;
  if (!kindsOk || !activationBounds(act, alpha, beta, ot, q.lo, q.hi) ||
      (ot.kind == ElemKind::Int32I && act != "None") || it.rank() != 4 || ft.rank() != 4 ||
      ot.rank() != 4 || group == 0 || kernels.size() != 2 || strides.size() != 2 ||
      pads.size() != 4 || dilations.size() != 2)
    return unsupported(I);
  q.N = it.dims[0], q.C = it.dims[1], q.H = it.dims[2], q.W = it.dims[3];
  q.O = ot.dims[1], q.OH = ot.dims[2], q.OW = ot.dims[3], q.G = int64_t(group);
  q.KH = kernels[0], q.KW = kernels[1], q.SH = strides[0], q.SW = strides[1];
  q.PT = pads[0], q.PL = pads[1], q.DH = dilations[0], q.DW = dilations[1];
  const int64_t O = q.O, C = q.C, G = q.G;
  const auto *sc = q.wq.scales, *of = q.wq.offsets;
  if (C % G || O % G || int64_t(ft.dims[0]) != O || int64_t(ft.dims[1]) != C / G ||
      int64_t(ft.dims[2]) != q.KH || int64_t(ft.dims[3]) != q.KW ||
      int64_t(bt.numElements()) != O ||
      (sc && (int64_t(sc->size()) != O || int64_t(of->size()) != O)))
    return makeError(ErrorCode::InvalidArgument, "CPU backend: ", I->getKindName(), " '",
                     I->getName(), "': filter ", ft.toString(), " and bias ", bt.toString(),
                     " do not fit input ", it.toString(), ", output ", ot.toString(),
                     " and group ", G);
  q.isa = qIsa(q.L);
  q.outScale = ot.scale;
  q.fXor = flipOf(ft.kind);
  quantConvDerived(q);
  return Error::success();
}

Error Emitter::planQuantDepthwise(const QConv &q, const QuantIO &io, std::vector<Item> &items) {
  // Centred int16 filters and the exact int32 sum (libjit_qdwconv_i8).
  const int8_t *f = reinterpret_cast<const int8_t *>(q.fp->getUnsafePtr());
  const int64_t C = q.C, KK = q.KK;
  std::vector<int16_t> w16(size_t(C * KK));
  ChannelConsts cc{size_t(C)};
  for (int64_t o = 0; o < C; o++) {
    const int64_t fo = q.wq.offset(size_t(o)) - (q.fXor ? 128 : 0);
    for (int64_t k = 0; k < KK; k++)
      w16[size_t(o * KK + k)] = int16_t(int64_t(int8_t(uint8_t(f[o * KK + k]) ^ q.fXor)) - fo);
    auto [ib, br] = q.wq.bias_(size_t(o));
    cc.corr[size_t(o)] = ib;
    cc.accScale[size_t(o)] = q.wq.accScale(size_t(o));
    cc.biasReal[size_t(o)] = br;
  }
  KILN_ASSIGN_OR_RETURN(uint64_t wOff, constBytes(w16.data(), w16.size() * 2));
  std::vector<char> pb = cc.bytes();
  KILN_ASSIGN_OR_RETURN(uint64_t pOff, constBytes(pb.data(), pb.size()));
  needPoolScratch(quantDepthwiseScratch(q));
  std::string name = "qconv dw " + std::to_string(q.KH) + "x" + std::to_string(q.KW) + "/" +
                     std::to_string(q.SH) + " " + std::to_string(C) + " " + q.isa;
  const Location inL = io.in;
  const int64_t xOff = io.xOff, outOff = io.outOff;
  items.push_back({true, name, [=] {
                     call("libjit_qdwconv_i8_" + q.isa,
                          {ptr(q.dest), at(inL), at({kConstantBase, wOff}),
                           at({kConstantBase, pOff}), I64(q.N), I64(C), I64(q.H), I64(q.W),
                           I64(q.OH), I64(q.OW), I64(q.KH), I64(q.KW), I64(q.SH), I64(q.SW),
                           I64(q.PT), I64(q.PL), I64(q.DH), I64(q.DW), I64(xOff),
                           F32(q.outScale), I64(outOff), I64(q.lo), I64(q.hi), scratch(),
                           I64(scratchPerThread_ * 4), tid_, nth_});
                   },
                   stageWork({q.I})});
  quantFlipOut(q.dest, io, items);
  return Error::success();
}

Expected<std::pair<Location, Location>> Emitter::quantConvWeights(const QConv &q, int64_t xOff,
                                                                  std::vector<Item> &items) {
  const int64_t K4p = q.direct ? q.cq4 * q.KK : q.K4;
  const uint64_t paramBytes = uint64_t(q.Opad) * (2 * sizeof(double) + 2 * sizeof(int32_t));
  if (!q.runtime) {
    std::vector<int8_t> packed;
    ChannelConsts cc{size_t(q.Opad)};
    packQuantConvWeights(q, xOff, packed, cc);
    KILN_ASSIGN_OR_RETURN(uint64_t wOff, constBytes(packed.data(), packed.size()));
    std::vector<char> pb = cc.bytes();
    KILN_ASSIGN_OR_RETURN(uint64_t pOff, constBytes(pb.data(), pb.size()));
    return std::make_pair(Location{kConstantBase, wOff}, Location{kConstantBase, pOff});
  }
  // Run-time weights: packed by libjit_qpack_conv_rt in a serial stage before the kernel.
  const Location wL{kActivationBase, reserveExtra(uint64_t(q.Opad * K4p * 4))};
  const Location pL{kActivationBase, reserveExtra(paramBytes)};
  const Type &ft = *q.filter->getType(), &bt = *q.bias->getType();
  const float fScale = ft.scale, bScale = bt.scale, inScale = q.wq.inScale;
  const int64_t fOffset = ft.offset, bOffset = bt.offset;
  const int64_t biasKind = q.wq.scales ? (bt.kind == ElemKind::Float ? 1 : 0) : 2;
  Value *filter = q.filter, *bias = q.bias, *scalesV = q.scalesV, *offsetsV = q.offsetsV;
  const int64_t fXor = q.fXor, O = q.O, G = q.G, cg = q.cg, KK = q.KK, direct = q.direct;
  items.push_back({false, "qpack conv", [=] {
                     call("libjit_qpack_conv_rt",
                          {at(wL), at(pL), ptr(filter), I64(fXor),
                           scalesV ? ptr(scalesV) : nullPtr(),
                           offsetsV ? ptr(offsetsV) : nullPtr(), F32(fScale), I64(fOffset),
                           ptr(bias), I64(biasKind), F32(bScale), I64(bOffset), F32(inScale),
                           I64(xOff), I64(O), I64(G), I64(cg), I64(KK), I64(direct)});
                   },
                   StageWork{}});
  return std::make_pair(wL, pL);
}

namespace {

/// Whether \p q is a 1x1 unpadded strided convolution whose outputs read only pixels of the
/// image (every group count but depthwise): it then runs as a stride-1 one on those pixels
/// packed (libjit_qsubsample_i8), which the pointwise path takes. The direct path would lay
/// out every stride phase of the input as k-quads and read one of them.
bool subsamplesToPointwise(const Emitter::QConv &q) {
  return q.KH == 1 && q.KW == 1 && (q.SH > 1 || q.SW > 1) && q.PT == 0 && q.PL == 0 &&
         q.OH == (q.H - 1) / q.SH + 1 && q.OW == (q.W - 1) / q.SW + 1 && q.G == 1;
}

} // namespace

void Emitter::quantConvSubsample(QConv &q, QuantIO &io, std::vector<Item> &items) {
  const int64_t planes = q.N * q.C, H = q.H, W = q.W, OH = q.OH, OW = q.OW, SH = q.SH,
                SW = q.SW;
  const Location src = io.in, dst{kActivationBase, reserveExtra(uint64_t(planes * OH * OW))};
  items.push_back({true, "qsubsample", [=] {
                     call("libjit_qsubsample_i8", {at(dst), at(src), I64(planes), I64(H),
                                                   I64(W), I64(OH), I64(OW), I64(SH), I64(SW),
                                                   tid_, nth_});
                   },
                   StageWork{0, double(planes * OH * OW * 2)}});
  io.in = dst;
  q.subSH = SH, q.subSW = SW;
  q.H = OH, q.W = OW, q.SH = 1, q.SW = 1;
  quantConvDerived(q);
}

void Emitter::quantConvCall(const QConv &q, const QuantIO &io, Location wL, Location pL,
                            std::vector<Item> &items) {
  const int64_t SH = q.subSH > 1 || q.subSW > 1 ? q.subSH : q.SH;
  std::string name = "qconv " + std::to_string(q.KH) + "x" + std::to_string(q.KW) + "/" +
                     std::to_string(SH) + " " + std::to_string(q.C) + "->" +
                     std::to_string(q.O) + (q.G > 1 ? " g" + std::to_string(q.G) : "") +
                     (q.runtime ? " rt" : "") + (io.i32 ? " i32" : "") + " " + q.isa;
  const Location inL = io.in;
  const int64_t xOff = io.xOff, outOff = io.outOff;
  Value *dest = q.dest;
  // The arguments both kernels share up to xOff.
  auto common = [=] {
    return std::vector<llvm::Value *>{
        ptr(dest), at(inL),   at(wL),    at(pL),    I64(q.N),  I64(q.C),  I64(q.H),
        I64(q.W),  I64(q.O),  I64(q.OH), I64(q.OW), I64(q.KH), I64(q.KW), I64(q.SH),
        I64(q.SW), I64(q.PT), I64(q.PL), I64(q.DH), I64(q.DW), I64(q.G),  I64(xOff)};
  };
  if (io.i32)
    items.push_back({true, name, [=] {
                       auto args = common();
                       args.insert(args.end(), {I64(q.anyFOff), scratch(),
                                                I64(scratchPerThread_ * 4), tid_, nth_});
                       call("libjit_qconv_i32_" + q.isa, args);
                     },
                     stageWork({q.I})});
  else
    items.push_back({true, name, [=] {
                       auto args = common();
                       args.insert(args.end(),
                                   {F32(q.outScale), I64(outOff), I64(q.lo), I64(q.hi),
                                    I64(q.anyFOff), scratch(), I64(scratchPerThread_ * 4),
                                    tid_, nth_});
                       call("libjit_qconv_i8_" + q.isa, args);
                     },
                     stageWork({q.I})});
}

Error Emitter::planQuantConv(Instruction *I, std::vector<Item> &items) {
  if (auto *c = dyn_cast<ConvolutionInst>(I))
    if (c->getInput()->getType()->kind != ElemKind::Int8Q)
      return planConv(I, items);
  QConv q;
  KILN_RETURN_IF_ERR(quantConvOperands(I, q));
  KILN_ASSIGN_OR_RETURN(QuantIO io, quantIO(I, q.dest, q.in, items));
  if (q.G == q.C && q.O == q.C && !q.runtime && !io.i32)
    return planQuantDepthwise(q, io, items);
  if (subsamplesToPointwise(q))
    quantConvSubsample(q, io, items);
  KILN_ASSIGN_OR_RETURN(auto wp, quantConvWeights(q, io.xOff, items));
  needPoolScratch(quantConvScratch(q));
  quantConvCall(q, io, wp.first, wp.second, items);
  quantFlipOut(q.dest, io, items);
  return Error::success();
}

namespace {

/// The kinds the int8 FC kernels take: per tensor, int8 throughout with an i32q bias;
/// channelwise, int8 or uint8 input and weights, an int8, uint8 or i32 result, an i32 or
/// float bias.
bool quantFCKindsOk(const Type &it, const Type &wt, const Type &ot, const Type &bt,
                    bool channelwise) {
  if (channelwise)
    return eightBit(it.kind) && eightBit(wt.kind) &&
           (eightBit(ot.kind) || ot.kind == ElemKind::Int32I) &&
           (bt.kind == ElemKind::Int32I || bt.kind == ElemKind::Float);
  return it.kind == ElemKind::Int8Q && wt.kind == ElemKind::Int8Q &&
         ot.kind == ElemKind::Int8Q && bt.kind == ElemKind::Int32Q;
}

/// The compile-time weights \p wv [K, M] packed as [ceil(M / T)][K4][T] quads (zero past K
/// and M) and the constants of the Mpad channels, for input offset cIn - 128.
void packQuantFC(const int8_t *wv, const WeightQuant &wq, int64_t K, int64_t M, int64_t T,
                 int64_t fXor, int64_t cIn, std::vector<int8_t> &packed, ChannelConsts &cc) {
  const int64_t K4 = (K + 3) / 4, tiles = (M + T - 1) / T;
  packed.assign(size_t(tiles * K4 * T * 4), 0);
  std::vector<int64_t> colsum(size_t(M), 0);
  for (int64_t k = 0; k < K; k++)
    for (int64_t m = 0; m < M; m++) {
      int8_t v = int8_t(uint8_t(wv[k * M + m]) ^ fXor);
      packed[size_t((((m / T) * K4 + k / 4) * T + m % T) * 4 + k % 4)] = v;
      colsum[size_t(m)] += v;
    }
  for (int64_t m = 0; m < M; m++) {
    const int64_t fo = wq.offset(size_t(m)) - (fXor ? 128 : 0);
    auto [ib, br] = wq.bias_(size_t(m));
    uint32_t corr =
        uint32_t(-cIn * colsum[size_t(m)]) + uint32_t(K * cIn) * uint32_t(fo) + uint32_t(ib);
    cc.corr[size_t(m)] = int32_t(corr);
    cc.fOff[size_t(m)] = int32_t(fo);
    cc.accScale[size_t(m)] = wq.accScale(size_t(m));
    cc.biasReal[size_t(m)] = br;
  }
}

} // namespace

std::pair<Location, Location>
Emitter::quantFCRuntimeWeights(Value *weights, Value *bias, Value *scalesV, Value *offsetsV,
                               float inScale, int64_t xOff, int64_t K, int64_t M, int64_t T,
                               std::vector<Item> &items) {
  const int64_t K4 = (K + 3) / 4, tiles = (M + T - 1) / T, Mpad = tiles * T;
  const Location wL{kActivationBase, reserveExtra(uint64_t(tiles * K4 * T * 4))};
  const Location pL{kActivationBase,
                    reserveExtra(uint64_t(Mpad) * (2 * sizeof(double) + 2 * sizeof(int32_t)))};
  const Type &wt = *weights->getType(), &bt = *bias->getType();
  const float fScale = wt.scale, bScale = bt.scale;
  const int64_t fOffset = wt.offset, bOffset = bt.offset, fXor = flipOf(wt.kind);
  const int64_t biasKind = scalesV ? (bt.kind == ElemKind::Float ? 1 : 0) : 2;
  items.push_back({false, "qpack fc", [=] {
                     call("libjit_qpack_fc_rt",
                          {at(wL), at(pL), ptr(weights), I64(fXor),
                           scalesV ? ptr(scalesV) : nullPtr(),
                           offsetsV ? ptr(offsetsV) : nullPtr(), F32(fScale), I64(fOffset),
                           ptr(bias), I64(biasKind), F32(bScale), I64(bOffset), F32(inScale),
                           I64(xOff), I64(K), I64(M), I64(T)});
                   },
                   StageWork{}});
  return {wL, pL};
}

Error Emitter::planQuantFC(Instruction *I, std::vector<Item> &items) {
  Value *dest, *in, *weights, *bias, *scalesV = nullptr, *offsetsV = nullptr;
  WeightQuant wq;
  std::string act = "None";
  float alpha = 0, beta = 0;
  if (auto *fc = dyn_cast<FullyConnectedInst>(I)) {
    if (fc->getInput()->getType()->kind != ElemKind::Int8Q)
      return planFullyConnected(I, items);
    dest = fc->getDest(), in = fc->getInput(), weights = fc->getWeights(), bias = fc->getBias();
  } else if (auto *ffc = dyn_cast<FusedFullyConnectedInst>(I)) {
    if (!ffc->getResidual().empty())
      return unsupported(I);
    dest = ffc->getDest(), in = ffc->getInput(), weights = ffc->getWeights();
    bias = ffc->getBias();
    act = ffc->getActivation(), alpha = ffc->getAlpha(), beta = ffc->getBeta();
  } else {
    auto *q = cast<ChannelwiseQuantizedFullyConnectedInst>(I);
    dest = q->getDest(), in = q->getInput(), weights = q->getWeights(), bias = q->getBias();
    scalesV = q->getWeightScales(), offsetsV = q->getWeightOffsets();
    act = q->getActivation(), alpha = q->getAlpha(), beta = q->getBeta();
    wq.scales = payloadOf(scalesV);
    wq.offsets = payloadOf(offsetsV);
    if (!wq.scales || !wq.offsets)
      return unsupported(I);
  }
  const Type &it = *in->getType(), &wt = *weights->getType(), &ot = *dest->getType();
  const Type &bt = *bias->getType();
  const Tensor *wp = payloadOf(weights);
  wq.bias = payloadOf(bias);
  wq.filterTy = &wt, wq.biasTy = &bt, wq.inScale = it.scale;
  int64_t lo, hi;
  if (!quantFCKindsOk(it, wt, ot, bt, wq.scales) ||
      !activationBounds(act, alpha, beta, ot, lo, hi) ||
      (ot.kind == ElemKind::Int32I && act != "None") || it.rank() != 2 || wt.rank() != 2 ||
      ot.rank() != 2)
    return unsupported(I);
  const int64_t N = it.dims[0], K = it.dims[1], M = wt.dims[1];
  if (int64_t(wt.dims[0]) != K || int64_t(ot.dims[0]) != N || int64_t(ot.dims[1]) != M ||
      int64_t(bt.numElements()) != M ||
      (wq.scales && (int64_t(wq.scales->size()) != M || int64_t(wq.offsets->size()) != M)))
    return makeError(ErrorCode::InvalidArgument, "CPU backend: ", I->getKindName(), " '",
                     I->getName(), "': weights ", wt.toString(), " and bias ",
                     bt.toString(), " do not fit input ", it.toString(),
                     " and output ", ot.toString());
  int64_t L;
  std::string isa = qIsa(L);
  const int64_t T = 2 * L, Mpad = (M + T - 1) / T * T, fXor = flipOf(wt.kind);
  const bool runtime = !wp || !wq.bias;
  KILN_ASSIGN_OR_RETURN(QuantIO io, quantIO(I, dest, in, items));
  const int64_t outOff = io.outOff, xOff = io.xOff;
  const Location inL = io.in;
  bool anyFOff = false;
  for (int64_t m = 0; m < M; m++)
    anyFOff |= wq.offset(size_t(m)) - (fXor ? 128 : 0) != 0;
  Location wL, pL;
  if (runtime) {
    std::tie(wL, pL) = quantFCRuntimeWeights(weights, bias, scalesV, offsetsV, it.scale, xOff,
                                             K, M, T, items);
  } else {
    std::vector<int8_t> packed;
    ChannelConsts cc{size_t(Mpad)};
    packQuantFC(reinterpret_cast<const int8_t *>(wp->getUnsafePtr()), wq, K, M, T, fXor,
                128 + xOff, packed, cc);
    KILN_ASSIGN_OR_RETURN(uint64_t wOff, constBytes(packed.data(), packed.size()));
    std::vector<char> pb = cc.bytes();
    KILN_ASSIGN_OR_RETURN(uint64_t pOff, constBytes(pb.data(), pb.size()));
    wL = {kConstantBase, wOff}, pL = {kConstantBase, pOff};
  }
  needPoolScratch(4 * T + 16);
  const float outScale = ot.scale;
  const bool i32 = io.i32;
  std::string name = "qfc " + std::to_string(N) + "x" + std::to_string(K) + "x" +
                     std::to_string(M) + (runtime ? " rt" : "") + (i32 ? " i32" : "") + " " +
                     isa;
  items.push_back({true, name, [=] {
                     std::vector<llvm::Value *> args = {ptr(dest), at(inL), at(wL), at(pL),
                                                        I64(N),    I64(K),  I64(M)};
                     if (!i32)
                       args.insert(args.end(),
                                   {F32(outScale), I64(outOff), I64(lo), I64(hi)});
                     args.insert(args.end(), {I64(anyFOff), scratch(),
                                              I64(scratchPerThread_ * 4), tid_, nth_});
                     call((i32 ? "libjit_qfc_i32_" : "libjit_qfc_i8_") + isa, args);
                   },
                   stageWork({I})});
  quantFlipOut(dest, io, items);
  return Error::success();
}

/// The operands and shape of an int8 MatMul ([N, K] x [K, M]: B = 1) or BatchMatMul
/// ([B, N, K] x [B, K, M]).
struct Emitter::QMatMul {
  Value *dest = nullptr, *lhs = nullptr, *rhs = nullptr;
  int64_t B = 1, N = 0, K = 0, M = 0;
  /// The kernels' column tile, the columns rounded up to whole tiles, and one batch's
  /// packed right operand (uint32 entries) and column constants (bytes).
  int64_t T = 0, Mpad = 0, wStride = 0, pStride = 0;
  std::string isa;
};

Error Emitter::quantMatMulOperands(Instruction *I, QMatMul &q) {
  const bool batched = I->getKind() == InstrKind::BatchMatMul;
  q.dest = I->getOperand(0).first, q.lhs = I->getOperand(1).first;
  q.rhs = I->getOperand(2).first;
  const Type &lt = *q.lhs->getType(), &rt = *q.rhs->getType(), &ot = *q.dest->getType();
  if (lt.kind != ElemKind::Int8Q || rt.kind != ElemKind::Int8Q || ot.kind != ElemKind::Int8Q)
    return unsupported(I);
  const size_t rank = batched ? 3 : 2;
  bool fits = lt.rank() == rank && rt.rank() == rank && ot.rank() == rank;
  if (fits) {
    q.B = batched ? int64_t(lt.dims[0]) : 1;
    q.N = int64_t(lt.dims[rank - 2]), q.K = int64_t(lt.dims[rank - 1]);
    q.M = int64_t(rt.dims[rank - 1]);
    fits = int64_t(rt.dims[rank - 2]) == q.K && int64_t(ot.dims[rank - 2]) == q.N &&
           int64_t(ot.dims[rank - 1]) == q.M &&
           (!batched || (int64_t(rt.dims[0]) == q.B && int64_t(ot.dims[0]) == q.B));
  }
  if (!fits)
    return makeError(ErrorCode::InvalidArgument, "CPU backend: ", I->getKindName(), " '",
                     I->getName(), "': operands ", lt.toString(), " and ", rt.toString(),
                     " do not fit result ", ot.toString());
  int64_t L;
  q.isa = qIsa(L);
  q.T = 2 * L;
  q.Mpad = (q.M + q.T - 1) / q.T * q.T;
  q.wStride = q.Mpad * ((q.K + 3) / 4);
  q.pStride = q.Mpad * int64_t(2 * sizeof(double) + 2 * sizeof(int32_t));
  return Error::success();
}

Expected<std::pair<Location, Location>>
Emitter::quantMatMulWeights(const QMatMul &q, int64_t xOff, std::vector<Item> &items) {
  const Type &lt = *q.lhs->getType(), &rt = *q.rhs->getType();
  if (const Tensor *wp = payloadOf(q.rhs)) {
    // Each batch's [K, M] packed as a FullyConnected's weights with no bias.
    WeightQuant wq;
    wq.filterTy = &rt, wq.inScale = lt.scale;
    std::vector<int8_t> packed, all;
    std::vector<char> params;
    const int8_t *w = reinterpret_cast<const int8_t *>(wp->getUnsafePtr());
    for (int64_t b = 0; b < q.B; b++) {
      ChannelConsts cc{size_t(q.Mpad)};
      packQuantFC(w + b * q.K * q.M, wq, q.K, q.M, q.T, 0, 128 + xOff, packed, cc);
      all.insert(all.end(), packed.begin(), packed.end());
      std::vector<char> pb = cc.bytes();
      params.insert(params.end(), pb.begin(), pb.end());
    }
    KILN_ASSIGN_OR_RETURN(uint64_t wOff, constBytes(all.data(), all.size()));
    KILN_ASSIGN_OR_RETURN(uint64_t pOff, constBytes(params.data(), params.size()));
    return std::make_pair(Location{kConstantBase, wOff}, Location{kConstantBase, pOff});
  }
  // Computed at run time (attention's Q K^T and P V): packed per run, the (batch, column
  // tile) pairs split between the threads, before the product.
  const Location wL{kActivationBase, reserveExtra(uint64_t(q.B * q.wStride * 4))};
  const Location pL{kActivationBase, reserveExtra(uint64_t(q.B * q.pStride))};
  const float fScale = rt.scale, inScale = lt.scale;
  const int64_t fOffset = rt.offset;
  items.push_back({true, "qpack bmm " + q.isa, [=] {
                     call("libjit_qpack_bmm_rt",
                          {at(wL), at(pL), ptr(q.rhs), F32(fScale), I64(fOffset), F32(inScale),
                           I64(xOff), I64(q.B), I64(q.K), I64(q.M), I64(q.T), I64(q.wStride),
                           I64(q.pStride), scratch(), I64(scratchPerThread_ * 4), tid_,
                           nth_});
                   },
                   StageWork{}});
  return std::make_pair(wL, pL);
}

Error Emitter::planQuantMatMul(Instruction *I, std::vector<Item> &items) {
  const bool batched = I->getKind() == InstrKind::BatchMatMul;
  if (I->getOperand(1).first->getType()->kind != ElemKind::Int8Q)
    return batched ? planBatchMatMul(I, items) : planMatMul(I, items);
  QMatMul q;
  KILN_RETURN_IF_ERR(quantMatMulOperands(I, q));
  KILN_ASSIGN_OR_RETURN(QuantIO io, quantIO(I, q.dest, q.lhs, items));
  KILN_ASSIGN_OR_RETURN(auto wp, quantMatMulWeights(q, io.xOff, items));
  // The accumulators of up to 8 rows (libjit_qconv_impl.h, kBmmStepRows).
  needPoolScratch(8 * q.T + 16);
  const Location inL = io.in, wL = wp.first, pL = wp.second;
  const float outScale = q.dest->getType()->scale;
  const int64_t outOff = io.outOff, anyFOff = q.rhs->getType()->offset != 0;
  const bool runtime = !payloadOf(q.rhs);
  std::string name = std::string(batched ? "qbmm " + std::to_string(q.B) + "x" : "qmatmul ") +
                     std::to_string(q.N) + "x" + std::to_string(q.K) + "x" +
                     std::to_string(q.M) + (runtime ? " rt" : "") + " " + q.isa;
  Value *dest = q.dest;
  items.push_back({true, name, [=] {
                     call("libjit_qbmm_i8_" + q.isa,
                          {ptr(dest), at(inL), at(wL), at(pL), I64(q.B), I64(q.N), I64(q.K),
                           I64(q.M), I64(q.wStride), I64(q.pStride), F32(outScale),
                           I64(outOff), I64(anyFOff), scratch(), I64(scratchPerThread_ * 4),
                           tid_, nth_});
                   },
                   stageWork({I})});
  return Error::success();
}

void registerQuantConvEmitters(EmitterTable &t) {
  t[InstrKind::Convolution] = &Emitter::planQuantConv;
  t[InstrKind::ChannelwiseQuantizedConvolution] = &Emitter::planQuantConv;
  t[InstrKind::FullyConnected] = &Emitter::planQuantFC;
  t[InstrKind::ChannelwiseQuantizedFullyConnected] = &Emitter::planQuantFC;
  t[InstrKind::MatMul] = &Emitter::planQuantMatMul;
  t[InstrKind::BatchMatMul] = &Emitter::planQuantMatMul;
}

} // namespace kiln::cpu
