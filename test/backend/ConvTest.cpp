// Operator tests of Convolution, MaxPool, AvgPool and AdaptiveAvgPool on every backend.
// Expectations are hand-computed (arithmetic in the comments) or come from the direct
// double-precision loop nests below, never from the Interpreter.

#include "BackendTestUtils.h"

#include <algorithm>
#include <cmath>

namespace kiln::test {
namespace {

constexpr ElemKind F32 = ElemKind::Float;
constexpr ElemKind F16 = ElemKind::Float16;
constexpr ElemKind BF16 = ElemKind::BFloat16;
constexpr ElemKind I8Q = ElemKind::Int8Q;
constexpr ElemKind I32Q = ElemKind::Int32Q;

/// Tolerances for results of kind \p k compared with an exact (double) reference: one
/// rounding of the result to the format plus float accumulation error.
double rtolFor(ElemKind k) { return k == F16 ? 1e-3 : k == BF16 ? 8e-3 : 1e-4; }

/// Parameters of a convolution case.
struct ConvCase {
  Dims in;    ///< [N, C, H, W]
  dim_t outC; ///< output channels
  std::vector<dim_t> kernels, strides, pads, dilations;
  dim_t group;

  dim_t outSize(unsigned d) const {
    dim_t k = kernels[d], dil = dilations[d];
    return (in[2 + d] + pads[d] + pads[d + 2] - dil * (k - 1) - 1) / strides[d] + 1;
  }
  Dims outDims() const { return {in[0], outC, outSize(0), outSize(1)}; }
  Dims filterDims() const { return {outC, in[1] / group, kernels[0], kernels[1]}; }
};

/// Direct convolution in double over real values \p x, \p f and \p b (quantized callers
/// pass dequantized values).
std::vector<double> refConv(const ConvCase &c, const std::vector<double> &x,
                            const std::vector<double> &f, const std::vector<double> &b) {
  const Dims od = c.outDims();
  const dim_t C = c.in[1], H = c.in[2], W = c.in[3], cg = C / c.group, og = c.outC / c.group;
  std::vector<double> out(od.product());
  size_t idx = 0;
  for (dim_t n = 0; n < od[0]; n++)
    for (dim_t o = 0; o < od[1]; o++)
      for (dim_t oh = 0; oh < od[2]; oh++)
        for (dim_t ow = 0; ow < od[3]; ow++) {
          double sum = b[o];
          for (dim_t ci = 0; ci < cg; ci++)
            for (dim_t kh = 0; kh < c.kernels[0]; kh++)
              for (dim_t kw = 0; kw < c.kernels[1]; kw++) {
                int64_t ih = int64_t(oh * c.strides[0] + kh * c.dilations[0]) - int64_t(c.pads[0]);
                int64_t iw = int64_t(ow * c.strides[1] + kw * c.dilations[1]) - int64_t(c.pads[1]);
                if (ih < 0 || iw < 0 || ih >= int64_t(H) || iw >= int64_t(W))
                  continue;
                dim_t ch = (o / og) * cg + ci;
                sum += x[((n * C + ch) * H + ih) * W + iw] *
                       f[((o * cg + ci) * c.kernels[0] + kh) * c.kernels[1] + kw];
              }
          out[idx++] = sum;
        }
  return out;
}

class ConvTest : public BackendTest {
protected:
  /// A float-kind convolution on random data, checked against refConv.
  void checkFloatConv(const ConvCase &c, ElemKind k, uint64_t seed) {
    Tensor x = randomTensor(Type(k, c.in), -1, 1, seed);
    Tensor f = randomTensor(Type(k, c.filterDims()), -1, 1, seed + 1);
    Tensor b = randomTensor(Type(k, {c.outC}), -1, 1, seed + 2);
    std::vector<double> expected = refConv(c, toDoubles(x), toDoubles(f), toDoubles(b));
    auto *in = input("x", std::move(x));
    auto *conv = F()->createConvolution("conv", in, mod().createConstant("f", std::move(f)),
                                        mod().createConstant("b", std::move(b)), c.kernels,
                                        c.strides, c.pads, c.dilations, c.group);
    auto *s = save(conv);
    // bf16: a backend's float32 sum in another order than the Interpreter's may round to
    // the neighbouring bf16 value (2^-7 relative apart at most).
    if (!run(1e-3f, k == BF16 ? 8e-3f : 1e-3f))
      return;
    EXPECT_EQ(output(s).dims(), c.outDims());
    expectValues(output(s), expected, 1e-4, rtolFor(k));
  }

  /// Relu(convolution + residual) on random data, checked against refConv + residual,
  /// clamped at 0. bf16: small integers (inputs and residual in {-1, 0, 1}, filter and
  /// bias in {-2, ..., 2}) whose sums stay below 256 in magnitude, so every value is exact
  /// in bf16 and no rounding or summation order matters: the result must be exact (the
  /// wiring of the residual and the Relu, fused or not).
  void checkResidualRelu(const ConvCase &c, uint64_t seed, ElemKind k = F32) {
    Tensor x = randomTensor(Type(k, c.in), -1, 1, seed);
    Tensor f = randomTensor(Type(k, c.filterDims()), -1, 1, seed + 1);
    Tensor b = randomTensor(Type(k, {c.outC}), -1, 1, seed + 2);
    Tensor r = randomTensor(Type(k, c.outDims()), -1, 1, seed + 3);
    const bool exact = k == BF16;
    if (exact) {
      for (Tensor *t : {&x, &r})
        for (size_t i = 0; i < t->size(); i++)
          t->setFromDouble(i, std::round(t->getAsDouble(i)));
      for (Tensor *t : {&f, &b})
        for (size_t i = 0; i < t->size(); i++)
          t->setFromDouble(i, std::round(2 * t->getAsDouble(i)));
      EXPECT_LT(2 * (c.in[1] / c.group) * c.kernels[0] * c.kernels[1] + 3, 256u);
    }
    std::vector<double> expected = refConv(c, toDoubles(x), toDoubles(f), toDoubles(b));
    std::vector<double> rs = toDoubles(r);
    for (size_t i = 0; i < expected.size(); i++)
      expected[i] = std::max(0.0, expected[i] + rs[i]);
    auto *in = input("x", std::move(x));
    auto *res = input("r", std::move(r));
    auto *conv = F()->createConvolution("conv", in, mod().createConstant("f", std::move(f)),
                                        mod().createConstant("b", std::move(b)), c.kernels,
                                        c.strides, c.pads, c.dilations, c.group);
    auto *s = save(F()->createRelu("relu", F()->createAdd("add", conv, res)));
    if (!run(exact ? 0.0f : 1e-3f, exact ? 0.0f : 1e-3f))
      return;
    expectValues(output(s), expected, exact ? 0.0 : 1e-4, exact ? 0.0 : 1e-4);
  }

  /// An int8 convolution on random data with non-zero offsets, checked exactly against
  /// refConv on (q - offset) and the reference requantization. Scales are powers of two
  /// so the reference arithmetic is exact.
  void checkInt8Conv(const ConvCase &c, uint64_t seed) {
    Type xTy(I8Q, c.in, 0.5f, 3), fTy(I8Q, c.filterDims(), 0.25f, -2);
    Type bTy(I32Q, {c.outC}, 0.125f, 0), oTy(I8Q, c.outDims(), 4.0f, -5);
    Tensor x = randomTensor(xTy, -20, 20, seed);
    Tensor f = randomTensor(fTy, -10, 10, seed + 1);
    Tensor b = randomTensor(bTy, -300, 300, seed + 2);
    std::vector<double> xs = toDoubles(x), fs = toDoubles(f), bs = toDoubles(b);
    for (double &v : xs)
      v = 0.5 * (v - 3);
    for (double &v : fs)
      v = 0.25 * (v + 2);
    for (double &v : bs)
      v = 0.125 * v;
    std::vector<double> expected = refConv(c, xs, fs, bs);
    for (double &v : expected)
      v = quantizeRef(v, 4.0, -5);
    auto *in = input("x", std::move(x));
    auto *conv = F()->createConvolution("conv", mod().uniqueType(oTy), in,
                                        mod().createConstant("f", std::move(f)),
                                        mod().createConstant("b", std::move(b)), c.kernels,
                                        c.strides, c.pads, c.dilations, c.group);
    auto *s = save(conv);
    if (!run(0, 0))
      return;
    expectValues(output(s), expected, 0, 0);
  }
};

// ------------------------------------------------------------------ hand-computed

// x = [1 2 3; 4 5 6; 7 8 9], f = [1 2; 3 4], bias 10, no pad, stride 1:
// (0,0) 1+4+12+20+10 = 47   (0,1) 2+6+15+24+10 = 57
// (1,0) 4+10+21+32+10 = 77  (1,1) 5+12+24+36+10 = 87
TEST_P(ConvTest, Basic2x2) {
  auto *x = input("x", F32, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto *c = F()->createConvolution("conv", x, constant("f", F32, {1, 1, 2, 2}, {1, 2, 3, 4}),
                                   constant("b", F32, {1}, {10}), {2, 2}, {1, 1}, {0, 0, 0, 0},
                                   {1, 1}, 1);
  auto *s = save(c);
  if (!run())
    return;
  expectValues(output(s), {47, 57, 77, 87});
}

// 3x3 ones, pad 1 on every side, stride 2 over [1..9]: output 2x2 of in-bounds sums
// (0,0) 1+2+4+5 = 12, (0,1) 2+3+5+6 = 16, (1,0) 4+5+7+8 = 24, (1,1) 5+6+8+9 = 28.
TEST_P(ConvTest, SymmetricPadStride2) {
  auto *x = input("x", F32, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto *c = F()->createConvolution(
      "conv", x, constant("f", F32, {1, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}),
      constant("b", F32, {1}, {0}), {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1);
  auto *s = save(c);
  if (!run())
    return;
  expectValues(output(s), {12, 16, 24, 28});
}

// x = [1 2; 3 4], f = [1 2; 3 4], pads top 1, left 0, bottom 0, right 2: out 2x3 over
// padded rows {0 0 0 0 | 1 2 0 0 | 3 4 0 0}:
// (0,0) 3*1+4*2 = 11, (0,1) 3*2 = 6, (0,2) 0, (1,0) 1+4+9+16 = 30, (1,1) 2+12 = 14, (1,2) 0.
TEST_P(ConvTest, AsymmetricPads) {
  auto *x = input("x", F32, {1, 1, 2, 2}, {1, 2, 3, 4});
  auto *c =
      F()->createConvolution("conv", x, constant("f", F32, {1, 1, 2, 2}, {1, 2, 3, 4}),
                             constant("b", F32, {1}, {0}), {2, 2}, {1, 1}, {1, 0, 0, 2}, {1, 1}, 1);
  auto *s = save(c);
  if (!run())
    return;
  EXPECT_EQ(output(s).dims(), Dims({1, 1, 2, 3}));
  expectValues(output(s), {11, 6, 0, 30, 14, 0});
}

// Dilation 2 turns the 2x2 filter [1 2; 3 4] into taps at (0,0) (0,2) (2,0) (2,2) of [1..9]:
// 1*1 + 2*3 + 3*7 + 4*9 = 64.
TEST_P(ConvTest, Dilation) {
  auto *x = input("x", F32, {1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto *c =
      F()->createConvolution("conv", x, constant("f", F32, {1, 1, 2, 2}, {1, 2, 3, 4}),
                             constant("b", F32, {1}, {0}), {2, 2}, {1, 1}, {0, 0, 0, 0}, {2, 2}, 1);
  auto *s = save(c);
  if (!run())
    return;
  expectValues(output(s), {64});
}

// Group 2: channels [2, 3]; output channels 0,1 read channel 0, 2,3 read channel 1:
// [2*1, 2*2, 3*3, 3*4] + bias [1, 0, -1, 0] = [3, 4, 8, 12].
TEST_P(ConvTest, Groups) {
  auto *x = input("x", F32, {1, 2, 1, 1}, {2, 3});
  auto *c = F()->createConvolution("conv", x, constant("f", F32, {4, 1, 1, 1}, {1, 2, 3, 4}),
                                   constant("b", F32, {4}, {1, 0, -1, 0}), {1, 1}, {1, 1},
                                   {0, 0, 0, 0}, {1, 1}, 2);
  auto *s = save(c);
  if (!run())
    return;
  expectValues(output(s), {3, 4, 8, 12});
}

// x raw [3 5 -1 1] (scale 0.5, offset 1: real [1 2 -1 0]); filter scale 0.25; bias scale
// 0.125; output scale 1, offset -3. Per output channel (accumulator in integer units):
// ch0 f [4 8 -4 2]: 2*4 + 4*8 + (-2)(-4) + 0 = 48; (48 + 4) * 0.125 = 6.5 -> 7 -> 4
// ch1 f negated, bias -4: -6.5 -> -7 (half away from zero) -> -10
// ch2 f 0, bias 2000: 250 -> 247 -> saturates to 127
// ch3 f 0, bias -2000: -250 -> -253 -> saturates to -128
TEST_P(ConvTest, Int8RoundingAndSaturation) {
  auto *x = input("x", makeTensor(Type(I8Q, {1, 1, 2, 2}, 0.5f, 1), {3, 5, -1, 1}));
  auto *f =
      mod().createConstant("f", makeTensor(Type(I8Q, {4, 1, 2, 2}, 0.25f, 0),
                                           {4, 8, -4, 2, -4, -8, 4, -2, 0, 0, 0, 0, 0, 0, 0, 0}));
  auto *b = mod().createConstant("b", makeTensor(Type(I32Q, {4}, 0.125f, 0), {4, -4, 2000, -2000}));
  auto *c = F()->createConvolution("conv", mod().uniqueType(I8Q, {1, 4, 1, 1}, 1.0f, -3), x, f, b,
                                   {2, 2}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  auto *s = save(c);
  if (!run(0, 0))
    return;
  expectValues(output(s), {4, -10, 127, -128}, 0, 0);
}

// ------------------------------------------------------------------ randomized

const ConvCase kPlain{{2, 3, 7, 6}, 4, {3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1};
const ConvCase kPadStride{{1, 4, 9, 8}, 6, {3, 2}, {2, 3}, {1, 2, 2, 0}, {1, 1}, 1};
const ConvCase kDilated{{1, 2, 9, 9}, 3, {3, 3}, {1, 2}, {2, 2, 2, 2}, {2, 3}, 1};
const ConvCase kGrouped{{2, 6, 5, 5}, 4, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2};
const ConvCase kDepthwise{{1, 5, 6, 7}, 5, {3, 3}, {2, 2}, {1, 0, 1, 1}, {1, 1}, 5};
const ConvCase kLarger{{1, 16, 14, 14}, 32, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
// 1x1 layers (odd channel counts, a plane of 90 pixels), strided; a 7x7/2 stem.
const ConvCase kPointwise{{1, 33, 9, 10}, 21, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1};
const ConvCase kPointwiseStride2{{2, 16, 8, 9}, 24, {1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1};
const ConvCase kG2Dense{{2, 6, 9, 7}, 8, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1};
const ConvCase kStem7{{1, 3, 23, 21}, 16, {7, 7}, {2, 2}, {3, 3, 3, 3}, {1, 1}, 1};

// Depthwise of every kernel size, stride and dilation (odd sizes, asymmetric pads).
const ConvCase kDw5Dilated{{1, 6, 14, 14}, 6, {5, 5}, {1, 1}, {4, 4, 4, 4}, {2, 2}, 6};
const ConvCase kDw7{{2, 4, 11, 9}, 4, {7, 7}, {1, 1}, {3, 3, 3, 3}, {1, 1}, 4};
const ConvCase kDw7Stride2{{1, 5, 13, 15}, 5, {7, 7}, {2, 2}, {3, 2, 3, 4}, {1, 1}, 5};
const ConvCase kDw3Dil2Stride2{{1, 3, 17, 12}, 3, {3, 3}, {2, 2}, {2, 2, 2, 2}, {2, 2}, 3};
const ConvCase kDw9{{1, 2, 10, 19}, 2, {9, 9}, {1, 3}, {4, 4, 4, 4}, {1, 1}, 2};
// Stride 1 on planes narrower than 16 (the CPU's small-plane path): 5x5 on 7x7 and 3x3 on
// 14x13 as in the mobile networks, and asymmetric pads that keep the output as wide.
const ConvCase kDw5Small{{2, 12, 7, 7}, 12, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 12};
const ConvCase kDw3Small{{1, 7, 14, 13}, 7, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 7};
const ConvCase kDw5SmallAsym{{1, 3, 5, 9}, 3, {5, 5}, {1, 1}, {0, 1, 4, 3}, {1, 1}, 3};
// Grouped convolutions: group counts 2, 4, 10, 25, 32 and 64, 1 to 16 channels per group,
// strides 1 and 2, pads, a dilation; a depthwise multiplier (group = C, O = 2 C).
const ConvCase kG2{{2, 6, 9, 7}, 8, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2};
const ConvCase kG4Stride2{{1, 16, 15, 13}, 16, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 4};
const ConvCase kG10{{1, 160, 14, 14}, 160, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 10};
const ConvCase kG25{{1, 50, 7, 7}, 100, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 25};
const ConvCase kG32{{1, 128, 8, 11}, 128, {3, 3}, {2, 1}, {1, 0, 1, 2}, {1, 1}, 32};
const ConvCase kG64Pointwise{{1, 128, 5, 6}, 192, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 64};
const ConvCase kG4Dilated{{1, 8, 12, 10}, 12, {3, 3}, {1, 1}, {2, 3, 2, 3}, {2, 3}, 4};
// 16 output channels per group on planes narrower than 16 at stride 1 (the CPU's
// small-plane grouped path): regnet_x's 7x7 g25 and 14x14 g10 scaled, 8 input channels per
// group with a 5x5 kernel, asymmetric pads.
const ConvCase kG16Small7{{1, 64, 7, 7}, 64, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 4};
const ConvCase kG16Small14{{2, 32, 14, 13}, 32, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2};
const ConvCase kG16Small5x5{{1, 24, 6, 9}, 48, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 3};
const ConvCase kG16SmallAsym{{1, 32, 9, 11}, 32, {3, 3}, {1, 1}, {0, 1, 2, 1}, {1, 1}, 2};
// 8 output channels per group (regnet_y's group width) on small planes: 7x7 with 8 input
// channels per group, 14x13 with 4, a 5x7 plane with asymmetric pads, and a 4x6 plane
// (too few pixels for that path).
const ConvCase kG8Small7{{1, 16, 7, 7}, 16, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2};
const ConvCase kG8Small14{{2, 12, 14, 13}, 24, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3};
const ConvCase kG8SmallAsym{{1, 16, 5, 7}, 16, {3, 3}, {1, 1}, {2, 0, 0, 2}, {1, 1}, 2};
const ConvCase kG8Tiny{{1, 16, 4, 6}, 16, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2};
// 16 and 32 output channels per group off the small planes (the CPU's AVX-512 lanes path):
// stride 2 with rows of 9, 32 per group on 7x7, 32 per group at stride 2 with batch 2.
const ConvCase kG16Stride2{{1, 32, 15, 17}, 32, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 2};
const ConvCase kG32Small7{{1, 64, 7, 7}, 64, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2};
const ConvCase kG32Stride2{{2, 64, 14, 15}, 64, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 2};
const ConvCase kDwMultiplier{{1, 6, 10, 9}, 12, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 6};
// Dilated 3x3 on a 6x7 map (DeepLabV3's ASPP shape, scaled): dilation 7 with pads 7 reads
// the map through the centre tap only; dilation 4 with pads 4 through every tap.
const ConvCase kAsppDead{{1, 8, 6, 7}, 5, {3, 3}, {1, 1}, {7, 7, 7, 7}, {7, 7}, 1};
const ConvCase kAsppLive{{1, 8, 6, 7}, 5, {3, 3}, {1, 1}, {4, 4, 4, 4}, {4, 4}, 1};

TEST_P(ConvTest, FloatDepthwise5x5Dilated) { checkFloatConv(kDw5Dilated, F32, 21); }
TEST_P(ConvTest, FloatDepthwise7x7) { checkFloatConv(kDw7, F32, 22); }
TEST_P(ConvTest, FloatDepthwise7x7Stride2) { checkFloatConv(kDw7Stride2, F32, 23); }
TEST_P(ConvTest, FloatDepthwiseDilatedStride2) { checkFloatConv(kDw3Dil2Stride2, F32, 24); }
TEST_P(ConvTest, FloatDepthwise9x9) { checkFloatConv(kDw9, F32, 25); }
TEST_P(ConvTest, FloatDepthwise5x5SmallPlane) { checkFloatConv(kDw5Small, F32, 51); }
TEST_P(ConvTest, FloatDepthwise3x3SmallPlane) { checkFloatConv(kDw3Small, F32, 52); }
TEST_P(ConvTest, FloatDepthwise5x5SmallPlaneAsymmetricPads) {
  checkFloatConv(kDw5SmallAsym, F32, 53);
}
TEST_P(ConvTest, FloatGroups2) { checkFloatConv(kG2, F32, 26); }
TEST_P(ConvTest, FloatGroups4Stride2) { checkFloatConv(kG4Stride2, F32, 27); }
TEST_P(ConvTest, FloatGroups10) { checkFloatConv(kG10, F32, 28); }
TEST_P(ConvTest, FloatGroups25) { checkFloatConv(kG25, F32, 29); }
TEST_P(ConvTest, FloatGroups32) { checkFloatConv(kG32, F32, 30); }
TEST_P(ConvTest, FloatGroups64Pointwise) { checkFloatConv(kG64Pointwise, F32, 31); }
TEST_P(ConvTest, FloatGroups4Dilated) { checkFloatConv(kG4Dilated, F32, 32); }
TEST_P(ConvTest, FloatGroups16Small7x7) { checkFloatConv(kG16Small7, F32, 54); }
TEST_P(ConvTest, FloatGroups16Small14x13) { checkFloatConv(kG16Small14, F32, 55); }
TEST_P(ConvTest, FloatGroups16Small5x5) { checkFloatConv(kG16Small5x5, F32, 56); }
TEST_P(ConvTest, FloatGroups16SmallAsymmetricPads) { checkFloatConv(kG16SmallAsym, F32, 57); }
TEST_P(ConvTest, FloatGroups16SmallResidualRelu) { checkResidualRelu(kG16Small7, 58); }
TEST_P(ConvTest, FloatGroups8Small7x7) { checkFloatConv(kG8Small7, F32, 59); }
TEST_P(ConvTest, FloatGroups8Small14x13) { checkFloatConv(kG8Small14, F32, 60); }
TEST_P(ConvTest, FloatGroups8SmallAsymmetricPads) { checkFloatConv(kG8SmallAsym, F32, 61); }
TEST_P(ConvTest, FloatGroups8TinyPlane) { checkFloatConv(kG8Tiny, F32, 62); }
TEST_P(ConvTest, FloatGroups8SmallResidualRelu) { checkResidualRelu(kG8Small14, 63); }
TEST_P(ConvTest, FloatGroups16Stride2) { checkFloatConv(kG16Stride2, F32, 91); }
TEST_P(ConvTest, FloatGroups32Small7x7) { checkFloatConv(kG32Small7, F32, 92); }
TEST_P(ConvTest, FloatGroups32Stride2) { checkFloatConv(kG32Stride2, F32, 93); }
TEST_P(ConvTest, FloatGroups32ResidualRelu) { checkResidualRelu(kG32Small7, 94); }
TEST_P(ConvTest, FloatDepthwiseMultiplier) { checkFloatConv(kDwMultiplier, F32, 33); }
TEST_P(ConvTest, FloatDilatedDeadTaps) { checkFloatConv(kAsppDead, F32, 34); }
TEST_P(ConvTest, FloatDilatedLiveTaps) { checkFloatConv(kAsppLive, F32, 35); }
TEST_P(ConvTest, Float16Groups10) { checkFloatConv(kG10, F16, 36); }

// Relu(grouped convolution + residual): the residual add and the clamp in the grouped
// kernel's epilogue where the backend fuses them (also a depthwise one, which the
// depthwise kernel leaves to the grouped kernel), against refConv + residual, clamped.
TEST_P(ConvTest, FloatGroupedResidualRelu) { checkResidualRelu(kG10, 41); }
TEST_P(ConvTest, FloatGroupedStride2ResidualRelu) { checkResidualRelu(kG4Stride2, 42); }
TEST_P(ConvTest, FloatDepthwiseResidualRelu) { checkResidualRelu(kDw7, 43); }

TEST_P(ConvTest, FloatPlain) { checkFloatConv(kPlain, F32, 1); }
TEST_P(ConvTest, FloatPadStride) { checkFloatConv(kPadStride, F32, 2); }
TEST_P(ConvTest, FloatDilated) { checkFloatConv(kDilated, F32, 3); }
TEST_P(ConvTest, FloatGrouped) { checkFloatConv(kGrouped, F32, 4); }
TEST_P(ConvTest, FloatDepthwise) { checkFloatConv(kDepthwise, F32, 5); }
TEST_P(ConvTest, FloatLarger) { checkFloatConv(kLarger, F32, 6); }
TEST_P(ConvTest, Float16PadStride) { checkFloatConv(kPadStride, F16, 7); }
TEST_P(ConvTest, Float16Grouped) { checkFloatConv(kGrouped, F16, 8); }
// fp16 layers of the kinds whose float16 weights the CPU holds halved (half-weights: the
// packed GEMM, the transposed convolution) and of those that keep them float32.
TEST_P(ConvTest, Float16Plain) { checkFloatConv(kPlain, F16, 172); }
TEST_P(ConvTest, Float16Dilated) { checkFloatConv(kDilated, F16, 173); }
TEST_P(ConvTest, Float16Larger) { checkFloatConv(kLarger, F16, 174); }
TEST_P(ConvTest, Float16Pointwise) { checkFloatConv(kPointwise, F16, 175); }
TEST_P(ConvTest, Float16PointwiseStride2) { checkFloatConv(kPointwiseStride2, F16, 176); }
TEST_P(ConvTest, Float16Stem7x7) { checkFloatConv(kStem7, F16, 177); }
TEST_P(ConvTest, BFloat16PadStride) { checkFloatConv(kPadStride, BF16, 9); }
TEST_P(ConvTest, BFloat16Depthwise) { checkFloatConv(kDepthwise, BF16, 10); }
// bf16 of group 1 (the CPU's native bf16 kernel): every tile and tail shape, the 1x1
// direct path, strided and padded 1x1, a 7x7/2 stem, dilations, and the fused residual
// and Relu.
TEST_P(ConvTest, BFloat16Plain) { checkFloatConv(kPlain, BF16, 64); }
TEST_P(ConvTest, BFloat16Dilated) { checkFloatConv(kDilated, BF16, 65); }
TEST_P(ConvTest, BFloat16Larger) { checkFloatConv(kLarger, BF16, 66); }
TEST_P(ConvTest, BFloat16Pointwise) { checkFloatConv(kPointwise, BF16, 67); }
TEST_P(ConvTest, BFloat16PointwiseStride2) { checkFloatConv(kPointwiseStride2, BF16, 68); }
TEST_P(ConvTest, BFloat16Stem7x7) { checkFloatConv(kStem7, BF16, 69); }
TEST_P(ConvTest, BFloat16ResidualRelu) { checkResidualRelu(kG2Dense, 70, BF16); }
TEST_P(ConvTest, BFloat16PointwiseResidualRelu) { checkResidualRelu(kPointwise, 71, BF16); }
TEST_P(ConvTest, Int8Plain) { checkInt8Conv(kPlain, 11); }
TEST_P(ConvTest, Int8PadStride) { checkInt8Conv(kPadStride, 12); }
TEST_P(ConvTest, Int8Dilated) { checkInt8Conv(kDilated, 13); }
TEST_P(ConvTest, Int8Grouped) { checkInt8Conv(kGrouped, 14); }
TEST_P(ConvTest, Int8Depthwise) { checkInt8Conv(kDepthwise, 15); }

KILN_INSTANTIATE_BACKEND_TESTS(ConvTest);

// ------------------------------------------------------------------ pooling

class PoolTest : public BackendTest {
protected:
  /// MaxPool k2 s1 pads 1 on all sides over real [-3.5 -2.5; -4.5 -1.5] (all negative, so a
  /// counted pad would win with 0). Windows and their maxima:
  /// (0,0) {-3.5}; (0,1) {-3.5,-2.5}; (0,2) {-2.5}; (1,0) {-3.5,-4.5}; (1,1) all: -1.5;
  /// (1,2) {-2.5,-1.5}; (2,0) {-4.5}; (2,1) {-4.5,-1.5}; (2,2) {-1.5}.
  void maxPoolCase(ElemKind k) {
    auto *x = input("x", k, {1, 1, 2, 2}, {-3.5, -2.5, -4.5, -1.5});
    auto *s = save(F()->createMaxPool("pool", x, {2, 2}, {1, 1}, {1, 1, 1, 1}));
    if (!run())
      return;
    expectValues(output(s), {-3.5, -2.5, -2.5, -3.5, -1.5, -1.5, -4.5, -1.5, -1.5});
  }

  /// AvgPool k2 s1 pads bottom 1, right 1 over channel 0 [0 1; 2 3.5] and channel 1
  /// [-1 -2; -3 -4.5]. Window sums (ch0 / ch1) and in-bounds counts:
  /// (0,0) 6.5 / -10.5 (4); (0,1) 4.5 / -6.5 (2); (1,0) 5.5 / -7.5 (2); (1,1) 3.5 / -4.5 (1).
  void avgPoolCase(ElemKind k, bool countPads) {
    auto *x = input("x", k, {1, 2, 2, 2}, {0, 1, 2, 3.5, -1, -2, -3, -4.5});
    auto *s = save(F()->createAvgPool("pool", x, {2, 2}, {1, 1}, {0, 0, 1, 1}, countPads));
    if (!run())
      return;
    if (countPads) // sums / 4
      expectValues(output(s), {1.625, 1.125, 1.375, 0.875, -2.625, -1.625, -1.875, -1.125});
    else // sums / counts
      expectValues(output(s), {1.625, 2.25, 2.75, 3.5, -2.625, -3.25, -3.75, -4.5});
  }

  /// AdaptiveAvgPool of x[r][c] = 3r + c, 5x3 -> 3x2. Rows [0,2) [1,4) [3,5) (means 0.5, 2,
  /// 3.5), columns [0,2) [1,3) (means 0.5, 1.5); a cell's mean is 3*rowMean + colMean:
  /// 2, 3, 6.5, 7.5, 11, 12.
  void adaptiveCase(ElemKind k) {
    auto *x = input("x", k, {1, 1, 5, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14});
    auto *s = save(F()->createAdaptiveAvgPool("pool", x, {3, 2}));
    if (!run())
      return;
    expectValues(output(s), {2, 3, 6.5, 7.5, 11, 12});
  }
};

TEST_P(PoolTest, MaxPoolFloat) { maxPoolCase(F32); }
TEST_P(PoolTest, MaxPoolFloat16) { maxPoolCase(F16); }
TEST_P(PoolTest, MaxPoolBFloat16) { maxPoolCase(BF16); }
TEST_P(PoolTest, AvgPoolFloat) { avgPoolCase(F32, false); }
TEST_P(PoolTest, AvgPoolFloatCountPads) { avgPoolCase(F32, true); }
TEST_P(PoolTest, AvgPoolFloat16) { avgPoolCase(F16, false); }
TEST_P(PoolTest, AvgPoolFloat16CountPads) { avgPoolCase(F16, true); }
TEST_P(PoolTest, AvgPoolBFloat16) { avgPoolCase(BF16, false); }
TEST_P(PoolTest, AvgPoolBFloat16CountPads) { avgPoolCase(BF16, true); }
TEST_P(PoolTest, AdaptiveFloat) { adaptiveCase(F32); }
TEST_P(PoolTest, AdaptiveFloat16) { adaptiveCase(F16); }
TEST_P(PoolTest, AdaptiveBFloat16) { adaptiveCase(BF16); }

// k3 s2 no pad over 5x5 [0..24]: windows start at rows/cols 0 and 2; the max is the
// bottom-right element: (0,0) 12, (0,1) 14, (1,0) 22, (1,1) 24.
TEST_P(PoolTest, MaxPoolStride2) {
  Tensor t(F32, {1, 1, 5, 5});
  for (size_t i = 0; i < 25; i++)
    t.setFromDouble(i, double(i));
  auto *s =
      save(F()->createMaxPool("pool", input("x", std::move(t)), {3, 3}, {2, 2}, {0, 0, 0, 0}));
  if (!run())
    return;
  expectValues(output(s), {12, 14, 22, 24});
}

// Upsampling: H = 2 -> 3 rows [0,1) [0,2) [1,2); W = 1 -> 1. x = [2, 6]: 2, 4, 6.
// Global pooling of [1, 2, 3, 4, 5, 6] as 2x3: 3.5.
TEST_P(PoolTest, AdaptiveUpsampleAndGlobal) {
  auto *x = input("x", F32, {1, 1, 2, 1}, {2, 6});
  auto *y = input("y", F32, {1, 1, 2, 3}, {1, 2, 3, 4, 5, 6});
  auto *s1 = save(F()->createAdaptiveAvgPool("up", x, {3, 1}), "up");
  auto *s2 = save(F()->createAdaptiveAvgPool("global", y, {1, 1}), "global");
  if (!run())
    return;
  expectValues(output(s1), {2, 4, 6});
  expectValues(output(s2), {3.5});
}

// The MaxPool case quantized: scale 0.5, offset 2 stores real r as 2r + 2; the same
// input and output type makes the result the raw maxima:
// raw [-5 -3; -7 -1] -> [-5 -3 -3 -5 -1 -1 -7 -1 -1].
TEST_P(PoolTest, MaxPoolInt8) {
  Type ty(I8Q, {1, 1, 2, 2}, 0.5f, 2);
  auto *x = input("x", makeTensor(ty, {-5, -3, -7, -1}));
  auto *s = save(F()->createMaxPool("pool", x, {2, 2}, {1, 1}, {1, 1, 1, 1}));
  if (!run(0, 0))
    return;
  EXPECT_EQ(output(s).getType().scale, 0.5f);
  expectValues(output(s), {-5, -3, -3, -5, -1, -1, -7, -1, -1}, 0, 0);
}

// The AvgPool case quantized: input scale 0.5 offset 1 (ch0 raw [1 3 5 8] = [0 1 2 3.5],
// ch1 raw [-1 -3 -5 -8] = [-1 -2 -3 -4.5]); output scale 0.25 offset -2, so
// q = round(4 * mean) - 2 with halves away from zero:
// without pads: 4*means 6.5 9 11 14 | -10.5 -13 -15 -18 -> 5 7 9 12 | -13 -15 -17 -20
// with pads:    4*means 6.5 4.5 5.5 3.5 | -10.5 -6.5 -7.5 -4.5 -> 5 3 4 2 | -13 -9 -10 -7
TEST_P(PoolTest, AvgPoolInt8) {
  for (bool countPads : {false, true}) {
    Type ty(I8Q, {1, 2, 2, 2}, 0.5f, 1);
    auto *x = input(countPads ? "x1" : "x0", makeTensor(ty, {1, 3, 5, 8, -1, -3, -5, -8}));
    auto *p = F()->createAvgPool(countPads ? "incl" : "excl",
                                 mod().uniqueType(I8Q, {1, 2, 2, 2}, 0.25f, -2), x, {2, 2}, {1, 1},
                                 {0, 0, 1, 1}, countPads);
    save(p, countPads ? "incl" : "excl");
  }
  if (!run(0, 0))
    return;
  auto saves = F()->getSaves();
  ASSERT_EQ(saves.size(), 2u);
  expectValues(output(saves[0]), {5, 7, 9, 12, -13, -15, -17, -20}, 0, 0);
  expectValues(output(saves[1]), {5, 3, 4, 2, -13, -9, -10, -7}, 0, 0);
}

// The adaptive case quantized: input scale 1 offset 0 (raw = real), output scale 0.5
// offset 1: 2*mean + 1 = 5, 7, 14, 16, 23, 25.
TEST_P(PoolTest, AdaptiveInt8) {
  auto *x = input("x", makeTensor(Type(I8Q, {1, 1, 5, 3}, 1.0f, 0),
                                  {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}));
  auto *p =
      F()->createAdaptiveAvgPool("pool", mod().uniqueType(I8Q, {1, 1, 3, 2}, 0.5f, 1), x, {3, 2});
  auto *s = save(p);
  if (!run(0, 0))
    return;
  expectValues(output(s), {5, 7, 14, 16, 23, 25}, 0, 0);
}

// Random float pooling with stride 2 and asymmetric pads against direct loops.
TEST_P(PoolTest, RandomStrideAsymmetricPads) {
  const Dims in{2, 3, 7, 8};
  const std::vector<dim_t> k{3, 2}, st{2, 3}, pads{1, 0, 2, 1};
  Tensor t = randomTensor(Type(F32, in), -2, 2, 42);
  std::vector<double> x = toDoubles(t);
  auto *ph = input("x", std::move(t));
  auto *sMax = save(F()->createMaxPool("max", ph, k, st, pads), "max");
  auto *sAvg = save(F()->createAvgPool("avg", ph, k, st, pads, false), "avg");
  auto *sAvgP = save(F()->createAvgPool("avgp", ph, k, st, pads, true), "avgp");
  if (!run(1e-5f, 1e-5f))
    return;
  const dim_t OH = (7 + 1 + 2 - 3) / 2 + 1, OW = (8 + 0 + 1 - 2) / 3 + 1;
  std::vector<double> eMax, eAvg, eAvgP;
  for (dim_t nc = 0; nc < 6; nc++)
    for (dim_t oh = 0; oh < OH; oh++)
      for (dim_t ow = 0; ow < OW; ow++) {
        double m = -INFINITY, sum = 0;
        int count = 0;
        for (dim_t kh = 0; kh < k[0]; kh++)
          for (dim_t kw = 0; kw < k[1]; kw++) {
            int64_t h = int64_t(oh * st[0] + kh) - 1, w = int64_t(ow * st[1] + kw) - 0;
            if (h < 0 || h >= 7 || w < 0 || w >= 8)
              continue;
            double v = x[(nc * 7 + h) * 8 + w];
            m = std::max(m, v);
            sum += v;
            count++;
          }
        eMax.push_back(m);
        eAvg.push_back(sum / count);
        eAvgP.push_back(sum / 6);
      }
  expectValues(output(sMax), eMax);
  expectValues(output(sAvg), eAvg, 1e-5, 1e-5);
  expectValues(output(sAvgP), eAvgP, 1e-5, 1e-5);
}

KILN_INSTANTIATE_BACKEND_TESTS(PoolTest);

} // namespace
} // namespace kiln::test
