// The runtime's fixed cost per run: a tiny network (x[1,64] -> FullyConnected 64 -> Relu)
// run many times three ways on each backend:
//   execute   CompiledFunction::execute called directly: the floor, no runtime at all;
//   blocking  ExecutionEngine::run (HostManager::runNetworkBlocking): on an idle host
//             device it runs on the caller's thread;
//   queued    HostManager::runNetwork and a wait for its callback: the hand-off to the
//             device's worker thread and back that every asynchronous request pays.
// Prints the median and minimum microseconds per run over batches.
//
//   bazel run -c opt //test/runtime:run_overhead_bench -- [--runs 2000] [--batches 15]
#include "kiln/Backend/Backend.h"
#include "kiln/Passes/Pipeline.h"
#include "kiln/Runtime/HostManager.h"
#include "kiln/kiln.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>

namespace {

using namespace kiln;

struct Figures {
  double median = 0, min = 0;
};

/// Microseconds per call of \p fn: median and minimum over \p batches of \p runs calls.
Figures measure(unsigned batches, unsigned runs, const std::function<void()> &fn) {
  for (unsigned i = 0; i < runs / 10 + 1; i++)
    fn(); // warm caches, arenas, the worker
  std::vector<double> perRun;
  for (unsigned b = 0; b < batches; b++) {
    auto t0 = std::chrono::steady_clock::now();
    for (unsigned i = 0; i < runs; i++)
      fn();
    double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    perRun.push_back(us / runs);
  }
  std::sort(perRun.begin(), perRun.end());
  return Figures{perRun[perRun.size() / 2], perRun.front()};
}

Function *build(Module &m, Placeholder *&x) {
  Function *f = m.createFunction("tiny");
  x = m.createPlaceholder(ElemKind::Float, {1, 64}, "x");
  auto *fc = f->createFullyConnected("fc", x, 64, 7);
  f->createSave("y", f->createRelu("relu", fc));
  return f;
}

int benchBackend(const std::string &backendName, unsigned batches, unsigned runs) {
  CompileOptions co;
  co.threads = 1;
  // The floor: the backend's compiled code without the runtime.
  Module direct;
  Placeholder *dx = nullptr;
  Function *df = build(direct, dx);
  auto backend = createBackend(backendName);
  if (!backend) {
    std::fprintf(stderr, "%s: %s\n", backendName.c_str(), backend.getError().message().c_str());
    return 1;
  }
  if (Error e = optimizeFunction(df, *backend.get())) {
    std::fprintf(stderr, "%s\n", e.message().c_str());
    return 1;
  }
  auto cf = backend.get()->compile(df, co);
  if (!cf) {
    std::fprintf(stderr, "%s\n", cf.getError().message().c_str());
    return 1;
  }
  PlaceholderBindings db;
  db.allocate(direct.getPlaceholders());
  ExecutionContext ctx(&db);
  Figures exec = measure(batches, runs, [&] {
    if (Error e = cf.get()->execute(ctx))
      std::abort();
  });

  ExecutionEngine ee(backendName);
  Placeholder *x = nullptr;
  build(ee.getModule(), x);
  if (Error e = ee.compile(co)) {
    std::fprintf(stderr, "%s\n", e.message().c_str());
    return 1;
  }
  auto bindings = std::make_unique<PlaceholderBindings>();
  bindings->allocate(ee.getModule().getPlaceholders());
  Figures blocking = measure(batches, runs, [&] {
    if (Error e = ee.run(*bindings))
      std::abort();
  });

  HostManager &hm = *ee.getHostManager();
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Figures queued = measure(batches, runs, [&] {
    done = false;
    hm.runNetwork("tiny", std::move(bindings), [&](RunResult r) {
      if (r.error)
        std::abort();
      {
        std::lock_guard<std::mutex> lock(mu);
        bindings = std::move(r.bindings);
        done = true;
      }
      cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  });

  auto row = [&](const char *how, const Figures &f) {
    std::printf("%-12s %-9s %9.2f %9.2f %12.2f\n", backendName.c_str(), how, f.median, f.min,
                f.median - exec.median);
  };
  row("execute", exec);
  row("blocking", blocking);
  row("queued", queued);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  unsigned runs = 2000, batches = 15;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--runs"))
      runs = unsigned(std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--batches"))
      batches = unsigned(std::atoi(argv[i + 1]));
  }
  if (!runs || !batches) {
    std::fprintf(stderr, "usage: run_overhead_bench [--runs N] [--batches N]\n");
    return 2;
  }
  std::printf("%-12s %-9s %9s %9s %12s\n", "backend", "path", "median_us", "min_us",
              "over_exec_us");
  int rc = 0;
  for (const char *b : {"Interpreter", "CPU"})
    rc |= benchBackend(b, batches, runs);
  return rc;
}
