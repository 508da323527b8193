// Emitters of normalisations and reductions: BatchNormalization, LayerNormalization,
// SoftMax/LogSoftMax, the Reduce* family, ArgMax/ArgMin and TopK (libjit_reduce.cpp).
#include "Emitter.h"

#include <cmath>

namespace kiln::cpu {

Error Emitter::planBatchNormalization(Instruction *I, std::vector<Item> &items) {
  auto *bn = cast<BatchNormalizationInst>(I);
  auto d = dimsOf(bn->getInput());
  size_t c = bn->getChannelIdx();
  int64_t outer = product(d, 0, c), ch = d[c], inner = product(d, c + 1);
  float eps = bn->getEpsilon();
  // Planes split between the threads (plan() keeps the small ones serial).
  items.push_back({outer * ch > 1, "batchnorm", [=] {
    call("libjit_batchnorm_f32", {ptr(bn->getDest()), ptr(bn->getInput()), ptr(bn->getScale()),
                                  ptr(bn->getBias()), ptr(bn->getMean()), ptr(bn->getVar()),
                                  F32(eps), I64(outer), I64(ch), I64(inner), tid_, nth_});
  }});
  return Error::success();
}

Error Emitter::planLayerNormalization(Instruction *I, std::vector<Item> &items) {
  auto *ln = cast<LayerNormalizationInst>(I);
  auto d = dimsOf(ln->getInput());
  size_t a = ln->getAxis();
  int64_t outer = product(d, 0, a), inner = product(d, a);
  float eps = ln->getEpsilon();
  items.push_back({outer > 1, "layernorm", [=] {
                     call("libjit_layernorm_f32",
                          {ptr(ln->getDest()), ptr(ln->getInput()), ptr(ln->getScale()),
                           ptr(ln->getBias()), I64(outer), I64(inner), F32(eps), tid_, nth_});
                   }});
  return Error::success();
}

/// SoftMax and LogSoftMax.
Error Emitter::planSoftMax(Instruction *I, std::vector<Item> &items) {
  bool lg = I->getKind() == InstrKind::LogSoftMax;
  size_t a = lg ? cast<LogSoftMaxInst>(I)->getAxis() : cast<SoftMaxInst>(I)->getAxis();
  Value *dest = I->getOperand(0).first, *in = I->getOperand(1).first;
  auto d = dimsOf(in);
  int64_t outer = product(d, 0, a), ax = d[a], inner = product(d, a + 1);
  items.push_back({outer * ((inner + 15) / 16) > 1, "softmax", [=] {
                     call("libjit_softmax_f32", {ptr(dest), ptr(in), I64(outer), I64(ax),
                                                 I64(inner), I64(lg), tid_, nth_});
                   }});
  return Error::success();
}

/// The Reduce* family on f32, i32 and i64 (ReduceMean on f32: a sum, then a scale).
Error Emitter::planReduce(Instruction *I, const std::vector<dim_t> &axes, const char *op,
                          bool mean, std::vector<Item> &items) {
  Value *dest = I->getOperand(0).first, *in = I->getOperand(1).first;
  ElemKind k = in->getType()->kind;
  const char *suffix = valueSuffix(k);
  if (!suffix || k != dest->getType()->kind || isQuantized(k) || (mean && k != ElemKind::Float))
    return unsupported(I);
  auto d = dimsOf(in);
  if (d.size() > 16)
    return unsupported(I);
  std::vector<int64_t> keep = d;
  int64_t count = 1;
  for (dim_t a : axes) {
    if (a >= d.size())
      return makeError(ErrorCode::InvalidArgument, "CPU backend: ", I->getKindName(), " '",
                       I->getName(), "': axis ", a, " is out of range for input ",
                       in->getType()->toString());
    keep[a] = 1;
    count *= d[a];
  }
  auto ks = stridesOf(keep);
  for (dim_t a : axes)
    ks[a] = 0;
  int64_t dstSize = product(keep);
  // The identity of the operation in the element kind (the Interpreter's initial value).
  std::string o = op;
  llvm::Type *ity = k == ElemKind::Int32I ? llvm::Type::getInt32Ty(ctx_) : i64_;
  const bool isInt = k != ElemKind::Float;
  const int64_t intLo = k == ElemKind::Int32I ? INT32_MIN : INT64_MIN;
  const int64_t intHi = k == ElemKind::Int32I ? INT32_MAX : INT64_MAX;
  items.push_back({false, op, [=] {
                     llvm::Value *init;
                     if (isInt)
                       init = llvm::ConstantInt::get(
                           ity, uint64_t(o == "sum" ? 0 : o == "prod" ? 1 : o == "max" ? intLo : intHi),
                           true);
                     else
                       init = F32(o == "sum" ? 0.0f : o == "prod" ? 1.0f : o == "max" ? -INFINITY : INFINITY);
                     call("libjit_reduce_" + o + "_" + suffix,
                          {ptr(dest), ptr(in), i64Array(d), i64Array(ks), I64(int64_t(d.size())),
                           I64(dstSize), init});
                     if (mean && count)
                       call("libjit_scale_f32", {ptr(dest), I64(dstSize), F32(1.0f / float(count))});
                   }});
  return Error::success();
}

Error Emitter::planReduceKind(Instruction *I, std::vector<Item> &items) {
  switch (I->getKind()) {
  case InstrKind::ReduceSum:
    return planReduce(I, cast<ReduceSumInst>(I)->getAxes(), "sum", false, items);
  case InstrKind::ReduceMean:
    return planReduce(I, cast<ReduceMeanInst>(I)->getAxes(), "sum", true, items);
  case InstrKind::ReduceMax:
    return planReduce(I, cast<ReduceMaxInst>(I)->getAxes(), "max", false, items);
  case InstrKind::ReduceMin:
    return planReduce(I, cast<ReduceMinInst>(I)->getAxes(), "min", false, items);
  case InstrKind::ReduceProd:
    return planReduce(I, cast<ReduceProdInst>(I)->getAxes(), "prod", false, items);
  default:
    return unsupported(I);
  }
}

/// ArgMax and ArgMin: Input seen as [outer, size, inner] around Axis; Int64 result.
Error Emitter::planArgReduce(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  bool isMax = I->getKind() == InstrKind::ArgMax;
  size_t axis = isMax ? cast<ArgMaxInst>(I)->getAxis() : cast<ArgMinInst>(I)->getAxis();
  Value *dest = I->getOperand(0).first, *in = I->getOperand(1).first;
  ElemKind k = in->getType()->kind;
  const char *suffix = valueSuffix(k);
  auto d = dimsOf(in);
  if (!suffix || dest->getType()->kind != ElemKind::Int64I ||
      (isQuantized(k) && k != ElemKind::Int8Q))
    return unsupported(I);
  if (axis >= d.size() || d[axis] == 0 ||
      int64_t(dest->getType()->numElements()) != product(d) / d[axis])
    return makeError(ErrorCode::InvalidArgument, "CPU backend: ", I->getKindName(), " '",
                     I->getName(), "': Axis ", axis, " and output ",
                     dest->getType()->toString(), " do not fit input ", in->getType()->toString());
  int64_t outer = product(d, 0, axis), size = d[axis], inner = product(d, axis + 1);
  std::string fn = std::string(isMax ? "libjit_argmax_" : "libjit_argmin_") + suffix;
  serial(isMax ? "argmax" : "argmin",
         [=] { call(fn, {ptr(dest), ptr(in), I64(outer), I64(size), I64(inner)}); });
  return Error::success();
}

/// TopK along the last axis: K values (Input's kind) and their Int64 indices per row.
Error Emitter::planTopK(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *t = cast<TopKInst>(I);
  Value *values = t->getValues(), *indices = t->getIndices(), *in = t->getInput();
  ElemKind k = in->getType()->kind;
  const char *suffix = valueSuffix(k);
  if (!suffix || values->getType()->kind != k || indices->getType()->kind != ElemKind::Int64I ||
      (isQuantized(k) && k != ElemKind::Int8Q))
    return unsupported(I);
  auto d = dimsOf(in);
  int64_t kk = int64_t(t->getK());
  int64_t n = d.empty() ? 0 : d.back();
  if (d.empty() || kk == 0 || kk > n ||
      int64_t(values->getType()->numElements()) != product(d) / n * kk ||
      indices->getType()->numElements() != values->getType()->numElements())
    return makeError(ErrorCode::InvalidArgument, "CPU backend: TopK '", I->getName(), "': K = ",
                     kk, " and outputs ", values->getType()->toString(), ", ",
                     indices->getType()->toString(), " do not fit input ",
                     in->getType()->toString());
  int64_t rows = product(d) / n;
  std::string fn = std::string("libjit_topk_") + suffix;
  serial("topk", [=] {
    call(fn, {ptr(values), ptr(indices), ptr(in), I64(rows), I64(n), I64(kk)});
  });
  return Error::success();
}

void registerNormEmitters(EmitterTable &t) {
  t[InstrKind::BatchNormalization] = &Emitter::planBatchNormalization;
  t[InstrKind::LayerNormalization] = &Emitter::planLayerNormalization;
  t[InstrKind::SoftMax] = &Emitter::planSoftMax;
  t[InstrKind::LogSoftMax] = &Emitter::planSoftMax;
  for (InstrKind k : {InstrKind::ReduceSum, InstrKind::ReduceMean, InstrKind::ReduceMax,
                      InstrKind::ReduceMin, InstrKind::ReduceProd})
    t[k] = &Emitter::planReduceKind;
  t[InstrKind::ArgMax] = &Emitter::planArgReduce;
  t[InstrKind::ArgMin] = &Emitter::planArgReduce;
  t[InstrKind::TopK] = &Emitter::planTopK;
}

} // namespace kiln::cpu
