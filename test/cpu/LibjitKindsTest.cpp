// The kernels of the non-float families compiled natively, against hand-computed values:
// Gather (element sizes, both index kinds, negative indices, the run-time check), integer
// reductions, ArgMax/ArgMin and TopK (ties), and quantization (rounding half away from
// zero, saturation, NaN, thread shares).
#include "backends/CPU/libjit/libjit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace {

TEST(LibjitKinds, GatherRowsAndNegativeIndices) {
  // Data [2, 3, 2] gathered along axis 1 (outer 2, size 3, inner 2) by [2, -3, -1].
  std::vector<uint64_t> src = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  std::vector<int32_t> idx = {2, -3, -1};
  std::vector<uint64_t> dst(12, 99);
  int64_t status[3] = {0, 0, 0};
  libjit_gather_u64_i32(dst.data(), src.data(), idx.data(), 2, 3, 3, 2, status, 7);
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(dst, (std::vector<uint64_t>{4, 5, 0, 1, 4, 5, 10, 11, 6, 7, 10, 11}));
  // Bytes (Bool, int8) with Int64 indices, axis 0 of [4] (inner 1).
  std::vector<uint8_t> b = {10, 20, 30, 40}, bd(3);
  std::vector<int64_t> bi = {3, -4, 1};
  libjit_gather_u8_i64(bd.data(), b.data(), bi.data(), 1, 4, 3, 1, status, 7);
  EXPECT_EQ(bd, (std::vector<uint8_t>{40, 10, 20}));
}

TEST(LibjitKinds, GatherReportsTheFirstBadIndexAndWritesNothing) {
  std::vector<uint32_t> src = {1, 2, 3}, dst(4, 77);
  std::vector<int64_t> idx = {0, 3, -4, 1};
  int64_t status[3] = {0, 0, 0};
  libjit_gather_u32_i64(dst.data(), src.data(), idx.data(), 1, 3, 4, 1, status, 5);
  EXPECT_EQ(status[0], 5);
  EXPECT_EQ(status[1], 1);
  EXPECT_EQ(status[2], 3);
  EXPECT_EQ(dst, (std::vector<uint32_t>(4, 77)));
  // A later failure keeps the first report.
  std::vector<int32_t> idx32 = {-4};
  libjit_gather_u32_i32(dst.data(), src.data(), idx32.data(), 1, 3, 1, 1, status, 6);
  EXPECT_EQ(status[0], 5);
}

TEST(LibjitKinds, IntegerReductionsWrap) {
  // [[2147483647, 1], [-5, 3]] summed over axis 1 (dstStrides {1, 0}): wraps to INT32_MIN.
  std::vector<int32_t> x = {2147483647, 1, -5, 3}, y(2);
  int64_t dims[] = {2, 2}, ds[] = {1, 0};
  libjit_reduce_sum_i32(y.data(), x.data(), dims, ds, 2, 2, 0);
  EXPECT_EQ(y[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(y[1], -2);
  std::vector<int64_t> l = {-7, 4, 9, -2}, m(2);
  int64_t ds0[] = {0, 1}; // over axis 0
  libjit_reduce_max_i64(m.data(), l.data(), dims, ds0, 2, 2, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(m, (std::vector<int64_t>{9, 4}));
  libjit_reduce_prod_i64(m.data(), l.data(), dims, ds0, 2, 2, 1);
  EXPECT_EQ(m, (std::vector<int64_t>{-63, -8}));
}

TEST(LibjitKinds, ArgMaxArgMinFirstOnTies) {
  // [2, 3, 2] along the middle axis: column (o, i) of 3 values.
  std::vector<int8_t> x = {1, 5, 5, 5, 5, -1, -3, 0, -3, 0, -3, 0};
  std::vector<int64_t> mx(4), mn(4);
  libjit_argmax_i8(mx.data(), x.data(), 2, 3, 2);
  libjit_argmin_i8(mn.data(), x.data(), 2, 3, 2);
  // Columns: (0,0) [1 5 5], (0,1) [5 5 -1], (1,0) [-3 -3 -3], (1,1) [0 0 0].
  EXPECT_EQ(mx, (std::vector<int64_t>{1, 0, 0, 0}));
  EXPECT_EQ(mn, (std::vector<int64_t>{0, 2, 0, 0}));
}

TEST(LibjitKinds, TopKStableOnTies) {
  std::vector<float> x = {1, 3, 3, 0, 3, 2, -1, -1, -1, -1, 7, -1};
  std::vector<float> v(6);
  std::vector<int64_t> i(6);
  libjit_topk_f32(v.data(), i.data(), x.data(), 2, 6, 3);
  EXPECT_EQ(v, (std::vector<float>{3, 3, 3, 7, -1, -1}));
  EXPECT_EQ(i, (std::vector<int64_t>{1, 2, 4, 4, 0, 1}));
}

TEST(LibjitKinds, QuantizeRoundsHalfAwayAndSaturates) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {0.25f, -0.25f, 0.75f, 100.0f, -100.0f, nan};
  std::vector<int8_t> q(6);
  // Two thread shares cover the elements between them.
  libjit_quantize_f32_i8(q.data(), x.data(), 6, 0.5f, -3, 0, 2);
  libjit_quantize_f32_i8(q.data(), x.data(), 6, 0.5f, -3, 1, 2);
  EXPECT_EQ(q, (std::vector<int8_t>{-2, -4, -1, 127, -128, -3}));
  std::vector<uint8_t> u(3);
  std::vector<float> ux = {-40.0f, 31.75f, 0.125f};
  libjit_quantize_f32_u8(u.data(), ux.data(), 3, 0.25f, 128, 0, 1);
  EXPECT_EQ(u, (std::vector<uint8_t>{0, 255, 129}));
  std::vector<float> d(2);
  std::vector<int32_t> qi = {std::numeric_limits<int32_t>::max(), -1};
  libjit_dequantize_i32_f32(d.data(), qi.data(), 2, 0.5f, 0, 0, 1);
  EXPECT_EQ(d[0], 1073741824.0f); // 1073741823.5 rounded to float once
  EXPECT_EQ(d[1], -0.5f);
  std::vector<int8_t> r(3), rin = {1, -1, 3};
  libjit_rescale_i8(r.data(), rin.data(), 3, 1.0f, 0, 2.0f, 0, 0, 1);
  EXPECT_EQ(r, (std::vector<int8_t>{1, -1, 2})); // 0.5, -0.5, 1.5 away from zero
}

} // namespace
