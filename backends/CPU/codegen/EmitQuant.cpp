// Emitters of quantization: Quantize (f32 -> i8q/u8q/i32q), Dequantize (back to f32) and
// RescaleQuantized (new scale and offset, same storage), calling libjit_quant.cpp with the
// types' scales and offsets as constants. Parallel stages: each thread converts a share.
#include "Emitter.h"

namespace kiln::cpu {

Error Emitter::planQuant(Instruction *I, std::vector<Item> &items) {
  Value *dest = I->getOperand(0).first, *in = I->getOperand(1).first;
  const Type &dt = *dest->getType(), &it = *in->getType();
  if (dt.numElements() != it.numElements())
    return makeError(ErrorCode::InvalidArgument, "CPU backend: ", I->getKindName(), " '",
                     I->getName(), "': result ", dt.toString(), " and input ", it.toString(),
                     " differ in size");
  int64_t n = int64_t(it.numElements());
  llvm::Type *i32 = llvm::Type::getInt32Ty(ctx_);
  auto off = [i32](int32_t o) { return llvm::ConstantInt::get(i32, uint64_t(int64_t(o)), true); };
  switch (I->getKind()) {
  case InstrKind::Quantize: {
    if (it.kind != ElemKind::Float || !dt.isQuantizedType())
      return unsupported(I);
    std::string fn = std::string("libjit_quantize_f32_") + valueSuffix(dt.kind);
    std::string name = "quantize";
    int64_t L;
    if (dt.kind == ElemKind::Int8Q && qIsa(L) == "vnni")
      fn += "_vnni", name += " vnni";
    float scale = dt.scale;
    int32_t offset = dt.offset;
    items.push_back({true, name, [=] {
                       call(fn, {ptr(dest), ptr(in), I64(n), F32(scale), off(offset), tid_, nth_});
                     }});
    return Error::success();
  }
  case InstrKind::Dequantize: {
    if (dt.kind != ElemKind::Float || !it.isQuantizedType())
      return unsupported(I);
    std::string fn = std::string("libjit_dequantize_") + valueSuffix(it.kind) + "_f32";
    float scale = it.scale;
    int32_t offset = it.offset;
    items.push_back({true, "dequantize", [=] {
                       call(fn, {ptr(dest), ptr(in), I64(n), F32(scale), off(offset), tid_, nth_});
                     }});
    return Error::success();
  }
  case InstrKind::RescaleQuantized: {
    if (!it.isQuantizedType() || dt.kind != it.kind)
      return unsupported(I);
    std::string fn = std::string("libjit_rescale_") + valueSuffix(it.kind);
    float inScale = it.scale, outScale = dt.scale;
    int32_t inOffset = it.offset, outOffset = dt.offset;
    items.push_back({true, "rescale", [=] {
                       call(fn, {ptr(dest), ptr(in), I64(n), F32(inScale), off(inOffset),
                                 F32(outScale), off(outOffset), tid_, nth_});
                     }});
    return Error::success();
  }
  default:
    return unsupported(I);
  }
}

void registerQuantEmitters(EmitterTable &t) {
  for (InstrKind k : {InstrKind::Quantize, InstrKind::Dequantize, InstrKind::RescaleQuantized})
    t[k] = &Emitter::planQuant;
}

} // namespace kiln::cpu
