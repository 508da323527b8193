// Index-driven data movement of the ONNX breadth operators: GatherElements, GatherND
// (elements moved raw, by element size), ScatterElements and ScatterND (replace, or
// combine with add / mul / max / min per value kind) and CumSum (a running sum per
// numeric kind). Indices are int32 or int64; a negative index counts from the end. An index
// out of range stops the kernel and, unless an earlier check failed, sets the status words
// to {id, position, index} (the caller reports it as the Interpreter's error).
#include "libjit.h"

namespace libjit {
namespace {

/// Reduction codes shared with the emitter (EmitData.cpp).
enum Red : int64_t { kNone = 0, kAdd = 1, kMul = 2, kMax = 3, kMin = 4 };

LIBJIT_INLINE void fail(int64_t *status, int64_t id, int64_t position, int64_t value) {
  if (status[0] == 0) {
    status[0] = id;
    status[1] = position;
    status[2] = value;
  }
}

/// \p v normalised into [0, size); false when outside [-size, size).
LIBJIT_INLINE bool norm(int64_t &v, int64_t size) {
  if (v < -size || v >= size)
    return false;
  v += v < 0 ? size : 0;
  return true;
}

/// The combining rules of each value kind, as the Interpreter's: integers wrap, floats
/// propagate NaN through max/min, and Bool ORs (add, max) or ANDs (mul, min).
template <class T> struct Combine;
template <> struct Combine<float> {
  LIBJIT_INLINE float apply(int64_t red, float y, float u) {
    switch (red) {
    case kAdd:
      return y + u;
    case kMul:
      return y * u;
    case kMax:
    case kMin:
      if (y != y)
        return y;
      if (u != u)
        return u;
      return red == kMax ? (y > u ? y : u) : (y < u ? y : u);
    default:
      return u;
    }
  }
};
template <class T, class U> struct CombineInt {
  LIBJIT_INLINE T apply(int64_t red, T y, T u) {
    switch (red) {
    case kAdd:
      return T(U(y) + U(u));
    case kMul:
      return T(U(y) * U(u));
    case kMax:
      return y > u ? y : u;
    case kMin:
      return y < u ? y : u;
    default:
      return u;
    }
  }
};
template <> struct Combine<int32_t> : CombineInt<int32_t, uint32_t> {};
template <> struct Combine<int64_t> : CombineInt<int64_t, uint64_t> {};
/// Bool (one byte, 0 or 1).
template <> struct Combine<uint8_t> {
  LIBJIT_INLINE uint8_t apply(int64_t red, uint8_t y, uint8_t u) {
    switch (red) {
    case kAdd:
    case kMax:
      return uint8_t((y | u) != 0);
    case kMul:
    case kMin:
      return uint8_t(y != 0 && u != 0);
    default:
      return u;
    }
  }
};
/// 16-bit floats move only (Reduction none; the emitter offers nothing else).
template <> struct Combine<uint16_t> {
  LIBJIT_INLINE uint16_t apply(int64_t, uint16_t, uint16_t u) { return u; }
};

/// Walks the row-major positions of a box \p dims (rank >= 1), calling f(position, coords).
template <class F>
LIBJIT_INLINE void forEachPos(const int64_t *dims, int64_t rank, int64_t *coords, F f) {
  int64_t n = 1;
  for (int64_t d = 0; d < rank; d++) {
    n *= dims[d];
    coords[d] = 0;
  }
  for (int64_t k = 0; k < n; k++) {
    if (!f(k))
      return;
    for (int64_t d = rank - 1; d >= 0; d--) {
      if (++coords[d] < dims[d])
        break;
      coords[d] = 0;
    }
  }
}

/// For each position k of idx (shape idxDims, row-major), the offset (strides) of that
/// position with dim axis replaced by idx[k]: fn(k, offset). Stops after reporting the
/// first index outside [-axisSize, axisSize) (check id). Ranks up to 16.
template <class I, class Fn>
LIBJIT_INLINE void forEachAxisIndex(const I *idx, const int64_t *idxDims,
                                    const int64_t *strides, int64_t rank, int64_t axis,
                                    int64_t axisSize, int64_t *status, int64_t id, Fn fn) {
  int64_t c[16];
  forEachPos(idxDims, rank, c, [&](int64_t k) {
    int64_t v = int64_t(idx[k]);
    if (!norm(v, axisSize)) {
      fail(status, id, k, int64_t(idx[k]));
      return false;
    }
    int64_t off = 0;
    for (int64_t d = 0; d < rank; d++)
      off += (d == axis ? v : c[d]) * strides[d];
    fn(k, off);
    return true;
  });
}

/// GatherElements: dst (shape idxDims) [i] = src[i with dim axis replaced by idx[i]], src
/// of strides srcStrides and size axisSize along axis. Ranks up to 16.
template <class T, class I>
LIBJIT_INLINE void gatherElements(T *dst, const T *src, const I *idx, const int64_t *idxDims,
                                  const int64_t *srcStrides, int64_t rank, int64_t axis,
                                  int64_t axisSize, int64_t *status, int64_t id) {
  forEachAxisIndex(idx, idxDims, srcStrides, rank, axis, axisSize, status, id,
                   [&](int64_t k, int64_t off) { dst[k] = src[off]; });
}

/// ScatterElements: dst (already a copy of Data, strides dstStrides) [i with dim axis
/// replaced by idx[i]] combined with upd[i], in row-major order of i (shape idxDims).
template <class T, class I>
LIBJIT_INLINE void scatterElements(T *dst, const I *idx, const T *upd, const int64_t *idxDims,
                                   const int64_t *dstStrides, int64_t rank, int64_t axis,
                                   int64_t axisSize, int64_t red, int64_t *status, int64_t id) {
  forEachAxisIndex(idx, idxDims, dstStrides, rank, axis, axisSize, status, id,
                   [&](int64_t k, int64_t off) {
                     dst[off] = Combine<T>::apply(red, dst[off], upd[k]);
                   });
}

/// The element offset of index tuple j (k entries of idx, entry m along a dim of size
/// dims[m] and stride strides[m]), or -1 after reporting a bad entry (check id + m).
template <class I>
LIBJIT_INLINE int64_t tupleOffset(const I *idx, int64_t j, int64_t k, const int64_t *dims,
                                  const int64_t *strides, int64_t *status, int64_t id) {
  int64_t off = 0;
  for (int64_t m = 0; m < k; m++) {
    int64_t v = int64_t(idx[j * k + m]);
    if (!norm(v, dims[m])) {
      fail(status, id + m, j * k + m, int64_t(idx[j * k + m]));
      return -1;
    }
    off += v * strides[m];
  }
  return off;
}

/// ScatterND: dst (a copy of Data) slice at tuple j combined element by element with
/// upd[j * slice ..], tuples in order.
template <class T, class I>
LIBJIT_INLINE void scatterND(T *dst, const I *idx, const T *upd, int64_t tuples, int64_t k,
                             const int64_t *dims, const int64_t *strides, int64_t slice,
                             int64_t red, int64_t *status, int64_t id) {
  for (int64_t j = 0; j < tuples; j++) {
    int64_t off = tupleOffset(idx, j, k, dims, strides, status, id);
    if (off < 0)
      return;
    T *y = dst + off;
    const T *u = upd + j * slice;
    if (red == kNone) {
      for (int64_t e = 0; e < slice; e++)
        y[e] = u[e];
    } else {
      for (int64_t e = 0; e < slice; e++)
        y[e] = Combine<T>::apply(red, y[e], u[e]);
    }
  }
}

/// GatherND: dst[j * slice ..] = the slice of src at batch (j / perBatch) (stride
/// batchStride) and tuple j.
template <class T, class I>
LIBJIT_INLINE void gatherND(T *dst, const T *src, const I *idx, int64_t tuples,
                            int64_t perBatch, int64_t batchStride, int64_t k,
                            const int64_t *dims, const int64_t *strides, int64_t slice,
                            int64_t *status, int64_t id) {
  for (int64_t j = 0; j < tuples; j++) {
    int64_t off = tupleOffset(idx, j, k, dims, strides, status, id);
    if (off < 0)
      return;
    const T *s = src + (j / perBatch) * batchStride + off;
    T *d = dst + j * slice;
    for (int64_t e = 0; e < slice; e++)
      d[e] = s[e];
  }
}

/// CumSum along the middle dim of [outer, size, inner]; each element is read before its
/// own position is written, so dst may be src.
template <class T, class U>
LIBJIT_INLINE void cumsum(T *dst, const T *src, int64_t outer, int64_t size, int64_t inner,
                          int64_t exclusive, int64_t reverse) {
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      U acc = U(0);
      for (int64_t k = 0; k < size; k++) {
        int64_t a = reverse ? size - 1 - k : k;
        int64_t at = (o * size + a) * inner + i;
        U v = U(src[at]);
        if (exclusive)
          dst[at] = T(acc);
        acc = acc + v;
        if (!exclusive)
          dst[at] = T(acc);
      }
    }
}

} // namespace
} // namespace libjit

using namespace libjit;

#define LIBJIT_GATHER_IDX_ENTRY(SUFFIX, T, ISUFFIX, I)                                      \
  LIBJIT_EXPORT void libjit_gather_elements_##SUFFIX##_##ISUFFIX(                            \
      T *dst, const T *src, const I *idx, const int64_t *idxDims, const int64_t *srcStrides, \
      int64_t rank, int64_t axis, int64_t axisSize, int64_t *status, int64_t id) {           \
    gatherElements<T, I>(dst, src, idx, idxDims, srcStrides, rank, axis, axisSize, status,   \
                         id);                                                                \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_gather_nd_##SUFFIX##_##ISUFFIX(                                  \
      T *dst, const T *src, const I *idx, int64_t tuples, int64_t perBatch,                  \
      int64_t batchStride, int64_t k, const int64_t *dims, const int64_t *strides,           \
      int64_t slice, int64_t *status, int64_t id) {                                          \
    gatherND<T, I>(dst, src, idx, tuples, perBatch, batchStride, k, dims, strides, slice,    \
                   status, id);                                                              \
  }
#define LIBJIT_GATHER_IDX_ENTRIES(SUFFIX, T)                                                \
  LIBJIT_GATHER_IDX_ENTRY(SUFFIX, T, i32, int32_t)                                           \
  LIBJIT_GATHER_IDX_ENTRY(SUFFIX, T, i64, int64_t)
LIBJIT_GATHER_IDX_ENTRIES(u8, uint8_t)
LIBJIT_GATHER_IDX_ENTRIES(u16, uint16_t)
LIBJIT_GATHER_IDX_ENTRIES(u32, uint32_t)
LIBJIT_GATHER_IDX_ENTRIES(u64, uint64_t)

#define LIBJIT_SCATTER_ENTRY(SUFFIX, T, ISUFFIX, I)                                         \
  LIBJIT_EXPORT void libjit_scatter_elements_##SUFFIX##_##ISUFFIX(                           \
      T *dst, const I *idx, const T *upd, const int64_t *idxDims, const int64_t *dstStrides, \
      int64_t rank, int64_t axis, int64_t axisSize, int64_t red, int64_t *status,            \
      int64_t id) {                                                                          \
    scatterElements<T, I>(dst, idx, upd, idxDims, dstStrides, rank, axis, axisSize, red,     \
                          status, id);                                                       \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_scatter_nd_##SUFFIX##_##ISUFFIX(                                 \
      T *dst, const I *idx, const T *upd, int64_t tuples, int64_t k, const int64_t *dims,    \
      const int64_t *strides, int64_t slice, int64_t red, int64_t *status, int64_t id) {     \
    scatterND<T, I>(dst, idx, upd, tuples, k, dims, strides, slice, red, status, id);        \
  }
#define LIBJIT_SCATTER_ENTRIES(SUFFIX, T)                                                   \
  LIBJIT_SCATTER_ENTRY(SUFFIX, T, i32, int32_t)                                              \
  LIBJIT_SCATTER_ENTRY(SUFFIX, T, i64, int64_t)
LIBJIT_SCATTER_ENTRIES(f32, float)
LIBJIT_SCATTER_ENTRIES(i32, int32_t)
LIBJIT_SCATTER_ENTRIES(i64, int64_t)
LIBJIT_SCATTER_ENTRIES(bool, uint8_t)
LIBJIT_SCATTER_ENTRIES(u16, uint16_t)

LIBJIT_EXPORT void libjit_cumsum_f32(float *dst, const float *src, int64_t outer, int64_t size,
                                     int64_t inner, int64_t exclusive, int64_t reverse) {
  cumsum<float, float>(dst, src, outer, size, inner, exclusive, reverse);
}
LIBJIT_EXPORT void libjit_cumsum_i32(int32_t *dst, const int32_t *src, int64_t outer,
                                     int64_t size, int64_t inner, int64_t exclusive,
                                     int64_t reverse) {
  cumsum<uint32_t, uint32_t>(reinterpret_cast<uint32_t *>(dst),
                             reinterpret_cast<const uint32_t *>(src), outer, size, inner,
                             exclusive, reverse);
}
LIBJIT_EXPORT void libjit_cumsum_i64(int64_t *dst, const int64_t *src, int64_t outer,
                                     int64_t size, int64_t inner, int64_t exclusive,
                                     int64_t reverse) {
  cumsum<uint64_t, uint64_t>(reinterpret_cast<uint64_t *>(dst),
                             reinterpret_cast<const uint64_t *>(src), outer, size, inner,
                             exclusive, reverse);
}
