#include "kiln/Runtime/Executor.h"
#include "kiln/Base/Trace.h"

#include <mutex>
#include <sstream>

namespace kiln {

void ExecutableNetwork::index() {
  consumers.clear();
  for (const Placeholder *ph : plan.intermediates)
    consumers[ph] = 0;
  for (const Partition &p : plan.partitions)
    for (const Placeholder *ph : p.inputs)
      if (consumers.count(ph))
        consumers[ph]++;
}

uint64_t RunReport::totalCycles() const {
  uint64_t c = 0;
  for (const auto &p : partitions)
    c += p.stats.cycles;
  return c;
}

uint64_t RunReport::totalDmaBytes() const {
  uint64_t b = 0;
  for (const auto &p : partitions)
    b += p.stats.dmaBytes;
  return b;
}

std::string RunReport::toString() const {
  std::ostringstream os;
  for (const auto &p : partitions)
    os << p.partition << " on " << p.device << ": " << p.stats.cycles << " cycles, "
       << p.stats.dmaBytes << " DMA bytes, " << p.stats.seconds * 1e3 << " ms\n";
  os << "total: " << totalCycles() << " cycles, " << totalDmaBytes() << " DMA bytes, "
     << seconds * 1e3 << " ms\n";
  return os.str();
}

/// The state of one request. Guarded by mu, except the fields set before the first
/// partition starts.
struct Executor::Request {
  const ExecutableNetwork *net = nullptr;
  PlaceholderBindings *user = nullptr;
  Deadline deadline = kNoDeadline;
  DoneCallback done;
  Clock::time_point start;
  Tracer *trace = nullptr;

  std::mutex mu;
  std::vector<unsigned> parentsLeft;
  /// Intermediate values of this request, and how many partitions still have to read them.
  std::unordered_map<const Placeholder *, std::unique_ptr<Tensor>> values;
  std::unordered_map<const Placeholder *, unsigned> readersLeft;
  /// Per partition, while it runs: its bindings (views) and context.
  std::vector<std::unique_ptr<PlaceholderBindings>> bindings;
  std::vector<std::unique_ptr<ExecutionContext>> contexts;
  unsigned inFlight = 0, succeeded = 0;
  Error error = Error::success();
  RunReport report;
  bool finished = false;

  /// Binds partition \p p's placeholders (allocating the intermediates it produces) and
  /// counts it in flight. Call with mu held.
  ExecutionContext *prepare(unsigned p) {
    const Partition &part = net->plan.partitions[p];
    inFlight++;
    if (!readsOrWritesIntermediates(part)) {
      // Every tensor it touches is the caller's: run on the caller's bindings as they are.
      contexts[p] = std::make_unique<ExecutionContext>(user);
      contexts[p]->setTracer(trace, 0); // the device names its process
      return contexts[p].get();
    }
    auto b = std::make_unique<PlaceholderBindings>();
    auto bind = [&](const Placeholder *ph, Tensor *t) {
      b->insert(ph, Tensor::view(t->getType(), t->getUnsafePtr()));
    };
    for (const Placeholder *ph : part.outputs) {
      auto c = net->consumers.find(ph);
      if (c == net->consumers.end()) {
        bind(ph, user->get(ph));
        continue;
      }
      auto &t = values[ph];
      t = std::make_unique<Tensor>(*ph->getType());
      readersLeft[ph] = c->second;
      bind(ph, t.get());
    }
    for (const Placeholder *ph : part.inputs) {
      auto v = values.find(ph);
      int64_t t0 = trace ? trace->nowNs() : 0;
      bind(ph, v != values.end() ? v->second.get() : user->get(ph));
      if (trace && v != values.end()) // a value another partition made, handed over
        trace->complete(Tracer::kHostPid, "transfer", ph->getName(), t0, trace->nowNs(),
                        {{"bytes", std::to_string(ph->getType()->sizeInBytes()), true},
                         {"to", part.name}});
    }
    bindings[p] = std::move(b);
    contexts[p] = std::make_unique<ExecutionContext>(bindings[p].get());
    contexts[p]->setTracer(trace, 0);
    return contexts[p].get();
  }

  bool readsOrWritesIntermediates(const Partition &part) const {
    if (net->consumers.empty())
      return false;
    for (const auto *list : {&part.inputs, &part.outputs})
      for (const Placeholder *ph : *list)
        if (net->consumers.count(ph))
          return true;
    return false;
  }
};

namespace {
/// "[2, 3, 4]".
std::string shapeText(const Type &t) {
  std::string s = "[";
  for (size_t i = 0; i < t.dims.size(); i++)
    s += (i ? ", " : "") + std::to_string(t.dims[i]);
  return s + "]";
}
} // namespace

Error Executor::checkBindings(const ExecutableNetwork &net, const PlaceholderBindings &b) {
  for (const auto *list : {&net.plan.inputs, &net.plan.outputs})
    for (const Placeholder *ph : *list) {
      const char *role = list == &net.plan.inputs ? "input" : "output";
      const Tensor *t = b.get(ph);
      const Type &want = *ph->getType();
      if (!t)
        return makeError(ErrorCode::InvalidArgument, role, " '", ph->getName(), "' of type ",
                         want.toString(), " is not bound to a tensor");
      const Type &got = t->getType();
      if (got == want)
        continue;
      if (got.dims != want.dims)
        return makeError(ErrorCode::InvalidArgument, role, " '", ph->getName(),
                         "' expects shape ", shapeText(want), " (", want.toString(),
                         ") but is bound to a tensor of shape ", shapeText(got), " (",
                         got.toString(), ")");
      return makeError(ErrorCode::InvalidArgument, role, " '", ph->getName(),
                       "' expects a tensor of type ", want.toString(), " but is bound to ",
                       got.toString());
    }
  return Error::success();
}

DeviceManager *Executor::pickDevice(const LoadedPartition &lp) {
  size_t n = lp.devices.size();
  if (n == 1)
    return lp.devices[0];
  // The least busy replica; ties rotate so equal devices share the load.
  size_t first = size_t(roundRobin_++ % n);
  DeviceManager *best = nullptr;
  size_t bestLoad = 0;
  for (size_t k = 0; k < n; k++) {
    DeviceManager *d = lp.devices[(first + k) % n];
    size_t load = d->getPendingRuns();
    if (!best || load < bestLoad) {
      best = d;
      bestLoad = load;
    }
  }
  return best;
}

void Executor::run(const ExecutableNetwork *net, PlaceholderBindings *bindings, Deadline deadline,
                   DoneCallback done, Tracer *trace) {
  if (!bindings) {
    done(makeError(ErrorCode::InvalidArgument, "run: no placeholder bindings"), RunReport{});
    return;
  }
  if (Error e = checkBindings(*net, *bindings)) {
    done(std::move(e), RunReport{});
    return;
  }
  auto r = std::make_shared<Request>();
  size_t n = net->plan.partitions.size();
  r->net = net;
  r->user = bindings;
  r->deadline = deadline;
  r->done = std::move(done);
  r->start = Clock::now();
  r->trace = trace;
  r->bindings.resize(n);
  r->contexts.resize(n);
  std::vector<unsigned> roots;
  {
    std::lock_guard<std::mutex> lock(r->mu);
    for (unsigned p = 0; p < n; p++) {
      r->parentsLeft.push_back(unsigned(r->net->plan.partitions[p].parents.size()));
      if (r->parentsLeft.back() == 0) {
        r->prepare(p);
        roots.push_back(p);
      }
    }
  }
  for (unsigned p : roots)
    launch(r, p);
}

std::optional<Error> Executor::tryRunOnCaller(const ExecutableNetwork &net,
                                              PlaceholderBindings &bindings, Deadline deadline,
                                              RunReport *report, Tracer *trace) {
  if (net.plan.partitions.size() != 1 || !net.plan.intermediates.empty())
    return std::nullopt;
  if (Error e = checkBindings(net, bindings)) {
    if (report)
      *report = RunReport{};
    return std::optional<Error>(std::move(e));
  }
  const Partition &part = net.plan.partitions[0];
  const LoadedPartition &lp = net.loaded[0];
  size_t n = lp.devices.size();
  // Replicas take turns, as pickDevice's ties do; a busy one passes to the next.
  size_t first = n == 1 ? 0 : size_t(roundRobin_++ % n);
  Clock::time_point start = report ? Clock::now() : Clock::time_point();
  // A single partition reads and writes only the caller's tensors: no views needed.
  ExecutionContext ctx(&bindings);
  ctx.setTracer(trace, 0);
  for (size_t k = 0; k < n; k++) {
    DeviceManager *d = lp.devices[(first + k) % n];
    DeviceRunStats stats;
    std::optional<Error> e = d->tryRunOnCaller(lp.deviceKey, ctx, deadline, stats);
    if (!e)
      continue;
    if (report) {
      *report = RunReport{};
      report->partitions.push_back(PartitionRunReport{part.name, d->getName(), stats});
      report->seconds = std::chrono::duration<double>(Clock::now() - start).count();
    }
    if (*e)
      return std::optional<Error>(std::move(*e).addContext(
          "network '" + net.plan.networkName + "', partition '" + part.name + "'"));
    return e;
  }
  return std::nullopt;
}

void Executor::launch(const std::shared_ptr<Request> &r, unsigned p) {
  const LoadedPartition &lp = r->net->loaded[p];
  DeviceManager *d = pickDevice(lp);
  ExecutionContext *ctx;
  {
    std::lock_guard<std::mutex> lock(r->mu);
    ctx = r->contexts[p].get();
  }
  d->runFunction(
      lp.deviceKey, ctx,
      [this, r, p, d](Error e, const DeviceRunStats &stats) {
        finished(r, p, d, std::move(e), stats);
      },
      r->deadline);
}

void Executor::finished(const std::shared_ptr<Request> &r, unsigned p, DeviceManager *d, Error e,
                        const DeviceRunStats &stats) {
  std::vector<unsigned> next;
  bool done = false;
  {
    std::lock_guard<std::mutex> lock(r->mu);
    const Partition &part = r->net->plan.partitions[p];
    r->inFlight--;
    r->report.partitions.push_back(PartitionRunReport{part.name, d->getName(), stats});
    r->contexts[p].reset();
    r->bindings[p].reset();
    for (const Placeholder *ph : part.inputs) {
      auto it = r->readersLeft.find(ph);
      if (it != r->readersLeft.end() && --it->second == 0)
        r->values.erase(ph);
    }
    if (e) {
      if (!r->error)
        r->error = std::move(e).addContext("network '" + r->net->plan.networkName +
                                           "', partition '" + part.name + "'");
    } else if (!r->error) {
      r->succeeded++;
      for (unsigned c : part.children)
        if (--r->parentsLeft[c] == 0) {
          r->prepare(c);
          next.push_back(c);
        }
    }
    if (r->inFlight == 0 && !r->finished &&
        (r->error || r->succeeded == r->net->plan.partitions.size())) {
      r->finished = true;
      r->values.clear();
      r->report.seconds = std::chrono::duration<double>(Clock::now() - r->start).count();
      done = true;
    }
  }
  for (unsigned c : next)
    launch(r, c);
  if (done) {
    // Nothing of this request runs any more; hand everything back.
    DoneCallback cb = std::move(r->done);
    Error err = std::move(r->error);
    RunReport report = std::move(r->report);
    cb(std::move(err), std::move(report));
  }
}

} // namespace kiln
