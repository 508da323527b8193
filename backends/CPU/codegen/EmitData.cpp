// Emitters of data movement: Copy, Concat, Slice, Transpose, Broadcast, Tile, Pad, Splat
// and InsertTensor, all strided copies (libjit_strided_copy_*) or memcpy/memset, Gather
// (libjit_gather_*), and the ONNX index operators GatherElements, GatherND,
// ScatterElements, ScatterND and CumSum (libjit_index.cpp). Every element kind moves: the kernels see element sizes. A
// quantized result with other parameters than its input requantizes as it moves
// (libjit_strided_rescale_*), as the Interpreter does; InsertTensor copies raw elements.
#include "Emitter.h"

#include "kiln/Base/Float16.h"

#include <cmath>
#include <cstring>
#include <sstream>

namespace kiln::cpu {

const char *kindSuffix(ElemKind k) {
  switch (k) {
  case ElemKind::Float:
    return "f32";
  case ElemKind::Float16:
    return "f16";
  case ElemKind::BFloat16:
    return "bf16";
  case ElemKind::Int8Q:
    return "i8";
  case ElemKind::UInt8Q:
    return "u8";
  case ElemKind::Int32Q:
  case ElemKind::Int32I:
    return "i32";
  case ElemKind::Int64I:
    return "i64";
  case ElemKind::Bool:
    return "bool";
  }
  return nullptr;
}

const char *valueSuffix(ElemKind k) {
  bool moveOnly = k == ElemKind::Float16 || k == ElemKind::BFloat16 || k == ElemKind::Bool;
  return moveOnly ? nullptr : kindSuffix(k);
}

namespace {

/// "i32" / "i64" for an index kind, null for others.
const char *indexSuffix(ElemKind k) { return isIndexKind(k) ? kindSuffix(k) : nullptr; }

/// The kernel suffix of Scatter* on kind \p k with reduction \p red (libjit_index.cpp), or
/// null: reductions on f32, index kinds and Bool; 16-bit floats replace only (by size).
const char *scatterSuffix(ElemKind k, const std::string &red) {
  if (k == ElemKind::Float16 || k == ElemKind::BFloat16)
    return red == "none" ? sizeSuffix(2) : nullptr;
  return k == ElemKind::Float || k == ElemKind::Bool || isIndexKind(k) ? kindSuffix(k) : nullptr;
}

} // namespace

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
                       const Requant *rq, bool split) {
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
  // A stage that runs on one thread copies the whole box (a memcpy where it is contiguous).
  if (auto *n = llvm::dyn_cast<llvm::ConstantInt>(nth_))
    split = split && !n->isOne();
  if (split) {
    if (d2.empty()) {
      d2 = {1};
      ds2 = {1};
      ss2 = {1};
    }
    call(std::string("libjit_strided_copy_part_") + sizeSuffix(elemSize),
         {dst, src, i64Array(d2), i64Array(ds2), i64Array(ss2), I64(int64_t(d2.size())), tid_,
          nth_});
    return;
  }
  if (d2.empty() || (d2.size() == 1 && ds2[0] == 1 && ss2[0] == 1)) {
    int64_t n = d2.empty() ? 1 : d2[0];
    memCopy(dst, src, uint64_t(n * elemSize));
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
    memCopy(ptr(dst), ptr(src), bytes);
  });
  return Error::success();
}

Error Emitter::planConcat(Instruction *I, std::vector<Item> &items) {
  auto *cc = cast<ConcatInst>(I);
  Value *dest = cc->getDest();
  auto od = dimsOf(dest);
  auto os = stridesOf(od);
  size_t axis = cc->getAxis();
  unsigned es = unsigned(dest->getType()->elemBytes());
  struct Part {
    Value *in;
    int64_t off;
    bool requant;
    Requant rq;
  };
  std::vector<Part> parts;
  bool anyRequant = false;
  int64_t off = 0;
  for (Value *in : cc->getInputs()) {
    Part p{in, off, false, {}};
    p.requant = requantOf(*in->getType(), *dest->getType(), p.rq);
    anyRequant = anyRequant || p.requant;
    parts.push_back(p);
    off += int64_t(dimsOf(in)[axis]);
  }
  // One item: each thread copies its share of every operand (plan() keeps small concats
  // serial); with a requantizing operand, the whole concat runs on one thread.
  items.push_back({!anyRequant, "concat", [=] {
                     for (const Part &p : parts) {
                       llvm::Value *dp = B_.CreateConstInBoundsGEP1_64(
                           i8_, ptr(dest), uint64_t(p.off * os[axis] * es));
                       auto d = dimsOf(p.in);
                       emitCopy(dp, ptr(p.in), d, os, stridesOf(d), es,
                                p.requant ? &p.rq : nullptr, !anyRequant);
                     }
                   }});
  return Error::success();
}

Error Emitter::planSlice(Instruction *I, std::vector<Item> &items) {
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
  items.push_back({!requant, "slice", [=] {
    llvm::Value *sp = B_.CreateConstInBoundsGEP1_64(i8_, ptr(in), uint64_t(start * es));
    emitCopy(ptr(dest), sp, od, stridesOf(od), is, es, requant ? &rq : nullptr, !requant);
  }});
  return Error::success();
}

Error Emitter::planTranspose(Instruction *I, std::vector<Item> &items) {
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
  items.push_back({!requant, "transpose", [=] {
    emitCopy(ptr(dest), ptr(in), od, stridesOf(od), ss, es, requant ? &rq : nullptr, !requant);
  }});
  return Error::success();
}

Error Emitter::planBroadcast(Instruction *I, std::vector<Item> &items) {
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
  items.push_back({!requant, "broadcast", [=] {
    emitCopy(ptr(dest), ptr(in), od, stridesOf(od), ss, es, requant ? &rq : nullptr, !requant);
  }});
  return Error::success();
}

Error Emitter::planTile(Instruction *I, std::vector<Item> &items) {
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
  items.push_back({!requant, "tile", [=] {
    emitCopy(ptr(dest), ptr(in), dims, ds, ss, es, requant ? &rq : nullptr, !requant);
  }});
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
  std::string fn =
      std::string("libjit_gather_part_") + sizeSuffix(dt.elemBytes()) + "_" + indexSuffix(it.kind);
  // Every result element comes from Data: requantize the result in place after.
  Requant rq;
  bool requant = requantOf(dt, *dest->getType(), rq);
  int64_t n = outer * count * inner;
  // The rows split between the threads; a requantization in place after, whole.
  items.push_back({true, "gather", [=] {
    call(fn, {ptr(dest), ptr(data), ptr(idx), I64(outer), I64(size), I64(count), I64(inner),
              statusPtr(), I64(id), tid_, nth_});
  }});
  if (requant)
    serial("gather", [=] {
      emitCopy(ptr(dest), ptr(dest), {n}, {1}, {1}, unsigned(dt.elemBytes()), &rq);
    });
  return Error::success();
}

namespace {

/// The reduction code of libjit_index.cpp, or -1.
int64_t reductionCode(const std::string &red) {
  return red == "none" ? 0 : red == "add" ? 1 : red == "mul" ? 2 : red == "max" ? 3
                                                                   : red == "min" ? 4 : -1;
}

/// The run-time check of an index along a dim of \p size, with the Interpreter's message.
RunCheck indexCheck(const Instruction *I, const Type &it, int64_t size, const Type &dt) {
  std::ostringstream after;
  after << " of Indices " << it.toString() << " is out of range (size " << size
        << ") for Data " << dt.toString();
  return {std::string(I->getKindName()) + " '" + I->getName() + "': index ", after.str()};
}

} // namespace

/// GatherElements: one kernel walks the result (Indices' shape) in row-major order,
/// checking each index; quantized results with other parameters are requantized after.
Error Emitter::planGatherElements(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *g = cast<GatherElementsInst>(I);
  Value *dest = g->getDest(), *data = g->getData(), *idx = g->getIndices();
  const Type &dt = *data->getType(), &it = *idx->getType(), &ot = *dest->getType();
  const char *is = indexSuffix(it.kind);
  auto d = dimsOf(data), id = dimsOf(idx);
  size_t axis = g->getAxis();
  bool ok = is && axis < d.size() && d.size() <= 16 && id == dimsOf(dest) &&
            id.size() == d.size() && ot.kind == dt.kind;
  for (size_t k = 0; ok && k < d.size(); k++)
    ok = k == axis || id[k] <= d[k];
  if (!ok)
    return makeError(ErrorCode::InvalidArgument, "CPU backend: GatherElements '", I->getName(),
                     "': result ", ot.toString(), " and Indices ", it.toString(),
                     " do not fit Data ", dt.toString());
  int64_t n = int64_t(ot.numElements());
  if (n == 0)
    return Error::success();
  int64_t check = addRunCheck(indexCheck(I, it, d[axis], dt));
  std::string fn =
      std::string("libjit_gather_elements_") + sizeSuffix(dt.elemBytes()) + "_" + is;
  Requant rq;
  bool requant = requantOf(dt, ot, rq);
  auto strides = stridesOf(d);
  serial("gatherelements", [=] {
    call(fn, {ptr(dest), ptr(data), ptr(idx), i64Array(id), i64Array(strides),
              I64(int64_t(d.size())), I64(int64_t(axis)), I64(d[axis]), statusPtr(),
              I64(check)});
    if (requant)
      emitCopy(ptr(dest), ptr(dest), {n}, {1}, {1}, unsigned(dt.elemBytes()), &rq);
  });
  return Error::success();
}

/// GatherND: one slice copy per index tuple (BatchDims leading dims shared with Data).
Error Emitter::planGatherND(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *g = cast<GatherNDInst>(I);
  Value *dest = g->getDest(), *data = g->getData(), *idx = g->getIndices();
  const Type &dt = *data->getType(), &it = *idx->getType(), &ot = *dest->getType();
  const char *is = indexSuffix(it.kind);
  auto d = dimsOf(data), id = dimsOf(idx);
  size_t b = g->getBatchDims();
  bool ok = is && ot.kind == dt.kind && !id.empty() && b < id.size() && b < d.size() &&
            id.back() > 0 && b + size_t(id.back()) <= d.size();
  size_t k = ok ? size_t(id.back()) : 0;
  int64_t slice = ok ? product(d, b + k) : 0, batches = ok ? product(d, 0, b) : 0;
  int64_t tuples = ok ? int64_t(it.numElements()) / int64_t(k) : 0;
  ok = ok && batches > 0 && tuples % batches == 0 &&
       int64_t(ot.numElements()) == tuples * slice;
  for (size_t x = 0; ok && x < b; x++)
    ok = id[x] == d[x];
  if (!ok)
    return makeError(ErrorCode::InvalidArgument, "CPU backend: GatherND '", I->getName(),
                     "': result ", ot.toString(), " and Indices ", it.toString(),
                     " do not fit Data ", dt.toString());
  int64_t n = int64_t(ot.numElements());
  if (n == 0 || tuples == 0)
    return Error::success();
  auto strides = stridesOf(d);
  int64_t check = 0;
  for (size_t m = 0; m < k; m++) {
    int64_t c = addRunCheck(indexCheck(I, it, d[b + m], dt));
    check = m == 0 ? c : check;
  }
  std::vector<int64_t> kd(d.begin() + b, d.begin() + b + k),
      ks(strides.begin() + b, strides.begin() + b + k);
  int64_t perBatch = tuples / batches, batchStride = b ? strides[b - 1] : 0;
  std::string fn = std::string("libjit_gather_nd_") + sizeSuffix(dt.elemBytes()) + "_" + is;
  Requant rq;
  bool requant = requantOf(dt, ot, rq);
  serial("gathernd", [=] {
    call(fn, {ptr(dest), ptr(data), ptr(idx), I64(tuples), I64(perBatch), I64(batchStride),
              I64(int64_t(k)), i64Array(kd), i64Array(ks), I64(slice), statusPtr(),
              I64(check)});
    if (requant)
      emitCopy(ptr(dest), ptr(dest), {n}, {1}, {1}, unsigned(dt.elemBytes()), &rq);
  });
  return Error::success();
}

/// The operands and kernel names of ScatterElements and ScatterND, after the checks they
/// share; `copyData` (in the stage) copies Data to the result unless it is in place.
struct Emitter::ScatterPlan {
  Value *dest, *data, *idx, *upd;
  const Type *dt, *it;
  const char *is, *vs; ///< kernel suffixes of Indices' and Data's kinds
  int64_t code;        ///< reductionCode
  bool same;           ///< the result is Data's buffer
};

Expected<Emitter::ScatterPlan> Emitter::scatterPlan(Instruction *I, Value *dest, Value *data,
                                                    Value *idx, Value *upd,
                                                    const std::string &red) {
  ScatterPlan p{dest, data, idx, upd, data->getType(), idx->getType(), indexSuffix(idx->getType()->kind),
                scatterSuffix(data->getType()->kind, red), reductionCode(red), false};
  if (!p.is || !p.vs || p.code < 0 || dest->getType()->kind != p.dt->kind ||
      upd->getType()->kind != p.dt->kind)
    return unsupported(I);
  if (dest->getType()->numElements() != p.dt->numElements())
    return makeError(ErrorCode::InvalidArgument, "CPU backend: ", I->getKindName(), " '",
                     I->getName(), "': result ", dest->getType()->toString(),
                     " does not fit Data ", p.dt->toString());
  KILN_ASSIGN_OR_RETURN(Location dl, loc(dest));
  KILN_ASSIGN_OR_RETURN(Location sl, loc(data));
  p.same = dl == sl;
  return p;
}

void Emitter::copyData(const ScatterPlan &p) {
  uint64_t bytes = p.dt->sizeInBytes();
  if (!p.same && bytes)
    memCopy(ptr(p.dest), ptr(p.data), bytes);
}

/// ScatterElements: Data copied to the result (unless in place), then one kernel combines
/// the updates in row-major order of Indices.
Error Emitter::planScatterElements(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *s = cast<ScatterElementsInst>(I);
  KILN_ASSIGN_OR_RETURN(ScatterPlan p, scatterPlan(I, s->getDest(), s->getData(),
                                                   s->getIndices(), s->getUpdates(),
                                                   s->getReduction()));
  const Type &dt = *p.dt, &it = *p.it;
  auto d = dimsOf(p.data), id = dimsOf(p.idx);
  size_t axis = s->getAxis();
  bool ok = axis < d.size() && d.size() <= 16 && dimsOf(p.upd) == id && id.size() == d.size();
  for (size_t k = 0; ok && k < d.size(); k++)
    ok = k == axis || id[k] <= d[k];
  if (!ok)
    return makeError(ErrorCode::InvalidArgument, "CPU backend: ScatterElements '",
                     I->getName(), "': Indices ", it.toString(), " and Updates ",
                     p.upd->getType()->toString(), " do not fit Data ", dt.toString());
  int64_t count = int64_t(it.numElements());
  int64_t check = count ? addRunCheck(indexCheck(I, it, d[axis], dt)) : 0;
  std::string fn = std::string("libjit_scatter_elements_") + p.vs + "_" + p.is;
  auto strides = stridesOf(d);
  serial("scatterelements", [=] {
    copyData(p);
    if (count)
      call(fn, {ptr(p.dest), ptr(p.idx), ptr(p.upd), i64Array(id), i64Array(strides),
                I64(int64_t(d.size())), I64(int64_t(axis)), I64(d[axis]), I64(p.code),
                statusPtr(), I64(check)});
  });
  return Error::success();
}

/// ScatterND: Data copied to the result (unless in place), then the update slices
/// combined in tuple order.
Error Emitter::planScatterND(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *s = cast<ScatterNDInst>(I);
  KILN_ASSIGN_OR_RETURN(ScatterPlan p, scatterPlan(I, s->getDest(), s->getData(),
                                                   s->getIndices(), s->getUpdates(),
                                                   s->getReduction()));
  const Type &dt = *p.dt, &it = *p.it;
  auto d = dimsOf(p.data), id = dimsOf(p.idx);
  bool ok = !id.empty() && id.back() >= 0 && size_t(id.back()) <= d.size();
  size_t k = ok ? size_t(id.back()) : 0;
  int64_t slice = ok ? product(d, k) : 0;
  int64_t tuples = ok ? (k ? int64_t(it.numElements()) / int64_t(k) : product(id)) : 0;
  ok = ok && int64_t(p.upd->getType()->numElements()) == tuples * slice;
  if (!ok)
    return makeError(ErrorCode::InvalidArgument, "CPU backend: ScatterND '", I->getName(),
                     "': Indices ", it.toString(), " and Updates ",
                     p.upd->getType()->toString(), " do not fit Data ", dt.toString());
  auto strides = stridesOf(d);
  int64_t check = 0;
  for (size_t m = 0; m < k && tuples; m++) {
    int64_t c = addRunCheck(indexCheck(I, it, d[m], dt));
    check = m == 0 ? c : check;
  }
  std::vector<int64_t> kd(d.begin(), d.begin() + k), ks(strides.begin(), strides.begin() + k);
  // k == 0: every tuple names the whole of Data (no entries to read or check).
  if (kd.empty()) {
    kd.push_back(1);
    ks.push_back(0);
  }
  std::string fn = std::string("libjit_scatter_nd_") + p.vs + "_" + p.is;
  serial("scatternd", [=] {
    copyData(p);
    if (tuples && slice)
      call(fn, {ptr(p.dest), ptr(p.idx), ptr(p.upd), I64(tuples), I64(int64_t(k)), i64Array(kd),
                i64Array(ks), I64(slice), I64(p.code), statusPtr(), I64(check)});
  });
  return Error::success();
}

/// CumSum: [outer, size, inner] around Axis; float accumulates in float, integers wrap.
Error Emitter::planCumSum(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *c = cast<CumSumInst>(I);
  Value *dest = c->getDest(), *in = c->getInput();
  const Type &t = *in->getType();
  ElemKind k = t.kind;
  if ((k != ElemKind::Float && k != ElemKind::Int32I && k != ElemKind::Int64I) ||
      dest->getType()->kind != k)
    return unsupported(I);
  auto d = dimsOf(in);
  size_t axis = c->getAxis();
  if (axis >= d.size() || dimsOf(dest) != d)
    return makeError(ErrorCode::InvalidArgument, "CPU backend: CumSum '", I->getName(),
                     "': axis ", axis, " of ", t.toString(), " into ",
                     dest->getType()->toString());
  int64_t outer = product(d, 0, axis), size = d[axis], inner = product(d, axis + 1);
  if (outer * size * inner == 0)
    return Error::success();
  std::string fn = std::string("libjit_cumsum_") + valueSuffix(k);
  bool excl = c->getExclusive(), rev = c->getReverse();
  serial("cumsum", [=] {
    call(fn, {ptr(dest), ptr(in), I64(outer), I64(size), I64(inner), I64(excl), I64(rev)});
  });
  return Error::success();
}

/// GridSample on f32: one kernel over the batch (libjit_sample.cpp).
Error Emitter::planGridSample(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *g = cast<GridSampleInst>(I);
  Value *dest = g->getDest(), *in = g->getInput(), *grid = g->getGrid();
  const std::string mode = g->getMode(), pad = g->getPaddingMode();
  int64_t m = mode == "bilinear" ? 0 : mode == "nearest" ? 1 : mode == "bicubic" ? 2 : -1;
  int64_t p = pad == "zeros" ? 0 : pad == "border" ? 1 : pad == "reflection" ? 2 : -1;
  if (in->getType()->kind != ElemKind::Float || grid->getType()->kind != ElemKind::Float ||
      dest->getType()->kind != ElemKind::Float || m < 0 || p < 0)
    return unsupported(I);
  auto id = dimsOf(in), gd = dimsOf(grid), od = dimsOf(dest);
  if (id.size() != 4 || gd.size() != 4 || gd[0] != id[0] || gd[3] != 2 ||
      od != std::vector<int64_t>({id[0], id[1], gd[1], gd[2]}))
    return makeError(ErrorCode::InvalidArgument, "CPU backend: GridSample '", I->getName(),
                     "': Input ", in->getType()->toString(), ", Grid ",
                     grid->getType()->toString(), " and result ", dest->getType()->toString(),
                     " do not fit");
  if (product(od) == 0)
    return Error::success();
  bool align = g->getAlignCorners();
  serial("gridsample", [=] {
    call("libjit_grid_sample_f32", {ptr(dest), ptr(in), ptr(grid), I64(id[0]), I64(id[1]),
                                    I64(id[2]), I64(id[3]), I64(gd[1]), I64(gd[2]), I64(m),
                                    I64(p), I64(align)});
  });
  return Error::success();
}

/// RoiAlign on f32 with Int32 or Int64 batch indices (libjit_sample.cpp); a batch index
/// out of range fails the run.
Error Emitter::planRoiAlign(Instruction *I, std::vector<Item> &items) {
  auto serial = serialTo(items);
  auto *r = cast<RoiAlignInst>(I);
  Value *dest = r->getDest(), *in = r->getInput(), *rois = r->getRois(),
        *bidx = r->getBatchIndices();
  const char *is = indexSuffix(bidx->getType()->kind);
  const std::string mode = r->getMode();
  if (in->getType()->kind != ElemKind::Float || rois->getType()->kind != ElemKind::Float ||
      dest->getType()->kind != ElemKind::Float || !is || (mode != "avg" && mode != "max"))
    return unsupported(I);
  auto id = dimsOf(in), rd = dimsOf(rois);
  int64_t oh = int64_t(r->getOutputHeight()), ow = int64_t(r->getOutputWidth());
  if (id.size() != 4 || rd.size() != 2 || rd[1] != 4 ||
      int64_t(bidx->getType()->numElements()) != rd[0] ||
      dimsOf(dest) != std::vector<int64_t>({rd[0], id[1], oh, ow}))
    return makeError(ErrorCode::InvalidArgument, "CPU backend: RoiAlign '", I->getName(),
                     "': Input ", in->getType()->toString(), ", Rois ",
                     rois->getType()->toString(), " and result ", dest->getType()->toString(),
                     " do not fit");
  if (product(dimsOf(dest)) == 0)
    return Error::success();
  int64_t check = addRunCheck({"RoiAlign '" + I->getName() + "': batch index ",
                               " of BatchIndices " + bidx->getType()->toString() +
                                   " is out of range for Input " + in->getType()->toString()});
  std::string fn = std::string("libjit_roi_align_f32_") + is;
  int64_t ratio = int64_t(r->getSamplingRatio());
  double scale = double(r->getSpatialScale());
  bool half = r->getHalfPixel(), isMax = mode == "max";
  serial("roialign", [=] {
    call(fn, {ptr(dest), ptr(in), ptr(rois), ptr(bidx), I64(rd[0]), I64(id[0]), I64(id[1]),
              I64(id[2]), I64(id[3]), I64(oh), I64(ow), I64(ratio),
              llvm::ConstantFP::get(B_.getDoubleTy(), scale), I64(half), I64(isMax),
              statusPtr(), I64(check)});
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
      memCopy(ptr(dest), ptr(big), bytes);
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
  t[InstrKind::GatherElements] = &Emitter::planGatherElements;
  t[InstrKind::GatherND] = &Emitter::planGatherND;
  t[InstrKind::ScatterElements] = &Emitter::planScatterElements;
  t[InstrKind::ScatterND] = &Emitter::planScatterND;
  t[InstrKind::CumSum] = &Emitter::planCumSum;
  t[InstrKind::GridSample] = &Emitter::planGridSample;
  t[InstrKind::RoiAlign] = &Emitter::planRoiAlign;
}

} // namespace kiln::cpu
