// The Sim chip's program: the tiler (partition IR -> SimInstrs over scratchpad tiles),
// the placement of tiles by the IR's memory planner, the schedule of the DMA engine, MAC
// array and vector unit, and the executor. See SimProgram.h and backends/Sim/README.md.
//
// Bit-exactness with the Interpreter. Int8: products accumulate in int32 (exact in any
// order) and each output is requantized once with the Interpreter's own helpers
// (InterpreterUtil.h). Float32: the Interpreter computes Convolution, FullyConnected and
// MatMul with one Eigen product per image and group (InterpreterConv.cpp,
// InterpreterLinalg.cpp). A tile step here runs the same Eigen kernel
// (general_matrix_matrix_product with the blocking Eigen computes for the whole product)
// on a sub-rectangle whose edges lie on the kernel's own block and panel edges, and whose
// depth is a run of whole depth blocks: every output then sees exactly the sequence of
// floating-point operations of the whole product (SimGemm.h states the rule). Row vectors
// (one output row: FullyConnected on one sample, depthwise convolution) take Eigen's
// matrix-vector path, whose per-output order (sums of column blocks, SimGemm.h) is
// reproduced directly. Products Eigen evaluates coefficient-wise (tiny) or as a column
// vector run as host steps.

#include "SimProgram.h"

#include "SimGemm.h"

#include "backends/Interpreter/InterpreterUtil.h"
#include "kiln/Base/Trace.h"
#include "kiln/Memory/MemoryPipeline.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace kiln {

namespace {

uint64_t ceilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
uint64_t roundUpTo(uint64_t v, uint64_t g) { return ceilDiv(v, g) * g; }
constexpr uint64_t kAlign = 64;
/// Tilings of a matrix layer the builder places and schedules before keeping the fastest.
constexpr size_t kTilingCandidates = 4;

/// [s, e) ranges covering [0, total): blocks of \p block, each cut into tiles of \p tile
/// (the last tile of a block takes what is left of it).
std::vector<std::pair<uint32_t, uint32_t>> tileRanges(uint64_t total, uint64_t block,
                                                      uint64_t tile) {
  std::vector<std::pair<uint32_t, uint32_t>> r;
  for (uint64_t b = 0; b < total; b += block) {
    uint64_t be = std::min(b + block, total);
    for (uint64_t s = b; s < be; s += tile)
      r.push_back({uint32_t(s), uint32_t(std::min(s + tile, be))});
  }
  return r;
}

std::string dimsText(const Type &t) { return t.toString(); }

} // namespace

const char *simEngineName(SimEngine e) {
  switch (e) {
  case SimEngine::DMA:
    return "dma";
  case SimEngine::MAC:
    return "mac";
  case SimEngine::Vector:
    return "vector";
  case SimEngine::Host:
    return "host";
  }
  return "?";
}

const char *simOpcodeName(SimOpcode op) {
  switch (op) {
  case SimOpcode::DmaIn:
    return "dma.in";
  case SimOpcode::DmaIm2col:
    return "dma.im2col";
  case SimOpcode::DmaOut:
    return "dma.out";
  case SimOpcode::Gemm:
    return "mac.gemm";
  case SimOpcode::Epilogue:
    return "vec.epilogue";
  case SimOpcode::VecAdd:
    return "vec.add";
  case SimOpcode::VecRelu:
    return "vec.relu";
  case SimOpcode::Host:
    return "host";
  }
  return "?";
}

SimEngine SimInstr::engine() const {
  switch (op) {
  case SimOpcode::DmaIn:
  case SimOpcode::DmaIm2col:
  case SimOpcode::DmaOut:
    return SimEngine::DMA;
  case SimOpcode::Gemm:
    return SimEngine::MAC;
  case SimOpcode::Epilogue:
  case SimOpcode::VecAdd:
  case SimOpcode::VecRelu:
    return SimEngine::Vector;
  case SimOpcode::Host:
    return SimEngine::Host;
  }
  return SimEngine::Host;
}

// ------------------------------------------------------------------ layers

/// What executes a layer's compute steps on the scratchpad.
class SimLayer {
public:
  virtual ~SimLayer() = default;
  /// Runs compute or im2col step \p I; \p sp is the scratchpad, \p dev a device address's
  /// pointer.
  virtual void exec(const SimInstr &I, char *sp, const std::vector<SimTile> &tiles,
                    const std::function<char *(uint64_t)> &dev) const = 0;
};

namespace {

/// Convolution, FullyConnected or MatMul as Y[M x N] = A[M x K] x B[K x N] (+ bias), per
/// item (image x group for a convolution).
class MatrixLayer final : public SimLayer {
public:
  enum class Kind { Conv, FC, MatMul };
  Kind kind;
  bool int8 = false;
  GemmShape shape; // M, N, K and the f32 kernel's blocking
  // Convolution geometry.
  dim_t N = 1, C = 0, H = 0, W = 0, OC = 0, OH = 0, OW = 0, kH = 1, kW = 1, sH = 1, sW = 1,
        padT = 0, padL = 0, dH = 1, dW = 1, group = 1;
  uint64_t items = 1;
  // Quantization (int8).
  float aScale = 1, bScale = 1, outScale = 1, biasScale = 1;
  int32_t aOffset = 0, bOffset = 0, outOffset = 0, biasOffset = 0;
  int8_t padValue = 0; // int8 im2col pad: the input's offset (real zero)
  // Device addresses.
  uint64_t inAddr = 0; // conv: the input image tensor
  bool hasBias = false;

  void exec(const SimInstr &I, char *sp, const std::vector<SimTile> &tiles,
            const std::function<char *(uint64_t)> &dev) const override {
    switch (I.op) {
    case SimOpcode::DmaIm2col:
      im2col(I, sp + tiles[I.dst].offset, dev);
      return;
    case SimOpcode::Gemm:
      gemm(I, sp + tiles[I.a].offset, sp + tiles[I.b].offset, sp + tiles[I.dst].offset);
      return;
    case SimOpcode::Epilogue:
      epilogue(I, sp + tiles[I.a].offset, I.b >= 0 ? sp + tiles[I.b].offset : nullptr,
               sp + tiles[I.dst].offset);
      return;
    default:
      return;
    }
  }

private:
  void im2col(const SimInstr &I, char *tile, const std::function<char *(uint64_t)> &dev) const {
    const dim_t cg = C / group;
    const dim_t n = I.item / group, g = I.item % group;
    const uint32_t nt = I.n1 - I.n0;
    const size_t eb = int8 ? 1 : 4;
    const char *img = dev(inAddr + ((n * C + g * cg) * H * W) * eb);
    for (uint32_t k = I.k0; k < I.k1; k++) {
      const dim_t c = k / (kH * kW), kh = (k / kW) % kH, kw = k % kW;
      for (uint32_t p = I.n0; p < I.n1; p++) {
        const dim_t oh = p / OW, ow = p % OW;
        sdim_t ih = sdim_t(oh * sH + kh * dH) - sdim_t(padT);
        sdim_t iw = sdim_t(ow * sW + kw * dW) - sdim_t(padL);
        bool in = ih >= 0 && ih < sdim_t(H) && iw >= 0 && iw < sdim_t(W);
        size_t at = size_t(k - I.k0) * nt + (p - I.n0);
        if (int8)
          reinterpret_cast<int8_t *>(tile)[at] =
              in ? reinterpret_cast<const int8_t *>(img)[(c * H + ih) * W + iw] : padValue;
        else
          reinterpret_cast<float *>(tile)[at] =
              in ? reinterpret_cast<const float *>(img)[(c * H + ih) * W + iw] : 0.0f;
      }
    }
  }

  void gemm(const SimInstr &I, const char *a, const char *b, char *acc) const {
    const uint32_t mt = I.m1 - I.m0, nt = I.n1 - I.n0, kt = I.k1 - I.k0;
    if (int8) {
      int32_t *y = reinterpret_cast<int32_t *>(acc);
      const int8_t *A = reinterpret_cast<const int8_t *>(a);
      const int8_t *B = reinterpret_cast<const int8_t *>(b);
      if (I.k0 == 0)
        std::fill(y, y + size_t(mt) * nt, 0);
      for (uint32_t i = 0; i < mt; i++)
        for (uint32_t k = 0; k < kt; k++) {
          const int32_t av = int32_t(A[size_t(i) * kt + k]) - aOffset;
          const int8_t *brow = B + size_t(k) * nt;
          int32_t *yrow = y + size_t(i) * nt;
          for (uint32_t j = 0; j < nt; j++)
            yrow[j] += av * (int32_t(brow[j]) - bOffset);
        }
      return;
    }
    float *y = reinterpret_cast<float *>(acc);
    if (I.k0 == 0)
      std::fill(y, y + size_t(mt) * nt, 0.0f);
    runGemmTile(shape, mt, nt, kt, I.k0, reinterpret_cast<const float *>(a),
                reinterpret_cast<const float *>(b), y);
  }

  void epilogue(const SimInstr &I, const char *accp, const char *biasp, char *outp) const {
    const uint32_t mt = I.m1 - I.m0, nt = I.n1 - I.n0;
    const bool perRow = kind == Kind::Conv;
    if (!int8) {
      const float *acc = reinterpret_cast<const float *>(accp);
      const float *bias = reinterpret_cast<const float *>(biasp);
      float *out = reinterpret_cast<float *>(outp);
      for (uint32_t i = 0; i < mt; i++)
        for (uint32_t j = 0; j < nt; j++) {
          float v = acc[size_t(i) * nt + j];
          if (bias) // the Interpreter adds the bias after the product
            v += bias[perRow ? i : j];
          out[size_t(i) * nt + j] = v;
        }
      return;
    }
    const int32_t *acc = reinterpret_cast<const int32_t *>(accp);
    const int32_t *bias = reinterpret_cast<const int32_t *>(biasp);
    int8_t *out = reinterpret_cast<int8_t *>(outp);
    const double accScale = double(aScale) * double(bScale);
    for (uint32_t i = 0; i < mt; i++)
      for (uint32_t j = 0; j < nt; j++) {
        int32_t v = acc[size_t(i) * nt + j];
        double real;
        if (bias)
          real = accScale * v + interp::dequantizeValue(bias[perRow ? i : j], biasScale, biasOffset);
        else
          real = accScale * v;
        out[size_t(i) * nt + j] = interp::quantizeValue<int8_t>(real, outScale, outOffset);
      }
  }
};

/// Add or Relu over flat chunks.
class EltwiseLayer final : public SimLayer {
public:
  bool add = true, int8 = false;
  float aScale = 1, bScale = 1, outScale = 1;
  int32_t aOffset = 0, bOffset = 0, outOffset = 0;

  void exec(const SimInstr &I, char *sp, const std::vector<SimTile> &tiles,
            const std::function<char *(uint64_t)> &) const override {
    const size_t n = I.elems;
    char *dst = sp + tiles[I.dst].offset;
    const char *a = sp + tiles[I.a].offset;
    const char *b = I.b >= 0 ? sp + tiles[I.b].offset : nullptr;
    if (!int8) {
      float *y = reinterpret_cast<float *>(dst);
      const float *x = reinterpret_cast<const float *>(a);
      const float *z = reinterpret_cast<const float *>(b);
      if (add)
        for (size_t i = 0; i < n; i++)
          y[i] = x[i] + z[i];
      else
        for (size_t i = 0; i < n; i++)
          y[i] = std::isnan(x[i]) ? x[i] : std::max(x[i], 0.0f);
      return;
    }
    int8_t *y = reinterpret_cast<int8_t *>(dst);
    const int8_t *x = reinterpret_cast<const int8_t *>(a);
    const int8_t *z = reinterpret_cast<const int8_t *>(b);
    if (add)
      for (size_t i = 0; i < n; i++)
        y[i] = interp::quantizeValue<int8_t>(interp::dequantizeValue(x[i], aScale, aOffset) +
                                                 interp::dequantizeValue(z[i], bScale, bOffset),
                                             outScale, outOffset);
    else
      for (size_t i = 0; i < n; i++)
        y[i] = interp::quantizeValue<int8_t>(
            std::max(interp::dequantizeValue(x[i], aScale, aOffset), 0.0), outScale, outOffset);
  }
};

} // namespace

struct SimProgram::HostSegment {
  std::unique_ptr<IRFunction> F;
  std::unordered_map<const Value *, uint64_t> offsets;
};

SimProgram::SimProgram() = default;
SimProgram::~SimProgram() = default;

// ------------------------------------------------------------------ the builder

/// Lowers a partition's planned IR to a SimProgram.
class SimProgramBuilder {
public:
  SimProgramBuilder(SimProgram &p, const SimConfig &c) : p_(p), c_(c) {}

  Error build(PlannedIR &P);

private:
  /// The instructions and tiles of one layer under construction (local tile ids).
  struct Draft {
    std::vector<SimInstr> instrs;
    std::vector<SimTile> tiles;
    int32_t tile(const std::string &name, uint64_t bytes, ElemKind kind) {
      SimTile t;
      t.name = name;
      t.bytes = bytes;
      t.kind = kind;
      tiles.push_back(t);
      return int32_t(tiles.size() - 1);
    }
  };
  /// A step of a tiled loop: its loads, its compute, and what follows the compute.
  struct Group {
    std::vector<SimInstr> loads, compute, tail;
  };

  uint64_t addr(const Value *v) const;
  uint64_t dmaCycles(uint64_t bytes) const {
    return c_.dmaSetupCycles + ceilDiv(bytes, c_.dmaBytesPerCycle);
  }
  uint64_t vecCycles(uint64_t elems) const { return ceilDiv(elems, c_.vectorLanes); }
  /// A DMA of a strided box between device address \p dev (\p rows rows of \p rowBytes,
  /// \p devStride apart) and \p tile: into the tile for DmaIn, out of it for DmaOut.
  SimInstr dmaBox(SimOpcode op, int32_t tile, uint64_t dev, uint32_t rows, uint64_t rowBytes,
                  uint64_t devStride) const {
    SimInstr d;
    d.op = op;
    (op == SimOpcode::DmaOut ? d.a : d.dst) = tile;
    d.dev = dev, d.rows = rows, d.rowBytes = rowBytes, d.devStride = devStride;
    d.bytes = uint64_t(rows) * rowBytes;
    d.cycles = dmaCycles(d.bytes);
    return d;
  }
  uint64_t macCycles(uint64_t m, uint64_t n, uint64_t k, bool int8) const {
    uint64_t cells = c_.macRows * c_.macCols;
    uint64_t lanes = std::max<uint64_t>(1, (int8 ? c_.macsPerCycleI8 : c_.macsPerCycleF32) / cells);
    return ceilDiv(m, c_.macRows) * ceilDiv(n, c_.macCols) * ceilDiv(k, lanes);
  }
  static void emitGroups(std::vector<Group> &groups, Draft &d, bool delayTails);
  /// Places the draft's tiles with the memory planner; the arena in \p arena.
  void placeDraft(Draft &d, uint64_t &arena) const;
  Error commit(Draft &d, const Instruction *I, const std::string &how, uint64_t arena);
  /// Per instruction of \p d, the instructions it waits for (indices into d.instrs).
  static std::vector<std::vector<uint32_t>> computeDeps(const Draft &d);
  /// The makespan of \p d alone (its tiles placed), engines starting free.
  static uint64_t localCycles(const Draft &d);

  // Convolution, FullyConnected and MatMul as tiled matrix layers (tryMatrix): the layer
  // and its operands, their element kinds, the tile sizes, then each candidate tiling
  // drafted, placed and scheduled; the fastest is committed.
  /// The operands of a matrix layer: A is the filter of a convolution (B its input), the
  /// input of a FullyConnected (B its weights), the left operand of a MatMul.
  struct MatrixOperands {
    const Value *dest = nullptr, *a = nullptr, *b = nullptr, *bias = nullptr;
  };
  /// The tile extents of a matrix layer, in granules of each dimension, shrunk until one
  /// step fits the scratchpad and then for the smaller candidates.
  struct MatrixTiling {
    uint64_t M = 0, N = 0, K = 0;       ///< the layer's
    uint64_t gM = 1, gN = 1, gK = 1;    ///< granules (SimGemm.h)
    uint64_t bM = 0, bN = 0;            ///< blocks
    uint64_t Mt = 0, Nt = 0, Kt = 0;    ///< tile extents (may exceed the layer's)
    uint64_t eA = 4, eB = 4;            ///< element bytes of A and B
    std::string how;                    ///< "gemm", "gemv" (f32) or "int8"
    /// The granules, blocks and largest tiles of \p L (its f32 GEMM blocking prepared);
    /// false when the f32 engine does not take its shape.
    bool init(MatrixLayer &L);
    /// Halves one extent: depth first (it adds no DMA), then the larger of rows and
    /// columns; false when every extent is one granule.
    bool shrink();
    uint64_t tileM() const { return std::min(Mt, M); }
    uint64_t tileN() const { return std::min(Nt, N); }
    uint64_t tileK() const { return std::min(Kt, K); }
    /// Scratchpad bytes of one double-buffered step of \p L with these tiles.
    uint64_t stepBytes(const MatrixLayer &L) const;
  };
  /// \p I as a matrix layer; false when it is not one or its shape is not taken.
  bool describeMatrix(const Instruction *I, MatrixLayer &L, MatrixOperands &ops) const;
  /// Element kinds: f32 throughout, or int8 with an int32 bias (the scales and offsets
  /// into \p L); false for others.
  static bool matrixKinds(MatrixLayer &L, const MatrixOperands &ops);
  Error matrixTooSmall(const Instruction *I, const MatrixLayer &L, const MatrixOperands &ops,
                       const MatrixTiling &t) const;
  /// The instructions and tiles of \p L computed with tiling \p t (before placement).
  Draft draftMatrix(const MatrixLayer &L, const MatrixOperands &ops, const MatrixTiling &t,
                    const std::string &nm) const;
  /// The epilogue of one output tile (the bias, the int8 requantization) added to \p G;
  /// the tile to store (\p acc when there is no epilogue).
  int32_t epilogueTile(const MatrixLayer &L, const MatrixOperands &ops, Draft &d, Group &G,
                       int32_t acc, uint32_t item, uint32_t m0, uint32_t m1, uint32_t n0,
                       uint32_t n1, bool resident, int32_t &residentBias,
                       const std::string &nm) const;
  Expected<bool> tryMatrix(const Instruction *I);
  Expected<bool> tryEltwise(const Instruction *I);
  void addHost(const Instruction *I);
  void flushHost();
  /// The program's last steps: the scratchpad as an IR function of its tiles, their plan
  /// (verified), and the schedule of every instruction with the per-layer statistics.
  Error finish();
  void buildScratchpadFunction();
  Error planScratchpad();
  void schedule();

  SimProgram &p_;
  const SimConfig &c_;
  std::vector<const Instruction *> pendingHost_;
};

uint64_t SimProgramBuilder::addr(const Value *v) const {
  MemoryRegion r;
  uint64_t off = 0;
  bool ok = p_.plan_.locate(v, r, off);
  (void)ok; // every operand of planned IR has a place (the plan was verified)
  switch (r) {
  case MemoryRegion::Constant:
    return off;
  case MemoryRegion::Mutable:
    return p_.mutBase_ + off;
  case MemoryRegion::Activation:
    return p_.actBase_ + off;
  }
  return off;
}

void SimProgramBuilder::emitGroups(std::vector<Group> &groups, Draft &d, bool delayTails) {
  // The loads of step i + 1 go before the compute of step i: double buffering. With
  // delayTails, the stores of step i also wait until after the compute of step i + 1, so
  // the result tiles are double-buffered too (the MAC array does not wait for a store).
  if (groups.empty())
    return;
  for (SimInstr &x : groups[0].loads)
    d.instrs.push_back(x);
  for (size_t i = 0; i < groups.size(); i++) {
    if (i + 1 < groups.size())
      for (SimInstr &x : groups[i + 1].loads)
        d.instrs.push_back(x);
    for (SimInstr &x : groups[i].compute)
      d.instrs.push_back(x);
    if (!delayTails)
      for (SimInstr &x : groups[i].tail)
        d.instrs.push_back(x);
    else if (i > 0)
      for (SimInstr &x : groups[i - 1].tail)
        d.instrs.push_back(x);
  }
  if (delayTails)
    for (SimInstr &x : groups.back().tail)
      d.instrs.push_back(x);
}

namespace {

/// Tiles read and written by \p I.
void tileUses(const SimInstr &I, std::vector<int32_t> &reads, std::vector<int32_t> &writes) {
  reads.clear();
  writes.clear();
  switch (I.op) {
  case SimOpcode::DmaIn:
  case SimOpcode::DmaIm2col:
    writes.push_back(I.dst);
    break;
  case SimOpcode::DmaOut:
    reads.push_back(I.a);
    break;
  case SimOpcode::Gemm:
    reads.push_back(I.a);
    reads.push_back(I.b);
    if (I.k0 != 0)
      reads.push_back(I.dst);
    writes.push_back(I.dst);
    break;
  case SimOpcode::Epilogue:
  case SimOpcode::VecAdd:
  case SimOpcode::VecRelu:
    reads.push_back(I.a);
    if (I.b >= 0)
      reads.push_back(I.b);
    writes.push_back(I.dst);
    break;
  case SimOpcode::Host:
    break;
  }
}

} // namespace

void SimProgramBuilder::placeDraft(Draft &d, uint64_t &arena) const {
  // Live range of each tile: [2 * first use, 2 * last use + 1), so that a tile written by
  // an instruction never shares bytes with a tile the same instruction reads.
  std::vector<PlannedBuffer> bufs(d.tiles.size());
  std::vector<bool> seen(d.tiles.size(), false);
  std::vector<int32_t> rd, wr;
  for (size_t i = 0; i < d.instrs.size(); i++) {
    tileUses(d.instrs[i], rd, wr);
    for (auto *v : {&rd, &wr})
      for (int32_t t : *v) {
        if (!seen[t]) {
          seen[t] = true;
          bufs[t].start = 2 * i;
        }
        bufs[t].end = 2 * i + 1;
      }
  }
  for (size_t t = 0; t < bufs.size(); t++)
    bufs[t].size = d.tiles[t].bytes;
  arena = UINT64_MAX;
  std::vector<PlannedBuffer> best;
  // Every strategy on small layers; the two cheapest orders on large ones (the planner
  // is quadratic in the tiles of a layer).
  std::vector<PlacementStrategy> strategies = getAllPlacementStrategies();
  if (bufs.size() > 3000)
    strategies = {{PlacementOrder::ByStart, PlacementFit::FirstFit}};
  for (const PlacementStrategy &s : strategies) {
    std::vector<PlannedBuffer> tryBufs = bufs;
    uint64_t a = placeActivations(tryBufs, s, kAlign);
    if (a < arena) {
      arena = a;
      best = std::move(tryBufs);
    }
  }
  for (size_t t = 0; t < bufs.size(); t++)
    d.tiles[t].offset = best[t].offset;
  if (bufs.empty())
    arena = 0;
}

std::vector<std::vector<uint32_t>> SimProgramBuilder::computeDeps(const Draft &d) {
  // The last writer of each tile read; for a tile's first write, the last user of every
  // earlier tile whose bytes it takes over (dead tiles, by planned offset).
  std::vector<std::vector<uint32_t>> out(d.instrs.size());
  std::vector<int64_t> lastWriter(d.tiles.size(), -1), finalUse(d.tiles.size(), -1);
  std::vector<bool> born(d.tiles.size(), false);
  std::map<uint64_t, std::pair<uint64_t, int64_t>> dead; // start -> (end, last use)
  std::vector<int32_t> rd, wr;
  for (size_t i = 0; i < d.instrs.size(); i++) {
    tileUses(d.instrs[i], rd, wr);
    for (auto *v : {&rd, &wr})
      for (int32_t t : *v)
        finalUse[t] = int64_t(i);
  }
  std::vector<std::vector<int32_t>> diesAt(d.instrs.size());
  for (size_t t = 0; t < finalUse.size(); t++)
    if (finalUse[t] >= 0)
      diesAt[finalUse[t]].push_back(int32_t(t));
  for (size_t i = 0; i < d.instrs.size(); i++) {
    tileUses(d.instrs[i], rd, wr);
    std::vector<uint32_t> &deps = out[i];
    for (int32_t t : rd)
      if (lastWriter[t] >= 0)
        deps.push_back(uint32_t(lastWriter[t]));
    for (int32_t t : wr) {
      if (born[t])
        continue;
      born[t] = true;
      uint64_t s = d.tiles[t].offset, e = s + alignUp(d.tiles[t].bytes, kAlign);
      auto it = dead.upper_bound(s);
      if (it != dead.begin())
        --it;
      while (it != dead.end() && it->first < e) {
        uint64_t ds = it->first, de = it->second.first;
        int64_t use = it->second.second;
        if (de <= s) {
          ++it;
          continue;
        }
        deps.push_back(uint32_t(use));
        it = dead.erase(it);
        if (ds < s)
          dead[ds] = {s, use};
        if (de > e)
          dead[e] = {de, use};
      }
    }
    for (int32_t t : wr)
      lastWriter[t] = int64_t(i);
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    for (int32_t t : diesAt[i]) {
      uint64_t s = d.tiles[t].offset, e = s + alignUp(d.tiles[t].bytes, kAlign);
      auto it = dead.lower_bound(s);
      while (it != dead.end() && it->first < e)
        it = dead.erase(it);
      dead[s] = {e, int64_t(i)};
    }
  }
  return out;
}

uint64_t SimProgramBuilder::localCycles(const Draft &d) {
  std::vector<std::vector<uint32_t>> deps = computeDeps(d);
  std::vector<uint64_t> endAt(d.instrs.size(), 0);
  uint64_t engineFree[4] = {0, 0, 0, 0}, span = 0;
  for (size_t i = 0; i < d.instrs.size(); i++) {
    unsigned e = unsigned(d.instrs[i].engine());
    uint64_t s = engineFree[e];
    for (uint32_t x : deps[i])
      s = std::max(s, endAt[x]);
    endAt[i] = engineFree[e] = s + d.instrs[i].cycles;
    span = std::max(span, endAt[i]);
  }
  return span;
}

Error SimProgramBuilder::commit(Draft &d, const Instruction *I, const std::string &how,
                                uint64_t arena) {
  const uint32_t layer = uint32_t(p_.layers_.size());
  const int32_t tileBase = int32_t(p_.tiles_.size());
  const uint32_t instrBase = uint32_t(p_.instrs_.size());
  for (SimTile &t : d.tiles)
    p_.tiles_.push_back(t);
  std::vector<std::vector<uint32_t>> deps = computeDeps(d);
  for (size_t i = 0; i < d.instrs.size(); i++) {
    SimInstr x = d.instrs[i];
    x.layer = layer;
    for (uint32_t &dep : deps[i])
      dep += instrBase;
    x.deps = std::move(deps[i]);
    auto remap = [&](int32_t &t) {
      if (t >= 0)
        t += tileBase;
    };
    remap(x.dst);
    remap(x.a);
    remap(x.b);
    remap(x.c);
    p_.instrs_.push_back(std::move(x));
  }
  SimLayerStats st;
  st.name = I ? I->getName() : std::string("host");
  st.kind = I ? I->getKindName() : "host";
  st.how = how;
  st.tiles = d.tiles.size();
  st.arenaBytes = arena;
  p_.layers_.push_back(st);
  return Error::success();
}

bool SimProgramBuilder::describeMatrix(const Instruction *I, MatrixLayer &L,
                                       MatrixOperands &ops) const {
  if (auto *cv = dyn_cast<ConvolutionInst>(I)) {
    L.kind = MatrixLayer::Kind::Conv;
    ops.dest = cv->getDest();
    const Type &in = *cv->getInput()->getType(), &out = *ops.dest->getType(),
               &flt = *cv->getFilter()->getType();
    if (in.rank() != 4 || out.rank() != 4 || flt.rank() != 4 || cv->getKernels().size() != 2 ||
        cv->getStrides().size() != 2 || cv->getPads().size() != 4 ||
        cv->getDilations().size() != 2)
      return false;
    L.N = in.dims[0], L.C = in.dims[1], L.H = in.dims[2], L.W = in.dims[3];
    L.OC = out.dims[1], L.OH = out.dims[2], L.OW = out.dims[3];
    L.kH = cv->getKernels()[0], L.kW = cv->getKernels()[1];
    L.sH = cv->getStrides()[0], L.sW = cv->getStrides()[1];
    L.padT = cv->getPads()[0], L.padL = cv->getPads()[1];
    L.dH = cv->getDilations()[0], L.dW = cv->getDilations()[1];
    L.group = cv->getGroup();
    if (!L.group || L.C % L.group || L.OC % L.group)
      return false;
    L.items = L.N * L.group;
    L.shape.M = L.OC / L.group;
    L.shape.N = L.OH * L.OW;
    L.shape.K = (L.C / L.group) * L.kH * L.kW;
    ops.a = cv->getFilter();
    ops.bias = cv->getBias();
    L.inAddr = addr(cv->getInput());
    L.hasBias = true;
    ops.b = cv->getInput();
    return true;
  }
  if (auto *fc = dyn_cast<FullyConnectedInst>(I)) {
    L.kind = MatrixLayer::Kind::FC;
    ops.dest = fc->getDest();
    ops.a = fc->getInput();
    ops.b = fc->getWeights();
    ops.bias = fc->getBias();
    L.hasBias = true;
  } else if (auto *mm = dyn_cast<MatMulInst>(I)) {
    L.kind = MatrixLayer::Kind::MatMul;
    ops.dest = mm->getDest();
    ops.a = mm->getLHS();
    ops.b = mm->getRHS();
  } else {
    return false;
  }
  const Type &a = *ops.a->getType(), &b = *ops.b->getType(), &o = *ops.dest->getType();
  if (a.rank() != 2 || b.rank() != 2 || o.rank() != 2 || a.dims[1] != b.dims[0] ||
      o.dims[0] != a.dims[0] || o.dims[1] != b.dims[1])
    return false;
  L.shape.M = a.dims[0];
  L.shape.K = a.dims[1];
  L.shape.N = b.dims[1];
  return !ops.bias || ops.bias->getType()->numElements() == L.shape.N;
}

bool SimProgramBuilder::matrixKinds(MatrixLayer &L, const MatrixOperands &ops) {
  // f32 throughout, or int8 with an int32 bias.
  const Type &aT = *ops.a->getType(), &bT = *ops.b->getType(), &oT = *ops.dest->getType();
  const Type *biasT = ops.bias ? ops.bias->getType() : nullptr;
  // A is the filter of a convolution (B its input), the input of a FullyConnected (B its
  // weights), the left operand of a MatMul.
  const Type &filterOrA = aT, &inOrB = bT;
  if (aT.kind == ElemKind::Float && bT.kind == ElemKind::Float && oT.kind == ElemKind::Float &&
      (!biasT || biasT->kind == ElemKind::Float)) {
    L.int8 = false;
    return true;
  }
  if (aT.kind != ElemKind::Int8Q || bT.kind != ElemKind::Int8Q || oT.kind != ElemKind::Int8Q ||
      (biasT && biasT->kind != ElemKind::Int32Q))
    return false;
  L.int8 = true;
  L.aScale = filterOrA.scale, L.aOffset = filterOrA.offset;
  L.bScale = inOrB.scale, L.bOffset = inOrB.offset;
  L.outScale = oT.scale, L.outOffset = oT.offset;
  if (biasT)
    L.biasScale = biasT->scale, L.biasOffset = biasT->offset;
  if (L.kind == MatrixLayer::Kind::Conv) {
    if (inOrB.offset < -128 || inOrB.offset > 127)
      return false;
    L.padValue = int8_t(inOrB.offset);
  }
  return true;
}

bool SimProgramBuilder::MatrixTiling::init(MatrixLayer &L) {
  // Granules and blocks of each dimension (SimGemm.h): where a tile may begin and end.
  bM = L.shape.M, bN = L.shape.N;
  if (!L.int8) {
    L.shape.mode = gemmModeFor(L.shape.M, L.shape.N, L.shape.K);
    if (L.shape.mode == GemmMode::Unsupported)
      return false;
    prepareGemmShape(L.shape);
    gM = L.shape.granuleM, gN = L.shape.granuleN, gK = L.shape.granuleK;
    bM = L.shape.blockM, bN = L.shape.blockN;
    how = L.shape.mode == GemmMode::Gemm ? "gemm" : "gemv";
  } else {
    how = "int8";
  }
  eA = eB = L.int8 ? 1 : 4;
  M = L.shape.M, N = L.shape.N, K = L.shape.K;
  Mt = roundUpTo(std::min<uint64_t>(M, bM), gM);
  Nt = roundUpTo(std::min<uint64_t>(N, bN), gN);
  Kt = roundUpTo(K, gK);
  return true;
}

bool SimProgramBuilder::MatrixTiling::shrink() {
  // Depth first (it adds no DMA), then the larger of rows and columns.
  if (Kt > gK) {
    Kt = std::max(gK, roundUpTo(Kt / 2, gK));
    return true;
  }
  bool canM = Mt > gM, canN = Nt > gN;
  if (canM && (!canN || Mt * eA >= Nt * eB)) {
    Mt = std::max(gM, roundUpTo(Mt / 2, gM));
    return true;
  }
  if (canN) {
    Nt = std::max(gN, roundUpTo(Nt / 2, gN));
    return true;
  }
  return false;
}

uint64_t SimProgramBuilder::MatrixTiling::stepBytes(const MatrixLayer &L) const {
  // When one tile holds all of A (and its bias), it stays in the scratchpad for the item
  // (A-stationary: loaded once, not double-buffered); otherwise every step loads its own.
  const uint64_t mt = tileM(), nt = tileN(), kt = tileK();
  const bool biasPerRow = L.kind == MatrixLayer::Kind::Conv;
  bool resident = mt >= M && kt >= K;
  uint64_t copies = resident ? 1 : 2;
  uint64_t f = copies * alignUp(mt * kt * eA, kAlign) + 2 * alignUp(kt * nt * eB, kAlign) +
               2 * alignUp(mt * nt * 4, kAlign);
  if (L.int8)
    f += 2 * alignUp(mt * nt, kAlign);
  if (L.hasBias)
    f += (biasPerRow ? copies : 2) * alignUp((biasPerRow ? mt : nt) * 4, kAlign);
  return f;
}

Error SimProgramBuilder::matrixTooSmall(const Instruction *I, const MatrixLayer &L,
                                        const MatrixOperands &ops,
                                        const MatrixTiling &t) const {
  return makeError(ErrorCode::InvalidArgument, "Sim: the scratchpad (", c_.scratchpadBytes,
                   " bytes) cannot hold one tile step of ", I->getKindName(), " '",
                   I->getName(), "' (A ", dimsText(*ops.a->getType()), ", B ",
                   dimsText(*ops.b->getType()), ", result ", dimsText(*ops.dest->getType()),
                   "): the smallest tiles (", t.tileM(), " x ", t.tileK(), ", ", t.tileK(),
                   " x ", t.tileN(), ", accumulator ", t.tileM(), " x ", t.tileN(),
                   "), double-buffered, need ", t.stepBytes(L), " bytes");
}

SimProgramBuilder::Draft SimProgramBuilder::draftMatrix(const MatrixLayer &L,
                                                        const MatrixOperands &ops,
                                                        const MatrixTiling &t,
                                                        const std::string &nm) const {
  const uint64_t eA = t.eA, eB = t.eB, eO = eA;
  const ElemKind elemKind = L.int8 ? ElemKind::Int8Q : ElemKind::Float;
  const ElemKind accKind = L.int8 ? ElemKind::Int32I : ElemKind::Float;
  const uint64_t aAddr = addr(ops.a), bAddr = addr(ops.b), outAddr = addr(ops.dest);
  Draft d;
  std::vector<Group> groups;
  auto Ms = tileRanges(t.M, t.bM, t.Mt), Ns = tileRanges(t.N, t.bN, t.Nt),
       Ks = tileRanges(t.K, t.K, t.Kt);
  const uint64_t M = t.M, Nn = t.N, K = t.K;
  for (uint64_t item = 0; item < L.items; item++) {
    const uint64_t g = item % L.group;
    // Per item: the base of A (filter rows of group g), of B (FC / MatMul), of the output.
    const uint64_t aItem = L.kind == MatrixLayer::Kind::Conv ? aAddr + g * M * K * eA : aAddr;
    const uint64_t outItem =
        L.kind == MatrixLayer::Kind::Conv ? outAddr + item * M * Nn * eO : outAddr;
    const bool resident = Ms.size() == 1 && Ks.size() == 1;
    int32_t residentA = -1, residentBias = -1;
    for (auto [n0, n1] : Ns)
      for (auto [m0, m1] : Ms) {
        const uint32_t mt = m1 - m0, nt = n1 - n0;
        int32_t acc = d.tile(nm + ".acc", uint64_t(mt) * nt * 4, accKind);
        for (size_t kk = 0; kk < Ks.size(); kk++) {
          auto [k0, k1] = Ks[kk];
          const uint32_t kt = k1 - k0;
          Group G;
          SimInstr la;
          la.op = SimOpcode::DmaIn;
          if (resident && residentA >= 0) {
            la.dst = residentA;
          } else {
            la = dmaBox(SimOpcode::DmaIn, d.tile(nm + ".A", uint64_t(mt) * kt * eA, elemKind),
                        aItem + (uint64_t(m0) * K + k0) * eA, mt, uint64_t(kt) * eA, K * eA);
            G.loads.push_back(la);
            if (resident)
              residentA = la.dst;
          }
          SimInstr lb;
          lb.dst = d.tile(nm + ".B", uint64_t(kt) * nt * eB, elemKind);
          lb.bytes = uint64_t(kt) * nt * eB;
          lb.cycles = dmaCycles(lb.bytes);
          lb.k0 = k0, lb.k1 = k1, lb.n0 = n0, lb.n1 = n1, lb.item = uint32_t(item);
          if (L.kind == MatrixLayer::Kind::Conv) {
            lb.op = SimOpcode::DmaIm2col;
          } else {
            lb.op = SimOpcode::DmaIn;
            lb.dev = bAddr + (uint64_t(k0) * Nn + n0) * eB;
            lb.rows = kt;
            lb.rowBytes = uint64_t(nt) * eB;
            lb.devStride = Nn * eB;
          }
          G.loads.push_back(lb);
          SimInstr mm;
          mm.op = SimOpcode::Gemm;
          mm.dst = acc, mm.a = la.dst, mm.b = lb.dst;
          mm.m0 = m0, mm.m1 = m1, mm.n0 = n0, mm.n1 = n1, mm.k0 = k0, mm.k1 = k1;
          mm.item = uint32_t(item);
          mm.cycles = macCycles(mt, nt, kt, L.int8);
          G.compute.push_back(mm);
          if (kk + 1 == Ks.size()) {
            int32_t outTile = epilogueTile(L, ops, d, G, acc, uint32_t(item), m0, m1, n0, n1,
                                           resident, residentBias, nm);
            G.tail.push_back(dmaBox(SimOpcode::DmaOut, outTile,
                                    outItem + (uint64_t(m0) * Nn + n0) * eO, mt,
                                    uint64_t(nt) * eO, Nn * eO));
          }
          groups.push_back(std::move(G));
        }
      }
  }
  emitGroups(groups, d, true);
  return d;
}

int32_t SimProgramBuilder::epilogueTile(const MatrixLayer &L, const MatrixOperands &ops,
                                        Draft &d, Group &G, int32_t acc, uint32_t item,
                                        uint32_t m0, uint32_t m1, uint32_t n0, uint32_t n1,
                                        bool resident, int32_t &residentBias,
                                        const std::string &nm) const {
  if (!L.hasBias && !L.int8)
    return acc;
  const bool biasPerRow = L.kind == MatrixLayer::Kind::Conv;
  const uint32_t mt = m1 - m0, nt = n1 - n0;
  SimInstr ep;
  ep.op = SimOpcode::Epilogue;
  ep.a = acc;
  ep.m0 = m0, ep.m1 = m1, ep.n0 = n0, ep.n1 = n1, ep.item = item;
  ep.elems = uint64_t(mt) * nt;
  ep.cycles = vecCycles(ep.elems);
  if (L.hasBias && biasPerRow && resident && residentBias >= 0) {
    ep.b = residentBias;
  } else if (L.hasBias) {
    const uint64_t g = item % L.group;
    uint32_t b0 = biasPerRow ? uint32_t(g * L.shape.M + m0) : n0;
    uint32_t bl = biasPerRow ? mt : nt;
    SimInstr lbias = dmaBox(SimOpcode::DmaIn,
                            d.tile(nm + ".bias", uint64_t(bl) * 4,
                                   L.int8 ? ElemKind::Int32I : ElemKind::Float),
                            addr(ops.bias) + uint64_t(b0) * 4, 1, uint64_t(bl) * 4,
                            uint64_t(bl) * 4);
    G.loads.push_back(lbias);
    ep.b = lbias.dst;
    if (biasPerRow && resident)
      residentBias = lbias.dst;
  }
  int32_t outTile = acc;
  if (L.int8)
    outTile = d.tile(nm + ".out", uint64_t(mt) * nt, ElemKind::Int8Q);
  ep.dst = outTile;
  G.compute.push_back(ep);
  return outTile;
}

Expected<bool> SimProgramBuilder::tryMatrix(const Instruction *I) {
  auto layer = std::make_unique<MatrixLayer>();
  MatrixLayer &L = *layer;
  MatrixOperands ops;
  MatrixTiling t;
  if (!describeMatrix(I, L, ops) || !matrixKinds(L, ops) || !L.shape.M || !L.shape.N ||
      !L.shape.K || !t.init(L))
    return false;
  const uint64_t cap = c_.scratchpadBytes;
  while (t.stepBytes(L) > cap)
    if (!t.shrink())
      return matrixTooSmall(I, L, ops, t);

  // The largest tiles that fit, and a few smaller candidates after them: smaller steps
  // pipeline better (the first load and the last store of a layer are never hidden), larger
  // ones move fewer bytes. Each candidate is placed and scheduled; the fewest cycles win.
  struct Best {
    Draft d;
    uint64_t cycles = UINT64_MAX, arena = 0;
    std::string how;
    bool any = false;
  } best;
  size_t candidates = 0, firstTiles = 0, lastTiles = 0;
  for (;;) {
    Draft d = draftMatrix(L, ops, t, I->getName());
    uint64_t arena = 0;
    placeDraft(d, arena);
    if (arena <= cap) {
      std::ostringstream os;
      os << "tiled " << t.how << " " << t.tileM() << "x" << t.tileN() << "x" << t.tileK();
      uint64_t cyc = localCycles(d);
      if (!best.any)
        firstTiles = d.tiles.size();
      lastTiles = d.tiles.size();
      if (cyc < best.cycles) {
        best.cycles = cyc;
        best.arena = arena;
        best.how = os.str();
        best.d = std::move(d);
        best.any = true;
      }
      candidates++;
    }
    bool more = candidates < kTilingCandidates &&
                (!best.any || lastTiles <= 4 * firstTiles + 64);
    if (!more || !t.shrink()) {
      if (!best.any)
        return matrixTooSmall(I, L, ops, t);
      KILN_RETURN_IF_ERR(commit(best.d, I, best.how, best.arena));
      p_.layerImpls_.push_back(std::move(layer));
      return true;
    }
  }
}

Expected<bool> SimProgramBuilder::tryEltwise(const Instruction *I) {
  auto layer = std::make_unique<EltwiseLayer>();
  EltwiseLayer &L = *layer;
  const Value *dest, *a, *b = nullptr;
  if (auto *ad = dyn_cast<AddInst>(I)) {
    dest = ad->getDest(), a = ad->getLHS(), b = ad->getRHS();
    L.add = true;
  } else if (auto *rl = dyn_cast<ReluInst>(I)) {
    dest = rl->getDest(), a = rl->getInput();
    L.add = false;
  } else {
    return false;
  }
  const Type &dT = *dest->getType(), &aT = *a->getType();
  const Type *bT = b ? b->getType() : nullptr;
  const uint64_t n = dT.numElements();
  if (aT.numElements() != n || (bT && bT->numElements() != n))
    return false;
  if (dT.kind == ElemKind::Float && aT.kind == ElemKind::Float &&
      (!bT || bT->kind == ElemKind::Float)) {
    L.int8 = false;
  } else if (dT.kind == ElemKind::Int8Q && aT.kind == ElemKind::Int8Q &&
             (!bT || bT->kind == ElemKind::Int8Q)) {
    L.int8 = true;
    L.aScale = aT.scale, L.aOffset = aT.offset, L.outScale = dT.scale, L.outOffset = dT.offset;
    if (bT)
      L.bScale = bT->scale, L.bOffset = bT->offset;
  } else {
    return false;
  }
  const uint64_t e = L.int8 ? 1 : 4, ins = b ? 2 : 1;
  const uint64_t cap = c_.scratchpadBytes;
  // Double-buffered: two steps' inputs live at once; the result goes into the first input.
  uint64_t T = (cap / (2 * ins)) / kAlign * kAlign / e;
  if (T == 0)
    return makeError(ErrorCode::InvalidArgument, "Sim: the scratchpad (", cap,
                     " bytes) cannot hold one tile step of ", I->getKindName(), " '",
                     I->getName(), "' (", dT.toString(), "): it needs ", 2 * ins * kAlign,
                     " bytes");
  T = std::min(T, n);
  const uint64_t aAddr = addr(a), bAddr = b ? addr(b) : 0, dAddr = addr(dest);
  for (;;) {
    Draft d;
    std::vector<Group> groups;
    for (uint64_t s = 0; s < n; s += T) {
      uint64_t len = std::min(T, n - s);
      Group G;
      SimInstr la =
          dmaBox(SimOpcode::DmaIn,
                 d.tile(I->getName() + ".a", len * e, L.int8 ? ElemKind::Int8Q : ElemKind::Float),
                 aAddr + s * e, 1, len * e, len * e);
      G.loads.push_back(la);
      SimInstr op;
      op.op = b ? SimOpcode::VecAdd : SimOpcode::VecRelu;
      op.a = op.dst = la.dst;
      if (b) {
        SimInstr lb = la;
        lb.dst = d.tile(I->getName() + ".b", len * e, L.int8 ? ElemKind::Int8Q : ElemKind::Float);
        lb.dev = bAddr + s * e;
        G.loads.push_back(lb);
        op.b = lb.dst;
      }
      op.elems = len;
      op.cycles = vecCycles(len);
      G.compute.push_back(op);
      G.tail.push_back(dmaBox(SimOpcode::DmaOut, la.dst, dAddr + s * e, 1, len * e, len * e));
      groups.push_back(std::move(G));
    }
    emitGroups(groups, d, false);
    uint64_t arena = 0;
    placeDraft(d, arena);
    if (arena <= cap) {
      KILN_RETURN_IF_ERR(commit(d, I, "tiled vector " + std::to_string(T), arena));
      p_.layerImpls_.push_back(std::move(layer));
      return true;
    }
    if (T <= kAlign / e)
      return makeError(ErrorCode::Internal, "Sim: cannot place the tiles of '", I->getName(), "'");
    T = std::max<uint64_t>(kAlign / e, T / 2 / (kAlign / e) * (kAlign / e));
  }
}

void SimProgramBuilder::addHost(const Instruction *I) { pendingHost_.push_back(I); }

void SimProgramBuilder::flushHost() {
  if (pendingHost_.empty())
    return;
  auto seg = std::make_unique<SimProgram::HostSegment>();
  seg->F = std::make_unique<IRFunction>(std::string("host"));
  std::unordered_map<const Value *, WeightVar *> vars;
  uint64_t bytes = 0, elems = 0;
  std::string names;
  for (const Instruction *I : pendingHost_) {
    Instruction *c = I->clone();
    c->setName(I->getName());
    for (unsigned i = 0; i < I->getNumOperands(); i++) {
      const Value *v = I->getOperand(i).first;
      auto it = vars.find(v);
      if (it == vars.end()) {
        MemoryRegion r = MemoryRegion::Activation;
        uint64_t off = 0;
        p_.plan_.locate(v, r, off);
        WeightVar *w = seg->F->createWeightVar(
            v->getName(), v->getType(),
            r == MemoryRegion::Constant ? WeightVar::Mutability::Constant
                                        : WeightVar::Mutability::Mutable,
            nullptr);
        uint64_t a = addr(v);
        seg->offsets[w] = r == MemoryRegion::Constant ? a : a - p_.mutBase_;
        it = vars.emplace(v, w).first;
      }
      c->setOperand(i, it->second);
      bytes += v->getType()->sizeInBytes();
      if (I->getOperand(i).second != OperandKind::In)
        elems += v->getType()->numElements();
    }
    seg->F->push_back(c);
    names += (names.empty() ? "" : ",") + I->getName();
  }
  SimInstr h;
  h.op = SimOpcode::Host;
  h.elems = p_.host_.size();
  // Host steps read and write device memory directly at DMA bandwidth, computing at
  // the vector unit's rate.
  h.cycles = ceilDiv(bytes, c_.dmaBytesPerCycle) + ceilDiv(elems, c_.vectorLanes);
  h.layer = uint32_t(p_.layers_.size());
  p_.host_.push_back(std::move(seg));
  p_.instrs_.push_back(h);
  p_.layerImpls_.push_back(nullptr);
  SimLayerStats st;
  st.name = names.size() > 60 ? names.substr(0, 57) + "..." : names;
  st.kind = pendingHost_.size() == 1 ? pendingHost_[0]->getKindName() : "host";
  st.how = "host";
  p_.layers_.push_back(st);
  pendingHost_.clear();
}

Error SimProgramBuilder::build(PlannedIR &P) {
  if (!P.planned)
    return makeError(ErrorCode::Internal, "Sim: the partition's IR has no memory plan");
  p_.config_ = c_;
  p_.F_ = std::move(P.F);
  p_.plan_ = std::move(P.plan);
  const MemoryPlan &plan = p_.plan_;
  p_.mutBase_ = alignUp(plan.constantBytes, kAlign);
  p_.actBase_ = p_.mutBase_ + alignUp(plan.mutableBytes, kAlign);
  p_.deviceBytes_ = p_.actBase_ + plan.activationBytes;
  p_.weightBytes_ = plan.constantBytes;
  p_.constants_.assign(std::max<uint64_t>(plan.constantBytes, 1), 0);
  for (const auto &w : p_.F_->getWeights())
    if (auto *c = dyn_cast<Constant>(w->getOrigin())) {
      const PlannedBuffer *b = plan.find(w.get());
      if (!b)
        return makeError(ErrorCode::Internal, "Sim: constant '", w->getName(), "' has no place");
      std::memcpy(p_.constants_.data() + b->offset, c->getPayload().getUnsafePtr(),
                  c->getPayload().getSizeInBytes());
    }
  // Inputs are copied into device memory before a run, outputs out after it. With
  // placeholders in the arena, an output's bytes hold other buffers until its first write
  // and an input's after its last read, so only inputs live at the start go in, and only
  // what the program writes comes out.
  {
    std::unordered_set<const Value *> written;
    for (const auto &ip : p_.F_->getInstrs())
      if (!isa<TensorViewInst>(ip.get()))
        for (unsigned i = 0; i < ip->getNumOperands(); i++)
          if (ip->getOperand(i).second != OperandKind::In) {
            const Value *v = ip->getOperand(i).first;
            while (auto *tv = dyn_cast<TensorViewInst>(v))
              v = tv->getSrc();
            written.insert(v);
          }
    for (const auto &w : p_.F_->getWeights()) {
      if (!isa<Placeholder>(w->getOrigin()))
        continue;
      const PlannedBuffer *b = plan.find(w.get());
      if (!b)
        return makeError(ErrorCode::Internal, "Sim: placeholder '", w->getName(), "' has no place");
      if (!plan.placeholdersInArena || b->start == 0)
        p_.copyIn_.push_back(w.get());
      if (!plan.placeholdersInArena || written.count(w.get()))
        p_.copyOut_.push_back(w.get());
    }
  }
  for (const auto &ip : p_.F_->getInstrs()) {
    const Instruction *I = ip.get();
    if (isa<AllocActivationInst>(I) || isa<DeallocActivationInst>(I) || isa<TensorViewInst>(I))
      continue;
    bool done = false;
    bool candidate = isa<ConvolutionInst>(I) || isa<FullyConnectedInst>(I) ||
                     isa<MatMulInst>(I) || isa<AddInst>(I) || isa<ReluInst>(I);
    if (candidate) {
      flushHost();
      Expected<bool> r = isa<AddInst>(I) || isa<ReluInst>(I) ? tryEltwise(I) : tryMatrix(I);
      if (!r)
        return r.takeError();
      done = *r;
    }
    if (!done)
      addHost(I);
  }
  flushHost();
  return finish();
}

namespace {

/// The cycles of the \p dma intervals that no \p compute interval covers (the compute
/// intervals sorted here and merged).
uint64_t exposedCycles(const std::vector<std::pair<uint64_t, uint64_t>> &dma,
                       std::vector<std::pair<uint64_t, uint64_t>> comp) {
  std::sort(comp.begin(), comp.end());
  std::vector<std::pair<uint64_t, uint64_t>> un;
  for (auto &iv : comp) {
    if (!un.empty() && iv.first <= un.back().second)
      un.back().second = std::max(un.back().second, iv.second);
    else
      un.push_back(iv);
  }
  uint64_t exposed = 0;
  for (auto &iv : dma) {
    uint64_t covered = 0;
    auto it = std::upper_bound(un.begin(), un.end(), std::make_pair(iv.first, UINT64_MAX));
    if (it != un.begin())
      --it;
    for (; it != un.end() && it->first < iv.second; ++it) {
      uint64_t a = std::max(iv.first, it->first), b = std::min(iv.second, it->second);
      if (b > a)
        covered += b - a;
    }
    exposed += (iv.second - iv.first) - covered;
  }
  return exposed;
}

/// Adds layer \p st's counts to the program's \p T.
void addToTotal(SimLayerStats &T, const SimLayerStats &st) {
  T.dmaBytes += st.dmaBytes;
  T.dmaCycles += st.dmaCycles;
  T.macCycles += st.macCycles;
  T.vectorCycles += st.vectorCycles;
  T.hostCycles += st.hostCycles;
  T.exposedDmaCycles += st.exposedDmaCycles;
  T.tiles += st.tiles;
  T.arenaBytes = std::max(T.arenaBytes, st.arenaBytes);
}

} // namespace

void SimProgramBuilder::buildScratchpadFunction() {
  // One activation per tile, allocated before the instruction that first uses it and
  // deallocated after its last use.
  p_.spF_ = std::make_unique<IRFunction>(std::string("scratchpad"));
  p_.types_ = std::make_unique<Module>();
  IRFunction &S = *p_.spF_;
  const size_t nt = p_.tiles_.size();
  std::vector<int64_t> first(nt, -1), last(nt, -1);
  std::vector<int32_t> rd, wr;
  for (size_t i = 0; i < p_.instrs_.size(); i++) {
    tileUses(p_.instrs_[i], rd, wr);
    for (auto *v : {&rd, &wr})
      for (int32_t t : *v) {
        if (first[t] < 0)
          first[t] = int64_t(i);
        last[t] = int64_t(i);
      }
  }
  std::vector<std::vector<int32_t>> bornAt(p_.instrs_.size()), diesAt(p_.instrs_.size());
  for (size_t t = 0; t < nt; t++)
    if (first[t] >= 0) {
      bornAt[first[t]].push_back(int32_t(t));
      diesAt[last[t]].push_back(int32_t(t));
    }
  for (size_t i = 0; i < p_.instrs_.size(); i++) {
    for (int32_t t : bornAt[i]) {
      SimTile &tile = p_.tiles_[t];
      dim_t n = dim_t(tile.bytes / elemSize(tile.kind));
      TypeRef ty = tile.kind == ElemKind::Int8Q
                       ? p_.types_->uniqueType(tile.kind, {n}, 1.0f, 0)
                       : p_.types_->uniqueType(tile.kind, {n});
      auto *A = S.push_back(new AllocActivationInst(tile.name, ty));
      tile.alloc = A;
    }
    for (int32_t t : diesAt[i])
      S.push_back(new DeallocActivationInst(p_.tiles_[t].name + ".end", nullptr,
                                            const_cast<AllocActivationInst *>(p_.tiles_[t].alloc)));
  }
}

Error SimProgramBuilder::planScratchpad() {
  // Offsets as placed layer by layer (no two layers' tiles are live together).
  IRFunction &S = *p_.spF_;
  MemoryPlan &sp = p_.spPlan_;
  sp.alignment = kAlign;
  sp.buffers = computeActivationLifetimes(S);
  std::unordered_map<const Value *, const SimTile *> byAlloc;
  for (const SimTile &t : p_.tiles_)
    byAlloc[t.alloc] = &t;
  uint64_t arena = 0;
  for (PlannedBuffer &b : sp.buffers) {
    b.region = MemoryRegion::Activation;
    const SimTile *t = byAlloc.at(b.value);
    b.offset = t->offset;
    arena = std::max(arena, t->offset + alignUp(t->bytes, kAlign));
  }
  sp.activationBytes = arena;
  sp.maxLiveBytes = computeMaxLiveBytes(sp.buffers, kAlign);
  sp.maxLiveBytesUnaligned = computeMaxLiveBytes(sp.buffers, 1);
  sp.numInstrs = S.getInstrs().size();
  sp.strategy = "per layer: smallest of every strategy";
  if (Error e = verifyMemoryPlan(S, sp))
    return std::move(e).addContext("verifying the Sim scratchpad plan");
  if (arena > c_.scratchpadBytes)
    return makeError(ErrorCode::Internal, "Sim: scratchpad plan of ", arena,
                     " bytes exceeds the scratchpad (", c_.scratchpadBytes, " bytes)");
  return Error::success();
}

void SimProgramBuilder::schedule() {
  // Each engine in program order; an instruction starts when its engine is free, its
  // dependencies are done and its layer has begun (after the previous layer).
  std::vector<uint64_t> endAt(p_.instrs_.size(), 0);
  uint64_t engineFree[4] = {0, 0, 0, 0};
  uint64_t barrier = c_.launchCycles, layerEnd = barrier;
  size_t i = 0;
  for (size_t L = 0; L < p_.layers_.size(); L++) {
    SimLayerStats &st = p_.layers_[L];
    barrier = layerEnd;
    st.start = barrier;
    std::vector<std::pair<uint64_t, uint64_t>> dma, comp;
    for (; i < p_.instrs_.size() && p_.instrs_[i].layer == L; i++) {
      const SimInstr &x = p_.instrs_[i];
      unsigned e = unsigned(x.engine());
      uint64_t s = std::max(engineFree[e], barrier);
      for (uint32_t d : x.deps)
        s = std::max(s, endAt[d]);
      endAt[i] = s + x.cycles;
      engineFree[e] = endAt[i];
      layerEnd = std::max(layerEnd, endAt[i]);
      if (x.engine() == SimEngine::DMA) {
        st.dmaBytes += x.bytes;
        st.dmaCycles += x.cycles;
        dma.push_back({s, endAt[i]});
      } else {
        (x.engine() == SimEngine::MAC      ? st.macCycles
         : x.engine() == SimEngine::Vector ? st.vectorCycles
                                           : st.hostCycles) += x.cycles;
        comp.push_back({s, endAt[i]});
      }
    }
    st.end = layerEnd;
    st.exposedDmaCycles = exposedCycles(dma, std::move(comp));
    addToTotal(p_.total_, st);
  }
  p_.total_.name = "total";
  p_.total_.start = 0;
  p_.total_.end = layerEnd;
}

Error SimProgramBuilder::finish() {
  buildScratchpadFunction();
  KILN_RETURN_IF_ERR(planScratchpad());
  schedule();
  return Error::success();
}

Expected<std::unique_ptr<SimProgram>> SimProgram::build(PlannedIR &P, const SimConfig &config) {
  std::unique_ptr<SimProgram> p(new SimProgram());
  SimProgramBuilder b(*p, config);
  KILN_RETURN_IF_ERR(b.build(P));
  return p;
}

// ------------------------------------------------------------------ execution

namespace {

struct FreeBytes {
  void operator()(char *p) const { std::free(p); }
};

std::unique_ptr<char[], FreeBytes> allocBytes(uint64_t n) {
  n = std::max<uint64_t>(kAlign, alignUp(n, kAlign));
  return std::unique_ptr<char[], FreeBytes>(static_cast<char *>(std::aligned_alloc(kAlign, n)));
}

} // namespace

namespace {

/// The trace event of layer \p st, run from \p startNs to \p endNs on the host.
TraceEvent layerEvent(const SimLayerStats &st, uint32_t pid, int64_t startNs, int64_t endNs) {
  TraceEvent e;
  e.name = st.name;
  e.category = "kernel";
  e.pid = pid;
  e.startNs = startNs;
  e.durNs = endNs - startNs;
  e.args.push_back({"kind", st.kind, false});
  e.args.push_back({"how", st.how, false});
  e.args.push_back({"cycles", std::to_string(st.cycles()), true});
  e.args.push_back({"dma_bytes", std::to_string(st.dmaBytes), true});
  return e;
}

} // namespace

Expected<Tensor *> SimProgram::boundTensor(PlaceholderBindings &bindings,
                                           const WeightVar *w) const {
  auto *ph = dyn_cast<Placeholder>(w->getOrigin());
  if (!ph)
    return makeError(ErrorCode::Internal, "Sim: weight '", w->getName(), "' is no placeholder");
  KILN_ASSIGN_OR_RETURN(Tensor * t, bindings.getChecked(ph));
  if (t->getSizeInBytes() != plan_.find(w)->size)
    return makeError(ErrorCode::InvalidArgument, "Sim: placeholder '", ph->getName(),
                     "' is bound to ", t->getType().toString(), ", the program expects ",
                     w->getType()->toString());
  return t;
}

Error SimProgram::exec(const SimInstr &x, char *scratch, char *run,
                       const std::function<char *(uint64_t)> &dev,
                       PlaceholderBindings &bindings) const {
  switch (x.op) {
  case SimOpcode::DmaIn: {
    char *t = scratch + tiles_[x.dst].offset;
    const char *d = dev(x.dev);
    for (uint32_t r = 0; r < x.rows; r++)
      std::memcpy(t + r * x.rowBytes, d + r * x.devStride, x.rowBytes);
    return Error::success();
  }
  case SimOpcode::DmaOut: {
    const char *t = scratch + tiles_[x.a].offset;
    char *d = dev(x.dev);
    for (uint32_t r = 0; r < x.rows; r++)
      std::memcpy(d + r * x.devStride, t + r * x.rowBytes, x.rowBytes);
    return Error::success();
  }
  case SimOpcode::Host: {
    const HostSegment &h = *host_[x.elems];
    PlannedMemory pm{const_cast<char *>(constants_.data()), run, run, &h.offsets};
    InterpreterRun r(*h.F, &pm);
    return r.run(bindings);
  }
  default: // im2col DMA and compute: the layer's kernels
    layerImpls_[x.layer]->exec(x, scratch, tiles_, dev);
    return Error::success();
  }
}

Error SimProgram::run(PlaceholderBindings &bindings, Tracer *tracer, uint32_t pid) const {
  auto mem = allocBytes(deviceBytes_ - mutBase_);
  auto sp = allocBytes(config_.scratchpadBytes);
  if (!mem || !sp)
    return makeError(ErrorCode::Runtime, "Sim: cannot allocate the device's memory");
  std::memset(mem.get(), 0xff, deviceBytes_ - mutBase_);
  // Where a planned placeholder lies in `mem` (which starts at the mutable region).
  auto at = [&](const PlannedBuffer &b) {
    return mem.get() + (b.region == MemoryRegion::Activation ? actBase_ - mutBase_ : 0) + b.offset;
  };
  for (const WeightVar *w : copyIn_) {
    KILN_ASSIGN_OR_RETURN(Tensor * t, boundTensor(bindings, w));
    std::memcpy(at(*plan_.find(w)), t->getUnsafePtr(), t->getSizeInBytes());
  }
  std::vector<std::pair<const WeightVar *, Tensor *>> placeholders;
  for (const WeightVar *w : copyOut_) {
    KILN_ASSIGN_OR_RETURN(Tensor * t, boundTensor(bindings, w));
    placeholders.push_back({w, t});
  }
  char *constants = const_cast<char *>(constants_.data());
  char *run = mem.get();
  const uint64_t mutBase = mutBase_;
  std::function<char *(uint64_t)> dev = [&](uint64_t a) -> char * {
    return a < mutBase ? constants + a : run + (a - mutBase);
  };
  std::vector<TraceEvent> events;
  uint32_t layer = UINT32_MAX;
  int64_t layerStart = 0;
  for (const SimInstr &x : instrs_) {
    if (tracer && x.layer != layer) {
      if (layer != UINT32_MAX)
        events.push_back(layerEvent(layers_[layer], pid, layerStart, tracer->nowNs()));
      layer = x.layer;
      layerStart = tracer->nowNs();
    }
    KILN_RETURN_IF_ERR(exec(x, sp.get(), run, dev, bindings));
  }
  if (tracer) {
    if (layer != UINT32_MAX)
      events.push_back(layerEvent(layers_[layer], pid, layerStart, tracer->nowNs()));
    tracer->append(std::move(events));
  }
  for (auto &[w, t] : placeholders)
    std::memcpy(t->getUnsafePtr(), at(*plan_.find(w)), t->getSizeInBytes());
  return Error::success();
}

// ------------------------------------------------------------------ text

std::string SimProgram::report() const {
  std::ostringstream os;
  char line[512];
  std::snprintf(line, sizeof(line), "%-4s %-28s %-18s %-26s %12s %12s %10s %10s %10s %7s %6s %9s\n",
                "#", "layer", "kind", "how", "cycles", "DMA bytes", "DMA cyc", "MAC cyc",
                "vec+host", "hidden", "tiles", "arena");
  os << line;
  for (size_t i = 0; i < layers_.size(); i++) {
    const SimLayerStats &s = layers_[i];
    char hidden[16] = "      -";
    if (s.dmaCycles)
      std::snprintf(hidden, sizeof(hidden), "%6.1f%%", 100 * s.hiddenDma());
    std::snprintf(line, sizeof(line),
                  "%-4zu %-28.28s %-18.18s %-26.26s %12llu %12llu %10llu %10llu %10llu %7s "
                  "%6llu %9llu\n",
                  i, s.name.c_str(), s.kind.c_str(), s.how.c_str(), (unsigned long long)s.cycles(),
                  (unsigned long long)s.dmaBytes, (unsigned long long)s.dmaCycles,
                  (unsigned long long)s.macCycles,
                  (unsigned long long)(s.vectorCycles + s.hostCycles), hidden,
                  (unsigned long long)s.tiles, (unsigned long long)s.arenaBytes);
    os << line;
  }
  const SimLayerStats &t = total_;
  std::snprintf(line, sizeof(line),
                "total: %llu cycles (launch %llu), %llu DMA bytes per run (%llu DMA cycles, "
                "%.1f%% hidden under compute), MAC %llu, vector %llu, host %llu cycles; %llu "
                "tiles, scratchpad %llu of %llu bytes; weights %llu bytes (moved at load)\n",
                (unsigned long long)t.end, (unsigned long long)config_.launchCycles,
                (unsigned long long)t.dmaBytes, (unsigned long long)t.dmaCycles,
                100 * t.hiddenDma(), (unsigned long long)t.macCycles,
                (unsigned long long)t.vectorCycles, (unsigned long long)t.hostCycles,
                (unsigned long long)t.tiles, (unsigned long long)t.arenaBytes,
                (unsigned long long)config_.scratchpadBytes, (unsigned long long)weightBytes_);
  os << line;
  return os.str();
}

std::string SimProgram::toString(size_t maxInstrs) const {
  std::ostringstream os;
  size_t inLayer = 0;
  uint32_t layer = UINT32_MAX;
  for (size_t i = 0; i < instrs_.size(); i++) {
    const SimInstr &x = instrs_[i];
    if (x.layer != layer) {
      layer = x.layer;
      inLayer = 0;
      os << "layer " << layer << " " << layers_[layer].name << " (" << layers_[layer].kind
         << ", " << layers_[layer].how << ")\n";
    }
    if (maxInstrs && inLayer++ >= maxInstrs) {
      if (inLayer == maxInstrs + 1)
        os << "  ...\n";
      continue;
    }
    os << "  " << i << ": " << simOpcodeName(x.op);
    auto tileName = [&](int32_t t) {
      return "%" + tiles_[t].name + "@" + std::to_string(tiles_[t].offset);
    };
    switch (x.op) {
    case SimOpcode::DmaIn:
      os << " " << tileName(x.dst) << " <- dev[" << x.dev << "] " << x.rows << "x" << x.rowBytes
         << "B stride " << x.devStride;
      break;
    case SimOpcode::DmaIm2col:
      os << " " << tileName(x.dst) << " <- im2col item " << x.item << " k " << x.k0 << ".."
         << x.k1 << " px " << x.n0 << ".." << x.n1;
      break;
    case SimOpcode::DmaOut:
      os << " dev[" << x.dev << "] <- " << tileName(x.a) << " " << x.rows << "x" << x.rowBytes
         << "B stride " << x.devStride;
      break;
    case SimOpcode::Gemm:
      os << " " << tileName(x.dst) << " += " << tileName(x.a) << " x " << tileName(x.b) << " ["
         << x.m0 << ".." << x.m1 << ", " << x.n0 << ".." << x.n1 << ", " << x.k0 << ".." << x.k1
         << "]";
      break;
    case SimOpcode::Epilogue:
    case SimOpcode::VecAdd:
    case SimOpcode::VecRelu:
      os << " " << tileName(x.dst) << " <- " << tileName(x.a);
      if (x.b >= 0)
        os << ", " << tileName(x.b);
      break;
    case SimOpcode::Host:
      os << " segment " << x.elems;
      break;
    }
    os << "  (" << x.cycles << " cyc";
    if (!x.deps.empty()) {
      os << ", after";
      for (uint32_t d : x.deps)
        os << " " << d;
    }
    os << ")\n";
  }
  return os.str();
}

} // namespace kiln
