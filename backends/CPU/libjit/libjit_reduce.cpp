// Reductions: Reduce{Sum,Max,Min,Prod} over any set of axes (ReduceMean is a sum then a
// scale), ArgMax/ArgMin along one axis and TopK along the last one. One template per
// family, instantiated per element kind: f32, i32, i64, and i8 (the raw Int8Q values, which
// ArgMax/ArgMin/TopK order as the Interpreter does: a positive scale keeps the order).
// Integer sums and products wrap (two's complement), which equals the Interpreter's int64
// accumulation truncated to the output's width.
#include "libjit.h"

namespace libjit {
namespace {

enum class RedOp { Sum, Max, Min, Prod };

/// Unsigned twin of an integer type, for wrapping arithmetic.
template <class T> struct Wrap { using type = T; };
template <> struct Wrap<int32_t> { using type = uint32_t; };
template <> struct Wrap<int64_t> { using type = uint64_t; };

template <RedOp op, class T> LIBJIT_INLINE T combine(T a, T b) {
  using W = typename Wrap<T>::type;
  switch (op) {
  case RedOp::Sum:
    return T(W(a) + W(b));
  case RedOp::Max:
    return a > b ? a : b;
  case RedOp::Min:
    return a < b ? a : b;
  case RedOp::Prod:
    return T(W(a) * W(b));
  }
  return a;
}

/// dst[offset(idx)] = op over src[idx], where dstStrides are 0 on reduced dimensions.
/// dst holds dstSize elements, first set to init.
template <RedOp op, class T>
LIBJIT_INLINE void reduce(T *dst, const T *src, const int64_t *dims, const int64_t *dstStrides,
                          int64_t rank, int64_t dstSize, T init) {
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
    const T *x = src + s;
    if (ids == 0) {
      T a = dst[dOff];
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

/// Input seen as [outer, size, inner]: dst[o][i] = the index along the middle axis of the
/// largest (isMax) or smallest element, the first one on ties; a NaN wins only at index 0.
template <class T, bool isMax>
LIBJIT_INLINE void argReduce(int64_t *dst, const T *src, int64_t outer, int64_t size,
                             int64_t inner) {
  for (int64_t o = 0; o < outer; o++) {
    const T *x = src + o * size * inner;
    for (int64_t i = 0; i < inner; i++) {
      int64_t best = 0;
      T b = x[i];
      for (int64_t a = 1; a < size; a++) {
        T v = x[a * inner + i];
        if (isMax ? v > b : v < b) {
          best = a;
          b = v;
        }
      }
      dst[o * inner + i] = best;
    }
  }
}

/// The k largest of each row of n elements, in descending order, equal values by
/// ascending index (a stable sort's order): each element is inserted after every kept one
/// it does not exceed. values/indices rows of k hold the result.
template <class T>
LIBJIT_INLINE void topK(T *values, int64_t *indices, const T *src, int64_t rows, int64_t n,
                        int64_t k) {
  for (int64_t r = 0; r < rows; r++) {
    const T *x = src + r * n;
    T *v = values + r * k;
    int64_t *ix = indices + r * k;
    int64_t kept = 0;
    for (int64_t j = 0; j < n; j++) {
      T e = x[j];
      int64_t pos = kept;
      while (pos > 0 && e > v[pos - 1])
        pos--;
      if (pos >= k)
        continue;
      int64_t last = kept < k ? kept : k - 1;
      for (int64_t q = last; q > pos; q--) {
        v[q] = v[q - 1];
        ix[q] = ix[q - 1];
      }
      v[pos] = e;
      ix[pos] = j;
      if (kept < k)
        kept++;
    }
  }
}

} // namespace
} // namespace libjit

using namespace libjit;

#define LIBJIT_REDUCE_ENTRY(NAME, OP, SUFFIX, T)                                            \
  LIBJIT_EXPORT void libjit_reduce_##NAME##_##SUFFIX(T *dst, const T *src,                  \
                                                     const int64_t *dims,                    \
                                                     const int64_t *dstStrides,              \
                                                     int64_t rank, int64_t dstSize, T init) { \
    reduce<RedOp::OP, T>(dst, src, dims, dstStrides, rank, dstSize, init);                   \
  }
#define LIBJIT_REDUCE_ENTRIES(SUFFIX, T)                                                    \
  LIBJIT_REDUCE_ENTRY(sum, Sum, SUFFIX, T)                                                   \
  LIBJIT_REDUCE_ENTRY(max, Max, SUFFIX, T)                                                   \
  LIBJIT_REDUCE_ENTRY(min, Min, SUFFIX, T)                                                   \
  LIBJIT_REDUCE_ENTRY(prod, Prod, SUFFIX, T)

LIBJIT_REDUCE_ENTRIES(f32, float)
LIBJIT_REDUCE_ENTRIES(i32, int32_t)
LIBJIT_REDUCE_ENTRIES(i64, int64_t)

LIBJIT_EXPORT void libjit_scale_f32(float *dst, int64_t n, float s) {
  for (int64_t i = 0; i < n; i++)
    dst[i] *= s;
}

#define LIBJIT_ORDER_ENTRIES(SUFFIX, T)                                                     \
  LIBJIT_EXPORT void libjit_argmax_##SUFFIX(int64_t *dst, const T *src, int64_t outer,      \
                                            int64_t size, int64_t inner) {                   \
    argReduce<T, true>(dst, src, outer, size, inner);                                        \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_argmin_##SUFFIX(int64_t *dst, const T *src, int64_t outer,      \
                                            int64_t size, int64_t inner) {                   \
    argReduce<T, false>(dst, src, outer, size, inner);                                       \
  }                                                                                          \
  LIBJIT_EXPORT void libjit_topk_##SUFFIX(T *values, int64_t *indices, const T *src,        \
                                          int64_t rows, int64_t n, int64_t k) {              \
    topK<T>(values, indices, src, rows, n, k);                                               \
  }

LIBJIT_ORDER_ENTRIES(f32, float)
LIBJIT_ORDER_ENTRIES(i32, int32_t)
LIBJIT_ORDER_ENTRIES(i64, int64_t)
LIBJIT_ORDER_ENTRIES(i8, int8_t)
