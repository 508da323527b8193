// Loading an ONNX model with an ONNX backend-test data set (test_data_set_N/input_K.pb,
// output_K.pb), running it on a backend, and comparing against the reference outputs.
// Shared by kiln-run and the ONNX conformance test.
#ifndef KILN_SRC_TOOLS_MODELRUNNER_H
#define KILN_SRC_TOOLS_MODELRUNNER_H

#include "kiln/Importer/ONNX.h"
#include "kiln/Runtime/MultiDevice.h"
#include "kiln/kiln.h"

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kiln::tools {

/// Inputs and expected outputs of one test_data_set_N folder, in index order.
struct TestDataSet {
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
};

/// Reads input_K.pb and output_K.pb (K = 0, 1, ... until a file is missing) from \p dir.
Expected<TestDataSet> loadTestDataSet(const std::string &dir);

/// Errors of outputs against references. The tolerance is BENCH.md's:
/// |y - ref| <= 1e-4 * max|ref| + 1e-3 * |ref| per element (max over each output tensor).
struct Comparison {
  double maxAbsErr = 0;
  /// Largest |y - ref| / max|ref| of any output (0 when ref is all zero and y matches).
  double maxRelErr = 0;
  bool match = true;
  /// First mismatch, for messages.
  std::string detail;
};
Comparison compareOutputs(const std::vector<const Tensor *> &got,
                          const std::vector<Tensor> &ref);

/// One ONNX model loaded and compiled for one backend.
class ModelRunner {
public:
  explicit ModelRunner(const std::string &backend);
  ~ModelRunner();

  /// Loads \p path. When \p data is given, the graph inputs take the shapes of its
  /// inputs (input K binds the K-th graph input that is not an initializer); the shapes
  /// of setInputShapes apply too. Those are checked against the model first
  /// (checkONNXInputShapes): a mismatch names the input, the model's shape and the given
  /// one; so is a data set's shape the model contradicts, when the model does not load
  /// at it. With \p freezeIntegerInputs, integer inputs become constants holding the data's
  /// values (for models that feed shapes as inputs; the data must outlive compile and
  /// runs); the inputs named in \p freezeNames become constants whatever their kind.
  Error load(const std::string &path, const TestDataSet *data = nullptr,
             bool freezeIntegerInputs = false, const std::set<std::string> &freezeNames = {});
  /// Shapes of graph inputs by name (kiln-run --shape), for models with symbolic
  /// dimensions. Call before load().
  void setInputShapes(std::map<std::string, std::vector<dim_t>> shapes) {
    shapes_ = std::move(shapes);
  }
  /// On (the default, so that the conformance test measures the backend itself): nodes the
  /// backend cannot run fail the compile. Off: they fall back to the Interpreter with a
  /// warning (ExecutionEngine::setStrictBackend). Call before compile().
  void setStrictBackend(bool strict) { strict_ = strict; }
  /// Where the compiled network's nodes run: partitions and nodes per backend, and those
  /// that fell back.
  Expected<NetworkSplit> split() const;
  /// Runs on \p devices devices of the backend through the runtime (partitioned by backend
  /// support and device memory, with a CPU/Interpreter fallback for what the backend
  /// cannot run) instead of one ExecutionEngine device. Call before compile().
  void setMultiDevice(unsigned devices, uint64_t deviceMemory) {
    devices_ = devices;
    deviceMemory_ = deviceMemory;
  }
  /// Records the import, the compile and the runs into \p trace (kiln/Base/Trace.h).
  /// Call before load().
  void setTrace(std::shared_ptr<Tracer> trace) { trace_ = std::move(trace); }
  /// Writes Graphviz DOT pictures into \p dir (which must exist): 1-imported.dot (the
  /// graph as imported), 2-optimized.dot (after the graph passes before lowering),
  /// 3-lowered.dot (right after lowering), 4-final.dot (after the whole pipeline, as
  /// partitioned) and 5-partitions.dot (the partition plan). Call before load().
  void setDumpGraphDir(std::string dir) { dumpDir_ = std::move(dir); }
  /// The files setDumpGraphDir wrote so far.
  const std::vector<std::string> &getDumpedGraphs() const { return dumped_; }
  Error compile(const CompileOptions &opts = {});
  /// Binds inputs (copies of \p inputs; random values in [0, 1) when empty).
  Error bindInputs(const std::vector<Tensor> &inputs);
  Error run();
  /// The graph inputs (placeholders, not those frozen into constants) and their types,
  /// in graph order, and as text: "x float<8x3>, mask i64<8x128>".
  std::vector<std::pair<std::string, Type>> inputTypes() const;
  std::string inputShapesText() const;
  /// The bindings of the next run (inputs after bindInputs; extra placeholders, such as a
  /// quantization Profiler's, may be added).
  PlaceholderBindings &bindings() { return bindings_; }
  /// Output tensors in graph order (valid after run()).
  std::vector<const Tensor *> outputs() const;

  const ONNXModel &model() const { return model_; }
  Function *function() const { return f_; }
  ExecutionEngine &engine() { return *ee_; }
  /// With setMultiDevice: the partition plan, the number of partitions, and the report of
  /// the last run (simulated cycles and DMA bytes per partition).
  const MultiDeviceNetwork *multiDevice() const { return md_ ? &*md_ : nullptr; }
  const RunReport &lastReport() const { return lastReport_; }
  /// Per-stage timings of the compiled partitions (CompiledFunction::getProfile), empty
  /// unless the backend was asked to profile; one device only (not with setMultiDevice).
  std::vector<StageTiming> profile() const;
  /// Bytes of all constants of the module.
  uint64_t constantBytes() const;
  /// Bytes the constants occupy once compiled: the compiled partitions' own constant
  /// storage (the CPU's constant arena: weights in its kernels' layouts;
  /// CompiledFunction::getConstantBytes) plus the graph's constants that still hold data
  /// (not freed by the CPU's release-constants). Without setMultiDevice.
  uint64_t constantMemoryBytes() const;
  /// Activation memory of the compiled graph from its low-level IR: the peak of the bytes
  /// allocated and not yet deallocated when walking the instruction list (what a perfect
  /// memory planner would need), and the sum of all AllocActivation sizes.
  Expected<std::pair<uint64_t, uint64_t>> activationBytes() const;

private:
  std::string backend_;
  std::unique_ptr<ExecutionEngine> ee_; // owns the module, so declared before md_
  unsigned devices_ = 0;
  uint64_t deviceMemory_ = 0;
  std::optional<MultiDeviceNetwork> md_; // runs functions of ee_'s module
  RunReport lastReport_;
  Function *f_ = nullptr;
  ONNXModel model_;
  std::vector<std::string> inputNames_;
  std::set<std::string> frozen_;
  std::map<std::string, std::vector<dim_t>> shapes_;
  bool strict_ = true;
  PlaceholderBindings bindings_;
  std::shared_ptr<Tracer> trace_;
  std::string dumpDir_;
  std::vector<std::string> dumped_;
  Error writeGraph(const std::string &file, const std::string &dot);
  Error compileImpl(const CompileOptions &opts);
};

/// VmHWM of this process in bytes (0 when /proc is unavailable).
uint64_t peakRSSBytes();

} // namespace kiln::tools

#endif // KILN_SRC_TOOLS_MODELRUNNER_H
