// Shared definitions of the kernel library. The kernels are freestanding C++: no libc
// (math functions are compiler builtins, which may resolve to libm inside the process), no
// globals, no allocation; every parameter is passed in. The same sources are compiled to
// LLVM bitcode (clang, target-neutral, for the JIT) and natively (for unit tests).
#ifndef KILN_BACKENDS_CPU_LIBJIT_LIBJIT_DEFS_H
#define KILN_BACKENDS_CPU_LIBJIT_LIBJIT_DEFS_H

#include <stddef.h>
#include <stdint.h>

#define LIBJIT_EXPORT extern "C"
#define LIBJIT_INLINE static inline __attribute__((always_inline))
#define LIBJIT_NOINLINE __attribute__((noinline))

#if defined(__clang__)
#define LIBJIT_UNROLL _Pragma("clang loop unroll(full)")
#else
#define LIBJIT_UNROLL _Pragma("GCC unroll 64")
#endif

namespace libjit {

LIBJIT_INLINE int64_t minI(int64_t a, int64_t b) { return a < b ? a : b; }
LIBJIT_INLINE int64_t maxI(int64_t a, int64_t b) { return a > b ? a : b; }
LIBJIT_INLINE int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Splits [0, n) into nthreads contiguous ranges whose boundaries are multiples of \p unit.
LIBJIT_INLINE void partition(int64_t n, int64_t unit, int64_t tid, int64_t nthreads,
                             int64_t *begin, int64_t *end) {
  int64_t units = ceilDiv(n, unit);
  int64_t per = ceilDiv(units, nthreads);
  int64_t b = minI(tid * per * unit, n);
  *begin = b;
  *end = minI(b + per * unit, n);
}

/// Whether \p units of work shared by \p nthreads (partition) leave the busiest thread more
/// than 1/32 above an even share (7 and 6 of 13): then a kernel that can halve its units
/// (each unit's output channels in two) shares them better (6.5 each).
LIBJIT_INLINE bool unevenShares(int64_t units, int64_t nthreads) {
  return 32 * ceilDiv(units, nthreads) * nthreads > 33 * units;
}

} // namespace libjit

#endif // KILN_BACKENDS_CPU_LIBJIT_LIBJIT_DEFS_H
