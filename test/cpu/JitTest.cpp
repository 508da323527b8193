// The JIT's shared kernels: two GEMM kernels that call the same shared helpers (the GEMM
// micro-kernels, compiled once as units of their own and linked by address) against naive
// double-precision loops, on every instruction set the host runs; and the on-disk cache of
// those units, written by a cold process and loaded, links included, by a second one.
#include "backends/CPU/jit/Jit.h"
#include "backends/CPU/libjit/libjit_gemm_config.h"

#include "test/cpu/RandomVec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <dirent.h>
#include <map>
#include <random>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {

// Every process of this test gets the same fresh kernel cache (a child inherits the
// parent's through the environment), given to the JIT in JitOptions::cacheDir.
const std::string kCacheDir = [] {
  if (const char *d = std::getenv("KILN_CPU_CACHE_DIR"))
    return std::string(d);
  const char *tmp = std::getenv("TEST_TMPDIR");
  std::string dir =
      std::string(tmp ? tmp : "/tmp") + "/kiln-jit-test-" + std::to_string(::getpid());
  ::setenv("KILN_CPU_CACHE_DIR", dir.c_str(), 1);
  return dir;
}();

/// C = A x B in double precision, rounded once.
std::vector<float> refGemm(const float *a, const float *b, int64_t M, int64_t N, int64_t K) {
  std::vector<float> c(M * N);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++)
        s += double(a[i * K + k]) * b[k * N + j];
      c[i * N + j] = float(s);
    }
  return c;
}

void expectNear(const std::vector<float> &a, const std::vector<float> &b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); i++)
    ASSERT_NEAR(a[i], b[i], 1e-4f * (1 + std::fabs(b[i]))) << "at " << i;
}

using SgemmFn = void (*)(int64_t, int64_t, int64_t, const float *, int64_t, const float *, int64_t,
                         float *, int64_t, float *, int64_t, int64_t);
using BatchMatMulFn = void (*)(float *, const float *, const float *, int64_t, int64_t, int64_t,
                               int64_t, float *, int64_t, int64_t);

struct Isa {
  std::string suffix;
  bool disableAvx512;
  int64_t scratch;
};

/// The instruction-set variants this host runs.
std::vector<Isa> hostIsas() {
  std::vector<Isa> v;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    v.push_back({"avx512", false, libjit::gemmScratchFloats<libjit::GemmAvx512>()});
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    v.push_back({"avx2", true, libjit::gemmScratchFloats<libjit::GemmAvx2>()});
  return v;
}

/// The object files in \p dir and the file each name holds (its inode: the cache writes an
/// object as a new file renamed into place, while loading one only refreshes its time).
std::map<std::string, int64_t> objectFiles(const std::string &dir) {
  std::map<std::string, int64_t> files;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d)) {
      std::string name = e->d_name;
      struct stat st;
      if (name.size() > 2 && name.compare(name.size() - 2, 2, ".o") == 0 &&
          ::stat((dir + "/" + name).c_str(), &st) == 0)
        files[name] = int64_t(st.st_ino);
    }
    ::closedir(d);
  }
  return files;
}

TEST(CpuJit, SharedKernelsShareHelpers) {
  std::vector<Isa> isas = hostIsas();
  if (isas.empty())
    GTEST_SKIP() << "the host has neither AVX2 nor AVX-512";
  for (const Isa &isa : isas) {
    SCOPED_TRACE(isa.suffix);
    kiln::cpu::JitOptions opts;
    opts.disableAvx512 = isa.disableAvx512;
    opts.cacheDir = kCacheDir;
    std::string sg = "libjit_sgemm_f32_" + isa.suffix, bmm = "libjit_batchmatmul_f32_" + isa.suffix;
    auto k = kiln::cpu::getSharedKernels({sg, bmm}, opts);
    ASSERT_TRUE(bool(k)) << k.getError().toString();
    auto sgemm = reinterpret_cast<SgemmFn>(k->at(sg));
    auto batchMatMul = reinterpret_cast<BatchMatMulFn>(k->at(bmm));
    // Ragged tiles in both directions, and K over the engine's K block (accumulation).
    struct Shape {
      int64_t M, N, K;
    };
    for (Shape s : {Shape{1, 1, 1}, Shape{33, 65, 17}, Shape{29, 50, 400}}) {
      SCOPED_TRACE(std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K));
      auto a = randomVec(s.M * s.K, 1), b = randomVec(s.K * s.N, 2);
      std::vector<float> scratch(isa.scratch), c(s.M * s.N, -3.0f);
      sgemm(s.M, s.N, s.K, a.data(), s.K, b.data(), s.N, c.data(), s.N, scratch.data(), 0, 1);
      expectNear(c, refGemm(a.data(), b.data(), s.M, s.N, s.K));
      // Two batches: each a GEMM of its own slices.
      auto a2 = randomVec(2 * s.M * s.K, 3), b2 = randomVec(2 * s.K * s.N, 4);
      std::vector<float> c2(2 * s.M * s.N, 5.0f);
      batchMatMul(c2.data(), a2.data(), b2.data(), 2, s.M, s.K, s.N, scratch.data(), 0, 1);
      std::vector<float> ref = refGemm(a2.data(), b2.data(), s.M, s.N, s.K);
      std::vector<float> ref1 =
          refGemm(a2.data() + s.M * s.K, b2.data() + s.K * s.N, s.M, s.N, s.K);
      ref.insert(ref.end(), ref1.begin(), ref1.end());
      expectNear(c2, ref);
    }
  }
}

TEST(CpuJit, SecondProcessLoadsKernelsAndHelpersFromDisk) {
  if (hostIsas().empty())
    GTEST_SKIP() << "the host has neither AVX2 nor AVX-512";
  if (std::getenv("KILN_JIT_TEST_CHILD"))
    GTEST_SKIP() << "run by the parent only";
  // This process compiled the kernels (SharedKernelsShareHelpers runs first, or now).
  std::string self = "/proc/" + std::to_string(::getpid()) + "/exe";
  std::string run = "KILN_JIT_TEST_CHILD=1 " + self +
                    " --gtest_filter=CpuJit.SharedKernelsShareHelpers > /dev/null 2>&1";
  ASSERT_EQ(std::system(run.c_str()), 0);
  std::map<std::string, int64_t> objects = objectFiles(kCacheDir);
  // Two kernels and at least one helper per instruction set: the helpers are units of
  // their own, not copies inside each kernel.
  EXPECT_GE(objects.size(), 3 * hostIsas().size());
  // A second process finds every unit on disk (it writes none) and still computes right
  // (the child's own checks), so the links to the helpers are restored on loading.
  ASSERT_EQ(std::system(run.c_str()), 0);
  EXPECT_EQ(objectFiles(kCacheDir), objects);
}

} // namespace
