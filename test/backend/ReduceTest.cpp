// Operator tests of ReduceSum/Mean/Max/Min/Prod, ArgMax, ArgMin and TopK on every backend.
// Expectations are hand-computed (arithmetic in the comments) or come from the direct
// references below, never from the Interpreter.

#include "BackendTestUtils.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>

namespace kiln::test {
namespace {

constexpr ElemKind F32 = ElemKind::Float;
constexpr ElemKind F16 = ElemKind::Float16;
constexpr ElemKind BF16 = ElemKind::BFloat16;
constexpr ElemKind I8Q = ElemKind::Int8Q;
constexpr ElemKind I32 = ElemKind::Int32I;
constexpr ElemKind I64 = ElemKind::Int64I;

/// A tensor of kind \p k holding \p values; Int8Q uses scale 0.5 and offset -3, so raw
/// values keep their order.
Tensor makeTensor(ElemKind k, Dims dims, std::initializer_list<double> values) {
  return test::makeTensor(k == I8Q ? Type(k, dims, 0.5f, -3) : Type(k, dims), values);
}

/// Reduces \p x of shape \p dims over \p axes with \p op by grouping every element under
/// its coordinates with the reduced ones removed; the map's order is the output's
/// row-major order. Returns one value per group, and the group size in \p count.
std::vector<double> refReduce(const std::vector<double> &x, const Dims &dims,
                              const std::vector<size_t> &axes,
                              const std::function<double(double, double)> &op, size_t &count) {
  std::map<std::vector<dim_t>, std::vector<double>> groups;
  for (size_t flat = 0; flat < x.size(); flat++) {
    std::vector<dim_t> key;
    size_t rest = flat;
    std::vector<dim_t> coords(dims.size());
    for (size_t d = dims.size(); d-- > 0;) {
      coords[d] = rest % dims[d];
      rest /= dims[d];
    }
    for (size_t d = 0; d < dims.size(); d++)
      if (std::find(axes.begin(), axes.end(), d) == axes.end())
        key.push_back(coords[d]);
    groups[key].push_back(x[flat]);
  }
  std::vector<double> out;
  for (auto &g : groups) {
    double acc = g.second[0];
    for (size_t i = 1; i < g.second.size(); i++)
      acc = op(acc, g.second[i]);
    out.push_back(acc);
    count = g.second.size();
  }
  return out;
}

double rtolFor(ElemKind k) { return k == F16 ? 1e-3 : k == BF16 ? 8e-3 : 1e-5; }

class ReduceTest : public BackendTest {
protected:
  enum Op { Sum, Mean, Max, Min, Prod };

  NodeValue build(Op op, NodeValue in, const std::vector<int64_t> &axes, bool keep) {
    switch (op) {
    case Sum:
      return F()->createReduceSum("r", in, axes, keep);
    case Mean:
      return F()->createReduceMean("r", in, axes, keep);
    case Max:
      return F()->createReduceMax("r", in, axes, keep);
    case Min:
      return F()->createReduceMin("r", in, axes, keep);
    case Prod:
      return F()->createReduceProd("r", in, axes, keep);
    }
    return NodeValue();
  }

  /// Reduction \p op of random data of kind \p k (integers for integer kinds) over
  /// \p axes (possibly negative), checked against refReduce and the expected shape.
  void checkReduce(Op op, ElemKind k, Dims dims, std::vector<int64_t> axes, bool keep,
                   uint64_t seed) {
    bool isInt = k == I32 || k == I64;
    float lo = op == Prod ? 0.5f : isInt ? -50 : -2, hi = op == Prod ? 1.5f : isInt ? 50 : 2;
    if (op == Prod && isInt)
      lo = -3, hi = 3;
    Tensor t = randomTensor(Type(k, dims), lo, hi, seed);
    std::vector<size_t> norm;
    for (int64_t a : axes)
      norm.push_back(size_t(a < 0 ? a + int64_t(dims.size()) : a));
    std::function<double(double, double)> f;
    switch (op) {
    case Sum:
    case Mean:
      f = [](double a, double b) { return a + b; };
      break;
    case Max:
      f = [](double a, double b) { return std::max(a, b); };
      break;
    case Min:
      f = [](double a, double b) { return std::min(a, b); };
      break;
    case Prod:
      f = [](double a, double b) { return a * b; };
      break;
    }
    size_t count = 1;
    std::vector<double> e = refReduce(toDoubles(t), dims, norm, f, count);
    if (op == Mean)
      for (double &v : e)
        v /= double(count);
    Dims outDims;
    for (size_t d = 0; d < dims.size(); d++) {
      bool reduced = std::find(norm.begin(), norm.end(), d) != norm.end();
      if (!reduced || keep)
        outDims.push_back(reduced ? 1 : dims[d]);
    }
    auto *s = save(build(op, input("x", std::move(t)), axes, keep));
    if (!run(1e-3f, 1e-3f))
      return;
    EXPECT_EQ(output(s).dims(), outDims);
    expectValues(output(s), e, isInt ? 0 : 1e-4, isInt ? 0 : rtolFor(k));
  }
};

// ------------------------------------------------------------------ reductions

// [1 2 3; 4 5 6]: over axis 0 -> [5 7 9]; axis 1 kept -> [[6] [15]]; axis -1 -> [6 15];
// both axes -> 21 (a scalar; [[21]] when kept).
TEST_P(ReduceTest, SumHand) {
  auto *x = input("x", F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto *s0 = save(F()->createReduceSum("a0", x, {0}, false), "a0");
  auto *s1 = save(F()->createReduceSum("a1", x, {1}, true), "a1");
  auto *sn = save(F()->createReduceSum("an", x, {-1}, false), "an");
  auto *sa = save(F()->createReduceSum("all", x, {0, 1}, false), "all");
  auto *sk = save(F()->createReduceSum("allk", x, {1, 0}, true), "allk");
  if (!run())
    return;
  expectValues(output(s0), {5, 7, 9});
  EXPECT_EQ(output(s1).dims(), Dims({2, 1}));
  expectValues(output(s1), {6, 15});
  expectValues(output(sn), {6, 15});
  EXPECT_EQ(output(sa).dims().size(), 0u);
  expectValues(output(sa), {21});
  EXPECT_EQ(output(sk).dims(), Dims({1, 1}));
  expectValues(output(sk), {21});
}

// Over axis 1 of [[1 -2 3] [-4 5 -6]]: mean [2/3, -5/3], max [3 5], min [-2 -6],
// prod [-6 120].
TEST_P(ReduceTest, MeanMaxMinProdHand) {
  auto *x = input("x", F32, {2, 3}, {1, -2, 3, -4, 5, -6});
  auto *mean = save(F()->createReduceMean("mean", x, {1}, false), "mean");
  auto *max = save(F()->createReduceMax("max", x, {1}, false), "max");
  auto *min = save(F()->createReduceMin("min", x, {1}, false), "min");
  auto *prod = save(F()->createReduceProd("prod", x, {1}, false), "prod");
  if (!run())
    return;
  expectValues(output(mean), {2.0 / 3, -5.0 / 3});
  expectValues(output(max), {3, 5});
  expectValues(output(min), {-2, -6});
  expectValues(output(prod), {-6, 120});
}

// Int64 keeps exact products beyond 2^32: 100000 * 100000 * 3 = 3e10. Int32 sums, max and
// min of [[7 -3] [-9 2]] over axis 0: [-2 -1], [7 2], [-9 -3].
TEST_P(ReduceTest, IntegerHand) {
  auto *x64 = input("x64", I64, {3}, {100000, 100000, 3});
  auto *x32 = input("x32", I32, {2, 2}, {7, -3, -9, 2});
  auto *p = save(F()->createReduceProd("p", x64, {0}, false), "p");
  auto *sum = save(F()->createReduceSum("sum", x32, {0}, false), "sum");
  auto *max = save(F()->createReduceMax("max", x32, {0}, false), "max");
  auto *min = save(F()->createReduceMin("min", x32, {-2}, true), "min");
  if (!run(0, 0))
    return;
  EXPECT_EQ(output(p).getHandle<int64_t>().raw(0), int64_t(30000000000));
  expectValues(output(sum), {-2, -1}, 0, 0);
  expectValues(output(max), {7, 2}, 0, 0);
  expectValues(output(min), {-9, -3}, 0, 0);
}

// Integer sums and products wrap like the Interpreter's int64 accumulation truncated to
// the output width: int32 2147483647 + 1 = -2147483648, 65536 * 65536 = 0; int64 max and
// min keep the extremes -2^63 and 2^63 - 1; a rank-4 int64 sum over the middle axes.
TEST_P(ReduceTest, IntegerWrapAndExtremes) {
  auto *w = input("w", I32, {2, 2}, {2147483647, 1, 65536, 65536});
  auto *e = input("e", I64, {2, 2}, {-9223372036854775808.0, 0, -9223372036854775808.0, 5});
  auto *r4 = input("r4", I64, {2, 2, 3, 2}, {1, 2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12,
                                            13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24});
  auto *sum = save(F()->createReduceSum("sum", w, {1}, false), "sum");
  auto *prod = save(F()->createReduceProd("prod", w, {1}, false), "prod");
  auto *max = save(F()->createReduceMax("max", e, {0}, false), "max");
  auto *min = save(F()->createReduceMin("min", e, {0, 1}, false), "min");
  auto *mid = save(F()->createReduceSum("mid", r4, {1, 2}, true), "mid");
  if (!run(0, 0))
    return;
  expectValues(output(sum), {-2147483648.0, 131072}, 0, 0);
  expectValues(output(prod), {2147483647, 0}, 0, 0);
  const int64_t *mx = output(max).getHandle<int64_t>().begin();
  EXPECT_EQ(mx[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(mx[1], 5);
  EXPECT_EQ(output(min).getHandle<int64_t>().raw(0), std::numeric_limits<int64_t>::min());
  // mid[a][0][0][b] = sum over j, k of r4[a][j][k][b] = 12a*... by hand:
  // a = 0, b = 0: 1 + 3 + 5 + 7 + 9 + 11 = 36; b = 1: 42; a = 1: 108, 114.
  EXPECT_EQ(output(mid).dims(), Dims({2, 1, 1, 2}));
  expectValues(output(mid), {36, 42, 108, 114}, 0, 0);
}

TEST_P(ReduceTest, SumMultiAxis) { checkReduce(Sum, F32, {3, 4, 5}, {0, 2}, false, 1); }
TEST_P(ReduceTest, SumMultiAxisKeep) { checkReduce(Sum, F32, {3, 4, 5}, {2, 0}, true, 2); }
TEST_P(ReduceTest, SumNegativeAxes) { checkReduce(Sum, F32, {2, 3, 4, 2}, {-1, -3}, false, 3); }
TEST_P(ReduceTest, SumFloat16) { checkReduce(Sum, F16, {4, 6}, {1}, false, 4); }
TEST_P(ReduceTest, SumBFloat16) { checkReduce(Sum, BF16, {4, 3, 2}, {0, 1}, true, 5); }
TEST_P(ReduceTest, SumInt32) { checkReduce(Sum, I32, {3, 4, 5}, {1}, false, 6); }
TEST_P(ReduceTest, SumInt64) { checkReduce(Sum, I64, {3, 4, 5}, {0, -1}, true, 7); }
TEST_P(ReduceTest, MeanFloat) { checkReduce(Mean, F32, {3, 4, 5}, {1, 2}, false, 8); }
TEST_P(ReduceTest, MeanFloatKeep) { checkReduce(Mean, F32, {2, 3, 4, 5}, {-1, 1}, true, 9); }
TEST_P(ReduceTest, MeanFloat16) { checkReduce(Mean, F16, {5, 6}, {0}, true, 10); }
TEST_P(ReduceTest, MeanBFloat16) { checkReduce(Mean, BF16, {5, 6}, {-1}, false, 11); }
TEST_P(ReduceTest, MaxFloat) { checkReduce(Max, F32, {3, 4, 5}, {0, 2}, true, 12); }
TEST_P(ReduceTest, MaxFloat16) { checkReduce(Max, F16, {3, 4, 5}, {1}, false, 13); }
TEST_P(ReduceTest, MaxBFloat16) { checkReduce(Max, BF16, {3, 4, 5}, {-2, -1}, false, 14); }
TEST_P(ReduceTest, MaxInt32) { checkReduce(Max, I32, {3, 4, 5}, {2}, false, 15); }
TEST_P(ReduceTest, MaxInt64) { checkReduce(Max, I64, {3, 4, 5}, {0, 1}, false, 16); }
TEST_P(ReduceTest, MinFloat) { checkReduce(Min, F32, {3, 4, 5}, {1}, true, 17); }
TEST_P(ReduceTest, MinFloat16) { checkReduce(Min, F16, {3, 4, 5}, {0, 2}, false, 18); }
TEST_P(ReduceTest, MinBFloat16) { checkReduce(Min, BF16, {3, 4, 5}, {2}, true, 19); }
TEST_P(ReduceTest, MinInt32) { checkReduce(Min, I32, {3, 4, 5}, {0}, false, 20); }
TEST_P(ReduceTest, MinInt64) { checkReduce(Min, I64, {3, 4, 5}, {-1}, true, 21); }
TEST_P(ReduceTest, ProdFloat) { checkReduce(Prod, F32, {3, 4, 5}, {1, 2}, false, 22); }
TEST_P(ReduceTest, ProdFloat16) { checkReduce(Prod, F16, {4, 5}, {1}, false, 23); }
TEST_P(ReduceTest, ProdBFloat16) { checkReduce(Prod, BF16, {4, 5}, {0}, true, 24); }
TEST_P(ReduceTest, ProdInt32) { checkReduce(Prod, I32, {3, 4, 5}, {2}, false, 25); }
TEST_P(ReduceTest, ProdInt64) { checkReduce(Prod, I64, {3, 4, 5}, {0, 2}, false, 26); }

KILN_INSTANTIATE_BACKEND_TESTS(ReduceTest);

// ------------------------------------------------------------------ ArgMax, ArgMin

class ArgTest : public BackendTest {
protected:
  /// x = [1 3 3; 5 3 5] in kind \p k. Ties resolve to the first index:
  /// ArgMax axis 1: row 0 -> 1, row 1 -> 0. ArgMax axis 0: [1 0 1].
  /// ArgMin axis -1 (kept, [2, 1]): [0 1]. ArgMin axis 0: [0 0 0].
  void argCase(ElemKind k) {
    auto *x = input("x", makeTensor(k, {2, 3}, {1, 3, 3, 5, 3, 5}));
    auto *max1 = save(F()->createArgMax("max1", x, 1, false), "max1");
    auto *max0 = save(F()->createArgMax("max0", x, 0, false), "max0");
    auto *min1 = save(F()->createArgMin("min1", x, -1, true), "min1");
    auto *min0 = save(F()->createArgMin("min0", x, 0, false), "min0");
    if (!run(0, 0))
      return;
    EXPECT_EQ(output(max1).getElementType(), I64);
    expectValues(output(max1), {1, 0}, 0, 0);
    expectValues(output(max0), {1, 0, 1}, 0, 0);
    EXPECT_EQ(output(min1).dims(), Dims({2, 1}));
    expectValues(output(min1), {0, 1}, 0, 0);
    expectValues(output(min0), {0, 0, 0}, 0, 0);
  }
};

TEST_P(ArgTest, Float) { argCase(F32); }
TEST_P(ArgTest, Float16) { argCase(F16); }
TEST_P(ArgTest, BFloat16) { argCase(BF16); }
TEST_P(ArgTest, Int8Q) { argCase(I8Q); }
TEST_P(ArgTest, Int32) { argCase(I32); }
TEST_P(ArgTest, Int64) { argCase(I64); }

// Along the middle axis of a random [3, 5, 4] with many ties (integers 0..3): the first
// index of the extreme value, found by a direct scan.
TEST_P(ArgTest, RandomMiddleAxisWithTies) {
  Tensor t = randomTensor(Type(F32, {3, 5, 4}), 0, 3, 5);
  for (size_t i = 0; i < t.size(); i++)
    t.setFromDouble(i, std::floor(t.getAsDouble(i)));
  std::vector<double> x = toDoubles(t), eMax, eMin;
  for (size_t o = 0; o < 3; o++)
    for (size_t i = 0; i < 4; i++) {
      size_t bMax = 0, bMin = 0;
      for (size_t a = 0; a < 5; a++) {
        if (x[(o * 5 + a) * 4 + i] > x[(o * 5 + bMax) * 4 + i])
          bMax = a;
        if (x[(o * 5 + a) * 4 + i] < x[(o * 5 + bMin) * 4 + i])
          bMin = a;
      }
      eMax.push_back(double(bMax));
      eMin.push_back(double(bMin));
    }
  auto *in = input("x", std::move(t));
  auto *sMax = save(F()->createArgMax("max", in, 1, true), "max");
  auto *sMin = save(F()->createArgMin("min", in, -2, false), "min");
  if (!run(0, 0))
    return;
  EXPECT_EQ(output(sMax).dims(), Dims({3, 1, 4}));
  expectValues(output(sMax), eMax, 0, 0);
  expectValues(output(sMin), eMin, 0, 0);
}

// Rank 1 and rank 4 (last axis, kept) on the integer kinds, with ties at both ends:
// [4 -1 4 -1] -> ArgMax 0, ArgMin 1; rows of [2, 1, 2, 3] by hand.
TEST_P(ArgTest, IntegerRanksAndKeepDims) {
  auto *v = input("v", I32, {4}, {4, -1, 4, -1});
  auto *r = input("r", I64, {2, 1, 2, 3}, {0, 7, 7, -2, -2, 5, 9, 9, 9, 1, 0, 1});
  auto *mx = save(F()->createArgMax("mx", v, 0, false), "mx");
  auto *mn = save(F()->createArgMin("mn", v, 0, true), "mn");
  auto *rmx = save(F()->createArgMax("rmx", r, 3, true), "rmx");
  auto *rmn = save(F()->createArgMin("rmn", r, -1, false), "rmn");
  auto *r0 = save(F()->createArgMax("r0", r, 0, true), "r0");
  if (!run(0, 0))
    return;
  expectValues(output(mx), {0}, 0, 0);
  EXPECT_EQ(output(mn).dims(), Dims({1}));
  expectValues(output(mn), {1}, 0, 0);
  EXPECT_EQ(output(rmx).dims(), Dims({2, 1, 2, 1}));
  // rows: [0 7 7] [-2 -2 5] [9 9 9] [1 0 1]
  expectValues(output(rmx), {1, 2, 0, 0}, 0, 0);
  EXPECT_EQ(output(rmn).dims(), Dims({2, 1, 2}));
  expectValues(output(rmn), {0, 0, 0, 1}, 0, 0);
  // Over axis 0: [0 7 7 -2 -2 5] against [9 9 9 1 0 1].
  EXPECT_EQ(output(r0).dims(), Dims({1, 1, 2, 3}));
  expectValues(output(r0), {1, 1, 1, 1, 1, 0}, 0, 0);
}

KILN_INSTANTIATE_BACKEND_TESTS(ArgTest);

// ------------------------------------------------------------------ TopK

class TopKTest : public BackendTest {
protected:
  /// x = [3 1 4 1 5; 2 7 1 8 2] in kind \p k; equal values keep the lower index first.
  /// Row 0 by value: 5@4 4@2 3@0 1@1 1@3; row 1: 8@3 7@1 2@0 2@4 1@2.
  void topKCase(ElemKind k) {
    auto *x = input("x", makeTensor(k, {2, 5}, {3, 1, 4, 1, 5, 2, 7, 1, 8, 2}));
    auto *k1 = F()->createTopK("k1", x, 1);
    auto *k3 = F()->createTopK("k3", x, 3);
    auto *k5 = F()->createTopK("k5", x, 5);
    auto *v1 = save(k1->getValues(), "v1");
    auto *i1 = save(k1->getIndices(), "i1");
    auto *v3 = save(k3->getValues(), "v3");
    auto *i3 = save(k3->getIndices(), "i3");
    auto *v5 = save(k5->getValues(), "v5");
    auto *i5 = save(k5->getIndices(), "i5");
    if (!run(0, 0))
      return;
    EXPECT_EQ(output(v3).getType(), Type::withDims(makeTensor(k, {1}, {0}).getType(), {2, 3}));
    EXPECT_EQ(output(i3).getElementType(), I64);
    expectValues(output(v1), {5, 8}, 0, 0);
    expectValues(output(i1), {4, 3}, 0, 0);
    expectValues(output(v3), {5, 4, 3, 8, 7, 2}, 0, 0);
    expectValues(output(i3), {4, 2, 0, 3, 1, 0}, 0, 0);
    expectValues(output(v5), {5, 4, 3, 1, 1, 8, 7, 2, 2, 1}, 0, 0);
    expectValues(output(i5), {4, 2, 0, 1, 3, 3, 1, 0, 4, 2}, 0, 0);
  }
};

TEST_P(TopKTest, Float) { topKCase(F32); }
TEST_P(TopKTest, Float16) { topKCase(F16); }
TEST_P(TopKTest, BFloat16) { topKCase(BF16); }
TEST_P(TopKTest, Int8Q) { topKCase(I8Q); }
TEST_P(TopKTest, Int32) { topKCase(I32); }
TEST_P(TopKTest, Int64) { topKCase(I64); }

// Rank 3 with many ties (integers 0..4), K = 10 of 40 (long enough rows that an unstable
// sort would reorder ties): selection by repeatedly taking the first maximum among the
// elements not yet taken.
TEST_P(TopKTest, RandomRank3WithTies) {
  const size_t n = 40, k = 10;
  Tensor t = randomTensor(Type(I32, {2, 3, n}), 0, 4, 17);
  std::vector<double> x = toDoubles(t), eV, eI;
  for (size_t row = 0; row < 6; row++) {
    std::vector<bool> taken(n, false);
    for (size_t j = 0; j < k; j++) {
      int best = -1;
      for (size_t a = 0; a < n; a++)
        if (!taken[a] && (best < 0 || x[row * n + a] > x[row * n + best]))
          best = int(a);
      taken[best] = true;
      eV.push_back(x[row * n + best]);
      eI.push_back(best);
    }
  }
  auto *tk = F()->createTopK("topk", input("x", std::move(t)), k);
  auto *sv = save(tk->getValues(), "v");
  auto *si = save(tk->getIndices(), "i");
  if (!run(0, 0))
    return;
  EXPECT_EQ(output(sv).dims(), Dims({2, 3, k}));
  expectValues(output(sv), eV, 0, 0);
  expectValues(output(si), eI, 0, 0);
}

// Rank 1 with all elements equal but one, K = n: the stable order keeps indices ascending
// among the ties; Int8Q with negative raw values (scale 0.5, offset -3).
TEST_P(TopKTest, AllTiesAndNegativeInt8) {
  auto *x = input("x", makeTensor(I64, {5}, {2, 2, 9, 2, 2}));
  auto *q = input("q", makeTensor(I8Q, {2, 3}, {-128, 127, -5, -5, -128, -5}));
  auto *tx = F()->createTopK("tx", x, 5);
  auto *tq = F()->createTopK("tq", q, 2);
  auto *vx = save(tx->getValues(), "vx");
  auto *ix = save(tx->getIndices(), "ix");
  auto *vq = save(tq->getValues(), "vq");
  auto *iq = save(tq->getIndices(), "iq");
  if (!run(0, 0))
    return;
  expectValues(output(vx), {9, 2, 2, 2, 2}, 0, 0);
  expectValues(output(ix), {2, 0, 1, 3, 4}, 0, 0);
  expectValues(output(vq), {127, -5, -5, -5}, 0, 0);
  expectValues(output(iq), {1, 2, 0, 2}, 0, 0);
}

KILN_INSTANTIATE_BACKEND_TESTS(TopKTest);

} // namespace
} // namespace kiln::test
