// LLVM IR generation for the CPU backend: the emitter's infrastructure (buffer locations,
// constants packed at compile time, stages, kernel calls), the driver that groups
// element-wise chains and dispatches every other instruction to the emitter registered for
// its kind, and generateProgram.
#include "Emitter.h"

#include "backends/CPU/libjit/libjit.h"
#include "kiln/Base/Trace.h"
#include "backends/CPU/libjit/libjit_gemm_config.h"

#include "llvm/IR/Constants.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <sstream>

namespace kiln::cpu {

Program::~Program() { freeConstantArena(constants, constantMappedBytes); }

namespace {

/// Native code of recently compiled programs, keyed by everything that determines it: the
/// LLVM IR of the stages and their constant tables, the host ISA and the JIT options.
class JitCache {
public:
  static constexpr size_t kCapacity = 32;

  std::shared_ptr<JitModule> find(const std::string &key) {
    std::lock_guard<std::mutex> l(m_);
    for (auto &e : entries_)
      if (e.first == key) {
        hits_++;
        return e.second;
      }
    return nullptr;
  }
  void insert(std::string key, std::shared_ptr<JitModule> jm) {
    std::lock_guard<std::mutex> l(m_);
    for (auto &e : entries_)
      if (e.first == key)
        return; // compiled concurrently by another thread; keep the first
    if (entries_.size() == kCapacity)
      entries_.pop_front();
    entries_.emplace_back(std::move(key), std::move(jm));
  }
  JitCacheStats stats() {
    std::lock_guard<std::mutex> l(m_);
    return {entries_.size(), hits_};
  }
  /// Serialises lookups of entry points in shared modules.
  std::mutex &lookupMutex() { return lookup_; }

private:
  std::mutex m_, lookup_;
  std::deque<std::pair<std::string, std::shared_ptr<JitModule>>> entries_;
  size_t hits_ = 0;
};

JitCache &jitCache() {
  static JitCache c;
  return c;
}

/// The reuse key of a module: its stage functions, the element-wise loops they call and the
/// constant tables they use (the kernel library is the same bitcode for the whole
/// process), plus the target and options.
std::string reuseKey(const llvm::Module &M, const std::vector<std::string> &entries,
                     const CodegenOptions &o, const HostInfo &host) {
  std::string key;
  llvm::raw_string_ostream os(key);
  os << host.cpu << ' ' << host.features << ' ' << host.avx512 << ' ' << o.threads << ' '
     << o.jit.preferVectorWidth << ' ' << o.jit.keepIR << ' ' << o.jit.keepAsm << ' '
     << o.jit.disableAvx512 << ' ' << o.specializeGemm << '\n';
  for (const llvm::GlobalVariable &g : M.globals())
    if (g.hasPrivateLinkage())
      g.print(os);
  for (const std::string &name : entries)
    if (const llvm::Function *f = M.getFunction(name))
      f->print(os);
  // The element-wise loops the stages call (EmitElementwise.cpp): not entry points, but
  // generated code all the same.
  for (const llvm::Function &f : M)
    if (!f.isDeclaration() && f.getName().startswith("kiln_ew_"))
      f.print(os);
  os.flush();
  return key;
}

/// The constant arena could not grow by \p bytes more.
Error constantsFull(uint64_t bytes) {
  return makeError(ErrorCode::OutOfMemory, "CPU backend: cannot grow the constant arena by ",
                   bytes, " bytes");
}

} // namespace

JitCacheStats getJitCacheStats() { return jitCache().stats(); }

Expected<Location> Emitter::loc(const Value *v) {
  if (auto *w = dyn_cast<WeightVar>(v)) {
    if (w->isConstant()) {
      KILN_ASSIGN_OR_RETURN(uint64_t off, constRaw(w));
      return Location{kConstantBase, off};
    }
    auto *ph = dyn_cast<Placeholder>(w->getOrigin());
    if (!ph)
      return makeError(ErrorCode::Internal, "CPU backend: mutable weight '", w->getName(),
                       "' is not a placeholder");
    auto it = phIndex_.find(ph);
    if (it == phIndex_.end()) {
      it = phIndex_.emplace(ph, unsigned(prog_.placeholders.size())).first;
      prog_.placeholders.push_back(ph);
      prog_.borrowed.push_back(nullptr);
      prog_.placeholderWritten.push_back(false);
    }
    return Location{kFirstPlaceholderBase + it->second, 0};
  }
  if (auto *tv = dyn_cast<TensorViewInst>(v)) {
    KILN_ASSIGN_OR_RETURN(Location l, loc(tv->getSrc()));
    const Type &st = *tv->getSrc()->getType();
    uint64_t off = viewElementOffset(tv);
    // A view is the source's elements [off, off + its size) in its own shape (IR.h: the
    // Interpreter reads it so too); the IR passes make views only of contiguous blocks.
    const Type &vt = *tv->getType();
    if (vt.numElements() && off + vt.numElements() > st.numElements())
      return makeError(ErrorCode::Internal, "CPU backend: view '", tv->getName(), "' of type ",
                       vt.toString(), " runs past its source ", st.toString());
    l.offset += off * st.elemBytes();
    return l;
  }
  auto it = activationOffsets_.find(v);
  if (it == activationOffsets_.end())
    return makeError(ErrorCode::Internal, "CPU backend: the memory plan has no place for '",
                     v->getName(), "'");
  return Location{kActivationBase, it->second};
}

Expected<uint64_t> Emitter::constRaw(const WeightVar *w) {
  auto key = std::make_tuple(w, WeightPacking::None, int64_t(0));
  auto it = constCache_.find(key);
  if (it != constCache_.end())
    return it->second;
  KILN_ASSIGN_OR_RETURN(const Tensor *payload, constPayload(w));
  const Tensor &t = *payload;
  uint64_t off = alignUp(consts_.size());
  if (!consts_.resize(off + alignUp(std::max<size_t>(t.getSizeInBytes(), 1))))
    return constantsFull(t.getSizeInBytes());
  if (t.getSizeInBytes()) // an empty payload has no pointer to copy from
    std::memcpy(consts_.data() + off, t.getUnsafePtr(), t.getSizeInBytes());
  constCache_[key] = off;
  return off;
}

Expected<Location> Emitter::constBorrowed(const WeightVar *w) {
  auto it = borrowedIndex_.find(w);
  if (it == borrowedIndex_.end()) {
    KILN_ASSIGN_OR_RETURN(const Tensor *t, constPayload(w));
    it = borrowedIndex_.emplace(w, unsigned(prog_.placeholders.size())).first;
    prog_.placeholders.push_back(nullptr);
    prog_.borrowed.push_back(t->getUnsafePtr());
    prog_.placeholderWritten.push_back(false);
  }
  return Location{kFirstPlaceholderBase + it->second, 0};
}

Expected<const Tensor *> Emitter::constPayload(const WeightVar *w) {
  const Tensor &t = cast<Constant>(w->getOrigin())->getPayload();
  if (t.size() && !t.getUnsafePtr())
    return makeError(ErrorCode::InvalidArgument, "CPU backend: constant '",
                     w->getOrigin()->getName(), "' of type ", t.getType().toString(),
                     " has no data (freed by an earlier compile with release-constants, or "
                     "parsed elided)");
  return &t;
}

void Emitter::releaseIfPacked(const WeightVar *w) {
  if (!opts_.releaseConstants || !planning_)
    return;
  auto u = users_.find(w);
  if (u == users_.end())
    return;
  for (const Instruction *I : u->second)
    if (I != planning_)
      return;
  auto *c = cast<Constant>(w->getOrigin());
  const Function *g = F_.getGraph();
  for (const NodeUse &use : c->getUsers())
    if (!g || use.user->getParent() != g)
      return;
  Tensor &t = c->getPayloadMutable();
  if (t.isOwning())
    t = Tensor::view(t.getType(), nullptr);
}

/// GemmA: A panels of each of `groups` row blocks of `rows` x `cols`; GemmB: B panels of a
/// `rows` (K) x `cols` (N) matrix; GemmBTransposed: W [cols x rows] packed as the B operand
/// W^T; Winograd4x4, WinogradRows2x2/4x4: 3x3 filters [rows = O][cols = C][3][3]
/// transformed for Winograd F(4x4, 3x3) (libjit_pack_wino), and with the tiles as rows
/// F(2x2, 3x3) and F(4x4, 3x3) (libjit_pack_wino_rows); GroupedTaps: each of `groups`
/// blocks of `rows` (O / G) x `cols` (C / G KH KW) transposed (libjit_pack_grouped_f32).
int64_t Emitter::packedFloats(WeightPacking kind, int64_t groups, int64_t rows,
                              int64_t cols) const {
  // Output tile of the tiles-as-rows Winograd packings (0: another packing).
  const int winoRowsTile = kind == WeightPacking::WinogradRows2x2   ? 2
                           : kind == WeightPacking::WinogradRows4x4 ? 4
                                                                    : 0;
  if (kind == WeightPacking::GemmA)
    return groups * (avx512_ ? libjit::packedAFloats<libjit::GemmAvx512>(rows, cols)
                             : libjit::packedAFloats<libjit::GemmAvx2>(rows, cols));
  if (kind == WeightPacking::Winograd4x4)
    return avx512_ ? libjit_pack_wino_floats_avx512(rows, cols)
                   : libjit_pack_wino_floats_avx2(rows, cols);
  if (kind == WeightPacking::GroupedTaps) // `groups` blocks of rows (Og) x cols (K)
    return groups * rows * cols;
  if (winoRowsTile)
    return avx512_ ? libjit_pack_wino_rows_floats_avx512(winoRowsTile, rows, cols)
                   : libjit_pack_wino_rows_floats_avx2(winoRowsTile, rows, cols);
  // GemmB, and GemmBTransposed (W [cols x rows] as the B operand W^T)
  return avx512_ ? libjit::packedBFloats<libjit::GemmAvx512>(rows, cols)
                 : libjit::packedBFloats<libjit::GemmAvx2>(rows, cols);
}

void Emitter::packFloats(WeightPacking kind, float *dst, const float *src, int64_t groups,
                         int64_t rows, int64_t cols) const {
  const int winoRowsTile = kind == WeightPacking::WinogradRows2x2   ? 2
                           : kind == WeightPacking::WinogradRows4x4 ? 4
                                                                    : 0;
  if (kind == WeightPacking::GemmA) {
    int64_t per = packedFloats(kind, groups, rows, cols) / groups;
    for (int64_t g = 0; g < groups; g++) {
      if (avx512_)
        libjit_pack_a_f32_avx512(dst + g * per, src + g * rows * cols, rows, cols, cols);
      else
        libjit_pack_a_f32_avx2(dst + g * per, src + g * rows * cols, rows, cols, cols);
    }
  } else if (kind == WeightPacking::GemmBTransposed) {
    if (avx512_)
      libjit_pack_bt_f32_avx512(dst, src, rows, cols);
    else
      libjit_pack_bt_f32_avx2(dst, src, rows, cols);
  } else if (kind == WeightPacking::Winograd4x4) {
    if (avx512_)
      libjit_pack_wino_f32_avx512(dst, src, rows, cols);
    else
      libjit_pack_wino_f32_avx2(dst, src, rows, cols);
  } else if (kind == WeightPacking::GroupedTaps) {
    libjit_pack_grouped_f32(dst, src, groups, rows, cols);
  } else if (winoRowsTile) {
    if (avx512_)
      libjit_pack_wino_rows_f32_avx512(winoRowsTile, dst, src, rows, cols);
    else
      libjit_pack_wino_rows_f32_avx2(winoRowsTile, dst, src, rows, cols);
  } else {
    if (avx512_)
      libjit_pack_b_f32_avx512(dst, src, rows, cols, cols);
    else
      libjit_pack_b_f32_avx2(dst, src, rows, cols, cols);
  }
}

Expected<uint64_t> Emitter::constPacked(const WeightVar *w, WeightPacking kind, int64_t groups,
                                        int64_t rows, int64_t cols) {
  auto key = std::make_tuple(w, kind, groups);
  auto it = constCache_.find(key);
  if (it != constCache_.end())
    return it->second;
  KILN_ASSIGN_OR_RETURN(const Tensor *payload, constPayload(w));
  const float *src = reinterpret_cast<const float *>(payload->getUnsafePtr());
  const int64_t floats = packedFloats(kind, groups, rows, cols);
  uint64_t off = alignUp(consts_.size());
  if (!consts_.resize(off + alignUp(floats * 4)))
    return constantsFull(uint64_t(floats) * 4);
  packFloats(kind, reinterpret_cast<float *>(consts_.data() + off), src, groups, rows, cols);
  constCache_[key] = off;
  releaseIfPacked(w);
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
  if (opts_.kernelTable && !opts_.specializeGemm) {
    // In the constant arena, as the kernels' addresses (CodegenOptions::kernelTable): in
    // the large code model fast instruction selection cannot take a global's address
    // either, and a call with a table argument went to SelectionDAG.
    auto it = arrayOffsets_.find(u);
    if (it == arrayOffsets_.end()) {
      uint64_t off = alignUp(consts_.size());
      if (!consts_.resize(off + u.size() * sizeof(uint64_t))) {
        missing_ = "an index table (no room in the constant arena)";
        return nullPtr();
      }
      std::memcpy(consts_.data() + off, u.data(), u.size() * sizeof(uint64_t));
      it = arrayOffsets_.emplace(u, off).first;
    }
    return B_.CreatePointerCast(at({kConstantBase, it->second}), i64_->getPointerTo());
  }
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
  return B_.CreateCall(ft, callee(f), args);
}

llvm::Value *Emitter::callee(llvm::Function *f) {
  static const std::set<std::string> sharedAvx512 = [] {
    std::vector<std::string> v = sharedKernelNames(true);
    return std::set<std::string>(v.begin(), v.end());
  }();
  static const std::set<std::string> sharedAvx2 = [] {
    std::vector<std::string> v = sharedKernelNames(false);
    return std::set<std::string>(v.begin(), v.end());
  }();
  std::string name = f->getName().str();
  if (!opts_.kernelTable || opts_.specializeGemm ||
      !(avx512_ ? sharedAvx512 : sharedAvx2).count(name))
    return f;
  return addressFromTable(name, f->getType());
}

llvm::Value *Emitter::addressFromTable(const std::string &name, llvm::PointerType *type) {
  // Loaded once per stage, in its entry block (as the base pointers are).
  auto cached = tableCache_.find(name);
  if (cached != tableCache_.end())
    return cached->second;
  auto it = kernelSlots_.find(name);
  if (it == kernelSlots_.end()) {
    uint64_t off = alignUp(consts_.size());
    if (!consts_.resize(off + sizeof(void *))) {
      missing_ = name + " (no room for its address in the constant arena)";
      return llvm::ConstantPointerNull::get(type);
    }
    it = kernelSlots_.emplace(name, off).first;
    prog_.kernelSlots.emplace_back(name, off);
  }
  llvm::Value *base = basePtr(kConstantBase);
  // Right after the base pointer's load (at the end of the entry block when that is all
  // the block holds yet).
  llvm::IRBuilder<> eb(entry_);
  if (llvm::Instruction *next = llvm::cast<llvm::Instruction>(base)->getNextNode())
    eb.SetInsertPoint(next);
  llvm::Value *slot = eb.CreatePointerCast(eb.CreateConstInBoundsGEP1_64(i8_, base, it->second),
                                           type->getPointerTo());
  llvm::LoadInst *addr = eb.CreateLoad(type, slot);
  addr->setMetadata(llvm::LLVMContext::MD_invariant_load, llvm::MDNode::get(ctx_, {}));
  tableCache_[name] = addr;
  return addr;
}

void Emitter::memCopy(llvm::Value *dst, llvm::Value *src, uint64_t bytes) {
  // Short copies stay the intrinsic, which even fast instruction selection makes moves of.
  if (!opts_.kernelTable || bytes <= kInlineCopyBytes) {
    B_.CreateMemCpy(dst, llvm::MaybeAlign(1), src, llvm::MaybeAlign(1), I64(int64_t(bytes)));
    return;
  }
  auto *ft = llvm::FunctionType::get(i8p_, {i8p_, i8p_, i64_}, false);
  B_.CreateCall(ft, addressFromTable(kProcessMemcpy, ft->getPointerTo()),
                {B_.CreatePointerCast(dst, i8p_), B_.CreatePointerCast(src, i8p_),
                 I64(int64_t(bytes))});
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
  tableCache_.clear();
  entryNames_->push_back(fname);
  Stage st;
  st.parallel = parallel;
  st.name = fname;
  st.desc = name;
  stages_.push_back(std::move(st));
}

void Emitter::endStage() {
  if (!fn_)
    return;
  B_.CreateRetVoid();
  fn_ = nullptr;
}

namespace {

/// Below about 10 us of work, handing half of it to another thread (a wake-up, then
/// waiting for the slower half) costs about what it saves.
constexpr uint64_t kMinParallelNanos = 10000;

/// Rough single-core time in nanoseconds. GEMM-like instructions: their multiply-adds at
/// about 50 per ns (100 GFLOP/s; depthwise convolutions, shuffle- and memory-bound, about
/// 20) plus their operands' bytes at about 25 per ns, since the small ones are bound by
/// what they read: a one-row FC or a squeeze-and-excitation 1x1 convolution streams its
/// weights at memory speed, and a 1x1 convolution of few channels reads and writes more
/// bytes than it has multiply-adds. Everything else moves about 8 elements per ns
/// (measured orders of magnitude on AVX-512, not a model).
uint64_t estimateNanos(const Instruction *I) {
  uint64_t out = I->getNumOperands() ? I->getOperand(0).first->getType()->numElements() : 0;
  auto in = [&](unsigned k) { return dimsOf(I->getOperand(k).first); };
  uint64_t bytesNanos = uint64_t(stageWork({I}).bytes) / 25;
  switch (I->getKind()) {
  case InstrKind::Convolution:
  case InstrKind::FusedConvolution: {
    auto x = in(1), w = in(2); // [N, C, H, W], [O, C/G, KH, KW]
    uint64_t macs = out * uint64_t(product(w, 1));
    bool depthwise = w.size() == 4 && x.size() == 4 && w[1] == 1 && x[1] > 1;
    return (depthwise ? macs / 20 : macs / 50) + bytesNanos;
  }
  case InstrKind::FullyConnected:
  case InstrKind::FusedFullyConnected:
  case InstrKind::MatMul:
  case InstrKind::BatchMatMul:
    return out * uint64_t(in(1).back()) / 50 + bytesNanos;
  default: {
    uint64_t n = 0;
    for (const auto &o : I->getOperands())
      n += o.first->getType()->numElements();
    return n / 8;
  }
  }
}

} // namespace

Error Emitter::plan(Instruction *I, std::vector<Item> &items) {
  static const EmitterTable table = [] {
    EmitterTable t;
    registerConvEmitters(t);
    registerLinalgEmitters(t);
    registerNormEmitters(t);
    registerDataEmitters(t);
    registerQuantEmitters(t);
    registerQuantConvEmitters(t);
    registerQuantElemEmitters(t);
    return t;
  }();
  auto it = table.find(I->getKind());
  if (it == table.end())
    return unsupported(I);
  size_t first = items.size();
  planning_ = I;
  Error planned = (this->*(it->second))(I, items);
  planning_ = nullptr;
  KILN_RETURN_IF_ERR(std::move(planned));
  // The instruction's work goes to its last item, the one that computes its result,
  // unless its emitter gave it to another.
  bool given = false;
  for (size_t i = first; i < items.size(); i++)
    given = given || items[i].work.has_value();
  if (items.size() > first && !given)
    items.back().work = stageWork({I});
  // Handing work to the pool costs microseconds (more when the other cores are busy):
  // instructions too small to repay it run on the calling thread.
  if (estimateNanos(I) < kMinParallelNanos)
    for (size_t i = first; i < items.size(); i++)
      items[i].parallel = false;
  return Error::success();
}

namespace {

bool overlapsBadly(const Range &a, const Range &b) {
  if (a.base != b.base)
    return false;
  if (a.begin == b.begin && a.end == b.end)
    return false;
  return a.begin < b.end && b.begin < a.end;
}

} // namespace

Error Emitter::closeChain(Chain &chain, std::vector<Item> &items) {
  KILN_RETURN_IF_ERR(planElementwise(chain.instrs, items));
  chain.ranges.clear();
  chain.broadcastDims.clear();
  return Error::success();
}

Expected<Emitter::RangeUses> Emitter::elementRanges(Instruction *I, int64_t n, bool bcast) {
  RangeUses mine;
  for (unsigned k = 0; k < I->getNumOperands(); k++) {
    const Value *v = I->getOperand(k).first;
    if (!bcast && int64_t(v->getType()->numElements()) != n)
      return makeError(ErrorCode::InvalidArgument, "CPU backend: element-wise '",
                       I->getName(), "' has operands of different sizes");
    KILN_ASSIGN_OR_RETURN(Range r, range(v));
    mine.push_back({r, k == 0});
  }
  return mine;
}

bool Emitter::fitsChain(const Chain &chain, Instruction *I, const RangeUses &mine, int64_t n,
                        bool bcast) const {
  bool fits = opts_.fuseElementwise && !chain.instrs.empty() && n == chain.n;
  if (fits && bcast)
    fits = chain.broadcastDims.empty() || chain.broadcastDims == dimsOf(I->getOperand(0).first);
  if (fits) {
    for (auto &a : mine)
      for (auto &b : chain.ranges)
        if ((a.second || b.second) && overlapsBadly(a.first, b.first))
          fits = false;
    // A broadcast's source is read at other indices than the loop's: it must not be
    // written by the chain at all.
    if (bcast)
      for (auto &b : chain.ranges)
        if (b.second && b.first.base == mine[1].first.base &&
            b.first.begin < mine[1].first.end && mine[1].first.begin < b.first.end)
          fits = false;
  }
  return fits;
}

Error Emitter::planNext(Instruction *I, Chain &chain, std::vector<Item> &items) {
  ElemOp op;
  // A Broadcast joins a chain as a strided read of its source (EmitElementwise.cpp).
  // A Splat joins it as a constant.
  bool bcast = opts_.fuseElementwise && isFusableBroadcast(I);
  bool ew = bcast || (opts_.fuseElementwise && isFusableSplat(I)) || elemOpOf(I, op);
  if (!ew) {
    InstrKind k = I->getKind();
    if (k == InstrKind::AllocActivation || k == InstrKind::DeallocActivation ||
        k == InstrKind::TensorView)
      return Error::success();
    KILN_RETURN_IF_ERR(closeChain(chain, items));
    return plan(I, items);
  }
  int64_t n = int64_t(I->getOperand(0).first->getType()->numElements());
  KILN_ASSIGN_OR_RETURN(RangeUses mine, elementRanges(I, n, bcast));
  bool fits = fitsChain(chain, I, mine, n, bcast);
  for (auto &a : mine)
    for (auto &b : mine)
      if ((a.second || b.second) && overlapsBadly(a.first, b.first)) {
        if (bcast) // not as a chain: the Broadcast's own emitter
          ew = false;
        else
          return makeError(ErrorCode::Unsupported,
                           "CPU backend: partially overlapping operands of '", I->getName(),
                           "'");
      }
  if (!ew) {
    KILN_RETURN_IF_ERR(closeChain(chain, items));
    return plan(I, items);
  }
  if (!fits)
    KILN_RETURN_IF_ERR(closeChain(chain, items));
  if (bcast)
    chain.broadcastDims = dimsOf(I->getOperand(0).first);
  chain.instrs.push_back(I);
  chain.n = n;
  chain.ranges.insert(chain.ranges.end(), mine.begin(), mine.end());
  return Error::success();
}

Error Emitter::planItems(std::vector<Item> &items) {
  for (auto &up : F_.getInstrs())
    for (const auto &o : up->getOperands()) {
      users_[o.first].push_back(up.get());
      // A constant freed by an earlier compile (releaseConstants) is refused before any
      // emitter reads it.
      if (auto *w = dyn_cast<WeightVar>(o.first))
        if (w->isConstant())
          KILN_RETURN_IF_ERR(constPayload(w).takeError());
    }
  Chain chain;
  for (auto &up : F_.getInstrs())
    KILN_RETURN_IF_ERR(planNext(up.get(), chain, items));
  return planElementwise(chain.instrs, items);
}

Error Emitter::checkBuffers() {
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
  return Error::success();
}

void Emitter::placeScratch() {
  if (tScratchBytes_)
    tScratchOffset_ = reserveExtra(tScratchBytes_);
  if (phaseScratchBytes_)
    phaseScratchOffset_ = reserveExtra(phaseScratchBytes_);
  if (usesScratch_)
    extrasTop_ = alignUp(extrasTop_ + uint64_t(scratchPerThread_) * 4 * opts_.threads);
  // Scratch sits above the extras: move it there.
  scratchOffset_ = usesScratch_ ? extrasTop_ - alignUp(uint64_t(scratchPerThread_) * 4 * opts_.threads)
                                : scratchOffset_;
}

namespace {
void addWork(Stage &s, const Emitter::Item &it) {
  if (it.work) {
    s.flops += it.work->flops;
    s.bytes += it.work->bytes;
  }
}
} // namespace

Error Emitter::emitStages(std::vector<Item> &items) {
  bool open = false;
  // Profiles (CPUBackend.cpp) time every item on its own.
  const bool profile = opts_.profile;
  for (Item &it : items) {
    bool par = it.parallel && opts_.threads > 1;
    if (par || profile) {
      endStage();
      open = false;
      beginStage(par, it.name);
      it.emit();
      addWork(stages_.back(), it);
      endStage();
    } else {
      if (!open) {
        beginStage(false, it.name);
        open = true;
      } else if (stages_.back().desc.size() < 60) {
        stages_.back().desc += "+" + it.name;
      }
      it.emit();
      addWork(stages_.back(), it);
    }
    if (!missing_.empty())
      return makeError(ErrorCode::Internal, "CPU backend: kernel '", missing_, "' not found");
  }
  endStage();
  return Error::success();
}

Error Emitter::run(std::vector<std::string> &entryNames) {
  entryNames_ = &entryNames;
  // Pass 1: turn instructions into items (fusing element-wise chains).
  std::vector<Item> items;
  KILN_RETURN_IF_ERR(planItems(items));
  KILN_RETURN_IF_ERR(checkBuffers());
  placeScratch();
  // Pass 2: stages.
  KILN_RETURN_IF_ERR(emitStages(items));
  prog_.stages = std::move(stages_);
  stages_.clear();
  return Error::success();
}

EmittedProgram::EmittedProgram() = default;
EmittedProgram::EmittedProgram(EmittedProgram &&) = default;
EmittedProgram::~EmittedProgram() = default;

Expected<EmittedProgram> emitProgram(IRFunction &F, const MemoryPlan &plan,
                                     const CodegenOptions &opts) {
  EmittedProgram out;
  out.prog = std::make_unique<Program>();
  Program *prog = out.prog.get();
  prog->threads = std::max(1u, opts.threads);
  CodegenOptions o = opts;
  o.threads = prog->threads;
  // Hosts without AVX2 run the 256-bit variant too: LLVM splits its vectors for SSE, so
  // it stays correct, only slower.
  out.host = detectHost(opts.jit);
  const HostInfo &host = out.host;
  prog->avx512 = host.avx512;
  // float16 weights are widened with F16C's (or AVX-512's) vcvtph2ps: a target without it
  // (a bundle for plain x86-64) keeps them float32. Every AVX2 target has F16C.
  o.halfWeights = o.halfWeights &&
                  (host.avx2 || host.features.find("+f16c") != std::string::npos);

  TraceScope irgen(opts.tracer, "compile", "llvm-irgen");
  out.ctx = std::make_unique<llvm::LLVMContext>();
  KILN_ASSIGN_OR_RETURN(out.module, loadLibjitModule(*out.ctx));
  llvm::Module *M = out.module.get();
  M->setModuleIdentifier("kiln_" + F.getName());
  Emitter em(F, o, plan, host.avx512, *out.ctx, *M, *prog);
  em.setAvx512Bf16(host.avx512bf16);
  KILN_RETURN_IF_ERR(em.run(out.entries));
  irgen.arg("stages", int64_t(prog->stages.size()));
  irgen.end();
  // The GEMM-based kernels come precompiled (once per process) unless specialised.
  if (!o.specializeGemm) {
    std::vector<std::string> candidates = sharedKernelNames(host.avx512);
    // Only those this program calls: small programs then compile in milliseconds.
    for (const std::string &n : candidates)
      if (em.called().count(n))
        out.sharedKernels.push_back(n);
  }
  // A stage that only calls code compiled elsewhere or out of line (shared kernels, the
  // element-wise loop functions, memcpy and memset) has nothing to optimise: it is
  // compiled as at -O0 (optnone: no IR passes, fast instruction selection), which cuts
  // what a cold compile spends on a network's stages (straight-line calls, one per
  // instruction) by about a quarter.
  std::set<std::string> outOfLine(out.sharedKernels.begin(), out.sharedKernels.end());
  for (const std::string &name : out.entries) {
    llvm::Function *f = M->getFunction(name);
    if (!f)
      continue;
    bool callsOnly = true;
    for (llvm::BasicBlock &bb : *f)
      for (llvm::Instruction &i : bb)
        if (auto *cb = llvm::dyn_cast<llvm::CallBase>(&i)) {
          // A call through a loaded address calls a shared kernel (Emitter::callee).
          llvm::Function *c = cb->getCalledFunction();
          bool throughTable = llvm::isa<llvm::LoadInst>(cb->getCalledOperand());
          callsOnly = callsOnly && (throughTable || (c && (c->isIntrinsic() ||
                                                            c->getName().startswith("kiln_ew_") ||
                                                            outOfLine.count(c->getName().str()))));
        }
    if (callsOnly) {
      f->addFnAttr(llvm::Attribute::OptimizeNone);
      f->addFnAttr(llvm::Attribute::NoInline);
    }
  }

  TraceScope pack(opts.tracer, "compile", "constants");
  prog->activationPeakBytes = plan.activationBytes;
  prog->activationBytes = em.activationBytes();
  ConstantArena &c = em.constants();
  prog->constantBytes = c.size();
  KILN_ASSIGN_OR_RETURN(ConstantArena::Released consts, c.release());
  prog->constants = consts.data;
  prog->constantMappedBytes = consts.mappedBytes;
  pack.arg("bytes", int64_t(prog->constantBytes));
  pack.end();
  out.fusedLoops = em.numFusedLoops();
  out.fusedInstrs = em.numFusedInstrs();
  out.sharedLoops = em.numSharedLoops();
  return std::move(out);
}

Expected<std::unique_ptr<Program>> generateProgram(IRFunction &F, const MemoryPlan &plan,
                                                   const CodegenOptions &opts) {
  CodegenOptions withTable = opts;
  withTable.kernelTable = true;
  KILN_ASSIGN_OR_RETURN(EmittedProgram ep, emitProgram(F, plan, withTable));
  std::unique_ptr<Program> prog = std::move(ep.prog);
  std::unique_ptr<llvm::LLVMContext> ctx = std::move(ep.ctx);
  std::unique_ptr<llvm::Module> M = std::move(ep.module);
  const std::vector<std::string> &entries = ep.entries;
  const HostInfo &host = ep.host;
  CodegenOptions o = opts;
  o.threads = prog->threads;
  std::map<std::string, void *> shared;
  if (!ep.sharedKernels.empty()) {
    TraceScope sharedJit(opts.tracer, "compile", "jit-shared-kernels");
    KILN_ASSIGN_OR_RETURN(shared, getSharedKernels(ep.sharedKernels, o.jit));
  }

  // The addresses of the shared kernels (and memcpy) the stages call through the
  // constant arena.
  for (const auto &[name, off] : prog->kernelSlots) {
    void *addr = nullptr;
    if (name == kProcessMemcpy) {
      addr = reinterpret_cast<void *>(&std::memcpy);
    } else {
      auto it = shared.find(name);
      if (it == shared.end())
        return makeError(ErrorCode::Internal, "CPU backend: shared kernel '", name,
                         "' was not loaded");
      addr = it->second;
    }
    std::memcpy(prog->constants + off, &addr, sizeof(void *));
  }

  TraceScope jit(opts.tracer, "compile", "jit");
  std::string key = reuseKey(*M, entries, o, host);
  prog->jit = jitCache().find(key);
  prog->jitReused = prog->jit != nullptr;
  jit.arg("reused", int64_t(prog->jitReused));
  if (!prog->jit) {
    // Compiled before, by this process or another: the object code on disk (the key is
    // the module's text, so any change of code, shapes or options is a new file).
    std::string path = o.jit.keepIR || o.jit.keepAsm ? "" : cachedObjectPath(o.jit.cacheDir, key);
    std::unique_ptr<JitModule> jm;
    if (!path.empty())
      jm = JitModule::loadObject(path, entries, o.jit, shared);
    prog->jitFromDisk = jm != nullptr;
    if (jm) {
      touchCachedObject(path);
    } else {
      KILN_ASSIGN_OR_RETURN(jm, JitModule::compile(std::move(ctx), std::move(M), entries, o.jit,
                                                   shared, path));
      if (!path.empty()) // programs add a file each: keep the cache bounded
        trimObjectCache(o.jit.cacheDir, kObjectCacheMaxBytes);
    }
    prog->jit = std::move(jm);
    jitCache().insert(std::move(key), prog->jit);
  }
  {
    std::lock_guard<std::mutex> l(jitCache().lookupMutex());
    for (Stage &s : prog->stages) {
      KILN_ASSIGN_OR_RETURN(void *addr, prog->jit->lookup(s.name));
      s.fn = reinterpret_cast<StageFn>(addr);
    }
  }
  jit.end();
  unsigned fused = 0;
  uint64_t unshared = 0;
  for (const auto &I : F.getInstrs())
    fused += isa<FusedConvolutionInst>(I.get()) || isa<FusedFullyConnectedInst>(I.get());
  for (const PlannedBuffer &b : plan.buffers)
    if (b.region == MemoryRegion::Activation)
      unshared += alignUp(b.size);
  std::ostringstream os;
  os << "stages " << prog->stages.size() << ", fused epilogues " << fused
     << ", element-wise loops " << ep.fusedLoops << " (" << ep.fusedInstrs << " instrs, "
     << ep.sharedLoops << " shared), activations " << plan.activationBytes << " B (unshared "
     << unshared << " B), arena " << prog->activationBytes << " B, constants " << prog->constantBytes
     << " B, " << (host.avx512 ? "avx512" : "avx2") << ", threads " << prog->threads
     << (prog->jitReused ? ", native code reused" : prog->jitFromDisk ? ", native code from disk" : "");
  if (prog->jit->objectCount() > 1)
    os << " (" << prog->jit->objectCount() << " objects)";
  prog->stats = os.str();
  return std::move(prog);
}

} // namespace kiln::cpu
