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

/// One test per float kind, so that a backend that runs some of them runs those:
/// FLOAT_KIND_TEST(Name, body using `k`) defines NameF32, NameF16 and NameBF16.
#define FLOAT_KIND_TEST(NAME, ...)                                                                 \
  TEST_P(ElementwiseTest, NAME##F32) {                                                             \
    const ElemKind k = ElemKind::Float;                                                            \
    __VA_ARGS__                                                                                    \
  }                                                                                                \
  TEST_P(ElementwiseTest, NAME##F16) {                                                             \
    const ElemKind k = ElemKind::Float16;                                                          \
    __VA_ARGS__                                                                                    \
  }                                                                                                \
  TEST_P(ElementwiseTest, NAME##BF16) {                                                            \
    const ElemKind k = ElemKind::BFloat16;                                                         \
    __VA_ARGS__                                                                                    \
  }

/// One test per integer kind: INT_KIND_TEST(Name, body using `k`) defines NameInt32 and
/// NameInt64.
#define INT_KIND_TEST(NAME, ...)                                                                   \
  TEST_P(ElementwiseTest, NAME##Int32) {                                                           \
    const ElemKind k = ElemKind::Int32I;                                                           \
    __VA_ARGS__                                                                                    \
  }                                                                                                \
  TEST_P(ElementwiseTest, NAME##Int64) {                                                           \
    const ElemKind k = ElemKind::Int64I;                                                           \
    __VA_ARGS__                                                                                    \
  }

class ElementwiseTest : public BackendTest {
protected:
  struct Check {
    SaveNode *save;
    std::vector<double> expected;
    double atol, rtol;
    std::string what;
  };

  /// For float kind \p k: a seeded random input in [lo, hi] of \p dims, the node \p build
  /// makes, and the expectation \p ref (double) of every stored input value.
  void addUnary(ElemKind k, const std::string &name, const UnaryBuilder &build,
                const std::function<double(double)> &ref, float lo, float hi, Dims dims = {3, 11}) {
    {
      Tensor t(k, dims);
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
  void addBinary(ElemKind k, const std::string &name, const BinaryBuilder &build,
                 const std::function<double(double, double)> &ref, float lo, float hi) {
    {
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

  /// A placeholder of seeded random floats in [lo, hi]; \p values receives them.
  Placeholder *randomIn(const std::string &name, Dims d, float lo, float hi, uint64_t seed,
                        std::vector<double> &values) {
    Tensor t = randomTensor(Type(ElemKind::Float, d), lo, hi, seed);
    values = toDoubles(t);
    return input(name, std::move(t));
  }

  /// An int8 binary operator \p build (result type, operands) on QuantizedInt8*'s operands.
  void quantizedInt8Binary(
      const std::function<NodeValue(Function *, TypeRef, NodeValue, NodeValue)> &build,
      const std::vector<double> &want);

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

FLOAT_KIND_TEST(ReluFloatKinds, {
  addUnary(
      k, "relu", [](Function *f, NodeValue x) { return f->createRelu("relu", x); },
      [](double x) { return x > 0 ? x : 0; }, -4, 4);
  runAndCheck();
})

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

FLOAT_KIND_TEST(Sigmoid, {
  addUnary(
      k, "sigmoid", [](Function *f, NodeValue x) { return f->createSigmoid("s", x); },
      [](double x) { return 1 / (1 + std::exp(-x)); }, -8, 8);
  runAndCheck();
})

FLOAT_KIND_TEST(Tanh, {
  addUnary(
      k, "tanh", [](Function *f, NodeValue x) { return f->createTanh("t", x); },
      [](double x) { return std::tanh(x); }, -5, 5);
  runAndCheck();
})

FLOAT_KIND_TEST(GeluExact, {
  addUnary(
      k, "gelu", [](Function *f, NodeValue x) { return f->createGelu("g", x, false); },
      [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -5, 5);
  runAndCheck();
})

FLOAT_KIND_TEST(GeluTanhApproximation, {
  addUnary(
      k, "gelu_tanh", [](Function *f, NodeValue x) { return f->createGelu("g", x, true); },
      [](double x) {
        const double c = std::sqrt(2 / M_PI);
        return 0.5 * x * (1 + std::tanh(c * (x + 0.044715 * x * x * x)));
      },
      -5, 5);
  runAndCheck();
})

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

FLOAT_KIND_TEST(HardSwishFloatKinds, {
  addUnary(
      k, "hardswish", [](Function *f, NodeValue x) { return f->createHardSwish("h", x); },
      [](double x) { return x * std::min(std::max(x + 3, 0.0), 6.0) / 6; }, -5, 5);
  runAndCheck();
})

FLOAT_KIND_TEST(Swish, {
  addUnary(
      k, "swish", [](Function *f, NodeValue x) { return f->createSwish("s", x); },
      [](double x) { return x / (1 + std::exp(-x)); }, -8, 8);
  runAndCheck();
})

TEST_P(ElementwiseTest, ClipBoundsAndNaN) {
  auto *x = input("x", ElemKind::Float, {7}, {-7, -1, -0.5, 0.25, 2, 9, kNaN});
  SaveNode *s = save(F()->createClip("clip", x, -1.0f, 2.0f));
  if (!run())
    return;
  expectValues(output(s), {-1, -1, -0.5, 0.25, 2, 2, kNaN});
}

FLOAT_KIND_TEST(ClipFloatKinds, {
  addUnary(
      k, "clip", [](Function *f, NodeValue x) { return f->createClip("c", x, -1.5f, 0.75f); },
      [](double x) { return std::min(std::max(x, -1.5), 0.75); }, -3, 3);
  runAndCheck();
})

TEST_P(ElementwiseTest, LeakyRelu) {
  auto *x = input("x", ElemKind::Float, {5}, {-4, -1, 0, 2, kNaN});
  SaveNode *s = save(F()->createLeakyRelu("lr", x, 0.125f));
  if (!run())
    return;
  expectValues(output(s), {-0.5, -0.125, 0, 2, kNaN});
}

FLOAT_KIND_TEST(LeakyReluFloatKinds, {
  addUnary(
      k, "leaky", [](Function *f, NodeValue x) { return f->createLeakyRelu("l", x, 0.3f); },
      [](double x) { return x >= 0 ? x : double(0.3f) * x; }, -4, 4);
  runAndCheck();
})

TEST_P(ElementwiseTest, PRelu) {
  auto *x = input("x", ElemKind::Float, {2, 3}, {-2, 3, -4, 0, -1, 5});
  auto *slope = constant("slope", ElemKind::Float, {2, 3}, {0.5, 0.5, 0.25, 2, -1, 7});
  SaveNode *s = save(F()->createPRelu("prelu", x, slope));
  if (!run())
    return;
  expectValues(output(s), {-1, 3, -1, 0, 1, 5});
}

FLOAT_KIND_TEST(PReluFloatKinds, {
  addBinary(
      k, "prelu", [](Function *f, NodeValue x, NodeValue s) { return f->createPRelu("p", x, s); },
      [](double x, double s) { return x >= 0 ? x : s * x; }, -3, 3);
  runAndCheck();
})

// ------------------------------------------------------------------ unary math

FLOAT_KIND_TEST(ExpLogSqrtFloatKinds, {
  addUnary(
      k, "exp", [](Function *f, NodeValue x) { return f->createExp("e", x); },
      [](double x) { return std::exp(x); }, -6, 6);
  addUnary(
      k, "log", [](Function *f, NodeValue x) { return f->createLog("l", x); },
      [](double x) { return std::log(x); }, 0.01f, 50);
  addUnary(
      k, "sqrt", [](Function *f, NodeValue x) { return f->createSqrt("s", x); },
      [](double x) { return std::sqrt(x); }, 0, 50);
  addUnary(
      k, "rsqrt", [](Function *f, NodeValue x) { return f->createRsqrt("r", x); },
      [](double x) { return 1 / std::sqrt(x); }, 0.01f, 50);
  addUnary(
      k, "reciprocal", [](Function *f, NodeValue x) { return f->createReciprocal("r", x); },
      [](double x) { return 1 / x; }, 0.05f, 20);
  addUnary(
      k, "erf", [](Function *f, NodeValue x) { return f->createErf("e", x); },
      [](double x) { return std::erf(x); }, -3, 3);
  runAndCheck();
})

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

FLOAT_KIND_TEST(FloorCeilRoundFloatKinds, {
  addUnary(
      k, "floor", [](Function *f, NodeValue x) { return f->createFloor("f", x); },
      [](double x) { return std::floor(x); }, -20, 20);
  addUnary(
      k, "ceil", [](Function *f, NodeValue x) { return f->createCeil("c", x); },
      [](double x) { return std::ceil(x); }, -20, 20);
  addUnary(
      k, "round", [](Function *f, NodeValue x) { return f->createRound("r", x); },
      [](double x) { return std::nearbyint(x); }, -20, 20);
  runAndCheck();
})

FLOAT_KIND_TEST(RoundHalvesToEven, {
  std::string name = elemKindName(k);
  auto *x = input(
      name,
      Tensor(k, {13}, {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 2.4, -2.6, -0.4, kNaN, -kInf, 126.5}));
  SaveNode *s = save(F()->createRound("round", x), name + ".out");
  if (!run())
    return;
  expectValues(output(s), {-2, -2, -0.0, 0, 2, 2, 4, 2, -3, -0.0, kNaN, -kInf, 126}, 0, 0);
  // -0.5 and -0.4 round to negative zero.
  EXPECT_TRUE(std::signbit(output(s).getAsDouble(2)));
  EXPECT_TRUE(std::signbit(output(s).getAsDouble(9)));
  EXPECT_FALSE(std::signbit(output(s).getAsDouble(3)));
})

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

FLOAT_KIND_TEST(NegAbsFloatKinds, {
  addUnary(
      k, "neg", [](Function *f, NodeValue x) { return f->createNeg("n", x); },
      [](double x) { return -x; }, -9, 9);
  addUnary(
      k, "abs", [](Function *f, NodeValue x) { return f->createAbs("a", x); },
      [](double x) { return std::fabs(x); }, -9, 9);
  runAndCheck();
})

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

// One test per operator and float kind.
FLOAT_KIND_TEST(ArithmeticAdd, {
  addBinary(
      k, "add", [](Function *f, NodeValue a, NodeValue b) { return f->createAdd("o", a, b); },
      [](double a, double b) { return a + b; }, -10, 10);
  runAndCheck();
})

FLOAT_KIND_TEST(ArithmeticSub, {
  addBinary(
      k, "sub", [](Function *f, NodeValue a, NodeValue b) { return f->createSub("o", a, b); },
      [](double a, double b) { return a - b; }, -10, 10);
  runAndCheck();
})

FLOAT_KIND_TEST(ArithmeticMul, {
  addBinary(
      k, "mul", [](Function *f, NodeValue a, NodeValue b) { return f->createMul("o", a, b); },
      [](double a, double b) { return a * b; }, -10, 10);
  runAndCheck();
})

FLOAT_KIND_TEST(ArithmeticDiv, {
  addBinary(
      k, "div", [](Function *f, NodeValue a, NodeValue b) { return f->createDiv("o", a, b); },
      [](double a, double b) { return a / b; }, 0.5f, 10);
  runAndCheck();
})

FLOAT_KIND_TEST(ArithmeticMax, {
  addBinary(
      k, "max", [](Function *f, NodeValue a, NodeValue b) { return f->createMax("o", a, b); },
      [](double a, double b) { return std::max(a, b); }, -10, 10);
  runAndCheck();
})

FLOAT_KIND_TEST(ArithmeticMin, {
  addBinary(
      k, "min", [](Function *f, NodeValue a, NodeValue b) { return f->createMin("o", a, b); },
      [](double a, double b) { return std::min(a, b); }, -10, 10);
  runAndCheck();
})

FLOAT_KIND_TEST(ArithmeticPow, {
  addBinary(
      k, "pow", [](Function *f, NodeValue a, NodeValue b) { return f->createPow("o", a, b); },
      [](double a, double b) { return std::pow(a, b); }, 0.1f, 3);
  runAndCheck();
})

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

INT_KIND_TEST(IntegerArithmetic, {
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
  runAndCheck();
})

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

/// The Interpreter reports integer division by zero; the CPU backend's kernels cannot stop
/// a run and define x / 0 = 0 instead (NodeTable.cpp, Div). Neither may crash.
INT_KIND_TEST(IntegerDivisionByZero, {
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
  if (GetParam() == "CPU") {
    EXPECT_FALSE(bool(e)) << e.message();
    return;
  }
  ASSERT_TRUE(bool(e)) << "integer division by zero must fail";
  EXPECT_NE(e.message().find("divide"), std::string::npos) << e.message();
})

// LHS real = 0.5 q; RHS real = 0.25 (q - 4); result real = 0.5 (q + 10), q =
// round_half_away(real / 0.5) - 10, saturated to [-128, 127]. One test per operator.
// reals a: 1, -2, 50, 63.5, -64, 1.5, -2.5, -1.5
// reals b: 0.5, -1, 0, 30.75, -33, 0.25, 0, -0.25
void ElementwiseTest::quantizedInt8Binary(
    const std::function<NodeValue(Function *, TypeRef, NodeValue, NodeValue)> &build,
    const std::vector<double> &want) {
  auto *a = input("a", qTensor(ElemKind::Int8Q, {8}, 0.5f, 0, {2, -4, 100, 127, -128, 3, -5, -3}));
  auto *b = input("b", qTensor(ElemKind::Int8Q, {8}, 0.25f, 4, {6, 0, 4, 127, -128, 5, 4, 3}));
  TypeRef outTy = mod().uniqueType(ElemKind::Int8Q, {8}, 0.5f, -10);
  SaveNode *s = save(build(F(), outTy, a, b), "out");
  if (!run())
    return;
  expectValues(output(s), want, 0, 0);
}

// add reals: 1.5, -3, 50, 94.25, -97, 1.75, -2.5, -1.75
TEST_P(ElementwiseTest, QuantizedInt8Add) {
  quantizedInt8Binary(
      [](Function *f, TypeRef t, NodeValue a, NodeValue b) { return f->createAdd("add", t, a, b); },
      {-7, -16, 90, 127, -128, -6, -15, -14});
}
// sub reals: 0.5, -1, 50, 32.75, -31, 1.25, -2.5, -1.25
TEST_P(ElementwiseTest, QuantizedInt8Sub) {
  quantizedInt8Binary(
      [](Function *f, TypeRef t, NodeValue a, NodeValue b) { return f->createSub("sub", t, a, b); },
      {-9, -12, 90, 56, -72, -7, -15, -13});
}
// mul reals: 0.5, 2, 0, 1952.625, 2112, 0.375, 0, 0.375
TEST_P(ElementwiseTest, QuantizedInt8Mul) {
  quantizedInt8Binary(
      [](Function *f, TypeRef t, NodeValue a, NodeValue b) { return f->createMul("mul", t, a, b); },
      {-9, -6, -10, 127, 127, -9, -10, -9});
}
// max reals: 1, -1, 50, 63.5, -33, 1.5, 0, -0.25
TEST_P(ElementwiseTest, QuantizedInt8Max) {
  quantizedInt8Binary(
      [](Function *f, TypeRef t, NodeValue a, NodeValue b) { return f->createMax("max", t, a, b); },
      {-8, -12, 90, 117, -76, -7, -10, -11});
}
// min reals: 0.5, -2, 0, 30.75, -64, 0.25, -2.5, -1.5
TEST_P(ElementwiseTest, QuantizedInt8Min) {
  quantizedInt8Binary(
      [](Function *f, TypeRef t, NodeValue a, NodeValue b) { return f->createMin("min", t, a, b); },
      {-9, -14, -10, 52, -128, -9, -15, -13});
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

TEST_P(ElementwiseTest, ScalarShapes) {
  auto *a = input("a", ElemKind::Float, {}, {3});
  auto *b = input("b", ElemKind::Float, {}, {-4});
  SaveNode *s = save(F()->createSub("sub", a, b), "sub");
  if (!run())
    return;
  EXPECT_EQ(output(s).dims().size(), 0u);
  expectValues(output(s), {7});
}

TEST_P(ElementwiseTest, SizeOneShapes) {
  auto *c = input("c", ElemKind::Float, {1, 1, 1}, {-2});
  SaveNode *r = save(F()->createRelu("relu", c), "relu");
  if (!run())
    return;
  expectValues(output(r), {0});
}

// ------------------------------------------------------------------ comparisons

FLOAT_KIND_TEST(ComparisonsWithNaN, {
  std::string n = elemKindName(k);
  auto *a = input(n + "a", Tensor(k, {5}, {1, 2, 3, kNaN, -0.0}));
  auto *b = input(n + "b", Tensor(k, {5}, {2, 2, 2, kNaN, 0.0}));
  checks_.push_back({save(F()->createCmpEQ("eq", a, b)), {0, 1, 0, 0, 1}, 0, 0, n + " eq"});
  checks_.push_back({save(F()->createCmpLT("lt", a, b)), {1, 0, 0, 0, 0}, 0, 0, n + " lt"});
  checks_.push_back({save(F()->createCmpLTE("le", a, b)), {1, 1, 0, 0, 1}, 0, 0, n + " le"});
  runAndCheck();
  if (!HasFailure() && !IsSkipped()) {
    EXPECT_EQ(output(checks_[0].save).getElementType(), ElemKind::Bool);
  }
})

INT_KIND_TEST(Comparisons, {
  std::string n = elemKindName(k);
  auto *a = input(n + "a", k, {4}, {-5, 0, 7, 2147483647});
  auto *b = input(n + "b", k, {4}, {-6, 0, 8, 2147483646});
  checks_.push_back({save(F()->createCmpEQ("eq", a, b)), {0, 1, 0, 0}, 0, 0, n + " eq"});
  checks_.push_back({save(F()->createCmpLT("lt", a, b)), {0, 0, 1, 0}, 0, 0, n + " lt"});
  checks_.push_back({save(F()->createCmpLTE("le", a, b)), {0, 1, 1, 0}, 0, 0, n + " le"});
  runAndCheck();
})

// ------------------------------------------------------------------ select

class SelectTest : public ElementwiseTest {
protected:
  /// Select between two [2, 2] tensors of kind \p k (quantized: scale 0.5, offset 3).
  void selectOfKind(ElemKind k) {
    auto *cond = input("cond", ElemKind::Bool, {2, 2}, {1, 0, 0, 1});
    std::string n = elemKindName(k);
    bool isBool = k == ElemKind::Bool;
    Type ty = isQuantized(k) ? Type(k, {2, 2}, 0.5f, 3) : Type(k, {2, 2});
    Tensor lt(ty), rt(ty);
    const double l[] = {1, 2, 3, 4}, r[] = {10, 20, 30, 40};
    for (size_t i = 0; i < 4; i++) {
      lt.setFromDouble(i, isBool ? 1 : l[i]);
      rt.setFromDouble(i, isBool ? (i == 3 ? 1 : 0) : r[i]);
    }
    auto *a = input(n + "a", std::move(lt));
    auto *b = input(n + "b", std::move(rt));
    std::vector<double> want =
        isBool ? std::vector<double>{1, 0, 0, 1} : std::vector<double>{1, 20, 30, 4};
    SaveNode *s = save(F()->createSelect("sel", cond, a, b));
    if (!run())
      return;
    expectValues(output(s), want, 0, 0);
  }
};

TEST_P(SelectTest, Float) { selectOfKind(ElemKind::Float); }
TEST_P(SelectTest, Float16) { selectOfKind(ElemKind::Float16); }
TEST_P(SelectTest, BFloat16) { selectOfKind(ElemKind::BFloat16); }
TEST_P(SelectTest, Int8Q) { selectOfKind(ElemKind::Int8Q); }
TEST_P(SelectTest, UInt8Q) { selectOfKind(ElemKind::UInt8Q); }
TEST_P(SelectTest, Int32Q) { selectOfKind(ElemKind::Int32Q); }
TEST_P(SelectTest, Int32) { selectOfKind(ElemKind::Int32I); }
TEST_P(SelectTest, Int64) { selectOfKind(ElemKind::Int64I); }
TEST_P(SelectTest, Bool) { selectOfKind(ElemKind::Bool); }

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

// ------------------------------------------------------------------ wide ranges

/// Transcendental functions over wide ranges on 4099 elements (vector bodies and a
/// remainder), against <cmath> in double: the CPU backend's polynomial approximations
/// (backends/CPU/README.md) must stay within float rounding of the reference.
FLOAT_KIND_TEST(TranscendentalWideRanges, {
  const Dims d = {4099};
  addUnary(
      k, "exp", [](Function *f, NodeValue x) { return f->createExp("e", x); },
      [](double x) { return std::exp(x); }, -110, 90, d);
  addUnary(
      k, "sigmoid", [](Function *f, NodeValue x) { return f->createSigmoid("s", x); },
      [](double x) { return 1 / (1 + std::exp(-x)); }, -120, 120, d);
  addUnary(
      k, "tanh", [](Function *f, NodeValue x) { return f->createTanh("t", x); },
      [](double x) { return std::tanh(x); }, -12, 12, d);
  addUnary(
      k, "erf", [](Function *f, NodeValue x) { return f->createErf("e", x); },
      [](double x) { return std::erf(x); }, -7, 7, d);
  addUnary(
      k, "gelu", [](Function *f, NodeValue x) { return f->createGelu("g", x, false); },
      [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }, -12, 12, d);
  addUnary(
      k, "gelu_tanh", [](Function *f, NodeValue x) { return f->createGelu("g", x, true); },
      [](double x) {
        double u = std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
        return x / (1 + std::exp(-2 * u));
      },
      -12, 12, d);
  addUnary(
      k, "swish", [](Function *f, NodeValue x) { return f->createSwish("s", x); },
      [](double x) { return x / (1 + std::exp(-x)); }, -90, 90, d);
  addUnary(
      k, "log", [](Function *f, NodeValue x) { return f->createLog("l", x); },
      [](double x) { return std::log(x); }, 1e-6f, 3e4f, d);
  addUnary(
      k, "sqrt", [](Function *f, NodeValue x) { return f->createSqrt("s", x); },
      [](double x) { return std::sqrt(x); }, 0, 1e6f, d);
  // Small results are compared relatively too (atol 1e-5 only covers what rounds there),
  // but for GELU: the Interpreter's 1 + erf(x / sqrt 2) and 1 + tanh(u) lose the small
  // negative results to cancellation (absolute error about ulp(1) |x|).
  for (Check &c : checks_)
    if (k == ElemKind::Float)
      c.atol = c.what.rfind("gelu", 0) == 0 ? 2e-6 : 1e-30;
  runAndCheck();
})

TEST_P(ElementwiseTest, TranscendentalSpecialValues) {
  const double den = 1e-40, big = 3e38, fmin = 1.17549435e-38;
  auto *x = input("x", ElemKind::Float, {12},
                  {0, -0.0, den, -den, fmin, 1, -1, 88.5, -88.5, big, -big, kNaN});
  auto *pos = input("pos", ElemKind::Float, {8}, {den, fmin, 1e-30, 1, 0.999999f, 1e30, big, 0.5});
  SaveNode *exp = save(F()->createExp("exp", x), "exp");
  SaveNode *sig = save(F()->createSigmoid("sig", x), "sig");
  SaveNode *tanh = save(F()->createTanh("tanh", x), "tanh");
  SaveNode *erf = save(F()->createErf("erf", x), "erf");
  SaveNode *gelu = save(F()->createGelu("gelu", x, false), "gelu");
  SaveNode *log = save(F()->createLog("log", pos), "log");
  if (!run())
    return;
  const double xs[] = {0,    -0.0,  double(float(den)), -double(float(den)), fmin, 1, -1,
                       88.5, -88.5, double(float(big)), -double(float(big)), kNaN};
  auto ref = [&](double (*f)(double)) {
    std::vector<double> v;
    for (double xi : xs)
      v.push_back(double(float(f(xi))));
    return v;
  };
  expectValues(output(exp), ref([](double v) { return std::exp(v); }), 1e-44, 1e-6);
  expectValues(output(sig), ref([](double v) { return 1 / (1 + std::exp(-v)); }), 1e-44, 1e-6);
  expectValues(output(tanh), ref([](double v) { return std::tanh(v); }), 1e-44, 1e-6);
  expectValues(output(erf), ref([](double v) { return std::erf(v); }), 1e-44, 1e-6);
  expectValues(output(gelu), ref([](double v) { return 0.5 * v * std::erfc(-v / std::sqrt(2.0)); }),
               1e-44, 1e-6);
  std::vector<double> logRef;
  for (double v :
       {double(float(den)), fmin, 1e-30, 1.0, double(0.999999f), 1e30, double(float(big)), 0.5})
    logRef.push_back(std::log(double(float(v))));
  expectValues(output(log), logRef, 1e-44, 1e-6);
}

// ------------------------------------------------------------------ ConvertTo

TEST_P(ElementwiseTest, ConvertFloatToIntegersRoundsHalfEvenAndSaturates) {
  auto *x = input("x", ElemKind::Float, {14},
                  {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.6, -2.6, 3e9, -3e9, 1e20, -1e20, kNaN, kInf});
  SaveNode *i32 =
      save(F()->createConvertTo("i32", mod().uniqueType(ElemKind::Int32I, {14}), x), "i32");
  SaveNode *i64 =
      save(F()->createConvertTo("i64", mod().uniqueType(ElemKind::Int64I, {14}), x), "i64");
  SaveNode *b = save(F()->createConvertTo("b", mod().uniqueType(ElemKind::Bool, {14}), x), "b");
  if (!run())
    return;
  const double i32Max = 2147483647, i32Min = -2147483648.0;
  const double i64Max = 9223372036854775807.0, i64Min = -9223372036854775808.0;
  expectValues(output(i32),
               {0, 2, 2, -0.0, -2, -2, 3, -3, i32Max, i32Min, i32Max, i32Min, 0, i32Max}, 0, 0);
  expectValues(output(i64), {0, 2, 2, 0, -2, -2, 3, -3, 3e9, -3e9, i64Max, i64Min, 0, i64Max}, 0,
               0);
  EXPECT_EQ(output(i64).getHandle<int64_t>().raw(10), std::numeric_limits<int64_t>::max());
  // Bool is x != 0; NaN != 0.
  expectValues(output(b), {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 0, 0);
}

TEST_P(ElementwiseTest, ConvertBetweenIntegersAndBool) {
  auto *a = input("a", ElemKind::Int64I, {6}, {0, 1, -1, 5000000000.0, -5000000000.0, 16777217});
  auto *c = input("c", ElemKind::Bool, {3}, {1, 0, 1});
  auto *z = input("z", ElemKind::Int32I, {4}, {0, -7, 2147483647, 16777217});
  auto ty = [&](ElemKind k, dim_t n) { return mod().uniqueType(k, {n}); };
  SaveNode *toI32 = save(F()->createConvertTo("toI32", ty(ElemKind::Int32I, 6), a), "toI32");
  SaveNode *toF = save(F()->createConvertTo("toF", ty(ElemKind::Float, 6), a), "toF");
  SaveNode *toB = save(F()->createConvertTo("toB", ty(ElemKind::Bool, 6), a), "toB");
  SaveNode *bToF = save(F()->createConvertTo("bToF", ty(ElemKind::Float, 3), c), "bToF");
  SaveNode *bToI64 = save(F()->createConvertTo("bToI64", ty(ElemKind::Int64I, 3), c), "bToI64");
  SaveNode *zToI64 = save(F()->createConvertTo("zToI64", ty(ElemKind::Int64I, 4), z), "zToI64");
  SaveNode *zToF = save(F()->createConvertTo("zToF", ty(ElemKind::Float, 4), z), "zToF");
  SaveNode *zToB = save(F()->createConvertTo("zToB", ty(ElemKind::Bool, 4), z), "zToB");
  if (!run())
    return;
  expectValues(output(toI32), {0, 1, -1, 2147483647, -2147483648.0, 16777217}, 0, 0);
  // 16777217 is not a float: it rounds to even, 16777216.
  expectValues(output(toF), {0, 1, -1, 5000000000.0, -5000000000.0, 16777216}, 0, 0);
  expectValues(output(toB), {0, 1, 1, 1, 1, 1}, 0, 0);
  expectValues(output(bToF), {1, 0, 1}, 0, 0);
  expectValues(output(bToI64), {1, 0, 1}, 0, 0);
  expectValues(output(zToI64), {0, -7, 2147483647, 16777217}, 0, 0);
  expectValues(output(zToF), {0, -7, 2147483648.0, 16777216}, 0, 0);
  expectValues(output(zToB), {0, 1, 1, 1}, 0, 0);
}

// ------------------------------------------------------------------ broadcasts and chains

/// The squeeze-and-excitation pattern: a per-channel [N, C, 1, 1] scale, through a
/// sigmoid, multiplying an [N, C, H, W] activation, then a residual add and SiLU.
TEST_P(ElementwiseTest, BroadcastPerChannelScaleChain) {
  std::vector<double> xv, sv, rv;
  auto *x = randomIn("x", {2, 5, 7, 9}, -3, 3, 11, xv);
  auto *s = randomIn("s", {2, 5, 1, 1}, -2, 2, 12, sv);
  auto *r = randomIn("r", {2, 5, 7, 9}, -1, 1, 13, rv);
  NodeValue g = F()->createBroadcast("bs", F()->createSigmoid("sig", s), {2, 5, 7, 9});
  NodeValue y = F()->createSwish("silu", F()->createAdd("res", F()->createMul("scale", x, g), r));
  SaveNode *out = save(y);
  if (!run())
    return;
  std::vector<double> want;
  for (size_t i = 0; i < xv.size(); i++) {
    double sig = 1 / (1 + std::exp(-sv[i / 63]));
    double v = xv[i] * double(float(sig)) + rv[i];
    want.push_back(v / (1 + std::exp(-v)));
  }
  expectValues(output(out), want, 1e-5, 1e-5);
}

/// Broadcasts of several shapes into one result: a row ([W]), a column ([H, 1]), a
/// scalar and a middle axis ([C, 1, W]), in one chain.
TEST_P(ElementwiseTest, BroadcastPatternsInOneChain) {
  const Dims d = {3, 4, 6};
  std::vector<double> av, rv, cv, sv, mv;
  auto *a = randomIn("a", d, -1, 1, 21, av);
  auto *row = randomIn("row", {6}, -1, 1, 22, rv);
  auto *col = randomIn("col", {4, 1}, -1, 1, 23, cv);
  auto *sc = randomIn("sc", {1}, 1, 2, 24, sv);
  auto *mid = randomIn("mid", {3, 1, 6}, -1, 1, 25, mv);
  Function *f = F();
  NodeValue y = f->createAdd("r", a, f->createBroadcast("br", row, {3, 4, 6}));
  y = f->createMul("c", y, f->createBroadcast("bc", col, {3, 4, 6}));
  y = f->createSub("s", y, f->createBroadcast("bs", sc, {3, 4, 6}));
  y = f->createMax("m", y, f->createBroadcast("bm", mid, {3, 4, 6}));
  SaveNode *out = save(f->createTanh("t", y));
  // The column broadcast is also saved: it is needed outside the chain.
  SaveNode *colOut = save(f->createBroadcast("bc2", col, {3, 4, 6}), "col");
  if (!run())
    return;
  std::vector<double> want, wantCol;
  for (size_t i = 0; i < 3; i++)
    for (size_t j = 0; j < 4; j++)
      for (size_t w = 0; w < 6; w++) {
        size_t e = (i * 4 + j) * 6 + w;
        double v = double(float(av[e] + rv[w]));
        v = double(float(v * cv[j]));
        v = double(float(v - sv[0]));
        v = std::max(v, mv[i * 6 + w]);
        want.push_back(std::tanh(v));
        wantCol.push_back(cv[j]);
      }
  expectValues(output(out), want, 1e-6, 1e-5);
  expectValues(output(colOut), wantCol, 0, 0);
}

/// A chain of twelve element-wise nodes of mixed kinds on one tensor, with an integer
/// branch (ConvertTo, integer arithmetic, compare, Select) inside it.
TEST_P(ElementwiseTest, LongMixedKindChain) {
  const Dims d = {1000};
  std::vector<double> xv;
  auto *x = randomIn("x", d, -6, 6, 31, xv);
  Function *f = F();
  NodeValue y = f->createTanh("t", f->createMul("m", x, x));
  y = f->createAdd("a", y, f->createExp("e", f->createNeg("n", x)));
  y = f->createClip("c", y, -1.0f, 5.0f);
  NodeValue q = f->createConvertTo(
      "q", mod().uniqueType(ElemKind::Int32I, d),
      f->createMul("m10", x, f->createSplat("ten", mod().uniqueType(ElemKind::Float, d), 10.0f)));
  NodeValue q3 =
      f->createDiv("q3", q, f->createSplat("three", mod().uniqueType(ElemKind::Int32I, d), 3.0f));
  NodeValue neg = f->createCmpLT(
      "neg", q3, f->createSplat("zero", mod().uniqueType(ElemKind::Int32I, d), 0.0f));
  NodeValue qf = f->createConvertTo("qf", mod().uniqueType(ElemKind::Float, d), q3);
  SaveNode *out = save(f->createSelect("sel", neg, qf, y));
  if (!run())
    return;
  std::vector<double> want;
  for (double v : xv) {
    float t = float(std::tanh(double(float(v * v))));
    float e = float(std::exp(-v));
    double yv = std::min(std::max(double(t + e), -1.0), 5.0);
    int32_t qi = int32_t(std::nearbyint(double(float(v * 10))));
    int32_t qd = qi / 3;
    want.push_back(qd < 0 ? double(qd) : yv);
  }
  expectValues(output(out), want, 1e-6, 1e-5);
}

/// Splats inside chains (ONNX HardSigmoid imports as x * alpha + beta, clipped, with both
/// constants as Splats), in every plain kind, one of them also saved.
TEST_P(ElementwiseTest, SplatsInChains) {
  const Dims d = {3, 50};
  std::vector<double> xv;
  auto *x = randomIn("x", d, -5, 5, 41, xv);
  auto *ix = input("ix", ElemKind::Int32I, {4}, {10, -10, 7, 0});
  Function *f = F();
  auto ty = [&](ElemKind k, Dims dd) { return mod().uniqueType(k, dd); };
  NodeValue hs = f->createMul("scale", x, f->createSplat("alpha", ty(ElemKind::Float, d), 0.2f));
  hs = f->createAdd("shift", hs, f->createSplat("beta", ty(ElemKind::Float, d), 0.5f));
  SaveNode *hsOut = save(f->createClip("clip", hs, 0.0f, 1.0f), "hardsigmoid");
  // Integer splats round half to even and saturate.
  NodeValue i = f->createAdd("i2", ix, f->createSplat("two", ty(ElemKind::Int32I, {4}), 2.5f));
  i = f->createMul("i3", i, f->createSplat("m4", ty(ElemKind::Int32I, {4}), -3.5f));
  SaveNode *iOut = save(i, "ints");
  SaveNode *big = save(f->createSplat("big", ty(ElemKind::Int64I, {2}), 1e20f), "big");
  SaveNode *b = save(f->createSplat("b", ty(ElemKind::Bool, {3}), 0.25f), "bool");
  if (!run())
    return;
  std::vector<double> want;
  for (double v : xv)
    want.push_back(std::min(std::max(double(float(float(v * double(0.2f)) + 0.5f)), 0.0), 1.0));
  expectValues(output(hsOut), want, 1e-6, 1e-6);
  expectValues(output(iOut), {-48, 32, -36, -8}, 0, 0);
  EXPECT_EQ(output(big).getHandle<int64_t>().raw(0), std::numeric_limits<int64_t>::max());
  expectValues(output(b), {1, 1, 1}, 0, 0);
}

KILN_INSTANTIATE_BACKEND_TESTS(ElementwiseTest);
KILN_INSTANTIATE_BACKEND_TESTS(SelectTest);

} // namespace kiln::test
