/// \file
/// One call for tools (kiln-run --backend Sim --devices N --device-memory BYTES): a
/// HostManager over N devices of an accelerator backend plus one host device for what
/// the accelerator cannot run, with a network added and its plan printed.
#ifndef KILN_RUNTIME_MULTIDEVICE_H
#define KILN_RUNTIME_MULTIDEVICE_H

#include "kiln/Runtime/HostManager.h"

namespace kiln {

/// What createMultiDeviceNetwork builds: the accelerator devices, the host fallback and
/// how the network is added.
struct MultiDeviceOptions {
  /// The accelerator's backend and its device count.
  std::string backend = "Sim";
  unsigned devices = 1;
  /// Memory of each accelerator device in bytes; 0: the backend's default.
  uint64_t deviceMemory = 0;
  /// Backend settings for each accelerator device (the Sim reads "config_file" and its
  /// config keys; see backends/Sim/SimConfig.h).
  std::map<std::string, std::string> deviceParameters;
  /// Where nodes the accelerator cannot run go: the first of these that is registered
  /// (and is not the accelerator) gets one host device. None registered: no fallback.
  std::vector<std::string> fallbacks = {"CPU", "Interpreter"};
  unsigned replicas = 1;
  /// NetworkOptions::pipeline: requests overlap across the devices.
  bool pipeline = true;
  /// Optimise the function first with the accelerator's pipeline (BatchNorm folding,
  /// constant folding...), as ExecutionEngine::compile does for its backend.
  bool optimize = true;
  HostConfig host;
  CompileOptions compile;
};

/// The result of createMultiDeviceNetwork: the HostManager and the added network.
struct MultiDeviceNetwork {
  std::unique_ptr<HostManager> host;
  std::string network; ///< The name to run (the function's name).
  std::string planText, planDot;
  size_t numPartitions = 0;
};

/// Builds the HostManager described by \p opts and adds \p f (whose module must outlive
/// the result; \p f is optimised in place when opts.optimize). Run it with
/// result.host->runNetworkBlocking(result.network, bindings,
/// {}, &report); report.totalCycles() and totalDmaBytes() give the simulated cost.
Expected<MultiDeviceNetwork> createMultiDeviceNetwork(Function *f, const MultiDeviceOptions &opts);

} // namespace kiln

#endif // KILN_RUNTIME_MULTIDEVICE_H
