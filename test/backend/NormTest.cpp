// Operator tests of BatchNormalization, LayerNormalization, SoftMax and LogSoftMax on every
// backend. Expectations are hand-computed (arithmetic in the comments) or come from the
// direct double-precision formulas below, never from the Interpreter.

#include "BackendTestUtils.h"

#include <cmath>

namespace kiln::test {
namespace {

constexpr ElemKind F32 = ElemKind::Float;
constexpr ElemKind F16 = ElemKind::Float16;
constexpr ElemKind BF16 = ElemKind::BFloat16;

/// Relative tolerance for a result of kind \p k against an exact reference.
double rtolFor(ElemKind k) { return k == F16 ? 1e-3 : k == BF16 ? 8e-3 : 1e-5; }

/// Splits \p dims at \p axis into outer (before), size, inner (after) counts.
void splitAt(const Dims &dims, size_t axis, size_t &outer, size_t &size, size_t &inner) {
  outer = size = inner = 1;
  for (size_t d = 0; d < dims.size(); d++)
    (d < axis ? outer : d == axis ? size : inner) *= dims[d];
}

/// SoftMax (or LogSoftMax) along \p axis, straight from the definition in double.
std::vector<double> refSoftMax(const std::vector<double> &x, const Dims &dims, size_t axis,
                               bool log) {
  size_t outer, size, inner;
  splitAt(dims, axis, outer, size, inner);
  std::vector<double> y(x.size());
  for (size_t o = 0; o < outer; o++)
    for (size_t i = 0; i < inner; i++) {
      auto at = [&](size_t a) { return (o * size + a) * inner + i; };
      double max = x[at(0)], sum = 0;
      for (size_t a = 0; a < size; a++)
        max = std::max(max, x[at(a)]);
      for (size_t a = 0; a < size; a++)
        sum += std::exp(x[at(a)] - max);
      for (size_t a = 0; a < size; a++)
        y[at(a)] = log ? x[at(a)] - max - std::log(sum) : std::exp(x[at(a)] - max) / sum;
    }
  return y;
}

class NormTest : public BackendTest {
protected:
  /// BatchNormalization with channel axis \p axis on random data of kind \p k; variances
  /// are positive, means and scales arbitrary.
  void checkBatchNorm(ElemKind k, Dims dims, size_t axis, uint64_t seed) {
    const dim_t c = dims[axis];
    Tensor x = randomTensor(Type(k, dims), -3, 3, seed);
    Tensor scale = randomTensor(Type(k, {c}), -2, 2, seed + 1);
    Tensor bias = randomTensor(Type(k, {c}), -1, 1, seed + 2);
    Tensor mean = randomTensor(Type(k, {c}), -1, 1, seed + 3);
    Tensor var = randomTensor(Type(k, {c}), 0.1f, 4, seed + 4);
    const float eps = 1e-3f;
    std::vector<double> xs = toDoubles(x), s = toDoubles(scale), b = toDoubles(bias);
    std::vector<double> mu = toDoubles(mean), v = toDoubles(var), e(xs.size());
    size_t outer, size, inner;
    splitAt(dims, axis, outer, size, inner);
    for (size_t i = 0; i < xs.size(); i++) {
      size_t ch = (i / inner) % size;
      e[i] = (xs[i] - mu[ch]) / std::sqrt(v[ch] + double(eps)) * s[ch] + b[ch];
    }
    auto *bn = F()->createBatchNormalization(
        "bn", input("x", std::move(x)), mod().createConstant("scale", std::move(scale)),
        mod().createConstant("bias", std::move(bias)),
        mod().createConstant("mean", std::move(mean)), mod().createConstant("var", std::move(var)),
        eps, int64_t(axis));
    auto *sv = save(bn);
    if (!run(1e-3f, 1e-3f))
      return;
    expectValues(output(sv), e, 1e-4, rtolFor(k));
  }

  /// LayerNormalization over dims axis.. on random data of kind \p k; \p axisArg is passed
  /// to the builder (it may be negative).
  void checkLayerNorm(ElemKind k, Dims dims, int64_t axisArg, uint64_t seed) {
    const size_t axis = axisArg < 0 ? size_t(axisArg + int64_t(dims.size())) : size_t(axisArg);
    std::vector<dim_t> pd(dims.begin() + axis, dims.end());
    Tensor x = randomTensor(Type(k, dims), -3, 3, seed);
    Tensor scale = randomTensor(Type(k, Dims(pd)), -2, 2, seed + 1);
    Tensor bias = randomTensor(Type(k, Dims(pd)), -1, 1, seed + 2);
    const float eps = 1e-4f;
    std::vector<double> xs = toDoubles(x), s = toDoubles(scale), b = toDoubles(bias);
    std::vector<double> e(xs.size());
    const size_t cols = s.size();
    for (size_t r = 0; r < xs.size() / cols; r++) {
      double mean = 0, var = 0;
      for (size_t j = 0; j < cols; j++)
        mean += xs[r * cols + j] / cols;
      for (size_t j = 0; j < cols; j++)
        var += (xs[r * cols + j] - mean) * (xs[r * cols + j] - mean) / cols;
      for (size_t j = 0; j < cols; j++)
        e[r * cols + j] = (xs[r * cols + j] - mean) / std::sqrt(var + double(eps)) * s[j] + b[j];
    }
    auto *ln = F()->createLayerNormalization(
        "ln", input("x", std::move(x)), mod().createConstant("scale", std::move(scale)),
        mod().createConstant("bias", std::move(bias)), axisArg, eps);
    auto *sv = save(ln);
    if (!run(1e-3f, 1e-3f))
      return;
    expectValues(output(sv), e, 1e-4, rtolFor(k));
  }

  /// SoftMax or LogSoftMax along \p axisArg on random data of kind \p k in [lo, hi].
  void checkSoftMax(ElemKind k, Dims dims, int64_t axisArg, bool log, float lo, float hi,
                    uint64_t seed) {
    const size_t axis = axisArg < 0 ? size_t(axisArg + int64_t(dims.size())) : size_t(axisArg);
    Tensor x = randomTensor(Type(k, dims), lo, hi, seed);
    std::vector<double> e = refSoftMax(toDoubles(x), dims, axis, log);
    auto *in = input("x", std::move(x));
    auto *s = save(log ? NodeValue(F()->createLogSoftMax("sm", in, axisArg))
                       : NodeValue(F()->createSoftMax("sm", in, axisArg)));
    if (!run(1e-3f, 1e-3f))
      return;
    expectValues(output(s), e, 1e-5, rtolFor(k));
  }
};

// ------------------------------------------------------------------ BatchNormalization

// Channel axis 1 of [1, 2, 2]; var + eps = [3.9 + 0.1, 0.15 + 0.1] = [4, 0.25], std [2, 0.5].
// ch0 x [1 5], mean 1, scale 3, bias 1: (0/2)*3 + 1 = 1, (4/2)*3 + 1 = 7.
// ch1 x [-2 0], mean -2, scale 0.5, bias -1: 0 - 1 = -1, (2/0.5)*0.5 - 1 = 1.
TEST_P(NormTest, BatchNormHand) {
  auto *bn = F()->createBatchNormalization(
      "bn", input("x", F32, {1, 2, 2}, {1, 5, -2, 0}), constant("s", F32, {2}, {3, 0.5}),
      constant("b", F32, {2}, {1, -1}), constant("m", F32, {2}, {1, -2}),
      constant("v", F32, {2}, {3.9, 0.15}), 0.1f, 1);
  auto *s = save(bn);
  if (!run())
    return;
  expectValues(output(s), {1, 7, -1, 1});
}

TEST_P(NormTest, BatchNormNCHW) { checkBatchNorm(F32, {2, 3, 4, 5}, 1, 1); }
TEST_P(NormTest, BatchNormChannelsLast) { checkBatchNorm(F32, {2, 4, 3}, 2, 2); }
TEST_P(NormTest, BatchNormFloat16) { checkBatchNorm(F16, {2, 3, 4, 5}, 1, 3); }
TEST_P(NormTest, BatchNormBFloat16) { checkBatchNorm(BF16, {3, 4, 2}, 1, 4); }

// ------------------------------------------------------------------ LayerNormalization

// Over the last dim with eps 3: row [1 3] has mean 2, var 1, so [-1 1] / sqrt(4) =
// [-0.5 0.5], times scale [2 3] plus bias [1 1] = [0 2.5]; row [5 5] has var 0: [1 1].
TEST_P(NormTest, LayerNormLastDimHand) {
  auto *ln = F()->createLayerNormalization("ln", input("x", F32, {2, 2}, {1, 3, 5, 5}),
                                           constant("s", F32, {2}, {2, 3}),
                                           constant("b", F32, {2}, {1, 1}), -1, 3.0f);
  auto *s = save(ln);
  if (!run())
    return;
  expectValues(output(s), {0, 2.5, 1, 1});
}

// Over the last two dims of [1, 2, 2] = [1 2 3 4]: mean 2.5, var (2.25+0.25+0.25+2.25)/4 =
// 1.25, + eps 2.75 = 4, std 2: [-0.75 -0.25 0.25 0.75] * 4 + [0 1 2 3] = [-3 0 3 6].
TEST_P(NormTest, LayerNormLastTwoDimsHand) {
  auto *ln = F()->createLayerNormalization("ln", input("x", F32, {1, 2, 2}, {1, 2, 3, 4}),
                                           constant("s", F32, {2, 2}, {4, 4, 4, 4}),
                                           constant("b", F32, {2, 2}, {0, 1, 2, 3}), 1, 2.75f);
  auto *s = save(ln);
  if (!run())
    return;
  expectValues(output(s), {-3, 0, 3, 6});
}

TEST_P(NormTest, LayerNormLastDim) { checkLayerNorm(F32, {3, 4, 16}, -1, 11); }
TEST_P(NormTest, LayerNormLastTwoDims) { checkLayerNorm(F32, {3, 4, 6}, 1, 12); }
// Rows that leave vector tails (197 = 12 x 16 + 5; 37; fewer than 16) and one of 771.
TEST_P(NormTest, LayerNormOddRows) { checkLayerNorm(F32, {3, 5, 197}, -1, 15); }
TEST_P(NormTest, LayerNormShortRows) { checkLayerNorm(F32, {7, 5}, -1, 16); }
TEST_P(NormTest, LayerNormLongRows) { checkLayerNorm(F32, {2, 771}, -1, 17); }
TEST_P(NormTest, LayerNormOddTwoDims) { checkLayerNorm(F32, {3, 7, 9}, 1, 18); }
TEST_P(NormTest, LayerNormFloat16) { checkLayerNorm(F16, {4, 32}, -1, 13); }
TEST_P(NormTest, LayerNormBFloat16) { checkLayerNorm(BF16, {2, 3, 8}, -2, 14); }

// ------------------------------------------------------------------ SoftMax

// [1000 1002] stays finite only when the max is subtracted first:
// softmax = [1, e^2] / (1 + e^2) = [0.1192029220, 0.8807970780];
// logsoftmax = [0, 2] - log(1 + e^2) = [-2.1269280110, -0.1269280110].
// Row [-1000 0]: [0, 1] and [-1000, 0].
TEST_P(NormTest, SoftMaxLargeValues) {
  auto *x = input("x", F32, {2, 2}, {1000, 1002, -1000, 0});
  auto *s1 = save(F()->createSoftMax("sm", x, 1), "sm");
  auto *s2 = save(F()->createLogSoftMax("lsm", x, -1), "lsm");
  if (!run())
    return;
  expectValues(output(s1), {0.1192029220, 0.8807970780, 0, 1}, 1e-6, 1e-6);
  expectValues(output(s2), {-2.1269280110, -0.1269280110, -1000, 0}, 1e-4, 1e-6);
}

// Along axis 0 of [[0 0] [ln 3, 0]]: column 0 -> [1/4 3/4], column 1 -> [1/2 1/2].
TEST_P(NormTest, SoftMaxAxis0Hand) {
  auto *x = input("x", F32, {2, 2}, {0, 0, std::log(3.0), 0});
  auto *s = save(F()->createSoftMax("sm", x, 0));
  if (!run())
    return;
  expectValues(output(s), {0.25, 0.5, 0.75, 0.5}, 1e-6, 1e-6);
}

TEST_P(NormTest, SoftMaxAxis0) { checkSoftMax(F32, {5, 3, 4}, 0, false, -5, 5, 21); }
TEST_P(NormTest, SoftMaxAxis1) { checkSoftMax(F32, {2, 7, 3}, 1, false, -5, 5, 22); }
TEST_P(NormTest, SoftMaxLastAxis) { checkSoftMax(F32, {3, 10}, -1, false, -5, 5, 23); }
TEST_P(NormTest, SoftMaxLargeRandom) { checkSoftMax(F32, {4, 9}, -1, false, 500, 520, 24); }
// Rows and columns that leave vector tails: a last axis of 197, a middle axis with 37
// columns (two blocks of 16 and 5 single columns), and LogSoftMax the same.
TEST_P(NormTest, SoftMaxOddRows) { checkSoftMax(F32, {3, 4, 197}, -1, false, -8, 8, 27); }
TEST_P(NormTest, SoftMaxOddColumns) { checkSoftMax(F32, {2, 9, 37}, 1, false, -8, 8, 28); }
TEST_P(NormTest, SoftMaxSixteenColumns) { checkSoftMax(F32, {5, 32}, 0, false, -8, 8, 29); }
TEST_P(NormTest, LogSoftMaxOddRows) { checkSoftMax(F32, {2, 53}, -1, true, -8, 8, 34); }
TEST_P(NormTest, LogSoftMaxOddColumns) { checkSoftMax(F32, {3, 6, 21}, 1, true, -8, 8, 35); }
TEST_P(NormTest, SoftMaxFloat16) { checkSoftMax(F16, {3, 12}, -1, false, -4, 4, 25); }
TEST_P(NormTest, SoftMaxBFloat16) { checkSoftMax(BF16, {4, 3, 5}, 1, false, -4, 4, 26); }
TEST_P(NormTest, LogSoftMaxAxis0) { checkSoftMax(F32, {6, 5}, 0, true, -5, 5, 31); }
TEST_P(NormTest, LogSoftMaxAxis1) { checkSoftMax(F32, {2, 7, 3}, 1, true, -5, 5, 32); }
TEST_P(NormTest, LogSoftMaxLastAxis) { checkSoftMax(F32, {3, 10}, -1, true, -5, 5, 33); }
TEST_P(NormTest, LogSoftMaxFloat16) { checkSoftMax(F16, {3, 12}, -1, true, -4, 4, 34); }
TEST_P(NormTest, LogSoftMaxBFloat16) { checkSoftMax(BF16, {4, 3, 5}, 0, true, -4, 4, 35); }

KILN_INSTANTIATE_BACKEND_TESTS(NormTest);

} // namespace
} // namespace kiln::test
