// Operator tests of FullyConnected, MatMul, BatchMatMul and BatchedAdd on every backend.
// Expectations are hand-computed (arithmetic in the comments) or come from the direct
// double-precision loops below, never from the Interpreter.

#include "BackendTestUtils.h"

#include <cmath>

namespace kiln::test {
namespace {

constexpr ElemKind F32 = ElemKind::Float;
constexpr ElemKind F16 = ElemKind::Float16;
constexpr ElemKind BF16 = ElemKind::BFloat16;
constexpr ElemKind I8Q = ElemKind::Int8Q;
constexpr ElemKind I32Q = ElemKind::Int32Q;

/// The real values of \p t (quantized kinds dequantized).
std::vector<double> realValues(const Tensor &t) {
  const Type &ty = t.getType();
  std::vector<double> v(t.size());
  for (size_t i = 0; i < v.size(); i++) {
    v[i] = t.getAsDouble(i);
    if (ty.isQuantizedType())
      v[i] = double(ty.scale) * (v[i] - ty.offset);
  }
  return v;
}

std::vector<double> quantizeAll(std::vector<double> v, double scale, int offset) {
  for (double &x : v)
    x = quantizeRef(x, scale, offset);
  return v;
}

/// Relative tolerance for a result of kind \p k against an exact reference.
double rtolFor(ElemKind k) { return k == F16 ? 1e-3 : k == BF16 ? 8e-3 : 1e-5; }

/// \p batches products [n, k] x [k, m] in double, stored back to back.
std::vector<double> refMatMul(const std::vector<double> &a, const std::vector<double> &b,
                              size_t batches, size_t n, size_t k, size_t m) {
  std::vector<double> out(batches * n * m, 0.0);
  for (size_t bt = 0; bt < batches; bt++)
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < m; j++)
        for (size_t p = 0; p < k; p++)
          out[(bt * n + i) * m + j] += a[(bt * n + i) * k + p] * b[(bt * k + p) * m + j];
  return out;
}

class LinalgTest : public BackendTest {
protected:
  /// BatchedAdd of float kind \p k, ranks 2 and 3, on hand values.
  void batchedAddFloat(ElemKind k);

  /// FullyConnected [n,k] x [k,m] + [m] of float kind \p kind on random data.
  void checkFloatFC(ElemKind kind, dim_t n, dim_t k, dim_t m, uint64_t seed) {
    Tensor x = randomTensor(Type(kind, {n, k}), -1, 1, seed);
    Tensor w = randomTensor(Type(kind, {k, m}), -1, 1, seed + 1);
    Tensor b = randomTensor(Type(kind, {m}), -1, 1, seed + 2);
    std::vector<double> e = refMatMul(realValues(x), realValues(w), 1, n, k, m);
    std::vector<double> bias = realValues(b);
    for (size_t i = 0; i < e.size(); i++)
      e[i] += bias[i % m];
    auto *fc = F()->createFullyConnected("fc", input("x", std::move(x)),
                                         mod().createConstant("w", std::move(w)),
                                         mod().createConstant("b", std::move(b)));
    auto *s = save(fc);
    if (!run(1e-3f, 1e-3f))
      return;
    expectValues(output(s), e, 1e-4, rtolFor(kind));
  }

  /// (Batch)MatMul of float kind \p kind on random data; \p batches 0 means MatMul.
  void checkFloatMatMul(ElemKind kind, dim_t batches, dim_t n, dim_t k, dim_t m, uint64_t seed) {
    Dims ad = batches ? Dims{batches, n, k} : Dims{n, k};
    Dims bd = batches ? Dims{batches, k, m} : Dims{k, m};
    Tensor a = randomTensor(Type(kind, ad), -1, 1, seed);
    Tensor b = randomTensor(Type(kind, bd), -1, 1, seed + 1);
    std::vector<double> e = refMatMul(realValues(a), realValues(b), batches ? batches : 1, n, k, m);
    NodeValue l = input("a", std::move(a)), r = input("b", std::move(b));
    auto *s = save(batches ? NodeValue(F()->createBatchMatMul("mm", l, r))
                           : NodeValue(F()->createMatMul("mm", l, r)));
    if (!run(1e-3f, 1e-3f))
      return;
    expectValues(output(s), e, 1e-4, rtolFor(kind));
  }

  /// Int8 (Batch)MatMul on random data with non-zero offsets and power-of-two scales, so
  /// the reference is exact (results on halves included); \p batches 0 means MatMul. The
  /// right operand is a Constant when \p constRhs, the output scale \p outScale (small
  /// ones saturate) and the operands' raw values within +-\p range.
  void checkInt8MatMul(dim_t batches, dim_t n, dim_t k, dim_t m, uint64_t seed,
                       bool constRhs = false, float outScale = 8.0f, float range = 40) {
    Dims ad = batches ? Dims{batches, n, k} : Dims{n, k};
    Dims bd = batches ? Dims{batches, k, m} : Dims{k, m};
    Dims od = batches ? Dims{batches, n, m} : Dims{n, m};
    Tensor a = randomTensor(Type(I8Q, ad, 0.5f, -4), -range, range, seed);
    Tensor b = randomTensor(Type(I8Q, bd, 0.25f, 7), -range, range, seed + 1);
    std::vector<double> e = quantizeAll(
        refMatMul(realValues(a), realValues(b), batches ? batches : 1, n, k, m), outScale, 3);
    NodeValue l = input("a", std::move(a));
    NodeValue r = constRhs ? NodeValue(mod().createConstant("b", std::move(b)))
                           : NodeValue(input("b", std::move(b)));
    TypeRef oTy = mod().uniqueType(I8Q, od, outScale, 3);
    auto *s = save(batches ? NodeValue(F()->createBatchMatMul("mm", oTy, l, r))
                           : NodeValue(F()->createMatMul("mm", oTy, l, r)));
    if (!run(0, 0))
      return;
    expectValues(output(s), e, 0, 0);
  }
};

// ------------------------------------------------------------------ FullyConnected

// [1 2 3; 4 5 6] x [1 0; 0 1; 1 1] = [4 5; 10 11]; + [10 20] = [14 25; 20 31].
TEST_P(LinalgTest, FullyConnectedFloat) {
  auto *fc = F()->createFullyConnected("fc", input("x", F32, {2, 3}, {1, 2, 3, 4, 5, 6}),
                                       constant("w", F32, {3, 2}, {1, 0, 0, 1, 1, 1}),
                                       constant("b", F32, {2}, {10, 20}));
  auto *s = save(fc);
  if (!run())
    return;
  expectValues(output(s), {14, 25, 20, 31});
}

// Size-1 dims: [3] x [4] + [5] = 17; [1, 3] x [3, 1] + [-1]: 1*2 + 2*3 + 3*4 - 1 = 19.
TEST_P(LinalgTest, FullyConnectedUnitDims) {
  auto *a =
      F()->createFullyConnected("a", input("x", F32, {1, 1}, {3}), constant("w", F32, {1, 1}, {4}),
                                constant("b", F32, {1}, {5}));
  auto *b = F()->createFullyConnected("b", input("y", F32, {1, 3}, {1, 2, 3}),
                                      constant("v", F32, {3, 1}, {2, 3, 4}),
                                      constant("c", F32, {1}, {-1}));
  auto *sa = save(a, "sa");
  auto *sb = save(b, "sb");
  if (!run())
    return;
  expectValues(output(sa), {17});
  expectValues(output(sb), {19});
}

TEST_P(LinalgTest, FullyConnectedFloatRandom) { checkFloatFC(F32, 5, 37, 11, 1); }
// Rows filling whole GEMM row panels and reductions past 16 and past one K block.
TEST_P(LinalgTest, FullyConnectedFloatRowPanels) { checkFloatFC(F32, 31, 45, 40, 4); }
TEST_P(LinalgTest, FullyConnectedFloatTwoKBlocks) { checkFloatFC(F32, 29, 400, 35, 5); }
// One row: the CPU reads the weights in place (libjit_fc_row_f32), over several blocks of
// 256 rows and two column chunks, the last columns not a multiple of 64.
TEST_P(LinalgTest, FullyConnectedFloatOneRow) { checkFloatFC(F32, 1, 600, 2100, 6); }
TEST_P(LinalgTest, FullyConnectedFloat16) { checkFloatFC(F16, 4, 19, 7, 2); }
// One row (the CPU's row kernel, float16 weights held halved) and a K past one K block.
TEST_P(LinalgTest, FullyConnectedFloat16OneRow) { checkFloatFC(F16, 1, 300, 45, 172); }
TEST_P(LinalgTest, FullyConnectedFloat16LongK) { checkFloatFC(F16, 3, 401, 37, 173); }
TEST_P(LinalgTest, FullyConnectedBFloat16) { checkFloatFC(BF16, 3, 23, 6, 3); }

// Input scale 0.5 offset -1: raw [3 -3] = [2 -1]. Weights scale 0.5: raw [2 4; -2 6] =
// [1 2; -1 3]. Bias scale 0.25: raw [2 -3] = [0.5 -0.75].
// col0: 2*1 + (-1)(-1) + 0.5 = 3.5; col1: 2*2 + (-1)*3 - 0.75 = 0.25.
// Output scale 0.5 offset 2: 3.5/0.5 = 7 -> 9; 0.25/0.5 = 0.5 -> 1 (half away) -> 3.
TEST_P(LinalgTest, FullyConnectedInt8) {
  auto *x = input("x", makeTensor(Type(I8Q, {1, 2}, 0.5f, -1), {3, -3}));
  auto *w = mod().createConstant("w", makeTensor(Type(I8Q, {2, 2}, 0.5f, 0), {2, 4, -2, 6}));
  auto *b = mod().createConstant("b", makeTensor(Type(I32Q, {2}, 0.25f, 0), {2, -3}));
  auto *fc = F()->createFullyConnected("fc", mod().uniqueType(I8Q, {1, 2}, 0.5f, 2), x, w, b);
  auto *s = save(fc);
  if (!run(0, 0))
    return;
  expectValues(output(s), {9, 3}, 0, 0);
}

// Random int8 FC with offsets on input and weights; power-of-two scales keep the
// reference exact (bias scale = 0.5 * 0.25).
TEST_P(LinalgTest, FullyConnectedInt8Random) {
  const dim_t n = 3, k = 17, m = 5;
  Tensor x = randomTensor(Type(I8Q, {n, k}, 0.5f, 5), -50, 50, 7);
  Tensor w = randomTensor(Type(I8Q, {k, m}, 0.25f, -3), -50, 50, 8);
  Tensor b = randomTensor(Type(I32Q, {m}, 0.125f, 0), -500, 500, 9);
  std::vector<double> e = refMatMul(realValues(x), realValues(w), 1, n, k, m);
  std::vector<double> bias = realValues(b);
  for (size_t i = 0; i < e.size(); i++)
    e[i] += bias[i % m];
  e = quantizeAll(e, 16.0, -7);
  auto *fc = F()->createFullyConnected(
      "fc", mod().uniqueType(I8Q, {n, m}, 16.0f, -7), input("x", std::move(x)),
      mod().createConstant("w", std::move(w)), mod().createConstant("b", std::move(b)));
  auto *s = save(fc);
  if (!run(0, 0))
    return;
  expectValues(output(s), e, 0, 0);
}

// ------------------------------------------------------------------ MatMul

// [1 2; 3 4] x [5 6 7; 8 9 10] = [5+16 6+18 7+20; 15+32 18+36 21+40].
TEST_P(LinalgTest, MatMulFloat) {
  auto *mm = F()->createMatMul("mm", input("a", F32, {2, 2}, {1, 2, 3, 4}),
                               input("b", F32, {2, 3}, {5, 6, 7, 8, 9, 10}));
  auto *s = save(mm);
  if (!run())
    return;
  expectValues(output(s), {21, 24, 27, 47, 54, 61});
}

// [1, 4] x [4, 1]: 1 + 2 + 3 + 4 = 10. [3, 1] x [1, 2]: outer product [1 2 3]^T [4 5].
TEST_P(LinalgTest, MatMulUnitDims) {
  auto *dot = F()->createMatMul("dot", input("a", F32, {1, 4}, {1, 2, 3, 4}),
                                input("b", F32, {4, 1}, {1, 1, 1, 1}));
  auto *outer = F()->createMatMul("outer", input("c", F32, {3, 1}, {1, 2, 3}),
                                  input("d", F32, {1, 2}, {4, 5}));
  auto *s1 = save(dot, "dot");
  auto *s2 = save(outer, "outer");
  if (!run())
    return;
  expectValues(output(s1), {10});
  expectValues(output(s2), {4, 5, 8, 10, 12, 15});
}

TEST_P(LinalgTest, MatMulFloatRandom) { checkFloatMatMul(F32, 0, 7, 33, 9, 11); }
TEST_P(LinalgTest, MatMulFloat16) { checkFloatMatMul(F16, 0, 5, 21, 4, 12); }
TEST_P(LinalgTest, MatMulBFloat16) { checkFloatMatMul(BF16, 0, 1, 16, 8, 13); }

// A scale 0.25: raw [4 -8] = [1 -2]. B scale 0.5 offset 1: raw [3 -5 127; -3 3 -128] =
// [1 -3 63; -2 1 -64.5]. A x B = [1+4, -3-2, 63+129] = [5 -5 192].
// Output scale 2 offset 40: 2.5 -> 3 -> 43; -2.5 -> -3 -> 37 (halves away from zero, not
// to even); 96 + 40 = 136 -> saturates to 127.
TEST_P(LinalgTest, MatMulInt8) {
  auto *a = input("a", makeTensor(Type(I8Q, {1, 2}, 0.25f, 0), {4, -8}));
  auto *b = input("b", makeTensor(Type(I8Q, {2, 3}, 0.5f, 1), {3, -5, 127, -3, 3, -128}));
  auto *s = save(F()->createMatMul("mm", mod().uniqueType(I8Q, {1, 3}, 2.0f, 40), a, b));
  if (!run(0, 0))
    return;
  expectValues(output(s), {43, 37, 127}, 0, 0);
}

TEST_P(LinalgTest, MatMulInt8Random) { checkInt8MatMul(0, 6, 25, 7, 14); }
// Shapes off the CPU kernels' tiles (rows in fours and 64s, columns in 16s or 32s, K in
// fours), K = 1, constant right operands (packed at compile time), outputs on halves
// (scale 1/8 units against an output scale of 1) and saturating ones (scale 0.5).
TEST_P(LinalgTest, MatMulInt8OddShapes) { checkInt8MatMul(0, 67, 37, 45, 15); }
TEST_P(LinalgTest, MatMulInt8ConstantRHS) { checkInt8MatMul(0, 5, 70, 33, 16, true); }
TEST_P(LinalgTest, MatMulInt8KOne) { checkInt8MatMul(0, 9, 1, 17, 17, false, 1.0f, 20); }
TEST_P(LinalgTest, MatMulInt8Halves) { checkInt8MatMul(0, 7, 3, 19, 18, true, 1.0f, 6); }
TEST_P(LinalgTest, MatMulInt8Saturates) { checkInt8MatMul(0, 4, 50, 40, 19, false, 0.5f, 127); }

// ------------------------------------------------------------------ BatchMatMul

// Batch 0: [1 2] . [3 4] = 11; batch 1: [5 6] . [7 8] = 35 + 48 = 83.
TEST_P(LinalgTest, BatchMatMulFloat) {
  auto *mm = F()->createBatchMatMul("bmm", input("a", F32, {2, 1, 2}, {1, 2, 5, 6}),
                                    input("b", F32, {2, 2, 1}, {3, 4, 7, 8}));
  auto *s = save(mm);
  if (!run())
    return;
  expectValues(output(s), {11, 83});
}

TEST_P(LinalgTest, BatchMatMulFloatRandom) { checkFloatMatMul(F32, 3, 4, 9, 5, 21); }
TEST_P(LinalgTest, BatchMatMulFloatRowPanels) { checkFloatMatMul(F32, 2, 30, 33, 17, 26); }
TEST_P(LinalgTest, BatchMatMulUnitBatch) { checkFloatMatMul(F32, 1, 1, 6, 1, 22); }
TEST_P(LinalgTest, BatchMatMulFloat16) { checkFloatMatMul(F16, 2, 3, 11, 4, 23); }
TEST_P(LinalgTest, BatchMatMulBFloat16) { checkFloatMatMul(BF16, 2, 5, 7, 3, 24); }
TEST_P(LinalgTest, BatchMatMulInt8Random) { checkInt8MatMul(3, 4, 13, 5, 25); }
TEST_P(LinalgTest, BatchMatMulInt8OddShapes) { checkInt8MatMul(5, 66, 21, 35, 27); }
TEST_P(LinalgTest, BatchMatMulInt8ConstantRHS) { checkInt8MatMul(2, 9, 64, 40, 28, true); }
TEST_P(LinalgTest, BatchMatMulInt8KOne) { checkInt8MatMul(4, 3, 1, 5, 29, false, 1.0f, 20); }
TEST_P(LinalgTest, BatchMatMulInt8Saturates) {
  checkInt8MatMul(2, 6, 30, 18, 30, true, 0.5f, 127);
}

// ------------------------------------------------------------------ BatchedAdd

// [1 2; 3 4; 5 6] + [10 20] per row; rank 3: [2,2,2] + [2,2] adds the slice to each batch.
// One test case per float kind.
void LinalgTest::batchedAddFloat(ElemKind k) {
  SaveNode *a = save(F()->createBatchedAdd("a", input("x", k, {3, 2}, {1, 2, 3, 4, 5, 6}),
                                           input("s", k, {2}, {10, 20})),
                     "a");
  SaveNode *b = save(F()->createBatchedAdd("b", input("y", k, {2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}),
                                           input("t", k, {2, 2}, {0.5, -1, 100, 0})),
                     "b");
  if (!run())
    return;
  expectValues(output(a), {11, 22, 13, 24, 15, 26});
  expectValues(output(b), {1.5, 1, 103, 4, 5.5, 5, 107, 8});
}

TEST_P(LinalgTest, BatchedAddFloat) { batchedAddFloat(F32); }
TEST_P(LinalgTest, BatchedAddFloat16) { batchedAddFloat(F16); }
TEST_P(LinalgTest, BatchedAddBFloat16) { batchedAddFloat(BF16); }

// Batch scale 0.5: raw [1 3 100; -1 -3 -100] = [0.5 1.5 50; -0.5 -1.5 -50]. Slice scale
// 0.25 offset 2: raw [4 0 2] = [0.5 -0.5 0]. Sums [1 1 50; 0 -2 -50].
// Output scale 0.25 offset 10: 4s + 10 = [14 14 210->127; 10 2 -190->-128].
// Output scale 2 offset 0: s / 2 = [0.5 0.5 25; 0 -1 -25] -> [1 1 25; 0 -1 -25].
TEST_P(LinalgTest, BatchedAddInt8) {
  auto *x = input("x", makeTensor(Type(I8Q, {2, 3}, 0.5f, 0), {1, 3, 100, -1, -3, -100}));
  auto *sl = input("s", makeTensor(Type(I8Q, {3}, 0.25f, 2), {4, 0, 2}));
  auto *s1 = save(F()->createBatchedAdd("a", mod().uniqueType(I8Q, {2, 3}, 0.25f, 10), x, sl), "a");
  auto *s2 = save(F()->createBatchedAdd("b", mod().uniqueType(I8Q, {2, 3}, 2.0f, 0), x, sl), "b");
  if (!run(0, 0))
    return;
  expectValues(output(s1), {14, 14, 127, 10, 2, -128}, 0, 0);
  expectValues(output(s2), {1, 1, 25, 0, -1, -25}, 0, 0);
}

// Random int8 BatchedAdd: Batch [4, 3, 37] + Slice [3, 37] (rows longer than the CPU's
// vectors, with tails) and [70, 3] + [3] (rows shorter than a vector), offsets of both
// signs, an output grid that saturates some sums. The reference: the real sum in double,
// rounded half away from zero on the output grid, saturated.
TEST_P(LinalgTest, BatchedAddInt8Random) {
  struct Case {
    Dims batch, slice;
  };
  const Case cases[] = {{{4, 3, 37}, {3, 37}}, {{70, 3}, {3}}};
  std::vector<std::vector<double>> expected;
  std::vector<SaveNode *> saves;
  uint64_t seed = 40;
  for (const Case &c : cases) {
    Tensor x = randomTensor(Type(I8Q, c.batch, 0.05f, -9), -128, 127, seed);
    Tensor sl = randomTensor(Type(I8Q, c.slice, 0.031f, 20), -128, 127, seed + 1);
    std::vector<double> xr = realValues(x), sr = realValues(sl), e(xr.size());
    for (size_t i = 0; i < e.size(); i++)
      e[i] = quantizeRef(xr[i] + sr[i % sr.size()], double(0.07f), -5);
    std::string id = std::to_string(seed);
    saves.push_back(save(F()->createBatchedAdd("ba" + id, mod().uniqueType(I8Q, c.batch, 0.07f, -5),
                                               input("x" + id, std::move(x)),
                                               input("s" + id, std::move(sl))),
                         "out" + id));
    expected.push_back(e);
    seed += 2;
  }
  if (!run(0, 0))
    return;
  for (size_t i = 0; i < saves.size(); i++)
    expectValues(output(saves[i]), expected[i], 0, 0);
}

KILN_INSTANTIATE_BACKEND_TESTS(LinalgTest);

} // namespace
} // namespace kiln::test
