// Element-wise operators as scalar functions, one per operator and element kind
// (libjit_elem_<op>_<kind>, ConvertTo libjit_elem_convertto_<from>_<to>; kinds f32, i32,
// i64, bool). The backend fuses chains of element-wise instructions into one loop that
// calls these; after inlining, LLVM vectorises the loop for the host, so every function
// here is branch-free: the transcendental ones are the polynomials of libjit_math.h, not
// libm calls. Semantics follow src/ClassGen/NodeTable.cpp and the Interpreter: integer
// arithmetic wraps; integer division truncates toward zero, MIN / -1 is MIN and x / 0 is 0
// (the Interpreter reports x / 0 as an error; the CPU's kernels cannot stop a run, so they
// define the result instead); Bool is one byte holding 0 or 1.
#include "libjit_elementwise.h"
#include "libjit.h"
#include "libjit_math.h"

using namespace libjit;

// ---------------------------------------------------------------- float activations

// NaN propagates through Relu, Max and Min (as in the Interpreter).
LIBJIT_EXPORT float libjit_elem_relu_f32(float x) { return x < 0.0f ? 0.0f : x; }
LIBJIT_EXPORT float libjit_elem_sigmoid_f32(float x) { return sigmoidF(x); }
LIBJIT_EXPORT float libjit_elem_tanh_f32(float x) { return tanhF(x); }
LIBJIT_EXPORT float libjit_elem_gelu_f32(float x) { return geluF(x); }
LIBJIT_EXPORT float libjit_elem_gelu_tanh_f32(float x) { return geluTanhF(x); }
LIBJIT_EXPORT float libjit_elem_hardswish_f32(float x) {
  float t = x + 3.0f;
  t = t < 0.0f ? 0.0f : t;
  t = t > 6.0f ? 6.0f : t;
  return x * t / 6.0f;
}
LIBJIT_EXPORT float libjit_elem_swish_f32(float x) { return x * sigmoidF(x); }
LIBJIT_EXPORT float libjit_elem_clip_f32(float x, float lo, float hi) {
  x = x < lo ? lo : x;
  return x > hi ? hi : x;
}
LIBJIT_EXPORT float libjit_elem_leakyrelu_f32(float x, float alpha) {
  return x >= 0.0f ? x : alpha * x;
}
LIBJIT_EXPORT float libjit_elem_exp_f32(float x) { return expF(x); }
LIBJIT_EXPORT float libjit_elem_log_f32(float x) { return logF(x); }
LIBJIT_EXPORT float libjit_elem_sqrt_f32(float x) { return __builtin_sqrtf(x); }
LIBJIT_EXPORT float libjit_elem_rsqrt_f32(float x) { return 1.0f / __builtin_sqrtf(x); }
LIBJIT_EXPORT float libjit_elem_reciprocal_f32(float x) { return 1.0f / x; }
LIBJIT_EXPORT float libjit_elem_erf_f32(float x) { return erfF(x); }
LIBJIT_EXPORT float libjit_elem_floor_f32(float x) { return __builtin_floorf(x); }
LIBJIT_EXPORT float libjit_elem_ceil_f32(float x) { return __builtin_ceilf(x); }
LIBJIT_EXPORT float libjit_elem_round_f32(float x) { return __builtin_rintf(x); }
LIBJIT_EXPORT float libjit_elem_pow_f32(float a, float b) { return __builtin_powf(a, b); }
LIBJIT_EXPORT float libjit_elem_prelu_f32(float x, float slope) {
  return x >= 0.0f ? x : slope * x;
}

// ---------------------------------------------------------------- arithmetic by kind

namespace {

template <typename T> struct Unsigned;
template <> struct Unsigned<int32_t> { using type = uint32_t; };
template <> struct Unsigned<int64_t> { using type = uint64_t; };
template <typename T> constexpr bool kIsFloat = sizeof(T) == 4 && T(0.5) != T(0);

/// Wrapping integer arithmetic (two's complement through the unsigned type).
template <typename T> LIBJIT_INLINE T wrap(typename Unsigned<T>::type u) { return T(u); }
template <typename T> using U = typename Unsigned<T>::type;

template <typename T> LIBJIT_INLINE T addOp(T a, T b) {
  if constexpr (kIsFloat<T>)
    return a + b;
  else
    return wrap<T>(U<T>(a) + U<T>(b));
}
template <typename T> LIBJIT_INLINE T subOp(T a, T b) {
  if constexpr (kIsFloat<T>)
    return a - b;
  else
    return wrap<T>(U<T>(a) - U<T>(b));
}
template <typename T> LIBJIT_INLINE T mulOp(T a, T b) {
  if constexpr (kIsFloat<T>)
    return a * b;
  else
    return wrap<T>(U<T>(a) * U<T>(b));
}
template <typename T> LIBJIT_INLINE T negOp(T a) {
  if constexpr (kIsFloat<T>)
    return -a;
  else
    return wrap<T>(U<T>(0) - U<T>(a));
}
template <typename T> LIBJIT_INLINE T divOp(T a, T b) {
  if constexpr (kIsFloat<T>) {
    return a / b;
  } else {
    // Divide by 1 where the hardware would trap (x / 0, MIN / -1), then pick.
    T d = (b == 0 || b == T(-1)) ? T(1) : b;
    T q = a / d;
    return b == 0 ? T(0) : (b == T(-1) ? negOp(a) : q);
  }
}
template <typename T> LIBJIT_INLINE T maxOp(T a, T b) {
  if constexpr (kIsFloat<T>)
    return a > b || a != a ? a : b;
  else
    return a > b ? a : b;
}
template <typename T> LIBJIT_INLINE T minOp(T a, T b) {
  if constexpr (kIsFloat<T>)
    return a < b || a != a ? a : b;
  else
    return a < b ? a : b;
}
/// |MIN| wraps to MIN for integers.
template <typename T> LIBJIT_INLINE T absOp(T a) {
  if constexpr (kIsFloat<T>)
    return __builtin_fabsf(a);
  else
    return a < 0 ? negOp(a) : a;
}

} // namespace

#define LIBJIT_DEFINE_ARITH(K, T)                                                                  \
  LIBJIT_EXPORT T libjit_elem_add_##K(T a, T b) { return addOp<T>(a, b); }                         \
  LIBJIT_EXPORT T libjit_elem_sub_##K(T a, T b) { return subOp<T>(a, b); }                         \
  LIBJIT_EXPORT T libjit_elem_mul_##K(T a, T b) { return mulOp<T>(a, b); }                         \
  LIBJIT_EXPORT T libjit_elem_div_##K(T a, T b) { return divOp<T>(a, b); }                         \
  LIBJIT_EXPORT T libjit_elem_max_##K(T a, T b) { return maxOp<T>(a, b); }                         \
  LIBJIT_EXPORT T libjit_elem_min_##K(T a, T b) { return minOp<T>(a, b); }                         \
  LIBJIT_EXPORT T libjit_elem_neg_##K(T a) { return negOp<T>(a); }                                 \
  LIBJIT_EXPORT T libjit_elem_abs_##K(T a) { return absOp<T>(a); }
LIBJIT_NUMERIC_KINDS(LIBJIT_DEFINE_ARITH)
#undef LIBJIT_DEFINE_ARITH

// ---------------------------------------------------------------- compares and Select

// Floats compare as IEEE: NaN is unequal and unordered.
#define LIBJIT_DEFINE_CMP(K, T)                                                                    \
  LIBJIT_EXPORT uint8_t libjit_elem_cmpeq_##K(T a, T b) { return a == b; }                         \
  LIBJIT_EXPORT uint8_t libjit_elem_cmplt_##K(T a, T b) { return a < b; }                          \
  LIBJIT_EXPORT uint8_t libjit_elem_cmplte_##K(T a, T b) { return a <= b; }
LIBJIT_NUMERIC_KINDS(LIBJIT_DEFINE_CMP)
#undef LIBJIT_DEFINE_CMP

#define LIBJIT_DEFINE_SELECT(K, T)                                                                 \
  LIBJIT_EXPORT T libjit_elem_select_##K(uint8_t c, T a, T b) { return c != 0 ? a : b; }
LIBJIT_PLAIN_KINDS(LIBJIT_DEFINE_SELECT)
#undef LIBJIT_DEFINE_SELECT

// ---------------------------------------------------------------- ConvertTo

namespace {

/// Bool is stored as uint8_t; the other kinds as themselves.
template <typename T> constexpr bool kIsBool = false;
template <> constexpr bool kIsBool<uint8_t> = true;

template <typename T> struct Limits;
template <> struct Limits<int32_t> {
  static constexpr int32_t lo = -2147483647 - 1, hi = 2147483647;
  static constexpr float loF = -2147483648.0f, hiExclusiveF = 2147483648.0f;
};
template <> struct Limits<int64_t> {
  static constexpr int64_t lo = -9223372036854775807LL - 1, hi = 9223372036854775807LL;
  static constexpr float loF = -9223372036854775808.0f, hiExclusiveF = 9223372036854775808.0f;
};

/// As the Interpreter's convertElement: floats round to nearest even into integers and
/// saturate (NaN becomes 0); integers narrow with saturation; Bool is x != 0 (NaN: true).
template <typename To, typename From> LIBJIT_INLINE To convertOp(From x) {
  if constexpr (kIsBool<To>) {
    return x != From(0) ? 1 : 0;
  } else if constexpr (kIsBool<From>) {
    return x != 0 ? To(1) : To(0);
  } else if constexpr (kIsFloat<To>) {
    return To(x); // integers round to nearest even
  } else if constexpr (kIsFloat<From>) {
    float r = __builtin_rintf(x); // the default rounding mode: nearest, ties to even
    bool inRange = r >= Limits<To>::loF && r < Limits<To>::hiExclusiveF; // false on NaN
    To v = To(inRange ? r : 0.0f);
    return r != r ? To(0)
                  : (r >= Limits<To>::hiExclusiveF ? Limits<To>::hi
                                                   : (r < Limits<To>::loF ? Limits<To>::lo : v));
  } else if constexpr (sizeof(To) >= sizeof(From)) {
    return To(x);
  } else {
    return x < From(Limits<To>::lo) ? Limits<To>::lo
                                    : (x > From(Limits<To>::hi) ? Limits<To>::hi : To(x));
  }
}

} // namespace

#define LIBJIT_DEFINE_CONVERT_TO(KT, TT, KF, TF)                                                   \
  LIBJIT_EXPORT TT libjit_elem_convertto_##KF##_##KT(TF x) { return convertOp<TT, TF>(x); }
#define LIBJIT_DEFINE_CONVERT_FROM(KF, TF)                                                         \
  LIBJIT_DEFINE_CONVERT_TO(f32, float, KF, TF)                                                     \
  LIBJIT_DEFINE_CONVERT_TO(i32, int32_t, KF, TF)                                                   \
  LIBJIT_DEFINE_CONVERT_TO(i64, int64_t, KF, TF)                                                   \
  LIBJIT_DEFINE_CONVERT_TO(bool, uint8_t, KF, TF)
LIBJIT_PLAIN_KINDS(LIBJIT_DEFINE_CONVERT_FROM)
#undef LIBJIT_DEFINE_CONVERT_FROM
#undef LIBJIT_DEFINE_CONVERT_TO
