// The int8 kernels' last step, shared: a real value requantized as the Interpreter does.
#ifndef KILN_BACKENDS_CPU_LIBJIT_LIBJIT_QROUND_H
#define KILN_BACKENDS_CPU_LIBJIT_LIBJIT_QROUND_H

#include "libjit_defs.h"

namespace libjit {

/// round(real / outScale) half away from zero, plus outOffset, saturated to int8, in double.
LIBJIT_INLINE int8_t qroundI8(double real, double outScale, double outOffset) {
  double q = __builtin_round(real / outScale);
  q = q + outOffset;
  if (!(q >= -128.0))
    q = -128.0;
  if (q > 127.0)
    q = 127.0;
  return int8_t(q);
}

} // namespace libjit

#endif // KILN_BACKENDS_CPU_LIBJIT_LIBJIT_QROUND_H
