/// \file
/// The CPU backend's LLVM IR emitter (internal to codegen/). LLVMIRGen.cpp has the
/// infrastructure (buffer locations, constants and their packing, stages, the driver);
/// each instruction kind has an emitter in a family file, registered by kind
/// (registerConvEmitters, ...), and element-wise instructions get their default kernel from
/// the operator table (EmitElementwise.cpp). An emitter turns one instruction into Items.
#ifndef KILN_BACKENDS_CPU_CODEGEN_EMITTER_H
#define KILN_BACKENDS_CPU_CODEGEN_EMITTER_H

#include "Codegen.h"
#include "StageWork.h"

#include "backends/CPU/libjit/libjit_gemm_config.h"

#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace kiln::cpu {

constexpr uint64_t kAlign = 64;
inline uint64_t alignUp(uint64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

/// Byte range of a buffer, for alias checks.
struct Range {
  unsigned base;
  uint64_t begin, end;
};

/// The epilogue of a GEMM-based kernel: the residual added after the bias, then an
/// activation: act is the kernels' code (backends/CPU/libjit/libjit_act.h: 0 none, 1 clamp
/// to [lo, hi], 2-9 the others with parameters lo, hi).
struct FusedEpilogue {
  Value *add = nullptr; ///< residual (same shape as the result), or null
  int act = 0;
  float lo = 0.0f, hi = 0.0f;
};

/// The kernels' code of a fused node's Activation (the table's names), with its parameters
/// from the node's Alpha and Beta; false for a name the kernels do not have.
bool activationCode(const std::string &act, float alpha, float beta, FusedEpilogue &epi);

/// Data movement between quantized types of one kind with other scales or offsets: each
/// element is requantized as it moves (libjit_strided_rescale_*).
struct Requant {
  ElemKind kind;
  float inScale, outScale;
  int32_t inOffset, outOffset;
};

/// The requantization from \p src to \p dst, or false when their elements copy as they are.
inline bool requantOf(const Type &src, const Type &dst, Requant &rq) {
  if (!src.isQuantizedType() || src.kind != dst.kind ||
      (src.scale == dst.scale && src.offset == dst.offset))
    return false;
  rq = {src.kind, src.scale, dst.scale, src.offset, dst.offset};
  return true;
}

/// An element-wise instruction's scalar kernel and its float attributes.
struct ElemOp {
  std::string fn;
  /// The instruction's float and Bool attributes in table order, appended to the kernel's
  /// arguments (a Bool one as an i1 constant: the kernel's `bool` parameter).
  struct Attr {
    bool isBool;
    float value;
  };
  std::vector<Attr> attrs;
};

inline std::vector<int64_t> dimsOf(const Value *v) {
  std::vector<int64_t> d;
  for (dim_t x : v->getType()->dims)
    d.push_back(int64_t(x));
  return d;
}
inline std::vector<int64_t> stridesOf(const std::vector<int64_t> &dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = int(dims.size()) - 2; i >= 0; i--)
    s[i] = s[i + 1] * dims[i + 1];
  return s;
}
inline int64_t product(const std::vector<int64_t> &d, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t p = 1;
  for (size_t i = from; i < d.size() && i < to; i++)
    p *= d[i];
  return p;
}

/// An element-wise chain being emitted (EmitElementwise.cpp).
struct EwChain;

class Emitter {
public:
  Emitter(IRFunction &F, const CodegenOptions &opts, const MemoryPlan &plan, bool avx512,
          llvm::LLVMContext &ctx, llvm::Module &M, Program &prog)
      : F_(F), opts_(opts), avx512_(avx512), ctx_(ctx), M_(M), prog_(prog), B_(ctx) {
    for (const PlannedBuffer &b : plan.buffers)
      if (b.region == MemoryRegion::Activation)
        activationOffsets_[b.value] = b.offset;
    isa_ = avx512 ? "avx512" : "avx2";
    scratchPerThread_ = avx512 ? libjit::gemmScratchFloats<libjit::GemmAvx512>()
                               : libjit::gemmScratchFloats<libjit::GemmAvx2>();
    scratchOffset_ = alignUp(plan.activationBytes);
    extrasTop_ = scratchOffset_;
    i8_ = llvm::Type::getInt8Ty(ctx);
    i64_ = llvm::Type::getInt64Ty(ctx);
    f32_ = llvm::Type::getFloatTy(ctx);
    i8p_ = i8_->getPointerTo();
  }

  /// The bf16 GEMMs may use vdpbf16ps (the target has AVX512_BF16).
  void setAvx512Bf16(bool on) { avx512bf16_ = on; }

  Error run(std::vector<std::string> &entryNames);
  uint64_t activationBytes() const { return extrasTop_; }
  ConstantArena &constants() { return consts_; }
  unsigned numFusedLoops() const { return fusedLoops_; }
  unsigned numFusedInstrs() const { return fusedInstrs_; }
  unsigned numSharedLoops() const { return sharedLoops_; }
  /// Every kernel the generated code calls.
  const std::set<std::string> &called() const { return called_; }

  /// One planned step: emit() writes its LLVM IR into the current stage; parallel items
  /// get a stage of their own, run by every thread of the pool.
  struct Item {
    bool parallel;
    std::string name;
    std::function<void()> emit;
    /// What it computes, for the profile's rates. Left unset, plan() gives the whole
    /// instruction's work to its last item (the one that computes the result); an emitter
    /// that splits the work otherwise sets it on the items itself.
    std::optional<StageWork> work;
  };

  // ---- Emitters by instruction kind (EmitConv.cpp, EmitLinalg.cpp, EmitNorm.cpp,
  // EmitData.cpp, EmitQuant.cpp; element-wise chains in EmitElementwise.cpp) ----
  Error planConv(Instruction *I, std::vector<Item> &items);
  /// A float or bf16 convolution's shape and fused epilogue (ConvolutionInst or
  /// FusedConvolutionInst); an error for a convolution that is not 2-D or an activation no
  /// kernel fuses.
  Expected<ConvShape> convShapeOf(Instruction *I, FusedEpilogue &epi);
  /// The items of a convolution of shape \p s computed as \p plan says, its result written
  /// at \p dest from the input at \p in (plan.phases: the undilated kernel's, on the phase
  /// buffers of emitConvPhases).
  Error emitConv(const ConvPlan &plan, const ConvShape &s, const FusedEpilogue &epi,
                 Location dest, Location in, Value *filter, Value *bias,
                 std::vector<Item> &items);
  /// A convolution computed as its dilation phases (ConvPhases): the input split into the
  /// phase buffer, the undilated kernel \p plan names on it, its results merged into
  /// \p dest; \p I's work goes to the kernel's item.
  Error emitConvPhases(Instruction *I, const ConvPlan &plan, const ConvShape &s,
                       const FusedEpilogue &epi, Value *dest, Value *in, Value *filter,
                       Value *bias, std::vector<Item> &items);
  /// emitConv's Winograd kernels (tiles as GEMM columns, or as rows) and its packed GEMM
  /// (weights packed at compile time, or per run when computed at run time); \p label
  /// names the item in profiles.
  Error emitWinogradConv(const ConvPlan &plan, const ConvShape &s, const FusedEpilogue &epi,
                         const std::string &label, Location dest, Location in, Value *filter,
                         Value *bias, std::vector<Item> &items);
  Error emitPackedGemmConv(const ConvPlan &plan, const ConvShape &s, const FusedEpilogue &epi,
                           const std::string &label, Location dest, Location in,
                           Value *filter, Value *bias, std::vector<Item> &items);
  Error planFullyConnected(Instruction *I, std::vector<Item> &items);
  Error planFusedFullyConnected(Instruction *I, std::vector<Item> &items);
  Error planMatMul(Instruction *I, std::vector<Item> &items);
  Error planBatchMatMul(Instruction *I, std::vector<Item> &items);
  Error planBatchedAdd(Instruction *I, std::vector<Item> &items);
  Error planPool(Instruction *I, std::vector<Item> &items);
  Error planAdaptiveAvgPool(Instruction *I, std::vector<Item> &items);
  Error planBatchNormalization(Instruction *I, std::vector<Item> &items);
  Error planLayerNormalization(Instruction *I, std::vector<Item> &items);
  Error planSoftMax(Instruction *I, std::vector<Item> &items);
  Error planReduceKind(Instruction *I, std::vector<Item> &items);
  Error planCopy(Instruction *I, std::vector<Item> &items);
  Error planConcat(Instruction *I, std::vector<Item> &items);
  Error planSlice(Instruction *I, std::vector<Item> &items);
  Error planTranspose(Instruction *I, std::vector<Item> &items);
  Error planBroadcast(Instruction *I, std::vector<Item> &items);
  Error planTile(Instruction *I, std::vector<Item> &items);
  Error planPad(Instruction *I, std::vector<Item> &items);
  Error planSplat(Instruction *I, std::vector<Item> &items);
  Error planInsertTensor(Instruction *I, std::vector<Item> &items);
  Error planGather(Instruction *I, std::vector<Item> &items);
  Error planGatherElements(Instruction *I, std::vector<Item> &items);
  Error planGatherND(Instruction *I, std::vector<Item> &items);
  Error planScatterElements(Instruction *I, std::vector<Item> &items);
  Error planScatterND(Instruction *I, std::vector<Item> &items);
  struct ScatterPlan;
  Expected<ScatterPlan> scatterPlan(Instruction *I, Value *dest, Value *data, Value *idx,
                                    Value *upd, const std::string &red);
  void copyData(const ScatterPlan &p);
  Error planCumSum(Instruction *I, std::vector<Item> &items);
  Error planGridSample(Instruction *I, std::vector<Item> &items);
  Error planRoiAlign(Instruction *I, std::vector<Item> &items);
  Error planArgReduce(Instruction *I, std::vector<Item> &items);
  Error planTopK(Instruction *I, std::vector<Item> &items);
  Error planQuant(Instruction *I, std::vector<Item> &items);
  /// int8 Convolution/FullyConnected and their channelwise forms (EmitQuantConv.cpp); the
  /// float ones go on to planConv / planFullyConnected.
  Error planQuantConv(Instruction *I, std::vector<Item> &items);
  Error planQuantFC(Instruction *I, std::vector<Item> &items);
  /// planQuantFC's run-time weights (not constants): an item of \p items packs them per
  /// run (libjit_qpack_fc_rt) into buffers of the plan; their locations (weights, constants).
  std::pair<Location, Location> quantFCRuntimeWeights(Value *weights, Value *bias,
                                                      Value *scalesV, Value *offsetsV,
                                                      float inScale, int64_t xOff, int64_t K,
                                                      int64_t M, int64_t T,
                                                      std::vector<Item> &items);
  /// How an int8 convolution or FC kernel reads its input and writes its result: the input
  /// (a uint8 one flipped to int8 into a buffer of the plan by an item added to \p items),
  /// the input and output offsets as the int8 kernels take them (uint8 ones less 128),
  /// whether the result is i32 (the accumulators) or uint8 (flipped after the kernel by
  /// quantFlipOut).
  struct QuantIO {
    Location in;
    int64_t xOff = 0, outOff = 0;
    bool i32 = false, flipOut = false;
  };
  Expected<QuantIO> quantIO(Instruction *I, Value *dest, Value *in, std::vector<Item> &items);
  void quantFlipOut(Value *dest, const QuantIO &io, std::vector<Item> &items);
  /// planQuantConv's parts (EmitQuantConv.cpp): the operands and geometry of an int8
  /// convolution (checked), the depthwise kernel, the weights (packed now, or per run by an
  /// item added to \p items: their location and the constants') and the GEMM kernel's call.
  struct QConv;
  Error quantConvOperands(Instruction *I, QConv &q);
  Error planQuantDepthwise(const QConv &q, const QuantIO &io, std::vector<Item> &items);
  /// A 1x1 strided layer as a stride-1 one: its pixels packed into a buffer of the plan by
  /// an item added to \p items, which becomes \p io's input, and \p q's geometry set to it.
  void quantConvSubsample(QConv &q, QuantIO &io, std::vector<Item> &items);
  Expected<std::pair<Location, Location>> quantConvWeights(const QConv &q, int64_t xOff,
                                                           std::vector<Item> &items);
  void quantConvCall(const QConv &q, const QuantIO &io, Location wL, Location pL,
                     std::vector<Item> &items);
  /// int8 MatMul and BatchMatMul (EmitQuantConv.cpp: the FC's packing per batch, no
  /// bias, libjit_qbmm_i8_<isa>); float ones go on to planMatMul / planBatchMatMul. Its
  /// parts: the operands and shape (checked), and the right operand packed now or per run
  /// (libjit_qpack_bmm_rt, by an item added to \p items): its location and the constants'.
  Error planQuantMatMul(Instruction *I, std::vector<Item> &items);
  struct QMatMul;
  Error quantMatMulOperands(Instruction *I, QMatMul &q);
  Expected<std::pair<Location, Location>> quantMatMulWeights(const QMatMul &q, int64_t xOff,
                                                             std::vector<Item> &items);
  /// int8 Relu, Add, Sub, Mul, Max, Min (tables) and pools (EmitQuantElem.cpp).
  Error planQuantElem(Instruction *I, std::vector<Item> &items);
  /// int8 BatchedAdd (EmitQuantElem.cpp: the Add's kernel with the slice repeated per
  /// row, libjit_qbadd_i8_<isa>); float ones go on to planBatchedAdd.
  Error planQuantBatchedAdd(Instruction *I, std::vector<Item> &items);
  Error planQuantPool(Instruction *I, std::vector<Item> &items);

private:
  /// Appends serial items to \p items: serialTo(items)("name", emit).
  static auto serialTo(std::vector<Item> &items) {
    return [&items](const char *name, std::function<void()> f) {
      items.push_back({false, name, std::move(f)});
    };
  }
  static Error unsupported(const Instruction *I) {
    return makeError(ErrorCode::Unsupported, "CPU backend: no code for ", I->getKindName(),
                     " '", I->getName(), "'");
  }
  /// The element-wise kernel of \p I, if it is an element-wise instruction with one.
  bool elemOpOf(Instruction *I, ElemOp &op);
  /// The LLVM type of an element kind the element-wise kernels have (f32, i32, i64, Bool
  /// as i8), else null.
  llvm::Type *elemType(ElemKind k);
  /// Makes element-wise kernel \p name inlinable into the stages (EmitElementwise.cpp).
  void inlineKernel(const std::string &name);
  /// A Splat an element-wise chain uses as a constant (EmitElementwise.cpp).
  bool isFusableSplat(Instruction *I);
  /// The value a Splat of \p v stores in kind \p k.
  llvm::Constant *splatConstant(ElemKind k, float v);
  /// A Broadcast an element-wise chain can read in place (EmitElementwise.cpp).
  bool isFusableBroadcast(Instruction *I);
  /// The instructions that have \p v as an operand.
  const std::vector<const Instruction *> &usersOf(const Value *v) { return users_[v]; }

  // ---- Buffers ----
  Expected<Location> loc(const Value *v);
  Expected<Range> range(const Value *v) {
    KILN_ASSIGN_OR_RETURN(Location l, loc(v));
    return Range{l.base, l.offset, l.offset + v->getType()->sizeInBytes()};
  }
  Expected<uint64_t> constRaw(const WeightVar *w);
  /// \p bytes of \p data copied into the constant arena (64-byte aligned).
  Expected<uint64_t> constBytes(const void *data, uint64_t bytes);
  /// The int8 kernels' ISA ("vnni", "avx2", "generic") and its 32-bit lanes per vector.
  std::string qIsa(int64_t &lanes);
  Expected<uint64_t> constPacked(const WeightVar *w, WeightPacking packing, int64_t groups,
                                 int64_t rows, int64_t cols);
  /// Floats of a float32 weight packed as \p kind (GemmA, GemmB, GemmBTransposed, the
  /// Winograd and GroupedTaps packings) for this target's GEMM tiles, and the packing itself
  /// into \p dst: what constPacked and constPackedHalf store.
  int64_t packedFloats(WeightPacking kind, int64_t groups, int64_t rows, int64_t cols) const;
  void packFloats(WeightPacking kind, float *dst, const float *src, int64_t groups,
                  int64_t rows, int64_t cols) const;
  /// True when constant \p w is held as float16 (CodegenOptions::halfWeights): float32,
  /// every value a float16 (checked once per constant, EmitHalfWeights.cpp).
  bool storesHalf(const WeightVar *w);
  /// \p w packed as constPacked packs it for GemmA (`groups` blocks of rows x cols),
  /// GemmB (rows = K x cols), GemmBTransposed or None (as it is), then stored as float16
  /// (\p packing GemmAHalf, GemmBHalf, GemmBTransposedHalf or NoneHalf): exact, since
  /// storesHalf(w).
  Expected<uint64_t> constPackedHalf(const WeightVar *w, WeightPacking packing, int64_t groups,
                                     int64_t rows, int64_t cols);
  /// Where the constant \p w is read in place (CodegenOptions::borrowConstants): an
  /// external buffer bound to its payload at each run (Program::borrowed).
  Expected<Location> constBorrowed(const WeightVar *w);
  /// The payload of constant \p w; an error when it has no data (released by an earlier
  /// compile with CodegenOptions::releaseConstants).
  Expected<const Tensor *> constPayload(const WeightVar *w);
  /// With CodegenOptions::releaseConstants, frees the graph's copy of \p w when the
  /// instruction being planned is the only one that reads it and no node outside the
  /// compiled function uses it.
  void releaseIfPacked(const WeightVar *w);
  uint64_t reserveExtra(uint64_t bytes) {
    uint64_t off = extrasTop_;
    extrasTop_ = alignUp(extrasTop_ + bytes);
    return off;
  }
  llvm::Value *basePtr(unsigned base);
  /// The callee of a call of kernel \p f: \p f itself, or with CodegenOptions::kernelTable
  /// and a shared kernel, its address loaded from the kernel table in the constant arena.
  llvm::Value *callee(llvm::Function *f);
  /// The address of \p name (a shared kernel, or kProcessMemcpy) as a value of \p type,
  /// loaded from its slot in the constant arena (Program::kernelSlots).
  llvm::Value *addressFromTable(const std::string &name, llvm::PointerType *type);
  /// Copies \p bytes from \p src to \p dst: the memcpy intrinsic, or with
  /// CodegenOptions::kernelTable a call of the process's memcpy through the constant arena
  /// when the copy is longer than kInlineCopyBytes (a call of memcpy is another global
  /// that fast instruction selection cannot call in the large code model).
  void memCopy(llvm::Value *dst, llvm::Value *src, uint64_t bytes);
  static constexpr uint64_t kInlineCopyBytes = 32;
  /// A Location in the dilation phases' buffers (phaseScratchOffset_, placed after the
  /// plan: emitConvPhases), resolved by at().
  static constexpr unsigned kPhaseScratchBase = ~0u;
  llvm::Value *at(Location l) {
    if (l.base == kPhaseScratchBase)
      l = {kActivationBase, phaseScratchOffset_ + l.offset};
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
  /// A table of \p v for a kernel: a private constant of the module, or with
  /// CodegenOptions::kernelTable a block of the constant arena (one per distinct table).
  llvm::Value *i64Array(const std::vector<int64_t> &v);
  llvm::Value *call(const std::string &name, std::vector<llvm::Value *> args);
  void beginStage(bool parallel, const std::string &name);
  void endStage();

  // ---- The driver's phases (run, LLVMIRGen.cpp) ----
  /// Byte ranges of operands, each with whether it is written.
  using RangeUses = std::vector<std::pair<Range, bool>>;
  /// An element-wise chain being gathered into one loop: its instructions, their
  /// operands' ranges, their element count, and the result shape of its Broadcasts (all
  /// alike; empty while it has none).
  struct Chain {
    std::vector<Instruction *> instrs;
    RangeUses ranges;
    int64_t n = -1;
    std::vector<int64_t> broadcastDims;
  };
  /// Pass 1: every instruction as items, element-wise chains fused into one loop each.
  Error planItems(std::vector<Item> &items);
  /// \p I added to \p chain, or the chain closed and \p I planned on its own.
  Error planNext(Instruction *I, Chain &chain, std::vector<Item> &items);
  /// Plans \p chain as one loop and starts an empty one.
  Error closeChain(Chain &chain, std::vector<Item> &items);
  /// The ranges of element-wise \p I's operands (its result written), of \p n elements
  /// each unless \p bcast.
  Expected<RangeUses> elementRanges(Instruction *I, int64_t n, bool bcast);
  /// Whether \p I, with operands at \p mine, may join \p chain's loop.
  bool fitsChain(const Chain &chain, Instruction *I, const RangeUses &mine, int64_t n,
                 bool bcast) const;
  /// Marks the placeholders the program writes; every other non-constant buffer must
  /// have a location.
  Error checkBuffers();
  /// The transposed convolutions' scratch, then the per-thread scratch above the extras.
  void placeScratch();
  /// Pass 2: the items in stages (serial items share one; parallel ones and, when
  /// profiling, every item get their own).
  Error emitStages(std::vector<Item> &items);

  // ---- Instructions ----
  /// Dispatches to the emitter registered for I's kind; the items of instructions
  /// estimated under ~10 us of single-core work are made serial (LLVMIRGen.cpp).
  Error plan(Instruction *I, std::vector<Item> &items);
  Error planElementwise(std::vector<Instruction *> &group, std::vector<Item> &items);
  void emitElementwise(const std::vector<Instruction *> &group, int64_t n, bool parallel);
  /// The key of chain \p c's loop function: everything its body depends on (kernels,
  /// attributes, which operands are the same buffer, element types, the broadcast space,
  /// which results are stored), not the buffers or the element count, so chains that differ
  /// only there call the same function. Assigns the chain's parameters on the way.
  std::string ewChainKey(EwChain &c);
  /// The shared loop (a kernel, backends/CPU/libjit/libjit_ewloops.h) that computes chain
  /// \p c, with the values whose buffers it takes, in order, in \p operands; "" when the
  /// chain is of no such form and needs a loop function of its own.
  std::string sharedEwLoop(const EwChain &c, std::vector<const Value *> &operands);
  /// The loop function of chain \p c: (pointers..., begin, end) over elements, or over rows
  /// of its broadcast space.
  llvm::Function *emitEwLoop(const EwChain &c, const std::string &name);
  /// One element of chain \p c at flat index \p i; \p bcBase[b] is broadcast b's source
  /// offset of the row, \p j the index within the row.
  void emitEwElement(const EwChain &c, const std::vector<llvm::Value *> &ptrs, llvm::Value *i,
                     llvm::Value *j, const std::vector<llvm::Value *> &bcBase,
                     llvm::MDNode *access);
  /// The Broadcast and Splat results of an element-wise chain that only the chain reads.
  std::set<const Value *> readOnlyInside(const std::vector<Instruction *> &group);
  /// True when no instruction reads activation \p v's buffer after the chain \p group:
  /// the next one that names it deallocates it or only writes it (an @out operand), or
  /// none does. A view of it counts as a read.
  bool unreadAfterChain(const std::vector<Instruction *> &group, const Value *v);
  /// Fills \p n elements of type \p t at \p dst with \p value as Splat defines it.
  void emitFill(llvm::Value *dst, const Type &t, float value, int64_t n);
  /// Copies the box \p dims between strided buffers; with \p rq, requantizing. \p split:
  /// this thread's share of the box (its outermost dimension split; not with \p rq).
  void emitCopy(llvm::Value *dst, llvm::Value *src, std::vector<int64_t> dims,
                std::vector<int64_t> dstStrides, std::vector<int64_t> srcStrides,
                unsigned elemSize, const Requant *rq = nullptr, bool split = false);
  Error planFC(Instruction *I, Value *dest, Value *in, Value *weights, Value *bias,
               std::vector<Item> &items, const FusedEpilogue *act = nullptr);
  /// FullyConnected / MatMul with bf16 operands and result (EmitBf16.cpp).
  Error planFCBf16(Instruction *I, Value *dest, Value *in, Value *weights, Value *bias,
                   std::vector<Item> &items);
  /// Convolution / FusedConvolution with bf16 operands and result, group 1 (EmitBf16.cpp).
  Error planConvBf16(Instruction *I, std::vector<Item> &items);
  /// The constant bf16 filter \p cw packed (once) for the pixel-lane kernels or, with
  /// \p channelLanes, for libjit_conv_bf16_cl_avx512bf16.
  Expected<Location> packConvBf16Filter(WeightVar *cw, int64_t O, int64_t C, int64_t taps,
                                        bool channelLanes);
  Error planReduce(Instruction *I, const std::vector<dim_t> &axes, const char *op, bool mean,
                   std::vector<Item> &items);
  /// The run-time status words (Program::statusOffset), reserved on first use, and the
  /// id of a new check reported through them (Program::checks).
  int64_t addRunCheck(RunCheck check);
  llvm::Value *statusPtr() { return at({kActivationBase, uint64_t(prog_.statusOffset)}); }

  IRFunction &F_;
  const CodegenOptions &opts_;
  /// Planned offset of every activation (AllocActivation) in the arena.
  std::unordered_map<const Value *, uint64_t> activationOffsets_;
  bool avx512_;
  bool avx512bf16_ = false;
  llvm::LLVMContext &ctx_;
  llvm::Module &M_;
  Program &prog_;
  llvm::IRBuilder<> B_;
  llvm::Type *i8_, *i64_, *f32_, *i8p_;
  std::string isa_;
  std::string qIsa_;
  int64_t scratchPerThread_;
  uint64_t scratchOffset_, extrasTop_;
  bool usesScratch_ = false;
  /// Scratch of the transposed convolutions (the largest one; stages run one at a time).
  uint64_t tScratchBytes_ = 0, tScratchOffset_ = 0;
  /// The dilation phases' buffers (emitConvPhases): the split input, then the results.
  uint64_t phaseScratchBytes_ = 0, phaseScratchOffset_ = 0;

  ConstantArena consts_;
  std::map<std::tuple<const WeightVar *, WeightPacking, int64_t>, uint64_t> constCache_;
  std::map<const WeightVar *, bool> halfExact_; ///< storesHalf's answers
  std::unordered_map<const Placeholder *, unsigned> phIndex_;

  // Current stage function.
  llvm::Function *fn_ = nullptr;
  llvm::Value *bufs_ = nullptr, *tid_ = nullptr, *nth_ = nullptr;
  llvm::BasicBlock *entry_ = nullptr;
  std::map<unsigned, llvm::Value *> baseCache_;
  std::map<std::string, llvm::Value *> tableCache_; ///< addressFromTable's loads in this stage
  unsigned stageCount_ = 0;
  std::vector<std::string> *entryNames_ = nullptr;
  /// The stages emitted so far (Stage::fn null), one per entry point of entryNames_.
  std::vector<Stage> stages_;
  std::unordered_map<const WeightVar *, unsigned> borrowedIndex_;
  std::string missing_;
  unsigned fusedLoops_ = 0, fusedInstrs_ = 0, sharedLoops_ = 0;
  /// The element-wise loop functions by what their body computes (EmitElementwise.cpp):
  /// chains alike but for their buffers and length share one.
  std::map<std::string, llvm::Function *> ewFns_;
  /// Shared kernels called through the constant arena (CodegenOptions::kernelTable): the
  /// offset of each one's address.
  std::map<std::string, uint64_t> kernelSlots_;
  /// The index tables (i64Array) placed in the constant arena, by contents.
  std::map<std::vector<uint64_t>, uint64_t> arrayOffsets_;
  std::set<std::string> called_;
  std::unordered_map<const Value *, std::vector<const Instruction *>> users_;
  /// The instruction plan() is planning (null outside it).
  const Instruction *planning_ = nullptr;
};

/// The epilogue of a FusedConvolution/FusedFullyConnected: its residual and its
/// activation; false for an activation the kernels do not have.
template <typename InstT> bool epilogueOf(const InstT *I, FusedEpilogue &epi) {
  std::vector<Value *> residual = I->getResidual();
  epi.add = residual.empty() ? nullptr : residual.front();
  return activationCode(I->getActivation(), I->getAlpha(), I->getBeta(), epi);
}

/// Emitters by instruction kind; kinds without one (and without an element-wise kernel)
/// are reported unsupported.
using PlanMethod = Error (Emitter::*)(Instruction *, std::vector<Emitter::Item> &);
using EmitterTable = std::unordered_map<InstrKind, PlanMethod>;
void registerConvEmitters(EmitterTable &t);
void registerLinalgEmitters(EmitterTable &t);
void registerNormEmitters(EmitterTable &t);
void registerDataEmitters(EmitterTable &t);
void registerQuantEmitters(EmitterTable &t);
/// After registerConvEmitters and registerLinalgEmitters: takes over Convolution and
/// FullyConnected (int8 here, float handed on) and adds the channelwise kinds.
void registerQuantConvEmitters(EmitterTable &t);
/// After registerConvEmitters: int8 element-wise kinds and pools (float pools handed on).
void registerQuantElemEmitters(EmitterTable &t);

/// The libjit name of element kind \p k, the one table kernel names are built from: "f32",
/// "f16", "bf16", "i32", "i64", "bool", a quantized kind by its storage type ("i8", "u8",
/// "i32").
const char *kindSuffix(ElemKind k);
/// kindSuffix for kernels that compute on values, or null for the kinds that are only
/// moved or converted (16-bit floats, Bool).
const char *valueSuffix(ElemKind k);
/// The kernel suffix of an element size in bytes for kernels that only move elements.
inline const char *sizeSuffix(uint64_t bytes) {
  return bytes == 1 ? "u8" : bytes == 2 ? "u16" : bytes == 4 ? "u32" : "u64";
}

} // namespace kiln::cpu

#endif // KILN_BACKENDS_CPU_CODEGEN_EMITTER_H
