/// \file
/// Helpers shared by the Interpreter's kernels: dispatch from an element kind to its C++
/// storage type, typed element access, quantization arithmetic, shape iteration, and
/// operand checks that turn malformed IR into an Error instead of an out-of-bounds access.
/// Private to the backend; InterpreterKernels.h adds what the convolution, linear-algebra,
/// normalization and reduction kernels share.
#ifndef KILN_BACKENDS_INTERPRETER_INTERPRETERUTIL_H
#define KILN_BACKENDS_INTERPRETER_INTERPRETERUTIL_H

#include "Interpreter.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

namespace kiln::interp {

/// Carries a storage type through a generic lambda: `[&](auto tag) { using T =
/// typename decltype(tag)::type; ... }`.
template <typename T> struct KindTag {
  using type = T;
};

/// Calls \p f with the storage type of a float kind (float, float16, bfloat16); any
/// other kind is an Unsupported error naming \p I.
template <typename F> Error dispatchFloat(const Instruction *I, ElemKind k, F &&f) {
  switch (k) {
  case ElemKind::Float:
    return f(KindTag<float>{});
  case ElemKind::Float16:
    return f(KindTag<float16>{});
  case ElemKind::BFloat16:
    return f(KindTag<bfloat16>{});
  default:
    return unsupportedKinds(I);
  }
}

/// Like dispatchFloat, and also int32 and int64 indices.
template <typename F> Error dispatchNumeric(const Instruction *I, ElemKind k, F &&f) {
  switch (k) {
  case ElemKind::Int32I:
    return f(KindTag<int32_t>{});
  case ElemKind::Int64I:
    return f(KindTag<int64_t>{});
  default:
    return dispatchFloat(I, k, std::forward<F>(f));
  }
}

/// Like dispatchNumeric, and also Bool (the kinds ConvertTo handles).
template <typename F> Error dispatchConvertible(const Instruction *I, ElemKind k, F &&f) {
  if (k == ElemKind::Bool)
    return f(KindTag<bool>{});
  return dispatchNumeric(I, k, std::forward<F>(f));
}

/// Calls \p f with the storage type of a quantized kind (int8_t, uint8_t, int32_t).
template <typename F> Error dispatchQuantized(const Instruction *I, ElemKind k, F &&f) {
  switch (k) {
  case ElemKind::Int8Q:
    return f(KindTag<int8_t>{});
  case ElemKind::UInt8Q:
    return f(KindTag<uint8_t>{});
  case ElemKind::Int32Q:
    return f(KindTag<int32_t>{});
  default:
    return unsupportedKinds(I);
  }
}

/// Calls \p f with the storage type of any element kind.
template <typename F> Error dispatchAny(const Instruction *I, ElemKind k, F &&f) {
  if (isQuantized(k))
    return dispatchQuantized(I, k, std::forward<F>(f));
  return dispatchConvertible(I, k, std::forward<F>(f));
}

/// Like dispatchNumeric, and also Int8Q: the kinds whose raw values ArgMax, ArgMin and
/// TopK order.
template <typename F> Error dispatchOrdered(const Instruction *I, ElemKind k, F &&f) {
  if (k == ElemKind::Int8Q)
    return f(KindTag<int8_t>{});
  return dispatchNumeric(I, k, std::forward<F>(f));
}

/// The elements of \p t as T (which must be its storage type).
template <typename T> T *elems(Tensor &t) { return t.getHandle<T>().begin(); }
template <typename T> const T *elems(const Tensor &t) { return t.getHandle<T>().begin(); }

/// An Internal error about malformed operands of \p I (the verifier rules these out for
/// graphs built through the API; the kernels check anyway rather than read out of bounds).
template <typename... Args> Error operandError(const Instruction *I, const Args &...args) {
  return makeError(ErrorCode::Internal, I->getKindName(), " '", I->getName(), "': ", args...);
}

/// Checks that \p a and \p b have the same element count (element-wise operands).
inline Error checkSameSize(const Instruction *I, const Tensor &a, const Tensor &b) {
  if (a.size() == b.size())
    return Error::success();
  return operandError(I, "operands ", a.getType().toString(), " and ", b.getType().toString(),
                      " must have the same number of elements");
}

/// Checks that \p a and \p b have the same element kind.
inline Error checkSameKind(const Instruction *I, const Tensor &a, const Tensor &b) {
  if (a.getElementType() == b.getElementType())
    return Error::success();
  return operandError(I, "operands ", a.getType().toString(), " and ", b.getType().toString(),
                      " must have the same element kind");
}

// ------------------------------------------------------------------ integer arithmetic

/// Two's complement wrapping arithmetic on signed integers (signed overflow is undefined
/// in C++; the Interpreter defines it as wrapping, like every common device).
template <typename T> T wrapAdd(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return T(U(a) + U(b));
}
template <typename T> T wrapSub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return T(U(a) - U(b));
}
template <typename T> T wrapMul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return T(U(a) * U(b));
}
template <typename T> T wrapNeg(T a) { return wrapSub(T(0), a); }

/// \p v rounded to the nearest integer, halves to even (independent of the floating-point
/// environment's rounding mode); NaN and infinities are returned unchanged, and -0.4 gives
/// -0.
inline double roundHalfEven(double v) {
  double r = std::round(v); // halves away from zero
  if (std::fabs(v - std::trunc(v)) == 0.5)
    r = 2.0 * std::round(v / 2.0);
  return r;
}

/// \p v rounded to the nearest integer (halves to even) and saturated to integer type T;
/// NaN becomes 0.
template <typename T> T roundToIntEven(double v) {
  static_assert(std::is_integral_v<T>, "integer targets only");
  if (std::isnan(v))
    return T(0);
  double r = roundHalfEven(v);
  // max + 1 is a power of two, exact in double (INT64_MAX itself is not).
  constexpr double kLo = double(std::numeric_limits<T>::min());
  constexpr double kHiExclusive = double(std::numeric_limits<T>::max() / 2 + 1) * 2.0;
  if (r < kLo)
    return std::numeric_limits<T>::min();
  if (r >= kHiExclusive)
    return std::numeric_limits<T>::max();
  return T(r);
}

/// The float nearest to integer \p x, rounded to odd (when inexact, the neighbour with an
/// odd last mantissa bit). Rounding that float once more to float16 or bfloat16 then gives
/// the correctly rounded result, which plain double rounding would not.
inline float intToFloatRoundToOdd(int64_t x) {
  float f = float(x);
  // Compare x with f exactly: f is an integer; 2^63 is the only float beyond int64's range
  // that float(int64) can produce.
  int cmp;
  if (f >= 9223372036854775808.0f)
    cmp = -1;
  else
    cmp = x < int64_t(f) ? -1 : (x > int64_t(f) ? 1 : 0);
  if (cmp == 0)
    return f;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (bits & 1u)
    return f;
  return std::nextafter(f, cmp > 0 ? std::numeric_limits<float>::infinity()
                                   : -std::numeric_limits<float>::infinity());
}

/// Converts a value of storage type From to storage type To with ConvertTo's rules: floats
/// round to nearest even into integers and saturate (NaN becomes 0), Bool is x != 0,
/// integers narrow with saturation, and 16-bit floats round once.
template <typename To, typename From> To convertElement(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (std::is_integral_v<From>)
      return x != 0;
    else
      return float(x) != 0.0f; // NaN != 0: true
  } else if constexpr (std::is_same_v<From, bool>) {
    return To(x ? 1.0f : 0.0f);
  } else if constexpr (std::is_integral_v<To>) {
    if constexpr (std::is_integral_v<From>) { // int32/int64 indices: saturate
      if (int64_t(x) < int64_t(std::numeric_limits<To>::min()))
        return std::numeric_limits<To>::min();
      if (int64_t(x) > int64_t(std::numeric_limits<To>::max()))
        return std::numeric_limits<To>::max();
      return To(x);
    } else {
      return roundToIntEven<To>(double(float(x)));
    }
  } else if constexpr (std::is_integral_v<From>) { // integer to a float kind
    if constexpr (std::is_same_v<To, float>)
      return float(x);
    else
      return To(intToFloatRoundToOdd(int64_t(x)));
  } else { // float kind to float kind: through float, exact for the 16-bit sources
    return To(float(x));
  }
}

// ------------------------------------------------------------------ quantization

/// The real value of quantized integer \p q under (\p scale, \p offset).
inline double dequantizeValue(int64_t q, float scale, int32_t offset) {
  return double(scale) * double(q - int64_t(offset));
}
/// The real value of quantized integer \p q of type \p ty.
inline double dequantizeValue(int64_t q, const Type &ty) {
  return dequantizeValue(q, ty.scale, ty.offset);
}

/// Quantizes real \p r to storage type T under (\p scale, \p offset): round(r / scale) +
/// offset, rounding half away from zero and saturating; NaN maps to the offset (real 0).
template <typename T> T quantizeValue(double r, float scale, int32_t offset) {
  constexpr double kLo = double(std::numeric_limits<T>::min());
  constexpr double kHi = double(std::numeric_limits<T>::max());
  if (std::isnan(r))
    r = 0.0;
  double q = std::round(r / double(scale)) + double(offset);
  if (!(q >= kLo))
    return std::numeric_limits<T>::min();
  if (q > kHi)
    return std::numeric_limits<T>::max();
  return T(q);
}

/// True when \p a and \p b are quantized with different scale or offset, so copying raw
/// values from one to the other would change the real values.
inline bool quantParamsDiffer(const Type &a, const Type &b) {
  return isQuantized(a.kind) && (a.scale != b.scale || a.offset != b.offset);
}

/// Returns \p src when its raw values already mean the same under \p want's quantization
/// parameters; otherwise requantizes it into \p scratch (\p src's shape, \p want's
/// parameters) and returns that. Lets data-movement kernels copy bytes.
Expected<const Tensor *> withQuantParamsOf(const Instruction *I, const Tensor &src,
                                           const Type &want, Tensor &scratch);

// ------------------------------------------------------------------ shapes

/// Calls \p f(idx) for every index of \p dims in row-major order (once, with an empty
/// index, for a scalar; never for a shape with a zero dimension).
template <typename F> void forEachIndex(const Dims &dims, F &&f) {
  if (dims.product() == 0)
    return;
  std::vector<dim_t> idx(dims.size(), 0);
  while (true) {
    f(static_cast<const std::vector<dim_t> &>(idx));
    size_t d = dims.size();
    while (d > 0) {
      if (++idx[d - 1] < dims[d - 1])
        break;
      idx[d - 1] = 0;
      d--;
    }
    if (d == 0)
      return;
  }
}

/// Splits \p dims around \p axis: the product of the dims before it (outer), its size, and
/// the product of the dims after it (inner). Element (o, a, i) is at (o * size + a) * inner
/// + i in row-major order.
struct AxisSplit {
  size_t outer = 1, size = 1, inner = 1;
  AxisSplit(const Dims &dims, size_t axis) {
    for (size_t d = 0; d < dims.size(); d++) {
      if (d < axis)
        outer *= dims[d];
      else if (d == axis)
        size = dims[d];
      else
        inner *= dims[d];
    }
  }
  size_t index(size_t o, size_t a, size_t i) const { return (o * size + a) * inner + i; }
};

/// The epilogue of a fused Convolution / FullyConnected (InterpreterElementwise.cpp): adds
/// the residual \p res (null for none) to the result \p t, then applies the activation
/// \p act (None, Relu, Clip, LeakyRelu, Sigmoid, Tanh) with \p alpha / \p beta; 16-bit
/// kinds are computed in float and rounded after each step, as the unfused Add and
/// activation would.
Error applyEpilogue(const Instruction *I, Tensor &t, const Tensor *res, const std::string &act,
                    float alpha, float beta);

/// The activation of a quantized layer (None, Relu or Clip), applied to the real value
/// before its one rounding to the result's grid.
struct RealActivation {
  bool clamps = false;
  double lo = 0, hi = 0;
  double apply(double real) const { return clamps ? std::min(std::max(real, lo), hi) : real; }
};

/// The activation \p act (with \p alpha / \p beta for a Clip) of the quantized instruction
/// \p I; an error naming I for any other activation or a Clip with Alpha > Beta.
Expected<RealActivation> realActivation(const Instruction *I, const std::string &act,
                                        float alpha, float beta);

/// The residual operand of a fused instruction, or null.
template <typename InstT> const Value *residualOf(const InstT *I) {
  std::vector<Value *> r = I->getResidual();
  return r.empty() ? nullptr : r.front();
}

} // namespace kiln::interp

#endif // KILN_BACKENDS_INTERPRETER_INTERPRETERUTIL_H
