// The golden tests' matcher itself.

#include "FileCheck.h"

#include <gtest/gtest.h>

namespace kiln::test {

namespace {

std::string check(const std::string &directives, const std::string &output) {
  return runFileCheck(parseCheckDirectives(directives), output);
}

const char *kOut = "alpha one\n"
                   "beta  two\n"
                   "gamma three\n";

TEST(FileCheck, CheckFindsLinesInOrder) {
  EXPECT_EQ(check("// CHECK: alpha\n// CHECK: gamma\n", kOut), "");
  EXPECT_NE(check("// CHECK: gamma\n// CHECK: alpha\n", kOut), "");
  EXPECT_NE(check("// CHECK: delta\n", kOut), "");
}

TEST(FileCheck, NextMustBeTheFollowingLine) {
  EXPECT_EQ(check("// CHECK: alpha\n// CHECK-NEXT: beta\n", kOut), "");
  EXPECT_NE(check("// CHECK: alpha\n// CHECK-NEXT: gamma\n", kOut), "");
}

TEST(FileCheck, NotAppliesBetweenMatches) {
  EXPECT_EQ(check("// CHECK: alpha\n// CHECK-NOT: alpha\n// CHECK: gamma\n", kOut), "");
  EXPECT_NE(check("// CHECK: alpha\n// CHECK-NOT: beta\n// CHECK: gamma\n", kOut), "");
  EXPECT_NE(check("// CHECK-NOT: three\n", kOut), "");
  EXPECT_EQ(check("// CHECK-NOT: four\n", kOut), "");
}

TEST(FileCheck, SpacesCollapseAndRegexWorks) {
  EXPECT_EQ(check("// CHECK: beta two\n", kOut), "");
  EXPECT_EQ(check("// CHECK: {{b[a-z]+}} two\n", kOut), "");
  EXPECT_NE(check("// CHECK: {{b[0-9]+}} two\n", kOut), "");
}

TEST(FileCheck, FailureNamesTheDirectiveLine) {
  std::string msg = check("\n\n// CHECK: nowhere\n", kOut);
  EXPECT_NE(msg.find("line 3"), std::string::npos) << msg;
}

} // namespace

} // namespace kiln::test
