// The int8 kernels' last step, shared: a real value requantized as the Interpreter does.
#ifndef KILN_BACKENDS_CPU_LIBJIT_LIBJIT_QROUND_H
#define KILN_BACKENDS_CPU_LIBJIT_LIBJIT_QROUND_H

#include "libjit_defs.h"

namespace libjit {

/// round(real / outScale) half away from zero, plus outOffset, saturated to [lo, hi] (int8's
/// range, or a fused activation's narrower bounds), in double.
LIBJIT_INLINE int8_t qroundI8(double real, double outScale, double outOffset, double lo = -128.0,
                              double hi = 127.0) {
  double q = __builtin_round(real / outScale);
  q = q + outOffset;
  if (!(q >= lo))
    q = lo;
  if (q > hi)
    q = hi;
  return int8_t(q);
}

} // namespace libjit

#endif // KILN_BACKENDS_CPU_LIBJIT_LIBJIT_QROUND_H
