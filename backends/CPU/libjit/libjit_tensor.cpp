// Data movement: one strided box copy serves Copy, Transpose, Slice, Concat (one copy per
// input), Broadcast (stride 0), Tile (a box of twice the rank) and Pad (after a splat);
// Gather copies rows picked by an index tensor. Element sizes of 1, 2, 4 and 8 bytes, so
// every element kind moves (reductions are in libjit_reduce.cpp).
#include "libjit.h"
#include "libjit_box.h"

namespace libjit {
namespace {

/// Copies the box dims[0..rank) from src (element strides srcStrides) to dst (dstStrides).
template <class T>
LIBJIT_INLINE void stridedCopy(T *dst, const T *src, const int64_t *dims,
                               const int64_t *dstStrides, const int64_t *srcStrides,
                               int64_t rank) {
  if (rank == 0) {
    *dst = *src;
    return;
  }
  forEachBoxRow(dims, dstStrides, srcStrides, rank,
                [&](int64_t dOff, int64_t sOff, int64_t inner, int64_t ds, int64_t ss) {
                  T *d = dst + dOff;
                  const T *s = src + sOff;
                  if (ds == 1 && ss == 1) {
                    for (int64_t i = 0; i < inner; i++)
                      d[i] = s[i];
                  } else if (ds == 1 && ss == 0) {
                    T v = s[0];
                    for (int64_t i = 0; i < inner; i++)
                      d[i] = v;
                  } else {
                    for (int64_t i = 0; i < inner; i++)
                      d[i * ds] = s[i * ss];
                  }
                });
}

template <class T> LIBJIT_INLINE void splat(T *dst, T v, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    dst[i] = v;
}

/// Gather along an axis of Data seen as [outer, size, inner]: dst[o][k][:] =
/// src[o][idx[k]][:] for the count indices, a negative index counting from the end. Every
/// index is checked before anything is written: on the first one outside [-size, size),
/// status (unless an earlier check failed) becomes {id, position, index} and dst is left
/// as it was.
template <class T, class I>
LIBJIT_INLINE void gather(T *dst, const T *src, const I *idx, int64_t outer, int64_t size,
                          int64_t count, int64_t inner, int64_t *status, int64_t id) {
  for (int64_t k = 0; k < count; k++) {
    int64_t v = int64_t(idx[k]);
    if (v < -size || v >= size) {
      if (status[0] == 0) {
        status[0] = id;
        status[1] = k;
        status[2] = v;
      }
      return;
    }
  }
  for (int64_t o = 0; o < outer; o++)
    for (int64_t k = 0; k < count; k++) {
      int64_t v = int64_t(idx[k]);
      v += v < 0 ? size : 0;
      const T *s = src + (o * size + v) * inner;
      T *d = dst + (o * count + k) * inner;
      for (int64_t i = 0; i < inner; i++)
        d[i] = s[i];
    }
}

} // namespace
} // namespace libjit

using namespace libjit;

#define LIBJIT_COPY_ENTRY(SUFFIX, T)                                                        \
  LIBJIT_EXPORT void libjit_strided_copy_##SUFFIX(T *dst, const T *src,                     \
                                                  const int64_t *dims,                       \
                                                  const int64_t *dstStrides,                 \
                                                  const int64_t *srcStrides, int64_t rank) { \
    stridedCopy<T>(dst, src, dims, dstStrides, srcStrides, rank);                            \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_splat_##SUFFIX(T *dst, T v, int64_t n) { splat<T>(dst, v, n); }

LIBJIT_COPY_ENTRY(u8, uint8_t)
LIBJIT_COPY_ENTRY(u16, uint16_t)
LIBJIT_COPY_ENTRY(u32, uint32_t)
LIBJIT_COPY_ENTRY(u64, uint64_t)


#define LIBJIT_GATHER_ENTRY(SUFFIX, T, ISUFFIX, I)                                          \
  LIBJIT_EXPORT void libjit_gather_##SUFFIX##_##ISUFFIX(                                     \
      T *dst, const T *src, const I *idx, int64_t outer, int64_t size, int64_t count,        \
      int64_t inner, int64_t *status, int64_t id) {                                          \
    gather<T, I>(dst, src, idx, outer, size, count, inner, status, id);                      \
  }
#define LIBJIT_GATHER_ENTRIES(SUFFIX, T)                                                    \
  LIBJIT_GATHER_ENTRY(SUFFIX, T, i32, int32_t)                                               \
  LIBJIT_GATHER_ENTRY(SUFFIX, T, i64, int64_t)

LIBJIT_GATHER_ENTRIES(u8, uint8_t)
LIBJIT_GATHER_ENTRIES(u16, uint16_t)
LIBJIT_GATHER_ENTRIES(u32, uint32_t)
LIBJIT_GATHER_ENTRIES(u64, uint64_t)
