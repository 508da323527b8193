// The convolution family on the CPU: first the choice of convolution kernel from the shape
// alone (chooseConvAlgorithm -> ConvPlan, declared in Codegen.h; pure functions, no IR, no
// LLVM), then the shapes and fused epilogues the kernels take (what CPUSupport.cpp asks of
// a Convolution or FusedConvolution node), then the emitters: convolutions (the algorithm
// the plan names: direct or transposed GEMM, strips, Winograd, depthwise) with their fused
// epilogues, and pooling (MaxPool, AvgPool, AdaptiveAvgPool).
#include "Emitter.h"

#include "kiln/Graph/FusedActivation.h"

#include "backends/CPU/libjit/libjit.h"
#include "backends/CPU/libjit/libjit_act.h"
#include "backends/CPU/libjit/libjit_gemm_config.h"

namespace kiln::cpu {

// ------------------------------------------------------------------ the choice

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Whether Winograd F(4x4, 3x3) beats the GEMM convolutions for a 3x3 stride-1
/// convolution with T = N ceil(OH / 4) ceil(OW / 4) output tiles: from 8 tiles (10x10
/// images) up, unless each tile has to pay for reading more than 36 x 8192 weights (they
/// are 4x the direct convolution's: 512 channels lose at 7x7 and 14x14, win at 28x28), and
/// not with fewer than 8 input channels (the transforms then cost more than the direct
/// sum). Measured with test/cpu:conv_bench, see the README.
bool winogradWins(const ConvShape &s) {
  int64_t tiles = s.N * ceilDiv(s.OH, 4) * ceilDiv(s.OW, 4);
  return s.C >= 8 && tiles >= 8 && s.O * s.C <= 8192 * tiles;
}

/// Whether Winograd F(2x2, 3x3) with the tiles as GEMM rows beats F(4x4, 3x3) and the
/// GEMM convolutions: on images of 32-100 F(2x2) tiles (11x11 to 20x20) with large
/// filters (O C >= 65536). There F(4x4)'s transformed weights, 4x the filter's bytes for
/// 16 tiles, are a stream memory does not serve at 2 threads, and a GEMM convolution does
/// 2.25x the multiplies of F(2x2). At 1 thread it only replaces the GEMM convolutions
/// (a tie with F(4x4) there). Not on larger images, where F(4x4) is compute-bound and does
/// fewer multiplies, nor at 7x7 or with smaller filters (ties or losses). Measured in
/// network, see the README. On images of over 100 F(2x2) tiles it takes the filters too
/// large for F(4x4)'s weight bound but within its own, whose transformed weights are 16/36
/// of F(4x4)'s per filter and spread over 4x the tiles (O C <= 8192 x F(2x2) tiles), such
/// as FCN's 3x3 2048->512 head at 28x28 (measured against the GEMM convolution: README).
bool winograd2Wins(const ConvShape &s, unsigned threads) {
  int64_t tiles = s.N * ceilDiv(s.OH, 2) * ceilDiv(s.OW, 2);
  if (s.O * s.C < 65536)
    return false;
  if (tiles > 100)
    return s.C >= 8 && !winogradWins(s) && s.O * s.C <= 8192 * tiles;
  if (tiles < 32)
    return false;
  return threads > 1 || !winogradWins(s);
}

/// Whether Winograd F(4x4, 3x3) with the tiles as GEMM rows beats the tiles-as-columns
/// kernel: where the columns kernel pads the N ceil(OH / 4) ceil(OW / 4) tiles to whole
/// 16-column vectors by 5% or more (10% on AVX2) and the tiles fill three row tiles of
/// \p MR rows. Not where the tiles fill the vectors (112x112 and up) nor with 16 tiles
/// (13x13, 14x14: the 2-row remainder tile). Measured, see the README.
bool winogradRowsWins(const ConvShape &s, int64_t MR, bool avx512) {
  int64_t tiles = s.N * ceilDiv(s.OH, 4) * ceilDiv(s.OW, 4);
  double fill = double(tiles) / double(ceilDiv(tiles, 16) * 16);
  return tiles >= 3 * MR && fill < (avx512 ? 0.95 : 0.9);
}

/// Where F(2x2, 3x3), the only Winograd kernel within the error budget (README,
/// "Accuracy"), is taken by default: wherever the rules above take a Winograd kernel, and
/// on images of 16-31 F(2x2) tiles (7x7 to 10x10) with large filters (O C >= 65536), where
/// they take a direct kernel, such as resnet50's 7x7 512->512 layers (measured against the
/// transposed GEMM: README).
bool winograd2AccurateWins(const ConvShape &s, unsigned threads) {
  if (winograd2Wins(s, threads) || winogradWins(s))
    return true;
  int64_t tiles = s.N * ceilDiv(s.OH, 2) * ceilDiv(s.OW, 2);
  return s.C >= 8 && tiles >= 16 && tiles < 32 && s.O * s.C >= 65536;
}

/// The share of the strip kernel's column vectors that \p pixels fill: whole strips of
/// kStripVectors vectors, then the remainder in whole vectors.
double stripFill(int64_t pixels, bool avx512) {
  int64_t vector = avx512 ? 16 : 8, strip = vector * libjit::kStripVectors;
  return double(pixels) /
         double(pixels / strip * strip + ceilDiv(pixels % strip, vector) * vector);
}

/// The share of the NR-column GEMM panels that \p pixels fill.
double panelFill(int64_t pixels, bool avx512) {
  int64_t NR = avx512 ? libjit::GemmAvx512::NR : libjit::GemmAvx2::NR;
  return double(pixels) / double(ceilDiv(pixels, NR) * NR);
}

/// Whether the strip kernel's im2col block of one strip (K rows of kStripVectors vectors)
/// fits the per-thread GEMM scratch it works in, on both instruction sets (K <= 9904;
/// libjit.h).
bool stripFitsScratch(int64_t K) {
  return K * libjit::kStripVectors * libjit::GemmAvx512::VW + 64 <=
             libjit::gemmScratchFloats<libjit::GemmAvx512>() &&
         K * libjit::kStripVectors * libjit::GemmAvx2::VW + 64 <=
             libjit::gemmScratchFloats<libjit::GemmAvx2>();
}

/// Whether the grouped kernel can compute \p s: groups of at most kGroupedMaxWidth
/// channels on either side (depthwise ones too, which it takes when they add a residual),
/// weights packed at compile time.
bool groupedApplies(const ConvShape &s) {
  if (s.group <= 1 || s.C % s.group || s.O % s.group || !s.constantWeights)
    return false;
  return s.C / s.group <= kGroupedMaxWidth && s.O / s.group <= kGroupedMaxWidth;
}

/// The weight layout of \p a's kernel.
WeightPacking packingOf(ConvAlgorithm a) {
  switch (a) {
  case ConvAlgorithm::Depthwise:
  case ConvAlgorithm::Strip:
    return WeightPacking::None;
  case ConvAlgorithm::Grouped:
    return WeightPacking::GroupedTaps;
  case ConvAlgorithm::WinogradRows2:
    return WeightPacking::WinogradRows2x2;
  case ConvAlgorithm::WinogradRows4:
    return WeightPacking::WinogradRows4x4;
  case ConvAlgorithm::Winograd:
    return WeightPacking::Winograd4x4;
  case ConvAlgorithm::Transposed:
    return WeightPacking::GemmBTransposed;
  case ConvAlgorithm::PackedGemm:
    return WeightPacking::GemmA;
  }
  return WeightPacking::GemmA;
}

constexpr ConvAlgorithm kAllAlgorithms[] = {
    ConvAlgorithm::Depthwise,  ConvAlgorithm::Grouped,       ConvAlgorithm::WinogradRows2,
    ConvAlgorithm::WinogradRows4,
    ConvAlgorithm::Winograd,   ConvAlgorithm::Transposed,    ConvAlgorithm::Strip,
    ConvAlgorithm::PackedGemm,
};

} // namespace

bool convAlgorithmApplies(ConvAlgorithm a, const ConvShape &s) {
  switch (a) {
  case ConvAlgorithm::Depthwise:
    return s.group > 1 && s.group == s.C && s.O == s.C && !s.residualAdd;
  case ConvAlgorithm::Grouped:
    return groupedApplies(s);
  case ConvAlgorithm::WinogradRows2:
  case ConvAlgorithm::WinogradRows4:
  case ConvAlgorithm::Winograd:
    return s.group == 1 && s.constantWeights && s.KH == 3 && s.KW == 3 && s.SH == 1 &&
           s.SW == 1 && s.DH == 1 && s.DW == 1;
  case ConvAlgorithm::Transposed:
    return s.group == 1 && s.constantWeights;
  case ConvAlgorithm::Strip:
    return s.group == 1 && stripFitsScratch(s.C * s.KH * s.KW);
  case ConvAlgorithm::PackedGemm:
    return true;
  }
  return false;
}

std::optional<ConvAlgorithm> parseConvAlgorithmName(const std::string &name) {
  for (ConvAlgorithm a : kAllAlgorithms)
    if (name == convAlgorithmName(a))
      return a;
  return std::nullopt;
}

ConvPlan chooseConvAlgorithm(const ConvShape &s, Isa isa, unsigned threads,
                             const ConvAlgorithmSet &allowed) {
  const bool avx512 = isa == Isa::Avx512;
  if (allowed.force && convAlgorithmApplies(*allowed.force, s))
    return {*allowed.force, packingOf(*allowed.force)};
  // Depthwise: its own kernel, which has no residual operand.
  if (s.group > 1 && s.group == s.C && s.O == s.C && !s.residualAdd)
    return {ConvAlgorithm::Depthwise, WeightPacking::None};
  // Other grouped convolutions with narrow groups: one kernel over the groups (the packed
  // GEMM pads each group's few output channels to whole register tiles).
  if (groupedApplies(s))
    return {ConvAlgorithm::Grouped, WeightPacking::GroupedTaps};

  // Winograd for 3x3 stride-1 layers with weights to transform at compile time.
  bool winograd3x3 = s.group == 1 && s.constantWeights && allowed.winograd && s.KH == 3 &&
                     s.KW == 3 && s.SH == 1 && s.SW == 1 && s.DH == 1 && s.DW == 1;
  // By default only F(2x2, 3x3), whose error stays within the budget of the README's
  // "Accuracy" (F(4x4)'s is 6-11x a direct convolution's: 100-layer networks leave
  // BENCH.md's tolerance), on the shapes where a Winograd kernel is the fastest.
  if (winograd3x3 && !allowed.fastWinograd) {
    if (winograd2AccurateWins(s, threads))
      return {ConvAlgorithm::WinogradRows2, WeightPacking::WinogradRows2x2};
  } else if (winograd3x3) {
    if (winograd2Wins(s, threads))
      return {ConvAlgorithm::WinogradRows2, WeightPacking::WinogradRows2x2};
    if (winogradWins(s)) {
      int64_t MR = avx512 ? libjit::GemmAvx512::MR : libjit::GemmAvx2::MR;
      if (winogradRowsWins(s, MR, avx512))
        return {ConvAlgorithm::WinogradRows4, WeightPacking::WinogradRows4x4};
      return {ConvAlgorithm::Winograd, WeightPacking::Winograd4x4};
    }
  }

  // The strip kernel reads the filter as it is: group 1, reductions up to K = 1152, and on
  // AVX-512 kernels with taps (read through tap planes, no im2col copy) up to K = 2304
  // (on AVX2 the transposed GEMM won at K = 2304).
  int64_t K = (s.C / s.group) * s.KH * s.KW;
  int64_t pixels = s.OH * s.OW;
  bool taps = avx512 && (s.KH > 1 || s.KW > 1);
  bool strip = s.group == 1 && (K <= 1152 || (taps && K <= 2304));
  // Pointwise layers whose pixels fill the strip's vectors well (13x13 and up) read the
  // input as it is and take the strip kernel before the transposed GEMM (faster at 13x13
  // and 14x14, a tie at K = 1024, slower at 7x7).
  bool pointwise = s.KH == 1 && s.KW == 1 && s.SH == 1 && s.SW == 1 && s.PT == 0 &&
                   s.PL == 0 && s.OH == s.H && s.OW == s.W;
  if (strip && pointwise && stripFill(pixels, avx512) >= 0.9)
    return {ConvAlgorithm::Strip, WeightPacking::None};

  // Small images fill the NR-column panels of the pixel dimension badly: compute those
  // transposed, pixels as rows, when the transposed result fits an 8 MB scratch. Where
  // it applies it comes before the strip kernel also for strided layers with taps, since
  // it prefetches its weight panels (see the README).
  if (s.group == 1 && s.constantWeights && allowed.transposed && panelFill(pixels, avx512) < 0.92 &&
      uint64_t(pixels * s.O) * 4 <= (8u << 20))
    return {ConvAlgorithm::Transposed, WeightPacking::GemmBTransposed};
  if (strip)
    return {ConvAlgorithm::Strip, WeightPacking::None};
  return {ConvAlgorithm::PackedGemm, WeightPacking::GemmA};
}

const char *convAlgorithmName(ConvAlgorithm a) {
  switch (a) {
  case ConvAlgorithm::Depthwise:
    return "conv_dw";
  case ConvAlgorithm::Grouped:
    return "conv_grp";
  case ConvAlgorithm::WinogradRows2:
    return "conv_wino2";
  case ConvAlgorithm::WinogradRows4:
    return "conv_wino4r";
  case ConvAlgorithm::Winograd:
    return "conv_wino";
  case ConvAlgorithm::Transposed:
    return "convT";
  case ConvAlgorithm::Strip:
    return "convS";
  case ConvAlgorithm::PackedGemm:
    return "conv";
  }
  return "conv";
}

// ------------------------------------------------------------------ what the kernels take

bool epilogueRunsFused(const std::string &act, bool fuseSigmoids) {
  std::optional<FusedActivation> a = parseFusedActivation(act);
  bool sigmoidLike = a == FusedActivation::Sigmoid || a == FusedActivation::Tanh ||
                     a == FusedActivation::Swish;
  return fuseSigmoids || !sigmoidLike;
}

bool convolutionSupported(const Node &n, bool fuseEpilogues, bool fuseSigmoids) {
  auto rank = [&n](unsigned i) { return n.getNthInput(i).dims().size(); };
  if (rank(0) != 4 || rank(1) != 4)
    return false;
  auto *c = dyn_cast<FusedConvolutionNode>(&n);
  if (!c)
    return true;
  // The kernels' epilogue: a residual and/or any activation the type rule admits
  // (libjit_act.h). The depthwise kernel has no residual.
  const Type &in = *c->getInput().getType(), &out = *c->getType(0);
  bool depthwise = c->getGroup() > 1 && c->getGroup() == in.dims[1] && out.dims[1] == in.dims[1];
  return fuseEpilogues && !(depthwise && !c->getResidual().empty()) &&
         epilogueRunsFused(c->getActivation(), fuseSigmoids);
}

// ------------------------------------------------------------------ the emission

bool activationCode(const std::string &act, float alpha, float beta, FusedEpilogue &epi) {
  epi.lo = alpha, epi.hi = beta;
  if (act.empty()) {
    epi.act = libjit::ActNone;
    return true;
  }
  std::optional<FusedActivation> a = parseFusedActivation(act);
  if (!a)
    return false;
  switch (*a) {
  case FusedActivation::None:
    epi.act = libjit::ActNone;
    break;
  case FusedActivation::Relu:
    epi.act = libjit::ActClamp, epi.lo = 0.0f, epi.hi = INFINITY;
    break;
  case FusedActivation::Clip:
    epi.act = libjit::ActClamp;
    break;
  case FusedActivation::LeakyRelu:
    epi.act = libjit::ActLeakyRelu;
    break;
  case FusedActivation::Sigmoid:
    epi.act = libjit::ActSigmoid;
    break;
  case FusedActivation::Tanh:
    epi.act = libjit::ActTanh;
    break;
  case FusedActivation::Swish:
    epi.act = libjit::ActSwish;
    break;
  case FusedActivation::HardSwish:
    epi.act = libjit::ActHardSwish;
    break;
  case FusedActivation::HardSigmoid:
    epi.act = libjit::ActHardSigmoid;
    break;
  case FusedActivation::Gelu:
    epi.act = libjit::ActGelu;
    break;
  case FusedActivation::GeluTanh:
    epi.act = libjit::ActGeluTanh;
    break;
  }
  return true;
}

Error Emitter::planConv(Instruction *I, std::vector<Item> &items) {
  // The fused epilogue and the convolution's attributes.
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
  auto *cw = dyn_cast<WeightVar>(filter);
  ConvShape s;
  s.N = id[0], s.C = id[1], s.H = id[2], s.W = id[3];
  s.O = od[1], s.OH = od[2], s.OW = od[3];
  s.KH = kernels[0], s.KW = kernels[1], s.SH = strides[0], s.SW = strides[1];
  s.PT = pads[0], s.PL = pads[1];
  s.DH = dilations.size() ? dilations[0] : 1;
  s.DW = dilations.size() > 1 ? dilations[1] : 1;
  s.group = G;
  s.constantWeights = cw && cw->isConstant();
  s.residualAdd = epi.add != nullptr;
  ConvPlan plan = chooseConvAlgorithm(s, avx512_ ? Isa::Avx512 : Isa::Avx2, opts_.threads,
                                      {opts_.winograd, opts_.transposedConv, opts_.fastWinograd,
                                       opts_.forceConv});
  return emitConv(plan, s, epi, dest, in, filter, bias, items);
}

namespace {

/// A convolution's name in profiles: its algorithm and shape ("convS 3x3/1 64->64 56x56").
std::string convLabel(const ConvPlan &plan, const ConvShape &s, const FusedEpilogue &epi) {
  const int64_t KH = s.KH, KW = s.KW, SH = s.SH, C = s.C, O = s.O, H = s.H, W = s.W,
                G = s.group;
  std::string desc = std::to_string(KH) + "x" + std::to_string(KW) + "/" + std::to_string(SH) +
                     " " + std::to_string(C) + "->" + std::to_string(O) + " " +
                     std::to_string(H) + "x" + std::to_string(W) + (G > 1 ? " g" + std::to_string(G) : "") +
                     (epi.add ? " +add" : "");
  return std::string(convAlgorithmName(plan.algorithm)) + " " + desc;
}

} // namespace

Error Emitter::emitConv(const ConvPlan &plan, const ConvShape &s, const FusedEpilogue &epi,
                        Value *dest, Value *in, Value *filter, Value *bias,
                        std::vector<Item> &items) {
  const int64_t N = s.N, C = s.C, H = s.H, W = s.W, O = s.O, OH = s.OH, OW = s.OW;
  const int64_t KH = s.KH, KW = s.KW, SH = s.SH, SW = s.SW, PT = s.PT, PL = s.PL, DH = s.DH,
                DW = s.DW, G = s.group;
  std::string label = convLabel(plan, s, epi);
  auto *cw = dyn_cast<WeightVar>(filter);
  Value *residual = epi.add;
  switch (plan.algorithm) {
  case ConvAlgorithm::Depthwise:
    needPoolScratch(libjit_conv2d_dw_scratch_floats(H, W, OH, OW, KH, KW, SH, SW, DH, DW));
    items.push_back({true, label, [=] {
                       call("libjit_conv2d_dw_f32",
                            {ptr(dest), ptr(in), ptr(filter), ptr(bias), I64(N), I64(C), I64(H),
                             I64(W), I64(OH), I64(OW), I64(KH), I64(KW), I64(SH), I64(SW),
                             I64(PT), I64(PL), I64(DH), I64(DW), I64(epi.act), F32(epi.lo),
                             F32(epi.hi), scratch(), tid_, nth_});
                     }});
    return Error::success();
  case ConvAlgorithm::Grouped: {
    int64_t Og = O / G, Cg = C / G;
    KILN_ASSIGN_OR_RETURN(uint64_t off, constPacked(cw, plan.packing, G, Og, Cg * KH * KW));
    Location wl{kConstantBase, off};
    needPoolScratch(libjit_conv2d_grouped_scratch_floats(Cg, Og, OH, OW, KH, KW, SH, SW, DH, DW));
    items.push_back({true, label, [=] {
                       call("libjit_conv2d_grouped_f32_" + isa_,
                            {ptr(dest), ptr(in), at(wl), ptr(bias),
                             residual ? ptr(residual) : nullPtr(), I64(N), I64(C), I64(H), I64(W),
                             I64(O), I64(OH), I64(OW), I64(KH), I64(KW), I64(SH), I64(SW),
                             I64(PT), I64(PL), I64(DH), I64(DW), I64(G), I64(epi.act),
                             F32(epi.lo), F32(epi.hi), scratch(), tid_, nth_});
                     }});
    return Error::success();
  }
  case ConvAlgorithm::WinogradRows2:
  case ConvAlgorithm::WinogradRows4:
  case ConvAlgorithm::Winograd:
    return emitWinogradConv(plan, s, epi, label, dest, in, filter, bias, items);
  case ConvAlgorithm::Transposed: {
    int64_t P = OH * OW, K = (C / G) * KH * KW;
    KILN_ASSIGN_OR_RETURN(uint64_t off, constPacked(cw, plan.packing, 1, K, O));
    Location wtl{kConstantBase, off};
    tScratchBytes_ = std::max<uint64_t>(tScratchBytes_, alignUp(uint64_t(P * O) * 4));
    usesScratch_ = true;
    items.push_back({true, label, [=] {
                       call("libjit_conv2d_t_f32_" + isa_,
                            {ptr(dest), ptr(in), at(wtl), ptr(bias),
                             residual ? ptr(residual) : nullPtr(), I64(N), I64(C), I64(H), I64(W),
                             I64(O), I64(OH), I64(OW), I64(KH), I64(KW), I64(SH), I64(SW),
                             I64(PT), I64(PL), I64(DH), I64(DW), I64(epi.act), F32(epi.lo),
                             F32(epi.hi), tScratch(), scratch(), tid_, nth_});
                     }});
    return Error::success();
  }
  case ConvAlgorithm::Strip:
    usesScratch_ = true;
    items.push_back({true, label, [=] {
                       call("libjit_conv2d_strip_f32_" + isa_,
                            {ptr(dest), ptr(in), ptr(filter), ptr(bias),
                             residual ? ptr(residual) : nullPtr(), I64(N), I64(C), I64(H), I64(W),
                             I64(O), I64(OH), I64(OW), I64(KH), I64(KW), I64(SH), I64(SW),
                             I64(PT), I64(PL), I64(DH), I64(DW), I64(epi.act), F32(epi.lo),
                             F32(epi.hi), scratch(), tid_, nth_});
                     }});
    return Error::success();
  case ConvAlgorithm::PackedGemm:
    break;
  }
  return emitPackedGemmConv(plan, s, epi, label, dest, in, filter, bias, items);
}

Error Emitter::emitWinogradConv(const ConvPlan &plan, const ConvShape &s,
                                const FusedEpilogue &epi, const std::string &label,
                                Value *dest, Value *in, Value *filter, Value *bias,
                                std::vector<Item> &items) {
  const int64_t N = s.N, C = s.C, H = s.H, W = s.W, O = s.O, OH = s.OH, OW = s.OW;
  const int64_t PT = s.PT, PL = s.PL;
  auto *cw = dyn_cast<WeightVar>(filter);
  Value *residual = epi.add;
  KILN_ASSIGN_OR_RETURN(uint64_t off, constPacked(cw, plan.packing, 1, O, C));
  Location wl{kConstantBase, off};
  if (plan.algorithm == ConvAlgorithm::Winograd) {
    needPoolScratch(avx512_ ? libjit_conv2d_wino_scratch_floats_avx512(N, C, H, W, O, OH, OW)
                            : libjit_conv2d_wino_scratch_floats_avx2(N, C, H, W, O, OH, OW));
    items.push_back({true, label, [=] {
                       call("libjit_conv2d_wino_f32_" + isa_,
                            {ptr(dest), ptr(in), at(wl), ptr(bias),
                             residual ? ptr(residual) : nullPtr(), I64(N), I64(C), I64(H), I64(W),
                             I64(O), I64(OH), I64(OW), I64(PT), I64(PL), I64(epi.act),
                             F32(epi.lo), F32(epi.hi), scratch(), tid_, nth_});
                     }});
    return Error::success();
  }
  // The tiles as GEMM rows: F(2x2, 3x3) or F(4x4, 3x3).
  int64_t tile = plan.algorithm == ConvAlgorithm::WinogradRows2 ? 2 : 4;
  needPoolScratch(avx512_
                      ? libjit_conv2d_wino_rows_scratch_floats_avx512(tile, N, C, H, W, O, OH, OW)
                      : libjit_conv2d_wino_rows_scratch_floats_avx2(tile, N, C, H, W, O, OH, OW));
  items.push_back({true, label, [=] {
                     call("libjit_conv2d_wino_rows" + std::to_string(tile) + "_f32_" + isa_,
                          {ptr(dest), ptr(in), at(wl), ptr(bias),
                           residual ? ptr(residual) : nullPtr(), I64(N), I64(C), I64(H), I64(W),
                           I64(O), I64(OH), I64(OW), I64(PT), I64(PL), I64(epi.act),
                           F32(epi.lo), F32(epi.hi), scratch(), tid_, nth_});
                   }});
  return Error::success();
}

Error Emitter::emitPackedGemmConv(const ConvPlan &plan, const ConvShape &s,
                                  const FusedEpilogue &epi, const std::string &label,
                                  Value *dest, Value *in, Value *filter, Value *bias,
                                  std::vector<Item> &items) {
  const int64_t N = s.N, C = s.C, H = s.H, W = s.W, O = s.O, OH = s.OH, OW = s.OW;
  const int64_t KH = s.KH, KW = s.KW, SH = s.SH, SW = s.SW, PT = s.PT, PL = s.PL, DH = s.DH,
                DW = s.DW, G = s.group;
  auto *cw = dyn_cast<WeightVar>(filter);
  Value *residual = epi.add;
  // The packed GEMM: weights packed at compile time, or per run when computed at run time.
  int64_t Og = O / G, K = (C / G) * KH * KW;
  Location wl;
  if (s.constantWeights) {
    KILN_ASSIGN_OR_RETURN(uint64_t off, constPacked(cw, plan.packing, G, Og, K));
    wl = {kConstantBase, off};
  } else {
    int64_t per = avx512_ ? libjit::packedAFloats<libjit::GemmAvx512>(Og, K)
                          : libjit::packedAFloats<libjit::GemmAvx2>(Og, K);
    wl = {kActivationBase, reserveExtra(per * G * 4)};
    items.push_back({false, "pack", [=] {
                       for (int64_t g = 0; g < G; g++)
                         call("libjit_pack_a_f32_" + isa_,
                              {at({wl.base, wl.offset + uint64_t(g * per * 4)}),
                               B_.CreateConstInBoundsGEP1_64(i8_, ptr(filter), uint64_t(g * Og * K * 4)),
                               I64(Og), I64(K), I64(K)});
                     }});
  }
  usesScratch_ = true;
  items.push_back({true, label, [=] {
                     call("libjit_conv2d_f32_" + isa_,
                          {ptr(dest), ptr(in), at(wl), ptr(bias),
                           residual ? ptr(residual) : nullPtr(), I64(N), I64(C), I64(H), I64(W),
                           I64(O), I64(OH), I64(OW), I64(KH), I64(KW), I64(SH), I64(SW),
                           I64(PT), I64(PL), I64(DH), I64(DW), I64(G), I64(epi.act),
                           F32(epi.lo), F32(epi.hi), scratch(), tid_, nth_});
                   }});
  return Error::success();
}

/// MaxPool and AvgPool.
Error Emitter::planPool(Instruction *I, std::vector<Item> &items) {
  bool isMax = I->getKind() == InstrKind::MaxPool;
  Value *dest = I->getOperand(0).first, *in = I->getOperand(1).first;
  auto id = dimsOf(in), od = dimsOf(dest);
  std::vector<dim_t> k, s, p;
  bool cip = false;
  if (isMax) {
    auto *mp = cast<MaxPoolInst>(I);
    k = mp->getKernels(), s = mp->getStrides(), p = mp->getPads();
  } else {
    auto *ap = cast<AvgPoolInst>(I);
    k = ap->getKernels(), s = ap->getStrides(), p = ap->getPads();
    cip = ap->getCountIncludePads();
  }
  if (id.size() != 4 || k.size() != 2)
    return makeError(ErrorCode::Unsupported, "CPU backend: only 2-D pooling");
  ElemKind ek = in->getType()->kind;
  if (isMax && isIndexKind(ek)) {
    // Integer MaxPool: a plain kernel per kind, no scratch.
    std::string fn = std::string("libjit_maxpool_") + kindSuffix(ek);
    items.push_back({true, "maxpool", [=] {
                       call(fn, {ptr(dest), ptr(in), I64(id[0]), I64(id[1]), I64(id[2]),
                                 I64(id[3]), I64(od[2]), I64(od[3]), I64(k[0]), I64(k[1]),
                                 I64(s[0]), I64(s[1]), I64(p[0]), I64(p[1]), tid_, nth_});
                     }});
    return Error::success();
  }
  needPoolScratch(libjit_pool_scratch_floats(id[2], id[3], od[2], od[3], k[0], k[1], s[0],
                                             s[1], 1, 1));
  items.push_back({true, isMax ? "maxpool" : "avgpool", [=] {
                     std::vector<llvm::Value *> args = {
                         ptr(dest), ptr(in), I64(id[0]), I64(id[1]), I64(id[2]), I64(id[3]),
                         I64(od[2]), I64(od[3]), I64(k[0]), I64(k[1]), I64(s[0]), I64(s[1]),
                         I64(p[0]), I64(p[1])};
                     if (!isMax)
                       args.push_back(I64(cip));
                     args.push_back(scratch());
                     args.push_back(tid_);
                     args.push_back(nth_);
                     call(isMax ? "libjit_maxpool_f32" : "libjit_avgpool_f32", args);
                   }});
  return Error::success();
}

Error Emitter::planAdaptiveAvgPool(Instruction *I, std::vector<Item> &items) {
  Value *dest = I->getOperand(0).first, *in = I->getOperand(1).first;
  auto id = dimsOf(in), od = dimsOf(dest);
  items.push_back({true, "adaptiveavgpool", [=] {
                     call("libjit_adaptive_avgpool_f32",
                          {ptr(dest), ptr(in), I64(id[0]), I64(id[1]), I64(id[2]), I64(id[3]),
                           I64(od[2]), I64(od[3]), tid_, nth_});
                   }});
  return Error::success();
}

void registerConvEmitters(EmitterTable &t) {
  t[InstrKind::Convolution] = &Emitter::planConv;
  t[InstrKind::FusedConvolution] = &Emitter::planConv;
  t[InstrKind::MaxPool] = &Emitter::planPool;
  t[InstrKind::AvgPool] = &Emitter::planPool;
  t[InstrKind::AdaptiveAvgPool] = &Emitter::planAdaptiveAvgPool;
}

} // namespace kiln::cpu
