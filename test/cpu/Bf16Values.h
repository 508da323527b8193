// Test inputs shared by the bf16 kernel tests (Bf16GemmTest.cpp, Bf16ConvTest.cpp).
#pragma once

#include "kiln/kiln.h"

#include <cstdint>
#include <random>
#include <vector>

namespace kiln::bf16test {

/// bf16 values uniform in [-1, 1] (as bit patterns), seeded.
inline std::vector<uint16_t> randomBf16(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<uint16_t> v(n);
  for (auto &x : v)
    x = bfloat16(d(g)).bits();
  return v;
}

/// The float value of bf16 bits.
inline float f(uint16_t b) { return float(bfloat16::fromBits(b)); }

} // namespace kiln::bf16test
