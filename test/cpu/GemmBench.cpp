// SGEMM microbenchmark of the CPU backend's kernels as the JIT compiles them for this host:
// the embedded bitcode, specialised for the host CPU, called through ORC. Reports GFLOP/s
// single-threaded for the AVX-512 variant (where the host has it) and the AVX2 variant.
//
//   bazel run -c opt //test/cpu:gemm_bench -- --benchmark_min_time=1
#include "backends/CPU/jit/Jit.h"
#include "backends/CPU/libjit/libjit_gemm_config.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <vector>

namespace {

using SgemmFn = void (*)(int64_t, int64_t, int64_t, const float *, int64_t, const float *,
                         int64_t, float *, int64_t, float *, int64_t, int64_t);

struct Jitted {
  std::unique_ptr<kiln::cpu::JitModule> mod;
  SgemmFn fn = nullptr;
};

Jitted jitSgemm(const std::string &variant, bool disableAvx512) {
  Jitted j;
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto m = kiln::exitOnError(kiln::cpu::loadLibjitModule(*ctx), "loading libjit");
  kiln::cpu::JitOptions opts;
  opts.disableAvx512 = disableAvx512;
  opts.keepAsm = std::getenv("KILN_DUMP_ASM") != nullptr;
  std::string name = "libjit_sgemm_f32_" + variant;
  j.mod = kiln::exitOnError(
      kiln::cpu::JitModule::compile(std::move(ctx), std::move(m), {name}, opts), "JIT");
  j.fn = reinterpret_cast<SgemmFn>(kiln::exitOnError(j.mod->lookup(name), "lookup"));
  if (opts.keepAsm)
    std::cerr << j.mod->getAsm();
  return j;
}

template <class Cfg> void runSgemm(benchmark::State &state, SgemmFn fn) {
  int64_t n = state.range(0);
  std::vector<float> a(n * n), b(n * n), c(n * n);
  for (int64_t i = 0; i < n * n; i++) {
    a[i] = float((i * 7) % 13) / 13.0f;
    b[i] = float((i * 5) % 11) / 11.0f;
  }
  std::vector<float> scratch(libjit::gemmScratchFloats<Cfg>());
  for (auto _ : state) {
    fn(n, n, n, a.data(), n, b.data(), n, c.data(), n, scratch.data(), 0, 1);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
}

void BM_SgemmAvx512(benchmark::State &state) {
  static bool has = kiln::cpu::detectHost({}).avx512;
  if (!has) {
    state.SkipWithError("no AVX-512 on this host");
    return;
  }
  static Jitted j = jitSgemm("avx512", false);
  runSgemm<libjit::GemmAvx512>(state, j.fn);
}

void BM_SgemmAvx2(benchmark::State &state) {
  static bool has = kiln::cpu::detectHost({}).avx2;
  if (!has) {
    state.SkipWithError("no AVX2 on this host");
    return;
  }
  static Jitted j = jitSgemm("avx2", true);
  runSgemm<libjit::GemmAvx2>(state, j.fn);
}

} // namespace

BENCHMARK(BM_SgemmAvx512)->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SgemmAvx2)->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
