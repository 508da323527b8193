// Emitters of pooling: MaxPool, AvgPool (NCHW windows) and AdaptiveAvgPool.
#include "Emitter.h"

#include "backends/CPU/libjit/libjit.h"

namespace kiln::cpu {

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

void registerPoolEmitters(EmitterTable &t) {
  t[InstrKind::MaxPool] = &Emitter::planPool;
  t[InstrKind::AvgPool] = &Emitter::planPool;
  t[InstrKind::AdaptiveAvgPool] = &Emitter::planAdaptiveAvgPool;
}

} // namespace kiln::cpu
