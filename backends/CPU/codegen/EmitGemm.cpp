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
    KILN_ASSIGN_OR_RETURN(uint64_t off, constPacked(cw, WeightPacking::GemmB, 1, K, M));
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

} // namespace

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
                                      {opts_.winograd, opts_.transposedConv});
  return emitConv(plan, s, epi, dest, in, filter, bias, items);
}

Error Emitter::emitConv(const ConvPlan &plan, const ConvShape &s, const FusedEpilogue &epi,
                        Value *dest, Value *in, Value *filter, Value *bias,
                        std::vector<Item> &items) {
  const int64_t N = s.N, C = s.C, H = s.H, W = s.W, O = s.O, OH = s.OH, OW = s.OW;
  const int64_t KH = s.KH, KW = s.KW, SH = s.SH, SW = s.SW, PT = s.PT, PL = s.PL, DH = s.DH,
                DW = s.DW, G = s.group;
  std::string desc = std::to_string(KH) + "x" + std::to_string(KW) + "/" + std::to_string(SH) +
                     " " + std::to_string(C) + "->" + std::to_string(O) + " " +
                     std::to_string(H) + "x" + std::to_string(W) + (G > 1 ? " g" + std::to_string(G) : "") +
                     (epi.add ? " +add" : "");
  std::string label = std::string(convAlgorithmName(plan.algorithm)) + " " + desc;
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
  case ConvAlgorithm::WinogradRows2:
  case ConvAlgorithm::WinogradRows4: {
    int64_t tile = plan.algorithm == ConvAlgorithm::WinogradRows2 ? 2 : 4;
    KILN_ASSIGN_OR_RETURN(uint64_t off, constPacked(cw, plan.packing, 1, O, C));
    Location wl{kConstantBase, off};
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
  case ConvAlgorithm::Winograd: {
    KILN_ASSIGN_OR_RETURN(uint64_t off, constPacked(cw, plan.packing, 1, O, C));
    Location wl{kConstantBase, off};
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
