#include "IRTestUtils.h"

#include "backends/Interpreter/Interpreter.h"

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
  std::vector<std::string> out = splitLines(output);
  struct Directive {
    std::string kind, text;
    size_t line;
  };
  std::vector<Directive> ds;
  size_t ln = firstLine - 1;
  for (const std::string &l : splitLines(checks)) {
    ln++;
    std::string t = trim(l);
    if (t.rfind("//", 0) != 0)
      continue;
    t = trim(t.substr(2));
    for (const char *k : {"CHECK-NEXT:", "CHECK-NOT:", "CHECK-NONE:", "CHECK:"}) {
      if (t.rfind(k, 0) == 0) {
        std::string kind(k);
        ds.push_back({kind.substr(0, kind.size() - 1), trim(t.substr(kind.size())), ln});
        break;
      }
    }
  }
  auto where = [&](const Directive &d) {
    return "line " + std::to_string(d.line) + ": " + d.kind + ": " + d.text;
  };
  size_t cursor = 0; // next output line to search
  std::vector<const Directive *> pendingNot;
  bool first = true;
  auto checkNots = [&](size_t from, size_t to) -> std::string {
    for (const Directive *d : pendingNot)
      for (size_t i = from; i < to && i < out.size(); i++)
        if (out[i].find(d->text) != std::string::npos)
          return where(*d) + "\n  found in output line " + std::to_string(i + 1) + ": " + out[i];
    pendingNot.clear();
    return "";
  };
  for (const Directive &d : ds) {
    if (d.kind == "CHECK-NONE") {
      for (size_t i = 0; i < out.size(); i++)
        if (out[i].find(d.text) != std::string::npos)
          return where(d) + "\n  found in output line " + std::to_string(i + 1) + ": " + out[i];
      continue;
    }
    if (d.kind == "CHECK-NOT") {
      pendingNot.push_back(&d);
      continue;
    }
    size_t match = std::string::npos;
    if (d.kind == "CHECK-NEXT") {
      if (first)
        return where(d) + "\n  CHECK-NEXT without an earlier CHECK";
      if (cursor < out.size() && out[cursor].find(d.text) != std::string::npos)
        match = cursor;
      else
        return where(d) + "\n  the next output line is: " +
               (cursor < out.size() ? out[cursor] : std::string("<end of output>"));
    } else {
      for (size_t i = cursor; i < out.size() && match == std::string::npos; i++)
        if (out[i].find(d.text) != std::string::npos)
          match = i;
      if (match == std::string::npos)
        return where(d) + "\n  not found after output line " + std::to_string(cursor);
    }
    std::string e = checkNots(cursor, match);
    if (!e.empty())
      return e;
    cursor = match + 1;
    first = false;
  }
  return checkNots(cursor, out.size());
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
