// IR pass `insert-extract-to-views`: a Slice extracts, and a Concat inserts, blocks of a
// tensor. When a block is contiguous in memory (every dimension before the sliced one
// has extent 1 and every dimension after it is whole: "the outermost dimension" once unit
// dimensions are ignored), the copy can go:
//  - Slice @out %b, @in %x: %b becomes a TensorView of %x at Starts, provided %b is
//    written only by the Slice and %x's buffer is not written while %b is in use.
//  - Concat @out %c, @in %a0, @in %a1...: each %ai becomes a TensorView of %c at its
//    offset, so producers write straight into %c, provided every %ai is an activation
//    used for the last time by the Concat and %c is not used before it.
//  - A Concat whose operands are already adjacent views of one buffer, in order, is itself
//    a view of that buffer, provided nothing writes that block while %c is in use. In a
//    densely connected block every layer concatenates all the features before it: once
//    the block's last Concat has taken the features in place, each earlier Concat is a
//    prefix of the same buffer, and the block copies nothing.

#include "InsertExtractToViews.h"

#include "IRUtils.h"

#include <memory>
#include <unordered_set>

namespace kiln {

namespace {

using namespace irutil;

/// True when the block [starts, ends) of a row-major tensor of \p dims is one contiguous
/// range of memory (and not empty).
bool isContiguousBlock(const Dims &dims, const std::vector<dim_t> &starts,
                       const std::vector<dim_t> &ends) {
  size_t r = dims.size();
  if (starts.size() != r || ends.size() != r)
    return false;
  for (size_t i = 0; i < r; i++)
    if (ends[i] <= starts[i] || ends[i] > dims[i])
      return false;
  if (r == 0)
    return true;
  for (size_t j = 0; j < r; j++) {
    bool ok = true;
    for (size_t i = 0; i < j && ok; i++)
      ok = ends[i] - starts[i] == 1;
    for (size_t i = j + 1; i < r && ok; i++)
      ok = starts[i] == 0 && ends[i] == dims[i];
    if (ok)
      return true;
  }
  return false;
}

/// True when elements of \p a and \p b mean the same: a view reinterprets the raw values,
/// so a quantized block with other scale or offset than its buffer cannot be one.
bool sameElemType(const Type &a, const Type &b) {
  return a.kind == b.kind &&
         (!a.isQuantizedType() || (a.scale == b.scale && a.offset == b.offset));
}

// Each of the three rewrites checks what the instruction alone says before it looks at the
// function's buffer uses, which are collected once and again only after a rewrite changed
// the function (BufferUses walks every instruction; most attempts fail and change nothing:
// collecting the uses for each Slice and Concat made the pass quadratic in the function's
// length, 15 ms of swin_t's compile and 17 of densenet121's).

/// The function's buffer uses, collected on first use after a change.
class UsesCache {
public:
  explicit UsesCache(IRFunction &F) : F_(F) {}
  BufferUses &get() {
    if (!bu_)
      bu_ = std::make_unique<BufferUses>(F_);
    return *bu_;
  }
  /// The function changed: the uses are collected again when next asked for.
  void invalidate() { bu_.reset(); }

private:
  IRFunction &F_;
  std::unique_ptr<BufferUses> bu_;
};

bool sliceToView(IRFunction &F, SliceInst *S, UsesCache &uses) {
  auto *B = dyn_cast<AllocActivationInst>(S->getDest());
  if (!B)
    return false;
  Value *X = S->getInput();
  if (!sameElemType(*X->getType(), *B->getType()) ||
      !isContiguousBlock(X->getType()->dims, S->getStarts(), S->getEnds()))
    return false;
  BufferUses &bu = uses.get();
  BufferInfo *bi = bu.get(B);
  for (const Use &u : bi->uses)
    if (u.isWrite() && u.I != S)
      return false;
  BufferInfo *xi = bu.get(getRoot(X));
  size_t end = bi->lastUse() == BufferInfo::npos ? bu.pos(S) : bi->lastUse();
  if (xi->touchedBetween(bu.pos(S), end + 1, /*read=*/false, /*write=*/true))
    return false;
  auto *V = F.insert(find(F, S), new TensorViewInst(B->getName() + ".view", B->getType(), X,
                                                    S->getStarts()));
  replaceAllUsesWith(F, B, V);
  erase(F, S);
  eraseActivation(F, B);
  if (auto *XA = dyn_cast<AllocActivationInst>(xi->root))
    fixLifetime(F, XA);
  uses.invalidate();
  return true;
}

bool concatToViews(IRFunction &F, ConcatInst *C, UsesCache &uses) {
  auto *Cbuf = dyn_cast<AllocActivationInst>(C->getDest());
  if (!Cbuf)
    return false;
  const Dims &cd = Cbuf->getType()->dims;
  size_t axis = C->getAxis();
  std::vector<Value *> ins = C->getInputs();
  std::unordered_set<Value *> seen;
  std::vector<std::vector<dim_t>> offsets;
  dim_t at = 0;
  for (Value *a : ins) {
    auto *A = dyn_cast<AllocActivationInst>(a);
    if (!A || !seen.insert(A).second)
      return false;
    const Dims &ad = A->getType()->dims;
    if (ad.size() != cd.size() || axis >= cd.size() ||
        !sameElemType(*A->getType(), *Cbuf->getType()))
      return false;
    std::vector<dim_t> starts(cd.size(), 0), ends(cd.begin(), cd.end());
    starts[axis] = at;
    ends[axis] = at + ad[axis];
    if (!isContiguousBlock(cd, starts, ends))
      return false;
    offsets.push_back(starts);
    at += ad[axis];
  }
  BufferUses &bu = uses.get();
  BufferInfo *ci = bu.get(Cbuf);
  if (ci->uses.empty() || ci->uses.front().I != C)
    return false;
  AllocActivationInst *firstAlloc = nullptr;
  for (Value *a : ins) {
    auto *A = cast<AllocActivationInst>(a);
    BufferInfo *ai = bu.get(A);
    if (ai->uses.empty() || ai->uses.back().I != C)
      return false;
    if (!firstAlloc || bu.pos(A) < bu.pos(firstAlloc))
      firstAlloc = A;
  }
  if (!firstAlloc)
    return false;
  moveBefore(F, Cbuf, firstAlloc);
  for (size_t i = 0; i < ins.size(); i++) {
    auto *A = cast<AllocActivationInst>(ins[i]);
    auto *V = F.insert(find(F, A), new TensorViewInst(A->getName() + ".view", A->getType(),
                                                      Cbuf, offsets[i]));
    replaceAllUsesWith(F, A, V);
    eraseActivation(F, A);
  }
  erase(F, C);
  fixLifetime(F, Cbuf);
  uses.invalidate();
  return true;
}

/// The elements [begin, end) of its root buffer that \p v covers (a view is a contiguous
/// block of its source, read from the linear offset of its Offsets).
std::pair<dim_t, dim_t> rootRange(const Value *v) {
  dim_t begin = elementOffsetInRoot(v);
  return {begin, begin + v->getType()->numElements()};
}

/// True when some instruction at a position in (from, to] writes elements [begin, end)
/// of the buffer \p bi.
bool blockWrittenBetween(const BufferInfo &bi, size_t from, size_t to, dim_t begin, dim_t end) {
  for (const Use &u : bi.uses) {
    if (u.pos <= from || u.pos > to || !u.isWrite())
      continue;
    auto [b, e] = rootRange(u.I->getOperand(u.op).first);
    if (b < end && begin < e)
      return true;
  }
  return false;
}

bool concatOfViewsToView(IRFunction &F, ConcatInst *C, UsesCache &uses) {
  auto *Cbuf = dyn_cast<AllocActivationInst>(C->getDest());
  std::vector<Value *> ins = C->getInputs();
  if (!Cbuf || ins.empty() || !isa<TensorViewInst>(ins[0]))
    return false;
  Value *src = cast<TensorViewInst>(ins[0])->getSrc();
  const Dims &cd = Cbuf->getType()->dims;
  size_t axis = C->getAxis();
  dim_t begin = rootRange(ins[0]).first, at = begin, along = 0;
  for (Value *a : ins) {
    auto *V = dyn_cast<TensorViewInst>(a);
    if (!V || V->getSrc() != src || !sameElemType(*V->getType(), *Cbuf->getType()) ||
        V->getType()->dims.size() != cd.size() || axis >= cd.size())
      return false;
    // The operand's block of the Concat's result is contiguous there, and the operand
    // follows the one before it in the buffer: the result is the buffer's elements as
    // they lie.
    std::vector<dim_t> starts(cd.size(), 0), ends(cd.begin(), cd.end());
    starts[axis] = along;
    ends[axis] = along += V->getType()->dims[axis];
    auto [b, e] = rootRange(V);
    if (!isContiguousBlock(cd, starts, ends) || b != at)
      return false;
    at = e;
  }
  if (at - begin != Cbuf->getType()->numElements())
    return false;
  BufferUses &bu = uses.get();
  BufferInfo *ci = bu.get(Cbuf);
  for (const Use &u : ci->uses)
    if (u.isWrite() && u.I != C)
      return false;
  BufferInfo *ri = bu.get(getRoot(src));
  if (!ri || blockWrittenBetween(*ri, bu.pos(C), ci->lastUse(), begin, at))
    return false;
  auto *V = F.insert(find(F, C), new TensorViewInst(Cbuf->getName() + ".view", Cbuf->getType(),
                                                    src, cast<TensorViewInst>(ins[0])->getOffsets()));
  replaceAllUsesWith(F, Cbuf, V);
  erase(F, C);
  eraseActivation(F, Cbuf);
  if (auto *RA = dyn_cast<AllocActivationInst>(ri->root))
    fixLifetime(F, RA);
  uses.invalidate();
  return true;
}

} // namespace

bool insertExtractToViews(IRFunction &F) {
  bool changed = false;
  UsesCache uses(F);
  std::vector<ConcatInst *> concats;
  std::vector<Instruction *> work;
  for (auto &ip : F.getInstrs())
    if (isa<SliceInst>(ip.get()) || isa<ConcatInst>(ip.get()))
      work.push_back(ip.get());
  for (Instruction *I : work) {
    if (auto *S = dyn_cast<SliceInst>(I))
      changed |= sliceToView(F, S, uses);
    else if (concatToViews(F, cast<ConcatInst>(I), uses))
      changed = true;
    else
      concats.push_back(cast<ConcatInst>(I));
  }
  // The Concats left whose operands have become views: each success can make another
  // Concat's operands views (nested Concats), so until none changes.
  for (bool more = true; more;) {
    more = false;
    for (auto it = concats.begin(); it != concats.end();)
      if (concatOfViewsToView(F, *it, uses)) {
        it = concats.erase(it);
        more = changed = true;
      } else {
        ++it;
      }
  }
  return changed;
}

} // namespace kiln
