#include "kiln/Runtime/DeviceManager.h"
#include "kiln/Base/Trace.h"

#include <cctype>

namespace kiln {

DeviceManager::DeviceManager(DeviceConfig config) : config_(std::move(config)) {}

DeviceManager::~DeviceManager() { stop(); }

Error DeviceManager::init() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_ || stopping_)
      return makeError(ErrorCode::InvalidArgument, "device '", getName(),
                       started_ ? "' is already started" : "' was stopped");
  }
  KILN_RETURN_IF_ERR(initImpl());
  std::lock_guard<std::mutex> lock(mu_);
  if (started_)
    return makeError(ErrorCode::InvalidArgument, "device '", getName(), "' is already started");
  if (stopping_)
    return makeError(ErrorCode::InvalidArgument, "device '", getName(), "' was stopped");
  started_ = true;
  worker_ = std::thread([this] { workerLoop(); });
  return Error::success();
}

void DeviceManager::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable())
    worker_.join();
  // Without a worker (never started) nobody else drains the queue.
  std::deque<RunRequest> left;
  {
    std::unique_lock<std::mutex> lock(mu_);
    // A run on a caller's thread uses the hooks too: the device stops after it.
    cv_.wait(lock, [&] { return !busy_; });
    left.swap(queue_);
  }
  for (RunRequest &r : left) {
    pending_--;
    completed_++;
    r.cb(makeError(ErrorCode::Runtime, "device '", getName(), "' stopped before running '", r.name,
                   "'"),
         DeviceRunStats{});
  }
}

Error DeviceManager::addNetwork(const std::string &name, CompiledFunction *fn, uint64_t bytes) {
  if (!fn)
    return makeError(ErrorCode::InvalidArgument, "device '", getName(), "': network '", name,
                     "' has no compiled function");
  if (fn->getBackendName() != getBackendName())
    return makeError(ErrorCode::InvalidArgument, "device '", getName(), "' runs ", getBackendName(),
                     " code but network '", name, "' was compiled for ", fn->getBackendName());
  {
    // Reserve first, so concurrent loads never overcommit; undo if the hook refuses.
    std::lock_guard<std::mutex> lock(mu_);
    if (networks_.count(name))
      return makeError(ErrorCode::InvalidArgument, "device '", getName(), "' already holds '", name,
                       "'");
    uint64_t avail = getMaximumMemory() - usedMemory_;
    if (bytes > avail)
      return makeError(ErrorCode::OutOfMemory, "device '", getName(), "' (", getBackendName(),
                       ") is out of memory: '", name, "' needs ", bytes, " bytes but only ", avail,
                       " of ", getMaximumMemory(), " are free");
    usedMemory_ += bytes;
    networks_[name] = Loaded{nullptr, bytes}; // not runnable until the hook succeeds
  }
  Error e = loadNetworkImpl(name, *fn, bytes);
  std::lock_guard<std::mutex> lock(mu_);
  if (e) {
    usedMemory_ -= bytes;
    networks_.erase(name);
    return std::move(e).addContext("loading '" + name + "' on device '" + getName() + "'");
  }
  networks_[name].fn = fn;
  return Error::success();
}

Error DeviceManager::evictNetwork(const std::string &name) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = networks_.find(name);
    if (it == networks_.end() || !it->second.fn)
      return makeError(ErrorCode::NotFound, "device '", getName(), "' holds no network '", name,
                       "'");
    usedMemory_ -= it->second.bytes;
    networks_.erase(it);
  }
  evictNetworkImpl(name);
  return Error::success();
}

bool DeviceManager::hasNetwork(const std::string &name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = networks_.find(name);
  return it != networks_.end() && it->second.fn;
}

uint64_t DeviceManager::getUsedMemory() const {
  std::lock_guard<std::mutex> lock(mu_);
  return usedMemory_;
}

void DeviceManager::runFunction(const std::string &name, ExecutionContext *ctx, RunCallback cb,
                                Deadline deadline) {
  pending_++;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (started_ && !stopping_) {
      Tracer *t = ctx ? ctx->getTracer() : nullptr;
      queue_.push_back(RunRequest{name, ctx, std::move(cb), deadline, t ? t->nowNs() : 0});
      // Wake the worker after unlocking, or it wakes only to wait for this lock.
      lock.unlock();
      cv_.notify_one(); // stop() cannot be waiting yet: stopping_ was false
      return;
    }
  }
  pending_--;
  completed_++;
  cb(makeError(ErrorCode::Runtime, "device '", getName(), "' is not running; cannot run '", name,
               "'"),
     DeviceRunStats{});
}

std::optional<Error> DeviceManager::tryRunOnCaller(const std::string &name,
                                                   ExecutionContext &ctx, Deadline deadline,
                                                   DeviceRunStats &stats) {
  if (!runsOnCaller())
    return std::nullopt;
  CompiledFunction *fn = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Queued runs go first, and one run at a time, as if this one had been queued.
    if (!started_ || stopping_ || busy_ || !queue_.empty())
      return std::nullopt;
    busy_ = true;
    auto it = networks_.find(name);
    if (it != networks_.end())
      fn = it->second.fn;
  }
  pending_++;
  Error err = runLoaded(name, fn, ctx, deadline, stats);
  std::lock_guard<std::mutex> lock(mu_);
  busy_ = false;
  // The worker (runs queued meanwhile) or stop() may wait for this run to end. Without
  // waiters a notify costs no system call.
  if (!queue_.empty() || stopping_)
    cv_.notify_all();
  return err;
}

void DeviceManager::workerLoop() {
  for (;;) {
    RunRequest r;
    CompiledFunction *fn = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || (!queue_.empty() && !busy_); });
      if (stopping_)
        return; // stop() fails whatever is still queued
      r = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      auto it = networks_.find(r.name);
      if (it != networks_.end())
        fn = it->second.fn;
    }
    execute(r, fn);
  }
}

void DeviceManager::execute(RunRequest &r, CompiledFunction *fn) {
  if (Tracer *t = r.ctx ? r.ctx->getTracer() : nullptr) // its wait for this device
    t->async(t->process(getName()), "queue", r.name, r.queuedNs, t->nowNs());
  DeviceRunStats stats;
  Error err = runLoaded(r.name, fn, *r.ctx, r.deadline, stats);
  {
    // The device is free before the callback, which may start the next run.
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
  }
  RunCallback cb = std::move(r.cb);
  cb(std::move(err), stats);
}

Error DeviceManager::runLoaded(const std::string &name, CompiledFunction *fn,
                               ExecutionContext &ctx, Deadline deadline, DeviceRunStats &stats) {
  Error err = Error::success();
  // Traced runs: one "partition" event on this device's process, around the kernels'.
  Tracer *tracer = ctx.getTracer();
  uint32_t pid = 0;
  int64_t traceStart = 0;
  if (tracer) {
    pid = tracer->process(getName());
    tracer->thread(pid, std::this_thread::get_id() == worker_.get_id() ? "worker" : "caller");
    ctx.setTracer(tracer, pid);
    traceStart = tracer->nowNs();
  }
  auto start = Clock::now();
  if (!fn)
    err = makeError(ErrorCode::NotFound, "device '", getName(), "' holds no network '", name, "'");
  else if (start > deadline)
    err = makeError(ErrorCode::Runtime, "deadline exceeded before '", name,
                    "' started on device '", getName(), "'");
  // Runs on the device's worker thread too, where an exception would end the process.
  else if (Error e = guardHostMemory("", [&] { return runImpl(name, *fn, ctx, stats); }))
    err = std::move(e).addContext("running '" + name + "' on device '" + getName() + "'");
  auto end = Clock::now();
  if (tracer)
    tracer->complete(pid, "partition", name, traceStart, tracer->nowNs(),
                     {{"device", getName()}, {"backend", getBackendName()},
                      {"ok", err ? "0" : "1", true}});
  stats.seconds = std::chrono::duration<double>(end - start).count();
  if (!err && fn && end > deadline)
    err = makeError(ErrorCode::Runtime, "deadline exceeded: '", name, "' on device '", getName(),
                    "' finished ",
                    std::chrono::duration_cast<std::chrono::milliseconds>(end - deadline).count(),
                    " ms late");
  // Count the run as done before the caller hears of it: its callback may free the request.
  pending_--;
  completed_++;
  return err;
}

Error DeviceManager::loadNetworkImpl(const std::string &, CompiledFunction &, uint64_t) {
  return Error::success();
}

void DeviceManager::evictNetworkImpl(const std::string &) {}

Error DeviceManager::runImpl(const std::string &, CompiledFunction &fn, ExecutionContext &ctx,
                             DeviceRunStats &) {
  return fn.execute(ctx);
}

Expected<std::shared_ptr<DeviceManager>> createDeviceManager(const Backend &backend,
                                                             DeviceConfig config, unsigned index) {
  if (config.backendName.empty())
    config.backendName = backend.getName();
  if (config.backendName != backend.getName())
    return makeError(ErrorCode::InvalidArgument, "device config names backend '",
                     config.backendName, "' but was given backend '", backend.getName(), "'");
  if (config.name.empty()) {
    config.name = config.backendName + std::to_string(index);
    for (char &c : config.name)
      c = char(std::tolower(static_cast<unsigned char>(c)));
  }
  std::shared_ptr<DeviceManager> dm = backend.createDeviceManager(config);
  if (dm)
    return dm;
  if (config.memoryBytes == 0)
    config.memoryBytes = kDefaultHostDeviceMemory;
  return std::make_shared<HostDeviceManager>(std::move(config));
}

} // namespace kiln
