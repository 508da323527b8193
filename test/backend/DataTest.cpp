// Operator tests of the data-movement family: Concat, Slice, Transpose, Gather, Tile, Pad,
// Broadcast, Splat and ConvertTo, on every element kind the Interpreter claims.
// Expectations are hand-written, or (for every-kind and 6-D cases) derived in the test
// from explicit index arithmetic on a known input pattern.

#include "BackendTestUtils.h"

#include <cmath>
#include <functional>
#include <limits>

namespace kiln::test {

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Type of kind \p k; quantized kinds get scale 0.5 and offset 3 (irrelevant to moving
/// data, but it must be carried along).
Type typeOf(ElemKind k, Dims dims) {
  return isQuantized(k) ? Type(k, dims, 0.5f, 3) : Type(k, dims);
}

/// The value of element \p i of the test pattern, as stored in kind \p k: small integers
/// exact in every kind, and a mix of true and false for Bool.
double pattern(ElemKind k, size_t i) {
  double v = double((i * 37 + 11) % 97);
  return k == ElemKind::Bool ? double(int(v) % 3 == 0) : v;
}

/// A tensor of kind \p k filled with the pattern.
Tensor patternTensor(ElemKind k, Dims dims, size_t start = 0) {
  Tensor t(typeOf(k, dims));
  for (size_t i = 0; i < t.size(); i++)
    t.setFromDouble(i, pattern(k, start + i));
  return t;
}

/// Row-major offset of \p idx in \p dims.
size_t offsetOf(const Dims &dims, const std::vector<dim_t> &idx) {
  size_t off = 0;
  for (size_t d = 0; d < dims.size(); d++)
    off = off * dims[d] + idx[d];
  return off;
}

/// Calls \p f with every index of \p dims in row-major order.
void forEach(const Dims &dims, const std::function<void(const std::vector<dim_t> &)> &f) {
  std::vector<dim_t> idx(dims.size(), 0);
  for (size_t n = 0, e = dims.product(); n < e; n++) {
    f(idx);
    for (size_t d = dims.size(); d-- > 0;) {
      if (++idx[d] < dims[d])
        break;
      idx[d] = 0;
    }
  }
}

} // namespace

class DataTest : public BackendTest {
protected:
  struct Check {
    SaveNode *save;
    std::vector<double> expected;
    std::string what;
  };

  /// Runs once and checks every expectation exactly.
  void runAndCheck() {
    if (!run(0, 0))
      return;
    for (const Check &c : checks_) {
      SCOPED_TRACE(c.what);
      expectValues(output(c.save), c.expected, 0, 0);
    }
  }

  /// One element kind's case of Gather, Pad and Splat (KILN_DATA_TEST_EVERY_KIND).
  void gatherKindCase(ElemKind k);
  void padKindCase(ElemKind k);
  void splatKindCase(ElemKind k);
  /// ConvertTo from \p from to each of f32, f16, bf16, i32, i64 and Bool.
  void convertFromKind(ElemKind from);

  std::vector<Check> checks_;
};

/// One test case per element kind, each calling \p FN(kind): a backend that
/// lacks one kind skips that case only.
#define KILN_DATA_TEST_EVERY_KIND(NAME, FN)                                                 \
  TEST_P(DataTest, NAME##Float) { FN(ElemKind::Float); }                                     \
  TEST_P(DataTest, NAME##Float16) { FN(ElemKind::Float16); }                                 \
  TEST_P(DataTest, NAME##BFloat16) { FN(ElemKind::BFloat16); }                               \
  TEST_P(DataTest, NAME##Int8Q) { FN(ElemKind::Int8Q); }                                     \
  TEST_P(DataTest, NAME##UInt8Q) { FN(ElemKind::UInt8Q); }                                   \
  TEST_P(DataTest, NAME##Int32Q) { FN(ElemKind::Int32Q); }                                   \
  TEST_P(DataTest, NAME##Int32) { FN(ElemKind::Int32I); }                                    \
  TEST_P(DataTest, NAME##Int64) { FN(ElemKind::Int64I); }                                    \
  TEST_P(DataTest, NAME##Bool) { FN(ElemKind::Bool); }

/// Like KILN_DATA_TEST_EVERY_KIND with the body inline: KILN_DATA_KIND_TEST(Name, body using
/// `k`) defines NameFloat, NameFloat16, ... NameBool.
#define KILN_DATA_KIND_TEST_ONE(NAME, SFX, KIND, ...)                                         \
  TEST_P(DataTest, NAME##SFX) {                                                              \
    const ElemKind k = ElemKind::KIND;                                                       \
    __VA_ARGS__                                                                              \
  }
#define KILN_DATA_KIND_TEST(NAME, ...)                                                        \
  KILN_DATA_KIND_TEST_ONE(NAME, Float, Float, __VA_ARGS__)                                   \
  KILN_DATA_KIND_TEST_ONE(NAME, Float16, Float16, __VA_ARGS__)                               \
  KILN_DATA_KIND_TEST_ONE(NAME, BFloat16, BFloat16, __VA_ARGS__)                             \
  KILN_DATA_KIND_TEST_ONE(NAME, Int8Q, Int8Q, __VA_ARGS__)                                   \
  KILN_DATA_KIND_TEST_ONE(NAME, UInt8Q, UInt8Q, __VA_ARGS__)                                 \
  KILN_DATA_KIND_TEST_ONE(NAME, Int32Q, Int32Q, __VA_ARGS__)                                 \
  KILN_DATA_KIND_TEST_ONE(NAME, Int32, Int32I, __VA_ARGS__)                                  \
  KILN_DATA_KIND_TEST_ONE(NAME, Int64, Int64I, __VA_ARGS__)                                  \
  KILN_DATA_KIND_TEST_ONE(NAME, Bool, Bool, __VA_ARGS__)

// ------------------------------------------------------------------ Concat

TEST_P(DataTest, ConcatAxis0And1) {
  auto *a = input("a", ElemKind::Float, {2, 2}, {1, 2, 3, 4});
  auto *b = input("b", ElemKind::Float, {1, 2}, {5, 6});
  auto *c = input("c", ElemKind::Float, {2, 1}, {7, 8});
  SaveNode *rows = save(F()->createConcat("rows", {a, b}, 0), "rows");
  SaveNode *cols = save(F()->createConcat("cols", {a, c, a}, 1), "cols");
  if (!run())
    return;
  EXPECT_EQ(output(rows).dims(), Dims({3, 2}));
  expectValues(output(rows), {1, 2, 3, 4, 5, 6}, 0, 0);
  EXPECT_EQ(output(cols).dims(), Dims({2, 5}));
  expectValues(output(cols), {1, 2, 7, 1, 2, 3, 4, 8, 3, 4}, 0, 0);
}

KILN_DATA_KIND_TEST(ConcatNegativeAxis, {
  std::string n = elemKindName(k);
  auto *x = input(n + "x", patternTensor(k, {2, 1, 2}, 0));
  auto *y = input(n + "y", patternTensor(k, {2, 1, 1}, 4));
  auto *z = input(n + "z", patternTensor(k, {2, 1, 3}, 6));
  auto p = [&](size_t i) { return pattern(k, i); };
  // Along the last axis: each row is x's 2, y's 1 and z's 3 elements.
  checks_.push_back({save(F()->createConcat("cat", {x, y, z}, -1)),
                     {p(0), p(1), p(4), p(6), p(7), p(8), p(2), p(3), p(5), p(9), p(10), p(11)},
                     n});
  runAndCheck();
})

TEST_P(DataTest, ConcatMiddleAxisWithSizeOneDims) {
  auto *a = input("a", ElemKind::Int32I, {2, 1, 1}, {1, 2});
  auto *b = input("b", ElemKind::Int32I, {2, 2, 1}, {3, 4, 5, 6});
  SaveNode *s = save(F()->createConcat("cat", {a, b}, 1));
  if (!run())
    return;
  EXPECT_EQ(output(s).dims(), Dims({2, 3, 1}));
  expectValues(output(s), {1, 3, 4, 2, 5, 6}, 0, 0);
}

TEST_P(DataTest, ConcatRequantizesQuantizedInputs) {
  Tensor ta(Type(ElemKind::Int8Q, {2}, 1.0f, 0));
  ta.getHandle<int8_t>().set({1, 2});
  Tensor tb(Type(ElemKind::Int8Q, {2}, 0.5f, -2));
  tb.getHandle<int8_t>().set({2, 5}); // reals 2, 3.5
  auto *a = input("a", std::move(ta));
  auto *b = input("b", std::move(tb));
  // The default result takes a's parameters: 3.5 rounds half away from zero to 4.
  SaveNode *same = save(F()->createConcat("cat", {a, b}, 0), "same");
  TypeRef outTy = mod().uniqueType(ElemKind::Int8Q, {4}, 0.25f, 1);
  SaveNode *other = save(F()->createConcat("cat2", outTy, {a, b}, 0), "other");
  if (!run())
    return;
  expectValues(output(same), {1, 2, 2, 4}, 0, 0);
  expectValues(output(other), {5, 9, 9, 15}, 0, 0);
}

// Slice, Transpose, Tile, Broadcast, Pad and Gather into a quantized result with other
// parameters requantize every element: int8 reals 1, 2, 5, -128 (scale 1, offset 0) into
// scale 0.5, offset 1 are 3, 5, 11 and -128 (-255 saturates); Pad's value is raw in the
// result. uint8 reals 0, 0.5, 0.75, -0.75 (scale 0.25, offset 128) into scale 0.5, offset
// 100: 100, 101, 102 (1.5 away from zero), 98. int32 2^31 - 1 doubled saturates.
TEST_P(DataTest, DataMovementRequantizes) {
  auto *x = input("x", qTensor(ElemKind::Int8Q, {2, 2}, 1.0f, 0, {1, 2, 5, -128}));
  auto q = [&](Dims d) { return mod().uniqueType(ElemKind::Int8Q, d, 0.5f, 1); };
  auto *idx = input("idx", ElemKind::Int32I, {1}, {1});
  checks_.push_back({save(F()->createSlice("sl", q({1, 2}), x, {1, 0}, {2, 2}), "sl"),
                     {11, -128}, "slice"});
  checks_.push_back({save(F()->createTranspose("tr", q({2, 2}), x, {1, 0}), "tr"),
                     {3, 11, 5, -128}, "transpose"});
  checks_.push_back({save(F()->createTile("ti", q({2, 4}), x, {1, 2}), "ti"),
                     {3, 5, 3, 5, 11, -128, 11, -128}, "tile"});
  checks_.push_back({save(F()->createBroadcast("bc", q({2, 2, 2}), x, {2, 2, 2}), "bc"),
                     {3, 5, 11, -128, 3, 5, 11, -128}, "broadcast"});
  checks_.push_back({save(F()->createPad("pd", q({3, 2}), x, {1, 0, 0, 0}, 7.0f), "pd"),
                     {7, 7, 3, 5, 11, -128}, "pad"});
  checks_.push_back({save(F()->createGather("ga", q({1, 2}), x, idx, 0), "ga"), {11, -128},
                     "gather"});
  auto *u = input("u", qTensor(ElemKind::UInt8Q, {4}, 0.25f, 128, {128, 130, 131, 125}));
  TypeRef uTy = mod().uniqueType(ElemKind::UInt8Q, {4}, 0.5f, 100);
  checks_.push_back({save(F()->createSlice("us", uTy, u, {0}, {4}), "us"), {100, 101, 102, 98},
                     "uint8 slice"});
  auto *w = input("w", qTensor(ElemKind::Int32Q, {2}, 1.0f, 0, {2147483647, -5}));
  TypeRef wTy = mod().uniqueType(ElemKind::Int32Q, {2, 2}, 0.5f, 0);
  checks_.push_back({save(F()->createBroadcast("wb", wTy, w, {2, 2}), "wb"),
                     {2147483647, -10, 2147483647, -10}, "int32 broadcast"});
  runAndCheck();
}

// ------------------------------------------------------------------ Slice

KILN_DATA_KIND_TEST(SliceEdges, {
  std::string n = elemKindName(k);
  auto *x = input(n, patternTensor(k, {3, 4}));
  auto p = [&](size_t r, size_t c) { return pattern(k, r * 4 + c); };
  checks_.push_back({save(F()->createSlice("last_col", x, {0, 3}, {3, 4})),
                     {p(0, 3), p(1, 3), p(2, 3)},
                     n + " last column"});
  checks_.push_back({save(F()->createSlice("last_row", x, {2, 0}, {3, 4})),
                     {p(2, 0), p(2, 1), p(2, 2), p(2, 3)},
                     n + " last row"});
  checks_.push_back({save(F()->createSlice("inner", x, {1, 1}, {3, 3})),
                     {p(1, 1), p(1, 2), p(2, 1), p(2, 2)},
                     n + " inner"});
  std::vector<double> all;
  for (size_t i = 0; i < 12; i++)
    all.push_back(pattern(k, i));
  checks_.push_back({save(F()->createSlice("all", x, {0, 0}, {3, 4})), all, n + " all"});
  runAndCheck();
})

TEST_P(DataTest, Slice4DWithSizeOneDims) {
  auto *x = input("x", ElemKind::Float, {1, 2, 1, 3}, {1, 2, 3, 4, 5, 6});
  SaveNode *s = save(F()->createSlice("s", x, {0, 1, 0, 1}, {1, 2, 1, 3}));
  if (!run())
    return;
  EXPECT_EQ(output(s).dims(), Dims({1, 1, 1, 2}));
  expectValues(output(s), {5, 6}, 0, 0);
}

// ------------------------------------------------------------------ Transpose

TEST_P(DataTest, Transpose2DAnd3D) {
  auto *a = input("a", ElemKind::Float, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto *b = input("b", ElemKind::Float, {2, 3, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  SaveNode *t2 = save(F()->createTranspose("t2", a, {1, 0}), "t2");
  SaveNode *t3 = save(F()->createTranspose("t3", b, {2, 0, 1}), "t3");
  if (!run())
    return;
  expectValues(output(t2), {1, 4, 2, 5, 3, 6}, 0, 0);
  // t3[i][j][k] = b[j][k][i]; b[j][k][i] = 6j + 2k + i.
  EXPECT_EQ(output(t3).dims(), Dims({2, 2, 3}));
  expectValues(output(t3), {0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11}, 0, 0);
}

KILN_DATA_KIND_TEST(Transpose6D, {
  const Dims inDims = {2, 3, 1, 2, 2, 3};
  const std::vector<dim_t> shuffle = {5, 3, 0, 4, 2, 1};
  Dims outDims;
  for (dim_t s : shuffle)
    outDims.push_back(inDims[s]);
  auto *x = input(elemKindName(k), patternTensor(k, inDims));
  std::vector<double> expected;
  forEach(outDims, [&](const std::vector<dim_t> &o) {
    std::vector<dim_t> in(6);
    for (size_t i = 0; i < 6; i++)
      in[shuffle[i]] = o[i];
    expected.push_back(pattern(k, offsetOf(inDims, in)));
  });
  checks_.push_back({save(F()->createTranspose("t", x, shuffle)), expected, elemKindName(k)});
  runAndCheck();
  if (!HasFailure() && !IsSkipped()) {
    EXPECT_EQ(output(checks_[0].save).dims(), outDims);
  }
})

// ------------------------------------------------------------------ Gather

TEST_P(DataTest, GatherInt32AndInt64NegativeIndices) {
  auto *data = input("data", ElemKind::Float, {3, 2}, {1, 2, 3, 4, 5, 6});
  auto *i32 = input("i32", ElemKind::Int32I, {3}, {2, 0, -1});
  auto *i64 = input("i64", ElemKind::Int64I, {4}, {-3, 1, 1, -2});
  SaveNode *g32 = save(F()->createGather("g32", data, i32, 0), "g32");
  SaveNode *g64 = save(F()->createGather("g64", data, i64, 0), "g64");
  if (!run())
    return;
  EXPECT_EQ(output(g32).dims(), Dims({3, 2}));
  expectValues(output(g32), {5, 6, 1, 2, 5, 6}, 0, 0);
  expectValues(output(g64), {1, 2, 3, 4, 3, 4, 3, 4}, 0, 0);
}

TEST_P(DataTest, GatherLastAxisWith2DIndices) {
  auto *data = input("data", ElemKind::Float, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto *idx = input("idx", ElemKind::Int64I, {2, 2}, {0, -1, 2, 1});
  SaveNode *s = save(F()->createGather("g", data, idx, -1));
  if (!run())
    return;
  EXPECT_EQ(output(s).dims(), Dims({2, 2, 2}));
  expectValues(output(s), {1, 3, 3, 2, 4, 6, 6, 5}, 0, 0);
}

/// Gather of every kind, along axis 1 with Int32 indices (one negative) and along axis 0
/// with Int64 indices.
void DataTest::gatherKindCase(ElemKind k) {
  std::string n = elemKindName(k);
  auto *data = input(n, patternTensor(k, {2, 4}));
  auto *idx = input(n + "idx", ElemKind::Int32I, {3}, {3, -4, 1});
  auto *idx64 = input(n + "idx64", ElemKind::Int64I, {2, 2}, {1, -2, -1, 1});
  auto p = [&](size_t i) { return pattern(k, i); };
  std::vector<double> rows;
  for (size_t r : {1, 0, 1, 1})
    for (size_t c = 0; c < 4; c++)
      rows.push_back(p(r * 4 + c));
  checks_.push_back({save(F()->createGather("g", data, idx, 1), "g"),
                       {p(3), p(0), p(1), p(7), p(4), p(5)},
                       n + " axis 1"});
  checks_.push_back({save(F()->createGather("g0", data, idx64, 0), "g0"), rows,
                       n + " axis 0"});
  runAndCheck();
}

KILN_DATA_TEST_EVERY_KIND(GatherKind, gatherKindCase)

/// Gather from data of rank 1 to 4 along every axis (negative and positive), with
/// Int32 and Int64 indices of rank 0 to 2; expectations by explicit index arithmetic.
TEST_P(DataTest, GatherRanksAndAxes) {
  const std::vector<Dims> shapes = {{5}, {3, 4}, {2, 3, 4}, {2, 1, 3, 2}};
  const std::vector<std::pair<ElemKind, Dims>> indexShapes = {
      {ElemKind::Int32I, {}}, {ElemKind::Int64I, {3}}, {ElemKind::Int32I, {2, 2}}};
  unsigned n = 0;
  for (const Dims &dims : shapes) {
    for (size_t axis = 0; axis < dims.size(); axis++) {
      for (const auto &is : indexShapes) {
        std::string name = "c" + std::to_string(n++);
        // Indices cycle through the axis, every other one written negatively.
        Tensor idx(is.first, is.second);
        std::vector<int64_t> iv;
        for (size_t i = 0; i < idx.size(); i++) {
          int64_t v = int64_t((i * 2 + 1) % dims[axis]);
          iv.push_back(v);
          idx.setFromDouble(i, double(i % 2 ? v - int64_t(dims[axis]) : v));
        }
        auto *data = input(name + "d", patternTensor(ElemKind::Int64I, dims, n));
        auto *ip = input(name + "i", std::move(idx));
        // Axis given negatively for the odd cases.
        int64_t a = n % 2 ? int64_t(axis) - int64_t(dims.size()) : int64_t(axis);
        Dims outDims;
        for (size_t d = 0; d < axis; d++)
          outDims.push_back(dims[d]);
        for (dim_t d : is.second)
          outDims.push_back(d);
        for (size_t d = axis + 1; d < dims.size(); d++)
          outDims.push_back(dims[d]);
        std::vector<double> want;
        const size_t count = iv.size();
        forEach(outDims, [&](const std::vector<dim_t> &o) {
          // o = [data dims before axis] [index dims] [data dims after axis]
          size_t r = is.second.size();
          size_t flatIdx = 0;
          for (size_t d = 0; d < r; d++)
            flatIdx = flatIdx * is.second[d] + o[axis + d];
          std::vector<dim_t> in;
          for (size_t d = 0; d < axis; d++)
            in.push_back(o[d]);
          in.push_back(dim_t(iv[flatIdx]));
          for (size_t d = axis + 1; d < dims.size(); d++)
            in.push_back(o[d - 1 + r]);
          want.push_back(pattern(ElemKind::Int64I, n + offsetOf(dims, in)));
        });
        (void)count;
        checks_.push_back({save(F()->createGather(name, data, ip, a), name), want,
                           name + " rank " + std::to_string(dims.size()) + " axis " +
                               std::to_string(a)});
      }
    }
  }
  runAndCheck();
}

TEST_P(DataTest, GatherOutOfRangeIndexIsAnError) {
  unsigned n = 0;
  for (double bad : {3.0, -4.0, 1e12}) {
    for (ElemKind k : {ElemKind::Int32I, ElemKind::Int64I}) {
      if (k == ElemKind::Int32I && bad > 1e9)
        continue;
      SCOPED_TRACE(std::string(elemKindName(k)) + " index " + std::to_string(bad));
      Function *f = mod().createFunction("gather_" + std::to_string(n++));
      Placeholder *data = mod().createPlaceholder(ElemKind::Float, {3, 2}, "data");
      Placeholder *idx = mod().createPlaceholder(k, {2}, "idx");
      f->createSave("out", f->createGather("lookup", data, idx, 0));
      std::vector<std::pair<Placeholder *, Tensor>> in;
      in.emplace_back(data, Tensor(ElemKind::Float, {3, 2}, {1, 2, 3, 4, 5, 6}));
      in.emplace_back(idx, Tensor(k, {2}, {0, bad}));
      bool skipped;
      Error e = runRaw(f, std::move(in), skipped);
      if (skipped)
        GTEST_SKIP() << e.message();
      ASSERT_TRUE(bool(e)) << "an out-of-range index must fail";
      EXPECT_NE(e.message().find("lookup"), std::string::npos) << e.message();
      // Every backend names the bad index, its position and the axis it misses.
      EXPECT_NE(e.message().find("at position 1 of Indices"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("out of range for axis 0 of size 3"), std::string::npos)
          << e.message();
    }
  }
}

// ------------------------------------------------------------------ Tile

TEST_P(DataTest, Tile) {
  auto *x = input("x", ElemKind::Float, {2, 1}, {1, 2});
  auto *y = input("y", ElemKind::Int64I, {1, 2}, {5, 6});
  SaveNode *s = save(F()->createTile("tile", x, {2, 3}), "tile");
  SaveNode *id = save(F()->createTile("same", y, {1, 1}), "same");
  if (!run())
    return;
  EXPECT_EQ(output(s).dims(), Dims({4, 3}));
  expectValues(output(s), {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2}, 0, 0);
  expectValues(output(id), {5, 6}, 0, 0);
}

KILN_DATA_KIND_TEST(Tile, {
  auto *x = input(elemKindName(k), patternTensor(k, {1, 3}));
  auto p = [&](size_t i) { return pattern(k, i); };
  checks_.push_back({save(F()->createTile("t", x, {2, 2})),
                     {p(0), p(1), p(2), p(0), p(1), p(2), p(0), p(1), p(2), p(0), p(1), p(2)},
                     elemKindName(k)});
  runAndCheck();
})

// ------------------------------------------------------------------ Pad

TEST_P(DataTest, PadAsymmetric) {
  auto *x = input("x", ElemKind::Float, {2, 2}, {1, 2, 3, 4});
  // One row before, two columns after.
  SaveNode *s = save(F()->createPad("pad", x, {1, 0, 0, 2}, 9.0f));
  if (!run())
    return;
  EXPECT_EQ(output(s).dims(), Dims({3, 4}));
  expectValues(output(s), {9, 9, 9, 9, 1, 2, 9, 9, 3, 4, 9, 9}, 0, 0);
}

TEST_P(DataTest, Pad3DNegativeValue) {
  auto *x = input("x", ElemKind::Float, {1, 2, 1}, {1, 2});
  SaveNode *s = save(F()->createPad("pad", x, {0, 1, 1, 1, 0, 0}, -1.5f));
  if (!run())
    return;
  EXPECT_EQ(output(s).dims(), Dims({2, 3, 2}));
  expectValues(output(s), {-1.5, -1.5, -1.5, 1, -1.5, 2, -1.5, -1.5, -1.5, -1.5, -1.5, -1.5},
               0, 0);
}

void DataTest::padKindCase(ElemKind k) {
  std::string n = elemKindName(k);
  Tensor x(typeOf(k, {2}));
  x.setFromDouble(0, k == ElemKind::Bool ? 0 : 7);
  x.setFromDouble(1, k == ElemKind::Bool ? 0 : 8);
  auto *in = input(n, std::move(x));
  std::vector<double> want = k == ElemKind::Bool ? std::vector<double>{1, 0, 0, 1, 1}
                                                 : std::vector<double>{1, 7, 8, 1, 1};
  checks_.push_back({save(F()->createPad("p", in, {1, 2}, 1.0f)), want, n});
  runAndCheck();
}

KILN_DATA_TEST_EVERY_KIND(PadKind, padKindCase)

// Pad of a 2-D Int32 and Int64 tensor on both sides of both dimensions; the value is
// rounded half to even (2.5 -> 2) as Splat's is.
TEST_P(DataTest, PadIntegers2D) {
  auto *a = input("a", ElemKind::Int32I, {2, 2}, {1, 2, 3, 4});
  auto *b = input("b", ElemKind::Int64I, {1, 3}, {-5, 6, 7});
  SaveNode *pa = save(F()->createPad("pa", a, {1, 0, 0, 1}, -2.5f), "pa");
  SaveNode *pb = save(F()->createPad("pb", b, {0, 1, 1, 0}, 3.0f), "pb");
  if (!run(0, 0))
    return;
  EXPECT_EQ(output(pa).dims(), Dims({3, 3}));
  expectValues(output(pa), {-2, -2, -2, 1, 2, -2, 3, 4, -2}, 0, 0);
  EXPECT_EQ(output(pb).dims(), Dims({2, 4}));
  expectValues(output(pb), {3, -5, 6, 7, 3, 3, 3, 3}, 0, 0);
}

TEST_P(DataTest, PadQuantizedValueIsRaw) {
  Tensor t(Type(ElemKind::Int8Q, {2}, 0.5f, 3));
  t.getHandle<int8_t>().set({10, 11});
  auto *x = input("x", std::move(t));
  // Value is the raw integer, as for Splat (Pad lowers to InsertTensor into a Splat).
  SaveNode *zero = save(F()->createPad("zero", x, {1, 0}, 0.0f), "zero");
  SaveNode *five = save(F()->createPad("five", x, {0, 1}, 5.0f), "five");
  SaveNode *big = save(F()->createPad("big", x, {1, 0}, 1000.0f), "big");
  if (!run())
    return;
  expectValues(output(zero), {0, 10, 11}, 0, 0);
  expectValues(output(five), {10, 11, 5}, 0, 0);
  expectValues(output(big), {127, 10, 11}, 0, 0);
}

// ------------------------------------------------------------------ Broadcast

TEST_P(DataTest, BroadcastSizeOneAndRankExpansion) {
  auto *row = input("row", ElemKind::Float, {3}, {1, 2, 3});
  auto *col = input("col", ElemKind::Float, {2, 1}, {4, 5});
  auto *one = input("one", ElemKind::Float, {1}, {6});
  auto *scalar = input("scalar", ElemKind::Float, {}, {7});
  auto *mid = input("mid", ElemKind::Float, {1, 3, 1}, {1, 2, 3});
  SaveNode *r = save(F()->createBroadcast("r", row, {2, 3}), "r");
  SaveNode *c = save(F()->createBroadcast("c", col, {2, 3}), "c");
  SaveNode *o = save(F()->createBroadcast("o", one, {2, 1, 2}), "o");
  SaveNode *s = save(F()->createBroadcast("s", scalar, {2, 2}), "s");
  SaveNode *m = save(F()->createBroadcast("m", mid, {2, 1, 3, 2}), "m");
  if (!run())
    return;
  expectValues(output(r), {1, 2, 3, 1, 2, 3}, 0, 0);
  expectValues(output(c), {4, 4, 4, 5, 5, 5}, 0, 0);
  expectValues(output(o), {6, 6, 6, 6}, 0, 0);
  expectValues(output(s), {7, 7, 7, 7}, 0, 0);
  EXPECT_EQ(output(m).dims(), Dims({2, 1, 3, 2}));
  expectValues(output(m), {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}, 0, 0);
}

KILN_DATA_KIND_TEST(Broadcast, {
  auto *x = input(elemKindName(k), patternTensor(k, {2, 1}));
  auto p = [&](size_t i) { return pattern(k, i); };
  checks_.push_back({save(F()->createBroadcast("b", x, {2, 2, 3})),
                     {p(0), p(0), p(0), p(1), p(1), p(1), p(0), p(0), p(0), p(1), p(1), p(1)},
                     elemKindName(k)});
  runAndCheck();
})

// ------------------------------------------------------------------ Splat

void DataTest::splatKindCase(ElemKind k) {
  // Quantized kinds hold Value as the raw integer, whatever the scale and offset.
  TypeRef ty = mod().uniqueType(typeOf(k, {2, 2}));
  double want = k == ElemKind::Bool ? 1 : 3;
  checks_.push_back({save(F()->createSplat("splat", ty, 3.0f), "splat"),
                       {want, want, want, want},
                       elemKindName(k)});
  runAndCheck();
}

KILN_DATA_TEST_EVERY_KIND(SplatKind, splatKindCase)

TEST_P(DataTest, SplatRoundsAndSaturates) {
  TypeRef f16 = mod().uniqueType(ElemKind::Float16, {1});
  checks_.push_back({save(F()->createSplat("third", f16, 0.1f), "third"), {0.0999755859375},
                     "f16 0.1"});
  TypeRef i32 = mod().uniqueType(ElemKind::Int32I, {3});
  checks_.push_back({save(F()->createSplat("big", i32, 1e10f), "big"),
                     {2147483647, 2147483647, 2147483647},
                     "saturating"});
  TypeRef u8 = mod().uniqueType(ElemKind::UInt8Q, {1}, 0.1f, 128);
  checks_.push_back({save(F()->createSplat("neg", u8, -5.0f), "neg"), {0}, "u8 saturating"});
  TypeRef i64 = mod().uniqueType(ElemKind::Int64I, {2});
  checks_.push_back({save(F()->createSplat("half", i64, 2.5f), "half"), {2, 2}, "half to even"});
  TypeRef i8 = mod().uniqueType(ElemKind::Int8Q, {1}, 1.0f, 0);
  checks_.push_back({save(F()->createSplat("odd", i8, -3.5f), "odd"), {-4}, "i8 half to even"});
  runAndCheck();
}

// ------------------------------------------------------------------ ConvertTo

// ConvertTo from each of the six plain kinds to each, one test case per source kind.
#define KILN_CONVERT_FROM_TEST(SFX, KIND)                                                     \
  TEST_P(DataTest, ConvertToEveryPairFrom##SFX) { convertFromKind(ElemKind::KIND); }
KILN_CONVERT_FROM_TEST(Float, Float)
KILN_CONVERT_FROM_TEST(Float16, Float16)
KILN_CONVERT_FROM_TEST(BFloat16, BFloat16)
KILN_CONVERT_FROM_TEST(Int32, Int32I)
KILN_CONVERT_FROM_TEST(Int64, Int64I)
KILN_CONVERT_FROM_TEST(Bool, Bool)

void DataTest::convertFromKind(ElemKind from) {
  const ElemKind kinds[] = {ElemKind::Float,  ElemKind::Float16, ElemKind::BFloat16,
                            ElemKind::Int32I, ElemKind::Int64I,  ElemKind::Bool};
  auto *x = input(elemKindName(from), Tensor(from, {4}, {0, 1, 2, 3}));
  for (ElemKind to : kinds) {
    std::vector<double> want = from == ElemKind::Bool || to == ElemKind::Bool
                                   ? std::vector<double>{0, 1, 1, 1}
                                   : std::vector<double>{0, 1, 2, 3};
    TypeRef ty = mod().uniqueType(to, {4});
    checks_.push_back({save(F()->createConvertTo("cvt", ty, x)), want,
                       std::string(elemKindName(from)) + "->" + elemKindName(to)});
  }
  runAndCheck();
}

TEST_P(DataTest, ConvertFloatToIntegersRoundsEvenAndSaturates) {
  auto *x = input("x", ElemKind::Float, {11},
                  {0.5, 1.5, 2.5, -0.5, -1.5, -2.6, 3e9, -3e9, kNaN, kInf, 1e19});
  SaveNode *i32 = save(F()->createConvertTo("i32", mod().uniqueType(ElemKind::Int32I, {11}), x),
                       "i32");
  SaveNode *i64 = save(F()->createConvertTo("i64", mod().uniqueType(ElemKind::Int64I, {11}), x),
                       "i64");
  if (!run())
    return;
  const double i32Max = 2147483647, i32Min = -2147483648.0;
  expectValues(output(i32), {0, 2, 2, 0, -2, -3, i32Max, i32Min, 0, i32Max, i32Max}, 0, 0);
  const Tensor &t = output(i64);
  const int64_t *v = t.getHandle<int64_t>().begin();
  const int64_t want[] = {0, 2, 2, 0, -2, -3, 3000000000, -3000000000, 0,
                          std::numeric_limits<int64_t>::max(),
                          std::numeric_limits<int64_t>::max()};
  for (size_t i = 0; i < 11; i++)
    EXPECT_EQ(v[i], want[i]) << "element " << i;
}

TEST_P(DataTest, ConvertToBool) {
  auto *f = input("f", ElemKind::Float, {5}, {0, -0.0, 0.1, kNaN, -3});
  auto *i = input("i", ElemKind::Int64I, {3}, {0, 5, -1});
  auto *h = input("h", ElemKind::Float16, {2}, {0, 1e-7}); // 1e-7 is a float16 subnormal
  SaveNode *fb = save(F()->createConvertTo("fb", mod().uniqueType(ElemKind::Bool, {5}), f), "fb");
  SaveNode *ib = save(F()->createConvertTo("ib", mod().uniqueType(ElemKind::Bool, {3}), i), "ib");
  SaveNode *hb = save(F()->createConvertTo("hb", mod().uniqueType(ElemKind::Bool, {2}), h), "hb");
  if (!run())
    return;
  expectValues(output(fb), {0, 0, 1, 1, 1}, 0, 0);
  expectValues(output(ib), {0, 1, 1}, 0, 0);
  expectValues(output(hb), {0, 1}, 0, 0);
}

TEST_P(DataTest, ConvertTo16BitFloatsRoundsOnce) {
  const double u = std::ldexp(1.0, -11); // half a float16 ulp at 1
  const double b = std::ldexp(1.0, -8);  // half a bfloat16 ulp at 1
  auto *x = input("x", ElemKind::Float, {7}, {1 + u, 1 + 3 * u, 70000, 65519, 65520, -1e-8, 1 + b});
  auto *y = input("y", ElemKind::Float, {3}, {1 + b, 1 + 3 * b, 3e38});
  // 2^24 + 2^16 + 1 lies just above a bfloat16 midpoint; rounding through float (to the
  // even neighbour 2^24 + 2^16) and then to bfloat16 would wrongly give 2^24.
  auto *n = input("n", ElemKind::Int32I, {5}, {2049, 2051, 257, 259, 16842753});
  auto *l = input("l", ElemKind::Int64I, {2}, {16842753, 1099511627777.0});
  SaveNode *xh = save(F()->createConvertTo("xh", mod().uniqueType(ElemKind::Float16, {7}), x), "xh");
  SaveNode *yb = save(F()->createConvertTo("yb", mod().uniqueType(ElemKind::BFloat16, {3}), y), "yb");
  SaveNode *nh = save(F()->createConvertTo("nh", mod().uniqueType(ElemKind::Float16, {5}), n), "nh");
  SaveNode *nb = save(F()->createConvertTo("nb", mod().uniqueType(ElemKind::BFloat16, {5}), n), "nb");
  SaveNode *lb = save(F()->createConvertTo("lb", mod().uniqueType(ElemKind::BFloat16, {2}), l), "lb");
  if (!run())
    return;
  expectValues(output(xh), {1, 1 + 4 * u, kInf, 65504, kInf, -0.0, 1 + b}, 0, 0);
  EXPECT_TRUE(std::signbit(output(xh).getAsDouble(5)));
  expectValues(output(yb), {1, 1 + 4 * b, 3.00405527047391e38}, 0, 0);
  expectValues(output(nh), {2048, 2052, 257, 259, kInf}, 0, 0);
  expectValues(output(nb), {2048, 2048, 256, 260, 16908288}, 0, 0);
  expectValues(output(lb), {16908288, 1099511627776.0}, 0, 0);
}

TEST_P(DataTest, ConvertBetweenFloatKindsAndIntegers) {
  auto *h = input("h", ElemKind::Float16, {4}, {0.1, 2.5, -3.5, 65504});
  auto *bf = input("bf", ElemKind::BFloat16, {3}, {-2.5, 1.5, 3e9});
  auto *l = input("l", ElemKind::Int64I, {4}, {5e9, -5e9, -7, 16777217});
  auto *i = input("i", ElemKind::Int32I, {2}, {16777217, -2147483648.0});
  SaveNode *hf = save(F()->createConvertTo("hf", mod().uniqueType(ElemKind::Float, {4}), h), "hf");
  SaveNode *hi = save(F()->createConvertTo("hi", mod().uniqueType(ElemKind::Int32I, {4}), h), "hi");
  SaveNode *bh = save(F()->createConvertTo("bh", mod().uniqueType(ElemKind::Float16, {3}), bf), "bh");
  SaveNode *bl = save(F()->createConvertTo("bl", mod().uniqueType(ElemKind::Int64I, {3}), bf), "bl");
  SaveNode *li = save(F()->createConvertTo("li", mod().uniqueType(ElemKind::Int32I, {4}), l), "li");
  SaveNode *il = save(F()->createConvertTo("il", mod().uniqueType(ElemKind::Int64I, {2}), i), "il");
  SaveNode *iff = save(F()->createConvertTo("if", mod().uniqueType(ElemKind::Float, {2}), i), "if");
  if (!run())
    return;
  expectValues(output(hf), {0.0999755859375, 2.5, -3.5, 65504}, 0, 0);
  expectValues(output(hi), {0, 2, -4, 65504}, 0, 0);
  expectValues(output(bh), {-2.5, 1.5, kInf}, 0, 0);
  expectValues(output(bl), {-2, 2, 3003121664.0}, 0, 0);
  expectValues(output(li), {2147483647, -2147483648.0, -7, 16777217}, 0, 0);
  expectValues(output(il), {16777217, -2147483648.0}, 0, 0);
  expectValues(output(iff), {16777216, -2147483648.0}, 0, 0);
}

KILN_INSTANTIATE_BACKEND_TESTS(DataTest);

} // namespace kiln::test
