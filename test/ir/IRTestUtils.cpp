#include "IRTestUtils.h"

#include "backends/Interpreter/Interpreter.h"
#include "test/filecheck/LLVMFileCheck.h"

#include <fstream>
#include <sstream>

namespace kiln::test {

namespace {

std::vector<std::string> splitLines(const std::string &s) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  std::string l;
  while (std::getline(ss, l))
    r.push_back(l);
  return r;
}

std::string trim(const std::string &s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

} // namespace

std::string fileCheck(const std::string &output, const std::string &checks, size_t firstLine) {
  // LLVM's FileCheck runs the CHECK directives; CHECK-NONE lines (nowhere in the output)
  // become NONE-NOT directives of a second run, which with no positive pattern covers the
  // whole output.
  std::string main, none;
  bool hasMain = false, hasNone = false;
  for (const std::string &l : splitLines(checks)) {
    size_t p = l.find("CHECK-NONE:");
    if (p == std::string::npos) {
      main += l + "\n";
      none += "\n";
      hasMain |= l.find("CHECK") != std::string::npos;
      continue;
    }
    main += "\n";
    none += l.substr(0, p) + "NONE-NOT:" + l.substr(p + 11) + "\n";
    hasNone = true;
  }
  if (hasMain)
    if (std::string e = runLLVMFileCheck(main, output, "golden.txt", unsigned(firstLine));
        !e.empty())
      return e;
  if (hasNone)
    return runLLVMFileCheck(none, output, "golden.txt", unsigned(firstLine), "NONE");
  return "";
}

std::vector<GoldenCase> splitGoldenFile(const std::string &text) {
  std::vector<GoldenCase> r;
  GoldenCase cur;
  size_t ln = 0;
  auto flush = [&] {
    bool hasCode = cur.text.find("function") != std::string::npos;
    if (hasCode)
      r.push_back(cur);
    cur = GoldenCase();
  };
  for (const std::string &l : splitLines(text)) {
    ln++;
    std::string t = trim(l);
    if (t.rfind("// -----", 0) == 0) {
      flush();
      continue;
    }
    if (cur.text.empty())
      cur.line = ln;
    if (t.rfind("// RUN:", 0) == 0)
      cur.passes = trim(t.substr(7));
    cur.text += l + "\n";
  }
  flush();
  return r;
}

std::string readFile(const std::string &path, bool &ok) {
  std::ifstream in(path);
  ok = bool(in);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void addStorageForWeights(const IRFunction &F, Module &m, uint64_t seed) {
  PseudoRNG rng(seed);
  for (const auto &w : F.getWeights()) {
    TypeRef ty = m.uniqueType(*w->getType());
    if (w->isConstant()) {
      Tensor t(*ty);
      t.randomize(-2, 2, rng);
      m.createConstant(w->getName(), std::move(t));
    } else {
      m.createPlaceholder(ty, w->getName());
    }
  }
}

Expected<std::map<std::string, Tensor>> runOnInterpreter(std::unique_ptr<IRFunction> F,
                                                         Module &m, bool planned,
                                                         uint64_t seed) {
  PlaceholderBindings b;
  PseudoRNG rng(seed);
  for (const auto &ph : m.getPlaceholders()) {
    Tensor *t = b.allocate(ph.get());
    t->randomize(-2, 2, rng);
  }
  std::unique_ptr<MemoryPlan> p;
  if (planned) {
    KILN_ASSIGN_OR_RETURN(MemoryPlan plan, planMemory(*F));
    KILN_RETURN_IF_ERR(verifyMemoryPlan(*F, plan));
    p = std::make_unique<MemoryPlan>(std::move(plan));
  }
  InterpreterFunction fn(std::move(F), std::move(p));
  ExecutionContext ctx(&b);
  KILN_RETURN_IF_ERR(fn.execute(ctx));
  std::map<std::string, Tensor> r;
  for (const auto &ph : m.getPlaceholders())
    r.emplace(ph->getName(), b.get(ph.get())->clone());
  return r;
}

} // namespace kiln::test
