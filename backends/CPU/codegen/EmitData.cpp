// Emitters of data movement: Copy, Concat, Slice, Transpose, Broadcast, Tile, Pad, Splat
// and InsertTensor, all strided copies (libjit_strided_copy_*) or memcpy/memset, and
// Gather (libjit_gather_*). Every element kind moves: the kernels see element sizes. A
// quantized result with other parameters than its input requantizes as it moves
// (libjit_strided_rescale_*), as the Interpreter does; InsertTensor copies raw elements.
#include "Emitter.h"

#include "kiln/Base/Float16.h"

#include <cmath>
#include <cstring>
#include <sstream>

namespace kiln::cpu {

const char *valueSuffix(ElemKind k) {
  switch (k) {
  case ElemKind::Float:
    return "f32";
  case ElemKind::Int8Q:
    return "i8";
  case ElemKind::UInt8Q:
    return "u8";
  case ElemKind::Int32Q:
  case ElemKind::Int32I:
    return "i32";
  case ElemKind::Int64I:
    return "i64";
  case ElemKind::Float16:
  case ElemKind::BFloat16:
  case ElemKind::Bool:
    return nullptr;
  }
  return nullptr;
}

int64_t Emitter::addRunCheck(RunCheck check) {
  if (prog_.statusOffset < 0)
    prog_.statusOffset = int64_t(reserveExtra(3 * sizeof(int64_t)));
  prog_.checks.push_back(std::move(check));
  return int64_t(prog_.checks.size());
}

namespace {

/// Value rounded half to even and saturated to [lo, hi]; NaN is 0 (ConvertTo's rules).
int64_t toIntEven(double v, double lo, double hi) {
  if (std::isnan(v))
    return 0;
  double r = std::nearbyint(v); // the default rounding mode: half to even
  if (r <= lo)
    return int64_t(lo);
  if (r >= hi)
    return int64_t(hi);
  return int64_t(r);
}

/// The stored bits of \p v in kind \p k, as Splat and Pad define the fill value: converted
/// as by ConvertTo (integers and quantized kinds take it as the raw integer, rounded half
/// to even and saturated; Bool is v != 0; 16-bit floats round to nearest even).
uint64_t fillBits(ElemKind k, float v) {
  switch (k) {
  case ElemKind::Float: {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return bits;
  }
  case ElemKind::Float16:
    return float16(v).bits();
  case ElemKind::BFloat16:
    return bfloat16(v).bits();
  case ElemKind::Int8Q:
    return uint8_t(int8_t(toIntEven(v, -128, 127)));
  case ElemKind::UInt8Q:
    return uint8_t(toIntEven(v, 0, 255));
  case ElemKind::Int32Q:
  case ElemKind::Int32I:
    return uint32_t(int32_t(toIntEven(v, -2147483648.0, 2147483647.0)));
  case ElemKind::Int64I:
    // 2^63 is exact in double; INT64_MAX is not: saturate from 2^63 up.
    if (std::isnan(v))
      return 0;
    if (double(v) >= 9223372036854775808.0)
      return uint64_t(INT64_MAX);
    if (double(v) < -9223372036854775808.0)
      return uint64_t(INT64_MIN);
    return uint64_t(int64_t(std::nearbyint(double(v))));
  case ElemKind::Bool:
    return v != 0.0f; // NaN != 0: true
  }
  return 0;
}

} // namespace

void Emitter::emitFill(llvm::Value *dst, const Type &t, float value, int64_t n) {
  uint64_t bytes = t.elemBytes();
  llvm::Type *ity = llvm::Type::getIntNTy(ctx_, unsigned(bytes * 8));
  call(std::string("libjit_splat_") + sizeSuffix(bytes),
       {dst, llvm::ConstantInt::get(ity, fillBits(t.kind, value)), I64(n)});
}

void Emitter::emitCopy(llvm::Value *dst, llvm::Value *src, std::vector<int64_t> dims,
                       std::vector<int64_t> ds, std::vector<int64_t> ss, unsigned elemSize,
                       const Requant *rq) {
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
  if (rq) {
    if (d2.empty()) {
      d2 = {1};
      ds2 = {1};
      ss2 = {1};
    }
    llvm::Type *i32 = llvm::Type::getInt32Ty(ctx_);
    auto off = [i32](int32_t o) { return llvm::ConstantInt::get(i32, uint64_t(int64_t(o)), true); };
    call(std::string("libjit_strided_rescale_") + valueSuffix(rq->kind),
         {dst, src, i64Array(d2), i64Array(ds2), i64Array(ss2), I64(int64_t(d2.size())),
          F32(rq->inScale), off(rq->inOffset), F32(rq->outScale), off(rq->outOffset)});
    return;
  }
  if (d2.empty() || (d2.size() == 1 && ds2[0] == 1 && ss2[0] == 1)) {
    int64_t n = d2.empty() ? 1 : d2[0];
    B_.CreateMemCpy(dst, llvm::MaybeAlign(1), src, llvm::MaybeAlign(1), I64(n * elemSize));
    return;
  }
  call(std::string("libjit_strided_copy_") + sizeSuffix(elemSize),
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
    Requant rq;
    bool requant = requantOf(*in->getType(), *dest->getType(), rq);
    serial("concat", [=] {
      llvm::Value *dp = B_.CreateConstInBoundsGEP1_64(i8_, ptr(dest), uint64_t(o * os[axis] * es));
      emitCopy(dp, ptr(in), d, os, stridesOf(d), es, requant ? &rq : nullptr);
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
  Requant rq;
  bool requant = requantOf(*in->getType(), *dest->getType(), rq);
  serial("slice", [=] {
    llvm::Value *sp = B_.CreateConstInBoundsGEP1_64(i8_, ptr(in), uint64_t(start * es));
    emitCopy(ptr(dest), sp, od, stridesOf(od), is, es, requant ? &rq : nullptr);
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
  Requant rq;
  bool requant = requantOf(*in->getType(), *dest->getType(), rq);
  serial("transpose",
         [=] { emitCopy(ptr(dest), ptr(in), od, stridesOf(od), ss, es, requant ? &rq : nullptr); });
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
  Requant rq;
  bool requant = requantOf(*in->getType(), *dest->getType(), rq);
  serial("broadcast",
         [=] { emitCopy(ptr(dest), ptr(in), od, stridesOf(od), ss, es, requant ? &rq : nullptr); });
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
  Requant rq;
  bool requant = requantOf(*in->getType(), *dest->getType(), rq);
  serial("tile", [=] { emitCopy(ptr(dest), ptr(in), dims, ds, ss, es, requant ? &rq : nullptr); });
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
  unsigned es = unsigned(dest->getType()->elemBytes());
  const Type *ty = dest->getType();
  Requant rq;
  bool requant = requantOf(*in->getType(), *ty, rq);
  serial("pad", [=] {
    emitFill(ptr(dest), *ty, value, n);
    llvm::Value *dp = B_.CreateConstInBoundsGEP1_64(i8_, ptr(dest), uint64_t(start * es));
    emitCopy(dp, ptr(in), id, os, stridesOf(id), es, requant ? &rq : nullptr);
  });
  return Error::success();
}

Error Emitter::planSplat(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *sp = cast<SplatInst>(I);
  Value *dest = sp->getDest();
  const Type *t = dest->getType();
  int64_t n = int64_t(t->numElements());
  float v = sp->getValue();
  serial("splat", [=] { emitFill(ptr(dest), *t, v, n); });
  return Error::success();
}

/// Gather: Data seen as [outer, size, inner] around Axis; the kernel checks every index
/// (an out-of-range one fails the run with the Interpreter's message) before copying.
Error Emitter::planGather(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *g = cast<GatherInst>(I);
  Value *dest = g->getDest(), *data = g->getData(), *idx = g->getIndices();
  const Type &dt = *data->getType(), &it = *idx->getType();
  size_t axis = g->getAxis();
  auto d = dimsOf(data);
  if (axis >= d.size() || (it.kind != ElemKind::Int32I && it.kind != ElemKind::Int64I))
    return unsupported(I);
  int64_t outer = product(d, 0, axis), size = d[axis], inner = product(d, axis + 1);
  int64_t count = int64_t(it.numElements());
  if (dest->getType()->numElements() != uint64_t(outer * count * inner))
    return makeError(ErrorCode::InvalidArgument, "CPU backend: Gather '", I->getName(),
                     "': result ", dest->getType()->toString(), " does not match Data ",
                     dt.toString(), " gathered along axis ", axis, " by Indices ", it.toString());
  std::ostringstream after;
  after << " of Indices " << it.toString() << " is out of range for axis " << axis
        << " of size " << size << " of Data " << dt.toString();
  int64_t id = addRunCheck({"Gather '" + I->getName() + "': index ", after.str()});
  std::string fn = std::string("libjit_gather_") + sizeSuffix(dt.elemBytes()) +
                   (it.kind == ElemKind::Int32I ? "_i32" : "_i64");
  // Every result element comes from Data: requantize the result in place after.
  Requant rq;
  bool requant = requantOf(dt, *dest->getType(), rq);
  int64_t n = outer * count * inner;
  serial("gather", [=] {
    call(fn, {ptr(dest), ptr(data), ptr(idx), I64(outer), I64(size), I64(count), I64(inner),
              statusPtr(), I64(id)});
    if (requant)
      emitCopy(ptr(dest), ptr(dest), {n}, {1}, {1}, unsigned(dt.elemBytes()), &rq);
  });
  return Error::success();
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
  t[InstrKind::Gather] = &Emitter::planGather;
}

} // namespace kiln::cpu
