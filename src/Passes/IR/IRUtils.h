/// \file
/// Helpers shared by the IR passes (private to src/Passes/IR): buffer roots, use lists
/// with instruction positions, and edits that keep allocs and deallocs around their uses.
#ifndef KILN_SRC_PASSES_IR_IRUTILS_H
#define KILN_SRC_PASSES_IR_IRUTILS_H

#include "kiln/IR/IR.h"

#include <unordered_map>
#include <vector>

namespace kiln::irutil {

/// The buffer \p v lives in: a WeightVar or an AllocActivation, looking through views.
Value *getRoot(Value *v);
const Value *getRoot(const Value *v);

/// AllocActivation, DeallocActivation and TensorView: they define or end buffers but
/// touch no data.
bool isMemoryInstr(const Instruction *I);

/// True when operand value \p v (a buffer or a view) covers every byte of its root.
bool coversRoot(const Value *v);

/// True when \p I writes through operand \p i (@out or @inout).
inline bool writes(const Instruction *I, unsigned i) {
  return I->getOperand(i).second != OperandKind::In;
}
/// True when \p I reads through operand \p i (@in or @inout).
inline bool reads(const Instruction *I, unsigned i) {
  return I->getOperand(i).second != OperandKind::Out;
}

/// One operand of a data instruction that touches a buffer (directly or through views).
struct Use {
  Instruction *I;
  unsigned op;
  size_t pos; ///< Position of I in the function.
  bool isRead() const { return reads(I, op); }
  bool isWrite() const { return writes(I, op); }
};

/// Everything that touches one buffer.
struct BufferInfo {
  Value *root = nullptr;
  AllocActivationInst *alloc = nullptr;     ///< Null for weights.
  DeallocActivationInst *dealloc = nullptr; ///< Null for weights or when missing.
  std::vector<TensorViewInst *> views;      ///< All views of the root, transitively.
  std::vector<Use> uses;                    ///< Operand uses by data instructions, in order.

  bool isActivation() const { return alloc != nullptr; }
  /// Positions of the first and last data instruction that uses the buffer; npos if none.
  size_t firstUse() const { return uses.empty() ? npos : uses.front().pos; }
  size_t lastUse() const { return uses.empty() ? npos : uses.back().pos; }
  /// True when some use at a position in (from, to) reads (\p wantRead) or writes
  /// (\p wantWrite) the buffer.
  bool touchedBetween(size_t from, size_t to, bool wantRead, bool wantWrite) const;
  static constexpr size_t npos = size_t(-1);
};

/// The uses of every buffer of a function. A snapshot: rebuild it after editing.
class BufferUses {
public:
  explicit BufferUses(IRFunction &F);
  /// The info of the buffer rooted at \p root (a WeightVar or AllocActivation), or null.
  BufferInfo *get(const Value *root);
  /// Position of \p I in the function.
  size_t pos(const Instruction *I) const { return pos_.at(I); }
  /// Activations in allocation order.
  const std::vector<BufferInfo *> &activations() const { return acts_; }

private:
  std::unordered_map<const Value *, BufferInfo> infos_;
  std::unordered_map<const Instruction *, size_t> pos_;
  std::vector<BufferInfo *> acts_;
};

/// The iterator of \p I in \p F (which must contain it).
IRFunction::InstrList::iterator find(IRFunction &F, const Instruction *I);
/// Deletes \p I from \p F.
void erase(IRFunction &F, const Instruction *I);
/// Moves \p I to just before \p where (or to the end when \p where is null).
void moveBefore(IRFunction &F, const Instruction *I, const Instruction *where);
/// Moves \p I to just after \p where.
void moveAfter(IRFunction &F, const Instruction *I, const Instruction *where);

/// Points every operand equal to \p from (including TensorView sources) at \p to.
void replaceAllUsesWith(IRFunction &F, Value *from, Value *to);

/// Puts the AllocActivation of \p A just before the first instruction that touches it
/// (a use or a view definition) and its DeallocActivation just after the last one.
void fixLifetime(IRFunction &F, AllocActivationInst *A);

/// Deletes the alloc and the dealloc of activation \p A (which must be unused).
void eraseActivation(IRFunction &F, AllocActivationInst *A);

} // namespace kiln::irutil

#endif // KILN_SRC_PASSES_IR_IRUTILS_H
