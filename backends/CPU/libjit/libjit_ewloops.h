// The element-wise loops compiled once as shared kernels (libjit_elementwise.cpp, "shared
// loops") as X-macros over the operator's lower-case name: what the JIT's list of shared
// kernels (backends/CPU/jit) and the emitter (codegen/EmitElementwise.cpp) both read.
// Macros only: the JIT includes it without the kernels.
#ifndef KILN_BACKENDS_CPU_LIBJIT_LIBJIT_EWLOOPS_H
#define KILN_BACKENDS_CPU_LIBJIT_LIBJIT_EWLOOPS_H

/// libjit_ew_<op>_f32(in, out, begin, end): out[i] = op(in[i]).
#define LIBJIT_EW_UNARY_LOOPS(X)                                                                   \
  X(relu) X(sigmoid) X(tanh) X(hardswish) X(swish) X(exp) X(log) X(sqrt) X(erf) X(neg) X(abs)      \
  X(reciprocal)
/// libjit_ew_<op>_f32(a, b, out, begin, end): out[i] = op(a[i], b[i]).
#define LIBJIT_EW_BINARY_LOOPS(X) X(add) X(sub) X(mul) X(div) X(max) X(min)
/// libjit_ew_rows_<op>_f32(x, src, out, len, srcRowStride, srcStep, begin, end): rows
/// [begin, end) of len elements, out[r * len + j] = op(x[r * len + j], src[r * srcRowStride
/// + j * srcStep]) with srcStep 0 (a value per row) or 1 (a vector per row). Commutative
/// operators only: the chain may name the broadcast first or second.
#define LIBJIT_EW_ROW_LOOPS(X) X(add) X(mul)

#endif // KILN_BACKENDS_CPU_LIBJIT_LIBJIT_EWLOOPS_H
