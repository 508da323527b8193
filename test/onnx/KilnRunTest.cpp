// kiln-run end to end: BENCH.md's flags, the JSON line, and exit codes 0 / 1 / 2.

#include "ONNXTestUtils.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace kiln::test {
namespace {

using B = ONNXBuilder;

std::string tmpDir() {
  const char *t = std::getenv("TEST_TMPDIR");
  return t ? t : "/tmp";
}

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

struct RunResult {
  int exitCode;
  std::string out;
};

RunResult kilnRun(const std::string &args) {
  std::string cmd = "src/tools/kiln-run " + args + " 2>" + tmpDir() + "/stderr.txt";
  FILE *p = popen(cmd.c_str(), "r");
  RunResult r{-1, ""};
  if (!p)
    return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0)
    r.out.append(buf, n);
  int st = pclose(p);
  r.exitCode = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string lastLine(const std::string &s) {
  std::string t = s;
  while (!t.empty() && t.back() == '\n')
    t.pop_back();
  size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

class KilnRunTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = tmpDir() + "/kiln_run_model";
    mkdir(dir_.c_str(), 0755);
    mkdir((dir_ + "/test_data_set_0").c_str(), 0755);
    // y = Relu(x W^T + b), x [2,3], W [2,3].
    B m(13);
    m.input("x", {-1, 3}).init("w", {2, 3}, {1, 0, -1, 0.5f, 0.5f, 0.5f}).init("b", {2}, {0, -1})
        .output("y");
    auto &g = m.node("Gemm", {"x", "w", "b"}, {"g"});
    B::attrInt(g, "transB", 1);
    m.node("Relu", {"g"}, {"y"});
    writeFile(dir_ + "/model.onnx", m.bytes());
    writeFile(dir_ + "/test_data_set_0/input_0.pb",
              B::floatTensor("x", {2, 3}, {1, 2, 3, 4, 5, 6}, true).SerializeAsString());
    // Row 1: [1-3, 0.5*6-1] = [-2 -> 0, 2]; row 2: [4-6 -> 0, 0.5*15-1 = 6.5].
    writeFile(dir_ + "/test_data_set_0/output_0.pb",
              B::floatTensor("y", {2, 2}, {0, 2, 0, 6.5f}).SerializeAsString());
  }
  std::string dir_;
};

TEST_F(KilnRunTest, MatchPrintsJsonAndExitsZero) {
  RunResult r = kilnRun("--model " + dir_ + "/model.onnx --data " + dir_ +
                        "/test_data_set_0 --backend Interpreter --threads 1 --iterations 3 "
                        "--warmup=1 --json");
  EXPECT_EQ(r.exitCode, 0) << r.out;
  std::string j = lastLine(r.out);
  ASSERT_EQ(j.front(), '{') << j;
  for (const char *field : {"\"model\"", "\"backend\": \"Interpreter\"", "\"threads\": 1",
                            "\"compile_ms\"", "\"median_ms\"", "\"min_ms\"", "\"iterations\": 3",
                            "\"max_abs_err\": 0", "\"max_rel_err\"", "\"match\": true",
                            "\"activation_bytes\"", "\"constant_bytes\": 32",
                            "\"peak_rss_bytes\""})
    EXPECT_NE(j.find(field), std::string::npos) << field << " not in " << j;
}

TEST_F(KilnRunTest, MismatchExitsOne) {
  writeFile(dir_ + "/test_data_set_0/output_0.pb",
            B::floatTensor("y", {2, 2}, {0, 2, 0, 7}).SerializeAsString());
  RunResult r = kilnRun("--model " + dir_ + "/model.onnx --data " + dir_ +
                        "/test_data_set_0 --json");
  EXPECT_EQ(r.exitCode, 1) << r.out;
  EXPECT_NE(lastLine(r.out).find("\"match\": false"), std::string::npos) << r.out;
}

TEST_F(KilnRunTest, ErrorsExitTwo) {
  writeFile(dir_ + "/bad.onnx", "garbage");
  EXPECT_EQ(kilnRun("--model " + dir_ + "/bad.onnx --json").exitCode, 2);
  EXPECT_EQ(kilnRun("--model " + dir_ + "/model.onnx --backend NoSuchBackend").exitCode, 2);
  EXPECT_EQ(kilnRun("--iterations 3").exitCode, 2); // no --model
  EXPECT_EQ(kilnRun("--model " + dir_ + "/model.onnx --bogus").exitCode, 2);
}

TEST_F(KilnRunTest, WithoutDataRunsOnRandomInputs) {
  RunResult r = kilnRun("--model " + dir_ + "/model.onnx");
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(r.out.find("median"), std::string::npos) << r.out;
}

} // namespace
} // namespace kiln::test
