// Pictures from the tools: kiln-opt --dot and kiln-plan --backend B --dot (every backend,
// the Sim's plan with its Interpreter fallback) write well-formed DOT holding the nodes
// expected. kiln-run --dump-graph is tested with kiln-run (test/onnx/KilnRunTest.cpp).

#include "DotCheck.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace kiln::test {
namespace {

std::string tmp(const std::string &name) {
  const char *d = std::getenv("TEST_TMPDIR");
  return std::string(d && *d ? d : "/tmp") + "/" + name;
}

/// Runs \p cmd; returns its exit status and stdout+stderr in \p out.
int run(const std::string &cmd, std::string &out) {
  FILE *p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p)
    return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0)
    out.append(buf, n);
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t labelsContaining(const DotGraph &g, const std::string &part) {
  size_t n = 0;
  for (const std::string &l : g.nodeLabels)
    n += l.find(part) != std::string::npos;
  return n;
}

TEST(Pictures, KilnOptDot) {
  std::string path = tmp("opt.dot"), out;
  ASSERT_EQ(run("src/tools/kiln-opt --pipeline=default --backend=CPU --split-input-file --dot=" +
                    path + " test/golden/cse.txt",
                out),
            0)
      << out;
  std::vector<DotGraph> graphs;
  std::string text = readFile(path);
  ASSERT_EQ(checkDot(text, graphs), "") << text;
  // One digraph per function of every case of the file.
  size_t functions = 0;
  for (size_t p = out.find("function "); p != std::string::npos; p = out.find("function ", p + 1))
    functions++;
  EXPECT_EQ(graphs.size(), functions) << out;
  for (const DotGraph &g : graphs) {
    EXPECT_GE(labelsContaining(g, "Save"), 1u) << g.name;
    EXPECT_GE(labelsContaining(g, "Placeholder"), 1u) << g.name;
  }
}

TEST(Pictures, DotCheckerCatchesBrokenGraphs) {
  std::vector<DotGraph> g;
  EXPECT_EQ(checkDot("digraph \"f\" {\n  a [label=\"{x|y}\"];\n  b [label=\"b\"];\n  a -> b;\n}\n", g),
            "");
  EXPECT_NE(checkDot("digraph \"f\" {\n  a [label=\"x\"];\n  a -> b;\n}\n", g), "");
  EXPECT_NE(checkDot("digraph \"f\" {\n  a [label=\"x\"];\n", g), "");
  EXPECT_NE(checkDot("digraph \"f\" {\n  a [label=\"x];\n}\n", g), "");
  EXPECT_NE(checkDot("digraph \"f\" {\n  a [label=\"x\"];\n}\n}\n", g), "");
}

class PlanForEveryBackend : public ::testing::TestWithParam<const char *> {};

TEST_P(PlanForEveryBackend, PrintsThePlanAndDrawsIt) {
  std::string backend = GetParam(), path = tmp("plan-" + backend + ".dot"), out;
  ASSERT_EQ(run("src/tools/kiln-plan --backend " + backend + " --dot=" + path + " resnet50", out),
            0)
      << out;
  EXPECT_NE(out.find("plan of 'resnet50"), std::string::npos) << out;
  std::vector<DotGraph> graphs;
  std::string text = readFile(path);
  ASSERT_EQ(checkDot(text, graphs), "") << text.substr(0, 2000);
  ASSERT_EQ(graphs.size(), 1u);
  if (backend == "Sim") {
    // The Sim lacks AdaptiveAvgPool and SoftMax: they run on the Interpreter, and the
    // picture is the partition plan.
    EXPECT_NE(out.find("fall back to the Interpreter"), std::string::npos) << out;
    EXPECT_GE(graphs[0].nodeLabels.size(), 2u);
    EXPECT_GE(labelsContaining(graphs[0], "Sim"), 1u) << text;
    EXPECT_GE(labelsContaining(graphs[0], "Interpreter"), 1u) << text;
    EXPECT_GE(graphs[0].edges, 1u);
  } else {
    EXPECT_GE(labelsContaining(graphs[0], "Convolution"), 20u) << backend;
    EXPECT_GE(graphs[0].edges, graphs[0].nodeLabels.size() - 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, PlanForEveryBackend,
                         ::testing::Values("Interpreter", "CPU", "Sim"));

} // namespace
} // namespace kiln::test
