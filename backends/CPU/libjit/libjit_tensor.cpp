// Data movement: one strided box copy serves Copy, Transpose, Slice, Concat (one copy per
// input), Broadcast (stride 0), Tile (a box of twice the rank) and Pad (after a splat);
// Gather copies rows picked by an index tensor. Element sizes of 1, 2, 4 and 8 bytes, so
// every element kind moves (reductions are in libjit_reduce.cpp).
#include "libjit.h"
#include "libjit_box.h"
#include "libjit_vec.h"

namespace libjit {
namespace {

/// dst[i * dsi + j] = src[i + j * ssj] for i < I, j < J (4-byte elements): the two
/// innermost dimensions of a box whose source and destination are contiguous along
/// different ones (NCHW <-> NHWC). 16 x 16 blocks are read as 16 source runs, transposed in
/// registers and written as 16 destination runs (elements move as bits, never as float
/// arithmetic); the ragged edges one element at a time.
LIBJIT_INLINE void transposeRows4(uint32_t *dst, const uint32_t *src, int64_t I, int64_t J,
                                  int64_t dsi, int64_t ssj) {
  int64_t iEnd = I / 16 * 16, jEnd = J / 16 * 16;
  for (int64_t i0 = 0; i0 < iEnd; i0 += 16) {
    for (int64_t j0 = 0; j0 < jEnd; j0 += 16) {
      F16 v[16];
      LIBJIT_UNROLL
      for (int q = 0; q < 16; q++)
        __builtin_memcpy(&v[q], src + (j0 + q) * ssj + i0, sizeof(F16));
      transpose16(v);
      LIBJIT_UNROLL
      for (int q = 0; q < 16; q++)
        __builtin_memcpy(dst + (i0 + q) * dsi + j0, &v[q], sizeof(F16));
    }
    for (int64_t i = i0; i < i0 + 16; i++)
      for (int64_t j = jEnd; j < J; j++)
        dst[i * dsi + j] = src[i + j * ssj];
  }
  for (int64_t i = iEnd; i < I; i++)
    for (int64_t j = 0; j < J; j++)
      dst[i * dsi + j] = src[i + j * ssj];
}

/// Copies the box dims[0..rank) from src (element strides srcStrides) to dst (dstStrides).
template <class T>
LIBJIT_INLINE void stridedCopy(T *dst, const T *src, const int64_t *dims,
                               const int64_t *dstStrides, const int64_t *srcStrides,
                               int64_t rank) {
  if (rank == 0) {
    *dst = *src;
    return;
  }
  // A transpose of the two innermost dimensions: blocks in registers (4-byte elements).
  if (sizeof(T) == 4 && rank >= 2 && dstStrides[rank - 1] == 1 && srcStrides[rank - 2] == 1 &&
      srcStrides[rank - 1] != 1 && dims[rank - 1] >= 16 && dims[rank - 2] >= 16) {
    int64_t J = dims[rank - 1], ssj = srcStrides[rank - 1];
    forEachBoxRow(dims, dstStrides, srcStrides, rank - 1,
                  [&](int64_t dOff, int64_t sOff, int64_t I, int64_t dsi, int64_t) {
                    transposeRows4(reinterpret_cast<uint32_t *>(dst + dOff),
                                   reinterpret_cast<const uint32_t *>(src + sOff), I, J, dsi,
                                   ssj);
                  });
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

/// This thread's share of stridedCopy: the outermost dimension split between the threads
/// (rank 1: in runs of 64 elements).
template <class T>
LIBJIT_INLINE void stridedCopyPart(T *dst, const T *src, const int64_t *dims,
                                   const int64_t *dstStrides, const int64_t *srcStrides,
                                   int64_t rank, int64_t tid, int64_t nthreads) {
  if (rank == 0) {
    if (tid == 0)
      *dst = *src;
    return;
  }
  int64_t b, e;
  partition(dims[0], rank == 1 ? 64 : 1, tid, nthreads, &b, &e);
  if (b >= e)
    return;
  int64_t d[16];
  for (int64_t i = 0; i < rank && i < 16; i++)
    d[i] = dims[i];
  d[0] = e - b;
  stridedCopy<T>(dst + b * dstStrides[0], src + b * srcStrides[0], d, dstStrides, srcStrides,
                 rank);
}

template <class T> LIBJIT_INLINE void splat(T *dst, T v, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    dst[i] = v;
}

/// Gather along an axis of Data seen as [outer, size, inner]: dst[o][k][:] =
/// src[o][idx[k]][:] for the count indices, a negative index counting from the end. Every
/// index is checked before anything is written: on the first one outside [-size, size),
/// status (unless an earlier check failed) becomes {id, position, index} and dst is left
/// as it was. Thread \p tid of \p nthreads copies its share of the outer x count rows
/// (every thread checks every index; thread 0 reports).
template <class T, class I>
LIBJIT_INLINE void gather(T *dst, const T *src, const I *idx, int64_t outer, int64_t size,
                          int64_t count, int64_t inner, int64_t *status, int64_t id,
                          int64_t tid, int64_t nthreads) {
  for (int64_t k = 0; k < count; k++) {
    int64_t v = int64_t(idx[k]);
    if (v < -size || v >= size) {
      if (tid == 0 && status[0] == 0) {
        status[0] = id;
        status[1] = k;
        status[2] = v;
      }
      return;
    }
  }
  int64_t r0, r1;
  partition(outer * count, 1, tid, nthreads, &r0, &r1);
  for (int64_t r = r0; r < r1;) {
    int64_t o = r / count, k0 = r % count, k1 = minI(count, k0 + (r1 - r));
    const T *so = src + o * size * inner;
    T *d = dst + (o * count + k0) * inner;
    if (inner == 1) {
      // One element per index (the gathers of a Resize along its last axis).
      for (int64_t k = k0; k < k1; k++) {
        int64_t v = int64_t(idx[k]);
        v += v < 0 ? size : 0;
        d[k - k0] = so[v];
      }
    } else {
      for (int64_t k = k0; k < k1; k++) {
        int64_t v = int64_t(idx[k]);
        v += v < 0 ? size : 0;
        const T *s = so + v * inner;
        T *dk = d + (k - k0) * inner;
        for (int64_t i = 0; i < inner; i++)
          dk[i] = s[i];
      }
    }
    r += k1 - k0;
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
  LIBJIT_EXPORT void libjit_strided_copy_part_##SUFFIX(                                      \
      T *dst, const T *src, const int64_t *dims, const int64_t *dstStrides,                  \
      const int64_t *srcStrides, int64_t rank, int64_t tid, int64_t nthreads) {              \
    stridedCopyPart<T>(dst, src, dims, dstStrides, srcStrides, rank, tid, nthreads);         \
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
    gather<T, I>(dst, src, idx, outer, size, count, inner, status, id, 0, 1);                \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_gather_part_##SUFFIX##_##ISUFFIX(                                \
      T *dst, const T *src, const I *idx, int64_t outer, int64_t size, int64_t count,        \
      int64_t inner, int64_t *status, int64_t id, int64_t tid, int64_t nthreads) {           \
    gather<T, I>(dst, src, idx, outer, size, count, inner, status, id, tid, nthreads);       \
  }
#define LIBJIT_GATHER_ENTRIES(SUFFIX, T)                                                    \
  LIBJIT_GATHER_ENTRY(SUFFIX, T, i32, int32_t)                                               \
  LIBJIT_GATHER_ENTRY(SUFFIX, T, i64, int64_t)

LIBJIT_GATHER_ENTRIES(u8, uint8_t)
LIBJIT_GATHER_ENTRIES(u16, uint16_t)
LIBJIT_GATHER_ENTRIES(u32, uint32_t)
LIBJIT_GATHER_ENTRIES(u64, uint64_t)
