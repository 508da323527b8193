// The element kinds of the element-wise kernels (libjit_elementwise.cpp) as X-macros over
// (suffix, C type), and the declarations of the kernels beyond libjit.h's float ones, for
// the native tests and benchmarks. Bool is stored as one byte (uint8_t).
#ifndef KILN_BACKENDS_CPU_LIBJIT_LIBJIT_ELEMENTWISE_H
#define KILN_BACKENDS_CPU_LIBJIT_LIBJIT_ELEMENTWISE_H

#include "libjit_defs.h"

#define LIBJIT_INDEX_KINDS(X) X(i32, int32_t) X(i64, int64_t)
#define LIBJIT_NUMERIC_KINDS(X) X(f32, float) LIBJIT_INDEX_KINDS(X)
/// The float functions computed by libm (as the Interpreter does).
#define LIBJIT_LIBM_UNARY(X)                                                                       \
  X(sin) X(cos) X(tan) X(asin) X(acos) X(atan) X(sinh) X(cosh) X(asinh) X(acosh) X(atanh)
#define LIBJIT_PLAIN_KINDS(X) LIBJIT_NUMERIC_KINDS(X) X(bool, uint8_t)

#define LIBJIT_DECLARE_INT_ARITH(K, T)                                                             \
  LIBJIT_EXPORT T libjit_elem_add_##K(T a, T b);                                                   \
  LIBJIT_EXPORT T libjit_elem_sub_##K(T a, T b);                                                   \
  LIBJIT_EXPORT T libjit_elem_mul_##K(T a, T b);                                                   \
  LIBJIT_EXPORT T libjit_elem_div_##K(T a, T b);                                                   \
  LIBJIT_EXPORT T libjit_elem_max_##K(T a, T b);                                                   \
  LIBJIT_EXPORT T libjit_elem_min_##K(T a, T b);                                                   \
  LIBJIT_EXPORT T libjit_elem_neg_##K(T a);                                                        \
  LIBJIT_EXPORT T libjit_elem_abs_##K(T a);                                                        \
  LIBJIT_EXPORT T libjit_elem_mod_##K(T a, T b, bool fmod);                                        \
  LIBJIT_EXPORT uint8_t libjit_elem_cmpeq_##K(T a, T b);                                           \
  LIBJIT_EXPORT uint8_t libjit_elem_cmplt_##K(T a, T b);                                           \
  LIBJIT_EXPORT uint8_t libjit_elem_cmplte_##K(T a, T b);
LIBJIT_NUMERIC_KINDS(LIBJIT_DECLARE_INT_ARITH)
#undef LIBJIT_DECLARE_INT_ARITH

#define LIBJIT_DECLARE_INT_ONLY(K, T)                                                              \
  LIBJIT_EXPORT T libjit_elem_bitshift_##K(T a, T b, bool left);                                   \
  LIBJIT_EXPORT T libjit_elem_pow_##K(T a, T b);
LIBJIT_INDEX_KINDS(LIBJIT_DECLARE_INT_ONLY)
#undef LIBJIT_DECLARE_INT_ONLY

#define LIBJIT_DECLARE_LIBM_UNARY(OP) LIBJIT_EXPORT float libjit_elem_##OP##_f32(float x);
LIBJIT_LIBM_UNARY(LIBJIT_DECLARE_LIBM_UNARY)
#undef LIBJIT_DECLARE_LIBM_UNARY

/// ConvertTo's kinds: the plain ones and the 16-bit floats (stored as uint16_t).
#define LIBJIT_CONVERTIBLE_KINDS(X) LIBJIT_PLAIN_KINDS(X) X(f16, uint16_t) X(bf16, uint16_t)
/// X(KT, TT, KF, TF) for every target kind KT of source KF.
#define LIBJIT_CONVERTIBLE_KINDS_TO(X, KF, TF)                                                     \
  X(f32, float, KF, TF) X(i32, int32_t, KF, TF) X(i64, int64_t, KF, TF) X(bool, uint8_t, KF, TF)  \
  X(f16, uint16_t, KF, TF) X(bf16, uint16_t, KF, TF)

#define LIBJIT_DECLARE_SELECT(KF, TF) LIBJIT_EXPORT TF libjit_elem_select_##KF(uint8_t c, TF a, TF b);
LIBJIT_PLAIN_KINDS(LIBJIT_DECLARE_SELECT)
#undef LIBJIT_DECLARE_SELECT
#define LIBJIT_DECLARE_CONVERT_TO(KT, TT, KF, TF)                                                  \
  LIBJIT_EXPORT TT libjit_elem_convertto_##KF##_##KT(TF x);
#define LIBJIT_DECLARE_CONVERT_FROM(KF, TF) LIBJIT_CONVERTIBLE_KINDS_TO(LIBJIT_DECLARE_CONVERT_TO, KF, TF)
LIBJIT_CONVERTIBLE_KINDS(LIBJIT_DECLARE_CONVERT_FROM)
#undef LIBJIT_DECLARE_CONVERT_FROM
#undef LIBJIT_DECLARE_CONVERT_TO

#endif // KILN_BACKENDS_CPU_LIBJIT_LIBJIT_ELEMENTWISE_H
