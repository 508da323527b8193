// kiln-run end to end: BENCH.md's flags, the JSON line, and exit codes 0 / 1 / 2.

#include "ONNXTestUtils.h"
#include "test/trace/DotCheck.h"
#include "test/trace/TraceCheck.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
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
                            "\"constant_memory_bytes\": 32", "\"peak_rss_bytes\""})
    EXPECT_NE(j.find(field), std::string::npos) << field << " not in " << j;
}

// --quant-profile over two calibration sets, then --quantize from the profile. x is
// {1..6} then {-1, 0, 2, 0, 0, 0}: min -1, max 6 over 12 values. The Gemm gives
// [[-2, 2], [-2, 6.5]] then [[-3, -0.5], [0, -1]]: min -3, max 6.5. Quantized
// (asymmetric): s_x = 7/255, s_w = 2/255, Gemm output 9.5/255, Relu output 6.5/255. The
// worst element (row 2, column 1: x = {4, 5, 6}, w = 0.5 each) can be off by at most
// sum(s_x/2 |w|) + sum(|x| s_w/2) + 3 s_x s_w/4 + s_b/2 + s_g/2 + s_y/2 = 0.0206 + 0.0588
// + 0.0002 + 0.0001 + 0.0186 + 0.0127 = 0.111.
TEST_F(KilnRunTest, QuantProfileThenQuantize) {
  std::string cal = dir_ + "/calibration";
  mkdir(cal.c_str(), 0755);
  mkdir((cal + "/test_data_set_0").c_str(), 0755);
  mkdir((cal + "/test_data_set_1").c_str(), 0755);
  writeFile(cal + "/test_data_set_0/input_0.pb",
            B::floatTensor("x", {2, 3}, {1, 2, 3, 4, 5, 6}, true).SerializeAsString());
  writeFile(cal + "/test_data_set_1/input_0.pb",
            B::floatTensor("x", {2, 3}, {-1, 0, 2, 0, 0, 0}, true).SerializeAsString());
  std::string prof = dir_ + "/profile.json";
  RunResult r = kilnRun("--model " + dir_ + "/model.onnx --quant-profile " + prof +
                        " --calibration " + cal);
  ASSERT_EQ(r.exitCode, 0) << r.out;
  std::ifstream in(prof);
  std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(json.find("\"name\": \"x\", \"kind\": \"Placeholder\", \"count\": 12, \"min\": -1, "
                      "\"max\": 6"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"min\": -3, \"max\": 6.5"), std::string::npos) << json;
  EXPECT_NE(json.find("\"min\": 0, \"max\": 6.5"), std::string::npos) << json;
  EXPECT_EQ(kilnRun("--model " + dir_ + "/model.onnx --quant-profile " + prof).exitCode, 2);
  // The same inputs as input_0.pb and input_1.pb of one folder (a single-input model):
  // the same profile.
  std::string flat = dir_ + "/flat";
  mkdir(flat.c_str(), 0755);
  writeFile(flat + "/input_0.pb",
            B::floatTensor("x", {2, 3}, {1, 2, 3, 4, 5, 6}, true).SerializeAsString());
  writeFile(flat + "/input_1.pb",
            B::floatTensor("x", {2, 3}, {-1, 0, 2, 0, 0, 0}, true).SerializeAsString());
  std::string prof2 = dir_ + "/profile2.json";
  ASSERT_EQ(kilnRun("--model " + dir_ + "/model.onnx --quant-profile " + prof2 +
                    " --calibration " + flat)
                .exitCode,
            0);
  std::ifstream in2(prof2);
  std::string json2((std::istreambuf_iterator<char>(in2)), std::istreambuf_iterator<char>());
  EXPECT_EQ(json2, json);

  r = kilnRun("--model " + dir_ + "/model.onnx --data " + dir_ +
              "/test_data_set_0 --json --quantize " + prof);
  ASSERT_NE(r.exitCode, 2) << r.out;
  std::string j = lastLine(r.out);
  size_t at = j.find("\"max_abs_err\": ");
  ASSERT_NE(at, std::string::npos) << j;
  double err = std::atof(j.c_str() + at + 15);
  EXPECT_GT(err, 0.0); // it did quantize
  EXPECT_LE(err, 0.111) << j;
  std::ifstream log(tmpDir() + "/stderr.txt");
  std::string logText((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(logText.find("quantized (asymmetric, minmax)"), std::string::npos) << logText;
  EXPECT_EQ(kilnRun("--model " + dir_ + "/model.onnx --quantize " + prof + " --schema int4")
                .exitCode,
            2);
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

std::string readFile(const std::string &path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// An image model given a flat input: the error names the input, the model's shape and
// the given one, before anything is imported.
TEST_F(KilnRunTest, AnInputOfTheWrongShapeNamesTheInputAndBothShapes) {
  B m(13);
  m.input("image", {1, 1, 4, 4}).init("w", {1, 1, 3, 3}, std::vector<float>(9, 1)).output("y");
  m.node("Conv", {"image", "w"}, {"y"});
  writeFile(dir_ + "/conv.onnx", m.bytes());
  mkdir((dir_ + "/flat").c_str(), 0755);
  writeFile(dir_ + "/flat/input_0.pb",
            B::floatTensor("image", {1, 16}, std::vector<float>(16, 1)).SerializeAsString());
  const std::string want =
      "input 'image': the model expects shape [1, 1, 4, 4], given [1, 16] (rank 2 instead of 4)";
  RunResult r = kilnRun("--model " + dir_ + "/conv.onnx --data " + dir_ + "/flat --json");
  EXPECT_EQ(r.exitCode, 2) << r.out;
  std::string err = readFile(tmpDir() + "/stderr.txt");
  // First, before the loader's own complaint.
  EXPECT_NE(err.find("kiln-run: loading the model: invalid-argument: " + want), std::string::npos)
      << err;
  // The same through --shape, and a dimension the model fixes.
  r = kilnRun("--model " + dir_ + "/conv.onnx --shape image=1x16");
  EXPECT_EQ(r.exitCode, 2) << r.out;
  err = readFile(tmpDir() + "/stderr.txt");
  EXPECT_NE(err.find(want), std::string::npos) << err;
  r = kilnRun("--model " + dir_ + "/conv.onnx --shape image=2x1x4x4");
  EXPECT_EQ(r.exitCode, 2) << r.out;
  err = readFile(tmpDir() + "/stderr.txt");
  EXPECT_NE(err.find("input 'image': the model expects shape [1, 1, 4, 4], given [2, 1, 4, 4] "
                     "(dimension 0 is fixed at 1)"),
            std::string::npos)
      << err;
  // An input the model does not have, and a malformed --shape.
  EXPECT_EQ(kilnRun("--model " + dir_ + "/conv.onnx --shape x=1x1x4x4").exitCode, 2);
  EXPECT_NE(readFile(tmpDir() + "/stderr.txt").find("no input 'x'"), std::string::npos);
  EXPECT_EQ(kilnRun("--model " + dir_ + "/conv.onnx --shape image=1x0x4").exitCode, 2);
}

// The model's x is [N, 3]: --shape picks N, without data (random inputs) and with data of
// that shape; a data set of another shape than --shape is an error.
TEST_F(KilnRunTest, ShapeFixesSymbolicDimensions) {
  RunResult r = kilnRun("--model " + dir_ + "/model.onnx --shape x=8x3 --iterations 2 --json");
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(lastLine(r.out).find("\"inputs\": {\"x\": [8, 3]}"), std::string::npos) << r.out;
  r = kilnRun("--model " + dir_ + "/model.onnx --shape x=8x3 --iterations 1");
  EXPECT_NE(r.out.find("inputs:       x float<8x3>"), std::string::npos) << r.out;
  r = kilnRun("--model " + dir_ + "/model.onnx --data " + dir_ +
              "/test_data_set_0 --shape x=2x3 --json");
  EXPECT_EQ(r.exitCode, 0) << r.out;
  EXPECT_NE(lastLine(r.out).find("\"match\": true"), std::string::npos) << r.out;
  r = kilnRun("--model " + dir_ + "/model.onnx --data " + dir_ + "/test_data_set_0 --shape x=4x3");
  EXPECT_EQ(r.exitCode, 2) << r.out;
  EXPECT_NE(readFile(tmpDir() + "/stderr.txt").find("input 'x' is given shape 4x3"),
            std::string::npos);
}

// The Sim backend has no Tanh: it falls back to the Interpreter with a warning, the split
// is reported (text and JSON) and the result matches; --no-fallback is today's error.
TEST_F(KilnRunTest, ReportsTheSplitAndFallsBackUnlessTold) {
  B m(13);
  m.input("x", {2, 3}).init("w", {2, 3}, {1, 0, -1, 0.5f, 0.5f, 0.5f}).output("y");
  auto &g = m.node("Gemm", {"x", "w"}, {"g"}, "gemm");
  B::attrInt(g, "transB", 1);
  m.node("Tanh", {"g"}, {"y"}, "tanh");
  writeFile(dir_ + "/tanh.onnx", m.bytes());
  mkdir((dir_ + "/tanh_data").c_str(), 0755);
  writeFile(dir_ + "/tanh_data/input_0.pb",
            B::floatTensor("x", {2, 3}, {1, 2, 3, 4, 5, 6}).SerializeAsString());
  // tanh([1-3, 0.5*6], [4-6, 0.5*15]) = tanh([-2, 3, -2, 7.5]).
  writeFile(dir_ + "/tanh_data/output_0.pb",
            B::floatTensor("y", {2, 2},
                           {std::tanh(-2.0f), std::tanh(3.0f), std::tanh(-2.0f), std::tanh(7.5f)})
                .SerializeAsString());
  std::string args = "--model " + dir_ + "/tanh.onnx --data " + dir_ + "/tanh_data --backend Sim";
  RunResult r = kilnRun(args + " --json");
  EXPECT_EQ(r.exitCode, 0) << r.out;
  std::string j = lastLine(r.out);
  EXPECT_NE(j.find("\"split\": [{\"backend\": \"Sim\", \"partitions\": 1, \"nodes\": 1}, "
                   "{\"backend\": \"Interpreter\", \"partitions\": 1, \"nodes\": 2}]"),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("\"fallback_nodes\": 1"), std::string::npos) << j;
  EXPECT_NE(j.find("\"match\": true"), std::string::npos) << j;
  std::string err = readFile(tmpDir() + "/stderr.txt");
  EXPECT_NE(err.find("kiln: warning: backend Sim cannot run 1 node"), std::string::npos) << err;
  EXPECT_NE(err.find("node 'tanh' (Tanh): float<2x2> -> float<2x2>"), std::string::npos) << err;
  r = kilnRun(args);
  EXPECT_NE(r.out.find("split:        Sim: 1 partition, 1 node; Interpreter: 1 partition, 2 nodes"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("fallback:     1 node on Interpreter: tanh (Tanh)"), std::string::npos)
      << r.out;
  r = kilnRun(args + " --no-fallback");
  EXPECT_EQ(r.exitCode, 2) << r.out;
  err = readFile(tmpDir() + "/stderr.txt");
  EXPECT_NE(err.find("backend Sim does not support 1 node(s)"), std::string::npos) << err;
}

// The CPU's profile=1 with part of the model on the Interpreter (a float16 ScatterElements
// with reduction, which the CPU refuses; the option used to reach
// the Interpreter partition and fail there), a trace with kernel events, and the graph
// pictures of --dump-graph.
TEST_F(KilnRunTest, TracesProfilesAndDrawsAModelThatFallsBack) {
  B m(16);
  m.input("x", {2, 3}).init("w", {2, 3}, {1, 0, -1, 0.5f, 0.5f, 0.5f}).output("y");
  m.init("u", {2, 1}, {1, 2}).initI64("idx", {2, 1}, {0, 1});
  auto &g = m.node("Gemm", {"x", "w"}, {"g"}, "gemm");
  B::attrInt(g, "transB", 1);
  B::attrInt(m.node("Cast", {"g"}, {"h"}, "half"), "to", onnx::TensorProto::FLOAT16);
  B::attrInt(m.node("Cast", {"u"}, {"u16"}, "uhalf"), "to", onnx::TensorProto::FLOAT16);
  // The CPU's scatter kernels do not reduce 16-bit floats: the Interpreter runs it.
  auto &sc = m.node("ScatterElements", {"h", "idx", "u16"}, {"s"}, "sin");
  B::attrInt(sc, "axis", 1);
  B::attrString(sc, "reduction", "add");
  B::attrInt(m.node("Cast", {"s"}, {"c"}, "single"), "to", onnx::TensorProto::FLOAT);
  m.node("Relu", {"c"}, {"y"}, "relu");
  writeFile(dir_ + "/sin.onnx", m.bytes());
  std::string trace = tmpDir() + "/sin-trace.json", pics = tmpDir() + "/sin-pictures";
  RunResult r = kilnRun("--model " + dir_ + "/sin.onnx --backend CPU --iterations 3 "
                        "--backend-opt profile=1 --trace " + trace +
                        " --trace-kernels --dump-graph " + pics);
  std::string err = readFile(tmpDir() + "/stderr.txt");
  ASSERT_EQ(r.exitCode, 0) << r.out << err;
  EXPECT_NE(r.out.find("split:        CPU: 2 partitions, "), std::string::npos) << r.out;
  EXPECT_NE(err.find("profile: "), std::string::npos) << err;
  EXPECT_NE(err.find("trace events to " + trace), std::string::npos) << err;

  ParsedTrace t;
  ASSERT_EQ(readTrace(readFile(trace), t), "");
  EXPECT_GE(t.pidOf("cpu0"), 0);
  EXPECT_GE(t.pidOf("host-interpreter"), 0);
  EXPECT_EQ(t.select("import").size(), 1u);
  // 1 warm-up and 3 timed runs, each running the three partitions.
  EXPECT_EQ(t.select("runtime").size(), 4u);
  EXPECT_EQ(t.select("partition").size(), 12u);
  for (const ParsedEvent *k : t.select("kernel")) {
    bool inside = false;
    for (const ParsedEvent *p : t.select("partition"))
      inside |= p->pid == k->pid && p->tid == k->tid && p->contains(*k);
    EXPECT_TRUE(inside) << k->name;
  }
  EXPECT_FALSE(t.select("transfer").empty());

  // The pictures: imported, optimised, lowered, final, partitions; well formed.
  const char *files[] = {"1-imported.dot", "2-optimized.dot", "3-lowered.dot", "4-final.dot",
                         "5-partitions.dot"};
  for (const char *f : files) {
    std::vector<DotGraph> graphs;
    std::string text = readFile(pics + "/" + f);
    ASSERT_EQ(checkDot(text, graphs), "") << f << ":\n" << text;
    ASSERT_EQ(graphs.size(), 1u) << f;
    size_t sin = 0, relu = 0;
    for (const std::string &l : graphs[0].nodeLabels) {
      sin += l.find("ScatterElements|sin") != std::string::npos;
      relu += l.find("relu") != std::string::npos;
    }
    if (std::string(f) == "5-partitions.dot") {
      EXPECT_EQ(graphs[0].nodeLabels.size(), 3u) << text;
      EXPECT_EQ(graphs[0].edges, 2u) << text;
    } else {
      EXPECT_EQ(sin, 1u) << f << ":\n" << text;
      EXPECT_EQ(relu, 1u) << f << ":\n" << text;
    }
  }
  // The CPU's options still reach the CPU: an unknown one is its error.
  r = kilnRun("--model " + dir_ + "/sin.onnx --backend CPU --backend-opt no-such=1");
  EXPECT_EQ(r.exitCode, 2);
  err = readFile(tmpDir() + "/stderr.txt");
  EXPECT_NE(err.find("backend CPU: unknown option 'no-such'"), std::string::npos) << err;
}

TEST_F(KilnRunTest, TracesATwoDeviceSimRun) {
  std::string trace = tmpDir() + "/sim-trace.json";
  RunResult r = kilnRun("--model " + dir_ + "/model.onnx --data " + dir_ +
                        "/test_data_set_0 --backend Sim --devices 2 --iterations 2 --trace " +
                        trace + " --trace-kernels");
  ASSERT_EQ(r.exitCode, 0) << r.out << readFile(tmpDir() + "/stderr.txt");
  ParsedTrace t;
  ASSERT_EQ(readTrace(readFile(trace), t), "");
  EXPECT_GE(t.pidOf("sim0"), 0);
  EXPECT_EQ(t.select("runtime").size(), 3u);
  EXPECT_FALSE(t.select("kernel").empty());
  EXPECT_FALSE(t.select("pass").empty());
}

} // namespace
} // namespace kiln::test
