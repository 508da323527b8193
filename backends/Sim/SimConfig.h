/// \file
/// The configuration of one simulated accelerator: what a hardware team edits first.
/// Every field has a default; a JSON file, or a device's parameters (same key names),
/// override any subset:
///
///   {"memory_bytes": 8388608, "clock_mhz": 800, "macs_per_cycle_i8": 2048}
#ifndef KILN_BACKENDS_SIM_SIMCONFIG_H
#define KILN_BACKENDS_SIM_SIMCONFIG_H

#include "kiln/Base/Error.h"

#include <cstdint>
#include <map>
#include <string>

namespace kiln {

struct SimConfig {
  /// "memory_bytes": on-chip memory; a loaded partition's weights, I/O and activations
  /// must fit, so this is what makes the partitioner split a model.
  uint64_t memoryBytes = uint64_t(64) << 20;
  /// "clock_mhz": turns cycles into simulated time.
  double clockMHz = 1000;
  /// "macs_per_cycle_f32" / "_f16" / "_i8": the MAC array's throughput on each path
  /// (Convolution, FullyConnected, MatMul). A 32x32 array with 4 int8 lanes per cell.
  uint64_t macsPerCycleF32 = 256;
  uint64_t macsPerCycleF16 = 1024;
  uint64_t macsPerCycleI8 = 4096;
  /// "vector_lanes": elements per cycle of the vector unit (Add, Relu, pooling windows,
  /// Concat, Quantize, Dequantize).
  uint64_t vectorLanes = 64;
  /// "dma_bytes_per_cycle": bandwidth of the DMA engine (device memory <-> scratchpad,
  /// and host <-> device for a run's inputs and outputs).
  uint64_t dmaBytesPerCycle = 32;
  /// "launch_cycles": fixed cost of starting a run.
  uint64_t launchCycles = 1000;
  /// "scratchpad_bytes": the on-chip scratchpad the program's tiles live in (placed by the
  /// IR's memory planner); a layer whose smallest tile does not fit is a compile error.
  uint64_t scratchpadBytes = uint64_t(1) << 20;
  /// "mac_rows" / "mac_cols": the MAC array's shape. A tile step of rows x cols x depth
  /// takes ceil(rows / mac_rows) * ceil(cols / mac_cols) * ceil(depth / lanes) cycles, with
  /// lanes = macs_per_cycle of the path / (mac_rows * mac_cols) (at least 1).
  uint64_t macRows = 16;
  uint64_t macCols = 16;
  /// "dma_setup_cycles": fixed cost of each DMA descriptor (on top of bytes /
  /// dma_bytes_per_cycle).
  uint64_t dmaSetupCycles = 16;
  /// "realtime": 1 makes a run last at least its simulated time (its cycles at clock_mhz):
  /// the device sleeps the rest after computing, so wall-clock measurements (a stream of
  /// requests through a pipeline of devices) see the chip's speed rather than the host's.
  /// 0 (default): a run takes what its computation on the host takes.
  uint64_t realtime = 0;

  /// Sets field \p key (one of the quoted names above); InvalidArgument for an unknown
  /// key or a value out of range (non-positive rates, fractional integer fields).
  Error set(const std::string &key, double value);

  /// \p base (or the defaults) with the keys of a flat JSON object of numbers applied.
  static Expected<SimConfig> fromJSON(const std::string &text, const SimConfig &base);
  static Expected<SimConfig> fromJSON(const std::string &text);
  /// fromJSON on the contents of \p path.
  static Expected<SimConfig> fromFile(const std::string &path, const SimConfig &base);
  static Expected<SimConfig> fromFile(const std::string &path);
  /// Device parameters: "config_file" first (when present), then every other key, as
  /// numbers written in text.
  static Expected<SimConfig> fromParameters(const std::map<std::string, std::string> &params,
                                            const SimConfig &base);
  static Expected<SimConfig> fromParameters(const std::map<std::string, std::string> &params);
  /// The JSON form, every key.
  std::string toJSON() const;
};

} // namespace kiln

#endif // KILN_BACKENDS_SIM_SIMCONFIG_H
