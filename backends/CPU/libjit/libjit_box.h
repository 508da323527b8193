// The walk over a strided box shared by the data-movement kernels: the copy
// (libjit_tensor.cpp) and the requantizing copy (libjit_quant.cpp).
#ifndef KILN_BACKENDS_CPU_LIBJIT_LIBJIT_BOX_H
#define KILN_BACKENDS_CPU_LIBJIT_LIBJIT_BOX_H

#include "libjit_defs.h"

namespace libjit {

/// Calls row(dOff, sOff, inner, ds, ss) for every innermost row of the box dims[0..rank)
/// (rank 1..16), where dOff/sOff are the element offsets of the row's start in the
/// destination (strides dstStrides) and the source (srcStrides).
template <class Row>
LIBJIT_INLINE void forEachBoxRow(const int64_t *dims, const int64_t *dstStrides,
                                 const int64_t *srcStrides, int64_t rank, Row row) {
  int64_t inner = dims[rank - 1], ds = dstStrides[rank - 1], ss = srcStrides[rank - 1];
  int64_t outer = 1;
  for (int64_t i = 0; i + 1 < rank; i++)
    outer *= dims[i];
  int64_t idx[16] = {0};
  int64_t dOff = 0, sOff = 0;
  for (int64_t o = 0; o < outer; o++) {
    row(dOff, sOff, inner, ds, ss);
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

} // namespace libjit

#endif // KILN_BACKENDS_CPU_LIBJIT_LIBJIT_BOX_H
