// Operand checks of Interpreter kernels that IR reaches without the graph's type rules
// (parsed or hand-built IR): each is an Error naming the instruction, never a crash.
#include "IRTestUtils.h"

#include "kiln/IR/IRParser.h"

#include <gtest/gtest.h>

namespace kiln::test {
namespace {

/// Runs IR \p text on the Interpreter with random inputs; the Error, or success.
Error runText(const std::string &text) {
  Module m0;
  auto F = parseIR(text, m0);
  if (!F)
    return F.takeError();
  Module m;
  addStorageForWeights(**F, m);
  auto G = parseIR(text, m);
  if (!G)
    return G.takeError();
  auto r = runOnInterpreter(std::move(*G), m, false);
  return r ? Error::success() : r.takeError();
}

// BatchDims = 1: Indices' first dim (3) differs from Data's (2). Without the check the
// kernel read a third batch past the end of Data.
TEST(InterpreterChecks, GatherNDBatchDimsMustAgree) {
  Error e = runText(R"(
    function f
    weights:
      @d : float<2x3> mutable
      @i : i64<3x1> const
      @y : float<3> mutable
    code:
      GatherND @out @y, @in @d, @in @i {BatchDims=1}
  )");
  ASSERT_TRUE(bool(e));
  const std::string &m = e.message();
  EXPECT_NE(m.find("GatherND"), std::string::npos) << m;
  EXPECT_NE(m.find("i64<3x1>"), std::string::npos) << m;
  EXPECT_NE(m.find("float<2x3>"), std::string::npos) << m;
  EXPECT_NE(m.find("BatchDims = 1"), std::string::npos) << m;
}

TEST(InterpreterChecks, GatherNDMatchingBatchDimsRuns) {
  // Constant indices are random in the test storage; a run may fail only on the range
  // check, never on the batch dims.
  Error e = runText(R"(
    function f
    weights:
      @d : float<2x3> mutable
      @i : i64<2x1> const
      @y : float<2> mutable
    code:
      GatherND @out @y, @in @d, @in @i {BatchDims=1}
  )");
  if (e) {
    EXPECT_NE(e.message().find("out of range"), std::string::npos) << e.message();
  }
}

} // namespace
} // namespace kiln::test
