/// \file
/// The Provisioner compiles each partition of a plan for its backend and loads it on
/// devices of that backend: partitions the partitioner planned as one device load
/// (Partition::device) go on one device, and the loads are packed onto the devices' free
/// memory by packDeviceLoads (kiln/Runtime/Partitioner.h): the largest first, on the
/// device with the most free memory unless that would leave a later load without room.
/// A partition the partitioner planned (Partition::prepared) is compiled from that plan
/// when it was made under the options it compiles with.
#ifndef KILN_RUNTIME_PROVISIONER_H
#define KILN_RUNTIME_PROVISIONER_H

#include "kiln/Runtime/DeviceManager.h"
#include "kiln/Runtime/Partitioner.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

/// One partition, compiled and loaded: what the Executor runs.
struct LoadedPartition {
  /// The name it is loaded under on its devices: "<network>#<index>".
  std::string deviceKey;
  std::unique_ptr<CompiledFunction> compiled;
  /// The devices holding it (one, or several replicas).
  std::vector<DeviceManager *> devices;
};

/// Options of Provisioner::provision.
struct ProvisionOptions {
  /// Load each partition on up to this many devices of its backend (at least one is
  /// required; more are added where memory allows), so requests can run side by side.
  unsigned replicas = 1;
  /// Every partition compiles with these, as its backend takes them
  /// (CompileOptions::forBackend): unqualified backend parameters only on the backends of
  /// optionBackends (empty: on every backend).
  CompileOptions compile;
  std::vector<std::string> optionBackends;

  /// The options a partition of backend \p backend compiles with (what the partitioner
  /// plans it under: PartitionerBackend::compileOptions).
  CompileOptions compileOptionsFor(const std::string &backend) const;
};

/// Compiles the partitions of a plan and loads them on devices (see the file comment).
class Provisioner {
public:
  /// \p backends by name; both outlive the provisioner.
  Provisioner(std::vector<DeviceManager *> devices, std::map<std::string, const Backend *> backends)
      : devices_(std::move(devices)), backends_(std::move(backends)) {}

  /// Compiles and loads every partition of \p plan (filling Partition::devices); the
  /// result is parallel to plan.partitions. On any failure (compile error, no device
  /// with room, a device refusing the load) it unloads what it loaded and returns the
  /// error.
  Expected<std::vector<LoadedPartition>> provision(PartitionPlan &plan,
                                                   const ProvisionOptions &opts);
  /// Adds a device of \p backend (both outlive the provisioner). Not concurrently with
  /// provision().
  void addDevice(DeviceManager *device, const Backend *backend) {
    devices_.push_back(device);
    backends_[backend->getName()] = backend;
  }
  /// Unloads every partition from its devices.
  void unprovision(std::vector<LoadedPartition> &loaded);

private:
  std::vector<DeviceManager *> devices_;
  std::map<std::string, const Backend *> backends_;
};

} // namespace kiln

#endif // KILN_RUNTIME_PROVISIONER_H
