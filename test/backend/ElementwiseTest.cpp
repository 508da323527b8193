// Operator tests of the element-wise family: activations, unary math, arithmetic,
// comparisons and Select, on every element kind the Interpreter claims. Expectations are
// hand-computed or come from <cmath> in double on the stored inputs, rounded once to the
// result's format.

#include "BackendTestUtils.h"

#include <cmath>
#include <functional>
#include <limits>

namespace kiln::test {

namespace {

constexpr ElemKind kFloatKinds[] = {ElemKind::Float, ElemKind::Float16, ElemKind::BFloat16};
const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

/// \p v rounded to the storage format of \p k.
double roundTo(ElemKind k, double v) {
  Tensor t(k, {1});
  t.setFromDouble(0, v);
  return t.getAsDouble(0);
}

/// Relative tolerance for a result rounded once to \p k: one unit in the last place.
double rtolFor(ElemKind k) {
  switch (k) {
  case ElemKind::Float16:
    return 1.0 / 1024;
  case ElemKind::BFloat16:
    return 1.0 / 128;
  default:
    return 1e-5;
  }
}

using UnaryBuilder = std::function<NodeValue(Function *, NodeValue)>;
using BinaryBuilder = std::function<NodeValue(Function *, NodeValue, NodeValue)>;

} // namespace

class ElementwiseTest : public BackendTest {
protected:
  struct Check {
    SaveNode *save;
    std::vector<double> expected;
    double atol, rtol;
    std::string what;
  };

  /// For each float kind: a seeded random input in [lo, hi], the node \p build makes, and
  /// the expectation \p ref (double) of every stored input value.
  void addUnary(const std::string &name, const UnaryBuilder &build,
                const std::function<double(double)> &ref, float lo, float hi) {
    for (ElemKind k : kFloatKinds) {
      Tensor t(k, {3, 11});
      PseudoRNG rng(17);
      t.randomize(lo, hi, rng);
      std::vector<double> expected;
      for (size_t i = 0; i < t.size(); i++)
        expected.push_back(roundTo(k, ref(t.getAsDouble(i))));
      std::string what = name + "/" + elemKindName(k);
      Placeholder *x = input(what + ".in", std::move(t));
      checks_.push_back({save(build(F(), x), what), expected, 1e-5, rtolFor(k), what});
    }
  }

  /// Like addUnary for a binary operator; the operands are independent random tensors.
  void addBinary(const std::string &name, const BinaryBuilder &build,
                 const std::function<double(double, double)> &ref, float lo, float hi) {
    for (ElemKind k : kFloatKinds) {
      Tensor a(k, {2, 13}), b(k, {2, 13});
      PseudoRNG rng(23);
      a.randomize(lo, hi, rng);
      b.randomize(lo, hi, rng);
      std::vector<double> expected;
      for (size_t i = 0; i < a.size(); i++)
        expected.push_back(roundTo(k, ref(a.getAsDouble(i), b.getAsDouble(i))));
      std::string what = name + "/" + elemKindName(k);
      Placeholder *pa = input(what + ".lhs", std::move(a));
      Placeholder *pb = input(what + ".rhs", std::move(b));
      checks_.push_back({save(build(F(), pa, pb), what), expected, 1e-5, rtolFor(k), what});
    }
  }

  /// Runs once and checks every added expectation.
  void runAndCheck() {
    if (!run(1e-3f, 1.0f / 128))
      return;
    for (const Check &c : checks_) {
      SCOPED_TRACE(c.what);
      expectValues(output(c.save), c.expected, c.atol, c.rtol);
    }
  }

  std::vector<Check> checks_;
};

// ------------------------------------------------------------------ activations

TEST_P(ElementwiseTest, ReluFloatSpecialValues) {
  auto *x = input("x", ElemKind::Float, {7}, {-2.5, -0.0, 0.0, 3.25, kNaN, kInf, -kInf});
  SaveNode *s = save(F()->createRelu("relu", x));
  if (!run())
    return;
  expectValues(output(s), {0, 0, 0, 3.25, kNaN, kInf, 0});
}

TEST_P(ElementwiseTest, ReluFloatKinds) {
  addUnary("relu", [](Function *f, NodeValue x) { return f->createRelu("relu", x); },
           [](double x) { return x > 0 ? x : 0; }, -4, 4);
  runAndCheck();
}

TEST_P(ElementwiseTest, ReluInt8RequantizesToOwnScale) {
  // Input real = 0.5 * (q - 2); result scale 0.25, offset -100.
  auto *x = input("x", qTensor(ElemKind::Int8Q, {6}, 0.5f, 2, {-128, 1, 2, 3, 60, 127}));
  TypeRef outTy = mod().uniqueType(ElemKind::Int8Q, {6}, 0.25f, -100);
  SaveNode *s = save(F()->createRelu("relu", outTy, x));
  if (!run())
    return;
  // reals: -65, -0.5, 0, 0.5, 29, 62.5 -> relu: 0, 0, 0, 0.5, 29, 62.5
  // q = real / 0.25 - 100: -100, -100, -100, -98, 16, 150 -> saturates to 127.
  expectValues(output(s), {-100, -100, -100, -98, 16, 127}, 0, 0);
}

TEST_P(ElementwiseTest, Sigmoid) {
  addUnary("sigmoid", [](Function *f, NodeValue x) { return f->createSigmoid("s", x); },
           [](double x) { return 1 / (1 + std::exp(-x)); }, -8, 8);
  runAndCheck();
}

TEST_P(ElementwiseTest, Tanh) {
  addUnary("tanh", [](Function *f, NodeValue x) { return f->createTanh("t", x); },
           [](double x) { return std::tanh(x); }, -5, 5);
  runAndCheck();
}

TEST_P(ElementwiseTest, GeluExact) {
  addUnary("gelu", [](Function *f, NodeValue x) { return f->createGelu("g", x, false); },
           [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -5, 5);
  runAndCheck();
}

TEST_P(ElementwiseTest, GeluTanhApproximation) {
  addUnary("gelu_tanh", [](Function *f, NodeValue x) { return f->createGelu("g", x, true); },
           [](double x) {
             const double c = std::sqrt(2 / M_PI);
             return 0.5 * x * (1 + std::tanh(c * (x + 0.044715 * x * x * x)));
           },
           -5, 5);
  runAndCheck();
}

TEST_P(ElementwiseTest, GeluHandValues) {
  auto *x = input("x", ElemKind::Float, {3}, {0, 1, -1});
  SaveNode *exact = save(F()->createGelu("exact", x, false), "exact");
  SaveNode *approx = save(F()->createGelu("approx", x, true), "approx");
  if (!run())
    return;
  expectValues(output(exact), {0, 0.8413447460685429, -0.15865525393145707}, 1e-6);
  expectValues(output(approx), {0, 0.8411919906082768, -0.15880800939172324}, 1e-6);
}

TEST_P(ElementwiseTest, HardSwish) {
  auto *x = input("x", ElemKind::Float, {8}, {-4, -3, -1, 0, 1, 3, 4, kNaN});
  SaveNode *s = save(F()->createHardSwish("hs", x));
  if (!run())
    return;
  expectValues(output(s), {0, 0, -1.0 / 3, 0, 2.0 / 3, 3, 4, kNaN}, 1e-6);
}

TEST_P(ElementwiseTest, HardSwishFloatKinds) {
  addUnary("hardswish", [](Function *f, NodeValue x) { return f->createHardSwish("h", x); },
           [](double x) { return x * std::min(std::max(x + 3, 0.0), 6.0) / 6; }, -5, 5);
  runAndCheck();
}

TEST_P(ElementwiseTest, Swish) {
  addUnary("swish", [](Function *f, NodeValue x) { return f->createSwish("s", x); },
           [](double x) { return x / (1 + std::exp(-x)); }, -8, 8);
  runAndCheck();
}

TEST_P(ElementwiseTest, ClipBoundsAndNaN) {
  auto *x = input("x", ElemKind::Float, {7}, {-7, -1, -0.5, 0.25, 2, 9, kNaN});
  SaveNode *s = save(F()->createClip("clip", x, -1.0f, 2.0f));
  if (!run())
    return;
  expectValues(output(s), {-1, -1, -0.5, 0.25, 2, 2, kNaN});
}

TEST_P(ElementwiseTest, ClipFloatKinds) {
  addUnary("clip", [](Function *f, NodeValue x) { return f->createClip("c", x, -1.5f, 0.75f); },
           [](double x) { return std::min(std::max(x, -1.5), 0.75); }, -3, 3);
  runAndCheck();
}

TEST_P(ElementwiseTest, LeakyRelu) {
  auto *x = input("x", ElemKind::Float, {5}, {-4, -1, 0, 2, kNaN});
  SaveNode *s = save(F()->createLeakyRelu("lr", x, 0.125f));
  if (!run())
    return;
  expectValues(output(s), {-0.5, -0.125, 0, 2, kNaN});
}

TEST_P(ElementwiseTest, LeakyReluFloatKinds) {
  addUnary("leaky", [](Function *f, NodeValue x) { return f->createLeakyRelu("l", x, 0.3f); },
           [](double x) { return x >= 0 ? x : double(0.3f) * x; }, -4, 4);
  runAndCheck();
}

TEST_P(ElementwiseTest, PRelu) {
  auto *x = input("x", ElemKind::Float, {2, 3}, {-2, 3, -4, 0, -1, 5});
  auto *slope = constant("slope", ElemKind::Float, {2, 3}, {0.5, 0.5, 0.25, 2, -1, 7});
  SaveNode *s = save(F()->createPRelu("prelu", x, slope));
  if (!run())
    return;
  expectValues(output(s), {-1, 3, -1, 0, 1, 5});
}

TEST_P(ElementwiseTest, PReluFloatKinds) {
  addBinary("prelu",
            [](Function *f, NodeValue x, NodeValue s) { return f->createPRelu("p", x, s); },
            [](double x, double s) { return x >= 0 ? x : s * x; }, -3, 3);
  runAndCheck();
}

// ------------------------------------------------------------------ unary math

TEST_P(ElementwiseTest, ExpLogSqrtFloatKinds) {
  addUnary("exp", [](Function *f, NodeValue x) { return f->createExp("e", x); },
           [](double x) { return std::exp(x); }, -6, 6);
  addUnary("log", [](Function *f, NodeValue x) { return f->createLog("l", x); },
           [](double x) { return std::log(x); }, 0.01f, 50);
  addUnary("sqrt", [](Function *f, NodeValue x) { return f->createSqrt("s", x); },
           [](double x) { return std::sqrt(x); }, 0, 50);
  addUnary("rsqrt", [](Function *f, NodeValue x) { return f->createRsqrt("r", x); },
           [](double x) { return 1 / std::sqrt(x); }, 0.01f, 50);
  addUnary("reciprocal", [](Function *f, NodeValue x) { return f->createReciprocal("r", x); },
           [](double x) { return 1 / x; }, 0.05f, 20);
  addUnary("erf", [](Function *f, NodeValue x) { return f->createErf("e", x); },
           [](double x) { return std::erf(x); }, -3, 3);
  runAndCheck();
}

TEST_P(ElementwiseTest, UnaryMathSpecialValues) {
  auto *x = input("x", ElemKind::Float, {6}, {0, -0.0, -1, kInf, -kInf, kNaN});
  SaveNode *exp = save(F()->createExp("exp", x), "exp");
  SaveNode *log = save(F()->createLog("log", x), "log");
  SaveNode *sqrt = save(F()->createSqrt("sqrt", x), "sqrt");
  SaveNode *rsqrt = save(F()->createRsqrt("rsqrt", x), "rsqrt");
  SaveNode *recip = save(F()->createReciprocal("recip", x), "recip");
  SaveNode *erf = save(F()->createErf("erf", x), "erf");
  SaveNode *sig = save(F()->createSigmoid("sigmoid", x), "sigmoid");
  SaveNode *tanh = save(F()->createTanh("tanh", x), "tanh");
  if (!run())
    return;
  expectValues(output(exp), {1, 1, std::exp(-1.0), kInf, 0, kNaN}, 1e-6);
  expectValues(output(log), {-kInf, -kInf, kNaN, kInf, kNaN, kNaN});
  expectValues(output(sqrt), {0, 0, kNaN, kInf, kNaN, kNaN});
  expectValues(output(rsqrt), {kInf, -kInf, kNaN, 0, kNaN, kNaN});
  expectValues(output(recip), {kInf, -kInf, -1, 0, 0, kNaN});
  expectValues(output(erf), {0, 0, std::erf(-1.0), 1, -1, kNaN}, 1e-6);
  expectValues(output(sig), {0.5, 0.5, 1 / (1 + std::exp(1.0)), 1, 0, kNaN}, 1e-6);
  expectValues(output(tanh), {0, 0, std::tanh(-1.0), 1, -1, kNaN}, 1e-6);
}

TEST_P(ElementwiseTest, FloorCeilRoundFloatKinds) {
  addUnary("floor", [](Function *f, NodeValue x) { return f->createFloor("f", x); },
           [](double x) { return std::floor(x); }, -20, 20);
  addUnary("ceil", [](Function *f, NodeValue x) { return f->createCeil("c", x); },
           [](double x) { return std::ceil(x); }, -20, 20);
  addUnary("round", [](Function *f, NodeValue x) { return f->createRound("r", x); },
           [](double x) { return std::nearbyint(x); }, -20, 20);
  runAndCheck();
}

TEST_P(ElementwiseTest, RoundHalvesToEven) {
  for (ElemKind k : kFloatKinds) {
    std::string name = elemKindName(k);
    auto *x = input(name, Tensor(k, {13}, {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 2.4, -2.6,
                                           -0.4, kNaN, -kInf, 126.5}));
    checks_.push_back({save(F()->createRound("round", x), name + ".out"),
                       {-2, -2, -0.0, 0, 2, 2, 4, 2, -3, -0.0, kNaN, -kInf, 126},
                       0,
                       0,
                       name});
  }
  runAndCheck();
  if (HasFailure() || IsSkipped())
    return;
  // -0.5 and -0.4 round to negative zero.
  for (const Check &c : checks_) {
    EXPECT_TRUE(std::signbit(output(c.save).getAsDouble(2))) << c.what;
    EXPECT_TRUE(std::signbit(output(c.save).getAsDouble(9))) << c.what;
    EXPECT_FALSE(std::signbit(output(c.save).getAsDouble(3))) << c.what;
  }
}

TEST_P(ElementwiseTest, FloorCeilHandValues) {
  auto *x = input("x", ElemKind::Float, {6}, {-1.5, -0.5, 0.5, 2, kNaN, -kInf});
  SaveNode *fl = save(F()->createFloor("floor", x), "floor");
  SaveNode *ce = save(F()->createCeil("ceil", x), "ceil");
  if (!run())
    return;
  expectValues(output(fl), {-2, -1, 0, 2, kNaN, -kInf});
  expectValues(output(ce), {-1, -0.0, 1, 2, kNaN, -kInf});
  EXPECT_TRUE(std::signbit(output(ce).getAsDouble(1))); // ceil(-0.5) is -0
}

TEST_P(ElementwiseTest, NegAbsFloatKinds) {
  addUnary("neg", [](Function *f, NodeValue x) { return f->createNeg("n", x); },
           [](double x) { return -x; }, -9, 9);
  addUnary("abs", [](Function *f, NodeValue x) { return f->createAbs("a", x); },
           [](double x) { return std::fabs(x); }, -9, 9);
  runAndCheck();
}

TEST_P(ElementwiseTest, NegAbsIntegers) {
  const double i32Min = std::numeric_limits<int32_t>::min();
  auto *a = input("a", ElemKind::Int32I, {5}, {-7, 0, 12, 2147483647, i32Min});
  auto *b = input("b", ElemKind::Int64I, {4}, {-7, 0, 5000000000.0, -5000000000.0});
  SaveNode *negA = save(F()->createNeg("negA", a), "negA");
  SaveNode *absA = save(F()->createAbs("absA", a), "absA");
  SaveNode *negB = save(F()->createNeg("negB", b), "negB");
  SaveNode *absB = save(F()->createAbs("absB", b), "absB");
  if (!run())
    return;
  // The negation of the most negative int32 wraps to itself.
  expectValues(output(negA), {7, 0, -12, -2147483647, i32Min}, 0, 0);
  expectValues(output(absA), {7, 0, 12, 2147483647, i32Min}, 0, 0);
  expectValues(output(negB), {7, 0, -5000000000.0, 5000000000.0}, 0, 0);
  expectValues(output(absB), {7, 0, 5000000000.0, 5000000000.0}, 0, 0);
}

// ------------------------------------------------------------------ arithmetic

TEST_P(ElementwiseTest, ArithmeticFloatKinds) {
  addBinary("add", [](Function *f, NodeValue a, NodeValue b) { return f->createAdd("o", a, b); },
            [](double a, double b) { return a + b; }, -10, 10);
  addBinary("sub", [](Function *f, NodeValue a, NodeValue b) { return f->createSub("o", a, b); },
            [](double a, double b) { return a - b; }, -10, 10);
  addBinary("mul", [](Function *f, NodeValue a, NodeValue b) { return f->createMul("o", a, b); },
            [](double a, double b) { return a * b; }, -10, 10);
  addBinary("div", [](Function *f, NodeValue a, NodeValue b) { return f->createDiv("o", a, b); },
            [](double a, double b) { return a / b; }, 0.5f, 10);
  addBinary("max", [](Function *f, NodeValue a, NodeValue b) { return f->createMax("o", a, b); },
            [](double a, double b) { return std::max(a, b); }, -10, 10);
  addBinary("min", [](Function *f, NodeValue a, NodeValue b) { return f->createMin("o", a, b); },
            [](double a, double b) { return std::min(a, b); }, -10, 10);
  addBinary("pow", [](Function *f, NodeValue a, NodeValue b) { return f->createPow("o", a, b); },
            [](double a, double b) { return std::pow(a, b); }, 0.1f, 3);
  runAndCheck();
}

TEST_P(ElementwiseTest, FloatSpecialValues) {
  auto *a = input("a", ElemKind::Float, {6}, {1, -1, 0, kNaN, 2, kInf});
  auto *b = input("b", ElemKind::Float, {6}, {0, 0, 0, 1, kNaN, kInf});
  SaveNode *div = save(F()->createDiv("div", a, b), "div");
  SaveNode *max = save(F()->createMax("max", a, b), "max");
  SaveNode *min = save(F()->createMin("min", a, b), "min");
  SaveNode *sub = save(F()->createSub("sub", a, b), "sub");
  if (!run())
    return;
  expectValues(output(div), {kInf, -kInf, kNaN, kNaN, kNaN, kNaN});
  // Max and Min propagate NaN.
  expectValues(output(max), {1, 0, 0, kNaN, kNaN, kInf});
  expectValues(output(min), {0, -1, 0, kNaN, kNaN, kInf});
  expectValues(output(sub), {1, -1, 0, kNaN, kNaN, kNaN});
}

TEST_P(ElementwiseTest, PowHandValues) {
  auto *a = input("a", ElemKind::Float, {5}, {2, 4, -8, 0, -2});
  auto *b = input("b", ElemKind::Float, {5}, {3, 0.5, 1.0 / 3, 0, 2});
  SaveNode *s = save(F()->createPow("pow", a, b));
  if (!run())
    return;
  expectValues(output(s), {8, 2, kNaN, 1, 4});
}

TEST_P(ElementwiseTest, IntegerArithmetic) {
  for (ElemKind k : {ElemKind::Int32I, ElemKind::Int64I}) {
    std::string n = elemKindName(k);
    auto *a = input(n + "a", k, {6}, {7, -7, 7, -7, 0, 100});
    auto *b = input(n + "b", k, {6}, {2, 2, -2, -2, 5, -3});
    checks_.push_back({save(F()->createAdd("add", a, b)), {9, -5, 5, -9, 5, 97}, 0, 0, n + "add"});
    checks_.push_back(
        {save(F()->createSub("sub", a, b)), {5, -9, 9, -5, -5, 103}, 0, 0, n + "sub"});
    checks_.push_back(
        {save(F()->createMul("mul", a, b)), {14, -14, -14, 14, 0, -300}, 0, 0, n + "mul"});
    // Division truncates toward zero.
    checks_.push_back({save(F()->createDiv("div", a, b)), {3, -3, -3, 3, 0, -33}, 0, 0, n + "div"});
    checks_.push_back({save(F()->createMax("max", a, b)), {7, 2, 7, -2, 5, 100}, 0, 0, n + "max"});
    checks_.push_back({save(F()->createMin("min", a, b)), {2, -7, -2, -7, 0, -3}, 0, 0, n + "min"});
  }
  runAndCheck();
}

TEST_P(ElementwiseTest, IntegerOverflowWraps) {
  const double i32Max = 2147483647, i32Min = -2147483648.0;
  auto *a = input("a", ElemKind::Int32I, {3}, {i32Max, i32Min, 65536});
  auto *b = input("b", ElemKind::Int32I, {3}, {1, -1, 65536});
  SaveNode *add = save(F()->createAdd("add", a, b), "add");
  SaveNode *mul = save(F()->createMul("mul", a, b), "mul");
  SaveNode *div = save(F()->createDiv("div", a, b), "div");
  if (!run())
    return;
  expectValues(output(add), {i32Min, i32Max, 131072}, 0, 0);
  expectValues(output(mul), {i32Max, i32Min, 0}, 0, 0); // 2^32 wraps to 0; MIN * -1 to MIN
  expectValues(output(div), {i32Max, i32Min, 1}, 0, 0); // MIN / -1 wraps to MIN
}

TEST_P(ElementwiseTest, IntegerDivisionByZeroIsAnError) {
  for (ElemKind k : {ElemKind::Int32I, ElemKind::Int64I}) {
    SCOPED_TRACE(elemKindName(k));
    Function *f = mod().createFunction(std::string("div_") + elemKindName(k));
    Placeholder *a = mod().createPlaceholder(k, {3}, "a");
    Placeholder *b = mod().createPlaceholder(k, {3}, "b");
    f->createSave("q", f->createDiv("divide", a, b));
    std::vector<std::pair<Placeholder *, Tensor>> in;
    in.emplace_back(a, Tensor(k, {3}, {4, 5, 6}));
    in.emplace_back(b, Tensor(k, {3}, {2, 0, 3}));
    bool skipped;
    Error e = runRaw(f, std::move(in), skipped);
    if (skipped)
      GTEST_SKIP() << e.message();
    ASSERT_TRUE(bool(e)) << "integer division by zero must fail";
    EXPECT_NE(e.message().find("divide"), std::string::npos) << e.message();
  }
}

TEST_P(ElementwiseTest, QuantizedInt8Arithmetic) {
  // LHS real = 0.5 q; RHS real = 0.25 (q - 4); result real = 0.5 (q + 10).
  auto *a = input("a", qTensor(ElemKind::Int8Q, {8}, 0.5f, 0, {2, -4, 100, 127, -128, 3, -5, -3}));
  auto *b = input("b", qTensor(ElemKind::Int8Q, {8}, 0.25f, 4, {6, 0, 4, 127, -128, 5, 4, 3}));
  // reals a: 1, -2, 50, 63.5, -64, 1.5, -2.5, -1.5
  // reals b: 0.5, -1, 0, 30.75, -33, 0.25, 0, -0.25
  TypeRef outTy = mod().uniqueType(ElemKind::Int8Q, {8}, 0.5f, -10);
  SaveNode *add = save(F()->createAdd("add", outTy, a, b), "add");
  SaveNode *sub = save(F()->createSub("sub", outTy, a, b), "sub");
  SaveNode *mul = save(F()->createMul("mul", outTy, a, b), "mul");
  SaveNode *max = save(F()->createMax("max", outTy, a, b), "max");
  SaveNode *min = save(F()->createMin("min", outTy, a, b), "min");
  if (!run())
    return;
  // q = round_half_away(real / 0.5) - 10, saturated to [-128, 127].
  // add reals: 1.5, -3, 50, 94.25, -97, 1.75, -2.5, -1.75
  expectValues(output(add), {-7, -16, 90, 127, -128, -6, -15, -14}, 0, 0);
  // sub reals: 0.5, -1, 50, 32.75, -31, 1.25, -2.5, -1.25
  expectValues(output(sub), {-9, -12, 90, 56, -72, -7, -15, -13}, 0, 0);
  // mul reals: 0.5, 2, 0, 1952.625, 2112, 0.375, 0, 0.375
  expectValues(output(mul), {-9, -6, -10, 127, 127, -9, -10, -9}, 0, 0);
  // max reals: 1, -1, 50, 63.5, -33, 1.5, 0, -0.25
  expectValues(output(max), {-8, -12, 90, 117, -76, -7, -10, -11}, 0, 0);
  // min reals: 0.5, -2, 0, 30.75, -64, 0.25, -2.5, -1.5
  expectValues(output(min), {-9, -14, -10, 52, -128, -9, -15, -13}, 0, 0);
}

TEST_P(ElementwiseTest, QuantizedInt8SameParams) {
  auto *a = input("a", qTensor(ElemKind::Int8Q, {4}, 0.1f, 0, {10, -20, 100, -100}));
  auto *b = input("b", qTensor(ElemKind::Int8Q, {4}, 0.1f, 0, {5, 5, 100, -100}));
  SaveNode *add = save(F()->createAdd("add", a, b));
  if (!run())
    return;
  EXPECT_EQ(output(add).getType().scale, 0.1f);
  expectValues(output(add), {15, -15, 127, -128}, 0, 0);
}

TEST_P(ElementwiseTest, BroadcastOperands) {
  auto *a = input("a", ElemKind::Float, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto *row = input("row", ElemKind::Float, {3}, {10, 20, 30});
  auto *col = input("col", ElemKind::Float, {2, 1}, {100, 200});
  auto *scalar = input("scalar", ElemKind::Float, {}, {0.5});
  NodeValue r = F()->createBroadcast("brow", row, {2, 3});
  NodeValue c = F()->createBroadcast("bcol", col, {2, 3});
  NodeValue s = F()->createBroadcast("bscalar", scalar, {2, 3});
  SaveNode *sum = save(F()->createAdd("sum", F()->createAdd("ar", a, r), c), "sum");
  SaveNode *prod = save(F()->createMul("prod", a, s), "prod");
  if (!run())
    return;
  expectValues(output(sum), {111, 122, 133, 214, 225, 236});
  expectValues(output(prod), {0.5, 1, 1.5, 2, 2.5, 3});
}

TEST_P(ElementwiseTest, ScalarAndSizeOneShapes) {
  auto *a = input("a", ElemKind::Float, {}, {3});
  auto *b = input("b", ElemKind::Float, {}, {-4});
  auto *c = input("c", ElemKind::Float, {1, 1, 1}, {-2});
  SaveNode *s = save(F()->createSub("sub", a, b), "sub");
  SaveNode *r = save(F()->createRelu("relu", c), "relu");
  if (!run())
    return;
  EXPECT_EQ(output(s).dims().size(), 0u);
  expectValues(output(s), {7});
  expectValues(output(r), {0});
}

// ------------------------------------------------------------------ comparisons

TEST_P(ElementwiseTest, ComparisonsFloatKindsWithNaN) {
  for (ElemKind k : kFloatKinds) {
    std::string n = elemKindName(k);
    auto *a = input(n + "a", Tensor(k, {5}, {1, 2, 3, kNaN, -0.0}));
    auto *b = input(n + "b", Tensor(k, {5}, {2, 2, 2, kNaN, 0.0}));
    checks_.push_back({save(F()->createCmpEQ("eq", a, b)), {0, 1, 0, 0, 1}, 0, 0, n + " eq"});
    checks_.push_back({save(F()->createCmpLT("lt", a, b)), {1, 0, 0, 0, 0}, 0, 0, n + " lt"});
    checks_.push_back({save(F()->createCmpLTE("le", a, b)), {1, 1, 0, 0, 1}, 0, 0, n + " le"});
  }
  runAndCheck();
  if (!HasFailure() && !IsSkipped()) {
    EXPECT_EQ(output(checks_[0].save).getElementType(), ElemKind::Bool);
  }
}

TEST_P(ElementwiseTest, ComparisonsIntegers) {
  for (ElemKind k : {ElemKind::Int32I, ElemKind::Int64I}) {
    std::string n = elemKindName(k);
    auto *a = input(n + "a", k, {4}, {-5, 0, 7, 2147483647});
    auto *b = input(n + "b", k, {4}, {-6, 0, 8, 2147483646});
    checks_.push_back({save(F()->createCmpEQ("eq", a, b)), {0, 1, 0, 0}, 0, 0, n + " eq"});
    checks_.push_back({save(F()->createCmpLT("lt", a, b)), {0, 0, 1, 0}, 0, 0, n + " lt"});
    checks_.push_back({save(F()->createCmpLTE("le", a, b)), {0, 1, 1, 0}, 0, 0, n + " le"});
  }
  runAndCheck();
}

// ------------------------------------------------------------------ select

TEST_P(ElementwiseTest, SelectEveryKind) {
  const ElemKind kinds[] = {ElemKind::Float,  ElemKind::Float16, ElemKind::BFloat16,
                            ElemKind::Int8Q,  ElemKind::UInt8Q,  ElemKind::Int32Q,
                            ElemKind::Int32I, ElemKind::Int64I,  ElemKind::Bool};
  auto *cond = input("cond", ElemKind::Bool, {2, 2}, {1, 0, 0, 1});
  for (ElemKind k : kinds) {
    std::string n = elemKindName(k);
    bool isBool = k == ElemKind::Bool;
    Type ty = isQuantized(k) ? Type(k, {2, 2}, 0.5f, 3) : Type(k, {2, 2});
    Tensor lt(ty), rt(ty);
    const double l[] = {1, 2, 3, 4}, r[] = {10, 20, 30, 40};
    for (size_t i = 0; i < 4; i++) {
      lt.setFromDouble(i, isBool ? 1 : l[i]);
      rt.setFromDouble(i, isBool ? 0 : r[i]);
    }
    auto *a = input(n + "a", std::move(lt));
    auto *b = input(n + "b", std::move(rt));
    std::vector<double> want =
        isBool ? std::vector<double>{1, 0, 0, 1} : std::vector<double>{1, 20, 30, 4};
    checks_.push_back({save(F()->createSelect("sel", cond, a, b)), want, 0, 0, n});
  }
  runAndCheck();
}

TEST_P(ElementwiseTest, SelectRequantizesQuantizedOperands) {
  auto *cond = input("cond", ElemKind::Bool, {4}, {1, 0, 1, 0});
  auto *a = input("a", qTensor(ElemKind::Int8Q, {4}, 1.0f, 0, {4, 4, -6, -6}));
  auto *b = input("b", qTensor(ElemKind::Int8Q, {4}, 0.25f, 0, {8, 8, 8, -128}));
  // Result: scale 0.5, offset 1. a reals 4, -6; b reals 2, -32.
  TypeRef outTy = mod().uniqueType(ElemKind::Int8Q, {4}, 0.5f, 1);
  SaveNode *s = save(F()->createSelect("sel", outTy, cond, a, b));
  if (!run())
    return;
  expectValues(output(s), {9, 5, -11, -63}, 0, 0);
}

KILN_INSTANTIATE_BACKEND_TESTS(ElementwiseTest);

} // namespace kiln::test
