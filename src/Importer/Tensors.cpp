// ONNX TensorProto <-> kiln Tensor, with every size and count checked before use.

#include "ONNXImporter.h"

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <fstream>
#include <limits>

namespace kiln::onnximport {

namespace {

using TP = onnx::TensorProto;

const char *onnxTypeName(int32_t t) {
  if (onnx::TensorProto_DataType_IsValid(t))
    return onnx::TensorProto_DataType_Name(onnx::TensorProto_DataType(t)).c_str();
  return "invalid";
}

/// Bytes per element in raw_data, or 0 for types without a fixed size.
size_t onnxElemSize(int32_t t) {
  switch (t) {
  case TP::FLOAT: case TP::INT32: case TP::UINT32: return 4;
  case TP::UINT8: case TP::INT8: case TP::BOOL: return 1;
  case TP::UINT16: case TP::INT16: case TP::FLOAT16: case TP::BFLOAT16: return 2;
  case TP::INT64: case TP::DOUBLE: case TP::UINT64: return 8;
  default: return 0;
  }
}

template <typename T> T readLE(const char *p) {
  T v;
  std::memcpy(&v, p, sizeof(T)); // x86-64 is little-endian, as raw_data is.
  return v;
}

/// Stores the \p n elements of raw bytes \p p of ONNX type \p t into \p out.
void setFromRaw(Tensor &out, size_t n, int32_t t, const char *p, const FileBytes *file) {
  if (n == 0)
    return;
  char *d = out.getUnsafePtr();
  switch (t) {
  case TP::FLOAT: case TP::INT32: case TP::INT64:
    // Stored exactly as in raw_data.
    if (!file || !file->readInto(p, n * onnxElemSize(t), d))
      std::memcpy(d, p, n * onnxElemSize(t));
    return;
  case TP::FLOAT16: case TP::BFLOAT16:
    static_assert(sizeof(float16) == 2 && sizeof(bfloat16) == 2, "16-bit floats");
    if (t == TP::FLOAT16) {
      float16 *o = reinterpret_cast<float16 *>(d);
      for (size_t i = 0; i < n; i++)
        o[i] = float16::fromBits(readLE<uint16_t>(p + 2 * i));
    } else {
      bfloat16 *o = reinterpret_cast<bfloat16 *>(d);
      for (size_t i = 0; i < n; i++)
        o[i] = bfloat16::fromBits(readLE<uint16_t>(p + 2 * i));
    }
    return;
  default:
    break;
  }
  auto loop = [&](auto *o, auto srcTag, auto cvt) {
    using S = decltype(srcTag);
    for (size_t i = 0; i < n; i++)
      o[i] = cvt(readLE<S>(p + i * sizeof(S)));
  };
  float *f = reinterpret_cast<float *>(d);
  int32_t *i32 = reinterpret_cast<int32_t *>(d);
  int64_t *i64 = reinterpret_cast<int64_t *>(d);
  bool *b = reinterpret_cast<bool *>(d);
  switch (t) {
  case TP::DOUBLE: loop(f, double(), [](double v) { return float(v); }); return;
  case TP::INT8: loop(i32, int8_t(), [](int8_t v) { return int32_t(v); }); return;
  case TP::UINT8: loop(i32, uint8_t(), [](uint8_t v) { return int32_t(v); }); return;
  case TP::INT16: loop(i32, int16_t(), [](int16_t v) { return int32_t(v); }); return;
  case TP::UINT16: loop(i32, uint16_t(), [](uint16_t v) { return int32_t(v); }); return;
  case TP::UINT32: loop(i64, uint32_t(), [](uint32_t v) { return int64_t(v); }); return;
  case TP::UINT64: loop(i64, uint64_t(), [](uint64_t v) { return int64_t(v); }); return;
  case TP::BOOL: loop(b, uint8_t(), [](uint8_t v) { return v != 0; }); return;
  default: return;
  }
}

} // namespace

FileBytes::~FileBytes() {
  if (map_)
    munmap(map_, mapSize_);
  if (fd_ >= 0)
    ::close(fd_);
}

bool FileBytes::readInto(const char *p, size_t n, char *dst) const {
  if (fd_ < 0 || !map_ || p < data_ || n > size_ || size_t(p - data_) > size_ - n)
    return false;
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd_, dst + done, n - done, off_t(p - data_) + off_t(done));
    if (r <= 0)
      return false;
    done += size_t(r);
  }
  return true;
}

void FileBytes::release(const char *p, size_t n) const {
  if (!map_ || n == 0)
    return;
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  uintptr_t b = (uintptr_t(p) + page - 1) / page * page, e = (uintptr_t(p) + n) / page * page;
  if (b < e)
    madvise(reinterpret_cast<void *>(b), e - b, MADV_DONTNEED); // advice only
}

bool FileBytes::open(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      void *m = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (m != MAP_FAILED) {
        fd_ = fd;
        map_ = m;
        mapSize_ = size_t(st.st_size);
        data_ = static_cast<const char *>(m);
        size_ = mapSize_;
        return true;
      }
    }
    ::close(fd);
  }
  // Empty, not a regular file, or not mappable: read it.
  if (!readWholeFile(path, buf_))
    return false;
  data_ = buf_.data();
  size_ = buf_.size();
  return true;
}

bool readWholeFile(const std::string &path, std::string &out) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return false;
  out.clear();
  f.seekg(0, std::ios::end);
  std::streamoff size = f.tellg();
  if (size > 0 && f) {
    f.seekg(0, std::ios::beg);
    out.resize(size_t(size));
    f.read(&out[0], size);
    out.resize(size_t(f.gcount()));
    if (f.gcount() == size) {
      // Pick up anything appended since the size was taken, as a stream read would.
      char c;
      while (f.get(c))
        out.push_back(c);
      return true;
    }
    f.clear();
  } else {
    f.clear();
    f.seekg(0, std::ios::beg);
  }
  // Not seekable (a pipe) or shorter than reported: read the rest in chunks.
  f.clear();
  char chunk[1 << 16];
  while (f.read(chunk, sizeof(chunk)) || f.gcount() > 0)
    out.append(chunk, size_t(f.gcount()));
  return true;
}

Expected<ElemKind> elemKindFromONNX(int32_t t) {
  switch (t) {
  case TP::FLOAT: case TP::DOUBLE: return ElemKind::Float;
  case TP::FLOAT16: return ElemKind::Float16;
  case TP::BFLOAT16: return ElemKind::BFloat16;
  case TP::INT8: case TP::UINT8: case TP::INT16: case TP::UINT16: case TP::INT32:
    return ElemKind::Int32I;
  case TP::UINT32: case TP::INT64: case TP::UINT64: return ElemKind::Int64I;
  case TP::BOOL: return ElemKind::Bool;
  case TP::STRING: case TP::COMPLEX64: case TP::COMPLEX128:
    return makeError(ErrorCode::Unsupported, "ONNX element type ", onnxTypeName(t),
                     " is not supported");
  default:
    return makeError(ErrorCode::ModelParse, "invalid ONNX element type ", t);
  }
}

int32_t onnxTypeOf(ElemKind k) {
  switch (k) {
  case ElemKind::Float: return TP::FLOAT;
  case ElemKind::Float16: return TP::FLOAT16;
  case ElemKind::BFloat16: return TP::BFLOAT16;
  case ElemKind::Int8Q: return TP::INT8;
  case ElemKind::UInt8Q: return TP::UINT8;
  case ElemKind::Int32Q: case ElemKind::Int32I: return TP::INT32;
  case ElemKind::Int64I: return TP::INT64;
  case ElemKind::Bool: return TP::BOOL;
  }
  return TP::UNDEFINED;
}

Expected<Dims> checkedDims(const std::vector<int64_t> &dims, uint64_t maxElements,
                           const std::string &what) {
  if (dims.size() > kMaxDims)
    return makeError(ErrorCode::Unsupported, what, " has rank ", dims.size(),
                     "; kiln supports at most ", kMaxDims, " dimensions");
  uint64_t n = 1;
  Dims d;
  for (int64_t v : dims) {
    if (v < 0)
      return makeError(ErrorCode::ModelParse, what, " has a negative dimension ", v);
    if (v != 0 && n > maxElements / uint64_t(v))
      return makeError(ErrorCode::ModelParse, what, " is too large: its dimensions multiply "
                       "beyond the limit of ", maxElements, " elements");
    n *= uint64_t(v);
    d.push_back(dim_t(v));
  }
  if (n > maxElements)
    return makeError(ErrorCode::ModelParse, what, " is too large: ", n,
                     " elements, the limit is ", maxElements);
  return d;
}

void releaseTensorData(onnx::TensorProto &t) {
  std::string().swap(*t.mutable_raw_data());
  google::protobuf::RepeatedField<float>().Swap(t.mutable_float_data());
  google::protobuf::RepeatedField<double>().Swap(t.mutable_double_data());
  google::protobuf::RepeatedField<int32_t>().Swap(t.mutable_int32_data());
  google::protobuf::RepeatedField<int64_t>().Swap(t.mutable_int64_data());
  google::protobuf::RepeatedField<uint64_t>().Swap(t.mutable_uint64_data());
}

Tensor widenEightBit(const Tensor &t) {
  Tensor out(ElemKind::Int32I, t.dims());
  int32_t *o = out.getHandle<int32_t>().begin();
  for (size_t i = 0; i < t.size(); i++)
    o[i] = int32_t(t.getAsDouble(i));
  return out;
}

namespace {

/// A tensor's raw_data: in the message, or where stripInitializerData found it.
struct RawData {
  bool present;
  const char *data;
  size_t size;
  const FileBytes *file = nullptr; ///< the mapped file data lies in, if any
};

/// How many values the typed field of ONNX type \p dt holds in \p t.
size_t typedFieldSize(const onnx::TensorProto &t, int32_t dt) {
  switch (dt) {
  case TP::FLOAT: return size_t(t.float_data_size());
  case TP::DOUBLE: return size_t(t.double_data_size());
  case TP::INT64: return size_t(t.int64_data_size());
  case TP::UINT32: case TP::UINT64: return size_t(t.uint64_data_size());
  default: return size_t(t.int32_data_size());
  }
}

/// Stores the \p n values of \p t's typed field (its type \p dt) into \p out.
void setFromTypedField(Tensor &out, const onnx::TensorProto &t, int32_t dt, size_t n) {
  char *o = out.getUnsafePtr();
  if (n == 0)
    return;
  switch (dt) {
  case TP::FLOAT:
    std::memcpy(o, t.float_data().data(), n * sizeof(float));
    return;
  case TP::DOUBLE:
    for (size_t i = 0; i < n; i++)
      reinterpret_cast<float *>(o)[i] = float(t.double_data(int(i)));
    return;
  case TP::INT64:
    std::memcpy(o, t.int64_data().data(), n * sizeof(int64_t));
    return;
  case TP::UINT32: case TP::UINT64:
    for (size_t i = 0; i < n; i++)
      reinterpret_cast<int64_t *>(o)[i] = int64_t(t.uint64_data(int(i)));
    return;
  default: // the kinds int32_data holds: 8-, 16- and 32-bit integers, bool, 16-bit floats
    for (size_t i = 0; i < n; i++) {
      int32_t v = t.int32_data(int(i));
      if (dt == TP::BOOL)
        reinterpret_cast<bool *>(o)[i] = v != 0;
      else if (dt == TP::FLOAT16)
        reinterpret_cast<float16 *>(o)[i] = float16::fromBits(uint16_t(v));
      else if (dt == TP::BFLOAT16)
        reinterpret_cast<bfloat16 *>(o)[i] = bfloat16::fromBits(uint16_t(v));
      else
        reinterpret_cast<int32_t *>(o)[i] = v;
    }
  }
}

/// An INT8 / UINT8 tensor kept 8-bit: Int8Q / UInt8Q, scale 1, offset 0, the raw values.
Expected<Tensor> eightBitTensor(const onnx::TensorProto &t, uint64_t maxElements,
                                const RawData &raw) {
  std::vector<int64_t> dv(t.dims().begin(), t.dims().end());
  KILN_ASSIGN_OR_RETURN(Dims dims, checkedDims(dv, maxElements, "tensor '" + t.name() + "'"));
  ElemKind k = t.data_type() == TP::INT8 ? ElemKind::Int8Q : ElemKind::UInt8Q;
  size_t n = dims.product();
  size_t have = raw.present ? raw.size : size_t(t.int32_data_size());
  if (have != n)
    return makeError(ErrorCode::ModelParse, "tensor '", t.name(), "' of ",
                     onnxTypeName(t.data_type()), "<", dimsToString(dims), "> holds ", have,
                     " values; expected ", n);
  Tensor out(Type(k, dims, 1.0f, 0));
  if (raw.present) {
    if (n)
      std::memcpy(out.getUnsafePtr(), raw.data, n);
  } else {
    for (size_t i = 0; i < n; i++)
      out.setFromDouble(i, double(t.int32_data(int(i)))); // saturates out-of-range values
  }
  return out;
}

} // namespace

namespace {

/// Where \p t's raw_data lies: in \p span when given (stripInitializerData), else in \p t.
RawData rawDataOf(const onnx::TensorProto &t, const RawSpan *span) {
  return span ? RawData{span->present, span->data, span->size, span->file}
              : RawData{t.has_raw_data(), t.raw_data().data(), t.raw_data().size(), nullptr};
}

/// The type of the tensor \p t holds, once its storage is one Kiln reads (inline, not
/// segmented), its dims are within \p maxElements and its data (\p raw, or the typed field)
/// has the size they say: checked before anything is allocated.
Expected<Type> checkedType(const onnx::TensorProto &t, uint64_t maxElements, const RawData &raw) {
  const int32_t dt = t.data_type();
  std::string what = "tensor '" + t.name() + "'";
  if (t.data_location() == TP::EXTERNAL)
    return makeError(ErrorCode::Unsupported, what, " uses external data, which is not supported");
  if (t.has_segment())
    return makeError(ErrorCode::Unsupported, what, " is segmented, which is not supported");
  std::vector<int64_t> dv(t.dims().begin(), t.dims().end());
  KILN_ASSIGN_OR_RETURN(Dims dims, checkedDims(dv, maxElements, what));
  KILN_ASSIGN_OR_RETURN(ElemKind kind, elemKindFromONNX(dt));
  size_t n = dims.product();
  if (raw.present && raw.size != n * onnxElemSize(dt))
    return makeError(ErrorCode::ModelParse, what, " of ", onnxTypeName(dt), "<",
                     dimsToString(dims), "> has ", raw.size, " bytes of raw_data; expected ",
                     n * onnxElemSize(dt));
  if (!raw.present && typedFieldSize(t, dt) != n)
    return makeError(ErrorCode::ModelParse, what, " of ", onnxTypeName(dt), "<",
                     dimsToString(dims), "> holds ", typedFieldSize(t, dt),
                     " values; expected ", n);
  return Type(kind, dims);
}

/// The transpose of the r x k matrix \p s into the k rows of \p d, whose rows are \p ldd
/// elements apart (d[j * ldd + i] = s[i * k + j]), in tiles of 64 x 64 elements made of
/// 8 x 8 blocks: a tile reads 64 rows of the source and writes 64 rows of the result, a
/// few pages each, so the TLB and the caches hold both while the tile is copied (one
/// 16-element strip of every source row at a time touched a page per row: a fully
/// connected layer of 4096 x 9216 floats walked 4096 pages per strip).
/// T is an unsigned integer of the elements' size.
template <typename T>
void transposeBlocks(const char *src, char *dst, dim_t r, dim_t k, dim_t ldd) {
  const T *s = reinterpret_cast<const T *>(src);
  T *d = reinterpret_cast<T *>(dst);
  constexpr dim_t Tile = 64, B = 8;
  for (dim_t j1 = 0; j1 < k; j1 += Tile)
    for (dim_t i1 = 0; i1 < r; i1 += Tile) {
      dim_t ie = std::min(r, i1 + Tile), je = std::min(k, j1 + Tile);
      for (dim_t i0 = i1; i0 < ie; i0 += B)
        for (dim_t j0 = j1; j0 < je; j0 += B) {
          dim_t ib = std::min(ie, i0 + B), jb = std::min(je, j0 + B);
          for (dim_t j = j0; j < jb; j++)
            for (dim_t i = i0; i < ib; i++)
              d[j * ldd + i] = s[i * k + j];
        }
    }
}

/// transposeBlocks on elements of \p bytes bytes; false for a size it has no type for.
bool transposeBytes(const char *s, char *d, dim_t r, dim_t k, dim_t ldd, size_t bytes) {
  switch (bytes) {
  case 1:
    transposeBlocks<uint8_t>(s, d, r, k, ldd);
    return true;
  case 2:
    transposeBlocks<uint16_t>(s, d, r, k, ldd);
    return true;
  case 4:
    transposeBlocks<uint32_t>(s, d, r, k, ldd);
    return true;
  case 8:
    transposeBlocks<uint64_t>(s, d, r, k, ldd);
    return true;
  default:
    return false;
  }
}

} // namespace

Tensor transpose2D(const Tensor &t) {
  dim_t r = t.dims()[0], k = t.dims()[1];
  Tensor out(Type::withDims(t.getType(), Dims({k, r})));
  if (!transposeBytes(t.getUnsafePtr(), out.getUnsafePtr(), r, k, r, t.getType().elemBytes()))
    return gatherElements(t, Dims({k, r}), [&](size_t j) { return (j % r) * k + j / r; });
  return out;
}

Expected<Tensor> transposedFromProto(const onnx::TensorProto &t, uint64_t maxElements,
                                     const RawSpan *span) {
  const int32_t dt = t.data_type();
  const bool direct = span && span->present && span->file && t.dims_size() == 2 &&
                      (dt == TP::FLOAT || dt == TP::INT32 || dt == TP::INT64);
  if (!direct) {
    KILN_ASSIGN_OR_RETURN(Tensor plain, tensorFromProto(t, maxElements, false, span));
    if (plain.dims().size() != 2)
      return plain;
    return transpose2D(plain);
  }
  KILN_ASSIGN_OR_RETURN(Type ty, checkedType(t, maxElements, rawDataOf(t, span)));
  const size_t es = onnxElemSize(dt), r = ty.dims[0], k = ty.dims[1];
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::tryCreate(Type::withDims(ty, Dims({k, r}))));
  if (r == 0 || k == 0)
    return out;
  // A band of rows at a time through one reused buffer: the result is the only fresh
  // memory the weights take (reading all of them first would fault in a second copy).
  constexpr size_t Band = 64;
  std::vector<char> band(std::min(r, Band) * k * es);
  for (size_t i0 = 0; i0 < r; i0 += Band) {
    size_t rows = std::min(Band, r - i0);
    const char *src = span->data + i0 * k * es;
    if (!span->file->readInto(src, rows * k * es, band.data()))
      std::memcpy(band.data(), src, rows * k * es);
    transposeBytes(band.data(), out.getUnsafePtr() + i0 * es, dim_t(rows), dim_t(k), dim_t(r), es);
  }
  return out;
}

Expected<Tensor> tensorFromProto(const onnx::TensorProto &t, uint64_t maxElements,
                                 bool keepEightBit, const RawSpan *span) {
  const RawData raw = rawDataOf(t, span);
  const int32_t dt = t.data_type();
  if (keepEightBit && (dt == TP::INT8 || dt == TP::UINT8) &&
      t.data_location() != TP::EXTERNAL && !t.has_segment())
    return eightBitTensor(t, maxElements, raw);
  KILN_ASSIGN_OR_RETURN(Type ty, checkedType(t, maxElements, raw));
  KILN_ASSIGN_OR_RETURN(Tensor out, Tensor::tryCreate(ty));
  size_t n = ty.numElements();
  if (raw.present)
    setFromRaw(out, n, dt, raw.data, raw.file);
  else
    setFromTypedField(out, t, dt, n);
  return out;
}

} // namespace kiln::onnximport

namespace kiln {

Expected<Tensor> loadONNXTensorFromBuffer(const void *data, size_t size, std::string *name) {
  if (size > size_t(std::numeric_limits<int>::max()))
    return makeError(ErrorCode::ModelParse, "tensor file is too large (", size, " bytes)");
  onnx::TensorProto t;
  if (!t.ParseFromArray(data, int(size)))
    return makeError(ErrorCode::ModelParse,
                     "cannot parse the ONNX TensorProto (truncated or not a tensor file)");
  if (name)
    *name = t.name();
  return onnximport::tensorFromProto(t, ONNXLoadOptions().maxTensorElements);
}

static Expected<Tensor> loadTensorUnguarded(const std::string &path, std::string *name) {
  return guardHostMemory("reading '" + path + "'", [&]() -> Expected<Tensor> {
    std::string buf;
    if (!onnximport::readWholeFile(path, buf))
      return makeError(ErrorCode::NotFound, "cannot open tensor file '", path, "'");
    Expected<Tensor> t = loadONNXTensorFromBuffer(buf.data(), buf.size(), name);
    if (!t)
      return t.takeError().addContext("'" + path + "'");
    return t;
  });
}

Expected<Tensor> loadONNXTensor(const std::string &path, std::string *name) {
  return guardHostMemory("reading '" + path + "'", [&] { return loadTensorUnguarded(path, name); });
}

} // namespace kiln
