#include "kiln/Runtime/MultiDevice.h"
#include "kiln/Backend/Backend.h"

#include <algorithm>

namespace kiln {

Expected<MultiDeviceNetwork> createMultiDeviceNetwork(Function *f, const MultiDeviceOptions &opts) {
  if (!f)
    return makeError(ErrorCode::InvalidArgument, "createMultiDeviceNetwork: no function");
  if (opts.devices == 0)
    return makeError(ErrorCode::InvalidArgument, "createMultiDeviceNetwork: zero ", opts.backend,
                     " devices");
  std::vector<DeviceConfig> devs;
  for (unsigned i = 0; i < opts.devices; i++) {
    DeviceConfig c;
    c.backendName = opts.backend;
    c.memoryBytes = opts.deviceMemory;
    c.parameters = opts.deviceParameters;
    devs.push_back(std::move(c));
  }
  std::vector<std::string> registered = getRegisteredBackends();
  NetworkOptions net;
  net.backends.push_back(opts.backend);
  for (const std::string &fb : opts.fallbacks) {
    if (fb == opts.backend ||
        std::find(registered.begin(), registered.end(), fb) == registered.end())
      continue;
    DeviceConfig c;
    c.backendName = fb;
    devs.push_back(std::move(c));
    net.backends.push_back(fb);
    break;
  }
  net.replicas = opts.replicas;
  net.pipeline = opts.pipeline;
  net.compile = opts.compile;
  net.optionBackends = {opts.backend}; // the fallback's partitions take none of them
  MultiDeviceNetwork r;
  KILN_ASSIGN_OR_RETURN(r.host, HostManager::create(std::move(devs), opts.host));
  net.prepare = opts.optimize; // verify and the graph pipeline of opts.backend
  KILN_RETURN_IF_ERR(r.host->addNetwork(f, net));
  r.network = f->getName();
  KILN_ASSIGN_OR_RETURN(r.planText, r.host->getPlanText(r.network));
  KILN_ASSIGN_OR_RETURN(r.planDot, r.host->getPlanDot(r.network));
  KILN_ASSIGN_OR_RETURN(r.numPartitions, r.host->getNumPartitions(r.network));
  return r;
}

} // namespace kiln
