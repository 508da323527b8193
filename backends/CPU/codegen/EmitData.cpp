// Emitters of data movement: Copy, Concat, Slice, Transpose, Broadcast, Tile, Pad, Splat
// and InsertTensor, all strided copies (libjit_strided_copy_*) or memcpy/memset.
#include "Emitter.h"

#include <cstring>

namespace kiln::cpu {

void Emitter::emitCopy(llvm::Value *dst, llvm::Value *src, std::vector<int64_t> dims,
                       std::vector<int64_t> ds, std::vector<int64_t> ss, unsigned elemSize) {
  // Drop unit dimensions, then merge dimensions contiguous in both buffers.
  std::vector<int64_t> d2, ds2, ss2;
  for (size_t i = 0; i < dims.size(); i++) {
    if (dims[i] == 0)
      return;
    if (dims[i] == 1)
      continue;
    if (!d2.empty() && ds2.back() == ds[i] * dims[i] && ss2.back() == ss[i] * dims[i]) {
      d2.back() *= dims[i];
      ds2.back() = ds[i];
      ss2.back() = ss[i];
      continue;
    }
    d2.push_back(dims[i]);
    ds2.push_back(ds[i]);
    ss2.push_back(ss[i]);
  }
  if (d2.empty() || (d2.size() == 1 && ds2[0] == 1 && ss2[0] == 1)) {
    int64_t n = d2.empty() ? 1 : d2[0];
    B_.CreateMemCpy(dst, llvm::MaybeAlign(1), src, llvm::MaybeAlign(1), I64(n * elemSize));
    return;
  }
  const char *suffix = elemSize == 1 ? "u8" : elemSize == 2 ? "u16" : elemSize == 4 ? "u32" : "u64";
  call(std::string("libjit_strided_copy_") + suffix,
       {dst, src, i64Array(d2), i64Array(ds2), i64Array(ss2), I64(int64_t(d2.size()))});
}

Error Emitter::planCopy(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *cp = cast<CopyInst>(I);
  Value *dst = cp->getDest(), *src = cp->getSrc();
  KILN_ASSIGN_OR_RETURN(Location dl, loc(dst));
  KILN_ASSIGN_OR_RETURN(Location sl, loc(src));
  if (dl == sl)
    return Error::success();
  uint64_t bytes = src->getType()->sizeInBytes();
  serial("copy", [=] {
    B_.CreateMemCpy(ptr(dst), llvm::MaybeAlign(1), ptr(src), llvm::MaybeAlign(1), I64(bytes));
  });
  return Error::success();
}

Error Emitter::planConcat(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *cc = cast<ConcatInst>(I);
  Value *dest = cc->getDest();
  auto od = dimsOf(dest);
  auto os = stridesOf(od);
  size_t axis = cc->getAxis();
  unsigned es = unsigned(dest->getType()->elemBytes());
  int64_t off = 0;
  for (Value *in : cc->getInputs()) {
    auto d = dimsOf(in);
    int64_t o = off;
    serial("concat", [=] {
      llvm::Value *dp = B_.CreateConstInBoundsGEP1_64(i8_, ptr(dest), uint64_t(o * os[axis] * es));
      emitCopy(dp, ptr(in), d, os, stridesOf(d), es);
    });
    off += d[axis];
  }
  return Error::success();
}

Error Emitter::planSlice(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *sl = cast<SliceInst>(I);
  Value *dest = sl->getDest(), *in = sl->getInput();
  auto id = dimsOf(in), od = dimsOf(dest);
  auto is = stridesOf(id);
  unsigned es = unsigned(dest->getType()->elemBytes());
  int64_t start = 0;
  for (size_t i = 0; i < id.size(); i++)
    start += int64_t(sl->getStarts()[i]) * is[i];
  serial("slice", [=] {
    llvm::Value *sp = B_.CreateConstInBoundsGEP1_64(i8_, ptr(in), uint64_t(start * es));
    emitCopy(ptr(dest), sp, od, stridesOf(od), is, es);
  });
  return Error::success();
}

Error Emitter::planTranspose(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *tr = cast<TransposeInst>(I);
  Value *dest = tr->getDest(), *in = tr->getInput();
  auto id = dimsOf(in), od = dimsOf(dest);
  auto is = stridesOf(id);
  std::vector<int64_t> ss;
  for (dim_t s : tr->getShuffle())
    ss.push_back(is[s]);
  unsigned es = unsigned(dest->getType()->elemBytes());
  serial("transpose", [=] { emitCopy(ptr(dest), ptr(in), od, stridesOf(od), ss, es); });
  return Error::success();
}

Error Emitter::planBroadcast(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *bc = cast<BroadcastInst>(I);
  Value *dest = bc->getDest(), *in = bc->getInput();
  auto id = dimsOf(in), od = dimsOf(dest);
  auto is = stridesOf(id);
  std::vector<int64_t> ss(od.size(), 0);
  size_t shift = od.size() - id.size();
  for (size_t i = 0; i < id.size(); i++)
    ss[shift + i] = id[i] == 1 ? 0 : is[i];
  unsigned es = unsigned(dest->getType()->elemBytes());
  serial("broadcast", [=] { emitCopy(ptr(dest), ptr(in), od, stridesOf(od), ss, es); });
  return Error::success();
}

Error Emitter::planTile(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *tl = cast<TileInst>(I);
  Value *dest = tl->getDest(), *in = tl->getInput();
  auto id = dimsOf(in), od = dimsOf(dest);
  auto is = stridesOf(id), os = stridesOf(od);
  std::vector<int64_t> dims, ds, ss;
  for (size_t i = 0; i < id.size(); i++) {
    dims.push_back(int64_t(tl->getRepeats()[i]));
    ds.push_back(id[i] * os[i]);
    ss.push_back(0);
    dims.push_back(id[i]);
    ds.push_back(os[i]);
    ss.push_back(is[i]);
  }
  unsigned es = unsigned(dest->getType()->elemBytes());
  serial("tile", [=] { emitCopy(ptr(dest), ptr(in), dims, ds, ss, es); });
  return Error::success();
}

Error Emitter::planPad(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *pd = cast<PadInst>(I);
  Value *dest = pd->getDest(), *in = pd->getInput();
  auto id = dimsOf(in), od = dimsOf(dest);
  auto os = stridesOf(od);
  int64_t start = 0;
  for (size_t i = 0; i < id.size(); i++)
    start += int64_t(pd->getPads()[i]) * os[i];
  float value = pd->getValue();
  int64_t n = product(od);
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  serial("pad", [=] {
    call("libjit_splat_u32", {ptr(dest), llvm::ConstantInt::get(llvm::Type::getInt32Ty(ctx_), bits), I64(n)});
    llvm::Value *dp = B_.CreateConstInBoundsGEP1_64(i8_, ptr(dest), uint64_t(start * 4));
    emitCopy(dp, ptr(in), id, os, stridesOf(id), 4);
  });
  return Error::success();
}

Error Emitter::planSplat(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *sp = cast<SplatInst>(I);
  Value *dest = sp->getDest();
  const Type &t = *dest->getType();
  int64_t n = int64_t(t.numElements());
  float v = sp->getValue();
  llvm::Type *i32 = llvm::Type::getInt32Ty(ctx_);
  switch (t.kind) {
  case ElemKind::Float: {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    serial("splat", [=] { call("libjit_splat_u32", {ptr(dest), llvm::ConstantInt::get(i32, bits), I64(n)}); });
    return Error::success();
  }
  case ElemKind::Int32I:
    serial("splat", [=] { call("libjit_splat_u32", {ptr(dest), llvm::ConstantInt::get(i32, uint32_t(int32_t(v))), I64(n)}); });
    return Error::success();
  case ElemKind::Int64I:
    serial("splat", [=] { call("libjit_splat_u64", {ptr(dest), I64(int64_t(v)), I64(n)}); });
    return Error::success();
  case ElemKind::Bool:
    serial("splat", [=] { call("libjit_splat_u8", {ptr(dest), llvm::ConstantInt::get(i8_, v != 0.0f), I64(n)}); });
    return Error::success();
  default:
    break;
  }
  return unsupported(I);
}

Error Emitter::planInsertTensor(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *it = cast<InsertTensorInst>(I);
  Value *dest = it->getDest(), *big = it->getBig(), *small = it->getSmall();
  KILN_ASSIGN_OR_RETURN(Location dl, loc(dest));
  KILN_ASSIGN_OR_RETURN(Location bl, loc(big));
  auto od = dimsOf(dest), sd = dimsOf(small);
  auto os = stridesOf(od);
  unsigned es = unsigned(dest->getType()->elemBytes());
  int64_t start = 0;
  for (size_t i = 0; i < od.size() && i < it->getOffsets().size(); i++)
    start += int64_t(it->getOffsets()[i]) * os[i];
  uint64_t bytes = dest->getType()->sizeInBytes();
  bool same = dl == bl;
  serial("inserttensor", [=] {
    if (!same)
      B_.CreateMemCpy(ptr(dest), llvm::MaybeAlign(1), ptr(big), llvm::MaybeAlign(1), I64(bytes));
    llvm::Value *dp = B_.CreateConstInBoundsGEP1_64(i8_, ptr(dest), uint64_t(start * es));
    emitCopy(dp, ptr(small), sd, os, stridesOf(sd), es);
  });
  return Error::success();
}

void registerDataEmitters(EmitterTable &t) {
  t[InstrKind::Copy] = &Emitter::planCopy;
  t[InstrKind::Concat] = &Emitter::planConcat;
  t[InstrKind::Slice] = &Emitter::planSlice;
  t[InstrKind::Transpose] = &Emitter::planTranspose;
  t[InstrKind::Broadcast] = &Emitter::planBroadcast;
  t[InstrKind::Tile] = &Emitter::planTile;
  t[InstrKind::Pad] = &Emitter::planPad;
  t[InstrKind::Splat] = &Emitter::planSplat;
  t[InstrKind::InsertTensor] = &Emitter::planInsertTensor;
}

} // namespace kiln::cpu
