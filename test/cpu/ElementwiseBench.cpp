// Microbenchmark of the element-wise kernels as the CPU backend generates them: for each
// kind, a function y = op(x) (binary kinds: op(x, x2); the squeeze-and-excitation pattern:
// x * broadcast([N, C, 1, 1])) compiled with `profile=1`, run on one thread; the stage's
// minimum time gives GB/s (bytes read + written over it). The reference is a plain copy
// (memcpy, one read and one write stream) measured in this binary over the same bytes, in L2 (256
// KB per stream) and from DRAM (64 MB per stream). Prints one table per ISA.
//
//   bazel run -c opt //test/cpu:elementwise_bench -- [--reps 50] [--no-avx512] [--filter S]
#include "backends/CPU/CPUBackend.h"
#include "kiln/Backend/Compiler.h"
#include "kiln/kiln.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using namespace kiln;
using Clock = std::chrono::steady_clock;

struct Case {
  const char *name;
  unsigned streams; ///< tensors read + written per element
  std::function<NodeValue(Function *, NodeValue, NodeValue, NodeValue)> build;
};

double minSeconds(int reps, const std::function<void()> &f) {
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

/// GB/s of one compiled element-wise function of \p n floats: the minimum of the stage(s).
double runCase(const Case &c, int64_t n, bool avx2, int reps) {
  Module mod;
  Function *F = mod.createFunction("main");
  const dim_t C = 64, HW = dim_t(n / C);
  auto *x = mod.createPlaceholder(ElemKind::Float, {1, C, HW, 1}, "x");
  auto *x2 = mod.createPlaceholder(ElemKind::Float, {1, C, HW, 1}, "x2");
  auto *s = mod.createPlaceholder(ElemKind::Float, {1, C, 1, 1}, "s");
  F->createSave("y", c.build(F, x, x2, s));
  cpu::CPUBackendOptions o;
  o.disableAvx512 = avx2;
  o.profile = true;
  cpu::CPUBackend cpu(o);
  CompileOptions opts;
  opts.threads = 1;
  auto cf = compileFunction(F, cpu, opts);
  if (!cf) {
    std::fprintf(stderr, "%s: %s\n", c.name, cf.getError().message().c_str());
    return 0;
  }
  PlaceholderBindings b;
  b.allocate(mod.getPlaceholders());
  PseudoRNG rng(1);
  b.get(x)->randomize(-4, 4, rng);
  b.get(x2)->randomize(0.5f, 4, rng);
  b.get(s)->randomize(-1, 1, rng);
  for (int r = 0; r < reps; r++) {
    ExecutionContext ctx(&b);
    if (Error e = (*cf)->execute(ctx)) {
      std::fprintf(stderr, "%s: %s\n", c.name, e.message().c_str());
      return 0;
    }
  }
  double ms = 0;
  for (const StageTiming &t : (*cf)->getProfile())
    ms += t.minMs;
  return double(c.streams) * 4.0 * double(n) / (ms * 1e-3) / 1e9;
}

} // namespace

int main(int argc, char **argv) {
  int reps = 50;
  bool onlyAvx2 = false;
  std::string filter;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else if (a == "--no-avx512")
      onlyAvx2 = true;
    else if (a == "--filter" && i + 1 < argc)
      filter = argv[++i];
  }
  using F = Function;
  using NV = NodeValue;
  std::vector<Case> cases = {
      {"relu", 2, [](F *f, NV x, NV, NV) { return f->createRelu("r", x); }},
      {"add", 3, [](F *f, NV x, NV y, NV) { return f->createAdd("a", x, y); }},
      {"mul", 3, [](F *f, NV x, NV y, NV) { return f->createMul("m", x, y); }},
      {"div", 3, [](F *f, NV x, NV y, NV) { return f->createDiv("d", x, y); }},
      {"clip", 2, [](F *f, NV x, NV, NV) { return f->createClip("c", x, 0.0f, 6.0f); }},
      {"leakyrelu", 2, [](F *f, NV x, NV, NV) { return f->createLeakyRelu("l", x, 0.1f); }},
      {"hardswish", 2, [](F *f, NV x, NV, NV) { return f->createHardSwish("h", x); }},
      {"exp", 2, [](F *f, NV x, NV, NV) { return f->createExp("e", x); }},
      {"log", 2, [](F *f, NV, NV y, NV) { return f->createLog("l", y); }},
      {"sigmoid", 2, [](F *f, NV x, NV, NV) { return f->createSigmoid("s", x); }},
      {"tanh", 2, [](F *f, NV x, NV, NV) { return f->createTanh("t", x); }},
      {"erf", 2, [](F *f, NV x, NV, NV) { return f->createErf("e", x); }},
      {"gelu", 2, [](F *f, NV x, NV, NV) { return f->createGelu("g", x, false); }},
      {"gelu_tanh", 2, [](F *f, NV x, NV, NV) { return f->createGelu("g", x, true); }},
      {"swish", 2, [](F *f, NV x, NV, NV) { return f->createSwish("s", x); }},
      {"se_scale", 2,
       [](F *f, NV x, NV, NV s) {
         return f->createMul(
             "m", x,
             f->createBroadcast("b", s, std::vector<dim_t>(x.dims().begin(), x.dims().end())));
       }},
      {"se_sigmoid_scale", 2,
       [](F *f, NV x, NV, NV s) {
         return f->createMul(
             "m", x,
             f->createBroadcast("b", f->createSigmoid("g", s),
                                std::vector<dim_t>(x.dims().begin(), x.dims().end())));
       }},
  };
  const int64_t l2 = 64 * 1024, dram = 16 * 1024 * 1024; // floats per stream
  // The reference in this binary: memcpy (1 read + 1 write stream).
  std::vector<float> a(dram, 1.0f), b(dram, 2.0f);
  auto copyGBs = [&](int64_t n) {
    double t = minSeconds(reps, [&] { std::memcpy(b.data(), a.data(), size_t(n) * 4); });
    return 8.0 * double(n) / t / 1e9;
  };
  std::printf("reference            L2 GB/s   DRAM GB/s\n");
  std::printf("%-18s %9.1f %11.1f\n", "copy (memcpy)", copyGBs(l2), copyGBs(dram));
  for (bool avx2 : {false, true}) {
    if (!avx2 && onlyAvx2)
      continue;
    std::printf("\n%s               L2 GB/s   DRAM GB/s\n", avx2 ? "avx2  " : "avx512");
    for (const Case &c : cases) {
      if (!filter.empty() && std::string(c.name).find(filter) == std::string::npos)
        continue;
      std::printf("%-18s %9.1f %11.1f\n", c.name, runCase(c, l2, avx2, reps),
                  runCase(c, dram, avx2, std::max(5, reps / 5)));
      std::fflush(stdout);
    }
  }
  return 0;
}
