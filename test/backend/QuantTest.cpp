// Operator tests of the quantization family: Quantize, Dequantize and RescaleQuantized on
// int8, uint8 and int32 quantized kinds. Quantized values follow real = scale * (q -
// offset); results round half away from zero and saturate. Scales are powers of two where
// a half-way case is tested, so the hand-computed integers are exact.

#include "BackendTestUtils.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::test {

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();
const double kI32Max = 2147483647, kI32Min = -2147483648.0;

} // namespace

class QuantTest : public BackendTest {
protected:
  void roundTrip(ElemKind k, float scale, int32_t offset);
  /// Quantizes \p x to \p ty.
  NodeValue quantize(NodeValue x, ElemKind k, float scale, int32_t offset) {
    return F()->createQuantize("q", mod().uniqueType(k, x.dims(), scale, offset), x);
  }
  /// Dequantizes \p x to float.
  NodeValue dequantize(NodeValue x) {
    return F()->createDequantize("dq", mod().uniqueType(ElemKind::Float, x.dims()), x);
  }
  /// Rescales \p x to (\p scale, \p offset), keeping its kind.
  NodeValue rescale(NodeValue x, float scale, int32_t offset) {
    return F()->createRescaleQuantized(
        "rq", mod().uniqueType(x.getElementType(), x.dims(), scale, offset), x);
  }
  /// A random grouped, strided, dilated, padded ChannelwiseQuantizedConvolution of odd
  /// sizes with input, filter and result kinds \p xk, \p fk, \p yk, its filter and bias
  /// Constants or (\p runtime) graph inputs, against a reference computed in double.
  void channelwiseConvRandom(bool runtime, ElemKind xk, ElemKind fk, ElemKind yk);
  /// The same for ChannelwiseQuantizedFullyConnected [3, 37] x [37, 19].
  void channelwiseFCRandom(bool runtime, ElemKind xk, ElemKind wk, ElemKind yk);
};

// ------------------------------------------------------------------ Quantize

TEST_P(QuantTest, QuantizeInt8HalfAwayFromZeroAndSaturation) {
  auto *x = input("x", ElemKind::Float, {11},
                  {0, 0.25, -0.25, 0.75, -0.75, 1, 1.2, 100, -100, kNaN, -kInf});
  SaveNode *s = save(quantize(x, ElemKind::Int8Q, 0.5f, -3));
  if (!run())
    return;
  EXPECT_EQ(output(s).getType().scale, 0.5f);
  EXPECT_EQ(output(s).getType().offset, -3);
  // x / 0.5: 0, 0.5, -0.5, 1.5, -1.5, 2, 2.4, 200, -200 -> rounded away from zero, + -3;
  // NaN maps to the offset (real 0).
  expectValues(output(s), {-3, -2, -4, -1, -5, -1, -1, 127, -128, -3, -128}, 0, 0);
}

TEST_P(QuantTest, QuantizeUInt8) {
  auto *x = input("x", ElemKind::Float, {8}, {0, 0.125, -0.125, 31.75, 40, -40, -32, 1});
  SaveNode *s = save(quantize(x, ElemKind::UInt8Q, 0.25f, 128));
  if (!run())
    return;
  // x / 0.25: 0, 0.5, -0.5, 127, 160, -160, -128, 4; + 128, saturated to [0, 255].
  expectValues(output(s), {128, 129, 127, 255, 255, 0, 0, 132}, 0, 0);
}

TEST_P(QuantTest, QuantizeInt32) {
  auto *x = input("x", ElemKind::Float, {6}, {1e10, -1e10, 3.25, -3.25, 1000000.5, kInf});
  SaveNode *s = save(quantize(x, ElemKind::Int32Q, 0.5f, 0));
  if (!run())
    return;
  expectValues(output(s), {kI32Max, kI32Min, 7, -7, 2000001, kI32Max}, 0, 0);
}

TEST_P(QuantTest, QuantizeNonPowerOfTwoScale) {
  auto *x = input("x", ElemKind::Float, {5}, {0, 1, -1, 0.31, 2.5});
  SaveNode *s = save(quantize(x, ElemKind::Int8Q, 0.1f, 10));
  if (!run())
    return;
  // round(x / 0.1) + 10: 10, 20, 0, 13 (3.1), 35.
  expectValues(output(s), {10, 20, 0, 13, 35}, 0, 0);
}

// Random reals against the reference rounding (half away from zero, saturated) with
// scales that are not powers of two; and uint8 NaN/infinities (one test case per kind).
TEST_P(QuantTest, QuantizeRandomAgainstReference) {
  Tensor t(ElemKind::Float, {257});
  PseudoRNG rng(11);
  t.randomize(-6, 6, rng);
  std::vector<double> want;
  for (size_t i = 0; i < t.size(); i++)
    want.push_back(quantizeRef(double(t.getHandle<float>().raw(i)), double(0.037f), 5));
  auto *x = input("x", std::move(t));
  SaveNode *s = save(quantize(x, ElemKind::Int8Q, 0.037f, 5), "s");
  if (!run(0, 0))
    return;
  expectValues(output(s), want, 0, 0);
}

TEST_P(QuantTest, QuantizeUInt8NaNAndInfinities) {
  auto *u = input("u", ElemKind::Float, {4}, {kNaN, kInf, -kInf, 1.5});
  SaveNode *su = save(quantize(u, ElemKind::UInt8Q, 0.5f, 10), "su");
  if (!run(0, 0))
    return;
  expectValues(output(su), {10, 255, 0, 13}, 0, 0);
}

// ------------------------------------------------------------------ Dequantize

TEST_P(QuantTest, DequantizeInt8) {
  auto *x = input("x", qTensor(ElemKind::Int8Q, {4}, 0.5f, -3, {-128, -3, 0, 127}));
  SaveNode *s = save(dequantize(x));
  if (!run())
    return;
  expectValues(output(s), {-62.5, 0, 1.5, 65}, 0, 0);
}

TEST_P(QuantTest, DequantizeUInt8) {
  auto *x = input("x", qTensor(ElemKind::UInt8Q, {3}, 0.25f, 128, {0, 128, 255}));
  SaveNode *s = save(dequantize(x));
  if (!run())
    return;
  expectValues(output(s), {-32, 0, 31.75}, 0, 0);
}

TEST_P(QuantTest, DequantizeInt32) {
  auto *x = input("x", qTensor(ElemKind::Int32Q, {4}, 0.5f, 0, {7, kI32Min, kI32Max, -1}));
  auto *y = input("y", qTensor(ElemKind::Int32Q, {2}, 0.001f, -1000, {0, 1000}));
  SaveNode *s = save(dequantize(x), "x");
  SaveNode *t = save(dequantize(y), "y");
  if (!run())
    return;
  // 0.5 * (2^31 - 1) = 1073741823.5 rounds to the float 1073741824.
  expectValues(output(s), {3.5, -1073741824.0, 1073741824.0, -0.5}, 0, 0);
  expectValues(output(t), {1, 2}, 1e-6);
}

/// Quantize then dequantize 64 random reals in [-10, 10] to kind \p k at \p scale and
/// \p offset: each comes back within half a step.
void QuantTest::roundTrip(ElemKind k, float scale, int32_t offset) {
  Tensor t(ElemKind::Float, {64});
  PseudoRNG rng(5);
  t.randomize(-10, 10, rng);
  std::vector<double> in;
  for (size_t i = 0; i < t.size(); i++)
    in.push_back(t.getAsDouble(i));
  auto *x = input("x", std::move(t));
  SaveNode *s = save(dequantize(quantize(x, k, scale, offset)), "out");
  if (!run())
    return;
  expectValues(output(s), in, scale / 2 + 1e-6, 0);
}

TEST_P(QuantTest, RoundTripWithinHalfAStepInt8) { roundTrip(ElemKind::Int8Q, 10.0f / 127, 0); }
// [-128, 127] * 21 / 255 covers [-10, 10].
TEST_P(QuantTest, RoundTripWithinHalfAStepUInt8) { roundTrip(ElemKind::UInt8Q, 21.0f / 255, 128); }
TEST_P(QuantTest, RoundTripWithinHalfAStepInt32) { roundTrip(ElemKind::Int32Q, 1.0f / 1024, 7); }

TEST_P(QuantTest, RoundTripOfQuantizedValuesIsExact) {
  auto *x = input("x", qTensor(ElemKind::Int8Q, {5}, 0.25f, 1, {-128, -1, 0, 1, 127}));
  SaveNode *s = save(quantize(dequantize(x), ElemKind::Int8Q, 0.25f, 1));
  if (!run())
    return;
  expectValues(output(s), {-128, -1, 0, 1, 127}, 0, 0);
}

// ------------------------------------------------------------------ RescaleQuantized

TEST_P(QuantTest, RescaleInt8) {
  auto *x = input("x", qTensor(ElemKind::Int8Q, {5}, 0.5f, 0, {1, -1, 60, 70, -70}));
  auto *h = input("h", qTensor(ElemKind::Int8Q, {6}, 1.0f, 0, {1, -1, 3, -3, 2, 0}));
  SaveNode *s = save(rescale(x, 0.25f, 5), "s");
  SaveNode *halves = save(rescale(h, 2.0f, 0), "halves");
  if (!run())
    return;
  EXPECT_EQ(output(s).getType().scale, 0.25f);
  // reals 0.5, -0.5, 30, 35, -35 -> / 0.25 + 5, saturated.
  expectValues(output(s), {7, 3, 125, 127, -128}, 0, 0);
  // reals / 2: 0.5, -0.5, 1.5, -1.5, 1, 0, rounded half away from zero.
  expectValues(output(halves), {1, -1, 2, -2, 1, 0}, 0, 0);
}

TEST_P(QuantTest, RescaleUInt8) {
  auto *x = input("x", qTensor(ElemKind::UInt8Q, {5}, 1.0f, 128, {128, 129, 200, 250, 0}));
  SaveNode *s = save(rescale(x, 0.5f, 100));
  if (!run())
    return;
  // reals 0, 1, 72, 122, -128 -> * 2 + 100, saturated to [0, 255].
  expectValues(output(s), {100, 102, 244, 255, 0}, 0, 0);
}

TEST_P(QuantTest, RescaleInt32) {
  auto *x = input("x", qTensor(ElemKind::Int32Q, {4}, 1.0f, 0, {1e9, 2e9, -7, -2e9}));
  SaveNode *s = save(rescale(x, 0.5f, 10));
  if (!run())
    return;
  expectValues(output(s), {2000000010, kI32Max, -4, kI32Min}, 0, 0);
}

TEST_P(QuantTest, RescaleToSameParamsIsIdentity) {
  auto *x = input("x", qTensor(ElemKind::Int8Q, {4}, 0.3f, -7, {-128, -7, 0, 127}));
  SaveNode *s = save(rescale(x, 0.3f, -7));
  if (!run())
    return;
  expectValues(output(s), {-128, -7, 0, 127}, 0, 0);
}

// Every int8 value rescaled to a scale that is not a power of two, against the reference
// computed in double: round(0.3 (q + 7) / 0.17) - 4, saturated.
TEST_P(QuantTest, RescaleEveryInt8ValueAgainstReference) {
  Tensor t(Type(ElemKind::Int8Q, {256}, 0.3f, -7));
  std::vector<double> want;
  for (int v = -128; v < 128; v++) {
    t.getHandle<int8_t>().raw(size_t(v + 128)) = int8_t(v);
    want.push_back(quantizeRef(double(0.3f) * double(v + 7), double(0.17f), -4));
  }
  auto *x = input("x", std::move(t));
  SaveNode *s = save(rescale(x, 0.17f, -4));
  if (!run(0, 0))
    return;
  expectValues(output(s), want, 0, 0);
}

// ------------------------------------------------------------------ pipelines

TEST_P(QuantTest, QuantizedReluAndAddPipeline) {
  auto *x = input("x", ElemKind::Float, {6}, {-3, -0.5, 0, 0.5, 2.25, 40});
  auto *y = input("y", ElemKind::Float, {6}, {1, 1, 1, -1, 0.25, 40});
  NodeValue qx = quantize(x, ElemKind::Int8Q, 0.25f, 0);
  NodeValue qy = quantize(y, ElemKind::Int8Q, 0.5f, 2);
  NodeValue relu = F()->createRelu("relu", mod().uniqueType(ElemKind::Int8Q, {6}, 0.5f, -20), qx);
  NodeValue sum = F()->createAdd("add", mod().uniqueType(ElemKind::Int8Q, {6}, 1.0f, 0), relu, qy);
  SaveNode *s = save(dequantize(sum));
  if (!run())
    return;
  // qx: -12, -2, 0, 2, 9, 127 (40 saturates to 31.75); relu reals 0, 0, 0, 0.5, 2.25, 31.75
  // -> scale 0.5, offset -20: -20, -20, -20, -19, -15 (4.5 -> 5), 44 (63.5 -> 64)
  // -> reals 0, 0, 0, 0.5, 2.5, 32.
  // qy: 4, 4, 4, 0, 3 (0.5 -> 1), 82 -> reals 1, 1, 1, -1, 0.5, 40.
  // sums 1, 1, 1, -0.5, 3, 72 -> scale 1: 1, 1, 1, -1, 3, 72.
  expectValues(output(s), {1, 1, 1, -1, 3, 72}, 0, 0);
}

// ------------------------------------------------------------------ channelwise

namespace {

/// A [n] vector constant of kind \p k.
Constant *vec(Module &m, const std::string &name, ElemKind k, std::vector<double> v) {
  Tensor t(k, {dim_t(v.size())});
  for (size_t i = 0; i < v.size(); i++) {
    if (k == ElemKind::Float)
      t.getHandle<float>().raw(i) = float(v[i]);
    else
      t.getHandle<int32_t>().raw(i) = int32_t(v[i]);
  }
  return m.createConstant(name, std::move(t));
}

} // namespace

// 1x1 convolution, three output channels with their own scales and offsets, an int32 bias in
// accumulator units. Input i8q scale 0.5 offset 1: raw ch0 [3, -1], ch1 [5, 1] -> centred
// [2, -2], [4, 0]. Filter raw o0 [2, 1], o1 [-3, 4], o2 [10, -10] with offsets 0, 2, -5 ->
// [2, 1], [-5, 2], [15, -5]. acc pixel 0: 8, -2, 10; pixel 1: -4, 10, -30; plus bias 4, -8,
// 0: 12, 0 | -10, 2 | 10, -30. real = 0.5 * scale[o] * acc with scales 0.25, 0.5, 1:
// 1.5, 0 | -2.5, 0.5 | 5, -15 -> scale 1 offset 0, halves away from zero: 2, 0, -3, 1, 5, -15.
TEST_P(QuantTest, ChannelwiseConvolutionPerChannelScalesAndOffsets) {
  auto *x = input("x", qTensor(ElemKind::Int8Q, {1, 2, 1, 2}, 0.5f, 1, {3, -1, 5, 1}));
  auto *f = mod().createConstant(
      "f", qTensor(ElemKind::Int8Q, {3, 2, 1, 1}, 1.0f, 0, {2, 1, -3, 4, 10, -10}));
  auto *c = F()->createChannelwiseQuantizedConvolution(
      "cwconv", mod().uniqueType(ElemKind::Int8Q, {1, 3, 1, 2}, 1.0f, 0), x, f,
      vec(mod(), "fs", ElemKind::Float, {0.25, 0.5, 1.0}),
      vec(mod(), "fo", ElemKind::Int32I, {0, 2, -5}), vec(mod(), "b", ElemKind::Int32I, {4, -8, 0}),
      {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, "None", 0.0f, 0.0f);
  SaveNode *s = save(c);
  if (!run(0, 0))
    return;
  expectValues(output(s), {2, 0, -3, 1, 5, -15}, 0, 0);
}

// Grouped (2 groups) 2x2 convolution with top/left padding of uint8 data, a float bias and a
// saturating uint8 result. Input u8q scale 0.25 offset 128: ch0 centred [[4, -4], [0, 8]],
// ch1 [[0, 2], [-2, 0]]. Filter u8q o0 raw [10, 20, 30, 40] offset 20 -> [[-10, 0], [10, 20]],
// scale 0.5; o1 raw [1, 2, 3, 4] offset 0, scale 2. Output pixel (oh, ow) sees input rows
// oh-1..oh and columns ow-1..ow. o0 acc: 80, -40, 0, 120 -> * 0.125 + 0.5: 10.5, -4.5, 0.5,
// 15.5; o1 acc: 0, 8, -8, -2 -> * 0.5 + 120: 120, 124, 116, 119. Result u8q scale 0.5 offset
// 10: 31, 1, 11, 41 | 250, 258 -> 255, 242, 248.
TEST_P(QuantTest, ChannelwiseConvolutionGroupedPaddedUInt8FloatBias) {
  auto *x = input("x", qTensor(ElemKind::UInt8Q, {1, 2, 2, 2}, 0.25f, 128,
                               {132, 124, 128, 136, 128, 130, 126, 128}));
  auto *f = mod().createConstant(
      "f", qTensor(ElemKind::UInt8Q, {2, 1, 2, 2}, 1.0f, 0, {10, 20, 30, 40, 1, 2, 3, 4}));
  auto *c = F()->createChannelwiseQuantizedConvolution(
      "cwconv", mod().uniqueType(ElemKind::UInt8Q, {1, 2, 2, 2}, 0.5f, 10), x, f,
      vec(mod(), "fs", ElemKind::Float, {0.5, 2.0}), vec(mod(), "fo", ElemKind::Int32I, {20, 0}),
      vec(mod(), "b", ElemKind::Float, {0.5, 120}), {2, 2}, {1, 1}, {1, 1, 0, 0}, {1, 1}, 2, "None", 0.0f, 0.0f);
  SaveNode *s = save(c);
  if (!run(0, 0))
    return;
  expectValues(output(s), {31, 1, 11, 41, 250, 255, 242, 248}, 0, 0);
}

namespace {

/// Raw range of 8-bit kind \p k.
double kindLo(ElemKind k) { return k == ElemKind::UInt8Q ? 0 : -128; }
double kindHi(ElemKind k) { return k == ElemKind::UInt8Q ? 255 : 127; }

/// The expected raw result of a channelwise node: the accumulator plus the i32 bias for
/// an i32 result, else the real value \p real quantized to (scale, offset) of kind \p k,
/// halves away from zero, saturated.
double channelwiseRef(ElemKind k, int64_t accWithBias, double real, double scale, int offset) {
  if (k == ElemKind::Int32I)
    return double(accWithBias);
  double q = std::round(real / scale) + offset;
  return std::min(std::max(q, kindLo(k)), kindHi(k));
}

} // namespace

// Random data, strides, dilation, padding and groups against a reference computed from the
// integers in double (power-of-two scales, so every sum is exact).
void QuantTest::channelwiseConvRandom(bool runtime, ElemKind xk, ElemKind fk, ElemKind yk) {
  const dim_t N = 2, C = 6, H = 7, W = 5, O = 9, G = 3, KH = 3, KW = 2;
  const std::vector<dim_t> strides{2, 1}, pads{1, 0, 2, 1}, dil{1, 2};
  const dim_t OH = (H + 3 - 3) / 2 + 1, OW = (W + 1 - 3) / 1 + 1;
  const int xOff = xk == ElemKind::UInt8Q ? 125 : -3;
  Tensor xt = randomTensor(Type(xk, {N, C, H, W}, 0.5f, xOff), kindLo(xk), kindHi(xk), 21);
  Tensor ft = randomTensor(Type(fk, {O, C / G, KH, KW}, 1.0f, 0), kindLo(fk), kindHi(fk), 22);
  const double fb = fk == ElemKind::UInt8Q ? 128 : 0;
  std::vector<double> fs{0.25, 0.125, 1, 0.5, 0.0625, 2, 0.25, 1, 0.5};
  std::vector<double> fo{fb, fb + 3, fb - 7, fb + 1, fb, fb - 2, fb + 5, fb - 1, fb + 9};
  std::vector<double> bias{100, -50, 0, 7, -1000, 3, 12, -9, 2000};
  std::vector<double> xs = toDoubles(xt), fsv = toDoubles(ft);
  std::vector<double> want;
  for (dim_t n = 0; n < N; n++)
    for (dim_t o = 0; o < O; o++)
      for (dim_t oh = 0; oh < OH; oh++)
        for (dim_t ow = 0; ow < OW; ow++) {
          int64_t acc = 0;
          for (dim_t c = 0; c < C / G; c++)
            for (dim_t kh = 0; kh < KH; kh++)
              for (dim_t kw = 0; kw < KW; kw++) {
                long ih = long(oh * strides[0] + kh * dil[0]) - long(pads[0]);
                long iw = long(ow * strides[1] + kw * dil[1]) - long(pads[1]);
                if (ih < 0 || ih >= long(H) || iw < 0 || iw >= long(W))
                  continue;
                dim_t ic = (o / (O / G)) * (C / G) + c;
                acc += int64_t(xs[((n * C + ic) * H + ih) * W + iw] - xOff) *
                       int64_t(fsv[((o * (C / G) + c) * KH + kh) * KW + kw] - fo[o]);
              }
          acc += int64_t(bias[o]);
          want.push_back(channelwiseRef(yk, acc, 0.5 * fs[o] * double(acc), 16.0,
                                        yk == ElemKind::UInt8Q ? 130 : 5));
        }
  auto *x = input("x", std::move(xt));
  Constant *bc = vec(mod(), "b", ElemKind::Int32I, bias);
  NodeValue f = runtime ? NodeValue(input("f", std::move(ft)))
                        : NodeValue(mod().createConstant("f", std::move(ft)));
  NodeValue b = runtime ? NodeValue(input("bi", bc->getPayload().clone())) : NodeValue(bc);
  TypeRef outTy = yk == ElemKind::Int32I
                      ? mod().uniqueType(yk, {N, O, OH, OW})
                      : mod().uniqueType(yk, {N, O, OH, OW}, 16.0f,
                                         yk == ElemKind::UInt8Q ? 130 : 5);
  auto *c = F()->createChannelwiseQuantizedConvolution(
      "cwconv", outTy, x, f, vec(mod(), "fs", ElemKind::Float, fs),
      vec(mod(), "fo", ElemKind::Int32I, fo), b, {KH, KW}, strides, pads, dil, G, "None", 0.0f, 0.0f);
  SaveNode *s = save(c);
  if (!run(0, 0))
    return;
  expectValues(output(s), want, 0, 0);
}

TEST_P(QuantTest, ChannelwiseConvolutionRandomAgainstRealReference) {
  channelwiseConvRandom(false, ElemKind::Int8Q, ElemKind::Int8Q, ElemKind::Int8Q);
}

// The filter and bias as graph inputs (ONNX QLinearConv and ConvInteger give the weights
// so): the CPU packs them per run.
TEST_P(QuantTest, ChannelwiseConvolutionRuntimeFilterInt8) {
  channelwiseConvRandom(true, ElemKind::Int8Q, ElemKind::Int8Q, ElemKind::Int8Q);
}
TEST_P(QuantTest, ChannelwiseConvolutionRuntimeFilterUInt8) {
  channelwiseConvRandom(true, ElemKind::UInt8Q, ElemKind::UInt8Q, ElemKind::UInt8Q);
}
TEST_P(QuantTest, ChannelwiseConvolutionRuntimeFilterInt32Result) {
  channelwiseConvRandom(true, ElemKind::UInt8Q, ElemKind::UInt8Q, ElemKind::Int32I);
}
TEST_P(QuantTest, ChannelwiseConvolutionUInt8Int32ResultConstantFilter) {
  channelwiseConvRandom(false, ElemKind::UInt8Q, ElemKind::Int8Q, ElemKind::Int32I);
}

void QuantTest::channelwiseFCRandom(bool runtime, ElemKind xk, ElemKind wk, ElemKind yk) {
  const dim_t N = 3, K = 37, M = 19;
  const int xOff = xk == ElemKind::UInt8Q ? 131 : 6;
  Tensor xt = randomTensor(Type(xk, {N, K}, 0.25f, xOff), kindLo(xk), kindHi(xk), 31);
  Tensor wt = randomTensor(Type(wk, {K, M}, 1.0f, 0), kindLo(wk), kindHi(wk), 32);
  const double wb = wk == ElemKind::UInt8Q ? 128 : 0;
  std::vector<double> ws, wo, bias;
  for (dim_t m = 0; m < M; m++) {
    ws.push_back(std::ldexp(1.0, int(m % 5) - 3));
    wo.push_back(wb + double(int(m % 7) - 3));
    bias.push_back(double(int(m * 37 % 101) - 50));
  }
  std::vector<double> xs = toDoubles(xt), wv = toDoubles(wt), want;
  for (dim_t n = 0; n < N; n++)
    for (dim_t m = 0; m < M; m++) {
      int64_t acc = int64_t(bias[m]);
      for (dim_t k = 0; k < K; k++)
        acc += int64_t(xs[n * K + k] - xOff) * int64_t(wv[k * M + m] - wo[m]);
      want.push_back(channelwiseRef(yk, acc, 0.25 * ws[m] * double(acc), 8.0,
                                    yk == ElemKind::UInt8Q ? 127 : -2));
    }
  auto *x = input("x", std::move(xt));
  Constant *bc = vec(mod(), "b", ElemKind::Int32I, bias);
  NodeValue w = runtime ? NodeValue(input("w", std::move(wt)))
                        : NodeValue(mod().createConstant("w", std::move(wt)));
  NodeValue b = runtime ? NodeValue(input("bi", bc->getPayload().clone())) : NodeValue(bc);
  TypeRef outTy = yk == ElemKind::Int32I
                      ? mod().uniqueType(yk, {N, M})
                      : mod().uniqueType(yk, {N, M}, 8.0f, yk == ElemKind::UInt8Q ? 127 : -2);
  auto *fc = F()->createChannelwiseQuantizedFullyConnected(
      "cwfc", outTy, x, w, vec(mod(), "ws", ElemKind::Float, ws),
      vec(mod(), "wo", ElemKind::Int32I, wo), b, "None", 0.0f, 0.0f);
  SaveNode *s = save(fc);
  if (!run(0, 0))
    return;
  expectValues(output(s), want, 0, 0);
}

// ONNX QLinearMatMul and MatMulInteger give the weights as graph inputs: the CPU packs
// them per run.
TEST_P(QuantTest, ChannelwiseFullyConnectedRuntimeWeightsInt8) {
  channelwiseFCRandom(true, ElemKind::Int8Q, ElemKind::Int8Q, ElemKind::Int8Q);
}
TEST_P(QuantTest, ChannelwiseFullyConnectedRuntimeWeightsUInt8) {
  channelwiseFCRandom(true, ElemKind::UInt8Q, ElemKind::UInt8Q, ElemKind::UInt8Q);
}
TEST_P(QuantTest, ChannelwiseFullyConnectedRuntimeWeightsInt32Result) {
  channelwiseFCRandom(true, ElemKind::UInt8Q, ElemKind::UInt8Q, ElemKind::Int32I);
}
TEST_P(QuantTest, ChannelwiseFullyConnectedMixedKindsConstantWeights) {
  channelwiseFCRandom(false, ElemKind::Int8Q, ElemKind::UInt8Q, ElemKind::UInt8Q);
}

// Input i8q [2, 3] scale 0.5 offset 0: [[1, 2, 3], [-1, 0, 4]]. Weights i8q raw
// [[1, -1], [2, 0], [3, 1]], column offsets 0 and -1 -> columns [1, 2, 3] and [0, 1, 2],
// scales 1 and 0.25. acc [[14, 8], [11, 8]] + int32 bias [1, -2] -> [[15, 6], [12, 6]];
// real = 0.5 * scale * acc: [[7.5, 0.75], [6, 0.75]] -> scale 1 offset 0: [[8, 1], [6, 1]].
// With uint8 input (offset 10, the same reals) and a float bias [0.5, -0.5] to uint8 scale
// 0.25 offset 3: reals [[7.5, 0.5], [6, 0.5]] (acc without bias [14, 8], [11, 8] -> 7, 1;
// 5.5, 1 plus bias) -> [[33, 5], [27, 5]].
TEST_P(QuantTest, ChannelwiseFullyConnected) {
  auto *x = input("x", qTensor(ElemKind::Int8Q, {2, 3}, 0.5f, 0, {1, 2, 3, -1, 0, 4}));
  auto *xu = input("xu", qTensor(ElemKind::UInt8Q, {2, 3}, 0.5f, 10, {11, 12, 13, 9, 10, 14}));
  auto *w =
      mod().createConstant("w", qTensor(ElemKind::Int8Q, {3, 2}, 1.0f, 0, {1, -1, 2, 0, 3, 1}));
  Constant *ws = vec(mod(), "ws", ElemKind::Float, {1.0, 0.25});
  Constant *wo = vec(mod(), "wo", ElemKind::Int32I, {0, -1});
  auto *fc = F()->createChannelwiseQuantizedFullyConnected(
      "cwfc", mod().uniqueType(ElemKind::Int8Q, {2, 2}, 1.0f, 0), x, w, ws, wo,
      vec(mod(), "b", ElemKind::Int32I, {1, -2}), "None", 0.0f, 0.0f);
  auto *fcu = F()->createChannelwiseQuantizedFullyConnected(
      "cwfcu", mod().uniqueType(ElemKind::UInt8Q, {2, 2}, 0.25f, 3), xu, w, ws, wo,
      vec(mod(), "bf", ElemKind::Float, {0.5, -0.5}), "None", 0.0f, 0.0f);
  SaveNode *s = save(fc, "s");
  SaveNode *su = save(fcu, "su");
  if (!run(0, 0))
    return;
  expectValues(output(s), {8, 1, 6, 1}, 0, 0);
  expectValues(output(su), {33, 5, 27, 5}, 0, 0);
}

// An i32 result is the exact accumulator (ONNX ConvInteger and MatMulInteger): the conv is
// ONNX's ConvInteger example, uint8 x = 2..10 with zero point 1 (the input type's offset),
// a 2x2 filter of ones: window sums of 1..9 = 12, 16, 24, 28; with the filter's per-channel
// offset 1 for a second channel of twos (2 - 1 = 1) the same sums, and an i32 bias of -5.
// The product is ONNX's MatMulInteger example: A - 12 times B (zero point 0).
TEST_P(QuantTest, ChannelwiseInt32ResultIsTheAccumulator) {
  auto *x = input("x", qTensor(ElemKind::UInt8Q, {1, 1, 3, 3}, 1.0f, 1,
                               {2, 3, 4, 5, 6, 7, 8, 9, 10}));
  auto *f = mod().createConstant(
      "f", qTensor(ElemKind::UInt8Q, {2, 1, 2, 2}, 1.0f, 0, {1, 1, 1, 1, 2, 2, 2, 2}));
  auto *c = F()->createChannelwiseQuantizedConvolution(
      "conv", mod().uniqueType(ElemKind::Int32I, {1, 2, 2, 2}), x, f,
      vec(mod(), "fs", ElemKind::Float, {1, 1}), vec(mod(), "fo", ElemKind::Int32I, {0, 1}),
      vec(mod(), "b", ElemKind::Int32I, {0, -5}), {2, 2}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, "None", 0.0f, 0.0f);
  auto *a = input("a", qTensor(ElemKind::UInt8Q, {4, 3}, 1.0f, 12,
                               {11, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0}));
  auto *b = mod().createConstant("bm", qTensor(ElemKind::UInt8Q, {3, 2}, 1.0f, 0,
                                               {1, 4, 2, 5, 3, 6}));
  auto *mm = F()->createChannelwiseQuantizedFullyConnected(
      "mm", mod().uniqueType(ElemKind::Int32I, {4, 2}), a, b,
      vec(mod(), "ms", ElemKind::Float, {1, 1}), vec(mod(), "mo", ElemKind::Int32I, {0, 0}),
      vec(mod(), "mb", ElemKind::Int32I, {0, 0}), "None", 0.0f, 0.0f);
  SaveNode *sc = save(c, "sc");
  SaveNode *sm = save(mm, "sm");
  if (!run(0, 0))
    return;
  expectValues(output(sc), {12, 16, 24, 28, 7, 11, 19, 23}, 0, 0);
  expectValues(output(sm), {-38, -83, -44, -98, -50, -113, -56, -128}, 0, 0);
}

// ------------------------------------------------------------------ fused activations

// A Relu or Clip fused into a quantized layer acts on the real value before its one
// rounding. The layer of ChannelwiseConvolutionPerChannelScalesAndOffsets (reals 1.5, 0 |
// -2.5, 0.5 | 5, -15): with Clip(-2, 4.6) to scale 1 offset 0 the reals are 1.5, 0, -2,
// 0.5, 4.6, -2 -> 2, 0, -2, 1, 5, -2 (the bound 4.6 itself rounds to 5); with a Relu to
// scale 0.5 offset -3 they are 1.5, 0, 0, 0.5, 5, 0 -> 3, 0, 0, 1, 10, 0 less 3.
TEST_P(QuantTest, ChannelwiseConvolutionFusedClipAndRelu) {
  auto *x = input("x", qTensor(ElemKind::Int8Q, {1, 2, 1, 2}, 0.5f, 1, {3, -1, 5, 1}));
  auto *f = mod().createConstant(
      "f", qTensor(ElemKind::Int8Q, {3, 2, 1, 1}, 1.0f, 0, {2, 1, -3, 4, 10, -10}));
  Constant *fs = vec(mod(), "fs", ElemKind::Float, {0.25, 0.5, 1.0});
  Constant *fo = vec(mod(), "fo", ElemKind::Int32I, {0, 2, -5});
  Constant *b = vec(mod(), "b", ElemKind::Int32I, {4, -8, 0});
  auto *clip = F()->createChannelwiseQuantizedConvolution(
      "clip", mod().uniqueType(ElemKind::Int8Q, {1, 3, 1, 2}, 1.0f, 0), x, f, fs, fo, b, {1, 1},
      {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, "Clip", -2.0f, 4.6f);
  auto *relu = F()->createChannelwiseQuantizedConvolution(
      "relu", mod().uniqueType(ElemKind::Int8Q, {1, 3, 1, 2}, 0.5f, -3), x, f, fs, fo, b, {1, 1},
      {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, "Relu", 0.0f, 0.0f);
  SaveNode *sc = save(clip, "sc");
  SaveNode *sr = save(relu, "sr");
  if (!run(0, 0))
    return;
  expectValues(output(sc), {2, 0, -2, 1, 5, -2}, 0, 0);
  expectValues(output(sr), {0, -3, -3, -2, 7, -3}, 0, 0);
}

// The layer of ChannelwiseFullyConnected (reals 7.5, 0.75 | 6, 0.75) with Clip(1, 6.6) to
// scale 1 offset 0: 6.6, 1, 6, 1 -> 7, 1, 6, 1.
TEST_P(QuantTest, ChannelwiseFullyConnectedFusedClip) {
  auto *x = input("x", qTensor(ElemKind::Int8Q, {2, 3}, 0.5f, 0, {1, 2, 3, -1, 0, 4}));
  auto *w =
      mod().createConstant("w", qTensor(ElemKind::Int8Q, {3, 2}, 1.0f, 0, {1, -1, 2, 0, 3, 1}));
  auto *fc = F()->createChannelwiseQuantizedFullyConnected(
      "cwfc", mod().uniqueType(ElemKind::Int8Q, {2, 2}, 1.0f, 0), x, w,
      vec(mod(), "ws", ElemKind::Float, {1.0, 0.25}), vec(mod(), "wo", ElemKind::Int32I, {0, -1}),
      vec(mod(), "b", ElemKind::Int32I, {1, -2}), "Clip", 1.0f, 6.6f);
  SaveNode *s = save(fc);
  if (!run(0, 0))
    return;
  expectValues(output(s), {7, 1, 6, 1}, 0, 0);
}

// Per-tensor int8 layers with a fused activation (FusedConvolution / FusedFullyConnected on
// i8q). Input raw [2, -4, 6] scale 0.5; convolution filter [4, -2] scale 0.25, bias raw
// [1, -2] scale 0.125: reals o0 1.125, -1.875, 3.125; o1 -0.75, 0.75, -1.75. Clip(-1, 2) to
// scale 0.25 offset 2: 1.125, -1, 2 | -0.75, 0.75, -1 -> 4.5 (-> 5), -4, 8 | -3, 3, -4,
// plus 2. The FC with weights [[4, -2], [1, 1], [-1, 3]] scale 0.25, bias raw [1, 3] scale
// 0.125: acc -2, 10 -> reals -0.125, 1.625; Relu to scale 0.25 offset -5: 0, 6.5 (-> 7)
// -> -5, 2.
TEST_P(QuantTest, PerTensorFusedClipAndRelu) {
  auto *x = input("x", qTensor(ElemKind::Int8Q, {1, 1, 1, 3}, 0.5f, 0, {2, -4, 6}));
  auto *f = mod().createConstant("f", qTensor(ElemKind::Int8Q, {2, 1, 1, 1}, 0.25f, 0, {4, -2}));
  auto *b = mod().createConstant("b", qTensor(ElemKind::Int32Q, {2}, 0.125f, 0, {1, -2}));
  auto *conv = F()->createFusedConvolution(
      "conv", mod().uniqueType(ElemKind::Int8Q, {1, 2, 1, 3}, 0.25f, 2), x, f, b, {}, {1, 1},
      {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, "Clip", -1.0f, 2.0f);
  auto *xf = input("xf", qTensor(ElemKind::Int8Q, {1, 3}, 0.5f, 0, {2, -4, 6}));
  auto *w = mod().createConstant(
      "w", qTensor(ElemKind::Int8Q, {3, 2}, 0.25f, 0, {4, -2, 1, 1, -1, 3}));
  auto *fb = mod().createConstant("fb", qTensor(ElemKind::Int32Q, {2}, 0.125f, 0, {1, 3}));
  auto *fc = F()->createFusedFullyConnected(
      "fc", mod().uniqueType(ElemKind::Int8Q, {1, 2}, 0.25f, -5), xf, w, fb, {}, "Relu", 0.0f,
      0.0f);
  SaveNode *sc = save(conv, "sc");
  SaveNode *sf = save(fc, "sf");
  if (!run(0, 0))
    return;
  expectValues(output(sc), {7, -2, 10, -1, 5, -2}, 0, 0);
  expectValues(output(sf), {-5, 2}, 0, 0);
}

KILN_INSTANTIATE_BACKEND_TESTS(QuantTest);

} // namespace kiln::test
