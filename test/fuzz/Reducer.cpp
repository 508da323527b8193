// The reducer (Reducer.h): greedy one-edit-at-a-time shrinking, each edit re-checked by the
// failure predicate, until no edit of any family is accepted or the checks run out.

#include "Reducer.h"

#include "kiln/Graph/Graph.h"
#include "kiln/Graph/TextIR.h"

#include <regex>
#include <set>
#include <sstream>

namespace kiln::fuzz {

namespace {

std::string printExact(const Module &m) {
  PrintOptions po;
  po.maxConstantElements = size_t(1) << 40;
  std::string text = printModule(m, po);
  // Drop declarations of placeholders nothing refers to any more.
  std::istringstream is(text);
  std::string line, out;
  std::vector<std::string> lines;
  while (std::getline(is, line))
    lines.push_back(line);
  for (size_t i = 0; i < lines.size(); i++) {
    const std::string &l = lines[i];
    if (l.rfind("placeholder @", 0) == 0) {
      std::string name = l.substr(12, l.find(' ', 12) - 12); // "@name"
      bool used = false;
      for (size_t j = 0; j < lines.size() && !used; j++) {
        if (j == i)
          continue;
        size_t p = lines[j].find(name);
        while (p != std::string::npos && !used) {
          size_t e = p + name.size();
          char c = e < lines[j].size() ? lines[j][e] : ' ';
          used = !(std::isalnum(uint8_t(c)) || c == '_' || c == '.' || c == '$' || c == '-');
          p = lines[j].find(name, p + 1);
        }
      }
      if (!used)
        continue;
    }
    out += l + "\n";
  }
  return out;
}

/// Re-derives every node's result types from its operands by its rule (in creation order,
/// which is topological for parsed modules); Saves whose input changed type get a new
/// output placeholder. False when a rule rejects its operands now.
bool retype(Module &m, Function &f) {
  for (const auto &up : f.getNodes()) {
    Node *n = up.get();
    if (auto *s = dyn_cast<SaveNode>(n)) {
      if (!(*s->getInput().getType() == *s->getPlaceholder()->getType())) {
        Placeholder *ph = m.createPlaceholder(s->getInput().getType(),
                                              s->getPlaceholder()->getName() + "r");
        s->setNthInput(SaveNode::OutputIdx, NodeValue(ph));
      }
      continue;
    }
    Expected<std::vector<Type>> t = n->computeResultTypes();
    if (!t) {
      consumeError(t.takeError());
      return false;
    }
    if (t->size() != n->getNumResults())
      return false;
    for (unsigned r = 0; r < t->size(); r++)
      n->setType(r, m.uniqueType((*t)[r]));
  }
  if (Error e = f.verify()) {
    consumeError(std::move(e));
    return false;
  }
  return true;
}

/// Sets attribute \p target of a node to its simplest value (variant 0 or 1).
class Simplifier : public AttrVisitor {
public:
  Simplifier(size_t target, int variant) : target_(target), variant_(variant) {}
  size_t count = 0;
  bool changed = false;
  void visit(const char *, dim_t &v) override { set(v, dim_t(1)); }
  void visit(const char *, int64_t &v) override { set(v, int64_t(variant_ ? -1 : 0)); }
  void visit(const char *, float &v) override { set(v, float(variant_)); }
  void visit(const char *, bool &v) override { set(v, variant_ != 0); }
  void visit(const char *, std::vector<dim_t> &v) override {
    std::vector<dim_t> n(v.size(), dim_t(variant_));
    set(v, n);
  }
  void visit(const char *, std::vector<int64_t> &v) override {
    std::vector<int64_t> n = v.empty() ? v : std::vector<int64_t>{v[0]};
    set(v, n);
  }
  void visit(const char *, std::string &) override { count++; }

private:
  template <typename T> void set(T &v, const T &n) {
    if (count++ == target_ && !(v == n)) {
      v = n;
      changed = true;
    }
  }
  size_t target_;
  int variant_;
};

struct CountAttrs : AttrVisitor {
  size_t n = 0;
  void visit(const char *, dim_t &) override { n++; }
  void visit(const char *, int64_t &) override { n++; }
  void visit(const char *, float &) override { n++; }
  void visit(const char *, bool &) override { n++; }
  void visit(const char *, std::vector<dim_t> &) override { n++; }
  void visit(const char *, std::vector<int64_t> &) override { n++; }
  void visit(const char *, std::string &) override { n++; }
};

std::vector<Node *> opNodes(Function &f, bool saves) {
  std::vector<Node *> v;
  for (const auto &up : f.getNodes())
    if (isa<SaveNode>(up.get()) == saves)
      v.push_back(up.get());
  return v;
}

std::vector<Storage *> usedLeaves(Module &m) {
  std::vector<Storage *> v;
  for (const auto &c : m.getConstants())
    if (c->hasUsers())
      v.push_back(c.get());
  for (const auto &p : m.getPlaceholders()) {
    bool onlyOutput = true;
    for (const NodeUse &u : p->getUsers())
      onlyOutput &= isa<SaveNode>(u.user) && u.idx == SaveNode::OutputIdx;
    if (p->hasUsers() && !onlyOutput)
      v.push_back(p.get());
  }
  return v;
}

/// Replaces every use of \p leaf's value with a new leaf of type \p ty (a prefix of its
/// data for a constant).
void replaceLeaf(Module &m, Storage *leaf, TypeRef ty) {
  Storage *n;
  if (auto *c = dyn_cast<Constant>(leaf)) {
    Tensor t(*ty);
    for (size_t i = 0; i < t.size(); i++)
      t.setFromDouble(i, c->getPayload().getAsDouble(i % c->getPayload().size()));
    n = m.createConstant(c->getName() + "s", std::move(t));
  } else {
    n = m.createPlaceholder(ty, leaf->getName() + "s");
  }
  std::vector<NodeUse> uses = leaf->getUsers();
  for (const NodeUse &u : uses)
    if (!(isa<SaveNode>(u.user) && u.idx == SaveNode::OutputIdx))
      u.user->setNthInput(u.idx, NodeValue(n));
}

/// Applies edit \p idx of family \p fam: 1 applied, 0 not applicable, -1 no such index.
int applyEdit(Module &m, Function &f, int fam, size_t idx) {
  switch (fam) {
  case 0: { // delete an output
    auto saves = opNodes(f, true);
    if (idx >= saves.size())
      return -1;
    if (saves.size() == 1)
      return 0;
    f.eraseNode(saves[idx]);
    return 1;
  }
  case 6: { // a node's first result becomes the only output
    auto ns = opNodes(f, false);
    if (idx >= ns.size())
      return -1;
    Node *n = ns[idx];
    for (Node *sv : opNodes(f, true))
      f.eraseNode(sv);
    f.createSave(n->getName() + "_out", NodeValue(n, 0));
    return 1;
  }
  case 1: { // a node's results become new inputs
    auto ns = opNodes(f, false);
    if (idx >= ns.size())
      return -1;
    Node *n = ns[ns.size() - 1 - idx];
    for (unsigned r = 0; r < n->getNumResults(); r++) {
      Placeholder *ph = m.createPlaceholder(n->getType(r), n->getName() + "_in" + std::to_string(r));
      n->replaceAllUsesOfWith(r, NodeValue(ph));
    }
    return 1;
  }
  case 2: { // a node is bypassed by an operand of its result's type
    auto ns = opNodes(f, false);
    if (idx >= ns.size())
      return -1;
    Node *n = ns[ns.size() - 1 - idx];
    bool any = false;
    for (unsigned r = 0; r < n->getNumResults(); r++)
      for (unsigned i = 0; i < n->getNumInputs(); i++)
        if (*n->getNthInput(i).getType() == *n->getType(r)) {
          n->replaceAllUsesOfWith(r, n->getNthInput(i));
          any = true;
          break;
        }
    return any ? 1 : 0;
  }
  case 3: { // a constant becomes an input
    std::vector<Constant *> cs;
    for (const auto &c : m.getConstants())
      if (c->hasUsers())
        cs.push_back(c.get());
    if (idx >= cs.size())
      return -1;
    Placeholder *ph = m.createPlaceholder(cs[idx]->getType(), cs[idx]->getName() + "_p");
    cs[idx]->replaceAllUsesOfWith(0, NodeValue(ph));
    return 1;
  }
  case 4: { // halve one dimension of a leaf (or make it 1)
    auto leaves = usedLeaves(m);
    size_t k = idx;
    for (Storage *l : leaves) {
      const Dims &d = l->getType()->dims;
      if (k < 2 * d.size()) {
        size_t di = k / 2;
        if (d[di] <= 1)
          return 0;
        Dims nd = d;
        nd[di] = k % 2 ? 1 : d[di] / 2;
        Type t = *l->getType();
        t.dims = nd;
        replaceLeaf(m, l, m.uniqueType(t));
        return 1;
      }
      k -= 2 * d.size();
    }
    return -1;
  }
  case 5: { // simplify one attribute
    auto ns = opNodes(f, false);
    size_t k = idx;
    for (Node *n : ns) {
      CountAttrs ca;
      n->visitAttrs(ca);
      if (k < 2 * ca.n) {
        Simplifier s(k / 2, int(k % 2));
        n->visitAttrs(s);
        return s.changed ? 1 : 0;
      }
      k -= 2 * ca.n;
    }
    return -1;
  }
  }
  return -1;
}

} // namespace

FailurePredicate sameFinding(const Finding &f, const OracleOptions &opts) {
  OracleOptions o = opts;
  if (f.config != "reference" && f.config != "quantize")
    o.configFilter = f.config;
  return [f, o](const std::string &text) {
    GraphResult r = checkModuleIsolated(text, o);
    for (const Finding &g : r.findings)
      if (g.config == f.config && g.kind == f.kind)
        return true;
    return false;
  };
}

std::string reduceModule(const std::string &text, const FailurePredicate &fails,
                         unsigned maxChecks) {
  std::string cur = text;
  {
    auto m = parseModule(cur);
    if (!m) {
      consumeError(m.takeError());
      return cur;
    }
    cur = printExact(**m);
  }
  unsigned checks = 0;
  bool progress = true;
  while (progress && checks < maxChecks) {
    progress = false;
    for (int fam : {6, 0, 1, 2, 3, 4, 5}) {
      if (checks >= maxChecks)
        break;
      for (size_t idx = 0; checks < maxChecks; idx++) {
        auto pm = parseModule(cur);
        if (!pm) {
          consumeError(pm.takeError());
          return cur;
        }
        Module &m = **pm;
        Function &f = *m.getFunctions().front();
        int r = applyEdit(m, f, fam, idx);
        if (r < 0)
          break;
        if (r == 0)
          continue;
        f.eraseDeadNodes();
        if (!retype(m, f))
          continue;
        m.eraseUnusedConstants();
        std::string t = printExact(m);
        if (t == cur)
          continue;
        // The candidate must parse back (the regression file is this text).
        auto back = parseModule(t);
        if (!back) {
          consumeError(back.takeError());
          continue;
        }
        checks++;
        if (fails(t)) {
          cur = t;
          progress = true;
          idx--; // the same index names another edit now
        }
      }
    }
  }
  return cur;
}

std::string regressionFile(const std::string &text, const Finding &f, uint64_t inputSeed) {
  std::ostringstream os;
  os << "// compiler_fuzz regression (test/fuzz/README.md, \"Bugs found\").\n";
  os << "// found: " << f.config << ": " << f.kind << ": " << f.detail << "\n";
  os << "// fuzz-input-seed: " << inputSeed << "\n";
  os << "// fuzz-config: " << f.config << "\n";
  os << text;
  return os.str();
}

} // namespace kiln::fuzz
