// The golden-test driver: one test per file test/golden/<pass>.txt.
//
// A file starts with a RUN line giving kiln-opt style flags, then holds cases separated
// by `// -----` lines. Each case is a module in the graph text form whose comments carry
// LLVM FileCheck directives (CHECK, CHECK-NEXT, CHECK-NOT, CHECK-DAG, CHECK-LABEL,
// {{regex}}, ...) about the module printed after the passes ran; LLVM's own FileCheck
// (Debian's FileCheck-14, test/filecheck) checks them:
//
//   // RUN: --pass=cse,dce [--backend=Interpreter] [--no-numeric]
//   placeholder @x : float<4>
//   function main { ... }
//   // CHECK: ...
//   // -----
//   ...
//
// A case with `// ERROR: text` lines expects parsing or the pipeline to fail with a
// message containing each text. Every other case is also checked for numbers: each
// function is run on the Interpreter before and after the passes, on the same random
// inputs, and the outputs must agree (unless the file says --no-numeric). A function the
// Interpreter cannot run before the passes fails the case: the check is never skipped.

#include "test/filecheck/LLVMFileCheck.h"

#include "kiln/Backend/Backend.h"
#include "kiln/Graph/Graph.h"
#include "kiln/Graph/TextIR.h"
#include "kiln/Passes/Pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace kiln::test {

namespace {

constexpr const char *kGoldenDir = "test/golden";

std::vector<std::string> goldenFiles() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto &e : std::filesystem::directory_iterator(kGoldenDir, ec))
    if (e.path().extension() == ".txt")
      names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

struct RunLine {
  std::string passes, pipeline, backend;
  bool numeric = true;
};

/// Parses the flags of the file's `// RUN:` lines.
RunLine parseRunLines(const std::string &text) {
  RunLine r;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    size_t p = line.find("// RUN:");
    if (p == std::string::npos)
      continue;
    std::istringstream flags(line.substr(p + 7));
    for (std::string flag; flags >> flag;) {
      auto value = [&](const char *name, std::string &out) {
        std::string prefix = std::string(name) + "=";
        if (flag.rfind(prefix, 0) == 0)
          out = flag.substr(prefix.size());
      };
      value("--pass", r.passes);
      value("--pipeline", r.pipeline);
      value("--backend", r.backend);
      if (flag == "--no-numeric")
        r.numeric = false;
    }
  }
  return r;
}

struct Case {
  std::string text;
  unsigned firstLine;
};

std::vector<Case> splitCases(const std::string &text) {
  std::vector<Case> cases;
  std::istringstream in(text);
  Case cur{"", 1};
  unsigned no = 1;
  for (std::string line; std::getline(in, line); no++) {
    if (line.rfind("// -----", 0) == 0) {
      cases.push_back(cur);
      cur = Case{"", no + 1};
      continue;
    }
    cur.text += line + "\n";
  }
  cases.push_back(cur);
  return cases;
}

std::vector<std::string> expectedErrors(const std::string &text) {
  std::vector<std::string> r;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    size_t p = line.find("// ERROR:");
    if (p == std::string::npos)
      continue;
    std::string e = line.substr(p + 9);
    e.erase(0, e.find_first_not_of(" \t"));
    r.push_back(e);
  }
  return r;
}

/// Runs \p before (in module \p mb) and \p after (in \p ma, a separately parsed copy) on
/// the Interpreter with the same random inputs, matched by placeholder name; returns an
/// empty string when they agree. When the Interpreter cannot run \p before, there is
/// nothing to compare against: that is an error too (a file whose cases cannot run says
/// --no-numeric), never a silent skip.
std::string compareOnInterpreter(Module &mb, Function *before, Module &ma, Function *after,
                                 bool &compared) {
  compared = false;
  std::unique_ptr<Backend> interp = exitOnError(createBackend("Interpreter"));
  for (const auto &n : before->getNodes())
    if (!interp->isOpSupported(*n))
      return "the original function cannot run on the Interpreter (it does not support " +
             n->describe() + "), so its numbers cannot be checked";
  Expected<std::unique_ptr<CompiledFunction>> cb = interp->compile(before, CompileOptions());
  if (!cb)
    return "the original function does not compile on the Interpreter, so its numbers cannot "
           "be checked: " + cb.takeError().message();
  Expected<std::unique_ptr<CompiledFunction>> ca = interp->compile(after, CompileOptions());
  if (!ca)
    return "the optimised function does not compile on the Interpreter: " +
           ca.takeError().message();
  std::vector<std::string> outputs;
  for (SaveNode *s : before->getSaves())
    outputs.push_back(s->getPlaceholder()->getName());
  PlaceholderBindings bb, ba;
  bb.allocate(mb.getPlaceholders());
  ba.allocate(ma.getPlaceholders());
  PseudoRNG rng(7);
  for (const auto &ph : mb.getPlaceholders()) {
    if (std::count(outputs.begin(), outputs.end(), ph->getName()))
      continue;
    Tensor *t = bb.get(ph.get());
    ElemKind k = t->getElementType();
    if (isIndexKind(k))
      t->randomize(0, 1, rng);
    else if (isQuantized(k))
      t->randomize(-20, 20, rng);
    else
      t->randomize(-2, 2, rng);
    if (Tensor *other = ba.getByName(ph->getName()))
      if (other->getType() == t->getType())
        std::memcpy(other->getUnsafePtr(), t->getUnsafePtr(), t->getSizeInBytes());
  }
  ExecutionContext cxb(&bb), cxa(&ba);
  if (Error e = (*cb)->execute(cxb))
    return "the original function fails on the Interpreter, so its numbers cannot be checked: " +
           e.message();
  compared = true;
  if (Error e = (*ca)->execute(cxa))
    return "the optimised function fails on the Interpreter: " + e.message();
  for (const std::string &name : outputs) {
    Tensor *want = bb.getByName(name), *got = ba.getByName(name);
    if (!got)
      return "output '" + name + "' is missing after the passes";
    if (!got->isEqual(*want, 1e-4f, 1e-4f))
      return "output '" + name + "' differs after the passes: max |diff| " +
             std::to_string(got->maxAbsDiff(*want));
  }
  return "";
}

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, Matches) {
  std::string path = std::string(kGoldenDir) + "/" + GetParam() + ".txt";
  std::string text = readFile(path);
  ASSERT_FALSE(text.empty()) << "cannot read " << path;
  RunLine run = parseRunLines(text);
  ASSERT_TRUE(!run.passes.empty() || !run.pipeline.empty())
      << path << ": the RUN line names no --pass or --pipeline";
  std::unique_ptr<Backend> backend;
  if (!run.backend.empty())
    backend = exitOnError(createBackend(run.backend));

  unsigned numericCases = 0, totalCases = 0;
  for (const Case &c : splitCases(text)) {
    std::string where = path + ":" + std::to_string(c.firstLine);
    std::vector<std::string> errors = expectedErrors(c.text);
    Expected<Pipeline> pipeline = !run.passes.empty() ? parsePassList(run.passes)
                                  : backend && run.pipeline == "default"
                                      ? Expected<Pipeline>(getPipelineForBackend(backend.get()))
                                      : getNamedPipeline(run.pipeline);
    Error failure = Error::success();
    std::unique_ptr<Module> m;
    if (!pipeline) {
      failure = pipeline.takeError();
    } else {
      Expected<std::unique_ptr<Module>> parsed = parseModule(c.text);
      if (!parsed)
        failure = parsed.takeError();
      else
        m = std::move(parsed).get();
    }
    if (!failure && m) {
      for (const auto &f : m->getFunctions()) {
        Expected<PipelineReport> r = runPipeline(f.get(), *pipeline, backend.get());
        if (!r) {
          failure = r.takeError();
          break;
        }
      }
    }
    if (!errors.empty()) {
      ASSERT_TRUE(bool(failure)) << where << ": expected an error, but the case succeeded";
      for (const std::string &e : errors)
        EXPECT_NE(failure.message().find(e), std::string::npos)
            << where << ": error message\n  " << failure.message() << "\ndoes not contain\n  " << e;
      continue;
    }
    ASSERT_FALSE(bool(failure)) << where << ": " << failure.message();
    if (run.numeric) {
      std::unique_ptr<Module> original = exitOnError(parseModule(c.text));
      for (const auto &f : m->getFunctions()) {
        bool compared;
        std::string diff = compareOnInterpreter(*original, original->getFunction(f->getName()), *m,
                                                f.get(), compared);
        numericCases += compared;
        totalCases++;
        EXPECT_TRUE(diff.empty()) << where << ": function '" << f->getName() << "': " << diff;
      }
    }
    std::string out = printModule(*m);
    EXPECT_NE(c.text.find("CHECK"), std::string::npos) << where << ": a case without CHECK lines";
    std::string msg = runLLVMFileCheck(c.text, out, path, c.firstLine);
    EXPECT_TRUE(msg.empty()) << where << ": FileCheck says:\n" << msg;
  }
  std::cout << path << ": " << numericCases << " of " << totalCases
            << " functions checked for numbers on the Interpreter"
            << (run.numeric ? "" : " (the file says --no-numeric)") << "\n";
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenTest, ::testing::ValuesIn(goldenFiles()),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

/// Every pass of Passes.def has its golden file (habit: one name everywhere).
TEST(GoldenFiles, EveryPassHasOne) {
  std::vector<std::string> files = goldenFiles();
  for (const std::string &pass : getGraphPassNames())
    EXPECT_TRUE(std::count(files.begin(), files.end(), pass))
        << "no test/golden/" << pass << ".txt for pass '" << pass << "'";
}

} // namespace

} // namespace kiln::test
