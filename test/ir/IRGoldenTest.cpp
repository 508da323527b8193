// Golden tests of the IR passes: test/ir/golden/<pass>.txt for every pass of Passes.def.
// Each case is parsed, run through its passes (`// RUN:`, else the file's pass), printed
// and matched against its CHECK lines (IRTestUtils.h). Every case is also run on the
// Interpreter before and after the passes, and after the passes with a memory plan: all
// three runs must leave the same bytes in every placeholder.

#include "IRTestUtils.h"

#include "kiln/IR/IRParser.h"
#include "kiln/Passes/IR/IRPasses.h"

#include <gtest/gtest.h>

namespace kiln::test {
namespace {

class IRGoldenTest : public ::testing::TestWithParam<std::string> {};

void expectSameOutputs(const std::map<std::string, Tensor> &a,
                       const std::map<std::string, Tensor> &b, const std::string &what) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto &[name, t] : a) {
    auto it = b.find(name);
    ASSERT_NE(it, b.end()) << name;
    EXPECT_TRUE(t.isEqual(it->second, 0, 0, true)) << what << ": placeholder @" << name;
  }
}

TEST_P(IRGoldenTest, Cases) {
  const std::string pass = GetParam();
  const std::string path = "test/ir/golden/" + pass + ".txt";
  // Directives name their line in this file: "line N: CHECK: ...".
  bool ok = false;
  std::string text = readFile(path, ok);
  ASSERT_TRUE(ok) << "every IR pass needs golden tests: " << path << " is missing";
  std::vector<GoldenCase> cases = splitGoldenFile(text);
  ASSERT_FALSE(cases.empty()) << path << " has no cases";
  for (const GoldenCase &c : cases) {
    SCOPED_TRACE(path + ":" + std::to_string(c.line));
    auto list = parseIRPassList(c.passes.empty() ? pass : c.passes);
    ASSERT_TRUE(bool(list)) << list.getError().toString();

    // Structure.
    Module m0;
    auto F = parseIR(c.text, m0);
    ASSERT_TRUE(bool(F)) << F.getError().toString();
    auto report = runIRPipeline(**F, *list);
    ASSERT_TRUE(bool(report)) << report.getError().toString();
    std::string out = (*F)->toString();
    std::string failure = fileCheck(out, c.text, c.line);
    EXPECT_EQ(failure, "") << "output:\n" << out;

    // Numbers: before, after, after with a plan.
    Module m;
    addStorageForWeights(**F, m);
    auto before = parseIR(c.text, m), after = parseIR(c.text, m), planned = parseIR(c.text, m);
    ASSERT_TRUE(before && after && planned);
    ASSERT_TRUE(bool(runIRPipeline(**after, *list)));
    ASSERT_TRUE(bool(runIRPipeline(**planned, *list)));
    auto r0 = runOnInterpreter(std::move(*before), m, false);
    auto r1 = runOnInterpreter(std::move(*after), m, false);
    auto r2 = runOnInterpreter(std::move(*planned), m, true);
    ASSERT_TRUE(r0 && r1 && r2) << (r0 ? r1 ? r2.getError().toString() : r1.getError().toString()
                                       : r0.getError().toString());
    expectSameOutputs(*r0, *r1, "after " + pass);
    expectSameOutputs(*r0, *r2, "after " + pass + ", planned");
  }
}

INSTANTIATE_TEST_SUITE_P(Passes, IRGoldenTest, ::testing::ValuesIn(getIRPassNames()),
                         [](const ::testing::TestParamInfo<std::string> &i) {
                           std::string n = i.param;
                           for (char &ch : n)
                             if (ch == '-')
                               ch = '_';
                           return n;
                         });

} // namespace
} // namespace kiln::test
