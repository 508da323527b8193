// Emitters of normalisations and reductions: BatchNormalization, LayerNormalization,
// SoftMax/LogSoftMax and the Reduce* family.
#include "Emitter.h"

#include <cmath>

namespace kiln::cpu {

Error Emitter::planBatchNormalization(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *bn = cast<BatchNormalizationInst>(I);
  auto d = dimsOf(bn->getInput());
  size_t c = bn->getChannelIdx();
  int64_t outer = product(d, 0, c), ch = d[c], inner = product(d, c + 1);
  float eps = bn->getEpsilon();
  serial("batchnorm", [=] {
    call("libjit_batchnorm_f32", {ptr(bn->getDest()), ptr(bn->getInput()), ptr(bn->getScale()),
                                  ptr(bn->getBias()), ptr(bn->getMean()), ptr(bn->getVar()),
                                  F32(eps), I64(outer), I64(ch), I64(inner)});
  });
  return Error::success();
}

Error Emitter::planLayerNormalization(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *ln = cast<LayerNormalizationInst>(I);
  auto d = dimsOf(ln->getInput());
  size_t a = ln->getAxis();
  int64_t outer = product(d, 0, a), inner = product(d, a);
  float eps = ln->getEpsilon();
  serial("layernorm", [=] {
    call("libjit_layernorm_f32", {ptr(ln->getDest()), ptr(ln->getInput()), ptr(ln->getScale()),
                                  ptr(ln->getBias()), I64(outer), I64(inner), F32(eps)});
  });
  return Error::success();
}

/// SoftMax and LogSoftMax.
Error Emitter::planSoftMax(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  bool lg = I->getKind() == InstrKind::LogSoftMax;
  size_t a = lg ? cast<LogSoftMaxInst>(I)->getAxis() : cast<SoftMaxInst>(I)->getAxis();
  Value *dest = I->getOperand(0).first, *in = I->getOperand(1).first;
  auto d = dimsOf(in);
  int64_t outer = product(d, 0, a), ax = d[a], inner = product(d, a + 1);
  serial("softmax", [=] {
    call("libjit_softmax_f32", {ptr(dest), ptr(in), I64(outer), I64(ax), I64(inner), I64(lg)});
  });
  return Error::success();
}

Error Emitter::planReduce(Instruction *I, const std::vector<dim_t> &axes, const char *op,
                          float init, bool mean, std::vector<Item> &items) {
  Value *dest = I->getOperand(0).first, *in = I->getOperand(1).first;
  auto d = dimsOf(in);
  std::vector<int64_t> keep = d;
  int64_t count = 1;
  for (dim_t a : axes) {
    if (a >= d.size())
      return makeError(ErrorCode::InvalidArgument, "reduce axis out of range");
    keep[a] = 1;
    count *= d[a];
  }
  auto ks = stridesOf(keep);
  for (dim_t a : axes)
    ks[a] = 0;
  int64_t dstSize = product(keep);
  items.push_back({false, op, [=] {
                     call(std::string("libjit_reduce_") + op + "_f32",
                          {ptr(dest), ptr(in), i64Array(d), i64Array(ks), I64(int64_t(d.size())),
                           I64(dstSize), F32(init)});
                     if (mean && count)
                       call("libjit_scale_f32", {ptr(dest), I64(dstSize), F32(1.0f / float(count))});
                   }});
  return Error::success();
}

Error Emitter::planReduceKind(Instruction *I, std::vector<Item> &items) {
  switch (I->getKind()) {
  case InstrKind::ReduceSum:
    return planReduce(I, cast<ReduceSumInst>(I)->getAxes(), "sum", 0.0f, false, items);
  case InstrKind::ReduceMean:
    return planReduce(I, cast<ReduceMeanInst>(I)->getAxes(), "sum", 0.0f, true, items);
  case InstrKind::ReduceMax:
    return planReduce(I, cast<ReduceMaxInst>(I)->getAxes(), "max", -INFINITY, false, items);
  case InstrKind::ReduceMin:
    return planReduce(I, cast<ReduceMinInst>(I)->getAxes(), "min", INFINITY, false, items);
  case InstrKind::ReduceProd:
    return planReduce(I, cast<ReduceProdInst>(I)->getAxes(), "prod", 1.0f, false, items);
  default:
    return unsupported(I);
  }
}

void registerNormEmitters(EmitterTable &t) {
  t[InstrKind::BatchNormalization] = &Emitter::planBatchNormalization;
  t[InstrKind::LayerNormalization] = &Emitter::planLayerNormalization;
  t[InstrKind::SoftMax] = &Emitter::planSoftMax;
  t[InstrKind::LogSoftMax] = &Emitter::planSoftMax;
  for (InstrKind k : {InstrKind::ReduceSum, InstrKind::ReduceMean, InstrKind::ReduceMax,
                      InstrKind::ReduceMin, InstrKind::ReduceProd})
    t[k] = &Emitter::planReduceKind;
}

} // namespace kiln::cpu
