// Emitters of the linear-algebra family: FullyConnected (plain and with a fused epilogue),
// MatMul, BatchMatMul and BatchedAdd, on the packed GEMM engine.
#include "Emitter.h"

#include "backends/CPU/libjit/libjit.h"
#include "backends/CPU/libjit/libjit_gemm_config.h"

namespace kiln::cpu {

Error Emitter::planFC(Instruction *I, Value *dest, Value *in, Value *weights, Value *bias,
                      std::vector<Item> &items, const FusedEpilogue *act) {
  if (!act && dest->getType()->kind == ElemKind::BFloat16)
    return planFCBf16(I, dest, in, weights, bias, items);
  auto id = dimsOf(in), wd = dimsOf(weights);
  int64_t N = id[0], K = id[1], M = wd[1];
  FusedEpilogue epi;
  if (act)
    epi = *act;
  // Weights computed at run time (e.g. a transposed input) are packed per run.
  auto *cw = dyn_cast<WeightVar>(weights);
  bool constW = cw && cw->isConstant();
  // Constant weights that are float16 values (an fp16 network) are held as float16 and
  // widened as they are loaded (CodegenOptions::halfWeights; EmitHalfWeights.cpp).
  const bool half = constW && storesHalf(cw);
  // One row reads constant weights unpacked (libjit_fc_row_f32): where the graph holds
  // them, or for a bundle, copied as they are into the constant arena.
  if (constW && N == 1 && weights->getType()->kind == ElemKind::Float &&
      dest->getType()->kind == ElemKind::Float) {
    Location wl;
    const std::string rowKernel = half ? "libjit_fc_row_f16w_" + isa_ : "libjit_fc_row_f32";
    if (half) {
      KILN_ASSIGN_OR_RETURN(uint64_t off, constPackedHalf(cw, WeightPacking::NoneHalf, 1, K, M));
      wl = {kConstantBase, off};
    } else if (opts_.borrowConstants) {
      KILN_ASSIGN_OR_RETURN(wl, constBorrowed(cw));
    } else {
      KILN_ASSIGN_OR_RETURN(uint64_t off, constRaw(cw));
      wl = {kConstantBase, off};
    }
    const std::string name = "fc_row 1x" + std::to_string(K) + "x" + std::to_string(M) +
                             (half ? " f16w" : "");
    const unsigned nth = opts_.threads;
    // The float32 kernel sums its weight rows in groups on AVX-512 only (see there).
    auto callRow = [=](std::vector<llvm::Value *> args) {
      if (!half)
        args.push_back(I64(avx512_ ? 1 : 0));
      call(rowKernel, std::move(args));
    };
    if (nth <= 1) {
      items.push_back({true, name, [=] {
                         callRow({ptr(dest), ptr(in), at(wl), bias ? ptr(bias) : nullPtr(),
                                  epi.add ? ptr(epi.add) : nullPtr(), I64(K), I64(M),
                                  I64(epi.act), F32(epi.lo), F32(epi.hi), nullPtr(), I64(0),
                                  tid_, nth_});
                       }});
      return Error::success();
    }
    // Threads sum ranges of rows into partials, then add them up by columns (either stage
    // may run on one thread when the instruction is small: the kernels allow for it).
    Location pl{kActivationBase, reserveExtra(uint64_t(nth) * uint64_t(M) * 4)};
    items.push_back({true, name, [=] {
                       callRow({ptr(dest), ptr(in), at(wl), nullPtr(), nullPtr(), I64(K), I64(M),
                                I64(0), F32(0), F32(0), at(pl), I64(nth), tid_, nth_});
                     }, stageWork({I})});
    items.push_back({true, "fc_row_sum " + std::to_string(M), [=] {
                       call("libjit_fc_row_sum_f32",
                            {ptr(dest), at(pl), bias ? ptr(bias) : nullPtr(),
                             epi.add ? ptr(epi.add) : nullPtr(), I64(M), I64(nth), I64(epi.act),
                             F32(epi.lo), F32(epi.hi), tid_, nth_});
                     }});
    return Error::success();
  }
  Value *w = weights;
  Location wl;
  if (half) {
    KILN_ASSIGN_OR_RETURN(uint64_t off, constPackedHalf(cw, WeightPacking::GemmBHalf, 1, K, M));
    wl = {kConstantBase, off};
  } else if (constW) {
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
  const std::string kernel = (half ? "libjit_fc_f16w_" : "libjit_fc_f32_") + isa_;
  items.push_back({true, "fc " + std::to_string(N) + "x" + std::to_string(K) + "x" + std::to_string(M) + (half ? " f16w" : ""), [=] {
                     call(kernel,
                          {ptr(dest), ptr(in), at(wl), bias ? ptr(bias) : nullPtr(),
                           epi.add ? ptr(epi.add) : nullPtr(), I64(N), I64(K), I64(M),
                           I64(epi.act), F32(epi.lo), F32(epi.hi), scratch(), tid_, nth_});
                   }});
  return Error::success();
}

Error Emitter::planFullyConnected(Instruction *I, std::vector<Item> &items) {
  auto *fc = cast<FullyConnectedInst>(I);
  return planFC(I, fc->getDest(), fc->getInput(), fc->getWeights(), fc->getBias(), items);
}

Error Emitter::planFusedFullyConnected(Instruction *I, std::vector<Item> &items) {
  auto *fc = cast<FusedFullyConnectedInst>(I);
  if (fc->getInput()->getType()->kind == ElemKind::Int8Q)
    return planQuantFC(I, items); // a fused int8 Relu / Clip (EmitQuantConv.cpp)
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
  if ((w && w->isConstant()) || mm->getDest()->getType()->kind == ElemKind::BFloat16)
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

void registerLinalgEmitters(EmitterTable &t) {
  t[InstrKind::FullyConnected] = &Emitter::planFullyConnected;
  t[InstrKind::FusedFullyConnected] = &Emitter::planFusedFullyConnected;
  t[InstrKind::MatMul] = &Emitter::planMatMul;
  t[InstrKind::BatchMatMul] = &Emitter::planBatchMatMul;
  t[InstrKind::BatchedAdd] = &Emitter::planBatchedAdd;
}

} // namespace kiln::cpu
