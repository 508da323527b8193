/// \file
/// Element kinds and tensor types. Every value in Kiln has a static type: an element kind,
/// a shape of up to kMaxDims dimensions, and for quantized kinds a scale and offset
/// (real = scale * (q - offset)). Inside a Module, types are uniqued: compare TypeRefs by
/// pointer.
#ifndef KILN_BASE_TYPE_H
#define KILN_BASE_TYPE_H

#include "kiln/Base/Float16.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

namespace kiln {

using dim_t = uint64_t;
using sdim_t = int64_t;
constexpr unsigned kMaxDims = 8;

/// The kinds of tensor elements.
enum class ElemKind : uint8_t {
  Float,     ///< float32
  Float16,   ///< IEEE binary16
  BFloat16,  ///< bfloat16
  Int8Q,     ///< int8, quantized (scale, offset)
  UInt8Q,    ///< uint8, quantized (scale, offset)
  Int32Q,    ///< int32, quantized (biases of quantized convolution and FC)
  Int32I,    ///< int32 indices
  Int64I,    ///< int64 indices
  Bool,      ///< bool, one byte
};
constexpr unsigned kNumElemKinds = 9;

/// Size in bytes of one element of \p k.
size_t elemSize(ElemKind k);
/// Name used in the text IR: "float", "float16", "bfloat16", "i8q", "u8q", "i32q", "i32",
/// "i64", "bool".
const char *elemKindName(ElemKind k);
/// Parses a name from elemKindName; false if unknown.
bool parseElemKind(const std::string &name, ElemKind &out);
inline bool isQuantized(ElemKind k) {
  return k == ElemKind::Int8Q || k == ElemKind::UInt8Q || k == ElemKind::Int32Q;
}
inline bool isFloatKind(ElemKind k) {
  return k == ElemKind::Float || k == ElemKind::Float16 || k == ElemKind::BFloat16;
}
inline bool isIndexKind(ElemKind k) { return k == ElemKind::Int32I || k == ElemKind::Int64I; }

/// Maps C++ element types to kinds, for typed handles. Quantized kinds share storage with
/// plain integers: int8_t is Int8Q, uint8_t UInt8Q, int32_t Int32Q or Int32I.
template <typename T> struct ElemKindOf;
template <> struct ElemKindOf<float> { static constexpr ElemKind value = ElemKind::Float; };
template <> struct ElemKindOf<float16> { static constexpr ElemKind value = ElemKind::Float16; };
template <> struct ElemKindOf<bfloat16> { static constexpr ElemKind value = ElemKind::BFloat16; };
template <> struct ElemKindOf<int8_t> { static constexpr ElemKind value = ElemKind::Int8Q; };
template <> struct ElemKindOf<uint8_t> { static constexpr ElemKind value = ElemKind::UInt8Q; };
template <> struct ElemKindOf<int32_t> { static constexpr ElemKind value = ElemKind::Int32I; };
template <> struct ElemKindOf<int64_t> { static constexpr ElemKind value = ElemKind::Int64I; };
template <> struct ElemKindOf<bool> { static constexpr ElemKind value = ElemKind::Bool; };
/// True when elements of kind \p k are stored as T.
template <typename T> bool isStorageOf(ElemKind k);

/// A small fixed-capacity list of dimensions. Building one with more than kMaxDims entries
/// keeps the first kMaxDims and marks it overflowed (valid() false) instead of aborting:
/// a type with such dims never verifies (Function::verify names the node), so code that
/// builds shapes from user data gets an Error, not a crash.
class Dims {
public:
  Dims() = default;
  Dims(std::initializer_list<dim_t> l);
  explicit Dims(const std::vector<dim_t> &v);
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  dim_t operator[](size_t i) const { return d_[i]; }
  dim_t &operator[](size_t i) { return d_[i]; }
  const dim_t *begin() const { return d_.data(); }
  const dim_t *end() const { return d_.data() + n_; }
  void push_back(dim_t v);
  std::vector<dim_t> vec() const { return std::vector<dim_t>(begin(), end()); }
  bool operator==(const Dims &o) const;
  bool operator!=(const Dims &o) const { return !(*this == o); }
  /// Product of all dimensions (1 for a scalar).
  dim_t product() const;
  /// False when more than kMaxDims dimensions were given.
  bool valid() const { return !overflow_; }

private:
  std::array<dim_t, kMaxDims> d_{};
  size_t n_ = 0;
  bool overflow_ = false;
};

/// A tensor type: element kind, shape, and quantization parameters.
struct Type {
  ElemKind kind = ElemKind::Float;
  Dims dims;
  float scale = 1.0f;  ///< Quantized kinds only.
  int32_t offset = 0;  ///< Quantized kinds only.

  Type() = default;
  Type(ElemKind k, Dims d) : kind(k), dims(d) {}
  Type(ElemKind k, Dims d, float s, int32_t o) : kind(k), dims(d), scale(s), offset(o) {}
  /// Same kind and quantization parameters as \p like, new shape.
  static Type withDims(const Type &like, Dims d) {
    Type t = like;
    t.dims = d;
    return t;
  }

  size_t rank() const { return dims.size(); }
  dim_t numElements() const { return dims.product(); }
  size_t elemBytes() const { return elemSize(kind); }
  size_t sizeInBytes() const { return numElements() * elemBytes(); }
  bool isQuantizedType() const { return isQuantized(kind); }
  /// Row-major strides in elements.
  Dims strides() const;
  bool operator==(const Type &o) const;
  bool operator!=(const Type &o) const { return !(*this == o); }
  /// Same kind and dims; quantization parameters may differ.
  bool sameShapeAndKind(const Type &o) const { return kind == o.kind && dims == o.dims; }
  /// Text form: `float<1x3x224x224>`, `i8q<2x3:0.5:-3>` (scale and offset for quantized),
  /// `float<>` for a scalar.
  std::string toString() const;
  size_t hash() const;
};

/// A uniqued type owned by a Module.
using TypeRef = const Type *;

/// "1x3x224x224"
std::string dimsToString(const Dims &d);
std::ostream &operator<<(std::ostream &os, const Type &t);
std::ostream &operator<<(std::ostream &os, const Dims &d);

} // namespace kiln

#endif // KILN_BASE_TYPE_H
