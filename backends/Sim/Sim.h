/// \file
/// Sim: a simulated accelerator, and the template for a hardware team's backend.
///
/// What a real backend replaces, and what it keeps:
/// - isOpSupported (SimSupport.cpp) states exactly which nodes and element kinds the
///   chip runs; the partitioner sends everything else to the host (CPU/Interpreter).
/// - compile produces the chip's program (SimProgram.h): the partition's low-level IR,
///   planned in device memory, lowered to DMA, MAC-array and vector instructions over
///   tiles of an on-chip scratchpad placed by the IR's memory planner, with whole-tensor
///   host steps (the Interpreter's kernels) for what the tiler does not handle. Results
///   are bit-exact against the Interpreter for float32 and int8; a run's cycles are the
///   makespan of the program's schedule. countWork (SimCost.cpp) remains the shape-based
///   estimate the partitioner balances pieces by.
/// - SimDeviceManager (SimDeviceManager.h) is the device driver: memory, running,
///   counters, and fault injection for testing the runtime.
#ifndef KILN_BACKENDS_SIM_SIM_H
#define KILN_BACKENDS_SIM_SIM_H

#include "SimConfig.h"
#include "SimProgram.h"

#include "kiln/Backend/Backend.h"

#include <memory>
#include <mutex>

namespace kiln {

/// The work of one run, counted from shapes at compile time. The device turns it into
/// cycles with its own SimConfig, so devices of one backend may differ.
struct SimWork {
  uint64_t macsF32 = 0, macsF16 = 0, macsI8 = 0; ///< MAC array, per precision path.
  uint64_t vectorElems = 0;                      ///< Vector-unit element operations.
  uint64_t inputBytes = 0;                       ///< DMA in per run: placeholders read.
  uint64_t outputBytes = 0;                      ///< DMA out per run: placeholders written.
  uint64_t weightBytes = 0;                      ///< DMA in once, at load: constants.
};

/// A run's simulated cost on one configuration.
struct SimCost {
  uint64_t computeCycles = 0, dmaCycles = 0;
  uint64_t cycles = 0;   ///< launch + compute + DMA (the model does not overlap them).
  uint64_t dmaBytes = 0; ///< Per-run DMA: inputs in, outputs out.
  double seconds = 0;    ///< cycles at the configured clock.
};

/// The cycles and DMA bytes of \p work on \p config.
SimCost estimateCost(const SimWork &work, const SimConfig &config);
/// Counts the work of a function the Sim supports.
SimWork countWork(const Function &f);
/// Adds the compute work of one node (MACs, vector elements) to \p w.
void countNodeWork(const Node &n, SimWork &w);

class SimBackend final : public Backend {
public:
  std::string getName() const override { return "Sim"; }
  bool isOpSupported(const Node &node) const override;
  /// The MAC array runs FullyConnected and Convolution whole: nothing is lowered.
  bool shouldLower(const Node &) const override { return false; }
  /// The Interpreter's (its host steps run the Interpreter's kernels), always with the
  /// memory-aware schedule, the default IR passes and the static plan: device memory.
  BackendCompileSpec getCompileSpec(const CompileOptions &opts) const override;
  /// "config" (a SimConfig JSON file), "scratchpad" (bytes, overrides the file's
  /// scratchpad_bytes) and "report" (1: print the program's per-layer cycles and DMA to
  /// stderr after compiling).
  std::vector<BackendParameter> getParameters() const override;
  Expected<std::unique_ptr<CompiledFunction>> generateCode(Function *f, PlannedIR &ir,
                                                           const CompileOptions &opts) const override;
  /// The cost model on the default SimConfig: a node's compute cycles, and DMA cycles
  /// for a piece's inputs and outputs, at the configured clock.
  double estimateNodeSeconds(const Node &node) const override;
  double estimateTransferSeconds(uint64_t bytes) const override;
  /// A SimDeviceManager configured from config.parameters (see SimConfig).
  std::shared_ptr<DeviceManager> createDeviceManager(const DeviceConfig &config) const override;

private:
  /// The Interpreter that executes Sim programs; null (with an error) if not linked.
  const Backend *interpreter() const;
  mutable std::once_flag once_;
  mutable std::unique_ptr<Backend> interpreter_;
};

/// The SimConfig a compile builds programs for: the "config" parameter's file (or the
/// defaults), then "scratchpad".
Expected<SimConfig> simConfigFromOptions(const CompileOptions &opts);

/// A compiled Sim program and the shape-based work of its function.
class SimFunction final : public CompiledFunction {
public:
  SimFunction(std::unique_ptr<SimProgram> program, SimWork work)
      : program_(std::move(program)), work_(work) {}
  Error execute(ExecutionContext &ctx) override;
  std::string getBackendName() const override { return "Sim"; }
  const SimWork &getWork() const { return work_; }
  const SimProgram &getProgram() const { return *program_; }

private:
  std::unique_ptr<SimProgram> program_;
  SimWork work_;
};

} // namespace kiln

#endif // KILN_BACKENDS_SIM_SIM_H
