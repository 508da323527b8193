// Operator tests of the nodes added for ONNX breadth: the trigonometric and hyperbolic
// functions, Mod, BitShift, integer Pow, CumSum, GatherElements, ScatterElements,
// ScatterND, GatherND and integer MaxPool (index operators on every element kind, every
// reduction, duplicate and negative indices, out-of-range errors). Expectations are hand-computed (or <cmath> in double for the
// trigonometric functions). Backends without these nodes skip (isOpSupported).

#include "BackendTestUtils.h"

#include <cmath>
#include <functional>

namespace kiln::test {

class OnnxOpsTest : public BackendTest {};

TEST_P(OnnxOpsTest, TrigonometricAndHyperbolic) {
  using Fn = std::function<NodeValue(Function *, NodeValue)>;
  struct Case {
    const char *name;
    Fn build;
    double (*ref)(double);
    std::vector<double> in;
  };
  std::vector<Case> cases = {
      {"sin", [](Function *f, NodeValue x) { return NodeValue(f->createSin("s", x)); }, std::sin, {0, 0.5, -1}},
      {"cos", [](Function *f, NodeValue x) { return NodeValue(f->createCos("s", x)); }, std::cos, {0, 0.5, -1}},
      {"tan", [](Function *f, NodeValue x) { return NodeValue(f->createTan("s", x)); }, std::tan, {0, 0.5, -1}},
      {"asin", [](Function *f, NodeValue x) { return NodeValue(f->createAsin("s", x)); }, std::asin, {0, 0.5, -1}},
      {"acos", [](Function *f, NodeValue x) { return NodeValue(f->createAcos("s", x)); }, std::acos, {0, 0.5, -1}},
      {"atan", [](Function *f, NodeValue x) { return NodeValue(f->createAtan("s", x)); }, std::atan, {0, 0.5, -1}},
      {"sinh", [](Function *f, NodeValue x) { return NodeValue(f->createSinh("s", x)); }, std::sinh, {0, 0.5, -1}},
      {"cosh", [](Function *f, NodeValue x) { return NodeValue(f->createCosh("s", x)); }, std::cosh, {0, 0.5, -1}},
      {"asinh", [](Function *f, NodeValue x) { return NodeValue(f->createAsinh("s", x)); }, std::asinh, {0, 0.5, -1}},
      {"acosh", [](Function *f, NodeValue x) { return NodeValue(f->createAcosh("s", x)); }, std::acosh, {1, 2, 3}},
      {"atanh", [](Function *f, NodeValue x) { return NodeValue(f->createAtanh("s", x)); }, std::atanh, {0, 0.5, -0.5}},
  };
  std::vector<std::pair<SaveNode *, std::vector<double>>> checks;
  for (const Case &c : cases) {
    Tensor t(ElemKind::Float, {3});
    for (size_t i = 0; i < 3; i++)
      t.setFromDouble(i, c.in[i]);
    auto *x = input(std::string(c.name) + ".x", std::move(t));
    std::vector<double> e;
    for (double v : c.in)
      e.push_back(c.ref(double(float(v))));
    checks.push_back({save(c.build(F(), x), c.name), e});
  }
  if (!run())
    return;
  for (auto &[s, e] : checks) {
    SCOPED_TRACE(s->getName());
    expectValues(output(s), e, 1e-6, 1e-6);
  }
  // Hand-checked anchors: sin(0.5), acos(-1), atanh(0.5).
  expectValues(output(checks[0].first), {0, 0.479425538604203, -0.8414709848078965}, 1e-6, 1e-6);
  expectValues(output(checks[4].first), {1.5707963267948966, 1.0471975511965979, 3.141592653589793},
               1e-6, 1e-6);
  expectValues(output(checks[10].first), {0, 0.5493061443340549, -0.5493061443340549}, 1e-6, 1e-6);
}

TEST_P(OnnxOpsTest, ModSignsIntegerAndFloat) {
  auto *a = input("a", ElemKind::Int32I, {6}, {5, -5, 5, -5, 7, 0});
  auto *b = input("b", ElemKind::Int32I, {6}, {3, 3, -3, -3, 7, 2});
  auto *fa = input("fa", ElemKind::Float, {3}, {5.5, -5.5, 5.5});
  auto *fb = input("fb", ElemKind::Float, {3}, {2, 2, -2});
  auto *la = input("la", ElemKind::Int64I, {2}, {-7, 9});
  auto *lb = input("lb", ElemKind::Int64I, {2}, {2, -4});
  SaveNode *py = save(F()->createMod("py", a, b, false), "py");
  SaveNode *c = save(F()->createMod("c", a, b, true), "c");
  SaveNode *f = save(F()->createMod("f", fa, fb, true), "f");
  SaveNode *l = save(F()->createMod("l", la, lb, false), "l");
  if (!run(0, 0))
    return;
  expectValues(output(py), {2, 1, -1, -2, 0, 0}, 0, 0);
  expectValues(output(c), {2, -2, 2, -2, 0, 0}, 0, 0);
  expectValues(output(f), {1.5, -1.5, 1.5}, 0, 0);
  expectValues(output(l), {1, -3}, 0, 0);
}

/// The Interpreter reports integer x mod 0; the CPU backend defines it as 0.
TEST_P(OnnxOpsTest, ModByZeroIsAnError) {
  Function *f = mod().createFunction("modzero");
  auto *a = mod().createPlaceholder(ElemKind::Int32I, {2}, "za");
  auto *b = mod().createPlaceholder(ElemKind::Int32I, {2}, "zb");
  f->createSave("zy", f->createMod("m", a, b, false));
  bool skipped = false;
  std::vector<std::pair<Placeholder *, Tensor>> in;
  in.emplace_back(a, makeTensor(Type(ElemKind::Int32I, {2}), {1, 2}));
  in.emplace_back(b, makeTensor(Type(ElemKind::Int32I, {2}), {1, 0}));
  Error e = runRaw(f, std::move(in), skipped);
  if (skipped)
    GTEST_SKIP() << e.message();
  // The CPU backend's kernels cannot stop a run: x mod 0 is 0 there, as x / 0 (NodeTable.cpp).
  if (GetParam() == "CPU") {
    EXPECT_FALSE(bool(e)) << e.message();
    return;
  }
  ASSERT_TRUE(e);
  EXPECT_NE(e.message().find("'m'"), std::string::npos) << e.message();
}

TEST_P(OnnxOpsTest, BitShiftBothDirections) {
  auto *a = input("a", ElemKind::Int64I, {3}, {16, 4, 1});
  auto *b = input("b", ElemKind::Int64I, {3}, {1, 2, 3});
  auto *c = input("c", ElemKind::Int32I, {3}, {-1, 5, 5});
  auto *d = input("d", ElemKind::Int32I, {3}, {28, 32, 0});
  SaveNode *l = save(F()->createBitShift("l", a, b, true), "l");
  SaveNode *r = save(F()->createBitShift("r", a, b, false), "r");
  SaveNode *u = save(F()->createBitShift("u", c, d, false), "u");
  if (!run(0, 0))
    return;
  expectValues(output(l), {32, 16, 8}, 0, 0);
  expectValues(output(r), {8, 1, 0}, 0, 0);
  // -1 is 0xffffffff: a logical shift by 28 leaves 15; a shift by the width gives 0.
  expectValues(output(u), {15, 0, 5}, 0, 0);
}

TEST_P(OnnxOpsTest, IntegerPow) {
  auto *a = input("a", ElemKind::Int32I, {6}, {2, 3, -2, 5, 1, -1});
  auto *b = input("b", ElemKind::Int32I, {6}, {3, 0, 3, -1, -2, -3});
  SaveNode *s = save(F()->createPow("p", a, b));
  if (!run(0, 0))
    return;
  expectValues(output(s), {8, 1, -8, 0, 1, -1}, 0, 0);
}

/// Powers that wrap (computed with Python's exact integers mod 2^width), and exponent 0.
TEST_P(OnnxOpsTest, IntegerPowWraps) {
  auto *a = input("a", ElemKind::Int32I, {3}, {2, 7, -9});
  auto *b = input("b", ElemKind::Int32I, {3}, {31, 20, 0});
  auto *la = input("la", ElemKind::Int64I, {3}, {3, -3, -1});
  auto *lb = input("lb", ElemKind::Int64I, {3}, {40, 39, 7});
  SaveNode *s = save(F()->createPow("p", a, b), "p");
  SaveNode *l = save(F()->createPow("l", la, lb), "l");
  if (!run(0, 0))
    return;
  expectValues(output(s), {-2147483648.0, -1199696159.0, 1}, 0, 0);
  const Tensor &t = output(l);
  auto h = t.getHandle<int64_t>();
  EXPECT_EQ(h.raw(0), -6289078614652622815LL);
  EXPECT_EQ(h.raw(1), -4052555153018976267LL);
  EXPECT_EQ(h.raw(2), -1);
}

/// Mod on int64 with Fmod, MIN % -1, float x mod 0 (NaN) and negative or too wide shifts,
/// inside one element-wise chain with other operators (the CPU fuses them into one loop).
TEST_P(OnnxOpsTest, ModAndBitShiftEdgesInAChain) {
  const double i64Min = -9223372036854775808.0;
  auto *a = input("a", ElemKind::Int64I, {4}, {-7, 7, i64Min, 9});
  auto *b = input("b", ElemKind::Int64I, {4}, {3, -3, -1, 4});
  auto *fa = input("fa", ElemKind::Float, {3}, {1, -7.5, 4});
  auto *fb = input("fb", ElemKind::Float, {3}, {0, 2, 4});
  auto *sa = input("sa", ElemKind::Int64I, {4}, {1, 1, -8, 12});
  auto *sb = input("sb", ElemKind::Int64I, {4}, {-1, 64, 63, 2});
  SaveNode *c = save(F()->createMod("c", a, b, true), "c");
  SaveNode *py = save(F()->createMod("py", F()->createAdd("a1", a, b), b, false), "py");
  SaveNode *f = save(F()->createMod("f", fa, fb, false), "f");
  SaveNode *l = save(F()->createBitShift("l", sa, sb, true), "l");
  SaveNode *r = save(F()->createBitShift("r", F()->createAdd("s1", sa, sa), sb, false), "r");
  if (!run(0, 0))
    return;
  expectValues(output(c), {-1, 1, 0, 1}, 0, 0);
  // (a + b) % b in Python: -4 % 3 = 2, 4 % -3 = -2, (MIN - 1 wraps to MAX) % -1 = 0, 13 % 4.
  expectValues(output(py), {2, -2, 0, 1}, 0, 0);
  auto fh = output(f).getHandle<float>();
  EXPECT_TRUE(std::isnan(fh.raw(0)));
  EXPECT_EQ(fh.raw(1), 0.5f); // -7.5 = -4 * 2 + 0.5
  EXPECT_EQ(fh.raw(2), 0.0f);
  auto lh = output(l).getHandle<int64_t>();
  EXPECT_EQ(lh.raw(0), 0);  // negative amount
  EXPECT_EQ(lh.raw(1), 0);  // the width
  EXPECT_EQ(lh.raw(2), 0);  // -8 << 63: the low bit of -8 is 0
  EXPECT_EQ(lh.raw(3), 48);
  auto rh = output(r).getHandle<int64_t>();
  EXPECT_EQ(rh.raw(0), 0);
  EXPECT_EQ(rh.raw(1), 0);
  EXPECT_EQ(rh.raw(2), 1);  // -16 >> 63 on the bit pattern
  EXPECT_EQ(rh.raw(3), 6);
}

/// The trigonometric functions inside one chain: sin(x) * cos(x) + atan(x) - tanh(x), against
/// <cmath> in double.
TEST_P(OnnxOpsTest, TrigonometricChain) {
  std::vector<double> xs = {-2.5, -1, -0.25, 0, 0.3, 1.2, 3, 40};
  Tensor t(ElemKind::Float, {dim_t(xs.size())});
  for (size_t i = 0; i < xs.size(); i++)
    t.setFromDouble(i, xs[i]);
  auto *x = input("x", std::move(t));
  NodeValue y = F()->createMul("m", F()->createSin("s", x), F()->createCos("c", x));
  y = F()->createAdd("a", y, F()->createAtan("t", x));
  y = F()->createSub("d", y, F()->createTanh("h", x));
  SaveNode *s = save(y);
  if (!run(1e-6f, 1e-6f))
    return;
  std::vector<double> e;
  for (double v : xs)
    e.push_back(std::sin(v) * std::cos(v) + std::atan(v) - std::tanh(v));
  expectValues(output(s), e, 1e-6, 1e-6);
}

TEST_P(OnnxOpsTest, CumSumModes) {
  auto *x = input("x", ElemKind::Float, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto *i = input("i", ElemKind::Int64I, {2, 3}, {1, 2, 3, 4, 5, 6});
  SaveNode *plain = save(F()->createCumSum("plain", x, 1, false, false), "plain");
  SaveNode *excl = save(F()->createCumSum("excl", x, -1, true, false), "excl");
  SaveNode *rev = save(F()->createCumSum("rev", x, 1, false, true), "rev");
  SaveNode *both = save(F()->createCumSum("both", x, 1, true, true), "both");
  SaveNode *ints = save(F()->createCumSum("ints", i, 0, false, false), "ints");
  if (!run(0, 0))
    return;
  expectValues(output(plain), {1, 3, 6, 4, 9, 15}, 0, 0);
  expectValues(output(excl), {0, 1, 3, 0, 4, 9}, 0, 0);
  expectValues(output(rev), {6, 5, 3, 15, 11, 6}, 0, 0);
  expectValues(output(both), {5, 3, 0, 11, 6, 0}, 0, 0);
  expectValues(output(ints), {1, 2, 3, 5, 7, 9}, 0, 0);
}

TEST_P(OnnxOpsTest, GatherElementsAxesAndNegativeIndices) {
  auto *d = input("d", ElemKind::Float, {3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto *i0 = input("i0", ElemKind::Int64I, {2, 3}, {1, 2, 0, 2, 0, 0});
  auto *d2 = input("d2", ElemKind::Int32I, {2, 2}, {1, 2, 3, 4});
  auto *i1 = input("i1", ElemKind::Int32I, {2, 2}, {0, -1, -2, 0});
  SaveNode *a0 = save(F()->createGatherElements("a0", d, i0, 0), "a0");
  SaveNode *a1 = save(F()->createGatherElements("a1", d2, i1, 1), "a1");
  if (!run(0, 0))
    return;
  EXPECT_EQ(output(a0).dims(), Dims({2, 3}));
  expectValues(output(a0), {4, 8, 3, 7, 2, 3}, 0, 0);
  expectValues(output(a1), {1, 2, 3, 3}, 0, 0);
}

TEST_P(OnnxOpsTest, GatherElementsOutOfRangeIsAnError) {
  Function *f = mod().createFunction("geoor");
  auto *d = mod().createPlaceholder(ElemKind::Float, {2, 2}, "ged");
  auto *i = mod().createPlaceholder(ElemKind::Int64I, {2, 2}, "gei");
  f->createSave("gey", f->createGatherElements("ge", d, i, 1));
  bool skipped = false;
  std::vector<std::pair<Placeholder *, Tensor>> in;
  in.emplace_back(d, makeTensor(Type(ElemKind::Float, {2, 2}), {1, 2, 3, 4}));
  in.emplace_back(i, makeTensor(Type(ElemKind::Int64I, {2, 2}), {0, 1, 2, 0}));
  Error e = runRaw(f, std::move(in), skipped);
  if (skipped)
    GTEST_SKIP() << e.message();
  ASSERT_TRUE(e);
  EXPECT_NE(e.message().find("index 2"), std::string::npos) << e.message();
}

TEST_P(OnnxOpsTest, ScatterElementsReplaceAndAdd) {
  auto *d = input("d", ElemKind::Float, {1, 5}, {1, 2, 3, 4, 5});
  auto *i = input("i", ElemKind::Int64I, {1, 2}, {1, 3});
  auto *dup = input("dup", ElemKind::Int64I, {1, 2}, {1, -4});
  auto *u = input("u", ElemKind::Float, {1, 2}, {1.5, 2.5});
  auto *d0 = input("d0", ElemKind::Int32I, {3, 2}, {0, 0, 0, 0, 0, 0});
  auto *i0 = input("i0", ElemKind::Int32I, {1, 2}, {2, 1});
  auto *u0 = input("u0", ElemKind::Int32I, {1, 2}, {7, 8});
  SaveNode *rep = save(F()->createScatterElements("rep", d, i, u, 1, "none"), "rep");
  SaveNode *add = save(F()->createScatterElements("add", d, dup, u, 1, "add"), "add");
  SaveNode *mul = save(F()->createScatterElements("mul", d, dup, u, 1, "mul"), "mul");
  SaveNode *ax0 = save(F()->createScatterElements("ax0", d0, i0, u0, 0, "none"), "ax0");
  if (!run(0, 0))
    return;
  expectValues(output(rep), {1, 1.5, 3, 2.5, 5}, 0, 0);
  expectValues(output(add), {1, 6, 3, 4, 5}, 0, 0);      // 2 + 1.5 + 2.5
  expectValues(output(mul), {1, 7.5, 3, 4, 5}, 0, 0);    // 2 * 1.5 * 2.5
  expectValues(output(ax0), {0, 0, 0, 8, 7, 0}, 0, 0);
}

TEST_P(OnnxOpsTest, ScatterNDElementsAndSlices) {
  auto *d = input("d", ElemKind::Float, {8}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto *i = input("i", ElemKind::Int64I, {4, 1}, {4, 3, 1, 7});
  auto *u = input("u", ElemKind::Float, {4}, {9, 10, 11, 12});
  auto *d2 = input("d2", ElemKind::Int64I, {2, 2}, {1, 2, 3, 4});
  auto *i2 = input("i2", ElemKind::Int64I, {1, 1}, {-1});
  auto *u2 = input("u2", ElemKind::Int64I, {1, 2}, {9, 8});
  SaveNode *el = save(F()->createScatterND("el", d, i, u, "none"), "el");
  SaveNode *sl = save(F()->createScatterND("sl", d2, i2, u2, "add"), "sl");
  if (!run(0, 0))
    return;
  expectValues(output(el), {1, 11, 3, 10, 9, 6, 7, 12}, 0, 0);
  expectValues(output(sl), {1, 2, 12, 12}, 0, 0);
}

TEST_P(OnnxOpsTest, GatherNDTuplesSlicesAndBatchDims) {
  auto *d = input("d", ElemKind::Float, {2, 2}, {0, 1, 2, 3});
  auto *t = input("t", ElemKind::Int64I, {2, 2}, {0, 0, 1, 1});
  auto *s = input("s", ElemKind::Int64I, {2, 1}, {1, 0});
  auto *d3 = input("d3", ElemKind::Int32I, {2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  SaveNode *tup = save(F()->createGatherND("tup", d, t, 0), "tup");
  SaveNode *sl = save(F()->createGatherND("sl", d, s, 0), "sl");
  SaveNode *bd = save(F()->createGatherND("bd", d3, s, 1), "bd");
  if (!run(0, 0))
    return;
  EXPECT_EQ(output(tup).dims(), Dims({2}));
  expectValues(output(tup), {0, 3}, 0, 0);
  EXPECT_EQ(output(sl).dims(), Dims({2, 2}));
  expectValues(output(sl), {2, 3, 0, 1}, 0, 0);
  EXPECT_EQ(output(bd).dims(), Dims({2, 2}));
  expectValues(output(bd), {2, 3, 4, 5}, 0, 0);
}

// Every reduction on every kind a backend may claim, duplicate indices included: none is
// the last write in row-major order of Indices; max/min and add/mul fold in that order.
TEST_P(OnnxOpsTest, ScatterElementsReductionsOnEveryKind) {
  auto *f = input("f", ElemKind::Float, {2, 3}, {1, 5, 3, -1, 0, 2});
  auto *fi = input("fi", ElemKind::Int32I, {2, 2}, {0, 0, 2, -1});
  auto *fu = input("fu", ElemKind::Float, {2, 2}, {9, 4, 7, -5});
  auto *l = input("l", ElemKind::Int64I, {3}, {10, 20, 30});
  auto *li = input("li", ElemKind::Int64I, {3}, {2, 0, 2});
  auto *lu = input("lu", ElemKind::Int64I, {3}, {1, 2, 3});
  auto *b = input("b", ElemKind::Bool, {4}, {0, 1, 0, 1});
  auto *bi = input("bi", ElemKind::Int32I, {4}, {0, 1, 2, 3});
  auto *bu = input("bu", ElemKind::Bool, {4}, {1, 0, 0, 1});
  auto *h = input("h", ElemKind::Float16, {2, 2}, {1, 2, 3, 4});
  auto *bh = input("bh", ElemKind::BFloat16, {2, 2}, {1, 2, 3, 4});
  auto *hi = input("hi", ElemKind::Int64I, {1, 2}, {1, 0});
  auto *hu = input("hu", ElemKind::Float16, {1, 2}, {0.5, -1.5});
  auto *bhu = input("bhu", ElemKind::BFloat16, {1, 2}, {0.5, -1.5});
  auto *z = input("z", ElemKind::Float, {2, 3, 1}, {0, 0, 0, 0, 0, 0});
  auto *zi = input("zi", ElemKind::Int64I, {2, 2, 1}, {2, 0, 1, 1});
  auto *zu = input("zu", ElemKind::Float, {2, 2, 1}, {1, 2, 3, 4});
  auto sc = [&](const char *n, NodeValue d, NodeValue i, NodeValue u, unsigned axis,
                const char *red) {
    return save(F()->createScatterElements(n, d, i, u, axis, red), n);
  };
  SaveNode *fNone = sc("fnone", f, fi, fu, 1, "none");
  SaveNode *fMax = sc("fmax", f, fi, fu, 1, "max");
  SaveNode *fMin = sc("fmin", f, fi, fu, 1, "min");
  SaveNode *lAdd = sc("ladd", l, li, lu, 0, "add");
  SaveNode *lMul = sc("lmul", l, li, lu, 0, "mul");
  SaveNode *lMin = sc("lmin", l, li, lu, 0, "min");
  SaveNode *bNone = sc("bnone", b, bi, bu, 0, "none");
  SaveNode *bAdd = sc("badd", b, bi, bu, 0, "add");
  SaveNode *bMul = sc("bmul", b, bi, bu, 0, "mul");
  SaveNode *bMax = sc("bmax", b, bi, bu, 0, "max");
  SaveNode *bMin = sc("bmin", b, bi, bu, 0, "min");
  SaveNode *hNone = sc("hnone", h, hi, hu, 0, "none");
  SaveNode *bhNone = sc("bhnone", bh, hi, bhu, 0, "none");
  SaveNode *zAdd = sc("zadd", z, zi, zu, 1, "add");
  if (!run(0, 0))
    return;
  expectValues(output(fNone), {4, 5, 3, -1, 0, -5}, 0, 0);
  expectValues(output(fMax), {9, 5, 3, -1, 0, 7}, 0, 0);
  expectValues(output(fMin), {1, 5, 3, -1, 0, -5}, 0, 0);
  expectValues(output(lAdd), {12, 20, 34}, 0, 0);
  expectValues(output(lMul), {20, 20, 90}, 0, 0);
  expectValues(output(lMin), {2, 20, 1}, 0, 0);
  expectValues(output(bNone), {1, 0, 0, 1}, 0, 0);
  expectValues(output(bAdd), {1, 1, 0, 1}, 0, 0);
  expectValues(output(bMul), {0, 0, 0, 1}, 0, 0);
  expectValues(output(bMax), {1, 1, 0, 1}, 0, 0);
  expectValues(output(bMin), {0, 0, 0, 1}, 0, 0);
  expectValues(output(hNone), {1, -1.5, 0.5, 4}, 0, 0);
  expectValues(output(bhNone), {1, -1.5, 0.5, 4}, 0, 0);
  expectValues(output(zAdd), {2, 0, 1, 0, 7, 0}, 0, 0);
}

TEST_P(OnnxOpsTest, ScatterNDReductionsOnEveryKind) {
  auto *d = input("d", ElemKind::Int32I, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto *di = input("di", ElemKind::Int32I, {3, 2}, {0, 1, -1, 0, 0, 1});
  auto *du = input("du", ElemKind::Int32I, {3}, {5, -7, -2});
  auto *b = input("b", ElemKind::Bool, {2, 2}, {1, 0, 0, 1});
  auto *bi = input("bi", ElemKind::Int64I, {1, 1}, {1});
  auto *bu = input("bu", ElemKind::Bool, {1, 2}, {1, 1});
  Tensor ht(ElemKind::Float16, {2, 2, 2});
  for (size_t k = 0; k < 8; k++)
    ht.setFromDouble(k, double(k));
  auto *h = input("h", std::move(ht));
  auto *hi = input("hi", ElemKind::Int32I, {2, 2}, {1, 1, 0, -2});
  auto *hu = input("hu", ElemKind::Float16, {2, 2}, {0.5, 1.5, 2.5, 3.5});
  auto *f = input("f", ElemKind::Float, {4}, {1, 2, 3, 4});
  auto *fi = input("fi", ElemKind::Int64I, {3, 1}, {0, 0, 3});
  auto *fu = input("fu", ElemKind::Float, {3}, {5, -1, 0.5});
  auto sc = [&](const char *n, NodeValue x, NodeValue i, NodeValue u, const char *red) {
    return save(F()->createScatterND(n, x, i, u, red), n);
  };
  SaveNode *none = sc("none", d, di, du, "none");
  SaveNode *mul = sc("mul", d, di, du, "mul");
  SaveNode *mx = sc("max", d, di, du, "max");
  SaveNode *mn = sc("min", d, di, du, "min");
  SaveNode *bAdd = sc("badd", b, bi, bu, "add");
  SaveNode *hNone = sc("hnone", h, hi, hu, "none");
  SaveNode *fMax = sc("fmax", f, fi, fu, "max");
  if (!run(0, 0))
    return;
  expectValues(output(none), {1, -2, 3, -7, 5, 6}, 0, 0); // (0, 1): 5 then -2
  expectValues(output(mul), {1, -20, 3, -28, 5, 6}, 0, 0);
  expectValues(output(mx), {1, 5, 3, 4, 5, 6}, 0, 0);
  expectValues(output(mn), {1, -2, 3, -7, 5, 6}, 0, 0);
  expectValues(output(bAdd), {1, 0, 1, 1}, 0, 0);
  expectValues(output(hNone), {2.5, 3.5, 2, 3, 4, 5, 0.5, 1.5}, 0, 0);
  expectValues(output(fMax), {5, 2, 3, 4}, 0, 0);
}

TEST_P(OnnxOpsTest, GatherElementsAndGatherNDOnEveryKind) {
  auto *b = input("b", ElemKind::Bool, {2, 3}, {1, 0, 1, 0, 0, 1});
  auto *bi = input("bi", ElemKind::Int32I, {2, 2}, {2, 1, -1, 0});
  auto *h = input("h", ElemKind::Float16, {3, 2}, {1, 2, 3, 4, 5, 6});
  auto *hi = input("hi", ElemKind::Int64I, {1, 2}, {2, -3});
  auto *q = input("q", qTensor(ElemKind::Int8Q, {2, 2}, 0.5f, 3, {-4, 10, 7, -8}));
  auto *qi = input("qi", ElemKind::Int64I, {2, 1}, {1, 0});
  Tensor lt(ElemKind::Int64I, {2, 3, 2});
  for (size_t k = 0; k < 12; k++)
    lt.setFromDouble(k, double(k));
  auto *l = input("l", std::move(lt));
  auto *li = input("li", ElemKind::Int64I, {2, 1, 2}, {2, 0, 1, -1});
  // GatherND.
  auto *nb = input("nb", ElemKind::Bool, {2, 2}, {1, 0, 0, 1});
  auto *nbi = input("nbi", ElemKind::Int32I, {2, 2}, {1, 1, 0, -1});
  auto *nh = input("nh", ElemKind::BFloat16, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto *nhi = input("nhi", ElemKind::Int64I, {1, 1}, {-1});
  auto *nqi = input("nqi", ElemKind::Int64I, {1, 2}, {1, 0});
  Tensor n3(ElemKind::Int64I, {2, 2, 3});
  for (size_t k = 0; k < 12; k++)
    n3.setFromDouble(k, double(k));
  auto *nl = input("nl", std::move(n3));
  auto *nli = input("nli", ElemKind::Int32I, {2, 1, 2}, {1, 2, 0, -1});
  SaveNode *gb = save(F()->createGatherElements("gb", b, bi, 1), "gb");
  SaveNode *gh = save(F()->createGatherElements("gh", h, hi, 0), "gh");
  SaveNode *gq = save(F()->createGatherElements("gq", q, qi, 1), "gq");
  SaveNode *gl = save(F()->createGatherElements("gl", l, li, 1), "gl");
  SaveNode *nB = save(F()->createGatherND("nB", nb, nbi, 0), "nB");
  SaveNode *nH = save(F()->createGatherND("nH", nh, nhi, 0), "nH");
  SaveNode *nQ = save(F()->createGatherND("nQ", q, nqi, 0), "nQ");
  SaveNode *nL = save(F()->createGatherND("nL", nl, nli, 1), "nL");
  if (!run(0, 0))
    return;
  expectValues(output(gb), {1, 0, 1, 0}, 0, 0);
  expectValues(output(gh), {5, 2}, 0, 0);
  EXPECT_EQ(output(gq).getElementType(), ElemKind::Int8Q);
  expectValues(output(gq), {10, 7}, 0, 0); // raw
  expectValues(output(gl), {4, 1, 8, 11}, 0, 0);
  expectValues(output(nB), {1, 0}, 0, 0);
  EXPECT_EQ(output(nH).dims(), Dims({1, 3}));
  expectValues(output(nH), {4, 5, 6}, 0, 0);
  expectValues(output(nQ), {7}, 0, 0); // raw
  EXPECT_EQ(output(nL).dims(), Dims({2, 1}));
  expectValues(output(nL), {5, 8}, 0, 0);
}

TEST_P(OnnxOpsTest, IndexOutOfRangeIsAnErrorOnEveryIndexOperator) {
  struct Case {
    const char *name;
    std::function<void(Function *, Placeholder *, Placeholder *, Placeholder *)> build;
    Dims idx;
    std::vector<double> idxValues;
    const char *what;
  };
  std::vector<Case> cases = {
      {"se", [](Function *f, Placeholder *d, Placeholder *i, Placeholder *u) {
         f->createSave("y", f->createScatterElements("se", d, i, u, 1, "add"));
       }, {2, 2}, {0, 1, -4, 0}, "index -4 at position 2"},
      {"snd", [](Function *f, Placeholder *d, Placeholder *i, Placeholder *u) {
         f->createSave("y", f->createScatterND("snd", d, i, u, "none"));
       }, {2, 2}, {0, 0, 1, 3}, "index 3 at position 3"},
      {"gnd", [](Function *f, Placeholder *d, Placeholder *i, Placeholder *) {
         f->createSave("y", f->createGatherND("gnd", d, i, 0));
       }, {2, 2}, {1, 0, -3, 0}, "index -3 at position 2"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    Function *f = mod().createFunction(std::string("oor_") + c.name);
    auto *d = mod().createPlaceholder(ElemKind::Float, {2, 3}, std::string(c.name) + "_d");
    auto *i = mod().createPlaceholder(ElemKind::Int64I, c.idx, std::string(c.name) + "_i");
    // ScatterElements: Updates of Indices' shape; ScatterND: one element per tuple.
    Dims ud = std::string(c.name) == "se" ? c.idx : Dims({2});
    auto *u = mod().createPlaceholder(ElemKind::Float, ud, std::string(c.name) + "_u");
    c.build(f, d, i, u);
    bool skipped = false;
    std::vector<std::pair<Placeholder *, Tensor>> in;
    in.emplace_back(d, makeTensor(Type(ElemKind::Float, {2, 3}), {1, 2, 3, 4, 5, 6}));
    Tensor it(ElemKind::Int64I, c.idx);
    for (size_t k = 0; k < c.idxValues.size(); k++)
      it.setFromDouble(k, c.idxValues[k]);
    in.emplace_back(i, std::move(it));
    Tensor ut(ElemKind::Float, ud);
    ut.zero();
    in.emplace_back(u, std::move(ut));
    Error e = runRaw(f, std::move(in), skipped);
    if (skipped)
      continue;
    ASSERT_TRUE(e);
    EXPECT_NE(e.message().find(c.what), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("out of range"), std::string::npos) << e.message();
  }
}

TEST_P(OnnxOpsTest, CumSumWrapsIntegersAndRunsAlongAnyAxis) {
  auto *i = input("i", ElemKind::Int32I, {3}, {2147483647, 1, 5});
  Tensor xt(ElemKind::Float, {2, 2, 2});
  for (size_t k = 0; k < 8; k++)
    xt.setFromDouble(k, double(k));
  auto *x = input("x", std::move(xt));
  SaveNode *wrap = save(F()->createCumSum("wrap", i, 0, false, false), "wrap");
  SaveNode *mid = save(F()->createCumSum("mid", x, 1, true, true), "mid");
  SaveNode *first = save(F()->createCumSum("first", x, 0, false, false), "first");
  if (!run(0, 0))
    return;
  expectValues(output(wrap), {2147483647, -2147483648.0, -2147483643.0}, 0, 0);
  expectValues(output(mid), {2, 3, 0, 0, 6, 7, 0, 0}, 0, 0);
  expectValues(output(first), {0, 1, 2, 3, 4, 6, 8, 10}, 0, 0);
}

TEST_P(OnnxOpsTest, MaxPoolOfIntegers) {
  auto *x = input("x", ElemKind::Int32I, {1, 1, 2, 3}, {1, 5, 2, 4, 3, 6});
  auto *l = input("l", ElemKind::Int64I, {1, 1, 2, 2}, {-7, -3, -9, -8});
  SaveNode *a = save(F()->createMaxPool("a", x, {2, 2}, {1, 1}, {0, 0, 0, 0}), "a");
  // Padding never wins, even over negative values.
  SaveNode *b = save(F()->createMaxPool("b", l, {2, 2}, {2, 2}, {1, 1, 1, 1}), "b");
  if (!run(0, 0))
    return;
  expectValues(output(a), {5, 6}, 0, 0);
  expectValues(output(b), {-7, -3, -9, -8}, 0, 0);
}

TEST_P(OnnxOpsTest, GridSampleModesAndPadding) {
  auto *x = input("x", ElemKind::Float, {1, 1, 2, 2}, {1, 2, 3, 4});
  // Points (x, y): the corners' centres (align) or outer edges, and the middle.
  auto *g = input("g", ElemKind::Float, {1, 1, 3, 2}, {-1, -1, 0, 0, 1, 1});
  SaveNode *al = save(F()->createGridSample("al", x, g, "bilinear", "zeros", true), "al");
  SaveNode *ze = save(F()->createGridSample("ze", x, g, "bilinear", "zeros", false), "ze");
  SaveNode *bo = save(F()->createGridSample("bo", x, g, "bilinear", "border", false), "bo");
  SaveNode *ne = save(F()->createGridSample("ne", x, g, "nearest", "zeros", true), "ne");
  if (!run())
    return;
  EXPECT_EQ(output(al).dims(), Dims({1, 1, 1, 3}));
  expectValues(output(al), {1, 2.5, 4});
  // Source (-0.5, -0.5): a quarter of pixel (0, 0), the rest zeros; (1.5, 1.5) likewise.
  expectValues(output(ze), {0.25, 2.5, 1});
  expectValues(output(bo), {1, 2.5, 4});
  // Source (0.5, 0.5) rounds half to even: pixel (0, 0).
  expectValues(output(ne), {1, 1, 4});
}

// Every mode and padding on an odd-sized image with grid points inside and well outside
// [-1, 1]: other backends must agree with the Interpreter (run() compares them); the
// bicubic weights at a pixel centre are hand-checked: (0, 1, 0, 0).
TEST_P(OnnxOpsTest, GridSampleEveryModeAndPaddingOutsideTheImage) {
  auto *x = randomInput("x", Type(ElemKind::Float, {2, 3, 3, 5}), -2, 2, 7);
  auto *g = randomInput("g", Type(ElemKind::Float, {2, 4, 3, 2}), -1.7f, 1.7f, 8);
  std::vector<SaveNode *> saves;
  for (const char *mode : {"bilinear", "nearest", "bicubic"})
    for (const char *pad : {"zeros", "border", "reflection"})
      for (bool align : {false, true}) {
        std::string n = std::string(mode) + "_" + pad + (align ? "_a" : "");
        saves.push_back(save(F()->createGridSample(n, x, g, mode, pad, align), n));
      }
  auto *one = input("one", ElemKind::Float, {1, 1, 2, 3}, {1, 2, 3, 4, 5, 6});
  // With AlignCorners, (0, 1) is column 1, row 1 exactly.
  auto *at = input("at", ElemKind::Float, {1, 1, 1, 2}, {0, 1});
  SaveNode *bc = save(F()->createGridSample("bc", one, at, "bicubic", "border", true), "bc");
  if (!run(1e-5f, 1e-5f))
    return;
  for (SaveNode *s : saves)
    EXPECT_EQ(output(s).dims(), Dims({2, 3, 4, 3}));
  expectValues(output(bc), {5});
}

TEST_P(OnnxOpsTest, RoiAlignAverageAndMax) {
  Tensor img(ElemKind::Float, {1, 1, 4, 4});
  for (size_t i = 0; i < 16; i++)
    img.setFromDouble(i, double(i)); // 4 * h + w
  auto *x = input("x", std::move(img));
  auto *r = input("r", ElemKind::Float, {2, 4}, {0, 0, 3, 3, 0.5, 0.5, 3.5, 3.5});
  auto *b = input("b", ElemKind::Int64I, {2}, {0, 0});
  SaveNode *avg = save(F()->createRoiAlign("avg", x, r, b, "avg", 1, 1, 2, 1.0f, false), "avg");
  SaveNode *hp = save(F()->createRoiAlign("hp", x, r, b, "avg", 1, 1, 2, 1.0f, true), "hp");
  SaveNode *mx = save(F()->createRoiAlign("mx", x, r, b, "max", 1, 1, 2, 1.0f, false), "mx");
  if (!run())
    return;
  // Samples at 0.75 and 2.25 (second region: 1.25, 2.75) on both axes of a linear image:
  // the mean is the image at the mean point, 4 * 1.5 + 1.5 (4 * 2 + 2).
  expectValues(output(avg), {7.5, 10});
  // Half-pixel shifts both regions by -0.5: samples at 0.25, 1.75 (and 0.75, 2.25).
  expectValues(output(hp), {5, 7.5});
  // Max: the largest weighted corner of each sample, then the largest sample: for the
  // sample (2.25, 2.25), 0.75 * 0.75 * x[2][2] = 5.625; for (2.75, 2.75),
  // 0.75 * 0.75 * x[3][3] = 8.4375.
  expectValues(output(mx), {5.625, 8.4375});
}

// Adaptive sampling (ratio 0), a spatial scale, Int32 batch indices, regions partly or
// wholly outside the image and smaller than a pixel, on both modes and both coordinate
// conventions: other backends must agree with the Interpreter (run() compares them).
TEST_P(OnnxOpsTest, RoiAlignAdaptiveSamplingAndRegionsOutside) {
  auto *x = randomInput("x", Type(ElemKind::Float, {2, 3, 5, 7}), -3, 3, 11);
  auto *r = input("r", ElemKind::Float, {4, 4},
                  {0, 0, 13, 9, -4, -2, 6, 3, 10, 6, 30, 20, 3, 3, 3.5, 3.2});
  auto *b = input("b", ElemKind::Int32I, {4}, {1, 0, 1, 0});
  std::vector<SaveNode *> saves;
  for (const char *mode : {"avg", "max"})
    for (bool half : {false, true}) {
      std::string n = std::string(mode) + (half ? "_h" : "");
      saves.push_back(save(F()->createRoiAlign(n, x, r, b, mode, 2, 3, 0, 0.5f, half), n));
    }
  if (!run(1e-5f, 1e-5f))
    return;
  for (SaveNode *s : saves)
    EXPECT_EQ(output(s).dims(), Dims({4, 3, 2, 3}));
}

/// With half pixels a region whose corners are swapped has a negative size: the adaptive
/// grid (SamplingRatio 0) is empty and the bin is 0 (avg: 0 / 1), on every backend; NaN
/// corners likewise.
TEST_P(OnnxOpsTest, RoiAlignNegativeOrNaNRegionHasNoSamples) {
  Tensor img(ElemKind::Float, {1, 1, 4, 4});
  for (size_t i = 0; i < 16; i++)
    img.setFromDouble(i, double(i) + 1);
  auto *x = input("x", std::move(img));
  const double nan = std::nan("");
  auto *r = input("r", ElemKind::Float, {2, 4}, {3, 3, 1, 1, nan, 0, 2, 2});
  auto *b = input("b", ElemKind::Int32I, {2}, {0, 0});
  SaveNode *avg = save(F()->createRoiAlign("avg", x, r, b, "avg", 2, 2, 0, 1.0f, true), "avg");
  if (!run(0, 0))
    return;
  expectValues(output(avg), {0, 0, 0, 0, 0, 0, 0, 0}, 0, 0);
}

TEST_P(OnnxOpsTest, RoiAlignBatchIndexOutOfRangeIsAnError) {
  Function *f = mod().createFunction("roioor");
  auto *x = mod().createPlaceholder(ElemKind::Float, {1, 1, 2, 2}, "rx");
  auto *r = mod().createPlaceholder(ElemKind::Float, {2, 4}, "rr");
  auto *b = mod().createPlaceholder(ElemKind::Int64I, {2}, "rb");
  f->createSave("ry", f->createRoiAlign("ra", x, r, b, "avg", 1, 1, 1, 1.0f, false));
  bool skipped = false;
  std::vector<std::pair<Placeholder *, Tensor>> in;
  in.emplace_back(x, makeTensor(Type(ElemKind::Float, {1, 1, 2, 2}), {1, 2, 3, 4}));
  in.emplace_back(r, makeTensor(Type(ElemKind::Float, {2, 4}), {0, 0, 1, 1, 0, 0, 1, 1}));
  in.emplace_back(b, makeTensor(Type(ElemKind::Int64I, {2}), {0, 1}));
  Error e = runRaw(f, std::move(in), skipped);
  if (skipped)
    GTEST_SKIP() << e.message();
  ASSERT_TRUE(e);
  EXPECT_NE(e.message().find("batch index 1"), std::string::npos) << e.message();
}

KILN_INSTANTIATE_BACKEND_TESTS(OnnxOpsTest);

} // namespace kiln::test
