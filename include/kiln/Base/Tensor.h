/// \file
/// Tensor: a typed, contiguous, row-major block of elements, either owning its memory
/// (64-byte aligned) or viewing memory owned elsewhere. Handle<T> gives typed access.
#ifndef KILN_BASE_TENSOR_H
#define KILN_BASE_TENSOR_H

#include "kiln/Base/Check.h"
#include "kiln/Base/Error.h"
#include "kiln/Base/Type.h"

#include <cassert>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace kiln {

/// A seeded pseudo-random generator, so test data and random weights are reproducible.
class PseudoRNG {
public:
  explicit PseudoRNG(uint64_t seed = 0x4b494c4e) : engine_(seed) {}
  /// A float uniform in [lo, hi).
  float uniform(float lo, float hi) {
    return std::uniform_real_distribution<float>(lo, hi)(engine_);
  }
  /// An integer uniform in [lo, hi].
  int64_t uniformInt(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(engine_);
  }
  std::mt19937_64 &engine() { return engine_; }

private:
  std::mt19937_64 engine_;
};

template <typename T> class Handle;

/// A typed, contiguous, row-major block of elements, owning its memory or viewing memory
/// owned elsewhere (see the file comment). Move-only; clone() copies.
class Tensor {
public:
  /// An empty tensor: float<0>, no memory.
  Tensor() = default;
  /// Allocates a zero-filled tensor of \p ty; throws std::bad_alloc when the host has no
  /// memory for it (the library's entry points turn that into an error: guardHostMemory).
  explicit Tensor(const Type &ty);
  /// Allocates a zero-filled tensor of \p ty, or an OutOfMemory error naming the type and
  /// the bytes when the host cannot provide them.
  static Expected<Tensor> tryCreate(const Type &ty);
  Tensor(ElemKind k, Dims dims) : Tensor(Type(k, dims)) {}
  /// A tensor of \p k with the given values (converted from double).
  Tensor(ElemKind k, Dims dims, std::initializer_list<double> values);
  /// A view of \p ty over \p data, which must outlive the tensor.
  static Tensor view(const Type &ty, void *data);

  Tensor(const Tensor &) = delete;
  Tensor &operator=(const Tensor &) = delete;
  Tensor(Tensor &&o) noexcept;
  Tensor &operator=(Tensor &&o) noexcept;
  ~Tensor();

  /// A deep copy (always owning).
  Tensor clone() const;
  /// Re-types this tensor in place, which must keep the byte size (a reshape).
  void reshape(const Type &ty);

  const Type &getType() const { return type_; }
  ElemKind getElementType() const { return type_.kind; }
  const Dims &dims() const { return type_.dims; }
  dim_t size() const { return type_.numElements(); }
  size_t getSizeInBytes() const { return type_.sizeInBytes(); }
  bool isOwning() const { return owning_; }
  char *getUnsafePtr() { return data_; }
  const char *getUnsafePtr() const { return data_; }

  /// Sets every byte to zero (quantized tensors: every element to the offset).
  void zero();
  /// Fills with uniform random values in [lo, hi]; for quantized kinds the bounds are in
  /// quantized units; for bool, half true.
  void randomize(float lo, float hi, PseudoRNG &rng);
  /// Element \p i converted to double (quantized kinds: the raw integer).
  double getAsDouble(size_t i) const;
  /// Element \p i set from double (rounded and saturated for integer kinds).
  void setFromDouble(size_t i, double v);

  /// True when types match and every element is within \p atol + \p rtol * |other|
  /// (NaN equals NaN). Quantized tensors compare raw integers.
  bool isEqual(const Tensor &other, float atol = 0.0f, float rtol = 0.0f,
               bool verbose = false) const;
  /// Largest absolute difference over all elements (types must have equal shapes).
  double maxAbsDiff(const Tensor &other) const;
  /// Printable summary and values (at most \p maxElems of them).
  std::string toString(size_t maxElems = 64) const;

  template <typename T> Handle<T> getHandle();
  template <typename T> Handle<const T> getHandle() const;

private:
  Type type_{ElemKind::Float, {0}}; // a default tensor has no elements
  char *data_ = nullptr;
  bool owning_ = false;
};

/// Typed access to a tensor's elements. T must be the storage type of the tensor's kind.
template <typename T> class Handle {
  using Raw = std::remove_const_t<T>;

public:
  Handle(T *data, const Type &ty) : data_(data), type_(ty), strides_(ty.strides()) {}

  const Dims &dims() const { return type_.dims; }
  size_t size() const { return type_.numElements(); }
  /// Flat, row-major index of an index list (one index per dimension).
  size_t flatIndex(std::initializer_list<dim_t> idx) const {
    KILN_DCHECK(idx.size() == type_.dims.size());
    size_t off = 0, i = 0;
    for (dim_t v : idx) {
      KILN_DCHECK(v < type_.dims[i]);
      off += v * strides_[i++];
    }
    return off;
  }
  size_t flatIndex(const std::vector<dim_t> &idx) const {
    size_t off = 0;
    for (size_t i = 0; i < idx.size(); i++)
      off += idx[i] * strides_[i];
    return off;
  }
  T &at(std::initializer_list<dim_t> idx) { return data_[flatIndex(idx)]; }
  const T &at(std::initializer_list<dim_t> idx) const { return data_[flatIndex(idx)]; }
  T &at(const std::vector<dim_t> &idx) { return data_[flatIndex(idx)]; }
  T &raw(size_t i) { return data_[i]; }
  const T &raw(size_t i) const { return data_[i]; }
  T *begin() { return data_; }
  T *end() { return data_ + size(); }
  /// Copies \p values in, row-major; their count must equal size().
  void set(std::initializer_list<Raw> values) {
    KILN_CHECK(values.size() == size())
        << "Handle::set: " << values.size() << " values for " << size() << " elements";
    size_t i = 0;
    for (const Raw &v : values)
      data_[i++] = v;
  }
  void fill(Raw v) {
    for (size_t i = 0, e = size(); i < e; i++)
      data_[i] = v;
  }
  /// Uniform random values in [lo, hi].
  void randomize(double lo, double hi, PseudoRNG &rng) {
    for (size_t i = 0, e = size(); i < e; i++) {
      if constexpr (std::is_integral_v<Raw> && !std::is_same_v<Raw, bool>)
        data_[i] = Raw(rng.uniformInt(int64_t(lo), int64_t(hi)));
      else if constexpr (std::is_same_v<Raw, bool>)
        data_[i] = rng.uniformInt(0, 1) != 0;
      else
        data_[i] = Raw(rng.uniform(float(lo), float(hi)));
    }
  }
  /// Real value of element \p i of a quantized tensor.
  float dequantizedAt(size_t i) const {
    return type_.scale * (float(data_[i]) - float(type_.offset));
  }

private:
  T *data_;
  Type type_;
  Dims strides_;
};

template <typename T> Handle<T> Tensor::getHandle() {
  KILN_CHECK(isStorageOf<T>(type_.kind)) << "getHandle: tensor of " << type_.toString()
                                         << " is not stored as the requested C++ type";
  return Handle<T>(reinterpret_cast<T *>(data_), type_);
}
template <typename T> Handle<const T> Tensor::getHandle() const {
  KILN_CHECK(isStorageOf<T>(type_.kind)) << "getHandle: tensor of " << type_.toString()
                                         << " is not stored as the requested C++ type";
  return Handle<const T>(reinterpret_cast<const T *>(data_), type_);
}

} // namespace kiln

#endif // KILN_BASE_TENSOR_H
