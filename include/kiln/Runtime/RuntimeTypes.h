/// \file
/// The runtime's plain data types that embedders see through HostManager: device
/// configurations, user-given partitions, deadlines and run reports. The classes that use
/// them (DeviceManager, Partitioner, Executor) are in the backend-author headers.
#ifndef KILN_RUNTIME_RUNTIMETYPES_H
#define KILN_RUNTIME_RUNTIMETYPES_H

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln {

/// Describes one device. Options are passed in, never global.
struct DeviceConfig {
  /// The backend whose compiled functions this device runs ("Sim", "Interpreter", "CPU").
  std::string backendName;
  /// A unique name for messages and plans ("sim0"); empty: the runtime names it.
  std::string name;
  /// Memory available to loaded networks, in bytes; 0: the backend's default.
  uint64_t memoryBytes = 0;
  /// Backend-specific settings as text (the Sim reads "config_file" and its config keys).
  std::map<std::string, std::string> parameters;
};

/// What a device reports about one run. Host devices report only wall time; simulated or
/// real accelerators also fill the counters they have.
struct DeviceRunStats {
  uint64_t cycles = 0;   ///< Device clock cycles (simulated on the Sim).
  uint64_t dmaBytes = 0; ///< Bytes moved between host and device memory.
  double seconds = 0;    ///< Wall time the worker spent in the run.
};

/// The clock deadlines are measured on.
using Clock = std::chrono::steady_clock;
/// A point after which a run is no longer wanted; kNoDeadline means never.
using Deadline = Clock::time_point;
constexpr Deadline kNoDeadline = Deadline::max();

/// A partition chosen by the user: partition i holds the nodes (of the original function,
/// by name) that nodeToPartition maps to i, and runs on partitions[i].backendName. A Save
/// left unmapped follows the node it saves; every other node must be mapped.
struct PartitionConfig {
  /// One partition: its name and the backend that runs it.
  struct Part {
    std::string name;        ///< Used in plans and reports.
    std::string backendName; ///< The backend that runs it.
  };
  std::vector<Part> partitions; ///< Partition i is partitions[i].
  std::map<std::string, unsigned> nodeToPartition; ///< Node name to partition index.
};

/// A node that runs on the fallback backend because none of the backends a network was
/// given can run it (HostManager::addNetwork without NetworkOptions::strictBackend).
struct FallbackNode {
  std::string name;  ///< The node's name.
  std::string kind;  ///< The node kind ("Gather").
  std::string types; ///< Operand and result types: "float<4x8>, i64<2> -> float<2x8>".
  /// "node 'g' (Gather): float<4x8>, i64<2> -> float<2x8>".
  std::string toString() const;
};

/// How many partitions and nodes of a network one backend runs.
struct BackendShare {
  std::string backend;   ///< The backend's name.
  size_t partitions = 0; ///< Partitions it runs.
  size_t nodes = 0; ///< Nodes of the network's function (Saves included).
};

/// Where a network's nodes run: one share per backend, in priority order (the backends
/// the network was given first, the fallback last), and the nodes that fell back.
struct NetworkSplit {
  std::vector<BackendShare> backends; ///< One per backend, in priority order.
  /// The backend that runs fallbackNodes; empty when nothing fell back.
  std::string fallbackBackend;
  std::vector<FallbackNode> fallbackNodes; ///< The nodes that fell back.
  /// "CPU: 2 partitions, 5 nodes; Interpreter: 1 partition, 1 node".
  std::string toString() const;
};

/// What one partition of a request did.
struct PartitionRunReport {
  std::string partition; ///< The partition's name ("net.p0").
  std::string device;    ///< The device that ran it.
  DeviceRunStats stats;  ///< What the device reported.
};

/// What one request did: the partitions it ran, in completion order.
struct RunReport {
  std::vector<PartitionRunReport> partitions; ///< In completion order.
  double seconds = 0; ///< Wall time from start to the last partition's end.
  /// The partitions' device cycles, summed.
  uint64_t totalCycles() const;
  /// The partitions' DMA bytes, summed.
  uint64_t totalDmaBytes() const;
  /// One line per partition: name, device, cycles, DMA bytes, wall time.
  std::string toString() const;
};

} // namespace kiln

#endif // KILN_RUNTIME_RUNTIMETYPES_H
