#include "kiln/Base/Type.h"

#include <glog/logging.h>

#include <functional>
#include <iomanip>
#include <sstream>

namespace kiln {

size_t elemSize(ElemKind k) {
  switch (k) {
  case ElemKind::Float:
  case ElemKind::Int32Q:
  case ElemKind::Int32I:
    return 4;
  case ElemKind::Float16:
  case ElemKind::BFloat16:
    return 2;
  case ElemKind::Int8Q:
  case ElemKind::UInt8Q:
  case ElemKind::Bool:
    return 1;
  case ElemKind::Int64I:
    return 8;
  }
  LOG(FATAL) << "bad ElemKind";
}

const char *elemKindName(ElemKind k) {
  switch (k) {
  case ElemKind::Float:
    return "float";
  case ElemKind::Float16:
    return "float16";
  case ElemKind::BFloat16:
    return "bfloat16";
  case ElemKind::Int8Q:
    return "i8q";
  case ElemKind::UInt8Q:
    return "u8q";
  case ElemKind::Int32Q:
    return "i32q";
  case ElemKind::Int32I:
    return "i32";
  case ElemKind::Int64I:
    return "i64";
  case ElemKind::Bool:
    return "bool";
  }
  return "?";
}

bool parseElemKind(const std::string &name, ElemKind &out) {
  for (unsigned i = 0; i < kNumElemKinds; i++) {
    if (name == elemKindName(ElemKind(i))) {
      out = ElemKind(i);
      return true;
    }
  }
  return false;
}

template <typename T> bool isStorageOf(ElemKind k) {
  if constexpr (std::is_same_v<T, int32_t>)
    return k == ElemKind::Int32I || k == ElemKind::Int32Q;
  else
    return ElemKindOf<T>::value == k;
}
template bool isStorageOf<float>(ElemKind);
template bool isStorageOf<float16>(ElemKind);
template bool isStorageOf<bfloat16>(ElemKind);
template bool isStorageOf<int8_t>(ElemKind);
template bool isStorageOf<uint8_t>(ElemKind);
template bool isStorageOf<int32_t>(ElemKind);
template bool isStorageOf<int64_t>(ElemKind);
template bool isStorageOf<bool>(ElemKind);

Dims::Dims(std::initializer_list<dim_t> l) {
  for (dim_t v : l)
    push_back(v);
}

Dims::Dims(const std::vector<dim_t> &v) {
  for (dim_t x : v)
    push_back(x);
}

void Dims::push_back(dim_t v) {
  if (n_ == kMaxDims) {
    overflow_ = true;
    return;
  }
  d_[n_++] = v;
}

bool Dims::operator==(const Dims &o) const {
  if (n_ != o.n_ || overflow_ != o.overflow_)
    return false;
  for (size_t i = 0; i < n_; i++)
    if (d_[i] != o.d_[i])
      return false;
  return true;
}

dim_t Dims::product() const {
  dim_t p = 1;
  for (size_t i = 0; i < n_; i++)
    p *= d_[i];
  return p;
}

Dims Type::strides() const {
  Dims s = dims;
  dim_t acc = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    s[i] = acc;
    acc *= dims[i];
  }
  return s;
}

bool Type::operator==(const Type &o) const {
  if (kind != o.kind || dims != o.dims)
    return false;
  if (isQuantized(kind))
    return scale == o.scale && offset == o.offset;
  return true;
}

std::string dimsToString(const Dims &d) {
  std::ostringstream os;
  for (size_t i = 0; i < d.size(); i++)
    os << (i ? "x" : "") << d[i];
  if (!d.valid())
    os << "x... (more than " << kMaxDims << " dimensions)";
  return os.str();
}

std::string Type::toString() const {
  std::ostringstream os;
  os << elemKindName(kind) << "<" << dimsToString(dims);
  if (isQuantized(kind))
    os << ":" << std::setprecision(9) << scale << ":" << offset;
  os << ">";
  return os.str();
}

size_t Type::hash() const {
  size_t h = std::hash<int>()(int(kind));
  for (dim_t d : dims)
    h = h * 31 + std::hash<dim_t>()(d);
  h = h * 31 + (dims.valid() ? 0 : 1);
  if (isQuantized(kind))
    h = h * 31 + std::hash<float>()(scale) * 7 + std::hash<int32_t>()(offset);
  return h;
}

std::ostream &operator<<(std::ostream &os, const Type &t) { return os << t.toString(); }
std::ostream &operator<<(std::ostream &os, const Dims &d) { return os << dimsToString(d); }

} // namespace kiln
