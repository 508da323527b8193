#include "MachineLimits.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kiln::tools {

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// The best time of \p rounds calls of \p f.
template <class F> double bestOf(int rounds, F f) {
  double best = 1e30;
  for (int r = 0; r < rounds; r++) {
    auto t0 = Clock::now();
    f();
    best = std::min(best, seconds(t0, Clock::now()));
  }
  return best;
}

constexpr int64_t kChains = 12;       // independent accumulators: enough to hide FMA latency
constexpr int64_t kIters = 1 << 19;   // per call: 12 x 2^19 multiply-adds per lane
volatile float sink;                  // keeps the results alive

#if defined(__x86_64__)
__attribute__((target("avx512f"))) void fma512() {
  __m512 a[kChains];
  for (int64_t k = 0; k < kChains; k++)
    a[k] = _mm512_set1_ps(float(k) * 1e-3f);
  const __m512 m = _mm512_set1_ps(0.9999f), c = _mm512_set1_ps(1e-4f);
  for (int64_t i = 0; i < kIters; i++) {
#pragma GCC unroll 12
    for (int64_t k = 0; k < kChains; k++)
      a[k] = _mm512_fmadd_ps(a[k], m, c);
  }
  __m512 s = a[0];
  for (int64_t k = 1; k < kChains; k++)
    s = _mm512_add_ps(s, a[k]);
  float v[16];
  _mm512_storeu_ps(v, s);
  float t = 0;
  for (float x : v)
    t += x;
  sink = t;
}

__attribute__((target("avx2,fma"))) void fma256() {
  __m256 a[kChains];
  for (int64_t k = 0; k < kChains; k++)
    a[k] = _mm256_set1_ps(float(k) * 1e-3f);
  const __m256 m = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(1e-4f);
  for (int64_t i = 0; i < kIters; i++) {
#pragma GCC unroll 12
    for (int64_t k = 0; k < kChains; k++)
      a[k] = _mm256_fmadd_ps(a[k], m, c);
  }
  __m256 s = a[0];
  for (int64_t k = 1; k < kChains; k++)
    s = _mm256_add_ps(s, a[k]);
  float v[8];
  _mm256_storeu_ps(v, s);
  sink = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}
#endif

void fmaScalar() {
  float a[kChains];
  for (int64_t k = 0; k < kChains; k++)
    a[k] = float(k) * 1e-3f;
  for (int64_t i = 0; i < kIters; i++) {
#pragma GCC unroll 12
    for (int64_t k = 0; k < kChains; k++)
      a[k] = a[k] * 0.9999f + 1e-4f;
  }
  float s = 0;
  for (int64_t k = 0; k < kChains; k++)
    s += a[k];
  sink = s;
}

/// Bytes read plus written per second by memcpy between two buffers of \p bytes, repeated
/// to about \p total bytes per round.
double copyGBs(size_t bytes, size_t total) {
  std::vector<char> a(bytes, 1), b(bytes, 0);
  const size_t reps = std::max<size_t>(1, total / bytes);
  double t = bestOf(3, [&] {
    for (size_t r = 0; r < reps; r++) {
      std::memcpy(r % 2 ? a.data() : b.data(), r % 2 ? b.data() : a.data(), bytes);
      sink = float(a[r % bytes]);
    }
  });
  return 2.0 * double(bytes) * double(reps) / t * 1e-9;
}

} // namespace

MachineLimits measureMachineLimits() {
  MachineLimits m;
  void (*loop)() = fmaScalar;
  int64_t lanes = 1;
  m.isa = "scalar";
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    loop = fma512, lanes = 16, m.isa = "AVX-512";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    loop = fma256, lanes = 8, m.isa = "AVX2+FMA";
  }
#endif
  double t = bestOf(5, loop);
  m.fmaGflops = 2.0 * double(kChains * kIters * lanes) / t * 1e-9;
  m.l2GBs = copyGBs(size_t(256) << 10, size_t(256) << 20);
  m.dramGBs = copyGBs(size_t(64) << 20, size_t(128) << 20);
  return m;
}

} // namespace kiln::tools
