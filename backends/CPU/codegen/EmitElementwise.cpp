// Element-wise instructions: the default kernel of a data-parallel instruction comes from
// the operator table (libjit_elem_<lower-case kind>_<kind>, its float and Bool attributes
// appended as arguments); only exceptions are listed here. Chains of them become one loop.
#include "Emitter.h"

#include "backends/CPU/libjit/libjit_ewloops.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>

namespace kiln::cpu {

namespace {

/// Collects an instruction's float and Bool attributes in table order (Clip: Min, Max;
/// LeakyRelu: Alpha; Gelu: Approximate; Mod: Fmod; BitShift: Left); any other kind of attribute means the
/// default kernel does not apply.
class FloatAttrs : public AttrVisitor {
public:
  std::vector<ElemOp::Attr> values;
  bool other = false;
  void visit(const char *, dim_t &) override { other = true; }
  void visit(const char *, int64_t &) override { other = true; }
  void visit(const char *, float &v) override { values.push_back({false, v}); }
  void visit(const char *, bool &v) override { values.push_back({true, v ? 1.0f : 0.0f}); }
  void visit(const char *, std::vector<dim_t> &) override { other = true; }
  void visit(const char *, std::vector<int64_t> &) override { other = true; }
  void visit(const char *, std::string &) override { other = true; }
};

} // namespace

llvm::Type *Emitter::elemType(ElemKind k) {
  switch (k) {
  case ElemKind::Float:
    return f32_;
  case ElemKind::Int32I:
    return llvm::Type::getInt32Ty(ctx_);
  case ElemKind::Int64I:
    return i64_;
  case ElemKind::Bool:
    return i8_;
  case ElemKind::Float16:
  case ElemKind::BFloat16:
    return llvm::Type::getInt16Ty(ctx_); // stored bits; only ConvertTo computes on them
  default:
    return nullptr;
  }
}

bool Emitter::elemOpOf(Instruction *I, ElemOp &op) {
  if (!I->isDataParallel() || I->getNumOperands() < 2)
    return false;
  // Every operand must be of a kind the kernels have, and the kernel found must take and
  // return exactly those types.
  for (const auto &o : I->getOperands())
    if (!o.first->getType() || !elemType(o.first->getType()->kind))
      return false;
  ElemKind in = I->getOperand(I->getNumOperands() - 1).first->getType()->kind;
  ElemKind out = I->getOperand(0).first->getType()->kind;
  FloatAttrs attrs;
  I->visitAttrs(attrs);
  if (attrs.other)
    return false;
  // libjit_elem_<lower-case kind>_<operand kind>, or ..._<operand kind>_<result kind>
  // where the result's kind is the kernel's own (ConvertTo).
  std::string name = "libjit_elem_";
  for (const char *c = I->getKindName(); *c; c++)
    name += char(std::tolower(static_cast<unsigned char>(*c)));
  name += std::string("_") + kindSuffix(in);
  if (!M_.getFunction(name))
    name += std::string("_") + kindSuffix(out);
  // Data-parallel kinds without a kernel are not element-wise here; plan() reports them
  // unsupported.
  llvm::Function *f = M_.getFunction(name);
  if (!f || f->arg_size() != I->getNumOperands() - 1 + attrs.values.size() ||
      f->getReturnType() != elemType(out))
    return false;
  for (unsigned k = 1; k < I->getNumOperands(); k++)
    if (f->getFunctionType()->getParamType(k - 1) !=
        elemType(I->getOperand(k).first->getType()->kind))
      return false;
  for (size_t a = 0; a < attrs.values.size(); a++)
    if (f->getFunctionType()->getParamType(I->getNumOperands() - 1 + a) !=
        (attrs.values[a].isBool ? llvm::Type::getInt1Ty(ctx_) : f32_))
      return false;
  op.fn = std::move(name);
  op.attrs = std::move(attrs.values);
  return true;
}

void Emitter::inlineKernel(const std::string &name) {
  // The kernels are compiled freestanding, which marks them "no-builtins"; LLVM does not
  // inline such a function into a caller without the attribute (the stage), so every
  // element of a chain used to be a scalar call and no loop was vectorised. These
  // functions have no loops (nothing a builtin could replace), so the attribute goes, and
  // they must be inlined for the loop to vectorise.
  if (llvm::Function *f = M_.getFunction(name)) {
    f->removeFnAttr("no-builtins");
    f->addFnAttr(llvm::Attribute::AlwaysInline);
  }
}

bool Emitter::isFusableSplat(Instruction *I) {
  auto *sp = dyn_cast<SplatInst>(I);
  return sp && elemType(sp->getDest()->getType()->kind);
}

llvm::Constant *Emitter::splatConstant(ElemKind k, float v) {
  // As the Interpreter's Splat (ConvertTo of the float value): integers round to nearest
  // even and saturate, NaN becomes 0; Bool is v != 0.
  auto toInt = [&](double lo, double hiExclusive) -> int64_t {
    if (std::isnan(v))
      return 0;
    double r = std::nearbyint(double(v));
    if (r < lo)
      return int64_t(lo);
    if (r >= hiExclusive)
      return hiExclusive == 9223372036854775808.0 ? INT64_MAX : int64_t(hiExclusive) - 1;
    return int64_t(r);
  };
  switch (k) {
  case ElemKind::Int32I:
    return llvm::ConstantInt::get(elemType(k), uint64_t(toInt(-2147483648.0, 2147483648.0)), true);
  case ElemKind::Int64I:
    return llvm::ConstantInt::get(
        elemType(k), uint64_t(toInt(-9223372036854775808.0, 9223372036854775808.0)), true);
  case ElemKind::Bool:
    return llvm::ConstantInt::get(elemType(k), v != 0.0f ? 1 : 0);
  case ElemKind::Float16:
    return llvm::ConstantInt::get(elemType(k), float16(v).bits());
  case ElemKind::BFloat16:
    return llvm::ConstantInt::get(elemType(k), bfloat16(v).bits());
  default:
    return llvm::ConstantFP::get(f32_, v);
  }
}

bool Emitter::isFusableBroadcast(Instruction *I) {
  auto *bc = dyn_cast<BroadcastInst>(I);
  if (!bc || !elemType(bc->getDest()->getType()->kind) ||
      bc->getDest()->getType()->kind != bc->getInput()->getType()->kind)
    return false;
  auto id = dimsOf(bc->getInput()), od = dimsOf(bc->getDest());
  if (id.size() > od.size())
    return false;
  size_t shift = od.size() - id.size();
  for (size_t d = 0; d < id.size(); d++)
    if (id[d] != 1 && id[d] != od[shift + d])
      return false;
  return true;
}

namespace {

/// The longest broadcast row that LLVM could unroll fully before vectorising (its full
/// unroll threshold is a few hundred instructions; a chain's element is several).
constexpr int64_t kShortRow = 64;

/// The iteration space of a chain that reads broadcasts: the broadcast result's dims with
/// runs of dimensions merged wherever every broadcast source steps through them as one
/// (both broadcast, or both contiguous), and each source's element stride per merged
/// dimension (0 where it is broadcast). The innermost stride is 0 or 1.
struct BroadcastSpace {
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides; // per broadcast, per merged dim
};

BroadcastSpace broadcastSpace(const std::vector<BroadcastInst *> &bcs) {
  BroadcastSpace s;
  auto od = dimsOf(bcs.front()->getDest());
  std::vector<std::vector<int64_t>> full;
  for (BroadcastInst *b : bcs) {
    auto id = dimsOf(b->getInput());
    auto is = stridesOf(id);
    std::vector<int64_t> st(od.size(), 0);
    size_t shift = od.size() - id.size();
    for (size_t d = 0; d < id.size(); d++)
      st[shift + d] = id[d] == 1 ? 0 : is[d];
    full.push_back(st);
  }
  s.strides.assign(bcs.size(), {});
  for (size_t d = 0; d < od.size(); d++) {
    if (od[d] == 1)
      continue;
    bool merge = !s.dims.empty();
    for (size_t b = 0; merge && b < bcs.size(); b++)
      merge = s.strides[b].back() == full[b][d] * od[d];
    if (merge) {
      s.dims.back() *= od[d];
      for (size_t b = 0; b < bcs.size(); b++)
        s.strides[b].back() = full[b][d];
    } else {
      s.dims.push_back(od[d]);
      for (size_t b = 0; b < bcs.size(); b++)
        s.strides[b].push_back(full[b][d]);
    }
  }
  if (s.dims.empty()) {
    s.dims.push_back(1);
    for (auto &st : s.strides)
      st.push_back(0);
  }
  return s;
}

/// Thread tid's share [begin, end) of \p total items among nth threads, in whole multiples
/// of \p unit items (the last share may be shorter, late ones empty).
std::pair<llvm::Value *, llvm::Value *> threadShare(llvm::IRBuilder<> &B, llvm::Value *tid,
                                                    llvm::Value *nth, int64_t total,
                                                    int64_t unit) {
  llvm::Type *i64 = tid->getType();
  auto c = [&](int64_t v) { return llvm::ConstantInt::get(i64, v); };
  llvm::Value *per = B.CreateUDiv(B.CreateAdd(c(total), B.CreateSub(nth, c(1))), nth);
  per = B.CreateMul(B.CreateUDiv(B.CreateAdd(per, c(unit - 1)), c(unit)), c(unit));
  llvm::Value *begin = B.CreateMul(tid, per);
  begin = B.CreateSelect(B.CreateICmpULT(begin, c(total)), begin, c(total));
  llvm::Value *end = B.CreateAdd(begin, per);
  end = B.CreateSelect(B.CreateICmpULT(end, c(total)), end, c(total));
  return {begin, end};
}

/// Emits `for (i = lo; i < hi; i++) body(i)` at \p B's insertion point and leaves it after
/// the loop; the body may add blocks. With \p access, the memory accesses of that group are
/// declared independent across iterations (llvm.loop.parallel_accesses). The loops the
/// vectoriser makes of it are not unrolled (llvm.loop.vectorize.followup_all: unroll
/// disabled on the vector and remainder loops; the vectoriser's own interleaving, which an
/// unroll.disable on the loop itself would turn off, stays): a chain's loop streams memory,
/// and with a constant trip count LLVM's unroller used to copy the vectorised body up to 28
/// times, blocks of ~850 instructions whose instruction selection was most of a cold
/// compile (figures in backends/CPU/README.md, "Compile time"). \p shortLoop: a loop of
/// a few constant iterations (broadcast rows of up to kShortRow elements) is not unrolled
/// at all: LLVM unrolls such a loop fully before the vectoriser sees it, and the SLP
/// vectoriser leaves a broadcast's straight-line copies scalar; its vectorised form gains
/// nothing from interleaving.
void emitCountedLoop(llvm::IRBuilder<> &B, llvm::Function *fn, llvm::Value *lo,
                     llvm::Value *hi, const char *name,
                     const std::function<void(llvm::Value *)> &body, llvm::MDNode *access,
                     bool shortLoop = false) {
  llvm::LLVMContext &ctx = B.getContext();
  llvm::BasicBlock *pre = B.GetInsertBlock();
  auto *loop = llvm::BasicBlock::Create(ctx, std::string(name) + ".loop", fn);
  auto *exit = llvm::BasicBlock::Create(ctx, std::string(name) + ".exit", fn);
  B.CreateCondBr(B.CreateICmpULT(lo, hi), loop, exit);
  B.SetInsertPoint(loop);
  llvm::PHINode *i = B.CreatePHI(lo->getType(), 2, name);
  i->addIncoming(lo, pre);
  body(i);
  llvm::Value *next = B.CreateAdd(i, llvm::ConstantInt::get(lo->getType(), 1));
  i->addIncoming(next, B.GetInsertBlock());
  auto *br = B.CreateCondBr(B.CreateICmpULT(next, hi), loop, exit);
  llvm::TempMDTuple tmp = llvm::MDTuple::getTemporary(ctx, {});
  llvm::Metadata *noUnroll = llvm::MDNode::get(ctx, {llvm::MDString::get(ctx, "llvm.loop.unroll.disable")});
  llvm::Metadata *followup[] = {llvm::MDString::get(ctx, "llvm.loop.vectorize.followup_all"),
                                noUnroll};
  // A loop without \p access (the rows of a broadcast chain) is not vectorised: its own
  // unrolling is disabled.
  std::vector<llvm::Metadata *> ops = {tmp.get(), access && !shortLoop
                                                       ? llvm::MDNode::get(ctx, followup)
                                                       : llvm::cast<llvm::MDNode>(noUnroll)};
  if (access) {
    llvm::Metadata *par[] = {llvm::MDString::get(ctx, "llvm.loop.parallel_accesses"), access};
    ops.push_back(llvm::MDNode::get(ctx, par));
  }
  llvm::MDNode *loopId = llvm::MDNode::getDistinct(ctx, ops);
  loopId->replaceOperandWith(0, loopId);
  br->setMetadata(llvm::LLVMContext::MD_loop, loopId);
  B.SetInsertPoint(exit);
}

} // namespace

/// The Broadcast and Splat results of the chain \p group that nothing outside it reads:
/// they are not stored (the chain uses the loaded value or the constant). Only an
/// activation's readers are all known from its users: a weight, or a view into another
/// buffer (a Reshape of the result written in place into an output), is always stored.
std::set<const Value *> Emitter::readOnlyInside(const std::vector<Instruction *> &group) {
  std::set<const Value *> inGroupOnly;
  for (Instruction *I : group) {
    if (!isa<BroadcastInst>(I) && !isa<SplatInst>(I))
      continue;
    const Value *dest = I->getOperand(0).first;
    bool outside = !isa<AllocActivationInst>(dest);
    for (const Instruction *U : usersOf(dest))
      if (U != I && !isa<DeallocActivationInst>(U) &&
          std::find(group.begin(), group.end(), U) == group.end())
        outside = true;
    if (!outside)
      inGroupOnly.insert(dest);
  }
  return inGroupOnly;
}

bool Emitter::unreadAfterChain(const std::vector<Instruction *> &group, const Value *v) {
  if (!isa<AllocActivationInst>(v))
    return false;
  // The users in program order (planItems), each once per operand that names v.
  const std::vector<const Instruction *> &users = usersOf(v);
  auto inGroup = [&](const Instruction *U) {
    return std::find(group.begin(), group.end(), U) != group.end();
  };
  size_t last = users.size();
  for (size_t i = 0; i < users.size(); i++) {
    if (isa<TensorViewInst>(users[i]))
      return false; // a view reads the buffer wherever its own users are
    if (inGroup(users[i]))
      last = i;
  }
  if (last == users.size())
    return false;
  for (size_t i = last + 1; i < users.size(); i++) {
    const Instruction *U = users[i];
    if (isa<DeallocActivationInst>(U))
      return true;
    // The next instruction that names the buffer must only write it (an @out operand:
    // the whole value), as the start of another value's life in it.
    for (const auto &o : U->getOperands())
      if (o.first == v && o.second != OperandKind::Out)
        return false;
    return true;
  }
  return true; // never named again
}

namespace {

/// Appends \p v's bits to a loop's key.
void keyBits(std::string &key, const void *v, size_t n) {
  key.append(static_cast<const char *>(v), n);
}

} // namespace

/// An element-wise chain as its loop function sees it: the broadcasts it reads (one shape
/// for all: run() groups them so), their merged iteration space (the loop becomes rows of
/// it, each broadcast source read at a row offset computed once per row, contiguously or as
/// one value within the row), the results only the chain reads (not stored), and the
/// function's parameters: one pointer per distinct location, in order of first use.
/// Constant rows of up to kShortRow elements are a loop that is not unrolled.
/// A space of two dimensions (rows of a channel vector, or of a value per row) takes its
/// row length and each broadcast's stride per row as arguments (rowArgs), so that the
/// same chain at other shapes calls the same function; deeper spaces keep them constant
/// (each row's coordinates come from divisions by the dimensions).
struct EwChain {
  const std::vector<Instruction *> &group;
  std::vector<BroadcastInst *> bcs;
  BroadcastSpace space;
  int64_t rows = 1, len = 0;
  bool rowArgs = false;
  bool shortRows = false;
  std::set<const Value *> inGroupOnly;
  std::vector<Location> params;
  std::map<const Value *, unsigned> paramOf; // each value's parameter

  explicit EwChain(const std::vector<Instruction *> &g) : group(g) {}
  unsigned param(const Value *v) const { return paramOf.at(v); }
};

std::string Emitter::ewChainKey(EwChain &c) {
  std::map<std::pair<unsigned, uint64_t>, unsigned> byLocation;
  auto param = [&](const Value *v) {
    Location l = *loc(v);
    auto it = byLocation.emplace(std::make_pair(l.base, l.offset), unsigned(c.params.size())).first;
    if (it->second == c.params.size())
      c.params.push_back(l);
    c.paramOf[v] = it->second;
    return it->second;
  };
  std::string key = c.bcs.empty() ? "flat|" : c.rowArgs ? "rows|" : "bcast|";
  auto keyInt = [&](int64_t v) { keyBits(key, &v, sizeof v); };
  if (c.rowArgs) {
    // Only whether each broadcast steps within a row: the rest is arguments.
    for (const auto &st : c.space.strides)
      keyInt(st.back());
  } else if (!c.bcs.empty()) {
    keyInt(int64_t(c.space.dims.size()));
    for (int64_t d : c.space.dims)
      keyInt(d);
    for (const auto &st : c.space.strides)
      for (int64_t x : st)
        keyInt(x);
  }
  for (Instruction *I : c.group) {
    key += '|';
    if (auto *b = dyn_cast<BroadcastInst>(I)) {
      key += "bc";
      keyInt(int64_t(b->getDest()->getType()->kind));
      keyInt(param(b->getInput()));
    } else if (auto *sp = dyn_cast<SplatInst>(I)) {
      key += "splat";
      keyInt(int64_t(sp->getDest()->getType()->kind));
      float v = sp->getValue();
      keyBits(key, &v, sizeof v);
    } else {
      ElemOp op;
      elemOpOf(I, op);
      key += op.fn;
      for (const ElemOp::Attr &a : op.attrs) {
        key += a.isBool ? 'b' : 'f';
        keyBits(key, &a.value, sizeof a.value);
      }
      for (unsigned k = 1; k < I->getNumOperands(); k++) {
        keyInt(int64_t(I->getOperand(k).first->getType()->kind));
        keyInt(param(I->getOperand(k).first));
      }
    }
    const Value *dest = I->getOperand(0).first;
    keyInt(int64_t(dest->getType()->kind));
    keyInt(param(dest));
    key += c.inGroupOnly.count(dest) ? 'r' : 's';
  }
  return key;
}

void Emitter::emitEwElement(const EwChain &c, const std::vector<llvm::Value *> &ptrs,
                            llvm::Value *i, llvm::Value *j,
                            const std::vector<llvm::Value *> &bcBase, llvm::MDNode *access) {
  std::map<unsigned, llvm::Value *> ssa; // by parameter
  auto elemPtr = [&](const Value *v, llvm::Type *t, llvm::Value *idx) {
    llvm::Value *p = B_.CreatePointerCast(ptrs[c.param(v)], t->getPointerTo());
    return B_.CreateInBoundsGEP(t, p, idx);
  };
  auto read = [&](const Value *v, llvm::Type *t) -> llvm::Value * {
    auto it = ssa.find(c.param(v));
    if (it != ssa.end() && it->second->getType() == t)
      return it->second;
    llvm::LoadInst *ld = B_.CreateLoad(t, elemPtr(v, t, i));
    ld->setMetadata(llvm::LLVMContext::MD_access_group, access);
    return ld;
  };
  auto write = [&](const Value *dest, llvm::Value *r) {
    if (!c.inGroupOnly.count(dest)) {
      llvm::StoreInst *st = B_.CreateStore(r, elemPtr(dest, r->getType(), i));
      st->setMetadata(llvm::LLVMContext::MD_access_group, access);
    }
    ssa[c.param(dest)] = r;
  };
  size_t nb = 0;
  for (Instruction *I : c.group) {
    if (auto *b = dyn_cast<BroadcastInst>(I)) {
      llvm::Type *t = elemType(b->getDest()->getType()->kind);
      llvm::Value *idx = bcBase[nb];
      if (c.space.strides[nb].back() != 0)
        idx = B_.CreateAdd(idx, j);
      nb++;
      llvm::LoadInst *ld = B_.CreateLoad(t, elemPtr(b->getInput(), t, idx));
      ld->setMetadata(llvm::LLVMContext::MD_access_group, access);
      write(b->getDest(), ld);
      continue;
    }
    if (auto *sp = dyn_cast<SplatInst>(I)) {
      write(sp->getDest(), splatConstant(sp->getDest()->getType()->kind, sp->getValue()));
      continue;
    }
    ElemOp op;
    elemOpOf(I, op);
    inlineKernel(op.fn);
    std::vector<llvm::Value *> args;
    for (unsigned k = 1; k < I->getNumOperands(); k++) {
      const Value *v = I->getOperand(k).first;
      args.push_back(read(v, elemType(v->getType()->kind)));
    }
    for (const ElemOp::Attr &a : op.attrs)
      args.push_back(a.isBool ? llvm::ConstantInt::get(llvm::Type::getInt1Ty(ctx_), a.value != 0)
                              : F32(a.value));
    llvm::Value *r = call(op.fn, args);
    if (!r)
      return;
    write(I->getOperand(0).first, r);
  }
}

namespace {

/// The scalar functions (libjit_elem_<op>_f32) of the shared loops, by kind of loop.
const std::set<std::string> &sharedUnaryOps() {
#define KILN_EW_OP(OP) #OP,
  static const std::set<std::string> ops = {LIBJIT_EW_UNARY_LOOPS(KILN_EW_OP)};
  return ops;
}
const std::set<std::string> &sharedBinaryOps() {
  static const std::set<std::string> ops = {LIBJIT_EW_BINARY_LOOPS(KILN_EW_OP)};
  return ops;
}
const std::set<std::string> &sharedRowOps() {
  static const std::set<std::string> ops = {LIBJIT_EW_ROW_LOOPS(KILN_EW_OP)};
#undef KILN_EW_OP
  return ops;
}

} // namespace

std::string Emitter::sharedEwLoop(const EwChain &c, std::vector<const Value *> &operands) {
  const std::vector<Instruction *> &g = c.group;
  // The operator of an element-wise instruction on floats with no attributes ("" else):
  // what the <op> of libjit_elem_<op>_f32 is.
  auto floatOp = [&](Instruction *I) -> std::string {
    ElemOp op;
    if (isa<BroadcastInst>(I) || isa<SplatInst>(I) || !elemOpOf(I, op) || !op.attrs.empty())
      return "";
    for (const auto &o : I->getOperands())
      if (o.first->getType()->kind != ElemKind::Float)
        return "";
    const std::string prefix = "libjit_elem_", suffix = "_f32";
    if (op.fn.size() <= prefix.size() + suffix.size() || op.fn.rfind(prefix, 0) != 0 ||
        op.fn.compare(op.fn.size() - suffix.size(), suffix.size(), suffix) != 0)
      return "";
    return op.fn.substr(prefix.size(), op.fn.size() - prefix.size() - suffix.size());
  };
  auto operand = [](Instruction *I, unsigned k) { return I->getOperand(k).first; };
  if (c.bcs.empty() && g.size() == 1) {
    std::string op = floatOp(g[0]);
    if (g[0]->getNumOperands() == 2 && sharedUnaryOps().count(op)) {
      operands = {operand(g[0], 1), operand(g[0], 0)};
      return "libjit_ew_" + op + "_f32";
    }
    if (g[0]->getNumOperands() == 3 && sharedBinaryOps().count(op)) {
      operands = {operand(g[0], 1), operand(g[0], 2), operand(g[0], 0)};
      return "libjit_ew_" + op + "_f32";
    }
    return "";
  }
  // x * sigmoid(x) (SiLU) is Swish, when nothing but the product reads the sigmoid's
  // result (the product overwrites its buffer, or nothing reads the buffer after the
  // chain: the loop function's store of it would be dead) and x is not that buffer.
  if (c.bcs.empty() && g.size() == 2 && floatOp(g[0]) == "sigmoid" && floatOp(g[1]) == "mul") {
    const Value *x = operand(g[0], 1), *t = operand(g[0], 0), *y = operand(g[1], 0);
    unsigned px = c.param(x), pt = c.param(t), pa = c.param(operand(g[1], 1)),
             pb = c.param(operand(g[1], 2));
    bool unread = pt == c.param(y) || unreadAfterChain(g, t);
    if (!unread || px == pt || !((pa == px && pb == pt) || (pa == pt && pb == px)))
      return "";
    operands = {x, y};
    return "libjit_ew_swish_f32";
  }
  // A commutative operation of a row and a broadcast value or vector per row (rows whose
  // length and strides are arguments: c.rowArgs), the broadcast not stored, or stored
  // where the result then overwrites it (its buffer is the result's).
  if (c.rowArgs && g.size() == 2 && c.bcs.size() == 1 && g[0] == c.bcs[0] &&
      g[1]->getNumOperands() == 3) {
    std::string op = floatOp(g[1]);
    const Value *bcd = c.bcs[0]->getDest();
    unsigned pbc = c.param(bcd);
    bool first = c.param(operand(g[1], 1)) == pbc, second = c.param(operand(g[1], 2)) == pbc;
    bool overwritten = c.inGroupOnly.count(bcd) || c.param(operand(g[1], 0)) == pbc;
    if (!sharedRowOps().count(op) || first == second || !overwritten ||
        c.bcs[0]->getInput()->getType()->kind != ElemKind::Float)
      return "";
    operands = {operand(g[1], first ? 2 : 1), c.bcs[0]->getInput(), operand(g[1], 0)};
    return "libjit_ew_rows_" + op + "_f32";
  }
  return "";
}

llvm::Function *Emitter::emitEwLoop(const EwChain &c, const std::string &name) {
  std::vector<llvm::Type *> argTypes(c.params.size(), i8p_);
  if (c.rowArgs) // the row length, then each broadcast's stride per row
    argTypes.insert(argTypes.end(), 1 + c.bcs.size(), i64_);
  argTypes.push_back(i64_);
  argTypes.push_back(i64_);
  auto *ft = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx_), argTypes, false);
  auto *fn = llvm::Function::Create(ft, llvm::GlobalValue::InternalLinkage, name, M_);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  // Kept out of line: inlined, each call would be a copy of the loop again.
  fn->addFnAttr(llvm::Attribute::NoInline);
  llvm::IRBuilderBase::InsertPoint saved = B_.saveIP();
  B_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn));
  std::vector<llvm::Value *> ptrs;
  for (size_t k = 0; k < c.params.size(); k++)
    ptrs.push_back(fn->getArg(unsigned(k)));
  unsigned rangeArg = unsigned(fn->arg_size() - 2);
  llvm::Value *begin = fn->getArg(rangeArg);
  llvm::Value *end = fn->getArg(rangeArg + 1);
  llvm::MDNode *access = llvm::MDNode::getDistinct(ctx_, {});
  if (c.bcs.empty()) {
    emitCountedLoop(
        B_, fn, begin, end, "ew", [&](llvm::Value *i) { emitEwElement(c, ptrs, i, i, {}, access); },
        access);
  } else {
    // Rows of the merged broadcast space; each broadcast's row offset from the row's
    // coordinates (one division per outer dimension and row).
    const BroadcastSpace &space = c.space;
    llvm::Value *len = I64(c.len);
    std::vector<llvm::Value *> rowStrides;
    if (c.rowArgs) {
      len = fn->getArg(unsigned(c.params.size()));
      for (size_t b = 0; b < c.bcs.size(); b++)
        rowStrides.push_back(fn->getArg(unsigned(c.params.size() + 1 + b)));
    }
    emitCountedLoop(
        B_, fn, begin, end, "ew.row",
        [&](llvm::Value *r) {
          std::vector<llvm::Value *> bcBase(c.bcs.size(), I64(0));
          if (c.rowArgs) {
            for (size_t b = 0; b < c.bcs.size(); b++)
              bcBase[b] = B_.CreateMul(r, rowStrides[b]);
          } else {
            llvm::Value *rest = r;
            for (int d = int(space.dims.size()) - 2; d >= 0; d--) {
              llvm::Value *coord = d == 0 ? rest : B_.CreateURem(rest, I64(space.dims[d]));
              if (d > 0)
                rest = B_.CreateUDiv(rest, I64(space.dims[d]));
              for (size_t b = 0; b < c.bcs.size(); b++)
                if (space.strides[b][d])
                  bcBase[b] =
                      B_.CreateAdd(bcBase[b], B_.CreateMul(coord, I64(space.strides[b][d])));
            }
          }
          llvm::Value *rowStart = B_.CreateMul(r, len);
          emitCountedLoop(
              B_, fn, I64(0), len, "ew",
              [&](llvm::Value *j) {
                emitEwElement(c, ptrs, B_.CreateAdd(rowStart, j), j, bcBase, access);
              },
              access, c.shortRows);
        },
        nullptr);
  }
  B_.CreateRetVoid();
  B_.restoreIP(saved);
  return fn;
}

void Emitter::emitElementwise(const std::vector<Instruction *> &group, int64_t n, bool parallel) {
  EwChain c(group);
  for (Instruction *I : group)
    if (auto *b = dyn_cast<BroadcastInst>(I))
      c.bcs.push_back(b);
  c.len = n;
  if (!c.bcs.empty()) {
    c.space = broadcastSpace(c.bcs);
    c.len = c.space.dims.back();
    c.rows = n / c.len;
    c.rowArgs = c.space.dims.size() == 2;
    // (Rows whose length is an argument are unrolled only where IPSCCP finds one constant
    // length at every call, as before the length was an argument.)
    c.shortRows = !c.rowArgs && c.len <= kShortRow;
  }
  c.inGroupOnly = readOnlyInside(group);

  // The loop is a shared kernel for the most common chains (sharedEwLoop), else a function
  // of its own, called by the stage with the chain's buffers (and the rows' shape, see
  // EwChain) and its range of elements (rows with broadcasts); one function per distinct
  // key.
  std::string key = ewChainKey(c);
  std::vector<const Value *> sharedOperands;
  std::string shared = sharedEwLoop(c, sharedOperands);
  llvm::Function *loopFn = nullptr;
  if (shared.empty()) {
    llvm::Function *&fn = ewFns_[key];
    if (!fn)
      fn = emitEwLoop(c, "kiln_ew_" + std::to_string(ewFns_.size() - 1));
    loopFn = fn;
  }

  // The stage: this thread's share of the range (rows, or whole cache lines of elements
  // where there are no rows), then the call.
  const int64_t total = c.bcs.empty() ? n : c.rows, unit = c.bcs.empty() ? 16 : 1;
  llvm::Value *begin = I64(0), *end = I64(total);
  if (parallel)
    std::tie(begin, end) = threadShare(B_, tid_, nth_, total, unit);
  std::vector<llvm::Value *> args;
  if (!shared.empty()) {
    for (const Value *v : sharedOperands)
      args.push_back(at(c.params[c.param(v)]));
    if (c.rowArgs) {
      args.push_back(I64(c.len));
      args.push_back(I64(c.space.strides[0].front()));
      args.push_back(I64(c.space.strides[0].back()));
    }
    args.push_back(begin);
    args.push_back(end);
    call(shared, args);
    sharedLoops_++;
    return;
  }
  for (const Location &l : c.params)
    args.push_back(at(l));
  if (c.rowArgs) {
    args.push_back(I64(c.len));
    for (const auto &st : c.space.strides)
      args.push_back(I64(st.front()));
  }
  args.push_back(begin);
  args.push_back(end);
  B_.CreateCall(loopFn, args);
}

Error Emitter::planElementwise(std::vector<Instruction *> &group, std::vector<Item> &items) {
  if (group.empty())
    return Error::success();
  int64_t n = int64_t(group.front()->getOperand(0).first->getType()->numElements());
  bool parallel = opts_.threads > 1 && n >= 16384;
  std::vector<Instruction *> g = group;
  fusedLoops_++;
  fusedInstrs_ += unsigned(g.size());
  items.push_back({parallel, "elementwise",
                   [this, g, n, parallel] { emitElementwise(g, n, parallel && opts_.threads > 1); },
                   stageWork(std::vector<const Instruction *>(g.begin(), g.end()))});
  group.clear();
  return Error::success();
}

} // namespace kiln::cpu
