// kiln-run: loads an ONNX model, runs it on a backend, and checks it against an ONNX
// backend-test data set. The contract (flags, JSON fields, exit codes) is BENCH.md's:
//
//   kiln-run --model M.onnx --data DIR --backend CPU --threads 1 --iterations 20 --json
//
// Exit 0: ran and matched (or no --data); 1: outputs mismatch; 2: any error.
//
// --shape NAME=8x3x224x224 fixes an input's shape (models with symbolic dimensions); nodes
// the backend cannot run fall back to the Interpreter with a warning unless --no-fallback;
// the split (partitions and nodes per backend) is printed, and is in the JSON line.

#include "Flags.h"
#include "MachineLimits.h"
#include "ModelRunner.h"
#include "QuantFlags.h"
#include "kiln/Base/Pages.h"
#include "kiln/Base/Trace.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

namespace {

struct Options {
  std::string model, data, backend = "Interpreter";
  unsigned threads = 1;
  unsigned devices = 0;       ///< >0: run through the runtime on this many devices
  uint64_t deviceMemory = 0;  ///< bytes per device (0: the backend's default)
  unsigned iterations = 10, warmup = 1;
  bool json = false;
  bool noFallback = false;
  std::string trace;          ///< --trace FILE
  bool traceKernels = false;  ///< --trace-kernels
  std::string dumpGraph;      ///< --dump-graph DIR
  /// --shape items, by input name.
  std::map<std::string, std::vector<kiln::dim_t>> shapes;
  /// --backend-opt items (threads=N sets compile.threads, overriding --threads).
  kiln::CompileOptions compile;
  kiln::tools::QuantFlags quant;
};

/// Parses the flags into \p o; returns the exit status when the tool should stop.
std::optional<int> parseOptions(int argc, char **argv, Options &o) {
  kiln::tools::Flags flags(
      "kiln-run", "usage: kiln-run --model M.onnx [--data DIR] [options]",
      "Runs an ONNX model; with --data, checks it against input_K.pb/output_K.pb with\n"
      "|y - ref| <= 1e-4 * max|ref| + 1e-3 * |ref|. Exit 0 match, 1 mismatch, 2 error.\n");
  flags.add("--model", o.model, "M.onnx", "the ONNX model").required();
  flags.add("--data", o.data, "DIR", "a test_data_set_N folder to check the outputs against");
  flags.add("--backend", o.backend, "NAME", "Interpreter, CPU, Sim, ...");
  flags.add("--threads", o.threads, "N", "intra-op threads of backends that use them");
  flags.add("--iterations", o.iterations, "N", "timed runs");
  flags.add("--warmup", o.warmup, "N", "untimed runs before them");
  flags.add("--json", o.json, "print one JSON line (BENCH.md's fields) instead of a table");
  o.compile.threads = 0;
  flags.add("--backend-opt", "NAME=VALUE",
            "a backend parameter, repeatable (CPU: spin-us=N, profile=1, dump-asm=FILE, ...; "
            "an unknown name lists the known ones)",
            "NAME=VALUE", "none",
            [&o](const std::string &v) { return !bool(o.compile.setBackendOption(v)); });
  flags.add("--pages", "auto|huge|small",
            "which pages large tensors and packed constants ask the kernel for: huge (2 MiB, "
            "the fastest runs), small (4 KiB, the fastest cold start in a VM whose host "
            "takes freed memory back), auto (huge unless this host is such a VM: a "
            "virtio balloon with free page reporting)",
            "auto, huge or small", "auto", [](const std::string &v) {
              kiln::PagePolicy p;
              if (!kiln::parsePagePolicy(v, &p))
                return false;
              kiln::setPagePolicy(p);
              return true;
            });
  flags.add("--devices", o.devices, "N",
            "partition over N devices of the backend (e.g. Sim), with the CPU or the "
            "Interpreter for what it lacks; 0 runs on one device");
  flags.add("--device-memory", o.deviceMemory, "BYTES",
            "memory of each device with --devices; 0 is the backend's default");
  flags.add("--shape", "NAME=DxDx...",
            "the shape of input NAME, repeatable (for inputs with symbolic dimensions; a "
            "dimension the model fixes must match)",
            "NAME=DxD... with positive sizes", "the model's, symbolic dimensions 1",
            [&o](const std::string &v) { return kiln::tools::parseShapeFlag(v, o.shapes); });
  flags.add("--no-fallback", o.noFallback,
            "fail on nodes the backend cannot run instead of running them on the Interpreter");
  flags.add("--trace", o.trace, "FILE",
            "write a Chrome trace (chrome://tracing, Perfetto) of the import, the compile "
            "phases and passes, and every run");
  flags.add("--trace-kernels", o.traceKernels,
            "with --trace: one event per executed instruction (Interpreter, Sim) or compiled "
            "stage (CPU)");
  flags.add("--dump-graph", o.dumpGraph, "DIR",
            "write Graphviz DOT of the graph as imported, after the optimising passes, "
            "after lowering, after the whole pipeline, and the partition plan into DIR "
            "(created if missing)");
  kiln::tools::addQuantFlags(flags, o.quant, /*profiling=*/true, /*calibrationDir=*/true);
  if (std::optional<int> exitCode = flags.parse(argc, argv))
    return exitCode;
  if (!o.quant.profileOut.empty() && o.quant.calibration.empty())
    return flags.fail("--quant-profile needs --calibration DIR");
  if (!o.quant.profileOut.empty() && !o.quant.quantize.empty())
    return flags.fail("--quant-profile and --quantize are separate steps");
  if (o.traceKernels && o.trace.empty())
    return flags.fail("--trace-kernels needs --trace FILE");
  if (o.compile.threads) // threads=N among the backend options
    o.threads = o.compile.threads;
  if (o.iterations == 0)
    return flags.fail("--iterations must be at least 1");
  return std::nullopt;
}

std::string jsonNumber(double v) {
  if (std::isnan(v))
    return "null";
  if (std::isinf(v))
    return "1e308";
  std::ostringstream os;
  os.precision(6);
  os << v;
  return os.str();
}

int fail(const kiln::Error &e, const char *what) {
  std::cerr << "kiln-run: " << what << ": " << e.toString() << "\n";
  return 2;
}

double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// kiln-run --quant-profile: runs the instrumented model over every calibration set and
/// writes the profile.
int profileForQuantization(const Options &f) {
  using namespace kiln;
  Expected<std::vector<std::vector<Tensor>>> sets = tools::loadCalibrationSets(f.quant.calibration);
  if (!sets)
    return fail(sets.getError(), "reading the calibration inputs");
  tools::TestDataSet first;
  for (const Tensor &t : sets->front())
    first.inputs.push_back(t.clone());
  tools::ModelRunner runner(f.backend);
  runner.setInputShapes(f.shapes);
  runner.setStrictBackend(f.noFallback);
  if (Error e = runner.load(f.model, &first))
    return fail(e, "loading the model");
  if (Error e = prepareForQuantization(runner.function()))
    return fail(e, "preparing the model for quantization");
  Profiler prof(f.quant.bins);
  size_t probes = prof.instrument(runner.function());
  CompileOptions copts = f.compile;
  copts.threads = f.threads;
  if (Error e = runner.compile(copts))
    return fail(e, "compiling");
  for (size_t i = 0; i < sets->size(); i++) {
    if (Error e = runner.bindInputs((*sets)[i]))
      return fail(e, ("binding calibration set " + std::to_string(i)).c_str());
    prof.allocate(runner.bindings());
    if (Error e = runner.run())
      return fail(e, "running");
    if (Error e = prof.record(runner.bindings()))
      return fail(e, "recording the profile");
  }
  if (Error e = prof.profile().writeFile(f.quant.profileOut))
    return fail(e, "writing the profile");
  std::cout << "kiln-run: profiled " << probes << " values over " << sets->size()
            << " calibration input sets on " << f.backend << "; wrote " << f.quant.profileOut
            << "\n";
  return 0;
}

} // namespace

namespace {

/// What one kiln-run measured, for the text and JSON reports.
struct RunFigures {
  double loadMs = 0, compileMs = 0, medianMs = 0, minMs = 0;
  bool haveData = false;
  kiln::tools::Comparison cmp;
  uint64_t actPeak = 0, actTotal = 0;
};

/// The human-readable report on stdout.
void printText(const Options &f, kiln::tools::ModelRunner &runner, const RunFigures &r,
               const kiln::NetworkSplit &split) {
  using namespace kiln;
  std::cout << "model:        " << f.model << "\n"
            << "backend:      " << f.backend << " (" << f.threads << " threads)\n"
            << "inputs:       " << runner.inputShapesText() << "\n"
            << "load:         " << r.loadMs << " ms\n"
            << "compile:      " << r.compileMs << " ms\n"
            << "run:          median " << r.medianMs << " ms, min " << r.minMs << " ms over "
            << f.iterations << " iterations\n"
            << "split:        " << split.toString() << "\n";
  if (!split.fallbackNodes.empty()) {
    std::cout << "fallback:     " << split.fallbackNodes.size() << " node"
              << (split.fallbackNodes.size() == 1 ? "" : "s") << " on "
              << split.fallbackBackend << ":";
    for (const FallbackNode &n : split.fallbackNodes)
      std::cout << " " << n.name << " (" << n.kind << ")";
    std::cout << "\n";
  }
  if (r.haveData)
    std::cout << "errors:       max abs " << r.cmp.maxAbsErr << ", max rel " << r.cmp.maxRelErr
              << (r.cmp.match ? " (match)" : " (MISMATCH: " + r.cmp.detail + ")") << "\n";
  std::cout << "activations:  " << r.actPeak << " bytes peak live (" << r.actTotal
            << " allocated)\n"
            << "constants:    " << runner.constantBytes() << " bytes in the graph's types, "
            << runner.constantMemoryBytes() << " held once compiled\n"
            << "peak RSS:     " << tools::peakRSSBytes() << " bytes\n";
}

/// Per-stage timings of backends asked to profile (CPU: --backend-opt profile=1), on
/// stderr so that --json keeps one line on stdout. Where the backend counts a stage's work,
/// its rate from the stage's minimum: GFLOP/s against one core's measured multiply-add
/// peak (times the threads the stage ran on), or for stages that only move data, GB/s
/// against the measured DRAM bandwidth (data in cache can exceed it).
void printProfile(kiln::tools::ModelRunner &runner) {
  using namespace kiln;
  std::vector<StageTiming> profile = runner.profile();
  if (profile.empty())
    return;
  double sumMin = 0;
  bool counted = false;
  for (const StageTiming &t : profile) {
    sumMin += t.minMs;
    counted = counted || t.bytes > 0;
  }
  std::vector<const StageTiming *> order;
  for (const StageTiming &t : profile)
    order.push_back(&t);
  std::stable_sort(order.begin(), order.end(),
                   [](const StageTiming *a, const StageTiming *b) { return a->minMs > b->minMs; });
  std::fprintf(stderr, "profile: %zu stages, %llu runs, sum of minima %.3f ms\n",
               profile.size(), (unsigned long long)profile.front().runs, sumMin);
  tools::MachineLimits lim;
  if (counted) {
    lim = tools::measureMachineLimits();
    std::fprintf(stderr,
                 "machine (measured now): one core %.1f GFLOP/s (%s multiply-adds); copy %.1f "
                 "GB/s in L2 (256 KB), %.1f GB/s from DRAM (64 MB)\n",
                 lim.fmaGflops, lim.isa.c_str(), lim.l2GBs, lim.dramGBs);
    std::fprintf(stderr, "   mean ms    min ms  share    GFLOP/s     GB/s  of limit  stage\n");
  } else {
    std::fprintf(stderr, "   mean ms    min ms  share  stage\n");
  }
  for (const StageTiming *t : order) {
    std::fprintf(stderr, "  %8.3f  %8.3f %5.1f%%", t->meanMs, t->minMs,
                 100.0 * t->minMs / std::max(sumMin, 1e-9));
    if (counted) {
      if (t->bytes > 0 && t->minMs > 0) {
        double s = t->minMs * 1e-3;
        double gflops = t->flops / s * 1e-9, gbs = t->bytes / s * 1e-9;
        double peak = lim.fmaGflops * std::max(1u, t->threads);
        if (t->flops > 0)
          std::fprintf(stderr, "  %9.1f  %7.1f  %5.0f%% F", gflops, gbs,
                       100.0 * gflops / std::max(peak, 1e-9));
        else
          std::fprintf(stderr, "  %9s  %7.1f  %5.0f%% M", "", gbs,
                       100.0 * gbs / std::max(lim.dramGBs, 1e-9));
      } else {
        std::fprintf(stderr, "  %9s  %7s  %7s", "", "", "");
      }
    }
    std::fprintf(stderr, "  %s\n", t->name.c_str());
  }
  if (counted)
    std::fprintf(stderr, "of limit: F = of the multiply-add peak (x the threads of P stages), "
                         "M = of the DRAM copy bandwidth\n");
}

/// The one-line JSON report on stdout (the contract compare.py reads).
void printJSON(const Options &f, kiln::tools::ModelRunner &runner, const RunFigures &r,
               const kiln::NetworkSplit &split, const kiln::MultiDeviceNetwork *md) {
  using namespace kiln;
  // activation_bytes is the peak of live activation bytes in the low-level IR (allocs
  // minus deallocs in instruction order); activation_alloc_bytes their plain sum.
  std::cout << "{\"model\": " << kiln::jsonQuote(f.model)
            << ", \"backend\": " << kiln::jsonQuote(f.backend)
            << ", \"threads\": " << f.threads << ", \"load_ms\": " << jsonNumber(r.loadMs)
            << ", \"compile_ms\": " << jsonNumber(r.compileMs)
            << ", \"median_ms\": " << jsonNumber(r.medianMs)
            << ", \"min_ms\": " << jsonNumber(r.minMs)
            << ", \"iterations\": " << f.iterations
            << ", \"max_abs_err\": " << (r.haveData ? jsonNumber(r.cmp.maxAbsErr) : "null")
            << ", \"max_rel_err\": " << (r.haveData ? jsonNumber(r.cmp.maxRelErr) : "null")
            << ", \"match\": " << (r.cmp.match ? "true" : "false")
            << ", \"activation_bytes\": " << r.actPeak
            << ", \"activation_alloc_bytes\": " << r.actTotal
            << ", \"constant_bytes\": " << runner.constantBytes()
            << ", \"constant_memory_bytes\": " << runner.constantMemoryBytes()
            << ", \"peak_rss_bytes\": " << tools::peakRSSBytes()
            << ", \"huge_pages\": " << (longLivedMemoryInHugePages() ? "true" : "false")
            << ", \"split\": [";
  for (size_t i = 0; i < split.backends.size(); i++) {
    const BackendShare &b = split.backends[i];
    std::cout << (i ? ", " : "") << "{\"backend\": " << kiln::jsonQuote(b.backend)
              << ", \"partitions\": " << b.partitions << ", \"nodes\": " << b.nodes << "}";
  }
  std::cout << "], \"fallback_nodes\": " << split.fallbackNodes.size() << ", \"inputs\": {";
  const std::vector<std::pair<std::string, Type>> ins = runner.inputTypes();
  for (size_t i = 0; i < ins.size(); i++) {
    std::cout << (i ? ", " : "") << kiln::jsonQuote(ins[i].first) << ": [";
    for (size_t d = 0; d < ins[i].second.dims.size(); d++)
      std::cout << (d ? ", " : "") << ins[i].second.dims[d];
    std::cout << "]";
  }
  std::cout << "}";
  if (md)
    std::cout << ", \"devices\": " << f.devices << ", \"partitions\": " << md->numPartitions
              << ", \"simulated_cycles\": " << runner.lastReport().totalCycles()
              << ", \"dma_bytes\": " << runner.lastReport().totalDmaBytes();
  std::cout << "}" << std::endl;
}

/// Applies the runner-level flags (input shapes, strict backend, devices, graph dumps, the
/// trace); returns an exit status when a flag cannot be honoured.
std::optional<int> configureRunner(const Options &f, kiln::tools::ModelRunner &runner,
                                   std::shared_ptr<kiln::Tracer> &trace) {
  using namespace kiln;
  runner.setInputShapes(f.shapes);
  runner.setStrictBackend(f.noFallback);
  if (f.devices)
    runner.setMultiDevice(f.devices, f.deviceMemory);
  if (!f.dumpGraph.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(f.dumpGraph, ec);
    if (ec) {
      std::cerr << "kiln-run: cannot create '" << f.dumpGraph << "': " << ec.message() << "\n";
      return 2;
    }
    runner.setDumpGraphDir(f.dumpGraph);
  }
  if (!f.trace.empty()) {
    TraceOptions to;
    to.kernels = f.traceKernels;
    trace = std::make_shared<Tracer>(to);
    runner.setTrace(trace);
  }
  return std::nullopt;
}

/// Runs f.warmup untimed and f.iterations timed runs; sets r.medianMs and r.minMs.
kiln::Error timeRuns(const Options &f, kiln::tools::ModelRunner &runner, RunFigures &r) {
  for (unsigned i = 0; i < f.warmup; i++)
    if (kiln::Error e = runner.run())
      return e;
  std::vector<double> times;
  for (unsigned i = 0; i < f.iterations; i++) {
    auto t0 = std::chrono::steady_clock::now();
    if (kiln::Error e = runner.run())
      return e;
    times.push_back(msSince(t0));
  }
  std::sort(times.begin(), times.end());
  r.medianMs = times.size() % 2 ? times[times.size() / 2]
                                : 0.5 * (times[times.size() / 2 - 1] + times[times.size() / 2]);
  r.minMs = times.front();
  return kiln::Error::success();
}

/// --backend-opt's options and the threads. kiln-run compiles once, so the CPU backend
/// frees the graph's copy of each weight it packs and the weights are held once
/// (--backend-opt release-constants=0 keeps them).
kiln::CompileOptions compileOptions(const Options &f) {
  kiln::CompileOptions copts = f.compile;
  copts.threads = f.threads;
  if (f.backend == "CPU" && !copts.backendOptions.count("release-constants") &&
      !copts.backendOptions.count("CPU:release-constants"))
    copts.backendOptions["release-constants"] = "1";
  return copts;
}

} // namespace

int main(int argc, char **argv) {
  using namespace kiln;
  Options f;
  if (std::optional<int> exitCode = parseOptions(argc, argv, f))
    return *exitCode;

  if (!f.quant.profileOut.empty())
    return profileForQuantization(f);

  RunFigures r;
  tools::TestDataSet data;
  r.haveData = !f.data.empty();
  if (r.haveData) {
    Expected<tools::TestDataSet> d = tools::loadTestDataSet(f.data);
    if (!d)
      return fail(d.getError(), "reading the data set");
    data = std::move(d).get();
  }

  tools::ModelRunner runner(f.backend);
  std::shared_ptr<Tracer> trace;
  if (std::optional<int> exitCode = configureRunner(f, runner, trace))
    return *exitCode;
  auto t0 = std::chrono::steady_clock::now();
  if (Error e = runner.load(f.model, r.haveData ? &data : nullptr))
    return fail(e, "loading the model");
  r.loadMs = msSince(t0);
  if (!f.quant.quantize.empty())
    if (Error e = tools::quantizeWithFlags(runner.function(), f.quant, std::cerr))
      return fail(e, "quantizing");
  if (!f.quant.precision.empty())
    if (Error e = tools::convertPrecisionWithFlags(runner.function(), f.quant, std::cerr))
      return fail(e, "converting precision");

  CompileOptions copts = compileOptions(f);
  t0 = std::chrono::steady_clock::now();
  if (Error e = runner.compile(copts))
    return fail(e, "compiling");
  r.compileMs = msSince(t0);

  if (Error e = runner.bindInputs(data.inputs))
    return fail(e, "binding inputs");
  if (Error e = timeRuns(f, runner, r))
    return fail(e, "running");
  if (r.haveData)
    r.cmp = tools::compareOutputs(runner.outputs(), data.outputs);

  Expected<std::pair<uint64_t, uint64_t>> act = runner.activationBytes();
  if (act) {
    r.actPeak = act->first;
    r.actTotal = act->second;
  } else {
    std::cerr << "kiln-run: warning: cannot measure activations: " << act.getError().toString()
              << "\n";
  }

  Expected<NetworkSplit> split = runner.split();
  if (!split)
    return fail(split.getError(), "reading the partition plan");
  const MultiDeviceNetwork *md = runner.multiDevice();
  if (md) // the plan goes to stderr so that --json keeps one line on stdout
    std::cerr << md->planText << "\n" << runner.lastReport().toString() << "\n"
              << "simulated: " << runner.lastReport().totalCycles() << " cycles, "
              << runner.lastReport().totalDmaBytes() << " DMA bytes (last run)\n";
  if (!f.json)
    printText(f, runner, r, *split);
  printProfile(runner);
  for (const std::string &g : runner.getDumpedGraphs())
    std::cerr << "kiln-run: wrote " << g << "\n";
  if (trace) {
    if (Error e = trace->writeJSON(f.trace))
      return fail(e, "writing the trace");
    std::cerr << "kiln-run: wrote " << trace->size() << " trace events to " << f.trace << "\n";
  }
  if (r.haveData && !r.cmp.match && f.json)
    std::cerr << "kiln-run: mismatch: " << r.cmp.detail << "\n";
  if (f.json)
    printJSON(f, runner, r, *split, md);
  return r.cmp.match ? 0 : 1;
}
