// The kernels compiled natively, against naive loops: GEMM (both register-tile variants,
// ragged shapes, thread shares), convolution (groups, strides, pads, dilations, fused
// epilogues), depthwise convolution, pooling, strided copies, reductions, softmax.
// Native builds emulate wide vectors where the compiler must, so no test needs AVX-512.
#include "backends/CPU/libjit/libjit.h"
#include "backends/CPU/libjit/libjit_gemm_config.h"

#include "test/cpu/RandomVec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace {

void expectNear(const std::vector<float> &a, const std::vector<float> &b, float tol = 1e-4f) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); i++)
    ASSERT_NEAR(a[i], b[i], tol * (1 + std::fabs(b[i]))) << "at " << i;
}

using SgemmFn = decltype(&libjit_sgemm_f32_avx512);
using ConvFn = decltype(&libjit_conv2d_f32_avx512);
using PackAFn = decltype(&libjit_pack_a_f32_avx512);
using PackBFn = decltype(&libjit_pack_b_f32_avx512);
using FcFn = decltype(&libjit_fc_f32_avx512);

struct Variant {
  const char *name;
  SgemmFn sgemm;
  ConvFn conv;
  PackAFn packA;
  PackBFn packB;
  FcFn fc;
  int64_t scratch;
  int64_t (*packedA)(int64_t, int64_t);
  int64_t (*packedB)(int64_t, int64_t);
};

const Variant kVariants[] = {
    {"avx512", libjit_sgemm_f32_avx512, libjit_conv2d_f32_avx512, libjit_pack_a_f32_avx512,
     libjit_pack_b_f32_avx512, libjit_fc_f32_avx512,
     libjit::gemmScratchFloats<libjit::GemmAvx512>(), libjit::packedAFloats<libjit::GemmAvx512>,
     libjit::packedBFloats<libjit::GemmAvx512>},
    {"avx2", libjit_sgemm_f32_avx2, libjit_conv2d_f32_avx2, libjit_pack_a_f32_avx2,
     libjit_pack_b_f32_avx2, libjit_fc_f32_avx2, libjit::gemmScratchFloats<libjit::GemmAvx2>(),
     libjit::packedAFloats<libjit::GemmAvx2>, libjit::packedBFloats<libjit::GemmAvx2>},
};

class LibjitGemm : public ::testing::TestWithParam<int> {
protected:
  const Variant &v() const { return kVariants[GetParam()]; }
};

TEST_P(LibjitGemm, SgemmRaggedShapesAndThreadShares) {
  struct Shape {
    int64_t M, N, K;
  };
  for (Shape s : {Shape{1, 1, 1}, Shape{13, 7, 5}, Shape{33, 65, 17}, Shape{70, 40, 400},
                  Shape{200, 300, 129}, Shape{3, 1100, 20}}) {
    auto a = randomVec(s.M * s.K, 1), b = randomVec(s.K * s.N, 2);
    std::vector<float> ref(s.M * s.N, 0.0f);
    for (int64_t i = 0; i < s.M; i++)
      for (int64_t k = 0; k < s.K; k++)
        for (int64_t j = 0; j < s.N; j++)
          ref[i * s.N + j] += a[i * s.K + k] * b[k * s.N + j];
    for (int64_t nth : {1, 2, 3}) {
      SCOPED_TRACE(std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K) +
                   " threads " + std::to_string(nth));
      std::vector<float> c(s.M * s.N, -7.0f), scratch(v().scratch * nth);
      for (int64_t t = 0; t < nth; t++)
        v().sgemm(s.M, s.N, s.K, a.data(), s.K, b.data(), s.N, c.data(), s.N, scratch.data(), t,
                  nth);
      expectNear(c, ref);
    }
  }
}

TEST_P(LibjitGemm, FullyConnectedWithEpilogue) {
  int64_t N = 5, K = 77, M = 50;
  auto x = randomVec(N * K, 3), w = randomVec(K * M, 4), bias = randomVec(M, 5),
       add = randomVec(N * M, 6);
  std::vector<float> packed(v().packedB(K, M));
  v().packB(packed.data(), w.data(), K, M, M);
  std::vector<float> out(N * M), scratch(v().scratch);
  v().fc(out.data(), x.data(), packed.data(), bias.data(), add.data(), N, K, M, 1, -0.5f, 0.7f,
         scratch.data(), 0, 1);
  std::vector<float> ref(N * M);
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = 0; j < M; j++) {
      float s = bias[j] + add[i * M + j];
      for (int64_t k = 0; k < K; k++)
        s += x[i * K + k] * w[k * M + j];
      ref[i * M + j] = std::min(0.7f, std::max(-0.5f, s));
    }
  expectNear(out, ref);
}

// Row operands packed per block with whole 16-column vectors (full MR-row panels on
// AVX-512, transposed in registers): row counts with full and partial panels, reductions
// with and without a remainder past the last 16 columns, and over two K blocks (KC = 384
// on AVX-512, 256 on AVX2), at 1 and 2 threads.
TEST_P(LibjitGemm, FullyConnectedFullRowPanels) {
  struct Shape {
    int64_t N, K, M;
  };
  for (Shape s : {Shape{31, 45, 50}, Shape{28, 16, 33}, Shape{197, 400, 70}, Shape{15, 31, 9}}) {
    auto x = randomVec(s.N * s.K, 7), w = randomVec(s.K * s.M, 8), bias = randomVec(s.M, 9);
    std::vector<float> packed(v().packedB(s.K, s.M));
    v().packB(packed.data(), w.data(), s.K, s.M, s.M);
    std::vector<float> ref(s.N * s.M);
    for (int64_t i = 0; i < s.N; i++)
      for (int64_t j = 0; j < s.M; j++) {
        float acc = bias[j];
        for (int64_t k = 0; k < s.K; k++)
          acc += x[i * s.K + k] * w[k * s.M + j];
        ref[i * s.M + j] = acc;
      }
    for (int64_t nth : {1, 2}) {
      SCOPED_TRACE(std::to_string(s.N) + "x" + std::to_string(s.K) + "x" + std::to_string(s.M) +
                   " threads " + std::to_string(nth));
      std::vector<float> out(s.N * s.M, -3.0f), scratch(v().scratch * nth);
      for (int64_t t = 0; t < nth; t++)
        v().fc(out.data(), x.data(), packed.data(), bias.data(), nullptr, s.N, s.K, s.M, 0, 0.0f,
               0.0f, scratch.data(), t, nth);
      expectNear(out, ref);
    }
  }
}

/// Naive NCHW convolution.
std::vector<float> refConv(const std::vector<float> &in, const std::vector<float> &w,
                           const std::vector<float> &bias, int64_t N, int64_t C, int64_t H,
                           int64_t W, int64_t O, int64_t KH, int64_t KW, int64_t SH, int64_t SW,
                           int64_t PT, int64_t PL, int64_t PB, int64_t PR, int64_t DH,
                           int64_t DW, int64_t G, int64_t &OH, int64_t &OW) {
  OH = (H + PT + PB - DH * (KH - 1) - 1) / SH + 1;
  OW = (W + PL + PR - DW * (KW - 1) - 1) / SW + 1;
  int64_t Cg = C / G, Og = O / G;
  std::vector<float> out(N * O * OH * OW);
  for (int64_t n = 0; n < N; n++)
    for (int64_t o = 0; o < O; o++) {
      int64_t g = o / Og;
      for (int64_t y = 0; y < OH; y++)
        for (int64_t x = 0; x < OW; x++) {
          double s = bias[o];
          for (int64_t c = 0; c < Cg; c++)
            for (int64_t kh = 0; kh < KH; kh++)
              for (int64_t kw = 0; kw < KW; kw++) {
                int64_t ih = y * SH - PT + kh * DH, iw = x * SW - PL + kw * DW;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                  continue;
                s += in[((n * C + g * Cg + c) * H + ih) * W + iw] *
                     w[((o * Cg + c) * KH + kh) * KW + kw];
              }
          out[((n * O + o) * OH + y) * OW + x] = float(s);
        }
    }
  return out;
}

TEST_P(LibjitGemm, ConvolutionShapes) {
  struct P {
    int64_t N, C, H, W, O, KH, KW, SH, SW, PT, PL, PB, PR, DH, DW, G;
  };
  for (P p : {P{1, 3, 9, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
              P{2, 16, 7, 7, 20, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1},
              P{1, 6, 12, 11, 9, 3, 2, 2, 1, 2, 1, 0, 1, 2, 3, 3},
              P{1, 4, 23, 23, 33, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1},
              P{1, 8, 5, 40, 16, 3, 3, 1, 2, 1, 1, 1, 1, 1, 1, 2},
              // First layers: 3 input channels, stride 2 (even-column loads), wide rows.
              P{1, 3, 45, 71, 24, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1},
              P{1, 3, 50, 66, 16, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1, 1},
              P{1, 3, 40, 97, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1}}) {
    int64_t K = (p.C / p.G) * p.KH * p.KW, Og = p.O / p.G;
    auto in = randomVec(p.N * p.C * p.H * p.W, 7), w = randomVec(p.O * K, 8),
         bias = randomVec(p.O, 9);
    int64_t OH, OW;
    auto ref = refConv(in, w, bias, p.N, p.C, p.H, p.W, p.O, p.KH, p.KW, p.SH, p.SW, p.PT,
                       p.PL, p.PB, p.PR, p.DH, p.DW, p.G, OH, OW);
    auto add = randomVec(ref.size(), 10);
    int64_t per = v().packedA(Og, K);
    std::vector<float> packed(per * p.G);
    for (int64_t g = 0; g < p.G; g++)
      v().packA(packed.data() + g * per, w.data() + g * Og * K, Og, K, K);
    for (int64_t nth : {1, 2}) {
      for (bool epi : {false, true}) {
        std::vector<float> out(ref.size(), 3.0f), scratch(v().scratch * nth);
        for (int64_t t = 0; t < nth; t++)
          v().conv(out.data(), in.data(), packed.data(), bias.data(), epi ? add.data() : nullptr,
                   p.N, p.C, p.H, p.W, p.O, OH, OW, p.KH, p.KW, p.SH, p.SW, p.PT, p.PL, p.DH,
                   p.DW, p.G, epi, 0.0f, INFINITY, scratch.data(), t, nth);
        std::vector<float> r = ref;
        if (epi)
          for (size_t i = 0; i < r.size(); i++)
            r[i] = std::max(0.0f, r[i] + add[i]);
        expectNear(out, r);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, LibjitGemm, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int> &i) {
                           return std::string(kVariants[i.param].name);
                         });

// The dilation phases' split and merge (EmitConv.cpp's dilated layers), against their
// definition indexed directly: split phase (r, s) row j, column k is input row
// r - eH + DH j, column s - eW + DW k (zero outside); merge output row y, column x is
// phase (y mod DH, x mod DW) row y / DH, column x / DW. Sizes not divisible by the
// dilations, offsets eH, eW > 0, the planes shared among 3 threads.
TEST(Libjit, DilationPhaseSplitAndMerge) {
  const int64_t N = 2, C = 3, H = 7, W = 5, DH = 2, DW = 3, eH = 1, eW = 2;
  const int64_t Hp = (H + eH + DH - 1) / DH, Wp = (W + eW + DW - 1) / DW;
  std::vector<float> in(N * C * H * W);
  for (size_t i = 0; i < in.size(); i++)
    in[i] = float(i + 1);
  std::vector<float> split(N * DH * DW * C * Hp * Wp, -1.0f);
  for (int64_t t = 0; t < 3; t++)
    libjit_conv_phase_split_f32(split.data(), in.data(), N, C, H, W, DH, DW, eH, eW, Hp, Wp, t, 3);
  for (int64_t n = 0; n < N; n++)
    for (int64_t r = 0; r < DH; r++)
      for (int64_t s = 0; s < DW; s++)
        for (int64_t c = 0; c < C; c++)
          for (int64_t j = 0; j < Hp; j++)
            for (int64_t k = 0; k < Wp; k++) {
              int64_t x = r - eH + DH * j, y = s - eW + DW * k;
              float want = x >= 0 && x < H && y >= 0 && y < W
                               ? in[((n * C + c) * H + x) * W + y]
                               : 0.0f;
              EXPECT_EQ(split[((((n * DH + r) * DW + s) * C + c) * Hp + j) * Wp + k], want)
                  << n << " " << r << " " << s << " " << c << " " << j << " " << k;
            }
  const int64_t O = 2, OH = 7, OW = 8, OHp = 4, OWp = 3;
  std::vector<float> ph(N * DH * DW * O * OHp * OWp);
  for (size_t i = 0; i < ph.size(); i++)
    ph[i] = float(i) + 0.5f;
  std::vector<float> out(N * O * OH * OW, -1.0f);
  for (int64_t t = 0; t < 3; t++)
    libjit_conv_phase_merge_f32(out.data(), ph.data(), N, O, OH, OW, DH, DW, OHp, OWp, t, 3);
  for (int64_t n = 0; n < N; n++)
    for (int64_t o = 0; o < O; o++)
      for (int64_t y = 0; y < OH; y++)
        for (int64_t x = 0; x < OW; x++)
          EXPECT_EQ(out[((n * O + o) * OH + y) * OW + x],
                    ph[((((n * DH + y % DH) * DW + x % DW) * O + o) * OHp + y / DH) * OWp +
                       x / DW])
              << n << " " << o << " " << y << " " << x;
}

TEST(Libjit, DepthwiseConvolution) {
  int64_t N = 2, C = 5, H = 9, W = 8, K = 3;
  auto in = randomVec(N * C * H * W, 1), w = randomVec(C * K * K, 2), bias = randomVec(C, 3);
  int64_t OH, OW;
  auto ref = refConv(in, w, bias, N, C, H, W, C, K, K, 2, 1, 1, 1, 1, 1, 1, 2, C, OH, OW);
  std::vector<float> out(ref.size());
  std::vector<float> scratch(2 * libjit_conv2d_dw_scratch_floats(H, W, OH, OW, K, K, 2, 1, 1, 2));
  for (int64_t t = 0; t < 2; t++)
    libjit_conv2d_dw_f32(out.data(), in.data(), w.data(), bias.data(), N, C, H, W, OH, OW, K, K,
                         2, 1, 1, 1, 1, 2, 1, 0.0f, 6.0f, scratch.data(), t, 2);
  for (float &r : ref)
    r = std::min(6.0f, std::max(0.0f, r));
  expectNear(out, ref);
}

// The small-plane path (stride 1, output rows as wide as the input's, planes narrower than
// 16): 3x3 and 5x5 on 7x7 and 14x14 as in the mobile networks, asymmetric pads (left pad
// 1 with right pad 3, a top pad of 2 with output rows past the input's), an 18-cell plane,
// with and without the clamp, on two threads, against the plain loop.
TEST(Libjit, DepthwiseSmallPlanes) {
  struct Case {
    int64_t H, W, K, PT, PL, PB, PR;
  };
  const Case cases[] = {{7, 7, 3, 1, 1, 1, 1}, {7, 7, 5, 2, 2, 2, 2},  {14, 14, 5, 2, 2, 2, 2},
                        {14, 13, 3, 1, 1, 1, 1}, {5, 9, 5, 0, 1, 4, 3}, {4, 15, 3, 2, 2, 2, 0},
                        {3, 6, 3, 1, 1, 1, 1}};
  int64_t N = 2, C = 5;
  for (const Case &c : cases)
    for (int act = 0; act < 2; act++) {
      SCOPED_TRACE(std::to_string(c.K) + "x" + std::to_string(c.K) + " on " + std::to_string(c.H) +
                   "x" + std::to_string(c.W) + " act " + std::to_string(act));
      auto in = randomVec(N * C * c.H * c.W, 11), w = randomVec(C * c.K * c.K, 12),
           bias = randomVec(C, 13);
      int64_t OH, OW;
      auto ref = refConv(in, w, bias, N, C, c.H, c.W, C, c.K, c.K, 1, 1, c.PT, c.PL, c.PB, c.PR,
                         1, 1, C, OH, OW);
      ASSERT_EQ(OW, c.W);
      std::vector<float> out(ref.size(), NAN);
      std::vector<float> scratch(
          2 * libjit_conv2d_dw_scratch_floats(c.H, c.W, OH, OW, c.K, c.K, 1, 1, 1, 1));
      for (int64_t t = 0; t < 2; t++)
        libjit_conv2d_dw_f32(out.data(), in.data(), w.data(), bias.data(), N, C, c.H, c.W, OH, OW,
                             c.K, c.K, 1, 1, c.PT, c.PL, 1, 1, act, -0.5f, 0.75f, scratch.data(),
                             t, 2);
      if (act)
        for (float &r : ref)
          r = std::min(0.75f, std::max(-0.5f, r));
      expectNear(out, ref);
    }
}

TEST(Libjit, Pooling) {
  int64_t N = 1, C = 3, H = 7, W = 6, OH = 4, OW = 3;
  auto in = randomVec(N * C * H * W, 4);
  std::vector<float> mx(N * C * OH * OW), av(mx.size());
  std::vector<float> scratch(libjit_pool_scratch_floats(H, W, OH, OW, 3, 3, 2, 2, 1, 1));
  libjit_maxpool_f32(mx.data(), in.data(), N, C, H, W, OH, OW, 3, 3, 2, 2, 1, 1, scratch.data(), 0, 1);
  libjit_avgpool_f32(av.data(), in.data(), N, C, H, W, OH, OW, 3, 3, 2, 2, 1, 1, 0,
                     scratch.data(), 0, 1);
  for (int64_t c = 0; c < C; c++)
    for (int64_t y = 0; y < OH; y++)
      for (int64_t x = 0; x < OW; x++) {
        float m = -INFINITY, s = 0;
        int cnt = 0;
        for (int64_t i = y * 2 - 1; i < y * 2 + 2; i++)
          for (int64_t j = x * 2 - 1; j < x * 2 + 2; j++)
            if (i >= 0 && i < H && j >= 0 && j < W) {
              m = std::max(m, in[(c * H + i) * W + j]);
              s += in[(c * H + i) * W + j];
              cnt++;
            }
        EXPECT_EQ(mx[(c * OH + y) * OW + x], m);
        EXPECT_NEAR(av[(c * OH + y) * OW + x], s / cnt, 1e-6);
      }
}

TEST(Libjit, StridedCopyTransposes) {
  // [2,3,4] -> transpose (2,0,1) -> [4,2,3]
  std::vector<uint32_t> in(24), out(24);
  for (uint32_t i = 0; i < 24; i++)
    in[i] = i;
  int64_t dims[] = {4, 2, 3}, ds[] = {6, 3, 1}, ss[] = {1, 12, 4};
  libjit_strided_copy_u32(out.data(), in.data(), dims, ds, ss, 3);
  for (int64_t a = 0; a < 4; a++)
    for (int64_t b = 0; b < 2; b++)
      for (int64_t c = 0; c < 3; c++)
        EXPECT_EQ(out[a * 6 + b * 3 + c], in[b * 12 + c * 4 + a]);
}

TEST(Libjit, ReduceAndSoftmax) {
  auto in = randomVec(2 * 3 * 4, 5);
  int64_t dims[] = {2, 3, 4}, dstStrides[] = {4, 0, 1};
  std::vector<float> sum(8);
  libjit_reduce_sum_f32(sum.data(), in.data(), dims, dstStrides, 3, 8, 0.0f);
  for (int a = 0; a < 2; a++)
    for (int c = 0; c < 4; c++)
      EXPECT_NEAR(sum[a * 4 + c], in[a * 12 + c] + in[a * 12 + 4 + c] + in[a * 12 + 8 + c], 1e-6);
  std::vector<float> sm(24);
  libjit_softmax_f32(sm.data(), in.data(), 6, 4, 1, 0, 0, 1);
  for (int r = 0; r < 6; r++) {
    float s = 0;
    for (int c = 0; c < 4; c++)
      s += sm[r * 4 + c];
    EXPECT_NEAR(s, 1.0f, 1e-6);
  }
}

TEST(Libjit, ElementwiseSpecialValues) {
  EXPECT_TRUE(std::isnan(libjit_elem_relu_f32(NAN)));
  EXPECT_EQ(libjit_elem_relu_f32(-2.0f), 0.0f);
  EXPECT_TRUE(std::isnan(libjit_elem_max_f32(NAN, 1.0f)));
  EXPECT_TRUE(std::isnan(libjit_elem_max_f32(1.0f, NAN)));
  EXPECT_EQ(libjit_elem_round_f32(2.5f), 2.0f);
  EXPECT_EQ(libjit_elem_clip_f32(9.0f, 0.0f, 6.0f), 6.0f);
}

} // namespace

// The 3x3 fast path (strides 1 and 2, with and without padding) and a generic 5x5, with odd
// sizes so rows end mid-vector.
TEST(Libjit, DepthwiseConvolutionPaths) {
  struct Case {
    int64_t K, SH, SW, PT, PL;
  } cases[] = {{3, 1, 1, 1, 1}, {3, 2, 2, 1, 1}, {3, 2, 2, 0, 0}, {3, 1, 2, 1, 0}, {5, 2, 1, 2, 2}};
  for (const Case &k : cases) {
    int64_t N = 1, C = 4, H = 19, W = 21;
    auto in = randomVec(N * C * H * W, 7), w = randomVec(C * k.K * k.K, 8),
         bias = randomVec(C, 9);
    int64_t OH, OW;
    auto ref = refConv(in, w, bias, N, C, H, W, C, k.K, k.K, k.SH, k.SW, k.PT, k.PL, k.PT, k.PL,
                       1, 1, C, OH, OW);
    std::vector<float> out(ref.size());
    std::vector<float> scratch(
        libjit_conv2d_dw_scratch_floats(H, W, OH, OW, k.K, k.K, k.SH, k.SW, 1, 1));
    libjit_conv2d_dw_f32(out.data(), in.data(), w.data(), bias.data(), N, C, H, W, OH, OW, k.K,
                         k.K, k.SH, k.SW, k.PT, k.PL, 1, 1, 0, 0.0f, 0.0f, scratch.data(), 0, 1);
    SCOPED_TRACE("K=" + std::to_string(k.K) + " S=" + std::to_string(k.SH) + "," +
                 std::to_string(k.SW));
    expectNear(out, ref);
  }
}

// The transposed convolution (pixels as GEMM rows) against the reference, with the residual
// add, the clamp, both register tiles and a two-thread split.
// The strip convolution (row-major weights, activations read in column strips) against the
// double-precision reference: pointwise layers whose pixel count leaves a partial last strip
// of one, two or three vectors and whose channel counts leave 4-, 2- and 1-row tiles, im2col
// layers with pads, strides 1-3, dilation and 3 input channels (the stems), blocks of several
// strips per thread, batch 2; the phase-plane im2col's special cases; strips that read tap
// planes directly; bias alone, and bias + residual add + clamp; 1-3 threads; both tile
// variants.
TEST(Libjit, StripConvolution) {
  struct Case {
    int64_t N, C, H, W, O, KH, KW, S, P, D;
  } cases[] = {{1, 16, 9, 9, 24, 1, 1, 1, 0, 1},   {2, 32, 7, 13, 16, 1, 1, 1, 0, 1},
               {1, 19, 11, 10, 7, 1, 1, 1, 0, 1},  {1, 5, 20, 20, 1, 1, 1, 1, 0, 1},
               {1, 144, 8, 8, 40, 1, 1, 1, 0, 1},  {1, 3, 50, 66, 16, 7, 7, 2, 3, 1},
               {1, 3, 45, 71, 27, 3, 3, 2, 1, 1},  {2, 3, 33, 40, 13, 3, 3, 2, 0, 1},
               {1, 64, 20, 20, 12, 3, 3, 1, 1, 1}, {1, 6, 17, 15, 11, 3, 3, 1, 2, 2},
               {1, 4, 23, 29, 9, 5, 5, 3, 2, 1},   {1, 3, 12, 112, 8, 7, 7, 2, 3, 1},
               {1, 2, 9, 97, 5, 3, 3, 2, 1, 1},    {1, 3, 6, 35, 8, 5, 5, 1, 2, 1},
               {1, 10, 10, 7, 9, 1, 1, 1, 0, 1},   {1, 7, 5, 9, 30, 1, 1, 1, 0, 1},
               // Phase planes: 1x1 strided (the planes are the im2col matrix), with a pad;
               // dilation 2 at stride 2 (one row and one column phase); stride 5 (no phase
               // planes); planes larger than the scratch (bands of blocks, batch 2); an
               // im2col block that leaves no room for planes (row-wise im2col).
               {1, 24, 15, 17, 19, 1, 1, 2, 0, 1}, {2, 9, 14, 11, 10, 1, 1, 2, 1, 1},
               {1, 5, 21, 19, 7, 3, 3, 2, 2, 2},   {1, 2, 23, 26, 5, 5, 5, 5, 1, 1},
               {2, 300, 41, 39, 11, 3, 3, 2, 1, 1}, {1, 1000, 12, 13, 9, 3, 3, 2, 1, 1},
               // Tap planes (strips read the planes through an offset table): output rows 28,
               // 14, 7, 112 and 55 wide, so strips cross rows at every offset; stride 1 and
               // 2, dilation 2 at stride 1, 4/2/1-row tiles; more than 4608 taps with planes
               // that fit (the phase-plane im2col).
               {1, 8, 56, 56, 21, 3, 3, 2, 1, 1},  {2, 6, 28, 28, 10, 3, 3, 2, 1, 1},
               {1, 12, 14, 14, 9, 3, 3, 2, 1, 1},  {1, 3, 7, 224, 8, 3, 3, 2, 1, 1},
               {1, 4, 6, 55, 13, 3, 3, 1, 1, 1},   {1, 5, 13, 16, 7, 3, 3, 1, 2, 2},
               {1, 520, 8, 9, 6, 3, 3, 2, 1, 1},
               // Stems (at most 64 taps): tap planes in bands of whole strips, several
               // bands per image (output rows 112, 75 and 100 wide; 5x5/1 with 2 channels).
               {1, 3, 150, 224, 8, 3, 3, 2, 1, 1}, {1, 3, 97, 150, 5, 3, 3, 2, 1, 1},
               {1, 2, 60, 100, 6, 5, 5, 1, 2, 1}};
  for (const Case &k : cases) {
    int64_t Kd = k.C * k.KH * k.KW;
    auto in = randomVec(k.N * k.C * k.H * k.W, 21), w = randomVec(k.O * Kd, 22),
         bias = randomVec(k.O, 23);
    int64_t OH, OW;
    auto ref = refConv(in, w, bias, k.N, k.C, k.H, k.W, k.O, k.KH, k.KW, k.S, k.S, k.P, k.P, k.P,
                       k.P, k.D, k.D, 1, OH, OW);
    auto add = randomVec(ref.size(), 24);
    for (int variant = 0; variant < 2; variant++) {
      bool v512 = variant == 0;
      auto fn = v512 ? libjit_conv2d_strip_f32_avx512 : libjit_conv2d_strip_f32_avx2;
      int64_t per = v512 ? libjit::gemmScratchFloats<libjit::GemmAvx512>()
                         : libjit::gemmScratchFloats<libjit::GemmAvx2>();
      for (int64_t nth : {1, 2, 3}) {
        for (bool epi : {false, true}) {
          SCOPED_TRACE(std::string(v512 ? "avx512" : "avx2") + " C=" + std::to_string(k.C) +
                       " O=" + std::to_string(k.O) + " K=" + std::to_string(k.KH) +
                       " threads=" + std::to_string(nth) + (epi ? " add+clamp" : ""));
          std::vector<float> out(ref.size(), 5.0f), scratch(per * nth, -9.0f);
          for (int64_t t = 0; t < nth; t++)
            fn(out.data(), in.data(), w.data(), bias.data(), epi ? add.data() : nullptr, k.N, k.C,
               k.H, k.W, k.O, OH, OW, k.KH, k.KW, k.S, k.S, k.P, k.P, k.D, k.D, epi, -0.25f, 1.0f,
               scratch.data(), t, nth);
          std::vector<float> r = ref;
          if (epi)
            for (size_t i = 0; i < r.size(); i++)
              r[i] = std::min(1.0f, std::max(-0.25f, r[i] + add[i]));
          expectNear(out, r);
        }
      }
    }
  }
}

TEST(Libjit, TransposedConvolution) {
  struct Case {
    int64_t C, H, O, K, S, P, D = 1;
  } cases[] = {{40, 7, 72, 3, 1, 1},  {24, 14, 33, 1, 2, 0}, {5, 9, 64, 3, 2, 1},
               // Pointwise (packed straight from the planes): 16 x 16 transpose blocks with
               // ragged pixel and channel edges, and exact multiples of 16.
               {40, 14, 72, 1, 1, 0}, {19, 13, 50, 1, 1, 0}, {33, 8, 32, 1, 1, 0},
               // Taps packed from the padded input: a 7x7/2 stem, dilation, 5x5 with runs
               // of 11 pixels across panels, no pads; stride 3 packs element by element.
               {3, 20, 40, 7, 2, 3}, {12, 11, 30, 3, 1, 2, 2}, {9, 11, 20, 5, 1, 2},
               {16, 10, 24, 3, 1, 0}, {7, 13, 18, 3, 3, 1},
               // Padded rows copied in vectors: rows of exactly two vectors (32), and a
               // vector plus an overlapping last one (17) at strides 1 and 2.
               {6, 32, 20, 3, 2, 1}, {5, 17, 24, 3, 1, 1}, {4, 17, 16, 3, 2, 0}};
  for (const Case &k : cases) {
    int64_t N = 2, W = k.H;
    auto in = randomVec(N * k.C * k.H * W, 11), w = randomVec(k.O * k.C * k.K * k.K, 12),
         bias = randomVec(k.O, 13);
    int64_t OH, OW;
    auto ref = refConv(in, w, bias, N, k.C, k.H, W, k.O, k.K, k.K, k.S, k.S, k.P, k.P, k.P, k.P,
                       k.D, k.D, 1, OH, OW);
    auto add = randomVec(ref.size(), 14);
    for (size_t i = 0; i < ref.size(); i++)
      ref[i] = std::min(1.5f, std::max(0.0f, ref[i] + add[i]));
    int64_t Kd = k.C * k.K * k.K;
    for (int variant = 0; variant < 2; variant++) {
      bool v512 = variant == 0;
      std::vector<float> packed(v512 ? libjit::packedBFloats<libjit::GemmAvx512>(Kd, k.O)
                                     : libjit::packedBFloats<libjit::GemmAvx2>(Kd, k.O));
      (v512 ? libjit_pack_bt_f32_avx512 : libjit_pack_bt_f32_avx2)(packed.data(), w.data(), Kd,
                                                                   k.O);
      int64_t per = v512 ? libjit::gemmScratchFloats<libjit::GemmAvx512>()
                         : libjit::gemmScratchFloats<libjit::GemmAvx2>();
      for (int64_t nth : {1, 2, 3}) {
        std::vector<float> scratch(nth * per, -9.0f), t(OH * OW * k.O), out(ref.size());
        for (int64_t tid = 0; tid < nth; tid++)
          (v512 ? libjit_conv2d_t_f32_avx512 : libjit_conv2d_t_f32_avx2)(
              out.data(), in.data(), packed.data(), bias.data(), add.data(), N, k.C, k.H, W, k.O,
              OH, OW, k.K, k.K, k.S, k.S, k.P, k.P, k.D, k.D, 1, 0.0f, 1.5f, t.data(),
              scratch.data(), tid, nth);
        SCOPED_TRACE(std::string(v512 ? "avx512" : "avx2") + " C=" + std::to_string(k.C) +
                     " K=" + std::to_string(k.K) + " S=" + std::to_string(k.S) +
                     " D=" + std::to_string(k.D) + " threads=" + std::to_string(nth));
        expectNear(out, ref);
      }
    }
  }
}

namespace {

struct PoolCase {
  int64_t H, W, KH, KW, SH, SW, PT, PL, PB, PR;
};

/// Output size of a window sweep over H with pads pb, pe (bottom/right pads may come from
/// ceil mode: the kernel sees only the output size).
int64_t sweep(int64_t H, int64_t K, int64_t S, int64_t pb, int64_t pe) {
  return (H + pb + pe - K) / S + 1;
}

} // namespace

// Max and average pooling against a direct loop over each window: 3x3/2 and 2x2/2 with and
// without padding, ceil-mode extents (windows past the bottom/right edge), stride 1 and 3,
// 5-wide windows, rows of fewer and more than one 16-output block (on both the row-buffer
// and the register path), 1-3 threads.
TEST(Libjit, PoolingShapes) {
  const PoolCase cases[] = {
      {111, 111, 3, 3, 2, 2, 0, 0, 0, 0}, // squeezenet, exact fit
      {27, 27, 3, 3, 2, 2, 0, 0, 1, 1},   // ceil mode: the last window overhangs
      {112, 112, 3, 3, 2, 2, 1, 1, 1, 1}, // resnet
      {56, 57, 2, 2, 2, 2, 0, 0, 0, 1},   // 2x2/2, odd width
      {13, 40, 3, 3, 1, 1, 1, 1, 1, 1},   // stride 1
      {9, 11, 2, 3, 1, 2, 0, 1, 1, 1},    // rectangular window
      {20, 50, 3, 5, 3, 3, 1, 2, 2, 2},   // stride 3 (scalar windows)
      {7, 7, 5, 5, 2, 2, 2, 2, 2, 2},     // 5x5 on a small plane
      {33, 70, 3, 4, 2, 2, 1, 0, 1, 3},   // even window, stride 2, wide rows
      {9, 13, 3, 3, 2, 2, 0, 0, 1, 1},    // 3x3/2 in registers: one partial block, ceil mode
      {20, 70, 3, 3, 2, 2, 0, 0, 0, 1},   // 3x3/2 in registers: three blocks, ragged last
      {14, 14, 2, 2, 2, 2, 0, 0, 0, 0},   // 2x2/2 in registers: rows of 7 stored whole
      {56, 56, 2, 2, 2, 2, 0, 0, 0, 0},   // 2x2/2 in registers: two blocks, overlapping
      {15, 13, 2, 2, 2, 2, 0, 0, 0, 0},   // 2x2/2 in registers: odd sizes, last row unread
      {6, 70, 2, 2, 2, 2, 0, 0, 0, 0},    // 2x2/2 in registers: three blocks, ragged last
  };
  for (const PoolCase &k : cases) {
    int64_t N = 2, C = 3;
    int64_t OH = sweep(k.H, k.KH, k.SH, k.PT, k.PB), OW = sweep(k.W, k.KW, k.SW, k.PL, k.PR);
    auto in = randomVec(N * C * k.H * k.W, 21);
    std::vector<float> refMax(N * C * OH * OW), refAvg[2];
    refAvg[0].resize(refMax.size());
    refAvg[1].resize(refMax.size());
    for (int64_t p = 0; p < N * C; p++)
      for (int64_t y = 0; y < OH; y++)
        for (int64_t x = 0; x < OW; x++) {
          float m = -INFINITY;
          double s = 0;
          int64_t cnt = 0;
          for (int64_t i = y * k.SH - k.PT; i < y * k.SH - k.PT + k.KH; i++)
            for (int64_t j = x * k.SW - k.PL; j < x * k.SW - k.PL + k.KW; j++)
              if (i >= 0 && i < k.H && j >= 0 && j < k.W) {
                float v = in[(p * k.H + i) * k.W + j];
                m = v > m ? v : m;
                s += v;
                cnt++;
              }
          size_t o = (p * OH + y) * OW + x;
          refMax[o] = m;
          refAvg[0][o] = cnt ? float(s / double(cnt)) : 0.0f;
          refAvg[1][o] = float(s / double(k.KH * k.KW));
        }
    for (int64_t nth : {1, 2, 3}) {
      SCOPED_TRACE(std::to_string(k.H) + "x" + std::to_string(k.W) + " window " +
                   std::to_string(k.KH) + "x" + std::to_string(k.KW) + "/" +
                   std::to_string(k.SH) + "," + std::to_string(k.SW) + " threads " +
                   std::to_string(nth));
      std::vector<float> scratch(
          nth * libjit_pool_scratch_floats(k.H, k.W, OH, OW, k.KH, k.KW, k.SH, k.SW, 1, 1));
      std::vector<float> mx(refMax.size(), 9.0f);
      for (int64_t t = 0; t < nth; t++)
        libjit_maxpool_f32(mx.data(), in.data(), N, C, k.H, k.W, OH, OW, k.KH, k.KW, k.SH, k.SW,
                           k.PT, k.PL, scratch.data(), t, nth);
      for (size_t i = 0; i < mx.size(); i++)
        ASSERT_EQ(mx[i], refMax[i]) << "max at " << i; // max pooling is exact
      for (int cip = 0; cip < 2; cip++) {
        std::vector<float> av(refMax.size(), 9.0f);
        for (int64_t t = 0; t < nth; t++)
          libjit_avgpool_f32(av.data(), in.data(), N, C, k.H, k.W, OH, OW, k.KH, k.KW, k.SH,
                             k.SW, k.PT, k.PL, cip, scratch.data(), t, nth);
        expectNear(av, refAvg[cip], 1e-5f);
      }
    }
  }
}

// Max pooling ignores NaN inputs (as the Interpreter's std::max chain from -inf does) and
// yields -inf for a window entirely in the padding.
TEST(Libjit, MaxPoolSpecialValues) {
  int64_t H = 4, W = 20, OH = 2, OW = 10;
  std::vector<float> in(H * W);
  for (int64_t i = 0; i < H * W; i++)
    in[i] = float(i % 7) - 3.0f;
  in[0] = NAN;      // first cell of the first window
  in[W + 3] = NAN;  // inside windows 1 and 2 of row 0
  in[2 * W + 7] = NAN; // an odd column of output row 1
  std::vector<float> out(OH * OW);
  std::vector<float> scratch(libjit_pool_scratch_floats(H, W, OH, OW, 2, 2, 2, 2, 1, 1));
  libjit_maxpool_f32(out.data(), in.data(), 1, 1, H, W, OH, OW, 2, 2, 2, 2, 0, 0,
                     scratch.data(), 0, 1);
  for (int64_t y = 0; y < OH; y++)
    for (int64_t x = 0; x < OW; x++) {
      float m = -INFINITY;
      for (int64_t i = 2 * y; i < 2 * y + 2; i++)
        for (int64_t j = 2 * x; j < 2 * x + 2; j++)
          m = std::max(m, in[i * W + j]);
      EXPECT_EQ(out[y * OW + x], m) << y << "," << x;
    }
  // Pads of 2 with a 2x2 window: the first output's window holds only padding.
  std::vector<float> small = {1, 2, 3, 4}, o(9);
  std::vector<float> s2(libjit_pool_scratch_floats(2, 2, 3, 3, 2, 2, 2, 2, 1, 1));
  libjit_maxpool_f32(o.data(), small.data(), 1, 1, 2, 2, 3, 3, 2, 2, 2, 2, 2, 2, s2.data(), 0, 1);
  EXPECT_EQ(o[0], -INFINITY);
  EXPECT_EQ(o[4], 4.0f);
}

// Global average pooling (the vectorised sum) and a general adaptive one.
TEST(Libjit, AdaptiveAvgPool) {
  int64_t C = 3, H = 13, W = 11;
  auto in = randomVec(C * H * W, 23);
  std::vector<float> g(C);
  libjit_adaptive_avgpool_f32(g.data(), in.data(), 1, C, H, W, 1, 1, 0, 1);
  for (int64_t c = 0; c < C; c++) {
    double s = 0;
    for (int64_t i = 0; i < H * W; i++)
      s += in[c * H * W + i];
    EXPECT_NEAR(g[c], s / double(H * W), 1e-6);
  }
  std::vector<float> a(C * 4 * 3);
  for (int64_t t = 0; t < 2; t++)
    libjit_adaptive_avgpool_f32(a.data(), in.data(), 1, C, H, W, 4, 3, t, 2);
  for (int64_t c = 0; c < C; c++)
    for (int64_t i = 0; i < 4; i++)
      for (int64_t j = 0; j < 3; j++) {
        int64_t hb = i * H / 4, he = (i * H + H + 3) / 4, wb = j * W / 3, we = (j * W + W + 2) / 3;
        double s = 0;
        for (int64_t h = hb; h < he; h++)
          for (int64_t w = wb; w < we; w++)
            s += in[(c * H + h) * W + w];
        EXPECT_NEAR(a[(c * 4 + i) * 3 + j], s / double((he - hb) * (we - wb)), 1e-6);
      }
}

// Depthwise convolution on each path: ring (output rows of 16 or more; stride 1 and 2, odd
// widths and heights (a last block of one output row), pads 0-3, rows of exactly 16, SH !=
// SW), flat (narrow planes, stride 1 and 2, 3x3 and 5x5; rows of 16-31 floats split by
// 8-pair blocks) and the
// any path (kernels of every size, non-square ones, dilations, strides 1-4, SH != SW, pads
// larger than the kernel's reach); with and without the clamp, without a bias, 1-3 threads.
TEST(Libjit, DepthwiseConvolutionAllPaths) {
  struct Case {
    int64_t H, W, K, SH, SW, PT, PL, PB, PR, D;
    int64_t KW = 0; ///< the kernel's width when not K
    int64_t DW = 0; ///< the column dilation when not D
  } cases[] = {
      {112, 112, 3, 1, 1, 1, 1, 1, 1, 1}, // rows, stride 1
      {37, 35, 3, 2, 2, 1, 1, 1, 1, 1},   // rows, stride 2, odd sizes
      {40, 66, 3, 2, 2, 0, 0, 1, 1, 1},   // rows, stride 2, no left pad (even phase)
      {21, 40, 5, 1, 1, 2, 2, 2, 2, 1},   // rows, 5x5
      {30, 71, 5, 2, 2, 2, 2, 2, 2, 1},   // rows, 5x5 stride 2
      {19, 33, 3, 2, 1, 1, 0, 1, 2, 1},   // rows, SH != SW
      {17, 16, 3, 1, 1, 1, 1, 1, 1, 1},   // ring, rows of exactly 16, odd height
      {20, 33, 5, 1, 1, 3, 3, 3, 3, 1},   // ring, pads beyond the kernel's half
      {23, 18, 3, 1, 1, 0, 0, 0, 0, 1},   // ring, no pads (OW 16)
      {35, 36, 5, 2, 2, 2, 2, 2, 2, 1},   // ring, 5x5 stride 2, OW 18 (8-pair row blocks)
      {56, 56, 5, 2, 2, 1, 2, 2, 1, 1},   // ring, 5x5 stride 2, asymmetric pads
      {21, 35, 5, 3, 1, 2, 2, 2, 2, 1},   // ring, SH 3, one output row per block
      {28, 28, 5, 2, 2, 2, 2, 2, 2, 1},   // flat, 5x5 stride 2, 28 -> 14 (8-pair blocks)
      {29, 27, 3, 2, 2, 1, 0, 1, 2, 1},   // flat, odd width, no left pad
      {14, 14, 5, 2, 2, 2, 2, 2, 2, 1},   // flat, 14 -> 7 (rows of 8-14: 4-pair blocks)
      {12, 10, 3, 2, 2, 1, 1, 1, 1, 1},   // flat, rows of 10
      {9, 8, 3, 2, 2, 0, 0, 1, 1, 1},     // flat, rows of 8, no left pad
      {14, 12, 5, 2, 2, 1, 3, 0, 1, 1},   // flat, rows of 12, asymmetric pads
      {14, 14, 3, 1, 1, 1, 1, 1, 1, 1},   // flat, stride 1
      {7, 7, 3, 1, 1, 1, 1, 1, 1, 1},     // flat, 7x7
      {14, 13, 3, 2, 2, 1, 1, 1, 1, 1},   // flat, stride 2
      {15, 9, 5, 2, 2, 2, 2, 2, 2, 1},    // flat, 5x5 stride 2
      {9, 10, 5, 1, 1, 2, 2, 2, 2, 1},    // flat, 5x5 stride 1
      {3, 2, 3, 1, 1, 1, 1, 1, 1, 1},     // flat, tiny
      {16, 18, 3, 1, 1, 2, 2, 2, 2, 2},   // generic: dilation 2
      {20, 20, 3, 3, 3, 1, 1, 1, 1, 1},   // generic: stride 3
      {10, 12, 3, 2, 1, 1, 1, 1, 1, 1},   // generic: narrow, SH != SW
      {23, 19, 7, 1, 1, 3, 3, 3, 3, 1},   // any: 7x7 (ConvNeXt), odd sizes
      {7, 7, 7, 1, 1, 3, 3, 3, 3, 1},     // any: 7x7 on a 7x7 plane
      {56, 56, 7, 1, 1, 3, 3, 3, 3, 1},   // any: 7x7, several blocks per row
      {14, 14, 5, 1, 1, 4, 4, 4, 4, 2},   // any: 5x5 dilation 2 (DeepLabV3's backbone)
      {15, 13, 5, 2, 2, 4, 4, 4, 4, 2},   // any: 5x5 dilation 2, stride 2
      {17, 21, 3, 2, 2, 3, 3, 3, 3, 3},   // any: dilation 3, stride 2
      {25, 22, 9, 1, 1, 4, 4, 4, 4, 1},   // any: 9x9
      {26, 29, 11, 4, 4, 5, 5, 5, 5, 1},  // any: 11x11 stride 4
      {19, 23, 3, 3, 2, 0, 2, 1, 0, 1},   // any: SH 3, SW 2, asymmetric pads
      {12, 14, 3, 1, 1, 6, 6, 6, 6, 6},   // any: pads and dilation beyond the plane
      {11, 16, 1, 1, 1, 0, 0, 0, 0, 1},   // any: 1x1
      {13, 17, 3, 1, 2, 1, 3, 1, 3, 2, 7, 1}, // any: 3x7, row dilation 2, column stride 2
      {18, 9, 5, 2, 1, 2, 0, 2, 0, 1, 1},  // any: 5x1
  };
  for (const Case &k : cases) {
    int64_t N = 2, C = 3;
    auto in = randomVec(N * C * k.H * k.W, 31), w = randomVec(C * k.K * (k.KW ? k.KW : k.K), 32),
         bias = randomVec(C, 33);
    std::vector<float> zeros(C, 0.0f);
    for (bool withBias : {true, false}) {
      int64_t OH, OW, KW = k.KW ? k.KW : k.K, DW = k.DW ? k.DW : k.D;
      auto ref = refConv(in, w, withBias ? bias : zeros, N, C, k.H, k.W, C, k.K, KW, k.SH,
                         k.SW, k.PT, k.PL, k.PB, k.PR, k.D, DW, C, OH, OW);
      int64_t per = libjit_conv2d_dw_scratch_floats(k.H, k.W, OH, OW, k.K, KW, k.SH, k.SW, k.D,
                                                    DW);
      for (int64_t nth : {1, 2, 3}) {
        for (int act : {0, 1}) {
          SCOPED_TRACE(std::to_string(k.H) + "x" + std::to_string(k.W) + " K " +
                       std::to_string(k.K) + "x" + std::to_string(KW) + " S " + std::to_string(k.SH) + "," +
                       std::to_string(k.SW) + " D " + std::to_string(k.D) + " threads " +
                       std::to_string(nth) + " act " + std::to_string(act) +
                       (withBias ? "" : " no bias"));
          std::vector<float> out(ref.size(), 7.0f), scratch(nth * per);
          for (int64_t t = 0; t < nth; t++)
            libjit_conv2d_dw_f32(out.data(), in.data(), w.data(),
                                 withBias ? bias.data() : nullptr, N, C, k.H, k.W, OH, OW, k.K,
                                 KW, k.SH, k.SW, k.PT, k.PL, k.D, DW, act, 0.0f, 0.5f,
                                 scratch.data(), t, nth);
          std::vector<float> r = ref;
          if (act)
            for (float &v : r)
              v = std::min(0.5f, std::max(0.0f, v));
          expectNear(out, r);
        }
      }
    }
  }
}

// Depthwise convolution on the lanes path (16 channels as the vector lanes: 3x3 and 5x5,
// strides 1 and 2, output rows of 7 to 28): channel counts with a last block overlapping
// its predecessor (24, 37), exactly 16, and batch 2 where a thread's share of an image is
// under 16 channels (those take the other paths); output rows of 7 (one tile), 11 and 28
// (tiles overlapping), asymmetric pads, pads past the kernel's half, no pads, dilation 2
// (DeepLabV3's and LRASPP's 14x14 layers, strided too), stride 2 with no pads where no
// window reads the last input row and column (their pixels go to the slack vector); with
// and without the clamp and the bias, 1 to 3 threads, against the plain loop.
TEST(Libjit, DepthwiseLanes) {
  struct Case {
    int64_t N, C, H, W, K, S, PT, PL, PB, PR;
    int64_t D = 1;
  } cases[] = {
      {1, 24, 7, 7, 5, 1, 2, 2, 2, 2},     {1, 16, 7, 7, 3, 1, 1, 1, 1, 1},
      {1, 37, 14, 14, 5, 2, 2, 2, 2, 2},   {2, 20, 14, 14, 5, 1, 2, 2, 2, 2},
      {1, 40, 28, 28, 3, 2, 0, 0, 1, 1},   {1, 19, 13, 11, 3, 1, 1, 1, 1, 1},
      {1, 33, 15, 12, 5, 1, 3, 1, 3, 3},   {2, 17, 23, 21, 5, 2, 1, 2, 2, 1},
      {1, 16, 28, 28, 5, 1, 2, 2, 2, 2},   {1, 32, 9, 9, 3, 1, 0, 0, 0, 0},
      {1, 20, 14, 14, 5, 1, 4, 4, 4, 4, 2}, {1, 18, 14, 14, 3, 1, 2, 2, 2, 2, 2},
      {2, 24, 19, 17, 5, 2, 4, 3, 4, 5, 2}, {1, 16, 15, 13, 3, 2, 1, 2, 3, 2, 2},
      {1, 24, 16, 16, 3, 2, 0, 0, 0, 0},   {1, 21, 18, 18, 5, 2, 0, 0, 0, 0},
  };
  for (const Case &k : cases) {
    auto in = randomVec(k.N * k.C * k.H * k.W, 41), w = randomVec(k.C * k.K * k.K, 42),
         bias = randomVec(k.C, 43);
    std::vector<float> zeros(k.C, 0.0f);
    for (bool withBias : {true, false}) {
      int64_t OH, OW;
      auto ref = refConv(in, w, withBias ? bias : zeros, k.N, k.C, k.H, k.W, k.C, k.K, k.K, k.S,
                         k.S, k.PT, k.PL, k.PB, k.PR, k.D, k.D, k.C, OH, OW);
      int64_t per =
          libjit_conv2d_dw_scratch_floats(k.H, k.W, OH, OW, k.K, k.K, k.S, k.S, k.D, k.D);
      for (int64_t nth : {1, 2, 3})
        for (int act : {0, 1}) {
          SCOPED_TRACE(std::to_string(k.C) + "x" + std::to_string(k.H) + "x" + std::to_string(k.W) +
                       " K " + std::to_string(k.K) + " S " + std::to_string(k.S) + " D " +
                       std::to_string(k.D) + " threads " +
                       std::to_string(nth) + " act " + std::to_string(act) +
                       (withBias ? "" : " no bias"));
          std::vector<float> out(ref.size(), 7.0f), scratch(nth * per);
          for (int64_t t = 0; t < nth; t++)
            libjit_conv2d_dw_f32(out.data(), in.data(), w.data(), withBias ? bias.data() : nullptr,
                                 k.N, k.C, k.H, k.W, OH, OW, k.K, k.K, k.S, k.S, k.PT, k.PL, k.D,
                                 k.D, act, -0.25f, 0.5f, scratch.data(), t, nth);
          std::vector<float> r = ref;
          if (act)
            for (float &v : r)
              v = std::min(0.5f, std::max(-0.25f, v));
          expectNear(out, r);
        }
    }
  }
}

// Grouped convolution (libjit_conv2d_grouped_f32_avx512 and _avx2) against the naive loop:
// group counts 2 to 32 with 1 to 32 channels per group on either side (output tiles of
// 8, 4, 2 and 1 channels and their remainders, over blocks of 2 or 4 vectors of cells whose
// last one passes the rows computed; on AVX-512 the lanes path's tiles of 14 x 1,
// 7 x 3, 7 x 2 and 7 x 1 pixels times 16 or 32 channels), strides 1 to 3, pads (asymmetric too),
// dilations, 1x1 and 5x5 kernels, batch 2, with and without bias, residual add and clamp,
// one to five threads (units split over output rows when there are few groups). Writes
// outside the output are caught by guard values.
TEST(Libjit, GroupedConvolution) {
  struct Case {
    int64_t C, O, G, H, W, KH, KW, SH, SW, PT, PL, PB, PR, DH, DW;
  } cases[] = {
      {32, 32, 2, 29, 31, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},    // regnet's g2 stride 2, odd sizes
      {160, 160, 10, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, // 16 per group: lanes, AVX2 8-tiles
      {100, 100, 25, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},   // 4 per group
      {64, 64, 8, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},      // 8 per group, small path 7x7
      {48, 48, 6, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},      // 8 per group, 81 pixels
      {128, 128, 32, 9, 10, 3, 3, 1, 1, 1, 0, 1, 2, 1, 1},  // 4 per group, asymmetric pads
      {24, 60, 3, 11, 9, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},     // 8 -> 20 per group, dilation 2
      {12, 42, 6, 8, 13, 5, 5, 3, 2, 2, 1, 2, 3, 1, 1},     // 2 -> 7 per group, 5x5, S 3x2
      {8, 16, 8, 6, 5, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},       // 1x1, 1 -> 2 per group
      {6, 6, 6, 12, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},      // depthwise, as grouped
      {4, 4, 2, 3, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},        // tiny plane
      {8, 8, 2, 21, 23, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},      // 4 per group, rows split
      {12, 6, 3, 30, 33, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},     // 4 -> 2 per group, stride 2
      // The AVX-512 lanes path (32 output channels per group, or 16 on rows of 7 to 16 or at
      // column stride 2):
      {64, 64, 2, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},   // 32 per group, 7 x 2 tiles
      {48, 32, 2, 15, 20, 3, 3, 2, 2, 0, 1, 2, 0, 1, 1}, // 24 -> 16, stride 2, asym. pads
      {24, 64, 2, 13, 16, 5, 5, 3, 1, 2, 2, 2, 2, 1, 1}, // 12 -> 32, 5x5, row stride 3
      {32, 32, 2, 12, 17, 3, 3, 1, 2, 2, 2, 2, 2, 2, 2}, // dilation 2, column stride 2
      {64, 64, 2, 9, 29, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},  // rows of 29: 14 x 1 tiles
      {32, 32, 2, 9, 29, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},  // 16 per group on rows of 29: cells
      {32, 32, 2, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},   // 16 per group, 7 rows: 7 x 3 + 7 x 2
      {32, 32, 2, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},  // 16 per group, 9 rows: 3 + 2 + 2 + 2
      {48, 32, 2, 17, 22, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1}, // 24 -> 16, stride 2, 9 x 11 outputs
      {32, 32, 2, 13, 57, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1}, // 16 per group, stride 2, rows of 29
      // 16 per group with kernel rows of 3 undilated taps (the row-of-3 tiles) and the
      // general lanes tiles beside them:
      {32, 32, 2, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, // rows of 28: row-of-3 14 x 1 tiles
      {32, 32, 2, 9, 30, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},  // stride 2, rows of 15: 14 x 1
      {32, 32, 2, 11, 20, 1, 3, 1, 1, 0, 1, 0, 1, 1, 1}, // 1x3 kernel, rows of 20
      {32, 32, 2, 13, 18, 3, 3, 1, 1, 2, 1, 2, 1, 2, 1}, // row dilation 2, rows of 18
      {32, 32, 2, 12, 14, 3, 3, 1, 1, 1, 1, 1, 1, 1, 2}, // column dilation 2: general tiles
      {32, 32, 2, 10, 12, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1}, // 5x5 on rows of 12: general tiles
  };
  for (const Case &k : cases) {
    int64_t N = 2, Cg = k.C / k.G, Og = k.O / k.G, K = Cg * k.KH * k.KW;
    auto in = randomVec(N * k.C * k.H * k.W, 51), w = randomVec(k.O * K, 52),
         bias = randomVec(k.O, 53);
    std::vector<float> zeros(k.O, 0.0f), packed(k.O * K);
    libjit_pack_grouped_f32(packed.data(), w.data(), k.G, Og, K);
    for (bool withBias : {true, false}) {
      int64_t OH, OW;
      auto ref = refConv(in, w, withBias ? bias : zeros, N, k.C, k.H, k.W, k.O, k.KH, k.KW, k.SH,
                         k.SW, k.PT, k.PL, k.PB, k.PR, k.DH, k.DW, k.G, OH, OW);
      auto add = randomVec(ref.size(), 54);
      int64_t per = libjit_conv2d_grouped_scratch_floats(Cg, Og, OH, OW, k.KH, k.KW, k.SH, k.SW,
                                                         k.DH, k.DW);
      for (bool v512 : {true, false})
        for (int64_t nth : {1, 2, 5})
          for (int mode : {0, 1, 2}) { // plain, clamp, residual add + clamp
            SCOPED_TRACE(std::to_string(k.C) + "->" + std::to_string(k.O) + " g" +
                         std::to_string(k.G) + " " + std::to_string(k.H) + "x" +
                         std::to_string(k.W) + (v512 ? " avx512" : " avx2") + " threads " +
                         std::to_string(nth) + " mode " + std::to_string(mode) +
                         (withBias ? "" : " no bias"));
            std::vector<float> out(ref.size() + 32, 7.0f), scratch(nth * per);
            for (int64_t t = 0; t < nth; t++)
              (v512 ? libjit_conv2d_grouped_f32_avx512 : libjit_conv2d_grouped_f32_avx2)(
                  out.data(), in.data(), packed.data(), withBias ? bias.data() : nullptr,
                  mode == 2 ? add.data() : nullptr, N, k.C, k.H, k.W, k.O, OH, OW, k.KH, k.KW,
                  k.SH, k.SW, k.PT, k.PL, k.DH, k.DW, k.G, mode != 0, -0.25f, 0.5f,
                  scratch.data(), t, nth);
            std::vector<float> r = ref;
            for (size_t i = 0; i < r.size(); i++) {
              if (mode == 2)
                r[i] += add[i];
              if (mode != 0)
                r[i] = std::min(0.5f, std::max(-0.25f, r[i]));
            }
            for (int i = 0; i < 32; i++)
              r.push_back(7.0f);
            expectNear(out, r);
          }
    }
  }
}

// Winograd F(4x4, 3x3) (tiles as columns and as rows) and F(2x2, 3x3) (tiles as rows)
// against a double-precision direct convolution: ragged and tiny images (one or several
// tile rows per vector), pads 0 to 3 (asymmetric too), channel counts off the register
// tiles, batch 2, with and without bias, residual add and clamp, one to three threads
// (tiles or output channels split), both register-tile variants (and both AVX-512 panel
// widths of the tiles-as-columns kernel). Writes outside the output are caught by guard values.
namespace {

/// A Winograd kernel: the tiles-as-columns F(4x4) kernel (m = 0) or the tiles-as-rows
/// kernel with output tiles of m = 2 or 4, on the AVX-512 or AVX2 register tiles.
struct WinoVariant {
  const char *name;
  int64_t m;
  bool avx512;
  int64_t packedFloats(int64_t O, int64_t C) const {
    if (!m)
      return (avx512 ? libjit_pack_wino_floats_avx512 : libjit_pack_wino_floats_avx2)(O, C);
    return (avx512 ? libjit_pack_wino_rows_floats_avx512 : libjit_pack_wino_rows_floats_avx2)(
        m, O, C);
  }
  void pack(float *dst, const float *w, int64_t O, int64_t C) const {
    if (!m)
      (avx512 ? libjit_pack_wino_f32_avx512 : libjit_pack_wino_f32_avx2)(dst, w, O, C);
    else
      (avx512 ? libjit_pack_wino_rows_f32_avx512 : libjit_pack_wino_rows_f32_avx2)(m, dst, w, O,
                                                                                   C);
  }
  int64_t scratchFloats(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH,
                        int64_t OW) const {
    if (!m)
      return (avx512 ? libjit_conv2d_wino_scratch_floats_avx512
                     : libjit_conv2d_wino_scratch_floats_avx2)(N, C, H, W, O, OH, OW);
    return (avx512 ? libjit_conv2d_wino_rows_scratch_floats_avx512
                   : libjit_conv2d_wino_rows_scratch_floats_avx2)(m, N, C, H, W, O, OH, OW);
  }
  template <class... Args> void conv(Args... args) const {
    if (!m)
      (avx512 ? libjit_conv2d_wino_f32_avx512 : libjit_conv2d_wino_f32_avx2)(args...);
    else if (m == 2)
      (avx512 ? libjit_conv2d_wino_rows2_f32_avx512 : libjit_conv2d_wino_rows2_f32_avx2)(args...);
    else
      (avx512 ? libjit_conv2d_wino_rows4_f32_avx512 : libjit_conv2d_wino_rows4_f32_avx2)(args...);
  }
};

const WinoVariant kWinoVariants[] = {
    {"F4x4_avx512", 0, true},      {"F4x4_avx2", 0, false},
    {"F2x2_rows_avx512", 2, true}, {"F2x2_rows_avx2", 2, false},
    {"F4x4_rows_avx512", 4, true}, {"F4x4_rows_avx2", 4, false},
};

struct WinoCase {
  int64_t N, C, H, W, O, PT, PL, PB, PR;
};

/// Direct 3x3 stride-1 convolution in double (no bias).
std::vector<double> refConv3x3(const std::vector<float> &in, const std::vector<float> &w,
                               const WinoCase &k, int64_t OH, int64_t OW) {
  std::vector<double> out(k.N * k.O * OH * OW);
  for (int64_t n = 0; n < k.N; n++)
    for (int64_t o = 0; o < k.O; o++)
      for (int64_t y = 0; y < OH; y++)
        for (int64_t x = 0; x < OW; x++) {
          double s = 0;
          for (int64_t c = 0; c < k.C; c++)
            for (int64_t kh = 0; kh < 3; kh++)
              for (int64_t kw = 0; kw < 3; kw++) {
                int64_t ih = y - k.PT + kh, iw = x - k.PL + kw;
                if (ih < 0 || ih >= k.H || iw < 0 || iw >= k.W)
                  continue;
                s += double(in[((n * k.C + c) * k.H + ih) * k.W + iw]) *
                     double(w[((o * k.C + c) * 3 + kh) * 3 + kw]);
              }
          out[((n * k.O + o) * OH + y) * OW + x] = s;
        }
  return out;
}

class LibjitWino : public ::testing::TestWithParam<int> {
protected:
  const WinoVariant &v() const { return kWinoVariants[GetParam()]; }
};

TEST_P(LibjitWino, MatchesDirectConvolution) {
  const WinoCase cases[] = {
      {1, 3, 9, 9, 8, 1, 1, 1, 1},      // H, W not multiples of 4
      {2, 5, 7, 13, 17, 0, 0, 0, 0},    // batch 2, no pads, ragged tiles
      {1, 16, 1, 1, 16, 1, 1, 1, 1},    // 1x1 image
      {1, 7, 3, 2, 30, 2, 2, 2, 2},     // tiny image, pad 2
      {1, 9, 6, 11, 29, 2, 0, 1, 2},    // asymmetric pads
      {1, 33, 23, 21, 45, 1, 2, 0, 1},  // C, O off every tile size, several panels
      {2, 20, 18, 70, 15, 1, 1, 1, 1},  // wide rows: several chunks per tile row
      {1, 64, 28, 28, 40, 1, 1, 1, 1},  // many tiles, blocks over several panels
      {1, 12, 17, 14, 30, 1, 1, 1, 1},  // 20 tiles: threads split output channels
      {1, 10, 5, 6, 9, 3, 3, 3, 0},     // pads past the kernel's reach
      {1, 400, 6, 7, 20, 1, 1, 1, 1},   // C over the GEMM's K block
      {1, 40, 14, 14, 35, 1, 1, 1, 1},  // resnet50's 14x14 shape: 16 tiles, O off the panels
      {1, 24, 14, 14, 130, 1, 1, 1, 1}, // tiles as rows: channels split at 2 threads
      {1, 70, 7, 7, 100, 1, 1, 1, 1},   // 16 tiles: F(2x2) rows in 8-row tiles on AVX-512
      {2, 19, 8, 8, 33, 1, 1, 1, 1},    // 8x8, batch 2: 8-row tiles, O off the panels
  };
  for (const WinoCase &k : cases) {
    int64_t OH = k.H + k.PT + k.PB - 2, OW = k.W + k.PL + k.PR - 2;
    auto in = randomVec(k.N * k.C * k.H * k.W, 21), w = randomVec(k.O * k.C * 9, 22),
         bias = randomVec(k.O, 23);
    auto ref = refConv3x3(in, w, k, OH, OW);
    auto add = randomVec(ref.size(), 24);
    std::vector<float> packed(v().packedFloats(k.O, k.C));
    v().pack(packed.data(), w.data(), k.O, k.C);
    int64_t perThread = v().scratchFloats(k.N, k.C, k.H, k.W, k.O, OH, OW);
    for (int64_t nth : {1, 2, 3}) {
      for (int epi = 0; epi < 3; epi++) {
        // 0: nothing; 1: bias; 2: bias, residual add and clamp to [-0.5, 1.5].
        SCOPED_TRACE(std::string(v().name) + " N" + std::to_string(k.N) + " C" +
                     std::to_string(k.C) + " " + std::to_string(k.H) + "x" +
                     std::to_string(k.W) + " O" + std::to_string(k.O) + " pads " +
                     std::to_string(k.PT) + std::to_string(k.PL) + std::to_string(k.PB) +
                     std::to_string(k.PR) + " threads " + std::to_string(nth) + " epilogue " +
                     std::to_string(epi));
        const size_t guard = 64;
        std::vector<float> out(ref.size() + 2 * guard, 7.0f), scratch(perThread * nth);
        for (int64_t t = 0; t < nth; t++)
          v().conv(out.data() + guard, in.data(), packed.data(), epi ? bias.data() : nullptr,
                   epi == 2 ? add.data() : nullptr, k.N, k.C, k.H, k.W, k.O, OH, OW, k.PT,
                   k.PL, epi == 2, -0.5f, 1.5f, scratch.data(), t, nth);
        double maxRef = 0;
        for (double r : ref)
          maxRef = std::max(maxRef, std::fabs(r));
        for (size_t i = 0; i < guard; i++) {
          ASSERT_EQ(out[i], 7.0f) << "wrote before the output";
          ASSERT_EQ(out[guard + ref.size() + i], 7.0f) << "wrote past the output";
        }
        for (size_t i = 0; i < ref.size(); i++) {
          int64_t o = int64_t(i / (OH * OW)) % k.O;
          double r = ref[i];
          if (epi)
            r += bias[o];
          if (epi == 2)
            r = std::min(1.5, std::max(-0.5, r + add[i]));
          // Float32 Winograd error grows with the sum of |terms|; 2e-5 of the largest
          // output is four times the worst F(4x4, 3x3) costs here (C = 64).
          ASSERT_NEAR(out[guard + i], r, 2e-5 * maxRef + 1e-5 * std::fabs(r)) << "at " << i;
        }
      }
    }
  }
}

// F(4x4, 3x3)'s transforms on the points 0, 1, -1, 1/2, -2 and infinity, as derived in
// exact rational arithmetic (libjit_wino.cpp): the 1-D identity y = A^T [(G g) .* (B^T d)]
// and the 2-D one Y = A^T [(G g G^T) .* (B^T d B)] A against direct correlation in double,
// and the kernels' packed weights (position p of filter (0, 0)) against G g G^T.
const double kBT4[6][6] = {{2, -3, -4, 3, 2, 0}, {0, -2, 1, 5, 2, 0},   {0, -2, 5, -1, -2, 0},
                           {0, 2, 1, -2, -1, 0}, {0, 1, -2, -1, 2, 0}, {0, 2, -3, -4, 3, 2}};
const double kG4[6][3] = {{1.0 / 2, 0, 0},           {1.0 / 6, 1.0 / 6, 1.0 / 6},
                          {1.0 / 6, -1.0 / 6, 1.0 / 6}, {16.0 / 15, 8.0 / 15, 4.0 / 15},
                          {1.0 / 30, -1.0 / 15, 2.0 / 15}, {0, 0, 1.0 / 2}};
const double kAT4[4][6] = {{1, 1, 1, 1, 1, 0},
                           {0, 1, -1, 0.5, -2, 0},
                           {0, 1, 1, 0.25, 4, 0},
                           {0, 1, -1, 0.125, -8, 1}};

/// G g G^T (6 x 6) of one 3x3 filter, in double.
std::vector<double> winoFilter4(const float *g) {
  std::vector<double> u(36);
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 6; j++)
      for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
          u[i * 6 + j] += kG4[i][a] * double(g[a * 3 + b]) * kG4[j][b];
  return u;
}

TEST(LibjitWinoPoints, F4x4IdentitiesAndPackedWeights) {
  auto d = randomVec(36, 31), g = randomVec(9, 32);
  // 1-D: the first row of d and of g.
  for (int i = 0; i < 4; i++) {
    double y = 0, ref = 0;
    for (int j = 0; j < 6; j++) {
      double t = 0, u = 0;
      for (int k = 0; k < 6; k++)
        t += kBT4[j][k] * d[k];
      for (int k = 0; k < 3; k++)
        u += kG4[j][k] * g[k];
      y += kAT4[i][j] * t * u;
    }
    for (int k = 0; k < 3; k++)
      ref += double(g[k]) * d[i + k];
    EXPECT_NEAR(y, ref, 1e-12) << "1-D output " << i;
  }
  // 2-D: a 6x6 input tile, one 3x3 filter.
  std::vector<double> u = winoFilter4(g.data()), t(36), m(36);
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 6; j++)
      for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++)
          t[i * 6 + j] += kBT4[i][a] * d[a * 6 + b] * kBT4[j][b];
  for (int p = 0; p < 36; p++)
    m[p] = u[p] * t[p];
  for (int y = 0; y < 4; y++)
    for (int x = 0; x < 4; x++) {
      double v = 0, ref = 0;
      for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++)
          v += kAT4[y][a] * m[a * 6 + b] * kAT4[x][b];
      for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
          ref += double(g[a * 3 + b]) * d[(y + a) * 6 + x + b];
      EXPECT_NEAR(v, ref, 1e-12) << "2-D output " << y << "," << x;
    }
  // The F(4x4) kernels' packing: position p of the only filter at p times the per-position
  // size (A panels for the columns kernel, B panels for the rows kernel).
  for (const WinoVariant &v : kWinoVariants) {
    if (v.m == 2)
      continue;
    SCOPED_TRACE(v.name);
    std::vector<float> packed(v.packedFloats(1, 1));
    v.pack(packed.data(), g.data(), 1, 1);
    int64_t per = int64_t(packed.size()) / 36;
    for (int p = 0; p < 36; p++)
      EXPECT_NEAR(packed[p * per], u[p], 1e-6 * std::fabs(u[p]) + 1e-12) << "position " << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, LibjitWino, ::testing::Values(0, 1, 2, 3, 4, 5),
                         [](const ::testing::TestParamInfo<int> &i) {
                           return std::string(kWinoVariants[i.param].name);
                         });

} // namespace
