#include "kiln/Runtime/HostManager.h"
#include "kiln/Backend/Compiler.h"
#include "kiln/Runtime/Executor.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <functional>
#include <iostream>
#include <limits>
#include <sstream>

namespace kiln {

std::string FallbackNode::toString() const {
  return "node '" + name + "' (" + kind + "): " + types;
}

std::string NetworkSplit::toString() const {
  std::ostringstream os;
  for (size_t i = 0; i < backends.size(); i++) {
    const BackendShare &b = backends[i];
    os << (i ? "; " : "") << b.backend << ": " << b.partitions
       << (b.partitions == 1 ? " partition, " : " partitions, ") << b.nodes
       << (b.nodes == 1 ? " node" : " nodes");
  }
  return os.str();
}

namespace {

/// "float<2x3>, i64<4> -> float<2x4>": a node's operand and result types.
std::string typesOf(const Node &n) {
  std::string s;
  for (unsigned i = 0; i < n.getNumInputs(); i++)
    s += (i ? ", " : "") + n.getNthInput(i).getType()->toString();
  s += " ->";
  for (unsigned r = 0; r < n.getNumResults(); r++)
    s += (r ? ", " : " ") + n.getType(r)->toString();
  return s;
}

/// Partitions and nodes per backend of \p plan, in the order of \p backends.
NetworkSplit splitOf(const PartitionPlan &plan, const std::vector<PartitionerBackend> &backends) {
  NetworkSplit split;
  for (const PartitionerBackend &b : backends) {
    BackendShare share;
    share.backend = b.backend->getName();
    for (const Partition &p : plan.partitions)
      if (p.backendName == share.backend) {
        share.partitions++;
        share.nodes += p.numNodes;
      }
    if (share.partitions)
      split.backends.push_back(std::move(share));
  }
  return split;
}

std::string joinNames(const std::vector<PartitionerBackend> &backends) {
  std::string s;
  for (const PartitionerBackend &b : backends)
    s += (s.empty() ? "" : ", ") + b.backend->getName();
  return s;
}

/// The warning for the nodes of network \p name that fell back from \p chosen.
std::string fallbackWarning(const std::string &name, const std::vector<PartitionerBackend> &chosen,
                            const NetworkSplit &split) {
  std::ostringstream w;
  size_t k = split.fallbackNodes.size();
  w << (chosen.size() == 1 ? "backend " : "backends ") << joinNames(chosen) << " cannot run " << k
    << (k == 1 ? " node" : " nodes") << " of network '" << name << "'; "
    << (k == 1 ? "it runs" : "they run") << " on " << split.fallbackBackend << " on the host ("
    << split.toString() << "):";
  for (const FallbackNode &n : split.fallbackNodes)
    w << "\n  " << n.toString();
  return w.str();
}

} // namespace

/// A network and the requests running it. Lifetime: requests pin it through inFlight
/// (under mu_), never through a reference count, so that it is always destroyed on the
/// thread that removes it: destroying it erases partition functions from a module the
/// caller may be using.
struct HostManager::Network {
  std::shared_ptr<ExecutableNetwork> exec;
  NetworkSplit split;
  bool ready = false;    ///< Loaded; runs are admitted.
  bool removing = false; ///< removeNetwork waits for inFlight to reach zero.
  size_t inFlight = 0;
  /// NetworkOptions::pipeline. Off: one request in the executor at a time (busy); the
  /// others wait in `waiting`, in order (both guarded by mu_).
  bool pipeline = true;
  bool busy = false;
  std::deque<std::function<void()>> waiting;
};

struct HostManager::Stream {
  std::mutex mu;
  uint64_t submitted = 0; ///< the sequence number of the next request of the stream
  uint64_t delivered = 0; ///< the sequence number whose callback comes next
  bool delivering = false; ///< a thread is calling callbacks (the others only queue)
  std::map<uint64_t, std::pair<ResultCallback, RunResult>> ready;
};

ResultCallback HostManager::inStreamOrder(uint64_t stream, ResultCallback cb) {
  std::shared_ptr<Stream> s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::weak_ptr<Stream> &w = streams_[stream];
    s = w.lock();
    if (!s) {
      s = std::make_shared<Stream>();
      w = s;
    }
    if (streams_.size() > 64) // forget the streams with nothing pending
      for (auto it = streams_.begin(); it != streams_.end();)
        it = it->second.expired() ? streams_.erase(it) : std::next(it);
  }
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    seq = s->submitted++;
  }
  // Called after the request was released: touches only the stream and the callbacks.
  return [s, seq, cb = std::move(cb)](RunResult r) mutable {
    std::unique_lock<std::mutex> lock(s->mu);
    s->ready.emplace(seq, std::make_pair(std::move(cb), std::move(r)));
    if (s->delivering)
      return; // the delivering thread will find it
    s->delivering = true;
    for (auto it = s->ready.find(s->delivered); it != s->ready.end();
         it = s->ready.find(s->delivered)) {
      std::pair<ResultCallback, RunResult> item = std::move(it->second);
      s->ready.erase(it);
      s->delivered++;
      lock.unlock();
      item.first(std::move(item.second));
      lock.lock();
    }
    s->delivering = false;
  };
}

HostManager::HostManager(const HostConfig &config)
    : config_(config), executor_(std::make_unique<Executor>()) {}

Expected<std::unique_ptr<HostManager>> HostManager::create(std::vector<DeviceConfig> devices,
                                                           const HostConfig &config) {
  if (devices.empty())
    return makeError(ErrorCode::InvalidArgument, "HostManager: no devices");
  std::unique_ptr<HostManager> hm(new HostManager(config));
  std::map<std::string, unsigned> perBackend;
  for (DeviceConfig &cfg : devices) {
    if (cfg.backendName.empty())
      return makeError(ErrorCode::InvalidArgument, "HostManager: a device config names no backend");
    if (!hm->backends_.count(cfg.backendName)) {
      KILN_ASSIGN_OR_RETURN(std::unique_ptr<Backend> b, createBackend(cfg.backendName));
      hm->backends_[cfg.backendName] = std::move(b);
      hm->backendOrder_.push_back(cfg.backendName);
    }
    unsigned index = perBackend[cfg.backendName]++;
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<DeviceManager> dm,
                          createDeviceManager(*hm->backends_[cfg.backendName], cfg, index));
    if (hm->getDevice(dm->getName()))
      return makeError(ErrorCode::InvalidArgument, "HostManager: two devices are named '",
                       dm->getName(), "'");
    if (Error e = dm->init())
      return std::move(e).addContext("starting device '" + dm->getName() + "'");
    hm->devices_.push_back(std::move(dm));
  }
  std::vector<DeviceManager *> raw;
  for (const auto &d : hm->devices_)
    raw.push_back(d.get());
  std::map<std::string, const Backend *> backends;
  for (const auto &b : hm->backends_)
    backends[b.first] = b.second.get();
  hm->provisioner_ = std::make_unique<Provisioner>(std::move(raw), std::move(backends));
  return hm;
}

HostManager::~HostManager() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait(lock, [&] { return active_ == 0; });
  }
  for (auto &kv : networks_)
    if (kv.second->exec)
      provisioner_->unprovision(kv.second->exec->loaded);
  // Join the workers before dropping networks: nothing on them may still hold a request.
  for (auto &d : devices_)
    d->stop();
  for (auto &d : fallbackDevices_)
    d->stop();
  networks_.clear();
}

DeviceManager *HostManager::getDevice(const std::string &name) const {
  for (const auto &d : devices_)
    if (d->getName() == name)
      return d.get();
  return nullptr;
}

const Backend *HostManager::getBackend(const std::string &backendName) const {
  auto it = backends_.find(backendName);
  return it == backends_.end() ? nullptr : it->second.get();
}

size_t HostManager::getActiveRequests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_;
}

Error HostManager::addNetwork(Function *f, const NetworkOptions &opts) {
  if (!f)
    return makeError(ErrorCode::InvalidArgument, "addNetwork: no function");
  std::lock_guard<std::mutex> ar(addRemoveMu_);
  return addNetworkImpl(f, nullptr, opts);
}

Error HostManager::addNetwork(std::unique_ptr<Module> module, const NetworkOptions &opts) {
  if (!module || module->getFunctions().empty())
    return makeError(ErrorCode::InvalidArgument, "addNetwork: the module has no functions");
  std::shared_ptr<Module> owner(std::move(module));
  std::vector<Function *> fns; // partitioning adds functions: iterate a copy
  for (const auto &f : owner->getFunctions())
    fns.push_back(f.get());
  std::lock_guard<std::mutex> ar(addRemoveMu_);
  std::vector<std::string> added;
  for (Function *f : fns) {
    if (Error e = addNetworkImpl(f, owner, opts)) {
      // All or nothing. No request can be running: the caller has not seen the names.
      for (const std::string &name : added) {
        std::shared_ptr<Network> net;
        {
          std::unique_lock<std::mutex> lock(mu_);
          auto it = networks_.find(name);
          net = it->second;
          net->removing = true;
          idle_.wait(lock, [&] { return net->inFlight == 0; });
          networks_.erase(it);
        }
        provisioner_->unprovision(net->exec->loaded);
      }
      return e;
    }
    added.push_back(f->getName());
  }
  return Error::success();
}

namespace {

/// What the Provisioner compiles a network's partitions with; \p withFallback: the last of
/// \p pbs is the fallback backend, which gets no backend parameters.
ProvisionOptions provisionOptions(const NetworkOptions &opts,
                                  const std::vector<PartitionerBackend> &pbs, bool withFallback,
                                  Tracer *tracer) {
  ProvisionOptions po;
  po.replicas = opts.replicas;
  po.compile = opts.compile;
  po.compile.tracer = tracer;
  // Backend parameters are for the backends the caller named, not for the fallback (the
  // last of \p pbs when there is one).
  if (!opts.optionBackends.empty())
    po.optionBackends = opts.optionBackends;
  else
    for (size_t i = 0; i + (withFallback ? 1 : 0) < pbs.size(); i++)
      po.optionBackends.push_back(pbs[i].backend->getName());
  return po;
}

} // namespace

Expected<std::vector<PartitionerBackend>>
HostManager::partitionerBackends(const NetworkOptions &opts, const std::string &name) const {
  std::vector<PartitionerBackend> pbs;
  for (const std::string &b : opts.backends.empty() ? backendOrder_ : opts.backends) {
    const Backend *backend = getBackend(b);
    if (!backend)
      return makeError(ErrorCode::NotFound, "no device runs backend '", b, "'");
    uint64_t mem = std::numeric_limits<uint64_t>::max();
    unsigned count = 0;
    for (const auto &d : devices_)
      if (d->getBackendName() == b) {
        mem = std::min(mem, d->getMaximumMemory());
        count++;
      }
    pbs.push_back(PartitionerBackend{backend, mem, count});
  }
  if (pbs.empty())
    return makeError(ErrorCode::NotFound, "no backend to place network '", name, "' on");
  return pbs;
}


Error HostManager::addNetworkImpl(Function *f, std::shared_ptr<Module> owner,
                                  const NetworkOptions &opts) {
  const std::string name = f->getName();
  auto ctx = [&](Error e) { return std::move(e).addContext("adding network '" + name + "'"); };
  std::shared_ptr<Tracer> trace = getTrace();
  Tracer *tracer = opts.compile.tracer ? opts.compile.tracer : trace.get();
  TraceScope add(tracer, "compile", "add network " + name);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (networks_.count(name))
      return makeError(ErrorCode::InvalidArgument, "adding network '", name,
                       "': a network of that name exists");
  }
  Expected<std::vector<PartitionerBackend>> backends = partitionerBackends(opts, name);
  if (!backends)
    return ctx(backends.takeError());
  std::vector<PartitionerBackend> pbs = std::move(backends).get();
  // Verified once here: by the compile driver's front half, or alone. Support is checked
  // below, over all the backends, so that what none of them runs can fall back.
  PrepareOptions prep;
  prep.checkSupport = false;
  prep.tracer = tracer;
  prep.afterPass = opts.compile.afterGraphPass;
  if (Error e = opts.prepare ? prepareFunction(f, *pbs.front().backend, prep) : f->verify())
    return ctx(std::move(e));
  std::vector<FallbackNode> fellBack;
  if (Error e = addFallback(f, opts, pbs, fellBack))
    return ctx(std::move(e));
  ProvisionOptions po = provisionOptions(opts, pbs, !fellBack.empty(), tracer);
  // The partitioner plans each partition as the Provisioner will compile it, and the
  // compile takes that plan over (Partition::prepared).
  for (PartitionerBackend &b : pbs)
    b.compileOptions = po.compileOptionsFor(b.backend->getName());
  TraceScope partition(tracer, "compile", "partition");
  Expected<PartitionPlan> plan =
      partitionFunction(f, name, pbs, opts.partition ? &*opts.partition : nullptr);
  if (!plan)
    return ctx(plan.takeError());
  partition.arg("partitions", int64_t(plan->partitions.size()));
  partition.end();
  NetworkSplit split = splitOf(*plan, pbs);
  if (!fellBack.empty()) {
    split.fallbackBackend = opts.fallbackBackend;
    split.fallbackNodes = std::move(fellBack);
  }
  std::shared_ptr<ExecutableNetwork> exec(
      new ExecutableNetwork{std::move(owner), std::move(plan).get(), {}, {}});
  Expected<std::vector<LoadedPartition>> loaded = provisioner_->provision(exec->plan, po);
  if (!loaded)
    return ctx(loaded.takeError()); // exec erases its partition functions here
  exec->loaded = std::move(loaded).get();
  exec->index();
  if (!split.fallbackNodes.empty()) { // one warning per network, once it is loaded
    std::string w = fallbackWarning(name, {pbs.begin(), pbs.end() - 1}, split);
    if (opts.onWarning)
      opts.onWarning(w);
    else
      std::cerr << "kiln: warning: " << w << std::endl;
  }
  auto net = std::make_shared<Network>();
  net->exec = std::move(exec);
  net->split = std::move(split);
  net->pipeline = opts.pipeline;
  net->ready = true;
  std::lock_guard<std::mutex> lock(mu_);
  networks_[name] = std::move(net);
  return Error::success();
}

Error HostManager::addFallback(const Function *f, const NetworkOptions &opts,
                               std::vector<PartitionerBackend> &backends,
                               std::vector<FallbackNode> &fellBack) {
  if (opts.partition) // a user partition names each node's backend; the partitioner checks
    return Error::success();
  std::vector<const Node *> orphans; // nodes none of the backends runs
  for (const auto &n : f->getNodes())
    if (std::none_of(backends.begin(), backends.end(),
                     [&](const PartitionerBackend &b) { return b.backend->isOpSupported(*n); }))
      orphans.push_back(n.get());
  if (orphans.empty())
    return Error::success();
  // Without a fallback, the error of old, every such node in one message: the support
  // check of the compile driver for one backend, the partitioner's for several.
  auto unsupported = [&]() -> Error {
    if (backends.size() > 1) {
      std::string list;
      for (const Node *n : orphans)
        list += (list.empty() ? "" : "; ") + n->describe();
      return makeError(ErrorCode::Unsupported, "partitioning '", f->getName(),
                       "': no backend among [", joinNames(backends), "] can run ", list);
    }
    Error e = backends.front().backend->checkAllNodesSupported(*f);
    if (opts.prepare)
      e = std::move(e).addContext("preparing function '" + f->getName() + "' for " +
                                  backends.front().backend->getName());
    return e;
  };
  bool listed = std::any_of(backends.begin(), backends.end(), [&](const PartitionerBackend &b) {
    return b.backend->getName() == opts.fallbackBackend;
  });
  if (opts.strictBackend || opts.fallbackBackend.empty() || listed)
    return unsupported();
  Expected<PartitionerBackend> fb = fallbackFor(opts.fallbackBackend);
  if (!fb) {
    Error e = unsupported();
    return makeError(e.code(), e.message(), "; and the fallback backend ", opts.fallbackBackend,
                     " is unavailable: ", fb.getError().message());
  }
  for (const Node *n : orphans)
    fellBack.push_back(FallbackNode{n->getName(), n->getKindName(), typesOf(*n)});
  backends.push_back(*fb);
  return Error::success();
}

Expected<PartitionerBackend> HostManager::fallbackFor(const std::string &backendName) {
  auto devicesOf = [](const Backend *b, const std::vector<std::shared_ptr<DeviceManager>> &devs) {
    PartitionerBackend pb{b, std::numeric_limits<uint64_t>::max(), 0};
    for (const auto &d : devs)
      if (d->getBackendName() == b->getName()) {
        pb.deviceMemory = std::min(pb.deviceMemory, d->getMaximumMemory());
        pb.numDevices++;
      }
    return pb;
  };
  if (const Backend *b = getBackend(backendName))
    return devicesOf(b, devices_);
  auto it = fallbackBackends_.find(backendName);
  if (it == fallbackBackends_.end()) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Backend> b, createBackend(backendName));
    DeviceConfig cfg;
    cfg.backendName = backendName;
    cfg.name = "host-" + backendName;
    for (char &c : cfg.name)
      c = char(std::tolower(static_cast<unsigned char>(c)));
    while (getDevice(cfg.name))
      cfg.name += "-fallback";
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<DeviceManager> dm, createDeviceManager(*b, cfg));
    if (Error e = dm->init())
      return std::move(e).addContext("starting device '" + dm->getName() + "'");
    provisioner_->addDevice(dm.get(), b.get());
    fallbackDevices_.push_back(std::move(dm));
    it = fallbackBackends_.emplace(backendName, std::move(b)).first;
  }
  return devicesOf(it->second.get(), fallbackDevices_);
}

Error HostManager::removeNetwork(const std::string &name) {
  std::lock_guard<std::mutex> ar(addRemoveMu_);
  std::shared_ptr<Network> net;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = networks_.find(name);
    if (it == networks_.end() || it->second->removing)
      return makeError(ErrorCode::NotFound, "removeNetwork: no network named '", name, "'");
    net = it->second;
    net->removing = true; // refuse new runs from now on
    idle_.wait(lock, [&] { return net->inFlight == 0; });
    networks_.erase(name);
  }
  provisioner_->unprovision(net->exec->loaded);
  return Error::success(); // net, the last reference, goes here, on this thread
}

bool HostManager::hasNetwork(const std::string &name) const {
  std::lock_guard<std::mutex> lock(mu_);
  return bool(findLocked(name));
}

std::vector<std::string> HostManager::getNetworkNames() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (const auto &kv : networks_)
    if (kv.second->ready && !kv.second->removing)
      names.push_back(kv.first);
  return names;
}

Expected<HostManager::Network *> HostManager::findLocked(const std::string &name) const {
  auto it = networks_.find(name);
  if (it == networks_.end() || !it->second->ready || it->second->removing) {
    std::string known;
    for (const auto &kv : networks_)
      if (kv.second->ready && !kv.second->removing)
        known += " " + kv.first;
    return makeError(ErrorCode::NotFound, "no network named '", name,
                     "'; loaded:", known.empty() ? " none" : known);
  }
  return it->second.get();
}

// Plans never change once a network is ready; reading them under mu_ keeps removal out.

Expected<std::string> HostManager::getPlanText(const std::string &name) const {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_ASSIGN_OR_RETURN(Network * net, findLocked(name));
  return net->exec->plan.toString();
}

Expected<std::string> HostManager::getPlanDot(const std::string &name) const {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_ASSIGN_OR_RETURN(Network * net, findLocked(name));
  return net->exec->plan.toDot();
}

Expected<size_t> HostManager::getNumPartitions(const std::string &name) const {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_ASSIGN_OR_RETURN(Network * net, findLocked(name));
  return net->exec->plan.partitions.size();
}

Expected<NetworkSplit> HostManager::getNetworkSplit(const std::string &name) const {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_ASSIGN_OR_RETURN(Network * net, findLocked(name));
  return net->split;
}

Expected<std::vector<StageTiming>> HostManager::getProfile(const std::string &name) const {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_ASSIGN_OR_RETURN(Network * net, findLocked(name));
  std::vector<StageTiming> out;
  for (const LoadedPartition &p : net->exec->loaded)
    for (StageTiming t : p.compiled->getProfile()) {
      if (net->exec->loaded.size() > 1)
        t.name = p.deviceKey + ": " + t.name;
      out.push_back(std::move(t));
    }
  return out;
}

Expected<uint64_t> HostManager::getCompiledConstantBytes(const std::string &name) const {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_ASSIGN_OR_RETURN(Network * net, findLocked(name));
  uint64_t bytes = 0;
  for (const LoadedPartition &p : net->exec->loaded)
    bytes += p.compiled->getConstantBytes();
  return bytes;
}

void HostManager::startTrace(const TraceOptions &opts) {
  auto t = std::make_shared<Tracer>(opts);
  std::lock_guard<std::mutex> lock(mu_);
  trace_ = std::move(t);
}

void HostManager::startTrace(std::shared_ptr<Tracer> trace) {
  std::lock_guard<std::mutex> lock(mu_);
  trace_ = std::move(trace);
}

std::shared_ptr<Tracer> HostManager::stopTrace() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::move(trace_);
}

std::shared_ptr<Tracer> HostManager::getTrace() const {
  std::lock_guard<std::mutex> lock(mu_);
  return trace_;
}

RunId HostManager::runNetwork(const std::string &name,
                              std::unique_ptr<PlaceholderBindings> bindings, ResultCallback cb,
                              const RunOptions &opts) {
  PlaceholderBindings *b = bindings.get();
  return submit(name, b, std::move(bindings), std::move(cb), opts);
}

namespace {
/// What a blocking run waits on. Shared, so the device thread that signals it never
/// touches the waiter's stack.
struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Error error = Error::success();
  RunReport report;
};

Deadline deadlineOf(const RunOptions &opts) {
  return opts.timeout.count() > 0 ? Clock::now() + opts.timeout : kNoDeadline;
}
} // namespace

Error HostManager::runNetworkBlocking(const std::string &name, PlaceholderBindings &bindings,
                                      const RunOptions &opts, RunReport *report) {
  RunId id;
  std::shared_ptr<Tracer> trace;
  Expected<Network *> admitted = admit(name, id, &trace);
  if (!admitted) {
    if (report)
      *report = RunReport{};
    return admitted.takeError();
  }
  Network *net = *admitted;
  Deadline deadline = deadlineOf(opts);
  // The caller waits anyway: where the device is idle, run on this thread and spare the
  // two thread hand-offs (to the device's worker and back), which cost more than a small
  // network's whole run.
  int64_t traceStart = trace ? trace->nowNs() : 0;
  std::optional<Error> e;
  if (net->pipeline) // otherwise the request may have to wait its turn: dispatch knows
    e = executor_->tryRunOnCaller(*net->exec, bindings, deadline, report, trace.get());
  if (e) {
    if (trace) // the request's event on the host, from admission to its result
      trace->complete(Tracer::kHostPid, "runtime", "run " + name, traceStart, trace->nowNs(),
                      {{"request", std::to_string(id), true}});
    release(net);
    return std::move(*e);
  }
  // Otherwise dispatch records the request.
  auto w = std::make_shared<Waiter>();
  dispatch(net, id, &bindings, nullptr,
           [w](RunResult r) {
             {
               std::lock_guard<std::mutex> lock(w->mu);
               w->error = std::move(r.error);
               w->report = std::move(r.report);
               w->done = true;
             }
             // After unlocking, so the waiter does not wake into a held lock; this
             // callback's copy of w keeps the condition variable alive meanwhile.
             w->cv.notify_all();
           },
           deadline, trace);
  std::unique_lock<std::mutex> lock(w->mu);
  w->cv.wait(lock, [&] { return w->done; });
  if (report)
    *report = std::move(w->report);
  return std::move(w->error);
}

Expected<HostManager::Network *> HostManager::admit(const std::string &name, RunId &id,
                                                    std::shared_ptr<Tracer> *trace) {
  std::lock_guard<std::mutex> lock(mu_);
  id = nextId_++;
  if (trace && trace_)
    *trace = trace_;
  Expected<Network *> found = findLocked(name);
  if (!found)
    return found.takeError().addContext("run");
  if (active_ >= config_.maxActiveRequests)
    return makeError(ErrorCode::QueueFull, "run of '", name, "' refused: ", active_,
                     " requests are in flight, the limit is ", config_.maxActiveRequests);
  Network *net = *found;
  net->inFlight++;
  active_++;
  return net;
}

void HostManager::release(Network *net) {
  // After this the network may be removed and this HostManager destroyed: notify under
  // the lock, so the waiter cannot free idle_ first.
  std::lock_guard<std::mutex> lock(mu_);
  net->inFlight--;
  active_--;
  idle_.notify_all();
}

RunId HostManager::submit(const std::string &name, PlaceholderBindings *bindings,
                          std::unique_ptr<PlaceholderBindings> owned, ResultCallback cb,
                          const RunOptions &opts) {
  if (opts.stream)
    cb = inStreamOrder(opts.stream, std::move(cb));
  RunId id;
  std::shared_ptr<Tracer> trace;
  Expected<Network *> admitted = admit(name, id, &trace);
  if (!admitted) {
    RunResult r;
    r.id = id;
    r.error = admitted.takeError();
    r.bindings = std::move(owned);
    cb(std::move(r));
    return id;
  }
  dispatch(*admitted, id, bindings, std::move(owned), std::move(cb), deadlineOf(opts),
           std::move(trace));
  return id;
}

void HostManager::dispatch(Network *net, RunId id, PlaceholderBindings *bindings,
                           std::unique_ptr<PlaceholderBindings> owned, ResultCallback cb,
                           Deadline deadline, std::shared_ptr<Tracer> trace) {
  // std::function needs a copyable callable: the owned bindings ride in a shared box.
  auto box = std::make_shared<std::pair<std::unique_ptr<PlaceholderBindings>, ResultCallback>>(
      std::move(owned), std::move(cb));
  int64_t traceStart = trace ? trace->nowNs() : 0;
  std::string traceName = trace ? "run " + net->exec->plan.networkName : std::string();
  auto launch = [this, net, id, bindings, deadline, box, trace, traceStart, traceName] {
    executor_->run(net->exec.get(), bindings, deadline, [this, net, id, box, trace, traceStart,
                                                         traceName](Error e, RunReport rep) {
      if (trace) // the request, from admission to its result, on the host
        trace->complete(Tracer::kHostPid, "runtime", traceName, traceStart, trace->nowNs(),
                        {{"request", std::to_string(id), true}});
      if (!net->pipeline) { // hand the network to the next request waiting for it
        std::function<void()> next;
        {
          std::lock_guard<std::mutex> lock(mu_);
          if (net->waiting.empty()) {
            net->busy = false;
          } else {
            next = std::move(net->waiting.front());
            net->waiting.pop_front();
          }
        }
        if (next) // admitted, so this HostManager and the network stay until it ends
          next();
      }
      release(net); // touch neither net nor this below
      RunResult r;
      r.id = id;
      r.error = std::move(e);
      r.bindings = std::move(box->first);
      r.report = std::move(rep);
      ResultCallback cb = std::move(box->second);
      cb(std::move(r));
    }, trace.get());
  };
  if (!net->pipeline) {
    std::lock_guard<std::mutex> lock(mu_);
    if (net->busy) {
      net->waiting.push_back(std::move(launch));
      return;
    }
    net->busy = true;
  }
  launch();
}

} // namespace kiln
