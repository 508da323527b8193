/// \file
/// Helpers shared by the Interpreter's convolution, linear-algebra, normalization and
/// reduction kernels (InterpreterConv/Linalg/Norm/Reduce.cpp), on top of those every
/// kernel shares (InterpreterUtil.h). Private to the backend.
///
/// Float16 and BFloat16 operators load their operands into float, compute in float, and
/// round once per output element when storing (loadFloats / storeFloats); see the header
/// of src/ClassGen/NodeTable.cpp. Quantized results use quantizeValue (InterpreterUtil.h).
#ifndef KILN_BACKENDS_INTERPRETER_INTERPRETERKERNELS_H
#define KILN_BACKENDS_INTERPRETER_INTERPRETERKERNELS_H

#include "InterpreterUtil.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include <glog/logging.h>

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

/// A value used to order elements of storage type T: 16-bit floats compare as float.
template <typename T> auto orderKey(T v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>)
    return float(v);
  else
    return v;
}

} // namespace kiln::interp

#endif // KILN_BACKENDS_INTERPRETER_INTERPRETERKERNELS_H
