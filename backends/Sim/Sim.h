/// \file
/// Sim: a simulated accelerator, and the template for a hardware team's backend.
///
/// What a real backend replaces, and what it keeps:
/// - isOpSupported (SimSupport.cpp) states exactly which nodes and element kinds the
///   chip runs; the partitioner sends everything else to the host (CPU/Interpreter).
/// - compile produces the chip's program. The Sim has no instruction set of its own: it
///   executes through the Interpreter's IR kernels (found through the backend registry),
///   so its results are bit-exact against the Interpreter for the same precision, while
///   countWork (SimCost.cpp) measures the run from the shapes alone. A real backend
///   replaces the inner Interpreter function with its code generator; the cost model
///   becomes its performance estimator.
/// - SimDeviceManager (SimDeviceManager.h) is the device driver: memory, running,
///   counters, and fault injection for testing the runtime.
#ifndef KILN_BACKENDS_SIM_SIM_H
#define KILN_BACKENDS_SIM_SIM_H

#include "SimConfig.h"

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
  /// The Interpreter's: Sim programs run on its kernels.
  BackendCompileSpec getCompileSpec(const CompileOptions &opts) const override;
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

/// A compiled Sim program: the Interpreter function that computes it and its work.
class SimFunction final : public CompiledFunction {
public:
  SimFunction(std::unique_ptr<CompiledFunction> inner, SimWork work)
      : inner_(std::move(inner)), work_(work) {}
  Error execute(ExecutionContext &ctx) override { return inner_->execute(ctx); }
  std::string getBackendName() const override { return "Sim"; }
  const SimWork &getWork() const { return work_; }

private:
  std::unique_ptr<CompiledFunction> inner_;
  SimWork work_;
};

} // namespace kiln

#endif // KILN_BACKENDS_SIM_SIM_H
