// Throughput of a stream of requests through a network split over several Sim devices,
// with pipelining (a request enters the first partition while earlier ones are in later
// ones) and without (one request in the devices at a time), against the slowest
// partition's bound. The Sim runs in realtime mode (a run lasts at least its simulated
// time), so the figures are the simulated chip's, as long as the host computes each
// partition faster than the chip would (the bench prints both times per partition).
//
//   bazel run -c opt //test/runtime:pipeline_bench -- --model M.onnx [--devices 4]
//       [--device-memory BYTES (default: a third of the network's)] [--requests 200]
//       [--clock-mhz 1000]
#include "kiln/Importer/ONNX.h"
#include "kiln/Passes/Pipeline.h"
#include "kiln/Runtime/MultiDevice.h"
#include "kiln/Runtime/Partitioner.h"
#include "kiln/kiln.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

namespace {

using namespace kiln;

struct Args {
  std::string model;
  unsigned devices = 4, requests = 200;
  uint64_t deviceMemory = 0;
  std::string clockMHz = "1000";
};

bool parse(int argc, char **argv, Args &a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--model")
      a.model = v;
    else if (k == "--devices")
      a.devices = unsigned(std::atoi(v.c_str()));
    else if (k == "--requests")
      a.requests = unsigned(std::atoi(v.c_str()));
    else if (k == "--device-memory")
      a.deviceMemory = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--clock-mhz")
      a.clockMHz = v;
    else
      return false;
  }
  return !a.model.empty() && argc % 2 == 1 && a.devices && a.requests;
}

struct Outcome {
  double seconds = 0;
  unsigned failed = 0;
  /// Per partition: median seconds of its runs (simulated time or host time, the larger).
  std::map<std::string, double> stageSeconds;
  /// Per partition: median simulated seconds (cycles at the clock).
  std::map<std::string, double> stageSimulated;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

Expected<Outcome> stream(const Args &a, bool pipeline) {
  Module m;
  Function *f = m.createFunction("net");
  KILN_ASSIGN_OR_RETURN(ONNXModel model, loadONNX(a.model, f));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Backend> sim, createBackend("Sim"));
  KILN_RETURN_IF_ERR(optimizeFunction(f, *sim));
  MultiDeviceOptions o;
  o.devices = a.devices;
  o.deviceMemory = a.deviceMemory ? a.deviceMemory : estimateMemory(*f) / 3;
  o.deviceParameters = {{"realtime", "1"}, {"clock_mhz", a.clockMHz}};
  o.fallbacks = {"Interpreter"};
  o.optimize = false;
  o.host.maxActiveRequests = a.requests;
  o.pipeline = pipeline;
  KILN_ASSIGN_OR_RETURN(MultiDeviceNetwork md, createMultiDeviceNetwork(f, o));
  if (pipeline)
    std::printf("%zu partitions over %u Sim devices of %llu bytes\n%s", md.numPartitions,
                a.devices, (unsigned long long)o.deviceMemory, md.planText.c_str());
  std::vector<std::unique_ptr<PlaceholderBindings>> inputs;
  std::mutex mu;
  std::condition_variable cv;
  unsigned done = 0;
  Outcome out;
  std::map<std::string, std::vector<double>> seconds, simulated;
  double hz = std::atof(a.clockMHz.c_str()) * 1e6;
  auto t0 = std::chrono::steady_clock::now();
  for (unsigned i = 0; i < a.requests; i++) {
    auto b = std::make_unique<PlaceholderBindings>();
    for (const std::string &name : model.inputNames) {
      Placeholder *ph = model.getInput(name);
      Tensor t(*ph->getType());
      t.zero();
      b->insert(ph, std::move(t));
    }
    for (const std::string &name : model.outputNames) {
      Placeholder *ph = model.getOutputPlaceholder(name);
      b->insert(ph, Tensor(*ph->getType()));
    }
    md.host->runNetwork(md.network, std::move(b), [&](RunResult r) {
      std::lock_guard<std::mutex> lock(mu);
      if (r.error)
        out.failed++;
      for (const PartitionRunReport &p : r.report.partitions) {
        seconds[p.partition].push_back(p.stats.seconds);
        simulated[p.partition].push_back(double(p.stats.cycles) / hz);
      }
      done++;
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done == a.requests; });
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto &kv : seconds)
    out.stageSeconds[kv.first] = median(kv.second);
  for (auto &kv : simulated)
    out.stageSimulated[kv.first] = median(kv.second);
  return out;
}

} // namespace

int main(int argc, char **argv) {
  Args a;
  if (!parse(argc, argv, a)) {
    std::fprintf(stderr, "usage: pipeline_bench --model M.onnx [--devices N] [--requests N] "
                         "[--device-memory BYTES] [--clock-mhz MHZ]\n");
    return 2;
  }
  Expected<Outcome> on = stream(a, true);
  if (!on) {
    std::fprintf(stderr, "pipeline_bench: %s\n", on.getError().toString().c_str());
    return 1;
  }
  Expected<Outcome> off = stream(a, false);
  if (!off) {
    std::fprintf(stderr, "pipeline_bench: %s\n", off.getError().toString().c_str());
    return 1;
  }
  double slowest = 0, sum = 0;
  std::printf("partition: median run s (simulated s) with pipelining\n");
  for (const auto &kv : on->stageSeconds) {
    std::printf("  %s: %.4f (%.4f)\n", kv.first.c_str(), kv.second,
                on->stageSimulated[kv.first]);
    slowest = std::max(slowest, kv.second);
    sum += kv.second;
  }
  std::printf("requests %u, failed %u / %u\n", a.requests, on->failed, off->failed);
  std::printf("pipelined:     %.2f s, %.3f requests/s\n", on->seconds, a.requests / on->seconds);
  std::printf("not pipelined: %.2f s, %.3f requests/s\n", off->seconds,
              a.requests / off->seconds);
  std::printf("bound of the slowest partition: %.3f requests/s (sum of partitions: %.3f)\n",
              1 / slowest, 1 / sum);
  return on->failed || off->failed ? 1 : 0;
}
