/// \file
/// Helpers shared by the Interpreter's convolution, linear-algebra, normalization and
/// reduction kernels (InterpreterConv/Linalg/Norm/Reduce.cpp). Private to the backend.
///
/// Conventions they implement (see the header of src/ClassGen/NodeTable.cpp):
/// - Float16 and BFloat16 operators load their operands into float, compute in float, and
///   round once per output element when storing (loadFloats / storeFloats).
/// - Quantized results are round(real / scale) + offset, rounding half away from zero and
///   saturating to the element kind's range (requantize).
#ifndef KILN_BACKENDS_INTERPRETER_INTERPRETERKERNELS_H
#define KILN_BACKENDS_INTERPRETER_INTERPRETERKERNELS_H

#include "Interpreter.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace kiln::interp {

/// The elements of a Float, Float16 or BFloat16 tensor, converted to float.
inline std::vector<float> loadFloats(const Tensor &t) {
  std::vector<float> v(t.size());
  switch (t.getElementType()) {
  case ElemKind::Float: {
    auto h = t.getHandle<float>();
    std::copy(h.begin(), h.end(), v.begin());
    break;
  }
  case ElemKind::Float16: {
    auto h = t.getHandle<float16>();
    for (size_t i = 0; i < v.size(); i++)
      v[i] = float(h.raw(i));
    break;
  }
  case ElemKind::BFloat16: {
    auto h = t.getHandle<bfloat16>();
    for (size_t i = 0; i < v.size(); i++)
      v[i] = float(h.raw(i));
    break;
  }
  default:
    CHECK(false) << "loadFloats on " << t.getType().toString();
  }
  return v;
}

/// Stores \p v into the Float, Float16 or BFloat16 tensor \p t, rounding each element once
/// (to nearest even) for the 16-bit kinds.
inline void storeFloats(Tensor &t, const std::vector<float> &v) {
  CHECK_EQ(v.size(), t.size()) << "storeFloats into " << t.getType().toString();
  switch (t.getElementType()) {
  case ElemKind::Float: {
    auto h = t.getHandle<float>();
    std::copy(v.begin(), v.end(), h.begin());
    break;
  }
  case ElemKind::Float16: {
    auto h = t.getHandle<float16>();
    for (size_t i = 0; i < v.size(); i++)
      h.raw(i) = float16(v[i]);
    break;
  }
  case ElemKind::BFloat16: {
    auto h = t.getHandle<bfloat16>();
    for (size_t i = 0; i < v.size(); i++)
      h.raw(i) = bfloat16(v[i]);
    break;
  }
  default:
    CHECK(false) << "storeFloats into " << t.getType().toString();
  }
}

/// True when \p a is a float kind and every other tensor in \p rest has that kind.
template <typename... Ts> bool sameFloatKind(const Tensor &a, const Ts &...rest) {
  ElemKind k = a.getElementType();
  return isFloatKind(k) && ((rest.getElementType() == k) && ...);
}

/// The quantized value of real number \p real in a type of \p scale and \p offset:
/// round(real / scale) + offset, rounded half away from zero and saturated to T.
template <typename T> T requantize(double real, float scale, int32_t offset) {
  double q = std::round(real / double(scale)) + double(offset);
  q = std::max(q, double(std::numeric_limits<T>::min()));
  q = std::min(q, double(std::numeric_limits<T>::max()));
  return T(q);
}

/// The real value of quantized element \p q of type \p ty.
inline double dequantize(int64_t q, const Type &ty) {
  return double(ty.scale) * double(q - int64_t(ty.offset));
}

/// A value used to order elements of storage type T: 16-bit floats compare as float.
template <typename T> auto orderKey(T v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>)
    return float(v);
  else
    return v;
}

/// Calls \p fn with a value of the storage type of numeric kind \p k (Float, Float16,
/// BFloat16, Int8Q, Int32I, Int64I) so a generic lambda can name it; false for any other
/// kind.
template <typename Fn> bool visitNumericStorage(ElemKind k, Fn &&fn) {
  switch (k) {
  case ElemKind::Float:
    fn(float{});
    return true;
  case ElemKind::Float16:
    fn(float16{});
    return true;
  case ElemKind::BFloat16:
    fn(bfloat16{});
    return true;
  case ElemKind::Int8Q:
    fn(int8_t{});
    return true;
  case ElemKind::Int32I:
    fn(int32_t{});
    return true;
  case ElemKind::Int64I:
    fn(int64_t{});
    return true;
  default:
    return false;
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

} // namespace kiln::interp

#endif // KILN_BACKENDS_INTERPRETER_INTERPRETERKERNELS_H
