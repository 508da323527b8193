// The element kinds of the element-wise kernels (libjit_elementwise.cpp) as X-macros over
// (suffix, C type), and the declarations of the kernels beyond libjit.h's float ones, for
// the native tests and benchmarks. Bool is stored as one byte (uint8_t).
#ifndef KILN_BACKENDS_CPU_LIBJIT_LIBJIT_ELEMENTWISE_H
#define KILN_BACKENDS_CPU_LIBJIT_LIBJIT_ELEMENTWISE_H

#include "libjit_defs.h"

#define LIBJIT_NUMERIC_KINDS(X) X(f32, float) X(i32, int32_t) X(i64, int64_t)
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
  LIBJIT_EXPORT uint8_t libjit_elem_cmpeq_##K(T a, T b);                                           \
  LIBJIT_EXPORT uint8_t libjit_elem_cmplt_##K(T a, T b);                                           \
  LIBJIT_EXPORT uint8_t libjit_elem_cmplte_##K(T a, T b);
LIBJIT_NUMERIC_KINDS(LIBJIT_DECLARE_INT_ARITH)
#undef LIBJIT_DECLARE_INT_ARITH

#define LIBJIT_DECLARE_CONVERT_TO(KT, TT, KF, TF)                                                  \
  LIBJIT_EXPORT TT libjit_elem_convertto_##KF##_##KT(TF x);
#define LIBJIT_DECLARE_PLAIN(KF, TF)                                                               \
  LIBJIT_EXPORT TF libjit_elem_select_##KF(uint8_t c, TF a, TF b);                                 \
  LIBJIT_DECLARE_CONVERT_TO(f32, float, KF, TF)                                                    \
  LIBJIT_DECLARE_CONVERT_TO(i32, int32_t, KF, TF)                                                  \
  LIBJIT_DECLARE_CONVERT_TO(i64, int64_t, KF, TF)                                                  \
  LIBJIT_DECLARE_CONVERT_TO(bool, uint8_t, KF, TF)
LIBJIT_PLAIN_KINDS(LIBJIT_DECLARE_PLAIN)
#undef LIBJIT_DECLARE_PLAIN
#undef LIBJIT_DECLARE_CONVERT_TO

#endif // KILN_BACKENDS_CPU_LIBJIT_LIBJIT_ELEMENTWISE_H
