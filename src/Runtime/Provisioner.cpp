#include "kiln/Runtime/Provisioner.h"
#include "kiln/Base/Trace.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace kiln {

CompileOptions ProvisionOptions::compileOptionsFor(const std::string &backend) const {
  bool takesUnqualified =
      optionBackends.empty() ||
      std::find(optionBackends.begin(), optionBackends.end(), backend) != optionBackends.end();
  return compile.forBackend(backend, takesUnqualified);
}

namespace {

using BackendMap = std::map<std::string, const Backend *>;

/// Compiles every partition of \p plan into \p loaded (its device key too).
Error compilePartitions(PartitionPlan &plan, const ProvisionOptions &opts,
                        const BackendMap &backends, std::vector<LoadedPartition> &loaded) {
  for (size_t i = 0; i < plan.partitions.size(); i++) {
    Partition &p = plan.partitions[i];
    auto b = backends.find(p.backendName);
    if (b == backends.end())
      return makeError(ErrorCode::NotFound, "no backend '", p.backendName, "' for '", p.name,
                       "'");
    Expected<std::unique_ptr<CompiledFunction>> cf =
        b->second->compile(p.function, opts.compileOptionsFor(p.backendName), &p.prepared);
    if (!cf)
      return cf.takeError().addContext("compiling partition '" + p.name + "' for " +
                                       p.backendName);
    loaded[i].deviceKey = plan.networkName + "#" + std::to_string(i);
    loaded[i].compiled = std::move(cf).get();
  }
  return Error::success();
}

/// Devices of \p p's backend, most free memory first (ties keep device order).
std::vector<DeviceManager *> candidatesFor(const Partition &p,
                                           const std::vector<DeviceManager *> &devices) {
  std::vector<DeviceManager *> cands;
  for (DeviceManager *d : devices)
    if (d->getBackendName() == p.backendName)
      cands.push_back(d);
  std::stable_sort(cands.begin(), cands.end(), [](DeviceManager *a, DeviceManager *b) {
    return a->getAvailableMemory() > b->getAvailableMemory();
  });
  return cands;
}

/// Loads partition \p i on \p d.
Error loadOn(PartitionPlan &plan, std::vector<LoadedPartition> &loaded, size_t i,
             DeviceManager *d) {
  KILN_RETURN_IF_ERR(d->addNetwork(loaded[i].deviceKey, loaded[i].compiled.get(),
                                   plan.partitions[i].memoryBytes));
  loaded[i].devices.push_back(d);
  plan.partitions[i].devices.push_back(d->getName());
  return Error::success();
}

/// The partitions in the order their first copies load: largest unit first, a unit being
/// a device load the partitioner planned (Partition::device: its partitions together) or
/// a lone partition.
std::vector<size_t> loadOrder(const PartitionPlan &plan) {
  std::map<std::pair<std::string, int>, uint64_t> loadBytes;
  for (const Partition &p : plan.partitions)
    if (p.device >= 0)
      loadBytes[{p.backendName, p.device}] += p.memoryBytes;
  auto unitBytes = [&](const Partition &p) {
    return p.device >= 0 ? loadBytes[{p.backendName, p.device}] : p.memoryBytes;
  };
  std::vector<size_t> bySize(plan.partitions.size());
  for (size_t i = 0; i < bySize.size(); i++)
    bySize[i] = i;
  std::stable_sort(bySize.begin(), bySize.end(), [&](size_t a, size_t b) {
    const Partition &pa = plan.partitions[a], &pb = plan.partitions[b];
    uint64_t ua = unitBytes(pa), ub = unitBytes(pb);
    if (ua != ub)
      return ua > ub;
    if (pa.backendName != pb.backendName || pa.device != pb.device)
      return std::tie(pa.backendName, pa.device) < std::tie(pb.backendName, pb.device);
    return pa.memoryBytes > pb.memoryBytes;
  });
  return bySize;
}

/// Where each partition should go: per backend, its device loads and lone partitions
/// (in \p order) packed onto the free memory of its devices (packDeviceLoads: most room
/// first, with backtracking where that greedy choice would leave a load without room).
std::map<size_t, DeviceManager *> preferredDevices(const PartitionPlan &plan,
                                                   const std::vector<size_t> &order,
                                                   const std::vector<DeviceManager *> &devices) {
  std::map<size_t, DeviceManager *> preferred;
  std::map<std::string, std::vector<DeviceManager *>> devsOf;
  for (DeviceManager *d : devices)
    devsOf[d->getBackendName()].push_back(d);
  for (const auto &[backend, devs] : devsOf) {
    std::vector<std::vector<size_t>> units; // partition indices of each device load
    std::map<int, size_t> unitOf;
    std::vector<uint64_t> bytes, room;
    for (size_t i : order) {
      const Partition &p = plan.partitions[i];
      if (p.backendName != backend)
        continue;
      auto it = p.device >= 0 ? unitOf.find(p.device) : unitOf.end();
      if (it == unitOf.end()) {
        if (p.device >= 0)
          unitOf[p.device] = units.size();
        units.push_back({i});
        bytes.push_back(p.memoryBytes);
      } else {
        units[it->second].push_back(i);
        bytes[it->second] += p.memoryBytes;
      }
    }
    for (DeviceManager *d : devs)
      room.push_back(d->getAvailableMemory());
    std::vector<unsigned> at = packDeviceLoads(bytes, room);
    for (size_t u = 0; u < at.size(); u++)
      for (size_t i : units[u])
        preferred[i] = devs[at[u]];
  }
  return preferred;
}

/// One copy of each partition, in \p order: on the device where the rest of its device
/// load went, else on its preferred device; a device that refuses it sends it to the
/// others, most free memory first. The error names the partition none took.
Error loadFirstCopies(PartitionPlan &plan, std::vector<LoadedPartition> &loaded,
                      const std::vector<DeviceManager *> &devices,
                      const std::vector<size_t> &order,
                      std::map<size_t, DeviceManager *> &preferred) {
  std::map<std::pair<std::string, int>, DeviceManager *> loadDevice;
  for (size_t i : order) {
    const Partition &p = plan.partitions[i];
    std::vector<DeviceManager *> cands = candidatesFor(p, devices);
    auto planned = loadDevice.find({p.backendName, p.device});
    DeviceManager *first = nullptr;
    if (p.device >= 0 && planned != loadDevice.end())
      first = planned->second; // where the rest of its device load went
    else if (preferred.count(i))
      first = preferred[i];
    if (first) {
      auto at = std::find(cands.begin(), cands.end(), first);
      if (at != cands.end())
        std::rotate(cands.begin(), at, at + 1);
    }
    std::string refusals;
    Error firstRefusal = Error::success();
    for (DeviceManager *d : cands) {
      Error e = loadOn(plan, loaded, i, d);
      if (!e)
        break;
      refusals += "; " + e.message();
      if (!firstRefusal)
        firstRefusal = std::move(e);
    }
    if (loaded[i].devices.empty()) {
      // Keep the code of the first refusal (a load fault, OutOfMemory) for the caller.
      ErrorCode code = firstRefusal ? firstRefusal.code() : ErrorCode::NotFound;
      std::string why = cands.empty() ? "there is no " + p.backendName + " device"
                                      : "every " + p.backendName + " device refused it" + refusals;
      return makeError(code, "partition '", p.name, "' (", p.memoryBytes,
                       " bytes) cannot be loaded: ", why);
    }
    if (p.device >= 0 && planned == loadDevice.end())
      loadDevice[{p.backendName, p.device}] = loaded[i].devices.front();
  }
  return Error::success();
}

/// Up to \p replicas copies of each partition, where memory is left over; a refused
/// replica is not an error.
void loadReplicas(PartitionPlan &plan, std::vector<LoadedPartition> &loaded,
                  const std::vector<DeviceManager *> &devices, size_t replicas) {
  for (size_t i = 0; i < plan.partitions.size() && replicas > 1; i++)
    for (DeviceManager *d : candidatesFor(plan.partitions[i], devices)) {
      if (loaded[i].devices.size() >= replicas)
        break;
      if (std::find(loaded[i].devices.begin(), loaded[i].devices.end(), d) ==
              loaded[i].devices.end() &&
          d->getAvailableMemory() >= plan.partitions[i].memoryBytes)
        (void)loadOn(plan, loaded, i, d);
    }
}

} // namespace

Expected<std::vector<LoadedPartition>> Provisioner::provision(PartitionPlan &plan,
                                                              const ProvisionOptions &opts) {
  std::vector<LoadedPartition> loaded(plan.partitions.size());
  auto fail = [&](Error e) -> Error {
    unprovision(loaded);
    for (Partition &p : plan.partitions)
      p.devices.clear();
    return std::move(e).addContext("provisioning network '" + plan.networkName + "'");
  };
  // 1. Compile everything before taking any device memory.
  TraceScope compile(opts.compile.tracer, "compile", "provision " + plan.networkName);
  if (Error e = compilePartitions(plan, opts, backends_, loaded))
    return fail(std::move(e));
  compile.end();

  // 2. One copy of each partition, largest first, on the device packDeviceLoads chose for
  // it (the most free memory where that leaves room for the rest: spreads the model).
  // Partitions the partitioner planned as one device load (Partition::device) go
  // together, on the device its first partition took.
  TraceScope loading(opts.compile.tracer, "compile", "load " + plan.networkName);
  std::vector<size_t> order = loadOrder(plan);
  std::map<size_t, DeviceManager *> preferred = preferredDevices(plan, order, devices_);
  if (Error e = loadFirstCopies(plan, loaded, devices_, order, preferred))
    return fail(std::move(e));

  // 3. Replicas, where memory is left over.
  loadReplicas(plan, loaded, devices_, opts.replicas);
  return loaded;
}

void Provisioner::unprovision(std::vector<LoadedPartition> &loaded) {
  for (LoadedPartition &lp : loaded) {
    for (DeviceManager *d : lp.devices)
      (void)d->evictNetwork(lp.deviceKey); // only fails if already gone
    lp.devices.clear();
  }
}

} // namespace kiln
