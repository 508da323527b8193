/// \file
/// The Sim chip's program: what `SimBackend::generateCode` lowers a partition to, and what
/// a Sim device runs.
///
/// The chip has device memory (the partition's planned buffers: constants, inputs and
/// outputs, activations, laid out by the IR's static memory plan) and a small on-chip
/// scratchpad (SimConfig::scratchpadBytes). Its engines are a DMA engine (device memory <->
/// scratchpad), a MAC array (matrix products on tiles) and a vector unit (element-wise
/// work on tiles); operators the tiler does not handle run as whole-tensor host steps on
/// device memory with the Interpreter's kernels.
///
/// A program is a list of SimInstrs per layer (one layer per instruction of the partition's
/// low-level IR). Tiles are buffers of the low-level IR: each is an AllocActivation of the
/// program's scratchpad function (`SimProgram::scratchpad`), allocated where the program
/// first writes it and deallocated after its last use; the IR's memory planner places them
/// (placeActivations, layer by layer, every strategy, the smallest arena wins) and
/// verifyMemoryPlan checks the whole plan. The DMA of the next step is issued before the
/// compute of the current one, so their tiles are live together and the planner puts them
/// in different places: that is the double buffering. The schedule (SimProgramBuilder::
/// finish) runs each engine in program order, an instruction starting when its engine is free and its
/// dependencies (the writer of each tile it reads, and the last user of scratchpad bytes it
/// overwrites) are done; its makespan is the run's cycle count.
#ifndef KILN_BACKENDS_SIM_SIMPROGRAM_H
#define KILN_BACKENDS_SIM_SIMPROGRAM_H

#include "SimConfig.h"

#include "kiln/Backend/ExecutionContext.h"
#include "kiln/IR/IR.h"
#include "kiln/Memory/MemoryPlanner.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

struct PlannedIR;

enum class SimEngine : uint8_t { DMA, MAC, Vector, Host };
const char *simEngineName(SimEngine e);

enum class SimOpcode : uint8_t {
  DmaIn,       ///< device memory -> tile: a strided box (rows x rowBytes, device row stride)
  DmaIm2col,   ///< device memory -> tile: rows [k0,k1) x pixels [n0,n1) of a convolution's
               ///< im2col matrix (the pad reads as real zero)
  DmaOut,      ///< tile -> device memory: a strided box
  Gemm,        ///< MAC array: acc tile += A tile x B tile (rows, cols, depth of the step)
  Epilogue,    ///< vector unit: bias and conversion of an accumulator tile into its output
  VecAdd,      ///< vector unit: dst tile = a tile + b tile (element-wise Add)
  VecRelu,     ///< vector unit: dst tile = max(a tile, 0)
  Host,        ///< a whole-tensor step: Interpreter kernels on device memory
};
const char *simOpcodeName(SimOpcode op);

/// One buffer of the scratchpad.
struct SimTile {
  std::string name;
  uint64_t bytes = 0;
  uint64_t offset = 0; ///< planned offset in the scratchpad
  ElemKind kind = ElemKind::Float; ///< float, int32 (int8 accumulators) or int8
  const AllocActivationInst *alloc = nullptr; ///< its buffer in SimProgram::scratchpad
};

/// One instruction of the program.
struct SimInstr {
  SimOpcode op = SimOpcode::Host;
  uint32_t layer = 0;
  int32_t dst = -1, a = -1, b = -1, c = -1; ///< tiles (-1: none)
  // DMA: device byte address, box of rows x rowBytes with device row stride.
  uint64_t dev = 0, rowBytes = 0, devStride = 0;
  uint32_t rows = 0;
  // Tile step of a matrix layer: Y rows [m0,m1), columns [n0,n1), depth [k0,k1), item
  // (image x group for a convolution).
  uint32_t m0 = 0, m1 = 0, n0 = 0, n1 = 0, k0 = 0, k1 = 0, item = 0;
  uint64_t elems = 0;    ///< element-wise steps: element count; host: segment index
  uint64_t bytes = 0;    ///< bytes a DMA moves
  uint64_t cycles = 0;   ///< cycles on its engine
  std::vector<uint32_t> deps; ///< instructions that must finish first
  SimEngine engine() const;
};

/// What the schedule of one layer (or of the whole program) adds up to.
struct SimLayerStats {
  std::string name, kind, how; ///< IR instruction, its kind, "tiled (..)" or "host"
  uint64_t start = 0, end = 0; ///< cycles
  uint64_t dmaBytes = 0, dmaCycles = 0, macCycles = 0, vectorCycles = 0, hostCycles = 0;
  uint64_t exposedDmaCycles = 0; ///< DMA busy while no compute engine is
  uint64_t tiles = 0, arenaBytes = 0;
  uint64_t cycles() const { return end - start; }
  /// Share of DMA cycles hidden under compute (1 when no DMA).
  double hiddenDma() const {
    return dmaCycles ? 1.0 - double(exposedDmaCycles) / double(dmaCycles) : 1.0;
  }
};

class SimLayer; // an operator's tiling and kernels (SimProgram.cpp)

/// A compiled Sim program.
class SimProgram {
public:
  SimProgram();
  ~SimProgram();
  SimProgram(const SimProgram &) = delete;
  SimProgram &operator=(const SimProgram &) = delete;

  /// Lowers \p P (the partition's IR with its static plan) to the chip's program for
  /// \p config. Errors: a layer whose smallest tile does not fit the scratchpad (naming the
  /// layer, its operator, shapes and the bytes it needs), or a plan the verifier rejects.
  static Expected<std::unique_ptr<SimProgram>> build(PlannedIR &P, const SimConfig &config);

  /// Runs the program once on \p bindings; with \p tracer, one kernel event per layer
  /// (wall time on the host, the layer's simulated cycles and DMA bytes as arguments) on
  /// process \p pid.
  Error run(PlaceholderBindings &bindings, Tracer *tracer = nullptr, uint32_t pid = 0) const;

  const SimConfig &getConfig() const { return config_; }
  const std::vector<SimInstr> &instrs() const { return instrs_; }
  const std::vector<SimTile> &tiles() const { return tiles_; }
  const std::vector<SimLayerStats> &layers() const { return layers_; }
  /// The whole program: launch + makespan of the schedule.
  const SimLayerStats &total() const { return total_; }
  uint64_t cycles() const { return total_.end; }
  /// Per-run DMA bytes: every tile moved in and out.
  uint64_t dmaBytes() const { return total_.dmaBytes; }
  /// Bytes of constants the device holds (moved once, at load).
  uint64_t weightBytes() const { return weightBytes_; }
  /// Device memory the program uses: its plan's constant, mutable and activation regions
  /// (what a device is charged for it).
  uint64_t deviceBytes() const { return deviceBytes_; }
  /// The scratchpad function (tiles as activations) and its plan (activation region = the
  /// scratchpad), verified by verifyMemoryPlan.
  const IRFunction &scratchpad() const { return *spF_; }
  const MemoryPlan &scratchpadPlan() const { return spPlan_; }
  /// A table: one line per layer (cycles, DMA bytes, compute, hidden DMA share), then the
  /// totals.
  std::string report() const;
  /// The instruction list in text form (\p maxInstrs per layer at most; 0: all).
  std::string toString(size_t maxInstrs = 0) const;

private:
  friend class SimProgramBuilder;
  /// The tensor \p bindings holds for placeholder \p w, checked against the plan's size.
  Expected<Tensor *> boundTensor(PlaceholderBindings &bindings, const WeightVar *w) const;
  /// Executes one instruction over \p scratch (the scratchpad) and \p run (device memory
  /// from the mutable region on); \p dev maps a device address to host memory.
  Error exec(const SimInstr &x, char *scratch, char *run,
             const std::function<char *(uint64_t)> &dev, PlaceholderBindings &bindings) const;
  SimConfig config_;
  std::unique_ptr<IRFunction> F_; ///< the partition's IR (device memory)
  MemoryPlan plan_;               ///< its plan
  uint64_t mutBase_ = 0, actBase_ = 0, deviceBytes_ = 0;
  std::vector<char, std::allocator<char>> constants_; ///< the constant region
  std::vector<std::unique_ptr<SimLayer>> layerImpls_; ///< per layer; null for host steps
  std::unique_ptr<Module> types_; ///< uniques the tiles' types
  std::vector<SimInstr> instrs_;
  std::vector<SimTile> tiles_;
  std::vector<SimLayerStats> layers_;
  SimLayerStats total_;
  uint64_t weightBytes_ = 0;
  /// Placeholders a run copies in (those live when it starts) and out (those it writes).
  std::vector<const WeightVar *> copyIn_, copyOut_;
  std::unique_ptr<IRFunction> spF_;
  MemoryPlan spPlan_;
  /// Host steps: segments of the partition's instructions rewritten over device memory.
  struct HostSegment;
  std::vector<std::unique_ptr<HostSegment>> host_;
};

} // namespace kiln

#endif // KILN_BACKENDS_SIM_SIMPROGRAM_H
