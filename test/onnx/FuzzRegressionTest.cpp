// Classes of malformed models that the loader's fuzzer (test/fuzz) found crashing the
// importer, each rebuilt here as a small model; and every file of the fuzzer's corpus
// (seeds and the inputs that once crashed) loaded once. Each must load or return an Error.

#include "ImporterTestBase.h"

#include <dirent.h>
#include <fstream>

namespace kiln::test {
namespace {

using B = ONNXBuilder;

Error loadBytes(const std::string &bytes) {
  Module mod;
  Function *f = mod.createFunction("f");
  Expected<ONNXModel> m = loadONNXFromBuffer(bytes.data(), bytes.size(), f);
  return m ? Error::success() : m.takeError();
}

void expectParseError(const Error &e, const std::string &part) {
  ASSERT_TRUE(e) << "expected an error";
  EXPECT_EQ(e.code(), ErrorCode::ModelParse) << e.toString();
  EXPECT_NE(e.message().find(part), std::string::npos) << e.message();
}

/// Operators of the importer with how many leading inputs they require (at opset 13).
const std::vector<std::pair<const char *, int>> kOps = {
    {"Abs", 1}, {"Ceil", 1}, {"Erf", 1}, {"Exp", 1}, {"Floor", 1}, {"HardSwish", 1},
    {"Log", 1}, {"Neg", 1}, {"Reciprocal", 1}, {"Relu", 1}, {"Round", 1}, {"Sigmoid", 1},
    {"Sqrt", 1}, {"Tanh", 1}, {"Add", 2}, {"And", 2}, {"ArgMax", 1}, {"ArgMin", 1},
    {"AveragePool", 1}, {"BatchNormalization", 5}, {"Cast", 1}, {"CastLike", 2},
    {"Celu", 1}, {"Clip", 1}, {"Concat", 1}, {"ConstantOfShape", 1}, {"Conv", 2},
    {"DepthToSpace", 1}, {"Div", 2}, {"Dropout", 1}, {"Elu", 1}, {"Equal", 2},
    {"Expand", 2}, {"Flatten", 1}, {"Gather", 2}, {"Gemm", 2}, {"GlobalAveragePool", 1},
    {"GlobalMaxPool", 1}, {"Greater", 2}, {"GreaterOrEqual", 2}, {"HardSigmoid", 1},
    {"Identity", 1}, {"InstanceNormalization", 3}, {"LayerNormalization", 2},
    {"LeakyRelu", 1}, {"Less", 2}, {"LessOrEqual", 2}, {"LogSoftmax", 1}, {"MatMul", 2},
    {"Max", 1}, {"MaxPool", 1}, {"Mean", 1}, {"Min", 1}, {"Mul", 2}, {"Not", 1}, {"Or", 2},
    {"PRelu", 2}, {"Pad", 2}, {"Pow", 2}, {"Range", 3}, {"ReduceLogSum", 1},
    {"ReduceLogSumExp", 1}, {"ReduceMax", 1}, {"ReduceMean", 1}, {"ReduceMin", 1},
    {"ReduceProd", 1}, {"ReduceSum", 1}, {"ReduceSumSquare", 1}, {"Reshape", 2},
    {"Resize", 1}, {"Selu", 1}, {"Shape", 1}, {"Sign", 1}, {"Size", 1}, {"Slice", 3},
    {"Softmax", 1}, {"Softplus", 1}, {"Softsign", 1}, {"SpaceToDepth", 1}, {"Split", 1},
    {"Squeeze", 1}, {"Sub", 2}, {"Sum", 1}, {"ThresholdedRelu", 1}, {"Tile", 2},
    {"TopK", 2}, {"Transpose", 1}, {"Unsqueeze", 2}, {"Where", 3}, {"Xor", 2}};

// Found by the fuzzer: `Sqrt()` (a node whose required input was deleted) after constant
// nodes made the constant folder index an empty input list.
TEST(FuzzRegressionTest, NodeWithoutInputs) {
  for (const auto &[op, required] : kOps) {
    // After constants (so that a folder would run) and after a graph value.
    for (bool constContext : {true, false}) {
      B m(13);
      if (constContext)
        m.init("c", {2}, {1, 2});
      else
        m.input("c", {2});
      m.output("y");
      m.node("Identity", {"c"}, {"i"});
      m.node(op, {}, {"y"}, "bad");
      expectParseError(loadBytes(m.bytes()), "expects at least");
    }
  }
}

TEST(FuzzRegressionTest, RequiredInputEmptyOrMissing) {
  // Every required input position, given as the empty name (ONNX's "absent"), or cut off.
  for (const auto &[op, required] : kOps) {
    for (int missing = 0; missing < required; missing++) {
      for (bool cut : {false, true}) {
        B m(13);
        m.init("c", {2}, {1, 2}).output("y");
        std::vector<std::string> ins;
        for (int i = 0; i < required; i++)
          ins.push_back(i == missing ? "" : "c");
        if (cut)
          ins.resize(size_t(missing));
        m.node(op, ins, {"y"}, "bad");
        Error e = loadBytes(m.bytes());
        expectParseError(e, "input " + std::to_string(missing));
        if (e) {
          EXPECT_NE(e.message().find("'bad' (" + std::string(op)), std::string::npos)
              << e.message();
        }
      }
    }
  }
}

// Found by the fuzzer: `Max(s, k, "")` with constant s and k made the constant folder read
// the absent third input.
TEST(FuzzRegressionTest, VariadicInputEmpty) {
  for (const char *op : {"Sum", "Mean", "Max", "Min"}) {
    for (int empty = 0; empty < 3; empty++) {
      B m(13);
      m.init("a", {2}, {1, 2}).init("b", {2}, {3, 4}).output("y");
      std::vector<std::string> ins = {"a", "b", "a"};
      ins[size_t(empty)] = "";
      m.node(op, ins, {"y"}, "bad");
      Error e = loadBytes(m.bytes());
      expectParseError(e, "input " + std::to_string(empty) + " is empty");
    }
  }
}

TEST(FuzzRegressionTest, OpsetDependentArity) {
  // Slice and Unsqueeze take their parameters as attributes before opsets 10 and 13: one
  // input is enough there, and required from those opsets on.
  B s9(9);
  s9.input("x", {4}).output("y");
  auto &sl = s9.node("Slice", {"x"}, {"y"});
  B::attrInts(sl, "starts", {1});
  B::attrInts(sl, "ends", {3});
  EXPECT_FALSE(loadBytes(s9.bytes()));
  B s10(10);
  s10.input("x", {4}).output("y");
  s10.node("Slice", {"x"}, {"y"});
  expectParseError(loadBytes(s10.bytes()), "expects at least 3 inputs");

  B u11(11);
  u11.input("x", {4}).output("y");
  auto &un = u11.node("Unsqueeze", {"x"}, {"y"});
  B::attrInts(un, "axes", {0});
  EXPECT_FALSE(loadBytes(u11.bytes()));
  B u13(13);
  u13.input("x", {4}).output("y");
  u13.node("Unsqueeze", {"x"}, {"y"});
  expectParseError(loadBytes(u13.bytes()), "expects at least 2 inputs");
}

// Found by the fuzzer: Slice with a step of INT64_MIN negated it (signed overflow; UBSan).
// Steps, starts and ends at the int64 extremes are legal ONNX: a step longer than the axis
// picks one element. Checked on graph values (a Slice, or a Gather for the other steps)
// and on constants (folded in the importer).
class FuzzRegressionRunTest : public ImporterTest {};

TEST_F(FuzzRegressionRunTest, SliceExtremeSteps) {
  struct Case {
    int64_t start, end, step;
    std::vector<double> expect; // of x = 0..5 along the sliced axis
  };
  const std::vector<Case> cases = {
      {4, -10, INT64_MIN, {4}},        {0, 6, INT64_MAX, {0}},
      {INT64_MAX, INT64_MIN, -1, {5, 4, 3, 2, 1, 0}},
      {INT64_MIN, INT64_MAX, 2, {0, 2, 4}}, {5, INT64_MIN, -2, {5, 3, 1}},
      {INT64_MIN, INT64_MIN, INT64_MIN, {0}}, {-1, -7, -INT64_MAX, {5}},
      {0, INT64_MIN, INT64_MAX, {}}};
  for (const auto &c : cases) {
    for (bool folded : {false, true}) {
      SCOPED_TRACE("start " + std::to_string(c.start) + " end " + std::to_string(c.end) +
                   " step " + std::to_string(c.step) + (folded ? " (constant)" : ""));
      B m(13);
      std::vector<float> x = {0, 1, 2, 3, 4, 5};
      if (folded)
        m.init("x", {6}, x);
      else
        m.input("x", {6});
      m.initI64("st", {1}, {c.start}).initI64("en", {1}, {c.end}).initI64("ax", {1}, {0})
          .initI64("sp", {1}, {c.step}).init("zero", {1}, {0.0f}).output("y");
      m.node("Slice", {"x", "st", "en", "ax", "sp"}, {"s"});
      m.node("Add", {"s", "zero"}, {"y"}); // keeps a graph node when the slice folds
      Module scratch;
      if (c.expect.empty()) {
        // An empty result: an Error (kiln has no empty tensors), never a crash.
        std::string bytes = m.bytes();
        Expected<ONNXModel> r =
            loadONNXFromBuffer(bytes.data(), bytes.size(), scratch.createFunction("f"));
        EXPECT_FALSE(bool(r));
        if (!r)
          (void)r.takeError();
        continue;
      }
      ExecutionEngine ee("Interpreter");
      Function *f = ee.getModule().createFunction("main");
      std::string bytes = m.bytes();
      Expected<ONNXModel> r = loadONNXFromBuffer(bytes.data(), bytes.size(), f);
      ASSERT_TRUE(bool(r)) << r.getError().toString();
      ASSERT_FALSE(ee.compile());
      PlaceholderBindings b;
      if (!folded)
        b.insert(r->getInput("x"), floats({6}, x));
      Placeholder *out = r->getOutputPlaceholder("y");
      b.allocate(out);
      ASSERT_FALSE(ee.run(b));
      expectValues(b.get(out), {dim_t(c.expect.size())}, c.expect);
    }
  }
}

// Found by the fuzzer: Split sizes near INT64_MAX overflowed their sum (UBSan). Sizes
// larger than the dimension, alone or together, are a ModelParse error.
TEST(FuzzRegressionTest, SplitSizesOverflow) {
  for (int64_t opset : {11, 13}) {
    for (std::vector<int64_t> sizes :
         {std::vector<int64_t>{5908722711110090754, 8674299455147959397},
          {INT64_MAX, INT64_MAX}, {2, INT64_MAX}, {3, 3}}) {
      B m(opset);
      m.input("x", {2, 4}).output("a").output("b");
      std::vector<std::string> ins = {"x"};
      if (opset >= 13) {
        m.initI64("sz", {2}, sizes);
        ins.push_back("sz");
      }
      auto &sp = m.node("Split", ins, {"a", "b"});
      B::attrInt(sp, "axis", 1);
      if (opset < 13)
        B::attrInts(sp, "split", sizes);
      expectParseError(loadBytes(m.bytes()), "split sizes exceed dimension 1");
    }
    // Sizes that fit but do not cover the dimension.
    B m(opset);
    m.input("x", {2, 4}).output("a").output("b");
    auto &sp = m.node("Split", opset >= 13 ? std::vector<std::string>{"x", "sz"}
                                           : std::vector<std::string>{"x"},
                      {"a", "b"});
    if (opset >= 13)
      m.initI64("sz", {2}, {1, 2});
    else
      B::attrInts(sp, "split", {1, 2});
    B::attrInt(sp, "axis", 1);
    expectParseError(loadBytes(m.bytes()), "add up to 3, not 4");
  }
}

// ---- The fuzzer's corpus: seeds and former crashes. ----

std::vector<std::string> corpusFiles() {
  std::vector<std::string> files;
  const std::string dir = "test/fuzz/corpus";
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 5 && n.substr(n.size() - 5) == ".onnx")
        files.push_back(dir + "/" + n);
    }
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(FuzzRegressionTest, CorpusLoadsOrFailsCleanly) {
  std::vector<std::string> files = corpusFiles();
  ASSERT_GE(files.size(), 10u) << "test/fuzz/corpus not in the runfiles";
  unsigned regressions = 0;
  for (const auto &path : files) {
    std::ifstream f(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), {});
    Error e = loadBytes(bytes);
    bool regression = path.find("/regress_") != std::string::npos;
    regressions += regression;
    // Seeds are valid models: each loads, or names what is unsupported.
    if (!regression && e) {
      EXPECT_EQ(e.code(), ErrorCode::Unsupported) << path << ": " << e.toString();
    }
  }
  EXPECT_GE(regressions, 1u);
}

} // namespace
} // namespace kiln::test
