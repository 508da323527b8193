// The element-wise kernels (libjit_elementwise.cpp, libjit_math.h): the polynomial
// approximations measured natively against the double-precision std:: functions over every
// 4099th float (all of the float range, NaN included), special values, the integer and
// conversion kernels against hand-computed values; then the same functions JIT-compiled by
// the CPU backend on AVX-512 (where the host has it) and AVX2, where they run vectorised.
// The measured maxima are printed; backends/CPU/README.md quotes them.
#include "backends/CPU/CPUBackend.h"
#include "backends/CPU/libjit/libjit.h"
#include "backends/CPU/libjit/libjit_elementwise.h"
#include "backends/CPU/libjit/libjit_math.h"
#include "kiln/Backend/Compiler.h"
#include "kiln/kiln.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace kiln {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

struct MathFn {
  const char *name;
  float (*fn)(float);
  double (*ref)(double);
  /// Bounds the test holds the kernel to: relative error where the reference is a normal
  /// float, absolute error where it is below FLT_MIN. SiLU reaches its maximum only where
  /// the result is near FLT_MIN (a product with a denormal sigmoid); elsewhere it is
  /// within a few ulp.
  double maxRel, maxAbsDenormal;
  /// Below x = relFrom only the absolute error is bounded, by maxAbsTail: the two GELUs
  /// compute x (1 + erf) / 2 and x (1 + tanh) / 2, where 1 + erf cancels for x << 0
  /// (libjit_math.h): relative error grows to 100% (0 instead of a value above -8.3e-8)
  /// while the absolute error stays below erf's error near -1 times |x| / 2.
  double relFrom = -std::numeric_limits<double>::infinity(), maxAbsTail = 0;
};

// The two forms of libjit_elem_gelu_f32, by its Approximate argument.
float geluErfKernel(float x) { return libjit_elem_gelu_f32(x, false); }
float geluTanhKernel(float x) { return libjit_elem_gelu_f32(x, true); }

double geluRef(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
double geluTanhRef(double x) {
  double u = std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
  return x / (1 + std::exp(-2 * u));
}

const MathFn kMathFns[] = {
    {"exp", libjit_elem_exp_f32, [](double x) { return std::exp(x); }, 3e-7, 2e-45},
    {"log", libjit_elem_log_f32, [](double x) { return std::log(x); }, 3e-7, 0},
    {"sigmoid", libjit_elem_sigmoid_f32, [](double x) { return 1 / (1 + std::exp(-x)); }, 5e-7,
     3e-45},
    {"tanh", libjit_elem_tanh_f32, [](double x) { return std::tanh(x); }, 5e-7, 2e-45},
    {"erf", libjit_elem_erf_f32, [](double x) { return std::erf(x); }, 5e-7, 2e-45},
    // Measured on a denser sweep (every 17th float): gelu 4.8e-6 relative for x >= -2 and
    // 8.7e-7 absolute below, gelu_tanh 3.7e-6 and 7.9e-7.
    {"gelu", geluErfKernel, geluRef, 6e-6, 1e-43, -2.0, 1.2e-6},
    {"gelu_tanh", geluTanhKernel, geluTanhRef, 6e-6, 1e-43, -2.0, 1.2e-6},
    {"swish", libjit_elem_swish_f32, [](double x) { return x / (1 + std::exp(-x)); }, 6e-6, 1e-43},
};

/// Every 4099th float bit pattern (about a million values, both signs, denormals,
/// infinities and NaNs), plus the special values.
std::vector<float> sweep() {
  std::vector<float> v;
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 4099) {
    uint32_t b = uint32_t(u);
    float f;
    std::memcpy(&f, &b, 4);
    v.push_back(f);
  }
  for (float f : {0.0f, -0.0f, 1e-45f, -1e-45f, 1.17549435e-38f, 1.0f, -1.0f, 0.5f, 88.7f, -87.3f,
                  -103.9f, 9.1f, 10.5f, 3.4e38f, -3.4e38f, kInf, -kInf, kNaN})
    v.push_back(f);
  return v;
}

struct ErrorStats {
  double maxRel = 0, maxAbsDenormal = 0, maxAbsTail = 0;
  float worstRel = 0, worstTail = 0;
  bool nanMismatch = false;
  float nanAt = 0;
};

ErrorStats measure(const MathFn &m, const std::vector<float> &xs, const std::vector<float> &ys) {
  ErrorStats s;
  for (size_t i = 0; i < xs.size(); i++) {
    double ref = m.ref(double(xs[i]));
    double y = double(ys[i]);
    // The reference rounded to float decides the special cases: NaN and infinities must
    // match exactly; the error is measured against the unrounded reference.
    float rf = float(ref);
    if (std::isnan(rf) || std::isnan(y)) {
      if (std::isnan(rf) != std::isnan(y) && !s.nanMismatch) {
        s.nanMismatch = true;
        s.nanAt = xs[i];
      }
      continue;
    }
    if (std::isinf(rf) || std::isinf(y)) {
      if (rf != float(y) && !s.nanMismatch) {
        s.nanMismatch = true;
        s.nanAt = xs[i];
      }
      continue;
    }
    double err = std::fabs(y - ref);
    if (double(xs[i]) < m.relFrom) {
      if (err > s.maxAbsTail) {
        s.maxAbsTail = err;
        s.worstTail = xs[i];
      }
    } else if (std::fabs(ref) >= double(std::numeric_limits<float>::min())) {
      if (err / std::fabs(ref) > s.maxRel) {
        s.maxRel = err / std::fabs(ref);
        s.worstRel = xs[i];
      }
    } else {
      s.maxAbsDenormal = std::max(s.maxAbsDenormal, err);
    }
  }
  return s;
}

void checkStats(const MathFn &m, const ErrorStats &s, const std::string &where) {
  std::printf("%-10s %-8s max relative error %.3g (at x = %.9g), max absolute error below "
              "FLT_MIN %.3g\n",
              where.c_str(), m.name, s.maxRel, double(s.worstRel), s.maxAbsDenormal);
  EXPECT_FALSE(s.nanMismatch) << where << " " << m.name << ": NaN/inf differs at x = " << s.nanAt;
  EXPECT_LE(s.maxRel, m.maxRel) << where << " " << m.name << " at x = " << s.worstRel;
  EXPECT_LE(s.maxAbsDenormal, m.maxAbsDenormal) << where << " " << m.name;
  if (m.relFrom > -std::numeric_limits<double>::infinity()) {
    std::printf("%-10s %-8s below x = %g: max absolute error %.3g (at x = %.9g)\n", where.c_str(),
                m.name, m.relFrom, s.maxAbsTail, double(s.worstTail));
    EXPECT_LE(s.maxAbsTail, m.maxAbsTail) << where << " " << m.name << " at x = " << s.worstTail;
  }
}

TEST(ElementwiseMath, NativeAccuracyOverTheFloatRange) {
  std::vector<float> xs = sweep(), ys(xs.size());
  for (const MathFn &m : kMathFns) {
    for (size_t i = 0; i < xs.size(); i++)
      ys[i] = m.fn(xs[i]);
    checkStats(m, measure(m, xs, ys), "native");
  }
}

// Sigmoid's exponential of non-positive arguments (one scale 2^(n + 64) and a multiply by
// 2^-64) gives expF's bits on every float with the sign bit set (zero, the denormals, the
// range clamped at -104, -inf and NaN with the sign bit).
TEST(ElementwiseMath, ExpOfNonPositiveIsExpBitForBit) {
  uint64_t checked = 0;
  for (uint64_t b = 0x80000000u; b <= 0xffffffffu; b += 7) {
    float x;
    uint32_t u = uint32_t(b);
    std::memcpy(&x, &u, 4);
    float a = libjit::expF(x), e = libjit::expNegF(x);
    if (std::isnan(a)) {
      ASSERT_TRUE(std::isnan(e)) << "x bits " << u;
      continue;
    }
    ASSERT_EQ(libjit::asBits(a), libjit::asBits(e)) << "x = " << x << " (bits " << u << ")";
    checked++;
  }
  EXPECT_GT(checked, 300000000u / 7);
}

TEST(ElementwiseMath, SpecialValues) {
  EXPECT_EQ(libjit_elem_exp_f32(-kInf), 0.0f);
  EXPECT_EQ(libjit_elem_exp_f32(kInf), kInf);
  EXPECT_EQ(libjit_elem_exp_f32(89.0f), kInf);
  EXPECT_EQ(libjit_elem_exp_f32(0.0f), 1.0f);
  EXPECT_GT(libjit_elem_exp_f32(-100.0f), 0.0f); // a denormal, not flushed
  EXPECT_TRUE(std::isnan(libjit_elem_exp_f32(kNaN)));
  EXPECT_EQ(libjit_elem_log_f32(0.0f), -kInf);
  EXPECT_EQ(libjit_elem_log_f32(-0.0f), -kInf);
  EXPECT_TRUE(std::isnan(libjit_elem_log_f32(-1.0f)));
  EXPECT_TRUE(std::isnan(libjit_elem_log_f32(-kInf)));
  EXPECT_EQ(libjit_elem_log_f32(kInf), kInf);
  EXPECT_EQ(libjit_elem_log_f32(1.0f), 0.0f);
  EXPECT_NEAR(libjit_elem_log_f32(1e-45f), std::log(double(1e-45f)), 1e-5);
  EXPECT_EQ(libjit_elem_tanh_f32(kInf), 1.0f);
  EXPECT_EQ(libjit_elem_tanh_f32(-kInf), -1.0f);
  EXPECT_TRUE(std::signbit(libjit_elem_tanh_f32(-0.0f)));
  EXPECT_EQ(libjit_elem_erf_f32(kInf), 1.0f);
  EXPECT_EQ(libjit_elem_erf_f32(-kInf), -1.0f);
  EXPECT_EQ(libjit_elem_sigmoid_f32(-kInf), 0.0f);
  EXPECT_EQ(libjit_elem_sigmoid_f32(kInf), 1.0f);
  EXPECT_EQ(geluErfKernel(kInf), kInf);
  EXPECT_EQ(geluTanhKernel(kInf), kInf);
  for (auto *f :
       {libjit_elem_tanh_f32, libjit_elem_erf_f32, libjit_elem_sigmoid_f32, geluErfKernel,
        geluTanhKernel, libjit_elem_swish_f32, libjit_elem_log_f32})
    EXPECT_TRUE(std::isnan(f(kNaN)));
  // The rationals never leave [-1, 1], and the GELUs keep the sign of x (1 + erf and
  // 1 + tanh are never negative), on every float of [-12, 12] in steps of 2^-10 and
  // near the ends of the rationals' ranges.
  for (float x = -12.0f; x <= 12.0f; x += 1.0f / 1024) {
    ASSERT_LE(std::fabs(libjit_elem_erf_f32(x)), 1.0f) << x;
    ASSERT_LE(std::fabs(libjit_elem_tanh_f32(x)), 1.0f) << x;
    ASSERT_LE(geluErfKernel(-std::fabs(x)), 0.0f) << x;
    ASSERT_LE(geluTanhKernel(-std::fabs(x)), 0.0f) << x;
  }
  for (float c : {3.92f, 9.02f})
    for (float x = c - 0.05f; x <= c + 0.05f; x = std::nextafter(x, 10.0f)) {
      ASSERT_LE(libjit_elem_erf_f32(x), 1.0f) << x;
      ASSERT_LE(libjit_elem_tanh_f32(x), 1.0f) << x;
    }
  // Saturated: exact 1 and exact 0 (the GELUs' tails), for large and huge arguments.
  EXPECT_EQ(libjit_elem_erf_f32(3.92f), 1.0f);
  EXPECT_EQ(libjit_elem_erf_f32(-1e30f), -1.0f);
  EXPECT_EQ(libjit_elem_tanh_f32(9.02f), 1.0f);
  EXPECT_EQ(libjit_elem_tanh_f32(-1e30f), -1.0f);
  EXPECT_EQ(geluErfKernel(-5.6f), 0.0f);
  EXPECT_EQ(geluErfKernel(-1e30f), 0.0f);
  EXPECT_EQ(geluTanhKernel(-5.2f), 0.0f);
  EXPECT_EQ(geluTanhKernel(-1e30f), 0.0f);
  EXPECT_EQ(geluErfKernel(1e30f), 1e30f);
  EXPECT_EQ(geluTanhKernel(1e30f), 1e30f);
  // Denormal inputs are not flushed: tanh and erf are odd and linear there.
  EXPECT_EQ(libjit_elem_tanh_f32(1e-40f), 1e-40f);
  EXPECT_NEAR(libjit_elem_erf_f32(1e-40f), 1.1283791670955126e-40, 2e-45);
}

TEST(ElementwiseKernels, IntegerArithmetic) {
  const int32_t mn = std::numeric_limits<int32_t>::min(), mx = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(libjit_elem_add_i32(mx, 1), mn);
  EXPECT_EQ(libjit_elem_sub_i32(mn, 1), mx);
  EXPECT_EQ(libjit_elem_mul_i32(65536, 65536), 0);
  EXPECT_EQ(libjit_elem_div_i32(-7, 2), -3);
  EXPECT_EQ(libjit_elem_div_i32(7, -2), -3);
  EXPECT_EQ(libjit_elem_div_i32(mn, -1), mn);
  EXPECT_EQ(libjit_elem_div_i32(5, 0), 0);
  EXPECT_EQ(libjit_elem_div_i64(std::numeric_limits<int64_t>::min(), -1),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(libjit_elem_div_i64(-9, 0), 0);
  EXPECT_EQ(libjit_elem_neg_i32(mn), mn);
  EXPECT_EQ(libjit_elem_abs_i32(mn), mn);
  EXPECT_EQ(libjit_elem_abs_i64(-5), 5);
  EXPECT_EQ(libjit_elem_max_i64(-5, 3), 3);
  EXPECT_EQ(libjit_elem_min_i64(-5, 3), -5);
  EXPECT_EQ(libjit_elem_cmplt_i64(-5, 3), 1);
  EXPECT_EQ(libjit_elem_cmplte_i32(3, 3), 1);
  EXPECT_EQ(libjit_elem_cmpeq_f32(kNaN, kNaN), 0);
  EXPECT_EQ(libjit_elem_select_i64(1, 7, 9), 7);
  EXPECT_EQ(libjit_elem_select_bool(0, 1, 0), 0);
}

TEST(ElementwiseKernels, ModBitShiftIntegerPow) {
  const int32_t mn = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(libjit_elem_mod_i32(-5, 3, false), 1);
  EXPECT_EQ(libjit_elem_mod_i32(-5, 3, true), -2);
  EXPECT_EQ(libjit_elem_mod_i32(5, -3, false), -1);
  EXPECT_EQ(libjit_elem_mod_i32(mn, -1, false), 0);
  EXPECT_EQ(libjit_elem_mod_i64(7, 0, true), 0);
  EXPECT_EQ(libjit_elem_mod_f32(-7.5f, 2.0f, false), 0.5f);
  EXPECT_EQ(libjit_elem_mod_f32(-7.5f, 2.0f, true), -1.5f);
  EXPECT_TRUE(std::isnan(libjit_elem_mod_f32(1.0f, 0.0f, true)));
  EXPECT_EQ(libjit_elem_bitshift_i32(-1, 28, false), 15);
  EXPECT_EQ(libjit_elem_bitshift_i32(1, 31, true), mn);
  EXPECT_EQ(libjit_elem_bitshift_i32(1, 32, true), 0);
  EXPECT_EQ(libjit_elem_bitshift_i64(5, -1, true), 0);
  EXPECT_EQ(libjit_elem_pow_i32(2, 31), mn);
  EXPECT_EQ(libjit_elem_pow_i32(-2, 3), -8);
  EXPECT_EQ(libjit_elem_pow_i32(-1, -3), -1);
  EXPECT_EQ(libjit_elem_pow_i32(5, -1), 0);
  EXPECT_EQ(libjit_elem_pow_i64(3, 40), -6289078614652622815LL);
  EXPECT_EQ(libjit_elem_sin_f32(0.5f), std::sin(0.5f));
  EXPECT_EQ(libjit_elem_atanh_f32(1.0f), std::numeric_limits<float>::infinity());
}

/// The 16-bit float conversions against kiln::float16 / kiln::bfloat16 (the Interpreter's),
/// bit for bit: every 16-bit pattern to float and back, and every 257th float pattern
/// (all exponents, denormals, infinities, NaN) to 16 bits; integers through round to odd.
TEST(ElementwiseKernels, HalfAndBfloatConversionsAreBitExact) {
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  for (uint32_t h = 0; h < 65536; h++) {
    float ref = float16::toFloat(uint16_t(h)), got = libjit_elem_convertto_f16_f32(uint16_t(h));
    ASSERT_EQ(bits(got), bits(ref)) << "f16 " << h;
    float bref = bfloat16::toFloat(uint16_t(h)), bgot = libjit_elem_convertto_bf16_f32(uint16_t(h));
    ASSERT_EQ(bits(bgot), bits(bref)) << "bf16 " << h;
    if (!std::isnan(ref))
      ASSERT_EQ(libjit_elem_convertto_f32_f16(ref), uint16_t(h)) << "f16 round trip " << h;
  }
  for (uint64_t u = 0; u <= 0xffffffffull; u += 257) {
    float f;
    uint32_t u32 = uint32_t(u);
    std::memcpy(&f, &u32, 4);
    ASSERT_EQ(libjit_elem_convertto_f32_f16(f), float16::fromFloat(f)) << std::hex << u32;
    ASSERT_EQ(libjit_elem_convertto_f32_bf16(f), bfloat16::fromFloat(f)) << std::hex << u32;
  }
  // Integers round once: 2^24 + 2^16 + 1 lies just above a bfloat16 midpoint (through
  // float's nearest even it would round down to 2^24).
  EXPECT_EQ(libjit_elem_convertto_i32_bf16(16777216 + 65536 + 1), bfloat16(16908288.0f).bits());
  EXPECT_EQ(libjit_elem_convertto_i64_f16(65519), float16(65504.0f).bits());
  EXPECT_EQ(libjit_elem_convertto_i64_f16(65520), float16::fromFloat(65536.0f)); // infinity
  EXPECT_EQ(libjit_elem_convertto_i64_bf16(std::numeric_limits<int64_t>::min()),
            bfloat16(-9223372036854775808.0f).bits());
  EXPECT_EQ(libjit_elem_convertto_f16_i32(float16(-2.5f).bits()), -2);
  EXPECT_EQ(libjit_elem_convertto_bf16_bool(bfloat16(-0.0f).bits()), 0);
  EXPECT_EQ(libjit_elem_convertto_bool_f16(1), float16(1.0f).bits());
  EXPECT_EQ(libjit_elem_convertto_f16_bf16(float16(0.1f).bits()),
            bfloat16(float(float16(0.1f))).bits());
}

TEST(ElementwiseKernels, ConvertTo) {
  EXPECT_EQ(libjit_elem_convertto_f32_i32(2.5f), 2);
  EXPECT_EQ(libjit_elem_convertto_f32_i32(-2.5f), -2);
  EXPECT_EQ(libjit_elem_convertto_f32_i32(3.5f), 4);
  EXPECT_EQ(libjit_elem_convertto_f32_i32(3e9f), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(libjit_elem_convertto_f32_i32(-3e9f), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(libjit_elem_convertto_f32_i32(2147483520.0f), 2147483520);
  EXPECT_EQ(libjit_elem_convertto_f32_i32(kNaN), 0);
  EXPECT_EQ(libjit_elem_convertto_f32_i32(-kInf), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(libjit_elem_convertto_f32_i64(1e19f), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(libjit_elem_convertto_f32_i64(-1e19f), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(libjit_elem_convertto_f32_i64(-9.2233720e18f), int64_t(-9.2233720e18f));
  EXPECT_EQ(libjit_elem_convertto_f32_i64(kNaN), 0);
  EXPECT_EQ(libjit_elem_convertto_f32_bool(kNaN), 1);
  EXPECT_EQ(libjit_elem_convertto_f32_bool(-0.0f), 0);
  EXPECT_EQ(libjit_elem_convertto_i64_i32(5000000000LL), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(libjit_elem_convertto_i64_i32(-5000000000LL), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(libjit_elem_convertto_i64_f32(16777217), 16777216.0f);
  EXPECT_EQ(libjit_elem_convertto_i32_i64(-7), -7);
  EXPECT_EQ(libjit_elem_convertto_bool_f32(1), 1.0f);
  EXPECT_EQ(libjit_elem_convertto_bool_i64(0), 0);
  EXPECT_EQ(libjit_elem_convertto_i32_bool(-3), 1);
}

// ---------------------------------------------------------------- through the JIT

/// Runs y = op(x) for every element of \p xs through the CPU backend (AVX2 when
/// \p avx2), one node per function.
std::vector<std::vector<float>> runJit(const std::vector<float> &xs, bool avx2) {
  Module mod;
  Function *F = mod.createFunction("main");
  auto *x = mod.createPlaceholder(ElemKind::Float, {dim_t(xs.size())}, "x");
  std::vector<SaveNode *> saves;
  saves.push_back(F->createSave("exp", F->createExp("exp", x)));
  saves.push_back(F->createSave("log", F->createLog("log", x)));
  saves.push_back(F->createSave("sigmoid", F->createSigmoid("sigmoid", x)));
  saves.push_back(F->createSave("tanh", F->createTanh("tanh", x)));
  saves.push_back(F->createSave("erf", F->createErf("erf", x)));
  saves.push_back(F->createSave("gelu", F->createGelu("gelu", x, false)));
  saves.push_back(F->createSave("gelu_tanh", F->createGelu("gelu_tanh", x, true)));
  saves.push_back(F->createSave("swish", F->createSwish("swish", x)));
  cpu::CPUBackendOptions o;
  o.disableAvx512 = avx2;
  cpu::CPUBackend cpu(o);
  CompileOptions opts;
  auto cf = compileFunction(F, cpu, opts);
  EXPECT_TRUE(bool(cf)) << cf.getError().message();
  if (!cf)
    return {};
  PlaceholderBindings b;
  b.allocate(mod.getPlaceholders());
  std::memcpy(b.get(x)->getUnsafePtr(), xs.data(), xs.size() * 4);
  ExecutionContext ctx(&b);
  Error e = (*cf)->execute(ctx);
  EXPECT_FALSE(bool(e)) << e.message();
  std::vector<std::vector<float>> out;
  for (SaveNode *s : saves) {
    const float *p = reinterpret_cast<const float *>(b.get(s->getPlaceholder())->getUnsafePtr());
    out.emplace_back(p, p + xs.size());
  }
  return out;
}

TEST(ElementwiseMath, JitAccuracyBothIsas) {
  std::vector<float> xs = sweep();
  bool any = false;
  for (bool avx2 : {false, true}) {
    if (!avx2 && !(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")))
      continue;
    if (avx2 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")))
      continue;
    any = true;
    auto out = runJit(xs, avx2);
    ASSERT_EQ(out.size(), std::size(kMathFns));
    for (size_t f = 0; f < out.size(); f++)
      checkStats(kMathFns[f], measure(kMathFns[f], xs, out[f]), avx2 ? "jit avx2" : "jit avx512");
  }
  if (!any)
    GTEST_SKIP() << "the host has neither AVX2 nor AVX-512";
}

/// A squeeze-and-excitation chain with a row broadcast and HardSigmoid's splats, large
/// enough to run on two threads (split by rows), on every configuration (AVX-512, AVX2,
/// two threads, unfused) against the Interpreter.
TEST(ElementwiseChains, BroadcastsAndSplatsOnEveryConfiguration) {
  auto build = [](Module &mod, std::vector<Placeholder *> &in) {
    Function *F = mod.createFunction("main");
    const Dims d = {2, 8, 40, 40};
    const std::vector<dim_t> dv = {2, 8, 40, 40};
    auto *x = mod.createPlaceholder(ElemKind::Float, d, "x");
    auto *s = mod.createPlaceholder(ElemKind::Float, {2, 8, 1, 1}, "s");
    auto *row = mod.createPlaceholder(ElemKind::Float, {40}, "row");
    in = {x, s, row};
    TypeRef ty = mod.uniqueType(ElemKind::Float, d);
    NodeValue g = F->createBroadcast("bs", F->createSigmoid("sig", s), dv);
    NodeValue y = F->createMul("scale", x, g);
    y = F->createAdd("row", y, F->createBroadcast("br", row, dv));
    NodeValue hs = F->createMul("alpha", y, F->createSplat("a", ty, 0.2f));
    hs = F->createClip("clip", F->createAdd("beta", hs, F->createSplat("b", ty, 0.5f)), 0, 1);
    F->createSave("y", F->createSwish("silu", F->createMul("gate", y, hs)));
    return F;
  };
  auto runOn = [&](Backend &backend, unsigned threads) {
    Module mod;
    std::vector<Placeholder *> in;
    Function *F = build(mod, in);
    CompileOptions opts;
    opts.threads = threads;
    auto cf = compileFunction(F, backend, opts);
    EXPECT_TRUE(bool(cf)) << cf.getError().message();
    if (!cf)
      return std::vector<float>();
    PlaceholderBindings b;
    b.allocate(mod.getPlaceholders());
    for (size_t i = 0; i < in.size(); i++) {
      PseudoRNG rng(7 + i);
      b.get(in[i])->randomize(-3, 3, rng);
    }
    ExecutionContext ctx(&b);
    Error e = (*cf)->execute(ctx);
    EXPECT_FALSE(bool(e)) << e.message();
    Tensor *t = b.get(mod.getPlaceholderByName("y"));
    const float *p = reinterpret_cast<const float *>(t->getUnsafePtr());
    return std::vector<float>(p, p + t->size());
  };
  auto interp = createBackend("Interpreter");
  ASSERT_TRUE(bool(interp));
  std::vector<float> want = runOn(**interp, 1);
  struct Config {
    unsigned threads;
    bool avx2, fuse;
  };
  for (Config c : {Config{1, false, true}, Config{2, false, true}, Config{1, true, true},
                   Config{2, true, true}, Config{2, false, false}}) {
    SCOPED_TRACE("threads " + std::to_string(c.threads) + (c.avx2 ? " avx2" : "") +
                 (c.fuse ? "" : " unfused"));
    cpu::CPUBackendOptions o;
    o.disableAvx512 = c.avx2;
    o.fuseElementwise = c.fuse;
    cpu::CPUBackend cpu(o);
    std::vector<float> got = runOn(cpu, c.threads);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); i++)
      ASSERT_NEAR(got[i], want[i], 1e-5 + 1e-5 * std::fabs(want[i])) << "element " << i;
  }
}

} // namespace
} // namespace kiln
