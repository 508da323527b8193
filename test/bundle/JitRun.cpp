// jit_run: the JIT's side of the bundle measurements (bench_bundles.sh). Compiles a
// single-input, single-output ONNX model with the CPU backend, runs it on raw input
// bytes, writes the raw output bytes, and times the runs as run_bundle.c does.
//
//   jit_run MODEL.onnx INPUT.bin OUTPUT.bin [THREADS [ITERATIONS [BACKEND-OPT...]]]
#include "kiln/Importer/ONNX.h"
#include "kiln/kiln.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <vector>

int main(int argc, char **argv) {
  using namespace kiln;
  if (argc < 4) {
    std::fprintf(stderr, "usage: jit_run MODEL.onnx INPUT.bin OUTPUT.bin [THREADS [ITERATIONS "
                         "[NAME=VALUE...]]]\n");
    return 2;
  }
  CompileOptions opts;
  opts.threads = argc > 4 ? unsigned(std::atoi(argv[4])) : 1;
  int iterations = argc > 5 ? std::atoi(argv[5]) : 0;
  for (int i = 6; i < argc; i++)
    if (Error e = opts.setBackendOption(argv[i])) {
      std::fprintf(stderr, "jit_run: %s\n", e.toString().c_str());
      return 2;
    }
  auto now = [] { return std::chrono::steady_clock::now(); };
  auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  ExecutionEngine ee("CPU");
  Function *f = ee.getModule().createFunction("main");
  Expected<ONNXModel> m = loadONNX(argv[1], f);
  if (!m || m->inputNames.size() != 1 || m->outputNames.size() != 1) {
    std::fprintf(stderr, "jit_run: %s\n",
                 m ? "one input and one output expected" : m.takeError().toString().c_str());
    return 1;
  }
  auto t0 = now();
  if (Error e = ee.compile(opts)) {
    std::fprintf(stderr, "jit_run: %s\n", e.toString().c_str());
    return 1;
  }
  double compileMs = ms(t0, now());
  PlaceholderBindings b;
  b.allocate(ee.getModule().getPlaceholders());
  Tensor *in = b.get(m->getInput(m->inputNames[0]));
  std::ifstream is(argv[2], std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(is)), std::istreambuf_iterator<char>());
  if (bytes.size() != in->getSizeInBytes()) {
    std::fprintf(stderr, "jit_run: '%s' holds %zu bytes, the input takes %zu\n", argv[2],
                 bytes.size(), in->getSizeInBytes());
    return 1;
  }
  std::memcpy(in->getUnsafePtr(), bytes.data(), bytes.size());
  t0 = now();
  if (Error e = ee.run(b)) {
    std::fprintf(stderr, "jit_run: %s\n", e.toString().c_str());
    return 1;
  }
  double firstMs = ms(t0, now());
  // CPU time of the process, all threads: less sensitive than wall time to other load.
  auto cpuMs = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
  };
  std::vector<double> times, cpu;
  for (int i = 0; i < iterations; i++) {
    t0 = now();
    double c = cpuMs();
    (void)ee.run(b);
    times.push_back(ms(t0, now()));
    cpu.push_back(cpuMs() - c);
  }
  if (!times.empty()) {
    std::sort(times.begin(), times.end());
    std::sort(cpu.begin(), cpu.end());
    std::printf("compile_ms %.1f first_ms %.3f median_ms %.3f min_ms %.3f cpu_median_ms %.3f "
                "cpu_min_ms %.3f\n",
                compileMs, firstMs, times[times.size() / 2], times[0], cpu[cpu.size() / 2], cpu[0]);
  }
  const Tensor *out = b.get(m->getOutputPlaceholder(m->outputNames[0]));
  std::ofstream os(argv[3], std::ios::binary);
  os.write(out->getUnsafePtr(), std::streamsize(out->getSizeInBytes()));
  return os ? 0 : 1;
}
