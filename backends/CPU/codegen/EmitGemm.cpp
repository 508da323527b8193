// Emitters of the GEMM-based instructions: convolutions (direct GEMM, transposed GEMM for
// small images, depthwise), FullyConnected, MatMul, BatchMatMul and BatchedAdd.
#include "Emitter.h"

#include "backends/CPU/libjit/libjit.h"
#include "backends/CPU/libjit/libjit_gemm_config.h"

#include <cmath>

namespace kiln::cpu {

Error Emitter::planFC(Instruction *I, Value *dest, Value *in, Value *weights, Value *bias,
                      std::vector<Item> &items, const FusedEpilogue *act) {
  auto id = dimsOf(in), wd = dimsOf(weights);
  int64_t N = id[0], K = id[1], M = wd[1];
  FusedEpilogue epi;
  if (act)
    epi = *act;
  // Weights computed at run time (e.g. a transposed input) are packed per run.
  auto *cw = dyn_cast<WeightVar>(weights);
  bool constW = cw && cw->isConstant();
  Value *w = weights;
  Location wl;
  if (constW) {
    KILN_ASSIGN_OR_RETURN(uint64_t off, constPacked(cw, 2, 1, K, M));
    wl = {kConstantBase, off};
  } else {
    int64_t floats = avx512_ ? libjit::packedBFloats<libjit::GemmAvx512>(K, M)
                             : libjit::packedBFloats<libjit::GemmAvx2>(K, M);
    wl = {kActivationBase, reserveExtra(floats * 4)};
    items.push_back({false, "pack", [=] {
                       call("libjit_pack_b_f32_" + isa_, {at(wl), ptr(w), I64(K), I64(M), I64(M)});
                     }});
  }
  usesScratch_ = true;
  items.push_back({true, "fc " + std::to_string(N) + "x" + std::to_string(K) + "x" + std::to_string(M), [=] {
                     call("libjit_fc_f32_" + isa_,
                          {ptr(dest), ptr(in), at(wl), bias ? ptr(bias) : nullPtr(),
                           epi.add ? ptr(epi.add) : nullPtr(), I64(N), I64(K), I64(M),
                           I64(epi.act), F32(epi.lo), F32(epi.hi), scratch(), tid_, nth_});
                   }});
  return Error::success();
}

namespace {

/// The epilogue of a FusedConvolution/FusedFullyConnected: its residual, and its
/// activation as a clamp; false for an activation the kernels do not have.
template <typename InstT> bool epilogueOf(const InstT *I, FusedEpilogue &epi) {
  std::vector<Value *> residual = I->getResidual();
  epi.add = residual.empty() ? nullptr : residual.front();
  const std::string &act = I->getActivation();
  float alpha = I->getAlpha(), beta = I->getBeta();
  if (act == "Relu") {
    epi.act = true;
    epi.lo = 0.0f;
    epi.hi = INFINITY;
    return true;
  }
  if (act == "Clip") {
    epi.act = true;
    epi.lo = alpha;
    epi.hi = beta;
    return true;
  }
  if (act.empty() || act == "None") {
    epi.act = false;
    return true;
  }
  return false;
}

/// Whether Winograd F(4x4, 3x3) beats the GEMM convolutions for a 3x3 stride-1
/// convolution with T = N ceil(OH / 4) ceil(OW / 4) output tiles (measured with
/// test/cpu:conv_bench on the layers of ResNet-50, SqueezeNet and VGG-19 and on small
/// images, AVX-512 and AVX2): from 8 tiles (10x10 images) up, unless each tile has to pay
/// for reading more than 36 x 8192 weights (they are 4x the direct convolution's: 512
/// channels lose at 7x7 and 14x14, win at 28x28), and not with fewer than 8 input channels
/// (the transforms then cost more than the direct sum).
bool winogradWins(int64_t N, int64_t C, int64_t O, int64_t OH, int64_t OW) {
  int64_t T = N * ((OH + 3) / 4) * ((OW + 3) / 4);
  return C >= 8 && T >= 8 && O * C <= 8192 * T;
}

/// Whether Winograd F(2x2, 3x3) with the tiles as GEMM rows (libjit_conv2d_wino_rows2) beats
/// F(4x4, 3x3) and the GEMM convolutions: on images of 32-100 F(2x2) tiles (11x11 to 20x20)
/// with large filters (O C >= 65536). There F(4x4)'s transformed weights, 4x the filter's
/// bytes for 16 tiles, are a stream memory does not serve at 2 threads, and a GEMM
/// convolution does 2.25x the multiplies of F(2x2). Measured in network (per-stage minima,
/// interleaved rounds): resnet50 14x14 256->256 at 2 threads 0.40 -> 0.34 ms per layer
/// against F(4x4), a tie at 1 thread (0.56 against 0.58, so F(4x4) stays there);
/// vgg19 14x14 512->512 (F(4x4) excluded) 4.6 ms on the transposed GEMM -> 2.1-2.9 ms at
/// 1 thread, 2.2 -> 1.7 ms at 2. Not on larger images, where F(4x4) is compute-bound
/// and does fewer multiplies (vgg19 28x28 512->512: 4.7-4.9 ms against 6.0), nor at 7x7
/// (resnet50's 512->512: 16 tiles, a tie with the transposed GEMM at 2 threads, which
/// reads 9/16 of the bytes), nor on squeezenet's 13x13 layers (O C <= 16384: a tie at 2
/// threads, 5-11% slower at 1).
bool winograd2Wins(int64_t N, int64_t C, int64_t O, int64_t OH, int64_t OW, unsigned threads) {
  int64_t T = N * ((OH + 1) / 2) * ((OW + 1) / 2);
  if (T < 32 || T > 100 || O * C < 65536)
    return false;
  return threads > 1 || !winogradWins(N, C, O, OH, OW);
}

/// Whether Winograd F(4x4, 3x3) with the tiles as GEMM rows beats the tiles-as-columns
/// kernel: where the columns kernel pads the N ceil(OH / 4) ceil(OW / 4) tiles to whole
/// 16-column vectors by 5% or more (10% on AVX2) and the tiles fill three row tiles.
/// Measured (conv_bench, min of 3 rounds; vgg19 and squeezenet per-stage minima in
/// network), AVX-512, columns -> rows: 28x28 512->512 7.4 -> 5.5 ms at 1 thread, 7.0 ->
/// 3.7 at 2; 56x56 256->256 6.6 -> 5.5 and 4.1 -> 4.1; 27x27 32->128 0.16 -> 0.13 and
/// 0.15 -> 0.10; 56x56 64->64 0.62 -> 0.46 and 0.33 -> 0.27. Not at 112x112 and up (784
/// tiles fill the vectors: a tie at 2 threads, and 8.3 against 9.3 ms at 224x224), nor
/// with 16 tiles (13x13, 14x14: the 2-row remainder tile; resnet50's 14x14 256->256 0.58
/// -> 0.71 ms at 1 thread). AVX2, 1 thread: 28x28 512->512 12.2 -> 9.9 ms, 27x27 0.24 ->
/// 0.21, but 56x56 64->64 0.73 -> 0.99 (196 tiles pad only to 208 columns there).
bool winogradRowsWins(int64_t N, int64_t OH, int64_t OW, int64_t MR, bool avx512) {
  int64_t T = N * ((OH + 3) / 4) * ((OW + 3) / 4);
  double fill = double(T) / double((T + 15) / 16 * 16);
  return T >= 3 * MR && fill < (avx512 ? 0.95 : 0.9);
}

} // namespace

Error Emitter::planConv(Instruction *I, std::vector<Item> &items) {
  std::vector<dim_t> kernels, strides, pads, dilations;
  int64_t G;
  FusedEpilogue epi;
  if (auto *c = dyn_cast<ConvolutionInst>(I)) {
    kernels = c->getKernels(), strides = c->getStrides(), pads = c->getPads();
    dilations = c->getDilations();
    G = int64_t(c->getGroup());
  } else {
    auto *f = cast<FusedConvolutionInst>(I);
    kernels = f->getKernels(), strides = f->getStrides(), pads = f->getPads();
    dilations = f->getDilations();
    G = int64_t(f->getGroup());
    if (!epilogueOf(f, epi))
      return makeError(ErrorCode::Unsupported, "CPU backend: activation ", f->getActivation(),
                       " of '", I->getName(), "'");
  }
  Value *dest = I->getOperand(0).first, *in = I->getOperand(1).first,
        *filter = I->getOperand(2).first, *bias = I->getOperand(3).first;
  auto id = dimsOf(in), od = dimsOf(dest);
  if (id.size() != 4 || kernels.size() != 2)
    return makeError(ErrorCode::Unsupported, "CPU backend: only 2-D convolutions");
  int64_t N = id[0], C = id[1], H = id[2], W = id[3], O = od[1], OH = od[2], OW = od[3];
  int64_t KH = kernels[0], KW = kernels[1];
  int64_t SH = strides[0], SW = strides[1];
  int64_t PT = pads[0], PL = pads[1];
  int64_t DH = dilations.size() ? dilations[0] : 1;
  int64_t DW = dilations.size() > 1 ? dilations[1] : 1;
  std::string desc = std::to_string(KH) + "x" + std::to_string(KW) + "/" + std::to_string(SH) +
                     " " + std::to_string(C) + "->" + std::to_string(O) + " " +
                     std::to_string(H) + "x" + std::to_string(W) + (G > 1 ? " g" + std::to_string(G) : "") +
                     (epi.add ? " +add" : "");
  if (G > 1 && G == C && O == C && !epi.add) {
    needPoolScratch(libjit_conv2d_dw_scratch_floats(H, W, OH, OW, KH, KW, SH, SW, DH, DW));
    items.push_back({true, "conv_dw " + desc, [=] {
                       call("libjit_conv2d_dw_f32",
                            {ptr(dest), ptr(in), ptr(filter), ptr(bias), I64(N), I64(C), I64(H),
                             I64(W), I64(OH), I64(OW), I64(KH), I64(KW), I64(SH), I64(SW),
                             I64(PT), I64(PL), I64(DH), I64(DW), I64(epi.act), F32(epi.lo),
                             F32(epi.hi), scratch(), tid_, nth_});
                     }});
    return Error::success();
  }
  int64_t Og = O / G, K = (C / G) * KH * KW;
  auto *cw = dyn_cast<WeightVar>(filter);
  bool constW = cw && cw->isConstant();
  Value *w = filter;
  bool wino3x3 = G == 1 && constW && opts_.winograd && KH == 3 && KW == 3 && SH == 1 &&
                 SW == 1 && DH == 1 && DW == 1;
  int64_t wm = 0; // Winograd with the tiles as rows, of output tiles wm x wm
  if (wino3x3 && winograd2Wins(N, C, O, OH, OW, opts_.threads))
    wm = 2;
  else if (wino3x3 && winogradWins(N, C, O, OH, OW) &&
           winogradRowsWins(N, OH, OW, avx512_ ? libjit::GemmAvx512::MR : libjit::GemmAvx2::MR,
                            avx512_))
    wm = 4;
  if (wm) {
    KILN_ASSIGN_OR_RETURN(uint64_t off, constPacked(cw, wm == 2 ? 5 : 6, 1, O, C));
    Location wl{kConstantBase, off};
    needPoolScratch(avx512_
                        ? libjit_conv2d_wino_rows_scratch_floats_avx512(wm, N, C, H, W, O, OH, OW)
                        : libjit_conv2d_wino_rows_scratch_floats_avx2(wm, N, C, H, W, O, OH, OW));
    items.push_back({true, std::string(wm == 2 ? "conv_wino2 " : "conv_wino4r ") + desc, [=] {
                       call("libjit_conv2d_wino_rows" + std::to_string(wm) + "_f32_" + isa_,
                            {ptr(dest), ptr(in), at(wl), ptr(bias),
                             epi.add ? ptr(epi.add) : nullPtr(), I64(N), I64(C), I64(H), I64(W),
                             I64(O), I64(OH), I64(OW), I64(PT), I64(PL), I64(epi.act),
                             F32(epi.lo), F32(epi.hi), scratch(), tid_, nth_});
                     }});
    return Error::success();
  }
  if (wino3x3 && winogradWins(N, C, O, OH, OW)) {
    KILN_ASSIGN_OR_RETURN(uint64_t off, constPacked(cw, 4, 1, O, C));
    Location wl{kConstantBase, off};
    needPoolScratch(avx512_ ? libjit_conv2d_wino_scratch_floats_avx512(N, C, H, W, O, OH, OW)
                            : libjit_conv2d_wino_scratch_floats_avx2(N, C, H, W, O, OH, OW));
    items.push_back({true, "conv_wino " + desc, [=] {
                       call("libjit_conv2d_wino_f32_" + isa_,
                            {ptr(dest), ptr(in), at(wl), ptr(bias),
                             epi.add ? ptr(epi.add) : nullPtr(), I64(N), I64(C), I64(H), I64(W),
                             I64(O), I64(OH), I64(OW), I64(PT), I64(PL), I64(epi.act),
                             F32(epi.lo), F32(epi.hi), scratch(), tid_, nth_});
                     }});
    return Error::success();
  }
  // Pointwise layers whose pixels fill the strip kernel's column vectors well (13x13 and
  // up: 169 = 3 x 48 + 2 x 16) read the input as it is; measured 12-25% faster than the
  // transposed GEMM at 13x13 and 14x14, a tie at K = 1024, slower at 7x7 (49 = 48 + 16).
  int64_t P = OH * OW, NR = avx512_ ? libjit::GemmAvx512::NR : libjit::GemmAvx2::NR;
  int64_t SV = avx512_ ? 16 : 8, SN = SV * libjit::kStripVectors;
  double effS = double(P) / double(P / SN * SN + (P % SN + SV - 1) / SV * SV);
  bool pointwise = KH == 1 && KW == 1 && SH == 1 && SW == 1 && PT == 0 && PL == 0 &&
                   OH == H && OW == W;
  // Kernels with taps read the input through the strip kernel's tap planes (no im2col
  // copy), on AVX-512 up to K = 2304 (on AVX2 the transposed GEMM won at K = 2304, 2228 us
  // against 2309). Where the transposed GEMM applies (few pixels, below) it comes first:
  // since it prefetches its weight panels it beats the strip on resnet50's 3x3/2 256->256
  // 28x28 (K = 2304; kernel_bench, min of 100: 1259 us against 1290 at 1 thread, 625
  // against 801 at 2, where 4 strips and a partial one split 3:2), while the strip stays
  // ahead at 56x56 (3x3/2 128->128: 1178 against 1528 us at 1 thread) and against the
  // packed GEMM on alexnet's 5x5/1 64->192 27x27 (K = 1600; in network, per-stage minima of
  // 4 interleaved rounds: 2.81 -> 2.09 ms at 1 thread, 1.44 -> 1.05 at 2).
  bool taps = avx512_ && (KH > 1 || KW > 1);
  bool strip = G == 1 && (K <= 1152 || (taps && K <= 2304));
  bool stripFirst = strip && pointwise && effS >= 0.9;
  // Small images fill the NR-column panels of the pixel dimension badly: compute those
  // transposed, pixels as rows (libjit_conv2d_t).
  double effN = double(P) / double((P + NR - 1) / NR * NR);
  if (!stripFirst && G == 1 && constW && opts_.transposedConv && effN < 0.92 &&
      uint64_t(P * O) * 4 <= (8u << 20)) {
    KILN_ASSIGN_OR_RETURN(uint64_t off, constPacked(cw, 3, 1, K, O));
    Location wtl{kConstantBase, off};
    tScratchBytes_ = std::max<uint64_t>(tScratchBytes_, alignUp(uint64_t(P * O) * 4));
    usesScratch_ = true;
    items.push_back({true, "convT " + desc, [=] {
                       call("libjit_conv2d_t_f32_" + isa_,
                            {ptr(dest), ptr(in), at(wtl), ptr(bias),
                             epi.add ? ptr(epi.add) : nullPtr(), I64(N), I64(C), I64(H), I64(W),
                             I64(O), I64(OH), I64(OW), I64(KH), I64(KW), I64(SH), I64(SW),
                             I64(PT), I64(PL), I64(DH), I64(DW), I64(epi.act), F32(epi.lo),
                             F32(epi.hi), tScratch(), scratch(), tid_, nth_});
                     }});
    return Error::success();
  }
  // The other group-1 layers with a moderate reduction: the strip kernel reads the filter
  // as it is and the activations without a packing copy (pointwise) or through a row-wise
  // im2col. Measured (kernel_bench, 1 thread) faster than the packed GEMM on every
  // mobilenet_v2, squeezenet1_1 and resnet50 shape tried with K <= 1152, on AVX-512 and on
  // AVX2: 1.9-2.2x on 1x1 layers with 16-32 output channels, 1.4x on the 7x7 stem, 1.5x on
  // the 3x3/2 stems, 1.05-1.3x on resnet50's 1x1 layers.
  if (strip) {
    usesScratch_ = true;
    items.push_back({true, "convS " + desc, [=] {
                       call("libjit_conv2d_strip_f32_" + isa_,
                            {ptr(dest), ptr(in), ptr(w), ptr(bias),
                             epi.add ? ptr(epi.add) : nullPtr(), I64(N), I64(C), I64(H), I64(W),
                             I64(O), I64(OH), I64(OW), I64(KH), I64(KW), I64(SH), I64(SW),
                             I64(PT), I64(PL), I64(DH), I64(DW), I64(epi.act), F32(epi.lo),
                             F32(epi.hi), scratch(), tid_, nth_});
                     }});
    return Error::success();
  }
  Location wl;
  if (constW) {
    KILN_ASSIGN_OR_RETURN(uint64_t off, constPacked(cw, 1, G, Og, K));
    wl = {kConstantBase, off};
  } else {
    int64_t per = avx512_ ? libjit::packedAFloats<libjit::GemmAvx512>(Og, K)
                          : libjit::packedAFloats<libjit::GemmAvx2>(Og, K);
    wl = {kActivationBase, reserveExtra(per * G * 4)};
    items.push_back({false, "pack", [=] {
                       for (int64_t g = 0; g < G; g++)
                         call("libjit_pack_a_f32_" + isa_,
                              {at({wl.base, wl.offset + uint64_t(g * per * 4)}),
                               B_.CreateConstInBoundsGEP1_64(i8_, ptr(w), uint64_t(g * Og * K * 4)),
                               I64(Og), I64(K), I64(K)});
                     }});
  }
  usesScratch_ = true;
  items.push_back({true, "conv " + desc, [=] {
                     call("libjit_conv2d_f32_" + isa_,
                          {ptr(dest), ptr(in), at(wl), ptr(bias),
                           epi.add ? ptr(epi.add) : nullPtr(), I64(N), I64(C), I64(H), I64(W),
                           I64(O), I64(OH), I64(OW), I64(KH), I64(KW), I64(SH), I64(SW),
                           I64(PT), I64(PL), I64(DH), I64(DW), I64(G), I64(epi.act),
                           F32(epi.lo), F32(epi.hi), scratch(), tid_, nth_});
                   }});
  return Error::success();
}

Error Emitter::planFullyConnected(Instruction *I, std::vector<Item> &items) {
  auto *fc = cast<FullyConnectedInst>(I);
  return planFC(I, fc->getDest(), fc->getInput(), fc->getWeights(), fc->getBias(), items);
}

Error Emitter::planFusedFullyConnected(Instruction *I, std::vector<Item> &items) {
  auto *fc = cast<FusedFullyConnectedInst>(I);
  FusedEpilogue epi;
  if (!epilogueOf(fc, epi))
    return makeError(ErrorCode::Unsupported, "CPU backend: activation ", fc->getActivation(),
                     " of '", I->getName(), "'");
  return planFC(I, fc->getDest(), fc->getInput(), fc->getWeights(), fc->getBias(), items,
                &epi);
}

Error Emitter::planMatMul(Instruction *I, std::vector<Item> &items) {
  auto *mm = cast<MatMulInst>(I);
  auto *w = dyn_cast<WeightVar>(mm->getRHS());
  if (w && w->isConstant())
    return planFC(I, mm->getDest(), mm->getLHS(), mm->getRHS(), nullptr, items);
  Value *dest = mm->getDest(), *l = mm->getLHS(), *r = mm->getRHS();
  auto ld = dimsOf(l), rd = dimsOf(r);
  usesScratch_ = true;
  items.push_back({true, "matmul", [=] {
                     call("libjit_batchmatmul_f32_" + isa_,
                          {ptr(dest), ptr(l), ptr(r), I64(1), I64(ld[0]), I64(ld[1]),
                           I64(rd[1]), scratch(), tid_, nth_});
                   }});
  return Error::success();
}

Error Emitter::planBatchMatMul(Instruction *I, std::vector<Item> &items) {
  auto *mm = cast<BatchMatMulInst>(I);
  Value *dest = mm->getDest(), *l = mm->getLHS(), *r = mm->getRHS();
  auto ld = dimsOf(l), rd = dimsOf(r);
  usesScratch_ = true;
  items.push_back({true, "batchmatmul", [=] {
                     call("libjit_batchmatmul_f32_" + isa_,
                          {ptr(dest), ptr(l), ptr(r), I64(ld[0]), I64(ld[1]), I64(ld[2]),
                           I64(rd[2]), scratch(), tid_, nth_});
                   }});
  return Error::success();
}

Error Emitter::planBatchedAdd(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *ba = cast<BatchedAddInst>(I);
  Value *dest = ba->getDest(), *b = ba->getBatch(), *s = ba->getSlice();
  auto bd = dimsOf(b);
  int64_t n = bd.empty() ? 1 : bd[0], sz = product(bd, 1);
  serial("batchedadd", [=] {
    call("libjit_batchedadd_f32", {ptr(dest), ptr(b), ptr(s), I64(n), I64(sz)});
  });
  return Error::success();
}

void registerGemmEmitters(EmitterTable &t) {
  t[InstrKind::Convolution] = &Emitter::planConv;
  t[InstrKind::FusedConvolution] = &Emitter::planConv;
  t[InstrKind::FullyConnected] = &Emitter::planFullyConnected;
  t[InstrKind::FusedFullyConnected] = &Emitter::planFusedFullyConnected;
  t[InstrKind::MatMul] = &Emitter::planMatMul;
  t[InstrKind::BatchMatMul] = &Emitter::planBatchMatMul;
  t[InstrKind::BatchedAdd] = &Emitter::planBatchedAdd;
}

} // namespace kiln::cpu
