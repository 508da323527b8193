// Emitters of the int8 convolution and fully connected kernels (libjit/libjit_qconv.cpp):
// Convolution and FullyConnected on Int8Q operands (per-tensor weights) and
// ChannelwiseQuantizedConvolution / ChannelwiseQuantizedFullyConnected (per-channel weights,
// Int8Q input and result). Float convolutions and FCs go on to the float emitters.
//
// At compile time the weights are packed as the kernels read them (k-quads of bytes) and
// each output channel gets its constants: the accumulator scale and real bias in double
// (as the Interpreter computes them), and the integer correction of the u8 x s8 scheme
// (see libjit_qconv.cpp): corr = -(128 + xOffset) sum_k f + K (128 + xOffset) fOffset, plus
// the i32 bias of the channelwise nodes. The ISA: vpdpbusd where the target has AVX-512
// VNNI, vpmaddwd (AVX2) otherwise, plain C on targets without AVX2.
#include "Emitter.h"

#include <algorithm>
#include <cstring>

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
    if (!scales) {
      int64_t b = bias->getHandle<int32_t>().raw(o);
      return {0, double(biasTy->scale) * double(b - int64_t(biasTy->offset))};
    }
    if (bias->getElementType() == ElemKind::Float)
      return {0, double(bias->getHandle<float>().raw(o))};
    return {bias->getHandle<int32_t>().raw(o), 0.0};
  }
};

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

Error Emitter::planQuantConv(Instruction *I, std::vector<Item> &items) {
  Value *dest, *in, *filter, *bias, *scalesV = nullptr, *offsetsV = nullptr;
  std::vector<dim_t> kernels, strides, pads, dilations;
  dim_t group;
  WeightQuant wq;
  if (auto *c = dyn_cast<ConvolutionInst>(I)) {
    if (c->getInput()->getType()->kind != ElemKind::Int8Q)
      return planConv(I, items);
    dest = c->getDest(), in = c->getInput(), filter = c->getFilter(), bias = c->getBias();
    kernels = c->getKernels(), strides = c->getStrides(), pads = c->getPads();
    dilations = c->getDilations(), group = c->getGroup();
  } else {
    auto *q = cast<ChannelwiseQuantizedConvolutionInst>(I);
    dest = q->getDest(), in = q->getInput(), filter = q->getFilter(), bias = q->getBias();
    kernels = q->getKernels(), strides = q->getStrides(), pads = q->getPads();
    dilations = q->getDilations(), group = q->getGroup();
    scalesV = q->getFilterScales(), offsetsV = q->getFilterOffsets();
    wq.scales = payloadOf(scalesV);
    wq.offsets = payloadOf(offsetsV);
    if (!wq.scales || !wq.offsets)
      return unsupported(I);
  }
  const Type &it = *in->getType(), &ft = *filter->getType(), &ot = *dest->getType();
  const Type &bt = *bias->getType();
  const Tensor *fp = payloadOf(filter);
  wq.bias = payloadOf(bias);
  wq.filterTy = &ft, wq.biasTy = &bt, wq.inScale = it.scale;
  // Per-tensor: int8 throughout, i32q bias; channelwise: int8 or uint8 input and filter,
  // an int8, uint8 or i32 result, an i32 or float bias.
  const bool kindsOk =
      wq.scales ? eightBit(it.kind) && eightBit(ft.kind) &&
                      (eightBit(ot.kind) || ot.kind == ElemKind::Int32I) &&
                      (bt.kind == ElemKind::Int32I || bt.kind == ElemKind::Float)
                : it.kind == ElemKind::Int8Q && ft.kind == ElemKind::Int8Q &&
                      ot.kind == ElemKind::Int8Q && bt.kind == ElemKind::Int32Q;
  if (!kindsOk || it.rank() != 4 || ft.rank() != 4 || ot.rank() != 4 || group == 0 ||
      kernels.size() != 2 || strides.size() != 2 || pads.size() != 4 || dilations.size() != 2)
    return unsupported(I);
  const int64_t N = it.dims[0], C = it.dims[1], H = it.dims[2], W = it.dims[3];
  const int64_t O = ot.dims[1], OH = ot.dims[2], OW = ot.dims[3], G = int64_t(group);
  const int64_t KH = kernels[0], KW = kernels[1];
  if (C % G || O % G || int64_t(ft.dims[0]) != O || int64_t(ft.dims[1]) != C / G ||
      int64_t(ft.dims[2]) != KH || int64_t(ft.dims[3]) != KW ||
      int64_t(bt.numElements()) != O || (wq.scales && (int64_t(wq.scales->size()) != O ||
                                                      int64_t(wq.offsets->size()) != O)))
    return makeError(ErrorCode::InvalidArgument, "CPU backend: ", I->getKindName(), " '",
                     I->getName(), "': filter ", ft.toString(), " and bias ",
                     bt.toString(), " do not fit input ", it.toString(),
                     ", output ", ot.toString(), " and group ", G);
  int64_t L;
  std::string isa = qIsa(L);
  const int64_t T = 2 * L, MR = 4;
  const int64_t cg = C / G, og = O / G, K = cg * KH * KW, K4 = (K + 3) / 4;
  const int64_t SH = strides[0], SW = strides[1], PT = pads[0], PL = pads[1];
  const int64_t DH = dilations[0], DW = dilations[1];
  const float outScale = ot.scale;
  const int64_t fXor = flipOf(ft.kind);
  // Weights known at compile time are packed now; run-time ones (a Filter or Bias that is
  // not a constant) by libjit_qpack_conv_rt in a serial stage before the kernel.
  const bool runtime = !fp || !wq.bias;
  KILN_ASSIGN_OR_RETURN(QuantIO io, quantIO(I, dest, in, items));
  const int64_t outOff = io.outOff, xOff = io.xOff;
  const Location inL = io.in;
  if (G == C && O == C && !runtime && !io.i32) {
    // Depthwise: centred int16 filters and the exact int32 sum (libjit_qdwconv_i8).
    const int8_t *f = reinterpret_cast<const int8_t *>(fp->getUnsafePtr());
    std::vector<int16_t> w16(size_t(C * KH * KW));
    ChannelConsts cc{size_t(C)};
    for (int64_t o = 0; o < C; o++) {
      const int64_t fo = wq.offset(size_t(o)) - (fXor ? 128 : 0);
      for (int64_t k = 0; k < KH * KW; k++)
        w16[size_t(o * KH * KW + k)] =
            int16_t(int64_t(int8_t(uint8_t(f[o * KH * KW + k]) ^ fXor)) - fo);
      auto [ib, br] = wq.bias_(size_t(o));
      cc.corr[size_t(o)] = ib;
      cc.accScale[size_t(o)] = wq.accScale(size_t(o));
      cc.biasReal[size_t(o)] = br;
    }
    KILN_ASSIGN_OR_RETURN(uint64_t wOff, constBytes(w16.data(), w16.size() * 2));
    std::vector<char> pb = cc.bytes();
    KILN_ASSIGN_OR_RETURN(uint64_t pOff, constBytes(pb.data(), pb.size()));
    // Per thread (libjit_qconv.cpp, dwPaddedDims and dwAccBytes): the plane's accumulators
    // (OH Wp + L int32, 64-byte aligned) and the padded, phase-grouped centred plane (Hp rows
    // of Wr int16, each of the SW phases followed by L columns of slack), or at stride 1 the
    // flat padded plane and its pair plane.
    {
      const int64_t Hp = std::max(PT + H, (OH - 1) * SH + (KH - 1) * DH + 1);
      const int64_t Wp = std::max(PL + W, (OW - 1) * SW + (KW - 1) * DW + 1);
      int64_t Wr = 0;
      for (int64_t ph = 0; ph < SW; ph++)
        Wr += (ph < Wp ? (Wp - ph + SW - 1) / SW : 0) + L;
      const int64_t accBytes = ((OH * Wp + L) * 4 + 63) / 64 * 64;
      // One more row: stride 2 builds each padded row in a line of Wp + 1 <= Wr entries.
      int64_t planeBytes = (Hp + 1) * Wr * 2;
      if (SH == 1 && SW == 1 && KH * KW <= 64) {
        // Stride 1 (dwFlatXpElems, dwFlatPairElems): the flat padded plane and its pairs.
        const int64_t xpElems = ((Hp * Wp + 2 * L + 2 * Wp) * 2 + 63) / 64 * 32;
        planeBytes = std::max(planeBytes, xpElems * 2 + (Hp * Wp + 2 * L + Wp) * 4);
      }
      if (SH == 2 && SW == 2 && DH == 1 && DW == 1 && KH * KW <= 64) {
        // Stride 2 (dwFlat2Dims): two planes of pe int32 entries.
        const int64_t Wq = (Wp + 1) / 2, Hq = (Hp + 1) / 2, nv = (OH * Wq + L - 1) / L;
        const int64_t reach = nv * L + ((KH - 1) / 2) * Wq + (KW + 1) / 2;
        const int64_t pe = (std::max(Hq * Wq, reach) + 15) / 16 * 16;
        planeBytes = std::max(planeBytes, 2 * pe * 4);
      }
      needPoolScratch((accBytes + planeBytes) / 4 + 16);
    }
    std::string name = "qconv dw " + std::to_string(KH) + "x" + std::to_string(KW) + "/" +
                       std::to_string(SH) + " " + std::to_string(C) + " " + isa;
    items.push_back({true, name, [=] {
                       call("libjit_qdwconv_i8_" + isa,
                            {ptr(dest), at(inL), at({kConstantBase, wOff}),
                             at({kConstantBase, pOff}), I64(N), I64(C), I64(H), I64(W), I64(OH),
                             I64(OW), I64(KH), I64(KW), I64(SH), I64(SW), I64(PT), I64(PL),
                             I64(DH), I64(DW), I64(xOff), F32(outScale), I64(outOff), I64(-128),
                             I64(127), scratch(), I64(scratchPerThread_ * 4), tid_, nth_});
                     },
                     stageWork({I})});
    quantFlipOut(dest, io, items);
    return Error::success();
  }
  const int64_t ogPad = (og + MR - 1) / MR * MR, Opad = G * ogPad;
  const bool pointwise = KH == 1 && KW == 1 && SH == 1 && SW == 1 && PT == 0 && PL == 0 &&
                         OH == H && OW == W;
  // Every layer but the pointwise ones (and, with 8 lanes, those with fewer than 4 input
  // channels per group) takes the kernel's direct path (directConv in
  // libjit/libjit_qconv.cpp): k ordered (channel quad, tap, channel in quad), ceil(cg / 4)
  // KH KW quads.
  const int64_t KK = KH * KW, cq4 = (cg + 3) / 4;
  const bool direct = !pointwise && KK <= 64 && SH <= 16 && SW <= 16 && (L == 16 || cg >= 4);
  const int64_t K4p = direct ? cq4 * KK : K4;
  const int64_t cIn = 128 + xOff;
  bool anyFOff = false;
  for (int64_t o = 0; o < O; o++)
    anyFOff |= wq.offset(size_t(o)) - (fXor ? 128 : 0) != 0;
  Location wL, pL;
  const uint64_t paramBytes = uint64_t(Opad) * (2 * sizeof(double) + 2 * sizeof(int32_t));
  if (runtime) {
    wL = {kActivationBase, reserveExtra(uint64_t(Opad * K4p * 4))};
    pL = {kActivationBase, reserveExtra(paramBytes)};
    const float fScale = ft.scale, bScale = bt.scale;
    const int64_t fOffset = ft.offset, bOffset = bt.offset;
    const int64_t biasKind = wq.scales ? (bt.kind == ElemKind::Float ? 1 : 0) : 2;
    const float inScale = it.scale;
    items.push_back({false, "qpack conv", [=] {
                       call("libjit_qpack_conv_rt",
                            {at(wL), at(pL), ptr(filter), I64(fXor),
                             scalesV ? ptr(scalesV) : nullPtr(),
                             offsetsV ? ptr(offsetsV) : nullPtr(), F32(fScale), I64(fOffset),
                             ptr(bias), I64(biasKind), F32(bScale), I64(bOffset), F32(inScale),
                             I64(xOff), I64(O), I64(G), I64(cg), I64(KK), I64(direct)});
                     },
                     StageWork{}});
  } else {
    // Weights: [G][ogPad / MR][K4p][MR] quads; channels past og are zero.
    std::vector<int8_t> packed(size_t(Opad * K4p * 4), 0);
    const int8_t *f = reinterpret_cast<const int8_t *>(fp->getUnsafePtr());
    ChannelConsts cc{size_t(Opad)};
    for (int64_t g = 0; g < G; g++)
      for (int64_t j = 0; j < og; j++) {
        const int64_t o = g * og + j, oi = g * ogPad + j;
        const int64_t blk = (g * ogPad + j / MR * MR) * K4p * 4, r = j % MR;
        int64_t sum = 0;
        for (int64_t k = 0; k < K; k++) {
          int8_t v = int8_t(uint8_t(f[o * K + k]) ^ fXor);
          // Direct: k = c KK + tap goes to quad (c / 4) KK + tap, byte c % 4.
          const int64_t quad = direct ? (k / KK / 4) * KK + k % KK : k / 4;
          const int64_t byte = direct ? (k / KK) % 4 : k % 4;
          packed[size_t(blk + (quad * MR + r) * 4 + byte)] = v;
          sum += v;
        }
        const int64_t fo = wq.offset(size_t(o)) - (fXor ? 128 : 0);
        auto [ib, br] = wq.bias_(size_t(o));
        // Wrapping 32-bit arithmetic, as the kernel's.
        uint32_t corr = uint32_t(-cIn * sum) + uint32_t(K * cIn) * uint32_t(fo) + uint32_t(ib);
        cc.corr[size_t(oi)] = int32_t(corr);
        cc.fOff[size_t(oi)] = int32_t(fo);
        cc.accScale[size_t(oi)] = wq.accScale(size_t(o));
        cc.biasReal[size_t(oi)] = br;
      }
    KILN_ASSIGN_OR_RETURN(uint64_t wOff, constBytes(packed.data(), packed.size()));
    std::vector<char> pb = cc.bytes();
    KILN_ASSIGN_OR_RETURN(uint64_t pOff, constBytes(pb.data(), pb.size()));
    wL = {kConstantBase, wOff}, pL = {kConstantBase, pOff};
  }
  // Per thread: the patch, the pixel sums, the accumulators and (windowed layers) the
  // group's padded input planes (libjit_qconv_impl.h, padDims / padPlanes).
  const int64_t Hp = std::max(PT + H, (OH - 1) * SH + (KH - 1) * DH + 1);
  const int64_t Wp = std::max(PL + W, (OW - 1) * SW + (KW - 1) * DW + 1);
  if (direct) {
    // libjit_qconv.cpp: directFixedBytes, then ceil(cg / 4) blocks of directQStride
    // entries, the channel sums S (one more block of int32) and a row of Wp entries.
    const int64_t fixed = ((MR + 1) * T * 4 + Opad * (24 + 1) + 63) / 64 * 64; // FastRQ: 24
    const int64_t qstride =
        (SH * SW * ((Hp + SH - 1) / SH) * ((Wp + SW - 1) / SW) + T + 15) / 16 * 16;
    needPoolScratch((fixed + (cq4 + 1) * qstride * 4 + Wp * 4) / 4 + 16);
  } else if (pointwise) {
    // libjit_qconv_impl.h, qconvPointwise: the patch of TB (pointwiseTB) pixels, colsum,
    // acc, Opad FastRQ (24 bytes) and flags.
    const int64_t m = std::min<int64_t>(8, std::max<int64_t>(1, 4096 / (K4 * T)));
    const int64_t TB = T * m;
    needPoolScratch(((K4 + 1 + MR) * TB * 4 + Opad * 25) / 4 + 16);
  } else {
    // The patch, colsum, acc, Opad FastRQ (24 bytes) and flags, rounded up to 64 bytes,
    // then the padded planes (libjit_qconv_impl.h, qconv).
    needPoolScratch(((K4 + 1 + MR) * T * 4 + Opad * 25 + 63) / 64 * 64 / 4 + cg * Hp * Wp / 4 +
                    16);
  }
  std::string name = "qconv " + std::to_string(KH) + "x" + std::to_string(KW) + "/" +
                     std::to_string(SH) + " " + std::to_string(C) + "->" + std::to_string(O) +
                     (G > 1 ? " g" + std::to_string(G) : "") + (runtime ? " rt" : "") +
                     (io.i32 ? " i32" : "") + " " + isa;
  if (io.i32)
    items.push_back({true, name, [=] {
                       call("libjit_qconv_i32_" + isa,
                            {ptr(dest), at(inL), at(wL), at(pL), I64(N), I64(C), I64(H), I64(W),
                             I64(O), I64(OH), I64(OW), I64(KH), I64(KW), I64(SH), I64(SW),
                             I64(PT), I64(PL), I64(DH), I64(DW), I64(G), I64(xOff),
                             I64(anyFOff), scratch(), I64(scratchPerThread_ * 4), tid_, nth_});
                     },
                     stageWork({I})});
  else
    items.push_back({true, name, [=] {
                       call("libjit_qconv_i8_" + isa,
                            {ptr(dest), at(inL), at(wL), at(pL), I64(N), I64(C), I64(H), I64(W),
                             I64(O), I64(OH), I64(OW), I64(KH), I64(KW), I64(SH), I64(SW),
                             I64(PT), I64(PL), I64(DH), I64(DW), I64(G), I64(xOff),
                             F32(outScale), I64(outOff), I64(-128), I64(127), I64(anyFOff),
                             scratch(), I64(scratchPerThread_ * 4), tid_, nth_});
                     },
                     stageWork({I})});
  quantFlipOut(dest, io, items);
  return Error::success();
}

Error Emitter::planQuantFC(Instruction *I, std::vector<Item> &items) {
  Value *dest, *in, *weights, *bias, *scalesV = nullptr, *offsetsV = nullptr;
  WeightQuant wq;
  if (auto *fc = dyn_cast<FullyConnectedInst>(I)) {
    if (fc->getInput()->getType()->kind != ElemKind::Int8Q)
      return planFullyConnected(I, items);
    dest = fc->getDest(), in = fc->getInput(), weights = fc->getWeights(), bias = fc->getBias();
  } else {
    auto *q = cast<ChannelwiseQuantizedFullyConnectedInst>(I);
    dest = q->getDest(), in = q->getInput(), weights = q->getWeights(), bias = q->getBias();
    scalesV = q->getWeightScales(), offsetsV = q->getWeightOffsets();
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
  const bool kindsOk =
      wq.scales ? eightBit(it.kind) && eightBit(wt.kind) &&
                      (eightBit(ot.kind) || ot.kind == ElemKind::Int32I) &&
                      (bt.kind == ElemKind::Int32I || bt.kind == ElemKind::Float)
                : it.kind == ElemKind::Int8Q && wt.kind == ElemKind::Int8Q &&
                      ot.kind == ElemKind::Int8Q && bt.kind == ElemKind::Int32Q;
  if (!kindsOk || it.rank() != 2 || wt.rank() != 2 || ot.rank() != 2)
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
  const int64_t T = 2 * L, K4 = (K + 3) / 4, tiles = (M + T - 1) / T, Mpad = tiles * T;
  const int64_t fXor = flipOf(wt.kind);
  const bool runtime = !wp || !wq.bias;
  KILN_ASSIGN_OR_RETURN(QuantIO io, quantIO(I, dest, in, items));
  const int64_t outOff = io.outOff, xOff = io.xOff;
  const Location inL = io.in;
  const int64_t cIn = 128 + xOff;
  bool anyFOff = false;
  for (int64_t m = 0; m < M; m++)
    anyFOff |= wq.offset(size_t(m)) - (fXor ? 128 : 0) != 0;
  Location wL, pL;
  if (runtime) {
    wL = {kActivationBase, reserveExtra(uint64_t(tiles * K4 * T * 4))};
    pL = {kActivationBase,
          reserveExtra(uint64_t(Mpad) * (2 * sizeof(double) + 2 * sizeof(int32_t)))};
    const float fScale = wt.scale, bScale = bt.scale, inScale = it.scale;
    const int64_t fOffset = wt.offset, bOffset = bt.offset;
    const int64_t biasKind = wq.scales ? (bt.kind == ElemKind::Float ? 1 : 0) : 2;
    items.push_back({false, "qpack fc", [=] {
                       call("libjit_qpack_fc_rt",
                            {at(wL), at(pL), ptr(weights), I64(fXor),
                             scalesV ? ptr(scalesV) : nullPtr(),
                             offsetsV ? ptr(offsetsV) : nullPtr(), F32(fScale), I64(fOffset),
                             ptr(bias), I64(biasKind), F32(bScale), I64(bOffset), F32(inScale),
                             I64(xOff), I64(K), I64(M), I64(T)});
                     },
                     StageWork{}});
  } else {
    // Weights: [tiles][K4][T] quads, zero past K and M.
    std::vector<int8_t> packed(size_t(tiles * K4 * T * 4), 0);
    const int8_t *w = reinterpret_cast<const int8_t *>(wp->getUnsafePtr());
    std::vector<int64_t> colsum(size_t(M), 0);
    for (int64_t k = 0; k < K; k++)
      for (int64_t m = 0; m < M; m++) {
        int8_t v = int8_t(uint8_t(w[k * M + m]) ^ fXor);
        packed[size_t((((m / T) * K4 + k / 4) * T + m % T) * 4 + k % 4)] = v;
        colsum[size_t(m)] += v;
      }
    ChannelConsts cc{size_t(Mpad)};
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
    KILN_ASSIGN_OR_RETURN(uint64_t wOff, constBytes(packed.data(), packed.size()));
    std::vector<char> pb = cc.bytes();
    KILN_ASSIGN_OR_RETURN(uint64_t pOff, constBytes(pb.data(), pb.size()));
    wL = {kConstantBase, wOff}, pL = {kConstantBase, pOff};
  }
  needPoolScratch(4 * T + 16);
  const float outScale = ot.scale;
  std::string name = "qfc " + std::to_string(N) + "x" + std::to_string(K) + "x" +
                     std::to_string(M) + (runtime ? " rt" : "") + (io.i32 ? " i32" : "") + " " +
                     isa;
  if (io.i32)
    items.push_back({true, name, [=] {
                       call("libjit_qfc_i32_" + isa,
                            {ptr(dest), at(inL), at(wL), at(pL), I64(N), I64(K), I64(M),
                             I64(anyFOff), scratch(), I64(scratchPerThread_ * 4), tid_, nth_});
                     },
                     stageWork({I})});
  else
    items.push_back({true, name, [=] {
                       call("libjit_qfc_i8_" + isa,
                            {ptr(dest), at(inL), at(wL), at(pL), I64(N), I64(K), I64(M),
                             F32(outScale), I64(outOff), I64(-128), I64(127), I64(anyFOff),
                             scratch(), I64(scratchPerThread_ * 4), tid_, nth_});
                     },
                     stageWork({I})});
  quantFlipOut(dest, io, items);
  return Error::success();
}

void registerQuantConvEmitters(EmitterTable &t) {
  t[InstrKind::Convolution] = &Emitter::planQuantConv;
  t[InstrKind::ChannelwiseQuantizedConvolution] = &Emitter::planQuantConv;
  t[InstrKind::FullyConnected] = &Emitter::planQuantFC;
  t[InstrKind::ChannelwiseQuantizedFullyConnected] = &Emitter::planQuantFC;
}

} // namespace kiln::cpu
