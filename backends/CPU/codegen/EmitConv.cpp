// The convolution family on the CPU: first the choice of convolution kernel from the shape
// alone (chooseConvAlgorithm -> ConvPlan, declared in Codegen.h: the fastest candidate of
// the cost model in ConvCost.h; pure functions, no IR, no LLVM), then the shapes and fused epilogues the kernels take (what CPUSupport.cpp asks of
// a Convolution or FusedConvolution node), then the emitters: convolutions (the algorithm
// the plan names: direct or transposed GEMM, strips, Winograd, depthwise) with their fused
// epilogues, and pooling (MaxPool, AvgPool, AdaptiveAvgPool).
#include "ConvCost.h"
#include "Emitter.h"

#include "kiln/Graph/FusedActivation.h"

#include "backends/CPU/libjit/libjit.h"
#include "backends/CPU/libjit/libjit_act.h"
#include "backends/CPU/libjit/libjit_gemm_config.h"

namespace kiln::cpu {

// ------------------------------------------------------------------ the choice

namespace {

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

std::optional<ConvPhases> dilationPhases(const ConvShape &s) {
  if (s.SH != 1 || s.SW != 1 || s.DH * s.DW <= 1 || s.DH > kMaxPhaseDilation ||
      s.DW > kMaxPhaseDilation || s.residualAdd || s.PT < 0 || s.PL < 0)
    return std::nullopt;
  ConvPhases p;
  p.DH = s.DH, p.DW = s.DW, p.eH = s.PT % s.DH, p.eW = s.PL % s.DW;
  ConvShape &q = p.shape;
  q = s;
  q.N = s.N * s.DH * s.DW;
  q.H = (s.H + p.eH + s.DH - 1) / s.DH, q.W = (s.W + p.eW + s.DW - 1) / s.DW;
  q.OH = (s.OH + s.DH - 1) / s.DH, q.OW = (s.OW + s.DW - 1) / s.DW;
  q.PT = s.PT / s.DH, q.PL = s.PL / s.DW;
  q.DH = q.DW = 1;
  return p;
}

namespace {

/// The best-ranked kernel over \p s's dilation phases \p ph, where its estimate plus the
/// split and merge is below \p wholeSeconds (the best of \p s as it is).
std::optional<ConvPlan> phasesPlan(const ConvShape &s, const ConvPhases &ph, Isa isa,
                                   unsigned threads, const ConvAlgorithmSet &allowed,
                                   double wholeSeconds) {
  std::vector<ConvCost> split = rankConvAlgorithms(ph.shape, isa, threads, allowed);
  if (split.empty() ||
      split.front().seconds + dilationPhaseCopySeconds(s, ph, threads, allowed.machine) >=
          wholeSeconds)
    return std::nullopt;
  return ConvPlan{split.front().algorithm, packingOf(split.front().algorithm), ph};
}

} // namespace

ConvPlan chooseConvAlgorithm(const ConvShape &s, Isa isa, unsigned threads,
                             const ConvAlgorithmSet &allowed) {
  std::optional<ConvPhases> phases = dilationPhases(s);
  if (allowed.force) {
    ConvAlgorithm f = *allowed.force;
    if (convAlgorithmApplies(f, s))
      return {f, packingOf(f)};
    if (phases && convAlgorithmApplies(f, phases->shape))
      return {f, packingOf(f), phases};
  }
  // The candidate ranked first (ConvCost.h: the least estimated time among those whose
  // layouts pay for the bytes they hold beyond the filter): the packed GEMM applies to
  // every shape, so there is always one.
  std::vector<ConvCost> ranked = rankConvAlgorithms(s, isa, threads, allowed);
  ConvAlgorithm best = ranked.empty() ? ConvAlgorithm::PackedGemm : ranked.front().algorithm;
  if (phases && !ranked.empty())
    if (std::optional<ConvPlan> p =
            phasesPlan(s, *phases, isa, threads, allowed, ranked.front().seconds))
      return *p;
  return {best, packingOf(best)};
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

Expected<ConvShape> Emitter::convShapeOf(Instruction *I, FusedEpilogue &epi) {
  std::vector<dim_t> kernels, strides, pads, dilations;
  int64_t G;
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
        *filter = I->getOperand(2).first;
  auto id = dimsOf(in), od = dimsOf(dest);
  if (id.size() != 4 || kernels.size() != 2)
    return makeError(ErrorCode::Unsupported, "CPU backend: only 2-D convolutions (",
                     I->getKindName(), " '", I->getName(), "', input ",
                     in->getType()->toString(), ")");
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
  return s;
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

Error Emitter::planConv(Instruction *I, std::vector<Item> &items) {
  if (isa<FusedConvolutionInst>(I) && I->getOperand(1).first->getType()->kind == ElemKind::Int8Q)
    return planQuantConv(I, items); // a fused int8 Relu / Clip (EmitQuantConv.cpp)
  if (I->getOperand(0).first->getType()->kind == ElemKind::BFloat16)
    return planConvBf16(I, items); // native bf16 (EmitBf16.cpp)
  FusedEpilogue epi;
  KILN_ASSIGN_OR_RETURN(ConvShape s, convShapeOf(I, epi));
  Value *dest = I->getOperand(0).first, *in = I->getOperand(1).first,
        *filter = I->getOperand(2).first, *bias = I->getOperand(3).first;
  ConvPlan plan = chooseConvAlgorithm(s, avx512_ ? Isa::Avx512 : Isa::Avx2, opts_.threads,
                                      {opts_.winograd, opts_.transposedConv, opts_.fastWinograd,
                                       opts_.forceConv, opts_.convMachine});
  // half-weights=all: every convolution whose weights are float16 values takes a kernel
  // that holds them so (the transposed one stays, the others take the packed GEMM), but
  // depthwise ones (their weights are small).
  if (opts_.halfWeightsAllConvs && s.constantWeights &&
      plan.algorithm != ConvAlgorithm::Depthwise && plan.algorithm != ConvAlgorithm::PackedGemm &&
      plan.algorithm != ConvAlgorithm::Transposed && storesHalf(dyn_cast<WeightVar>(filter)))
    plan = ConvPlan{};
  if (plan.phases)
    return emitConvPhases(I, plan, s, epi, dest, in, filter, bias, items);
  KILN_ASSIGN_OR_RETURN(Location dl, loc(dest));
  KILN_ASSIGN_OR_RETURN(Location il, loc(in));
  return emitConv(plan, s, epi, dl, il, filter, bias, items);
}

Error Emitter::emitConvPhases(Instruction *I, const ConvPlan &plan, const ConvShape &s,
                              const FusedEpilogue &epi, Value *dest, Value *in, Value *filter,
                              Value *bias, std::vector<Item> &items) {
  const ConvPhases p = *plan.phases;
  const ConvShape &q = p.shape;
  // One buffer for every split layer (stages run one at a time): the split input, then
  // the phases' results.
  const uint64_t inBytes = alignUp(uint64_t(q.N * q.C * q.H * q.W) * 4);
  const uint64_t outBytes = alignUp(uint64_t(q.N * q.O * q.OH * q.OW) * 4);
  phaseScratchBytes_ = std::max(phaseScratchBytes_, inBytes + outBytes);
  const Location pin{kPhaseScratchBase, 0}, pout{kPhaseScratchBase, inBytes};
  const double inFloats = double(s.N * s.C * s.H * s.W), outFloats = double(s.N * s.O * s.OH * s.OW);
  items.push_back({true, "conv_phase_split", [=] {
                     call("libjit_conv_phase_split_f32",
                          {at(pin), ptr(in), I64(s.N), I64(s.C), I64(s.H), I64(s.W), I64(p.DH),
                           I64(p.DW), I64(p.eH), I64(p.eW), I64(q.H), I64(q.W), tid_, nth_});
                   },
                   StageWork{0, 4.0 * (inFloats + double(q.N * q.C * q.H * q.W))}});
  ConvPlan inner = plan;
  inner.phases.reset();
  KILN_RETURN_IF_ERR(emitConv(inner, q, epi, pout, pin, filter, bias, items));
  // The kernel's item (the last one emitConv pushed) does the instruction's arithmetic;
  // its name says it runs on the phases of the dilated layer.
  items.back().name = convLabel(plan, s, epi) + " d" + std::to_string(s.DH) + "x" +
                      std::to_string(s.DW) + " phases";
  items.back().work = stageWork({I});
  items.push_back({true, "conv_phase_merge", [=] {
                     call("libjit_conv_phase_merge_f32",
                          {ptr(dest), at(pout), I64(s.N), I64(s.O), I64(s.OH), I64(s.OW),
                           I64(p.DH), I64(p.DW), I64(q.OH), I64(q.OW), tid_, nth_});
                   },
                   StageWork{0, 4.0 * (outFloats + double(q.N * q.O * q.OH * q.OW))}});
  return Error::success();
}


Error Emitter::emitConv(const ConvPlan &plan, const ConvShape &s, const FusedEpilogue &epi,
                        Location dest, Location in, Value *filter, Value *bias,
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
                            {at(dest), at(in), ptr(filter), ptr(bias), I64(N), I64(C), I64(H),
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
                            {at(dest), at(in), at(wl), ptr(bias),
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
    // float16 weights are widened where the kernel would keep its zero-padded copy of the
    // input (kernels with taps at stride 1 or 2), which it then goes without: held as
    // float16 where it keeps no copy anyway, and with half-weights=all everywhere.
    const bool padsInput = (KH > 1 || KW > 1) && (SW == 1 || SW == 2);
    const bool half = (!padsInput || opts_.halfWeightsAllConvs) && storesHalf(cw);
    Expected<uint64_t> off = half ? constPackedHalf(cw, WeightPacking::GemmBTransposedHalf, 1, K, O)
                                  : constPacked(cw, plan.packing, 1, K, O);
    if (!off)
      return off.takeError();
    Location wtl{kConstantBase, *off};
    tScratchBytes_ = std::max<uint64_t>(tScratchBytes_, alignUp(uint64_t(P * O) * 4));
    usesScratch_ = true;
    const std::string kernel = (half ? "libjit_conv2d_t_f16w_" : "libjit_conv2d_t_f32_") + isa_;
    items.push_back({true, half ? label + " f16w" : label, [=] {
                       call(kernel,
                            {at(dest), at(in), at(wtl), ptr(bias),
                             residual ? ptr(residual) : nullPtr(), I64(N), I64(C), I64(H), I64(W),
                             I64(O), I64(OH), I64(OW), I64(KH), I64(KW), I64(SH), I64(SW),
                             I64(PT), I64(PL), I64(DH), I64(DW), I64(epi.act), F32(epi.lo),
                             F32(epi.hi), tScratch(), scratch(), tid_, nth_});
                     }});
    return Error::success();
  }
  case ConvAlgorithm::Strip: {
    usesScratch_ = true;
    // A constant filter is read as it is, from its copy in the arena. Copied here, while
    // the instruction is planned, release-constants frees the graph's copy as it does a
    // packed filter's; copied when the stage is emitted, it was held twice to the end.
    std::optional<Location> fl;
    if (cw && cw->isConstant()) {
      KILN_ASSIGN_OR_RETURN(uint64_t off, constRaw(cw));
      fl = Location{kConstantBase, off};
      releaseIfPacked(cw);
    }
    items.push_back({true, label, [=] {
                       call("libjit_conv2d_strip_f32_" + isa_,
                            {at(dest), at(in), fl ? at(*fl) : ptr(filter), ptr(bias),
                             residual ? ptr(residual) : nullPtr(), I64(N), I64(C), I64(H), I64(W),
                             I64(O), I64(OH), I64(OW), I64(KH), I64(KW), I64(SH), I64(SW),
                             I64(PT), I64(PL), I64(DH), I64(DW), I64(epi.act), F32(epi.lo),
                             F32(epi.hi), scratch(), tid_, nth_});
                     }});
    return Error::success();
  }
  case ConvAlgorithm::PackedGemm:
    break;
  }
  return emitPackedGemmConv(plan, s, epi, label, dest, in, filter, bias, items);
}

Error Emitter::emitWinogradConv(const ConvPlan &plan, const ConvShape &s,
                                const FusedEpilogue &epi, const std::string &label,
                                Location dest, Location in, Value *filter, Value *bias,
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
                            {at(dest), at(in), at(wl), ptr(bias),
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
                          {at(dest), at(in), at(wl), ptr(bias),
                           residual ? ptr(residual) : nullPtr(), I64(N), I64(C), I64(H), I64(W),
                           I64(O), I64(OH), I64(OW), I64(PT), I64(PL), I64(epi.act),
                           F32(epi.lo), F32(epi.hi), scratch(), tid_, nth_});
                   }});
  return Error::success();
}

Error Emitter::emitPackedGemmConv(const ConvPlan &plan, const ConvShape &s,
                                  const FusedEpilogue &epi, const std::string &label,
                                  Location dest, Location in, Value *filter, Value *bias,
                                  std::vector<Item> &items) {
  const int64_t N = s.N, C = s.C, H = s.H, W = s.W, O = s.O, OH = s.OH, OW = s.OW;
  const int64_t KH = s.KH, KW = s.KW, SH = s.SH, SW = s.SW, PT = s.PT, PL = s.PL, DH = s.DH,
                DW = s.DW, G = s.group;
  auto *cw = dyn_cast<WeightVar>(filter);
  Value *residual = epi.add;
  // The packed GEMM: weights packed at compile time, or per run when computed at run time.
  // Constant weights that are float16 values (an fp16 network) are held as float16 and
  // widened per cache block by libjit_conv2d_f16w_* (CodegenOptions::halfWeights).
  int64_t Og = O / G, K = (C / G) * KH * KW;
  const bool half = s.constantWeights && storesHalf(cw);
  Location wl;
  if (half) {
    KILN_ASSIGN_OR_RETURN(uint64_t off, constPackedHalf(cw, WeightPacking::GemmAHalf, G, Og, K));
    wl = {kConstantBase, off};
  } else if (s.constantWeights) {
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
  const std::string kernel = (half ? "libjit_conv2d_f16w_" : "libjit_conv2d_f32_") + isa_;
  items.push_back({true, half ? label + " f16w" : label, [=] {
                     call(kernel,
                          {at(dest), at(in), at(wl), ptr(bias),
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
