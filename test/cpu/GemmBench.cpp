// SGEMM microbenchmark of the CPU backend's kernels as the JIT compiles them for this host:
// the embedded bitcode, specialised for the host CPU, called through ORC. Reports GFLOP/s
// single-threaded for the AVX-512 variant (where the host has it) and the AVX2 variant:
// square SGEMMs (both operands packed per block), and FullyConnected (libjit_fc_f32_*,
// weights packed at compile time as the backend packs them) at the FC shapes of the
// transformer-style networks of the sweep (N tokens x K -> M), without an activation and
// with the fused GELU (erf form) epilogue. Repeated runs report a "min" statistic: the
// host is shared, and the minimum is what preemption disturbs least.
//
//   bazel run -c opt //test/cpu:gemm_bench -- --benchmark_min_time=1
//   bazel run -c opt //test/cpu:gemm_bench -- --benchmark_filter=Fc --benchmark_repetitions=5
#include "backends/CPU/jit/Jit.h"
#include "backends/CPU/libjit/libjit_gemm_config.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <vector>

namespace {

using SgemmFn = void (*)(int64_t, int64_t, int64_t, const float *, int64_t, const float *,
                         int64_t, float *, int64_t, float *, int64_t, int64_t);
using FcFn = void (*)(float *, const float *, const float *, const float *, const float *,
                      int64_t, int64_t, int64_t, int64_t, float, float, float *, int64_t,
                      int64_t);
using PackBTFn = void (*)(float *, const float *, int64_t, int64_t);

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

/// The FullyConnected kernel and its weight packing, JIT-compiled for one variant.
struct JittedFc {
  std::unique_ptr<kiln::cpu::JitModule> mod;
  FcFn fc = nullptr;
  PackBTFn pack = nullptr;
};

JittedFc jitFc(const std::string &variant, bool disableAvx512) {
  JittedFc j;
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto m = kiln::exitOnError(kiln::cpu::loadLibjitModule(*ctx), "loading libjit");
  kiln::cpu::JitOptions opts;
  opts.disableAvx512 = disableAvx512;
  opts.keepAsm = std::getenv("KILN_DUMP_ASM") != nullptr;
  std::string fc = "libjit_fc_f32_" + variant, pack = "libjit_pack_bt_f32_" + variant;
  j.mod = kiln::exitOnError(
      kiln::cpu::JitModule::compile(std::move(ctx), std::move(m), {fc, pack}, opts), "JIT");
  if (opts.keepAsm)
    std::cerr << j.mod->getAsm();
  j.fc = reinterpret_cast<FcFn>(kiln::exitOnError(j.mod->lookup(fc), "lookup"));
  j.pack = reinterpret_cast<PackBTFn>(kiln::exitOnError(j.mod->lookup(pack), "lookup"));
  return j;
}

/// out[N x M] = in[N x K] x W^T + bias, then activation act (libjit_act.h codes: 0 none,
/// 8 GELU), inputs in [-4, 4] so that GELU sees both of its branches.
template <class Cfg> void runFc(benchmark::State &state, const JittedFc &j) {
  int64_t N = state.range(0), K = state.range(1), M = state.range(2), act = state.range(3);
  std::vector<float> in(N * K), w(M * K), bias(M), out(N * M);
  for (int64_t i = 0; i < N * K; i++)
    in[i] = float((i * 7) % 17) / 2.0f - 4.0f;
  for (int64_t i = 0; i < M * K; i++)
    w[i] = (float((i * 5) % 11) - 5.0f) / (5.0f * float(K));
  for (int64_t i = 0; i < M; i++)
    bias[i] = float(i % 9) - 4.0f;
  std::vector<float> packed(libjit::packedBFloats<Cfg>(K, M));
  j.pack(packed.data(), w.data(), K, M);
  std::vector<float> scratch(libjit::gemmScratchFloats<Cfg>());
  for (auto _ : state) {
    j.fc(out.data(), in.data(), packed.data(), bias.data(), nullptr, N, K, M, act, 0.0f, 0.0f,
         scratch.data(), 0, 1);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * N * K * M, benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
}

void BM_FcAvx512(benchmark::State &state) {
  static bool has = kiln::cpu::detectHost({}).avx512;
  if (!has) {
    state.SkipWithError("no AVX-512 on this host");
    return;
  }
  static JittedFc j = jitFc("avx512", false);
  runFc<libjit::GemmAvx512>(state, j);
}

void BM_FcAvx2(benchmark::State &state) {
  static bool has = kiln::cpu::detectHost({}).avx2;
  if (!has) {
    state.SkipWithError("no AVX2 on this host");
    return;
  }
  static JittedFc j = jitFc("avx2", true);
  runFc<libjit::GemmAvx2>(state, j);
}

/// {N, K, M, act}: vit_b_16 (197 tokens), swin_t and convnext_tiny (3136, 784, 196 and
/// 49 tokens); the expanding FC of each MLP (M = 4K) carries the GELU.
void fcShapes(benchmark::internal::Benchmark *b) {
  const int64_t shapes[][3] = {{197, 768, 2304}, {197, 768, 768},  {197, 768, 3072},
                               {197, 3072, 768}, {3136, 96, 384},  {3136, 384, 96},
                               {784, 192, 768},  {784, 768, 192},  {196, 384, 1536},
                               {196, 1536, 384}, {49, 768, 3072},  {49, 3072, 768},
                               {1, 1280, 1000}};
  for (const auto &s : shapes) {
    b->Args({s[0], s[1], s[2], 0});
    if (s[2] == 4 * s[1])
      b->Args({s[0], s[1], s[2], 8});
  }
}

double minOf(const std::vector<double> &v) {
  return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end());
}

} // namespace

BENCHMARK(BM_FcAvx512)->Apply(fcShapes)->ComputeStatistics("min", minOf)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FcAvx2)->Apply(fcShapes)->ComputeStatistics("min", minOf)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SgemmAvx512)->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SgemmAvx2)->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
