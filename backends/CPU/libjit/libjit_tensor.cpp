// Data movement and reductions: one strided box copy serves Copy, Transpose, Slice,
// Concat (one copy per input), Broadcast (stride 0), Tile (a box of twice the rank) and
// Pad (after a splat). Element sizes of 1, 2, 4 and 8 bytes, so every element kind moves.
#include "libjit.h"

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
  int64_t inner = dims[rank - 1], ds = dstStrides[rank - 1], ss = srcStrides[rank - 1];
  int64_t outer = 1;
  for (int64_t i = 0; i + 1 < rank; i++)
    outer *= dims[i];
  int64_t idx[16] = {0};
  int64_t dOff = 0, sOff = 0;
  for (int64_t o = 0; o < outer; o++) {
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
    // Advance the odometer over the outer dimensions.
    for (int64_t j = rank - 2; j >= 0; j--) {
      idx[j]++;
      dOff += dstStrides[j];
      sOff += srcStrides[j];
      if (idx[j] < dims[j])
        break;
      dOff -= dstStrides[j] * dims[j];
      sOff -= srcStrides[j] * dims[j];
      idx[j] = 0;
    }
  }
}

template <class T> LIBJIT_INLINE void splat(T *dst, T v, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    dst[i] = v;
}

enum class RedOp { Sum, Max, Min, Prod };

template <RedOp op> LIBJIT_INLINE float combine(float a, float b) {
  switch (op) {
  case RedOp::Sum:
    return a + b;
  case RedOp::Max:
    return a > b ? a : b;
  case RedOp::Min:
    return a < b ? a : b;
  case RedOp::Prod:
    return a * b;
  }
  return a;
}

/// dst[offset(idx)] = op over src[idx], where dstStrides are 0 on reduced dimensions.
/// dst holds dstSize elements, first set to init.
template <RedOp op>
LIBJIT_INLINE void reduce(float *dst, const float *src, const int64_t *dims,
                          const int64_t *dstStrides, int64_t rank, int64_t dstSize, float init) {
  for (int64_t i = 0; i < dstSize; i++)
    dst[i] = init;
  int64_t total = 1;
  for (int64_t i = 0; i < rank; i++)
    total *= dims[i];
  if (rank == 0) {
    dst[0] = combine<op>(dst[0], src[0]);
    return;
  }
  int64_t inner = dims[rank - 1], ids = dstStrides[rank - 1];
  int64_t idx[16] = {0};
  int64_t dOff = 0;
  for (int64_t s = 0; s < total; s += inner) {
    const float *x = src + s;
    if (ids == 0) {
      float a = dst[dOff];
      for (int64_t i = 0; i < inner; i++)
        a = combine<op>(a, x[i]);
      dst[dOff] = a;
    } else {
      for (int64_t i = 0; i < inner; i++)
        dst[dOff + i * ids] = combine<op>(dst[dOff + i * ids], x[i]);
    }
    for (int64_t j = rank - 2; j >= 0; j--) {
      idx[j]++;
      dOff += dstStrides[j];
      if (idx[j] < dims[j])
        break;
      dOff -= dstStrides[j] * dims[j];
      idx[j] = 0;
    }
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

#define LIBJIT_REDUCE_ENTRY(NAME, OP)                                                       \
  LIBJIT_EXPORT void libjit_reduce_##NAME##_f32(float *dst, const float *src,               \
                                                const int64_t *dims,                         \
                                                const int64_t *dstStrides, int64_t rank,     \
                                                int64_t dstSize, float init) {               \
    reduce<RedOp::OP>(dst, src, dims, dstStrides, rank, dstSize, init);                      \
  }

LIBJIT_REDUCE_ENTRY(sum, Sum)
LIBJIT_REDUCE_ENTRY(max, Max)
LIBJIT_REDUCE_ENTRY(min, Min)
LIBJIT_REDUCE_ENTRY(prod, Prod)

LIBJIT_EXPORT void libjit_scale_f32(float *dst, int64_t n, float s) {
  for (int64_t i = 0; i < n; i++)
    dst[i] *= s;
}
