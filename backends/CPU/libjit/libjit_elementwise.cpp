// Element-wise operators as scalar functions, one per operator and element kind
// (libjit_elem_<op>_<kind>, ConvertTo libjit_elem_convertto_<from>_<to>; kinds f32, i32,
// i64, bool; a Bool attribute of the operator, Gelu's Approximate, Mod's Fmod or BitShift's Left, is a trailing
// `bool` parameter). The backend fuses chains of element-wise instructions into one loop that
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
LIBJIT_EXPORT float libjit_elem_gelu_f32(float x, bool approximate) {
  return approximate ? geluTanhF(x) : geluF(x);
}
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

// Trigonometric and hyperbolic functions: libm's float functions, as the Interpreter's
// std:: calls, so the results are bit-identical; they stay scalar calls inside a fused
// loop (the loop around them still runs as one pass over memory).
#define LIBJIT_DEFINE_LIBM_UNARY(OP)                                                               \
  LIBJIT_EXPORT float libjit_elem_##OP##_f32(float x) { return __builtin_##OP##f(x); }
LIBJIT_LIBM_UNARY(LIBJIT_DEFINE_LIBM_UNARY)
#undef LIBJIT_DEFINE_LIBM_UNARY
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
/// Fmod: C's fmod (the sign of a; integers truncate); otherwise Python's % (the sign of
/// b). Integers: MIN % -1 is 0, x % 0 is 0 (the Interpreter reports it; a kernel cannot stop
/// a run). Floats: x % 0 is NaN.
template <typename T> LIBJIT_INLINE T modOp(T a, T b, bool fmod) {
  if constexpr (kIsFloat<T>) {
    float r = __builtin_fmodf(a, b);
    return !fmod && r != 0.0f && ((r < 0.0f) != (b < 0.0f)) ? r + b : r;
  } else {
    bool trivial = b == 0 || b == T(-1);
    T m = trivial ? T(0) : T(a % (trivial ? T(1) : b));
    return !fmod && m != 0 && ((m < 0) != (b < 0)) ? T(m + b) : m;
  }
}
/// On the unsigned bit pattern: right shifts bring in zeros; amounts outside [0, width)
/// give 0.
template <typename T> LIBJIT_INLINE T shiftOp(T a, T b, bool left) {
  bool out = b < 0 || int64_t(b) >= int64_t(sizeof(T) * 8);
  unsigned s = out ? 0u : unsigned(b);
  U<T> r = left ? U<T>(U<T>(a) << s) : U<T>(U<T>(a) >> s);
  return out ? T(0) : T(r);
}
/// Integer powers: exact with wrapping (square and multiply over every bit of the
/// exponent, a fixed trip count, no branch); a negative exponent gives the truncated
/// 1 / a^-b: 1 for a == 1, +-1 for a == -1, 0 otherwise (0^negative, an error on the
/// Interpreter, is 0).
template <typename T> LIBJIT_INLINE T powOp(T a, T b) {
  U<T> acc = 1, base = U<T>(a), e = U<T>(b);
  for (unsigned i = 0; i < sizeof(T) * 8; i++) {
    acc = (e & 1u) ? U<T>(acc * base) : acc;
    base = U<T>(base * base);
    e >>= 1;
  }
  T recip = a == 1 ? T(1) : (a == T(-1) ? ((b & 1) ? T(-1) : T(1)) : T(0));
  return b < 0 ? recip : T(acc);
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

#define LIBJIT_DEFINE_MOD(K, T)                                                                    \
  LIBJIT_EXPORT T libjit_elem_mod_##K(T a, T b, bool fmod) { return modOp<T>(a, b, fmod); }
LIBJIT_NUMERIC_KINDS(LIBJIT_DEFINE_MOD)
#undef LIBJIT_DEFINE_MOD

#define LIBJIT_DEFINE_INT_ONLY(K, T)                                                               \
  LIBJIT_EXPORT T libjit_elem_bitshift_##K(T a, T b, bool left) {                                  \
    return shiftOp<T>(a, b, left);                                                                 \
  }                                                                                                \
  LIBJIT_EXPORT T libjit_elem_pow_##K(T a, T b) { return powOp<T>(a, b); }
LIBJIT_INDEX_KINDS(LIBJIT_DEFINE_INT_ONLY)
#undef LIBJIT_DEFINE_INT_ONLY

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

// The 16-bit float kinds, stored as uint16_t, converted bit-exactly as kiln::float16 and
// kiln::bfloat16 (include/kiln/Base/Float16.h) do, without branches.

/// IEEE binary16 to float (exact): subnormals through an exact float product.
LIBJIT_INLINE float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t normal = ((exp + 112u) << 23) | (mant << 13);
  uint32_t special = 0x7f800000u | (mant << 13);
  uint32_t sub = asBits(float(mant) * 5.9604644775390625e-8f); // mant * 2^-24
  return asFloat(sign | (exp == 0 ? sub : (exp == 0x1f ? special : normal)));
}

/// Float to IEEE binary16, rounding to nearest even; NaN becomes the quiet 0x7e00 with its
/// sign, overflow infinity.
LIBJIT_INLINE uint16_t floatToHalf(float f) {
  uint32_t u = asBits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  // Normal results: rebias, round 23 mantissa bits to 10 (a carry may reach infinity).
  uint32_t r = a - 0x38000000u, res = r >> 13, rem = r & 0x1fffu;
  res += (rem > 0x1000u || (rem == 0x1000u && (res & 1u))) ? 1u : 0u;
  // Subnormal results (and zero): mant * 2^(exp - 150) = sub * 2^-24.
  int32_t exp = int32_t(a >> 23);
  uint32_t shift = uint32_t(126 - exp < 14 ? 14 : (126 - exp > 31 ? 31 : 126 - exp));
  uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  uint32_t sub = mant >> shift, srem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  sub += (srem > half || (srem == half && (sub & 1u))) ? 1u : 0u;
  uint32_t out = a > 0x7f800000u ? 0x7e00u
                                 : (a >= 0x47800000u ? 0x7c00u : (a < 0x38800000u ? sub : res));
  return uint16_t(sign | out);
}

LIBJIT_INLINE float bfloatToFloat(uint16_t b) { return asFloat(uint32_t(b) << 16); }

/// Float to bfloat16, rounding to nearest even; NaN stays a quiet NaN with its sign.
LIBJIT_INLINE uint16_t floatToBfloat(float f) {
  uint32_t u = asBits(f);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return uint16_t((u & 0x7fffffffu) > 0x7f800000u ? ((u >> 16) | 0x40u) : rounded);
}

/// The float nearest to \p x rounded to odd (when inexact, the neighbour with an odd last
/// mantissa bit), so that rounding it once more to 16 bits is correctly rounded, as the
/// Interpreter's intToFloatRoundToOdd.
LIBJIT_INLINE float intToFloatRoundToOdd(int64_t x) {
  float f = float(x);
  bool top = f >= 9223372036854775808.0f; // 2^63, beyond int64: x is below it
  int64_t fi = int64_t(top ? 0.0f : f);
  int cmp = top ? -1 : (x < fi ? -1 : (x > fi ? 1 : 0));
  uint32_t bits = asBits(f);
  // Inexact results are normal and nonzero: one step away from or towards zero.
  uint32_t step = (cmp > 0) == (f > 0.0f) ? bits + 1u : bits - 1u;
  return asFloat(cmp == 0 || (bits & 1u) ? bits : step);
}

/// Element kinds by their kernel-name suffix: the storage type, and for the 16-bit float
/// kinds the conversions through float.
struct Kind_f32 { using T = float; };
struct Kind_i32 { using T = int32_t; };
struct Kind_i64 { using T = int64_t; };
struct Kind_bool { using T = uint8_t; };
struct Kind_f16 {
  using T = uint16_t;
  static float toFloat(T x) { return halfToFloat(x); }
  static T fromFloat(float f) { return floatToHalf(f); }
};
struct Kind_bf16 {
  using T = uint16_t;
  static float toFloat(T x) { return bfloatToFloat(x); }
  static T fromFloat(float f) { return floatToBfloat(f); }
};
template <typename K> constexpr bool kIsHalf = false;
template <> constexpr bool kIsHalf<Kind_f16> = true;
template <> constexpr bool kIsHalf<Kind_bf16> = true;

/// ConvertTo between any two kinds: a 16-bit source is widened to float (exactly); a 16-bit
/// result is rounded once from float, integers through their round-to-odd float.
template <typename To, typename From>
LIBJIT_INLINE typename To::T convertKinds(typename From::T x) {
  if constexpr (kIsHalf<From>) {
    float v = From::toFloat(x);
    if constexpr (kIsHalf<To>)
      return To::fromFloat(v);
    else
      return convertOp<typename To::T, float>(v);
  } else if constexpr (kIsHalf<To>) {
    if constexpr (kIsFloat<typename From::T>)
      return To::fromFloat(x);
    else if constexpr (kIsBool<typename From::T>)
      return To::fromFloat(x != 0 ? 1.0f : 0.0f);
    else
      return To::fromFloat(intToFloatRoundToOdd(int64_t(x)));
  } else {
    return convertOp<typename To::T, typename From::T>(x);
  }
}

} // namespace

#define LIBJIT_DEFINE_CONVERT_TO(KT, TT, KF, TF)                                                   \
  LIBJIT_EXPORT TT libjit_elem_convertto_##KF##_##KT(TF x) {                                       \
    return convertKinds<Kind_##KT, Kind_##KF>(x);                                                  \
  }
#define LIBJIT_DEFINE_CONVERT_FROM(KF, TF)                                                         \
  LIBJIT_CONVERTIBLE_KINDS_TO(LIBJIT_DEFINE_CONVERT_TO, KF, TF)
LIBJIT_CONVERTIBLE_KINDS(LIBJIT_DEFINE_CONVERT_FROM)
#undef LIBJIT_DEFINE_CONVERT_FROM
#undef LIBJIT_DEFINE_CONVERT_TO

// ---------------------------------------------------------------- shared loops

// The loops of the element-wise chains most networks fuse, compiled once as shared kernels
// (and prebuilt with them) instead of as a loop function in every program: a lone float
// activation or binary operation, and a row scaled or shifted by a value or a vector per
// row (a squeeze-and-excitation scale, a bias). Each computes what the chain's loop
// function computes, element for element: the same scalar functions, in the same order.
// The emitter calls them only for chains of exactly that form (EmitElementwise.cpp).
// Operands may be one buffer (in place): an element is read before it is written, and the
// iterations are declared independent (assume_safety), as the loop functions declare them.
// `flatten` inlines the scalar function into the loop, which would not vectorise around a
// call (the transcendental ones are too large for the inliner's own threshold).

namespace {

template <float (*Op)(float)>
LIBJIT_INLINE void unaryLoop(const float *in, float *out, int64_t begin, int64_t end) {
#pragma clang loop vectorize(assume_safety)
  for (int64_t i = begin; i < end; i++)
    out[i] = Op(in[i]);
}

template <float (*Op)(float, float)>
LIBJIT_INLINE void binaryLoop(const float *a, const float *b, float *out, int64_t begin,
                              int64_t end) {
#pragma clang loop vectorize(assume_safety)
  for (int64_t i = begin; i < end; i++)
    out[i] = Op(a[i], b[i]);
}

template <float (*Op)(float, float)>
LIBJIT_INLINE void rowsLoop(const float *x, const float *src, float *out, int64_t len,
                            int64_t srcRowStride, int64_t srcStep, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; r++) {
    const float *xr = x + r * len;
    const float *s = src + r * srcRowStride;
    float *o = out + r * len;
    if (srcStep == 0) {
      float v = s[0];
#pragma clang loop vectorize(assume_safety)
      for (int64_t j = 0; j < len; j++)
        o[j] = Op(xr[j], v);
    } else {
#pragma clang loop vectorize(assume_safety)
      for (int64_t j = 0; j < len; j++)
        o[j] = Op(xr[j], s[j]);
    }
  }
}

} // namespace

#define LIBJIT_EW_LOOP LIBJIT_EXPORT __attribute__((flatten)) void
#define LIBJIT_DEFINE_EW_UNARY(OP)                                                                 \
  LIBJIT_EW_LOOP libjit_ew_##OP##_f32(const float *in, float *out, int64_t begin, int64_t end) {   \
    unaryLoop<libjit_elem_##OP##_f32>(in, out, begin, end);                                        \
  }
#define LIBJIT_DEFINE_EW_BINARY(OP)                                                                \
  LIBJIT_EW_LOOP libjit_ew_##OP##_f32(const float *a, const float *b, float *out, int64_t begin,   \
                                      int64_t end) {                                               \
    binaryLoop<libjit_elem_##OP##_f32>(a, b, out, begin, end);                                     \
  }
#define LIBJIT_DEFINE_EW_ROWS(OP)                                                                  \
  LIBJIT_EW_LOOP libjit_ew_rows_##OP##_f32(const float *x, const float *src, float *out,           \
                                           int64_t len, int64_t srcRowStride, int64_t srcStep,     \
                                           int64_t begin, int64_t end) {                           \
    rowsLoop<libjit_elem_##OP##_f32>(x, src, out, len, srcRowStride, srcStep, begin, end);         \
  }
LIBJIT_EW_UNARY_LOOPS(LIBJIT_DEFINE_EW_UNARY)
LIBJIT_EW_BINARY_LOOPS(LIBJIT_DEFINE_EW_BINARY)
LIBJIT_EW_ROW_LOOPS(LIBJIT_DEFINE_EW_ROWS)
#undef LIBJIT_DEFINE_EW_UNARY
#undef LIBJIT_DEFINE_EW_BINARY
#undef LIBJIT_DEFINE_EW_ROWS
#undef LIBJIT_EW_LOOP
