// LLVM IR generation for the CPU backend: stages of kernel calls with constant shapes,
// element-wise chains fused into one loop, and constant weights packed at compile time.
#include "Codegen.h"

#include "backends/CPU/libjit/libjit.h"
#include "backends/CPU/libjit/libjit_gemm_config.h"

#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/Module.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>

namespace kiln::cpu {

Program::~Program() { std::free(constants); }

namespace {

constexpr uint64_t kAlign = 64;
uint64_t alignUp(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

/// Byte range of a buffer, for alias checks.
struct Range {
  unsigned base;
  uint64_t begin, end;
};

/// Element-wise instructions fused into loops: the scalar kernel and its float attributes.
struct ElemOp {
  const char *fn = nullptr;
  std::vector<float> attrs;
};

bool elemOpOf(const Instruction *I, ElemOp &op) {
  switch (I->getKind()) {
#define UNARY(K, NAME)                                                                     \
  case InstrKind::K:                                                                       \
    op.fn = "libjit_elem_" NAME "_f32";                                                    \
    return true;
    UNARY(Relu, "relu") UNARY(Sigmoid, "sigmoid") UNARY(Tanh, "tanh")
    UNARY(HardSwish, "hardswish") UNARY(Swish, "swish") UNARY(Neg, "neg") UNARY(Abs, "abs")
    UNARY(Exp, "exp") UNARY(Log, "log") UNARY(Sqrt, "sqrt") UNARY(Rsqrt, "rsqrt")
    UNARY(Reciprocal, "reciprocal") UNARY(Erf, "erf") UNARY(Floor, "floor")
    UNARY(Ceil, "ceil") UNARY(Round, "round") UNARY(Add, "add") UNARY(Sub, "sub")
    UNARY(Mul, "mul") UNARY(Div, "div") UNARY(Max, "max") UNARY(Min, "min")
    UNARY(Pow, "pow") UNARY(PRelu, "prelu")
#undef UNARY
  case InstrKind::Gelu:
    op.fn = cast<GeluInst>(I)->getApproximate() ? "libjit_elem_gelu_tanh_f32"
                                                : "libjit_elem_gelu_f32";
    return true;
  case InstrKind::Clip:
    op.fn = "libjit_elem_clip_f32";
    op.attrs = {cast<ClipInst>(I)->getMin(), cast<ClipInst>(I)->getMax()};
    return true;
  case InstrKind::LeakyRelu:
    op.fn = "libjit_elem_leakyrelu_f32";
    op.attrs = {cast<LeakyReluInst>(I)->getAlpha()};
    return true;
  default:
    return false;
  }
}

std::vector<int64_t> dimsOf(const Value *v) {
  std::vector<int64_t> d;
  for (dim_t x : v->getType()->dims)
    d.push_back(int64_t(x));
  return d;
}
std::vector<int64_t> stridesOf(const std::vector<int64_t> &dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = int(dims.size()) - 2; i >= 0; i--)
    s[i] = s[i + 1] * dims[i + 1];
  return s;
}
int64_t product(const std::vector<int64_t> &d, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t p = 1;
  for (size_t i = from; i < d.size() && i < to; i++)
    p *= d[i];
  return p;
}

class Emitter {
public:
  Emitter(IRFunction &F, const CodegenOptions &opts, const MemoryPlan &plan,
          const FusionMap &fused, bool avx512, llvm::LLVMContext &ctx, llvm::Module &M,
          Program &prog)
      : F_(F), opts_(opts), plan_(plan), fused_(fused), avx512_(avx512), ctx_(ctx), M_(M),
        prog_(prog), B_(ctx) {
    isa_ = avx512 ? "avx512" : "avx2";
    scratchPerThread_ = avx512 ? libjit::gemmScratchFloats<libjit::GemmAvx512>()
                               : libjit::gemmScratchFloats<libjit::GemmAvx2>();
    scratchOffset_ = alignUp(plan.size);
    extrasTop_ = scratchOffset_;
    i8_ = llvm::Type::getInt8Ty(ctx);
    i64_ = llvm::Type::getInt64Ty(ctx);
    f32_ = llvm::Type::getFloatTy(ctx);
    i8p_ = i8_->getPointerTo();
  }

  Error run(std::vector<std::string> &entryNames);
  uint64_t activationBytes() const { return extrasTop_; }
  std::vector<char> &constants() { return consts_; }
  unsigned numFusedLoops() const { return fusedLoops_; }
  unsigned numFusedInstrs() const { return fusedInstrs_; }
  /// Every kernel the generated code calls.
  const std::set<std::string> &called() const { return called_; }

private:
  struct Item {
    bool parallel;
    std::string name;
    std::function<void()> emit;
  };

  // ---- Buffers ----
  Expected<Location> loc(const Value *v);
  Expected<Range> range(const Value *v) {
    KILN_ASSIGN_OR_RETURN(Location l, loc(v));
    return Range{l.base, l.offset, l.offset + v->getType()->sizeInBytes()};
  }
  uint64_t constRaw(const WeightVar *w);
  Expected<uint64_t> constPacked(const WeightVar *w, int kind, int64_t groups, int64_t rows,
                                 int64_t cols);
  uint64_t reserveExtra(uint64_t bytes) {
    uint64_t off = extrasTop_;
    extrasTop_ = alignUp(extrasTop_ + bytes);
    return off;
  }
  llvm::Value *basePtr(unsigned base);
  llvm::Value *at(Location l) {
    return B_.CreateConstInBoundsGEP1_64(i8_, basePtr(l.base), l.offset);
  }
  llvm::Value *ptr(const Value *v) { return at(*loc(v)); }
  llvm::Value *scratch() { return at({kActivationBase, scratchOffset_}); }
  llvm::Value *tScratch() { return at({kActivationBase, tScratchOffset_}); }
  void needPoolScratch(int64_t floats) {
    usesScratch_ = true;
    scratchPerThread_ = std::max(scratchPerThread_, floats);
  }

  // ---- LLVM helpers ----
  llvm::Value *I64(int64_t x) { return llvm::ConstantInt::get(i64_, x); }
  llvm::Value *F32(float x) { return llvm::ConstantFP::get(f32_, x); }
  llvm::Value *nullPtr() { return llvm::ConstantPointerNull::get(llvm::cast<llvm::PointerType>(i8p_)); }
  llvm::Value *i64Array(const std::vector<int64_t> &v);
  llvm::Value *call(const std::string &name, std::vector<llvm::Value *> args);
  void beginStage(bool parallel, const std::string &name);
  void endStage();

  // ---- Instructions ----
  Error plan(Instruction *I, std::vector<Item> &items);
  Error planElementwise(std::vector<Instruction *> &group, std::vector<Item> &items);
  void emitElementwise(const std::vector<Instruction *> &group, int64_t n, bool parallel);
  void emitCopy(llvm::Value *dst, llvm::Value *src, std::vector<int64_t> dims,
                std::vector<int64_t> dstStrides, std::vector<int64_t> srcStrides,
                unsigned elemSize);
  Error planConv(Instruction *I, std::vector<Item> &items);
  Error planFC(Instruction *I, Value *dest, Value *in, Value *weights, Value *bias,
               std::vector<Item> &items, const FusedEpilogue *act = nullptr);
  Error planReduce(Instruction *I, const std::vector<dim_t> &axes, const char *op, float init,
                   bool mean, std::vector<Item> &items);

  IRFunction &F_;
  const CodegenOptions &opts_;
  const MemoryPlan &plan_;
  const FusionMap &fused_;
  bool avx512_;
  llvm::LLVMContext &ctx_;
  llvm::Module &M_;
  Program &prog_;
  llvm::IRBuilder<> B_;
  llvm::Type *i8_, *i64_, *f32_, *i8p_;
  std::string isa_;
  int64_t scratchPerThread_;
  uint64_t scratchOffset_, extrasTop_;
  bool usesScratch_ = false;
  /// Scratch of the transposed convolutions (the largest one; stages run one at a time).
  uint64_t tScratchBytes_ = 0, tScratchOffset_ = 0;

  std::vector<char> consts_;
  std::map<std::tuple<const WeightVar *, int, int64_t>, uint64_t> constCache_;
  std::unordered_map<const Placeholder *, unsigned> phIndex_;

  // Current stage function.
  llvm::Function *fn_ = nullptr;
  llvm::Value *bufs_ = nullptr, *tid_ = nullptr, *nth_ = nullptr;
  llvm::BasicBlock *entry_ = nullptr;
  std::map<unsigned, llvm::Value *> baseCache_;
  unsigned stageCount_ = 0;
  std::vector<std::string> *entryNames_ = nullptr;
  std::vector<bool> stageParallel_;
  std::vector<std::string> stageDesc_;
  std::string missing_;
  unsigned fusedLoops_ = 0, fusedInstrs_ = 0;
  std::set<std::string> called_;
};

Expected<Location> Emitter::loc(const Value *v) {
  if (auto *w = dyn_cast<WeightVar>(v)) {
    if (w->isConstant())
      return Location{kConstantBase, constRaw(w)};
    auto *ph = dyn_cast<Placeholder>(w->getOrigin());
    if (!ph)
      return makeError(ErrorCode::Internal, "CPU backend: mutable weight '", w->getName(),
                       "' is not a placeholder");
    auto it = phIndex_.find(ph);
    if (it == phIndex_.end()) {
      it = phIndex_.emplace(ph, unsigned(prog_.placeholders.size())).first;
      prog_.placeholders.push_back(ph);
      prog_.placeholderWritten.push_back(false);
    }
    return Location{kFirstPlaceholderBase + it->second, 0};
  }
  if (auto *tv = dyn_cast<TensorViewInst>(v)) {
    KILN_ASSIGN_OR_RETURN(Location l, loc(tv->getSrc()));
    const Type &st = *tv->getSrc()->getType();
    Dims strides = st.strides();
    uint64_t off = 0;
    const auto &offs = tv->getOffsets();
    for (size_t i = 0; i < offs.size() && i < strides.size(); i++)
      off += offs[i] * strides[i];
    // Only contiguous views are addressable as one pointer.
    const Type &vt = *tv->getType();
    if (vt.numElements() && off + vt.numElements() > st.numElements())
      return makeError(ErrorCode::Unsupported, "CPU backend: view '", tv->getName(),
                       "' runs past its source");
    size_t firstPartial = 0;
    bool contiguous = true;
    if (vt.rank() == st.rank()) {
      while (firstPartial < vt.rank() && vt.dims[firstPartial] == 1)
        firstPartial++;
      for (size_t i = firstPartial + 1; i < vt.rank(); i++)
        if (vt.dims[i] != st.dims[i] || offs[i] != 0)
          contiguous = false;
    } else {
      for (dim_t o : offs)
        if (o)
          contiguous = false;
    }
    if (!contiguous)
      return makeError(ErrorCode::Unsupported, "CPU backend: strided view '", tv->getName(),
                       "' of type ", vt.toString(), " into ", st.toString());
    l.offset += off * st.elemBytes();
    return l;
  }
  auto it = plan_.offsets.find(v);
  if (it == plan_.offsets.end())
    return makeError(ErrorCode::Internal, "CPU backend: no memory for '", v->getName(), "'");
  return Location{kActivationBase, it->second};
}

uint64_t Emitter::constRaw(const WeightVar *w) {
  auto key = std::make_tuple(w, 0, int64_t(0));
  auto it = constCache_.find(key);
  if (it != constCache_.end())
    return it->second;
  auto *c = cast<Constant>(w->getOrigin());
  const Tensor &t = c->getPayload();
  uint64_t off = alignUp(consts_.size());
  consts_.resize(off + alignUp(std::max<size_t>(t.getSizeInBytes(), 1)));
  if (t.getSizeInBytes()) // an empty payload has no pointer to copy from
    std::memcpy(consts_.data() + off, t.getUnsafePtr(), t.getSizeInBytes());
  constCache_[key] = off;
  return off;
}

/// kind 1: A panels of each of `groups` row blocks of `rows` x `cols`; kind 2: B panels of
/// a `rows` (K) x `cols` (N) matrix; kind 4: 3x3 filters [rows = O][cols = C][3][3]
/// Winograd-transformed (libjit_pack_wino).
Expected<uint64_t> Emitter::constPacked(const WeightVar *w, int kind, int64_t groups,
                                        int64_t rows, int64_t cols) {
  auto key = std::make_tuple(w, kind, groups);
  auto it = constCache_.find(key);
  if (it != constCache_.end())
    return it->second;
  auto *c = cast<Constant>(w->getOrigin());
  const float *src = reinterpret_cast<const float *>(c->getPayload().getUnsafePtr());
  int64_t floats;
  if (kind == 1)
    floats = groups * (avx512_ ? libjit::packedAFloats<libjit::GemmAvx512>(rows, cols)
                               : libjit::packedAFloats<libjit::GemmAvx2>(rows, cols));
  else if (kind == 3) // W [cols x rows] packed as the B operand W^T [rows x cols]
    floats = avx512_ ? libjit::packedBFloats<libjit::GemmAvx512>(rows, cols)
                     : libjit::packedBFloats<libjit::GemmAvx2>(rows, cols);
  else if (kind == 4)
    floats = avx512_ ? libjit_pack_wino_floats_avx512(rows, cols)
                     : libjit_pack_wino_floats_avx2(rows, cols);
  else
    floats = avx512_ ? libjit::packedBFloats<libjit::GemmAvx512>(rows, cols)
                     : libjit::packedBFloats<libjit::GemmAvx2>(rows, cols);
  uint64_t off = alignUp(consts_.size());
  consts_.resize(off + alignUp(floats * 4));
  float *dst = reinterpret_cast<float *>(consts_.data() + off);
  if (kind == 1) {
    int64_t per = floats / groups;
    for (int64_t g = 0; g < groups; g++) {
      if (avx512_)
        libjit_pack_a_f32_avx512(dst + g * per, src + g * rows * cols, rows, cols, cols);
      else
        libjit_pack_a_f32_avx2(dst + g * per, src + g * rows * cols, rows, cols, cols);
    }
  } else if (kind == 3) {
    if (avx512_)
      libjit_pack_bt_f32_avx512(dst, src, rows, cols);
    else
      libjit_pack_bt_f32_avx2(dst, src, rows, cols);
  } else if (kind == 4) {
    if (avx512_)
      libjit_pack_wino_f32_avx512(dst, src, rows, cols);
    else
      libjit_pack_wino_f32_avx2(dst, src, rows, cols);
  } else {
    if (avx512_)
      libjit_pack_b_f32_avx512(dst, src, rows, cols, cols);
    else
      libjit_pack_b_f32_avx2(dst, src, rows, cols, cols);
  }
  constCache_[key] = off;
  return off;
}

llvm::Value *Emitter::basePtr(unsigned base) {
  auto it = baseCache_.find(base);
  if (it != baseCache_.end())
    return it->second;
  llvm::IRBuilder<> eb(entry_, entry_->begin());
  llvm::Value *slot = eb.CreateConstInBoundsGEP1_64(i8p_, bufs_, base);
  llvm::LoadInst *p = eb.CreateLoad(i8p_, slot);
  p->setMetadata(llvm::LLVMContext::MD_invariant_load, llvm::MDNode::get(ctx_, {}));
  llvm::Value *aligned = p;
  baseCache_[base] = aligned;
  return aligned;
}

llvm::Value *Emitter::i64Array(const std::vector<int64_t> &v) {
  std::vector<uint64_t> u(v.begin(), v.end());
  if (u.empty())
    u.push_back(0);
  auto *init = llvm::ConstantDataArray::get(ctx_, u);
  auto *gv = new llvm::GlobalVariable(M_, init->getType(), true,
                                      llvm::GlobalValue::PrivateLinkage, init, "dims");
  gv->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Global);
  return B_.CreateConstInBoundsGEP2_64(init->getType(), gv, 0, 0);
}

llvm::Value *Emitter::call(const std::string &name, std::vector<llvm::Value *> args) {
  called_.insert(name);
  llvm::Function *f = M_.getFunction(name);
  if (!f) {
    missing_ = name;
    return nullptr;
  }
  llvm::FunctionType *ft = f->getFunctionType();
  for (unsigned i = 0; i < args.size() && i < ft->getNumParams(); i++) {
    llvm::Type *pt = ft->getParamType(i);
    if (args[i]->getType() != pt) {
      if (pt->isPointerTy() && args[i]->getType()->isPointerTy())
        args[i] = B_.CreatePointerCast(args[i], pt);
      else if (pt->isIntegerTy() && args[i]->getType()->isIntegerTy())
        args[i] = B_.CreateSExtOrTrunc(args[i], pt);
    }
  }
  if (args.size() != ft->getNumParams()) {
    missing_ = name + " (argument count)";
    return nullptr;
  }
  return B_.CreateCall(f, args);
}

void Emitter::beginStage(bool parallel, const std::string &name) {
  auto *ft = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx_), {i8p_->getPointerTo(), i64_, i64_},
                                     false);
  std::string fname = "kiln_stage_" + std::to_string(stageCount_++);
  fn_ = llvm::Function::Create(ft, llvm::GlobalValue::ExternalLinkage, fname, M_);
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  (void)name;
  entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn_);
  auto *body = llvm::BasicBlock::Create(ctx_, "body", fn_);
  llvm::IRBuilder<>(entry_).CreateBr(body);
  B_.SetInsertPoint(body);
  auto ai = fn_->arg_begin();
  bufs_ = &*ai++;
  if (parallel) {
    tid_ = &*ai++;
    nth_ = &*ai++;
  } else {
    tid_ = I64(0);
    nth_ = I64(1);
  }
  baseCache_.clear();
  entryNames_->push_back(fname);
  stageParallel_.push_back(parallel);
  stageDesc_.push_back(name);
}

void Emitter::endStage() {
  if (!fn_)
    return;
  B_.CreateRetVoid();
  fn_ = nullptr;
}

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

void Emitter::emitElementwise(const std::vector<Instruction *> &group, int64_t n,
                              bool parallel) {
  llvm::Value *begin = I64(0), *end = I64(n);
  if (parallel) {
    // Chunks of whole cache lines per thread.
    llvm::Value *per = B_.CreateUDiv(B_.CreateAdd(I64(n), B_.CreateSub(nth_, I64(1))), nth_);
    per = B_.CreateMul(B_.CreateUDiv(B_.CreateAdd(per, I64(15)), I64(16)), I64(16));
    begin = B_.CreateMul(tid_, per);
    begin = B_.CreateSelect(B_.CreateICmpULT(begin, I64(n)), begin, I64(n));
    end = B_.CreateAdd(begin, per);
    end = B_.CreateSelect(B_.CreateICmpULT(end, I64(n)), end, I64(n));
  }
  llvm::BasicBlock *pre = B_.GetInsertBlock();
  auto *loop = llvm::BasicBlock::Create(ctx_, "ew.loop", fn_);
  auto *exit = llvm::BasicBlock::Create(ctx_, "ew.exit", fn_);
  B_.CreateCondBr(B_.CreateICmpULT(begin, end), loop, exit);
  B_.SetInsertPoint(loop);
  llvm::PHINode *i = B_.CreatePHI(i64_, 2, "i");
  i->addIncoming(begin, pre);
  llvm::MDNode *group_ = llvm::MDNode::getDistinct(ctx_, {});
  std::map<std::pair<unsigned, uint64_t>, llvm::Value *> ssa;
  auto elemPtr = [&](const Value *v) {
    Location l = *loc(v);
    llvm::Value *p = B_.CreatePointerCast(at(l), f32_->getPointerTo());
    return B_.CreateInBoundsGEP(f32_, p, i);
  };
  for (Instruction *I : group) {
    ElemOp op;
    elemOpOf(I, op);
    std::vector<llvm::Value *> args;
    for (unsigned k = 1; k < I->getNumOperands(); k++) {
      const Value *v = I->getOperand(k).first;
      Location l = *loc(v);
      auto it = ssa.find({l.base, l.offset});
      if (it != ssa.end()) {
        args.push_back(it->second);
        continue;
      }
      llvm::LoadInst *ld = B_.CreateLoad(f32_, elemPtr(v));
      ld->setMetadata(llvm::LLVMContext::MD_access_group, group_);
      args.push_back(ld);
    }
    for (float a : op.attrs)
      args.push_back(F32(a));
    llvm::Value *r = call(op.fn, args);
    if (!r)
      return;
    const Value *dest = I->getOperand(0).first;
    llvm::StoreInst *st = B_.CreateStore(r, elemPtr(dest));
    st->setMetadata(llvm::LLVMContext::MD_access_group, group_);
    Location dl = *loc(dest);
    ssa[{dl.base, dl.offset}] = r;
  }
  llvm::Value *next = B_.CreateAdd(i, I64(1));
  i->addIncoming(next, B_.GetInsertBlock());
  auto *br = B_.CreateCondBr(B_.CreateICmpULT(next, end), loop, exit);
  llvm::TempMDTuple tmp = llvm::MDTuple::getTemporary(ctx_, {});
  llvm::Metadata *par[] = {llvm::MDString::get(ctx_, "llvm.loop.parallel_accesses"), group_};
  llvm::MDNode *loopId = llvm::MDNode::getDistinct(ctx_, {tmp.get(), llvm::MDNode::get(ctx_, par)});
  loopId->replaceOperandWith(0, loopId);
  br->setMetadata(llvm::LLVMContext::MD_loop, loopId);
  B_.SetInsertPoint(exit);
}

Error Emitter::planElementwise(std::vector<Instruction *> &group, std::vector<Item> &items) {
  if (group.empty())
    return Error::success();
  int64_t n = int64_t(group.front()->getOperand(0).first->getType()->numElements());
  bool parallel = opts_.threads > 1 && n >= 16384;
  std::vector<Instruction *> g = group;
  fusedLoops_++;
  fusedInstrs_ += unsigned(g.size());
  items.push_back({parallel, "elementwise", [this, g, n, parallel] {
                     emitElementwise(g, n, parallel && opts_.threads > 1);
                   }});
  group.clear();
  return Error::success();
}

Error Emitter::planFC(Instruction *I, Value *dest, Value *in, Value *weights, Value *bias,
                      std::vector<Item> &items, const FusedEpilogue *act) {
  auto id = dimsOf(in), wd = dimsOf(weights);
  int64_t N = id[0], K = id[1], M = wd[1];
  FusedEpilogue epi;
  auto fit = fused_.find(I);
  if (fit != fused_.end())
    epi = fit->second;
  if (act)
    epi = *act;
  // Weights computed at run time (e.g. a transposed input) are packed per run.
  auto *cw = dyn_cast<WeightVar>(weights);
  bool constW = cw && cw->isConstant();
  Value *w = weights;
  Location wl;
  if (constW) {
    KILN_ASSIGN_OR_RETURN(uint64_t off, constPacked(cw, 2, 1, K, M));
    wl = {kConstantBase, off};
  } else {
    int64_t floats = avx512_ ? libjit::packedBFloats<libjit::GemmAvx512>(K, M)
                             : libjit::packedBFloats<libjit::GemmAvx2>(K, M);
    wl = {kActivationBase, reserveExtra(floats * 4)};
    items.push_back({false, "pack", [=] {
                       call("libjit_pack_b_f32_" + isa_, {at(wl), ptr(w), I64(K), I64(M), I64(M)});
                     }});
  }
  usesScratch_ = true;
  items.push_back({true, "fc " + std::to_string(N) + "x" + std::to_string(K) + "x" + std::to_string(M), [=] {
                     call("libjit_fc_f32_" + isa_,
                          {ptr(dest), ptr(in), at(wl), bias ? ptr(bias) : nullPtr(),
                           epi.add ? ptr(epi.add) : nullPtr(), I64(N), I64(K), I64(M),
                           I64(epi.act), F32(epi.lo), F32(epi.hi), scratch(), tid_, nth_});
                   }});
  return Error::success();
}

/// The activation of a FusedConvolution/FusedFullyConnected as a clamp, or false.
bool activationClamp(const std::string &act, float alpha, float beta, FusedEpilogue &epi) {
  if (act == "Relu") {
    epi.act = true;
    epi.lo = 0.0f;
    epi.hi = INFINITY;
    return true;
  }
  if (act == "Clip") {
    epi.act = true;
    epi.lo = alpha;
    epi.hi = beta;
    return true;
  }
  if (act.empty() || act == "None") {
    epi.act = false;
    return true;
  }
  return false;
}

/// Whether Winograd F(4x4, 3x3) beats the GEMM convolutions for a 3x3 stride-1
/// convolution with T = N ceil(OH / 4) ceil(OW / 4) output tiles (measured with
/// test/cpu:conv_bench on the layers of ResNet-50, SqueezeNet and VGG-19 and on small
/// images, AVX-512 and AVX2): from 8 tiles (10x10 images) up, unless each tile has to pay
/// for reading more than 36 x 8192 weights (they are 4x the direct convolution's: 512
/// channels lose at 7x7 and 14x14, win at 28x28), and not with fewer than 8 input channels
/// (the transforms then cost more than the direct sum).
bool winogradWins(int64_t N, int64_t C, int64_t O, int64_t OH, int64_t OW) {
  int64_t T = N * ((OH + 3) / 4) * ((OW + 3) / 4);
  return C >= 8 && T >= 8 && O * C <= 8192 * T;
}

Error Emitter::planConv(Instruction *I, std::vector<Item> &items) {
  std::vector<dim_t> kernels, strides, pads, dilations;
  int64_t G;
  FusedEpilogue epi;
  if (auto *c = dyn_cast<ConvolutionInst>(I)) {
    kernels = c->getKernels(), strides = c->getStrides(), pads = c->getPads();
    dilations = c->getDilations();
    G = int64_t(c->getGroup());
    auto fit = fused_.find(I);
    if (fit != fused_.end())
      epi = fit->second;
  } else {
    auto *f = cast<FusedConvolutionInst>(I);
    kernels = f->getKernels(), strides = f->getStrides(), pads = f->getPads();
    dilations = f->getDilations();
    G = int64_t(f->getGroup());
    if (!activationClamp(f->getActivation(), f->getAlpha(), f->getBeta(), epi))
      return makeError(ErrorCode::Unsupported, "CPU backend: activation ", f->getActivation(),
                       " of '", I->getName(), "'");
  }
  Value *dest = I->getOperand(0).first, *in = I->getOperand(1).first,
        *filter = I->getOperand(2).first, *bias = I->getOperand(3).first;
  auto id = dimsOf(in), od = dimsOf(dest);
  if (id.size() != 4 || kernels.size() != 2)
    return makeError(ErrorCode::Unsupported, "CPU backend: only 2-D convolutions");
  int64_t N = id[0], C = id[1], H = id[2], W = id[3], O = od[1], OH = od[2], OW = od[3];
  int64_t KH = kernels[0], KW = kernels[1];
  int64_t SH = strides[0], SW = strides[1];
  int64_t PT = pads[0], PL = pads[1];
  int64_t DH = dilations.size() ? dilations[0] : 1;
  int64_t DW = dilations.size() > 1 ? dilations[1] : 1;
  std::string desc = std::to_string(KH) + "x" + std::to_string(KW) + "/" + std::to_string(SH) +
                     " " + std::to_string(C) + "->" + std::to_string(O) + " " +
                     std::to_string(H) + "x" + std::to_string(W) + (G > 1 ? " g" + std::to_string(G) : "") +
                     (epi.add ? " +add" : "");
  if (G > 1 && G == C && O == C && !epi.add) {
    needPoolScratch(libjit_pool_scratch_floats(H, W, OH, OW, KH, KW, SH, SW, DH, DW));
    items.push_back({true, "conv_dw " + desc, [=] {
                       call("libjit_conv2d_dw_f32",
                            {ptr(dest), ptr(in), ptr(filter), ptr(bias), I64(N), I64(C), I64(H),
                             I64(W), I64(OH), I64(OW), I64(KH), I64(KW), I64(SH), I64(SW),
                             I64(PT), I64(PL), I64(DH), I64(DW), I64(epi.act), F32(epi.lo),
                             F32(epi.hi), scratch(), tid_, nth_});
                     }});
    return Error::success();
  }
  int64_t Og = O / G, K = (C / G) * KH * KW;
  auto *cw = dyn_cast<WeightVar>(filter);
  bool constW = cw && cw->isConstant();
  Value *w = filter;
  if (G == 1 && constW && opts_.winograd && KH == 3 && KW == 3 && SH == 1 && SW == 1 &&
      DH == 1 && DW == 1 && winogradWins(N, C, O, OH, OW)) {
    KILN_ASSIGN_OR_RETURN(uint64_t off, constPacked(cw, 4, 1, O, C));
    Location wl{kConstantBase, off};
    needPoolScratch(avx512_ ? libjit_conv2d_wino_scratch_floats_avx512(N, C, H, W, O, OH, OW)
                            : libjit_conv2d_wino_scratch_floats_avx2(N, C, H, W, O, OH, OW));
    items.push_back({true, "conv_wino " + desc, [=] {
                       call("libjit_conv2d_wino_f32_" + isa_,
                            {ptr(dest), ptr(in), at(wl), ptr(bias),
                             epi.add ? ptr(epi.add) : nullPtr(), I64(N), I64(C), I64(H), I64(W),
                             I64(O), I64(OH), I64(OW), I64(PT), I64(PL), I64(epi.act),
                             F32(epi.lo), F32(epi.hi), scratch(), tid_, nth_});
                     }});
    return Error::success();
  }
  // Small images fill the NR-column panels of the pixel dimension badly: compute those
  // transposed, pixels as rows (libjit_conv2d_t).
  int64_t P = OH * OW, NR = avx512_ ? libjit::GemmAvx512::NR : libjit::GemmAvx2::NR;
  double effN = double(P) / double((P + NR - 1) / NR * NR);
  if (G == 1 && constW && opts_.transposedConv && effN < 0.92 &&
      uint64_t(P * O) * 4 <= (8u << 20)) {
    KILN_ASSIGN_OR_RETURN(uint64_t off, constPacked(cw, 3, 1, K, O));
    Location wtl{kConstantBase, off};
    tScratchBytes_ = std::max<uint64_t>(tScratchBytes_, alignUp(uint64_t(P * O) * 4));
    usesScratch_ = true;
    items.push_back({true, "convT " + desc, [=] {
                       call("libjit_conv2d_t_f32_" + isa_,
                            {ptr(dest), ptr(in), at(wtl), ptr(bias),
                             epi.add ? ptr(epi.add) : nullPtr(), I64(N), I64(C), I64(H), I64(W),
                             I64(O), I64(OH), I64(OW), I64(KH), I64(KW), I64(SH), I64(SW),
                             I64(PT), I64(PL), I64(DH), I64(DW), I64(epi.act), F32(epi.lo),
                             F32(epi.hi), tScratch(), scratch(), tid_, nth_});
                     }});
    return Error::success();
  }
  Location wl;
  if (constW) {
    KILN_ASSIGN_OR_RETURN(uint64_t off, constPacked(cw, 1, G, Og, K));
    wl = {kConstantBase, off};
  } else {
    int64_t per = avx512_ ? libjit::packedAFloats<libjit::GemmAvx512>(Og, K)
                          : libjit::packedAFloats<libjit::GemmAvx2>(Og, K);
    wl = {kActivationBase, reserveExtra(per * G * 4)};
    items.push_back({false, "pack", [=] {
                       for (int64_t g = 0; g < G; g++)
                         call("libjit_pack_a_f32_" + isa_,
                              {at({wl.base, wl.offset + uint64_t(g * per * 4)}),
                               B_.CreateConstInBoundsGEP1_64(i8_, ptr(w), uint64_t(g * Og * K * 4)),
                               I64(Og), I64(K), I64(K)});
                     }});
  }
  usesScratch_ = true;
  items.push_back({true, "conv " + desc, [=] {
                     call("libjit_conv2d_f32_" + isa_,
                          {ptr(dest), ptr(in), at(wl), ptr(bias),
                           epi.add ? ptr(epi.add) : nullPtr(), I64(N), I64(C), I64(H), I64(W),
                           I64(O), I64(OH), I64(OW), I64(KH), I64(KW), I64(SH), I64(SW),
                           I64(PT), I64(PL), I64(DH), I64(DW), I64(G), I64(epi.act),
                           F32(epi.lo), F32(epi.hi), scratch(), tid_, nth_});
                   }});
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

Error Emitter::plan(Instruction *I, std::vector<Item> &items) {
  auto serial = [&](const char *name, std::function<void()> f) {
    items.push_back({false, name, std::move(f)});
  };
  switch (I->getKind()) {
  case InstrKind::AllocActivation:
  case InstrKind::DeallocActivation:
  case InstrKind::TensorView:
    return Error::success();
  case InstrKind::Convolution:
  case InstrKind::FusedConvolution:
    return planConv(I, items);
  case InstrKind::FullyConnected: {
    auto *fc = cast<FullyConnectedInst>(I);
    return planFC(I, fc->getDest(), fc->getInput(), fc->getWeights(), fc->getBias(), items);
  }
  case InstrKind::FusedFullyConnected: {
    auto *fc = cast<FusedFullyConnectedInst>(I);
    FusedEpilogue epi;
    if (!activationClamp(fc->getActivation(), fc->getAlpha(), fc->getBeta(), epi))
      return makeError(ErrorCode::Unsupported, "CPU backend: activation ", fc->getActivation(),
                       " of '", I->getName(), "'");
    return planFC(I, fc->getDest(), fc->getInput(), fc->getWeights(), fc->getBias(), items,
                  &epi);
  }
  case InstrKind::InsertTensor: {
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
  case InstrKind::MatMul: {
    auto *mm = cast<MatMulInst>(I);
    auto *w = dyn_cast<WeightVar>(mm->getRHS());
    if (w && w->isConstant())
      return planFC(I, mm->getDest(), mm->getLHS(), mm->getRHS(), nullptr, items);
    Value *dest = mm->getDest(), *l = mm->getLHS(), *r = mm->getRHS();
    auto ld = dimsOf(l), rd = dimsOf(r);
    usesScratch_ = true;
    items.push_back({true, "matmul", [=] {
                       call("libjit_batchmatmul_f32_" + isa_,
                            {ptr(dest), ptr(l), ptr(r), I64(1), I64(ld[0]), I64(ld[1]),
                             I64(rd[1]), scratch(), tid_, nth_});
                     }});
    return Error::success();
  }
  case InstrKind::BatchMatMul: {
    auto *mm = cast<BatchMatMulInst>(I);
    Value *dest = mm->getDest(), *l = mm->getLHS(), *r = mm->getRHS();
    auto ld = dimsOf(l), rd = dimsOf(r);
    usesScratch_ = true;
    items.push_back({true, "batchmatmul", [=] {
                       call("libjit_batchmatmul_f32_" + isa_,
                            {ptr(dest), ptr(l), ptr(r), I64(ld[0]), I64(ld[1]), I64(ld[2]),
                             I64(rd[2]), scratch(), tid_, nth_});
                     }});
    return Error::success();
  }
  case InstrKind::BatchedAdd: {
    auto *ba = cast<BatchedAddInst>(I);
    Value *dest = ba->getDest(), *b = ba->getBatch(), *s = ba->getSlice();
    auto bd = dimsOf(b);
    int64_t n = bd.empty() ? 1 : bd[0], sz = product(bd, 1);
    serial("batchedadd", [=] {
      call("libjit_batchedadd_f32", {ptr(dest), ptr(b), ptr(s), I64(n), I64(sz)});
    });
    return Error::success();
  }
  case InstrKind::MaxPool:
  case InstrKind::AvgPool: {
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
    if (isMax)
      needPoolScratch(libjit_pool_scratch_floats(id[2], id[3], od[2], od[3], k[0], k[1], s[0],
                                                 s[1], 1, 1));
    items.push_back({true, isMax ? "maxpool" : "avgpool", [=] {
                       std::vector<llvm::Value *> args = {
                           ptr(dest), ptr(in), I64(id[0]), I64(id[1]), I64(id[2]), I64(id[3]),
                           I64(od[2]), I64(od[3]), I64(k[0]), I64(k[1]), I64(s[0]), I64(s[1]),
                           I64(p[0]), I64(p[1])};
                       if (!isMax)
                         args.push_back(I64(cip));
                       else
                         args.push_back(scratch());
                       args.push_back(tid_);
                       args.push_back(nth_);
                       call(isMax ? "libjit_maxpool_f32" : "libjit_avgpool_f32", args);
                     }});
    return Error::success();
  }
  case InstrKind::AdaptiveAvgPool: {
    Value *dest = I->getOperand(0).first, *in = I->getOperand(1).first;
    auto id = dimsOf(in), od = dimsOf(dest);
    items.push_back({true, "adaptiveavgpool", [=] {
                       call("libjit_adaptive_avgpool_f32",
                            {ptr(dest), ptr(in), I64(id[0]), I64(id[1]), I64(id[2]), I64(id[3]),
                             I64(od[2]), I64(od[3]), tid_, nth_});
                     }});
    return Error::success();
  }
  case InstrKind::BatchNormalization: {
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
  case InstrKind::LayerNormalization: {
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
  case InstrKind::SoftMax:
  case InstrKind::LogSoftMax: {
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
  case InstrKind::Copy: {
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
  case InstrKind::Concat: {
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
  case InstrKind::Slice: {
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
  case InstrKind::Transpose: {
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
  case InstrKind::Broadcast: {
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
  case InstrKind::Tile: {
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
  case InstrKind::Pad: {
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
  case InstrKind::Splat: {
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
    break;
  }
  default:
    break;
  }
  return makeError(ErrorCode::Unsupported, "CPU backend: no code for ", I->getKindName(), " '",
                   I->getName(), "'");
}

bool overlapsBadly(const Range &a, const Range &b) {
  if (a.base != b.base)
    return false;
  if (a.begin == b.begin && a.end == b.end)
    return false;
  return a.begin < b.end && b.begin < a.end;
}

Error Emitter::run(std::vector<std::string> &entryNames) {
  entryNames_ = &entryNames;
  // Pass 1: turn instructions into items (fusing element-wise chains).
  std::vector<Item> items;
  std::vector<Instruction *> group;
  std::vector<std::pair<Range, bool>> groupRanges; // (range, written)
  int64_t groupN = -1;
  for (auto &up : F_.getInstrs()) {
    Instruction *I = up.get();
    ElemOp op;
    bool ew = elemOpOf(I, op);
    if (ew) {
      for (const auto &o : I->getOperands())
        if (!o.first->getType() || o.first->getType()->kind != ElemKind::Float)
          ew = false;
    }
    if (!ew) {
      InstrKind k = I->getKind();
      if (k == InstrKind::AllocActivation || k == InstrKind::DeallocActivation ||
          k == InstrKind::TensorView)
        continue;
      KILN_RETURN_IF_ERR(planElementwise(group, items));
      groupRanges.clear();
      KILN_RETURN_IF_ERR(plan(I, items));
      continue;
    }
    int64_t n = int64_t(I->getOperand(0).first->getType()->numElements());
    std::vector<std::pair<Range, bool>> mine;
    for (unsigned k = 0; k < I->getNumOperands(); k++) {
      const Value *v = I->getOperand(k).first;
      if (int64_t(v->getType()->numElements()) != n)
        return makeError(ErrorCode::InvalidArgument, "CPU backend: element-wise '",
                         I->getName(), "' has operands of different sizes");
      KILN_ASSIGN_OR_RETURN(Range r, range(v));
      mine.push_back({r, k == 0});
    }
    bool fits = opts_.fuseElementwise && !group.empty() && n == groupN;
    if (fits) {
      for (auto &a : mine)
        for (auto &b : groupRanges)
          if ((a.second || b.second) && overlapsBadly(a.first, b.first))
            fits = false;
    }
    for (auto &a : mine)
      for (auto &b : mine)
        if ((a.second || b.second) && overlapsBadly(a.first, b.first))
          return makeError(ErrorCode::Unsupported, "CPU backend: partially overlapping operands of '",
                           I->getName(), "'");
    if (!fits) {
      KILN_RETURN_IF_ERR(planElementwise(group, items));
      groupRanges.clear();
    }
    group.push_back(I);
    groupN = n;
    groupRanges.insert(groupRanges.end(), mine.begin(), mine.end());
  }
  KILN_RETURN_IF_ERR(planElementwise(group, items));

  // Mark written placeholders.
  for (auto &up : F_.getInstrs())
    for (const auto &o : up->getOperands())
      if (o.second != OperandKind::In)
        if (auto *w = dyn_cast<WeightVar>(o.first)) {
          KILN_ASSIGN_OR_RETURN(Location l, loc(w));
          if (l.base >= kFirstPlaceholderBase)
            prog_.placeholderWritten[l.base - kFirstPlaceholderBase] = true;
        }
  // Every other buffer (views included) must resolve; constants are placed when used.
  for (auto &up : F_.getInstrs())
    for (const auto &o : up->getOperands()) {
      auto *w = dyn_cast<WeightVar>(o.first);
      if (!w || !w->isConstant())
        KILN_RETURN_IF_ERR(loc(o.first).takeError());
    }

  if (tScratchBytes_)
    tScratchOffset_ = reserveExtra(tScratchBytes_);
  if (usesScratch_)
    extrasTop_ = alignUp(extrasTop_ + uint64_t(scratchPerThread_) * 4 * opts_.threads);
  // Scratch sits above the extras: move it there.
  scratchOffset_ = usesScratch_ ? extrasTop_ - alignUp(uint64_t(scratchPerThread_) * 4 * opts_.threads)
                                : scratchOffset_;

  // Pass 2: stages.
  bool open = false;
  // Profiles (CPUBackend.cpp) time every item on its own.
  static const bool profile = std::getenv("KILN_CPU_PROFILE") != nullptr;
  for (Item &it : items) {
    bool par = it.parallel && opts_.threads > 1;
    if (par || profile) {
      endStage();
      open = false;
      beginStage(par, it.name);
      it.emit();
      endStage();
    } else {
      if (!open) {
        beginStage(false, it.name);
        open = true;
      } else if (stageDesc_.back().size() < 60) {
        stageDesc_.back() += "+" + it.name;
      }
      it.emit();
    }
    if (!missing_.empty())
      return makeError(ErrorCode::Internal, "CPU backend: kernel '", missing_, "' not found");
  }
  endStage();
  prog_.stages.clear();
  for (size_t i = 0; i < entryNames.size(); i++)
    prog_.stages.push_back({nullptr, bool(stageParallel_[i]), entryNames[i], stageDesc_[i]});
  return Error::success();
}

} // namespace

Expected<std::unique_ptr<Program>> generateProgram(IRFunction &F, const CodegenOptions &opts) {
  auto prog = std::make_unique<Program>();
  prog->threads = std::max(1u, opts.threads);
  CodegenOptions o = opts;
  o.threads = prog->threads;
  // Hosts without AVX2 run the 256-bit variant too: LLVM splits its vectors for SSE, so
  // it stays correct, only slower.
  HostInfo host = detectHost(opts.jit);
  prog->avx512 = host.avx512;

  FusionMap fused;
  if (o.fuseEpilogues)
    fused = fuseEpilogues(F, /*fuseAdd=*/true);
  MemoryPlan plan = planActivations(F);

  auto ctx = std::make_unique<llvm::LLVMContext>();
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<llvm::Module> M, loadLibjitModule(*ctx));
  M->setModuleIdentifier("kiln_" + F.getName());
  Emitter em(F, o, plan, fused, host.avx512, *ctx, *M, *prog);
  std::vector<std::string> entries;
  KILN_RETURN_IF_ERR(em.run(entries));
  // The GEMM-based kernels come precompiled (once per process) unless specialised.
  std::map<std::string, void *> shared;
  if (!o.specializeGemm) {
    std::string isa = host.avx512 ? "avx512" : "avx2";
    std::vector<std::string> candidates = {"libjit_conv2d_f32_" + isa, "libjit_fc_f32_" + isa,
                                      "libjit_batchmatmul_f32_" + isa,
                                      "libjit_conv2d_t_f32_" + isa,
                                      "libjit_conv2d_wino_f32_" + isa,
                                      // Loop nests that gain little from constant shapes
                                      // and cost much to compile once per call.
                                      "libjit_conv2d_dw_f32", "libjit_maxpool_f32",
                                      "libjit_avgpool_f32", "libjit_adaptive_avgpool_f32"};
    // Only those this program calls: small programs then compile in milliseconds.
    std::vector<std::string> names;
    for (const std::string &n : candidates)
      if (em.called().count(n))
        names.push_back(n);
    if (!names.empty()) {
      KILN_ASSIGN_OR_RETURN(shared, getSharedKernels(names, o.jit));
    }
  }

  prog->activationPeakBytes = plan.size;
  prog->activationBytes = em.activationBytes();
  std::vector<char> &c = em.constants();
  prog->constantBytes = c.size();
  prog->constants = static_cast<char *>(std::aligned_alloc(64, alignUp(std::max<size_t>(c.size(), 64))));
  if (!c.empty()) // an empty vector's data() may be null
    std::memcpy(prog->constants, c.data(), c.size());
  c = {};

  KILN_ASSIGN_OR_RETURN(prog->jit,
                        JitModule::compile(std::move(ctx), std::move(M), entries, o.jit, shared));
  for (Stage &s : prog->stages) {
    KILN_ASSIGN_OR_RETURN(void *addr, prog->jit->lookup(s.name));
    s.fn = reinterpret_cast<StageFn>(addr);
  }
  std::ostringstream os;
  os << "stages " << prog->stages.size() << ", fused epilogues " << fused.size()
     << ", element-wise loops " << em.numFusedLoops() << " (" << em.numFusedInstrs()
     << " instrs), activations " << plan.size << " B (unshared " << plan.sumOfSizes
     << " B), arena " << prog->activationBytes << " B, constants " << prog->constantBytes
     << " B, " << (host.avx512 ? "avx512" : "avx2") << ", threads " << prog->threads;
  prog->stats = os.str();
  return std::move(prog);
}

} // namespace kiln::cpu
