// Operator tests of the quantization family: Quantize, Dequantize and RescaleQuantized on
// int8, uint8 and int32 quantized kinds. Quantized values follow real = scale * (q -
// offset); results round half away from zero and saturate. Scales are powers of two where
// a half-way case is tested, so the hand-computed integers are exact.

#include "BackendTestUtils.h"

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
// scales that are not powers of two; and uint8 NaN/infinities.
TEST_P(QuantTest, QuantizeRandomAgainstReference) {
  Tensor t(ElemKind::Float, {257});
  PseudoRNG rng(11);
  t.randomize(-6, 6, rng);
  std::vector<double> want;
  for (size_t i = 0; i < t.size(); i++)
    want.push_back(quantizeRef(double(t.getHandle<float>().raw(i)), double(0.037f), 5));
  auto *x = input("x", std::move(t));
  auto *u = input("u", ElemKind::Float, {4}, {kNaN, kInf, -kInf, 1.5});
  SaveNode *s = save(quantize(x, ElemKind::Int8Q, 0.037f, 5), "s");
  SaveNode *su = save(quantize(u, ElemKind::UInt8Q, 0.5f, 10), "su");
  if (!run(0, 0))
    return;
  expectValues(output(s), want, 0, 0);
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

TEST_P(QuantTest, RoundTripWithinHalfAStep) {
  const float scale = 10.0f / 127;
  Tensor t(ElemKind::Float, {64});
  PseudoRNG rng(5);
  t.randomize(-10, 10, rng);
  std::vector<double> in;
  for (size_t i = 0; i < t.size(); i++)
    in.push_back(t.getAsDouble(i));
  auto *x = input("x", std::move(t));
  SaveNode *i8 = save(dequantize(quantize(x, ElemKind::Int8Q, scale, 0)), "i8");
  const float u8Scale = 21.0f / 255; // [-128, 127] * u8Scale covers [-10, 10]
  SaveNode *u8 = save(dequantize(quantize(x, ElemKind::UInt8Q, u8Scale, 128)), "u8");
  SaveNode *i32 = save(dequantize(quantize(x, ElemKind::Int32Q, 1.0f / 1024, 7)), "i32");
  if (!run())
    return;
  expectValues(output(i8), in, scale / 2 + 1e-6, 0);
  expectValues(output(u8), in, u8Scale / 2 + 1e-6, 0);
  expectValues(output(i32), in, 0.5 / 1024 + 1e-6, 0);
}

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

KILN_INSTANTIATE_BACKEND_TESTS(QuantTest);

} // namespace kiln::test
