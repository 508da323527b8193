/// \file
/// Seeded uniform test data in [-1, 1] for the kernel tests (native kernels and the JIT).
#ifndef KILN_TEST_CPU_RANDOMVEC_H
#define KILN_TEST_CPU_RANDOMVEC_H

#include <random>
#include <vector>

inline std::vector<float> randomVec(size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(g);
  return v;
}

#endif // KILN_TEST_CPU_RANDOMVEC_H
