// The directives the golden tests gain from LLVM's FileCheck, each with a passing and a
// failing case on a small hand-written output.
#include "LLVMFileCheck.h"

#include <gtest/gtest.h>

namespace kiln::test {
namespace {

const std::string kOut = "function main {\n"
                         "  %a = Relu(@x) : float<4>\n"
                         "  %b = Sigmoid(%a) : float<4>\n"
                         "  Save(%b, @y)\n"
                         "}\n"
                         "function other {\n"
                         "  %c = Tanh(@x) : float<4>\n"
                         "  Save(%c, @z)\n"
                         "}\n";

bool passes(const std::string &checks) { return runLLVMFileCheck(checks, kOut).empty(); }

TEST(LLVMFileCheck, IsInstalled) {
  EXPECT_FALSE(llvmFileCheckPath().empty())
      << "install Debian's llvm-14-tools (bash third_party/setup.sh)";
}

TEST(LLVMFileCheck, CheckAndNext) {
  EXPECT_TRUE(passes("// CHECK: Relu\n// CHECK-NEXT: Sigmoid\n// CHECK-NEXT: Save(%b"));
  EXPECT_FALSE(passes("// CHECK: Relu\n// CHECK-NEXT: Save"));
  EXPECT_FALSE(passes("// CHECK: Sigmoid\n// CHECK: Relu"));
}

TEST(LLVMFileCheck, Not) {
  EXPECT_TRUE(passes("// CHECK: Relu\n// CHECK-NOT: Relu\n// CHECK: Tanh"));
  EXPECT_FALSE(passes("// CHECK: Relu\n// CHECK-NOT: Sigmoid\n// CHECK: Save"));
}

TEST(LLVMFileCheck, Dag) {
  // Either order matches.
  EXPECT_TRUE(passes("// CHECK-DAG: Sigmoid\n// CHECK-DAG: Relu\n// CHECK: Save"));
  EXPECT_FALSE(passes("// CHECK-DAG: Sigmoid\n// CHECK-DAG: Softmax"));
}

TEST(LLVMFileCheck, Label) {
  // Labels cut the output into blocks: Tanh is not in main's block.
  EXPECT_TRUE(passes("// CHECK-LABEL: function main\n// CHECK: Relu\n"
                     "// CHECK-LABEL: function other\n// CHECK: Tanh"));
  EXPECT_FALSE(passes("// CHECK-LABEL: function main\n// CHECK: Tanh\n"
                      "// CHECK-LABEL: function other\n// CHECK: Save"));
}

TEST(LLVMFileCheck, RegexAndVariables) {
  EXPECT_TRUE(passes("// CHECK: %{{[a-z]+}} = Relu(@x) : float<{{[0-9]+}}>"));
  EXPECT_FALSE(passes("// CHECK: %{{[0-9]+}} = Relu"));
  EXPECT_TRUE(passes("// CHECK: [[R:%[a-z]]] = Relu\n// CHECK-NEXT: Sigmoid([[R]])"));
  EXPECT_FALSE(passes("// CHECK: [[R:%[a-z]]] = Sigmoid\n// CHECK-NEXT: Save([[R]]x"));
}

TEST(LLVMFileCheck, MessagesPointIntoTheFile) {
  std::string msg = runLLVMFileCheck("// CHECK: Softmax\n", kOut, "test/golden/x.txt", 40);
  EXPECT_NE(msg.find("x.txt:40"), std::string::npos) << msg;
}

} // namespace
} // namespace kiln::test
