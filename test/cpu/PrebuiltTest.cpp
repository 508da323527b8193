// The prebuilt shared kernels (backends/CPU/jit/Prebuilt.h): each unit's recorded list of
// the helpers it calls, which getSharedKernels trusts instead of reading the kernel bitcode,
// against the bitcode itself; and the kernels loaded through that list compute.
#include "backends/CPU/jit/Jit.h"
#include "backends/CPU/jit/Prebuilt.h"
#include "backends/CPU/libjit/libjit_gemm_config.h"

#include "test/cpu/RandomVec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

namespace {

std::vector<std::string> split(const char *list) {
  std::vector<std::string> v;
  std::string cur;
  for (const char *p = list; *p; p++) {
    if (*p == ',') {
      v.push_back(cur);
      cur.clear();
    } else {
      cur += *p;
    }
  }
  if (!cur.empty())
    v.push_back(cur);
  return v;
}

TEST(CpuPrebuilt, UnitsRecordTheHelpersTheBitcodeCalls) {
  size_t units = 0, withHelpers = 0;
  for (const char *level : {"x86-64-v4", "x86-64-v3"}) {
    // Every kernel of the level and, transitively, every helper it records.
    std::vector<std::string> work = kiln::cpu::sharedKernelNames(std::string(level) == "x86-64-v4");
    std::set<std::string> seen;
    for (size_t i = 0; i < work.size(); i++) {
      const std::string name = work[i];
      if (!seen.insert(name).second)
        continue;
      SCOPED_TRACE(std::string(level) + " " + name);
      const kiln::cpu::PrebuiltUnit *u = kiln::cpu::findPrebuiltUnit(level, name);
      ASSERT_NE(u, nullptr) << "no prebuilt object";
      ASSERT_NE(u->helpers, nullptr);
      EXPECT_GT(u->instrs, 0u);
      auto fromBitcode = kiln::cpu::sharedUnitHelpers(name);
      ASSERT_TRUE(bool(fromBitcode)) << fromBitcode.getError().toString();
      std::vector<std::string> recorded = split(u->helpers);
      EXPECT_EQ(std::set<std::string>(recorded.begin(), recorded.end()),
                std::set<std::string>(fromBitcode->begin(), fromBitcode->end()));
      units++;
      withHelpers += !recorded.empty();
      work.insert(work.end(), recorded.begin(), recorded.end());
    }
  }
  // The GEMM-based kernels call the micro-kernel helpers: the lists are not all empty.
  EXPECT_GT(withHelpers, 4u);
  EXPECT_GT(units, 20u);
}

using BatchMatMulFn = void (*)(float *, const float *, const float *, int64_t, int64_t, int64_t,
                               int64_t, float *, int64_t, int64_t);

TEST(CpuPrebuilt, KernelLoadedByRecordedHelpersComputes) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    GTEST_SKIP() << "the host has no AVX2";
  kiln::cpu::JitOptions opts;
  opts.disableAvx512 = true; // the x86-64-v3 objects, on any AVX2 host
  opts.cacheDir = "off";     // nothing compiled or read from disk: the prebuilt objects
  opts.times = true;         // prints the phases, the bitcode scan among them if it runs
  // First a kernel that calls the same GEMM helpers: the second load links to the
  // helpers the first one loaded (by address) rather than loading them again.
  const std::string name = "libjit_batchmatmul_f32_avx2";
  testing::internal::CaptureStderr();
  auto fc = kiln::cpu::getSharedKernels({"libjit_fc_f32_avx2"}, opts);
  auto k = kiln::cpu::getSharedKernels({name}, opts);
  std::string phases = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(bool(fc)) << fc.getError().toString();
  ASSERT_TRUE(bool(k)) << k.getError().toString();
  // The helpers came from the prebuilt records: the kernel bitcode was not read.
  EXPECT_EQ(phases.find("find the shared helpers"), std::string::npos) << phases;
  auto bmm = reinterpret_cast<BatchMatMulFn>(k->at(name));
  const int64_t N = 13, K = 300, M = 37;
  auto a = randomVec(N * K, 1), b = randomVec(K * M, 2);
  std::vector<float> scratch(libjit::gemmScratchFloats<libjit::GemmAvx2>()), c(N * M);
  bmm(c.data(), a.data(), b.data(), 1, N, K, M, scratch.data(), 0, 1);
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = 0; j < M; j++) {
      double s = 0;
      for (int64_t q = 0; q < K; q++)
        s += double(a[i * K + q]) * b[q * M + j];
      ASSERT_NEAR(c[i * M + j], s, 1e-4 * (1 + std::fabs(s))) << i << "," << j;
    }
}

} // namespace
