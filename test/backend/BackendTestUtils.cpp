#include "BackendTestUtils.h"

#include "kiln/Passes/Pipeline.h"

#include <cmath>
#include <set>

#include <glog/logging.h>

namespace kiln::test {

Placeholder *BackendTest::input(const std::string &name, ElemKind k, Dims dims,
                                std::initializer_list<double> values) {
  return input(name, Tensor(k, dims, values));
}

Placeholder *BackendTest::input(const std::string &name, Tensor t) {
  Placeholder *ph = mod_.createPlaceholder(mod_.uniqueType(t.getType()), name);
  inputs_.push_back({ph, std::move(t)});
  return ph;
}

Placeholder *BackendTest::randomInput(const std::string &name, const Type &ty, float lo,
                                      float hi, uint64_t seed) {
  Tensor t(ty);
  PseudoRNG rng(seed);
  t.randomize(lo, hi, rng);
  return input(name, std::move(t));
}

Constant *BackendTest::constant(const std::string &name, ElemKind k, Dims dims,
                                std::initializer_list<double> values) {
  return mod_.createConstant(name, Tensor(k, dims, values));
}

SaveNode *BackendTest::save(NodeValue v, const std::string &name) {
  return F_->createSave(name, v);
}

Error BackendTest::compileAndRun(const std::string &backend, Function *f,
                                 PlaceholderBindings &out, bool &skipped) {
  skipped = false;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Backend> b, createBackend(backend));
  KILN_RETURN_IF_ERR(f->verify());
  // What the compile driver does before its support check, and no more (no folding or
  // fusion that would take the operator under test away from the backend's kernels): the
  // nodes the backend asks for are lowered.
  if (backend != "Interpreter") {
    KILN_ASSIGN_OR_RETURN(Pipeline lower, parsePassList("lower"));
    KILN_RETURN_IF_ERR(runPipeline(f, lower, b.get()).takeError());
  }
  if (Error e = b->checkAllNodesSupported(*f)) {
    skipped = true;
    return e;
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<CompiledFunction> cf, b->compile(f, CompileOptions()));
  for (SaveNode *s : f->getSaves())
    out.allocate(cast<Placeholder>(s->getOutput().node));
  ExecutionContext ctx(&out);
  return cf->execute(ctx);
}

Error BackendTest::runOn(const std::string &backend, PlaceholderBindings &out) {
  for (auto &in : inputs_)
    out.insert(in.first, in.second.clone());
  bool skipped;
  return compileAndRun(backend, F_, out, skipped);
}

Error BackendTest::runRaw(Function *f, std::vector<std::pair<Placeholder *, Tensor>> inputs,
                          bool &skipped) {
  PlaceholderBindings bindings;
  for (auto &in : inputs)
    bindings.insert(in.first, std::move(in.second));
  ranRaw_ = true; // the test checks the Error (and any output it reads itself)
  return compileAndRun(GetParam(), f, bindings, skipped);
}

void BackendTest::TearDown() {
  bool own = ranRaw_ || !F_->getSaves().empty();
  for (SaveNode *s : F_->getSaves())
    own = own && (ranRaw_ || read_.count(s));
  RecordProperty("kiln_checks", own ? "own" : "interpreter");
}

std::string BackendTest::partlySupportedNote(const Backend &b) const {
  std::set<const Node *> bad;
  for (const auto &n : F_->getNodes())
    if (!b.isOpSupported(*n))
      bad.insert(n.get());
  std::vector<SaveNode *> saves = F_->getSaves();
  unsigned runnable = 0;
  for (SaveNode *s : saves) {
    // Every node this output depends on must be supported.
    std::vector<const Node *> work = {s};
    std::set<const Node *> seen;
    bool ok = true;
    while (!work.empty() && ok) {
      const Node *n = work.back();
      work.pop_back();
      if (!seen.insert(n).second)
        continue;
      if (bad.count(n))
        ok = false;
      for (unsigned i = 0; i < n->getNumInputs(); i++)
        if (const Node *in = n->getNthInput(i).node)
          work.push_back(in);
    }
    runnable += ok;
  }
  if (runnable == 0)
    return "";
  return std::string(kPartlySupported) + std::to_string(runnable) + " of " +
         std::to_string(saves.size()) + " outputs need only supported nodes] ";
}

namespace {
void skip(const std::string &why) { GTEST_SKIP() << why; }
} // namespace

bool BackendTest::run(float atol, float rtol) {
  const std::string backend = GetParam();
  {
    Expected<std::unique_ptr<Backend>> b = createBackend(backend);
    if (!b) {
      ADD_FAILURE() << b.getError().toString();
      return false;
    }
    if (Error e = F_->verify()) {
      ADD_FAILURE() << e.toString();
      return false;
    }
    // Another backend may run a node lowered: its support is checked after lowering, in
    // compileAndRun.
    if (backend == "Interpreter")
      if (Error e = (*b)->checkAllNodesSupported(*F_)) {
        ADD_FAILURE() << "the reference backend must support every operator: " << e.toString();
        return false;
      }
  }
  // The reference first: a backend's compile may rewrite the function in place (the CPU
  // widens 16-bit float nodes to float32), and the Interpreter must run it as written.
  PlaceholderBindings ref;
  if (backend != "Interpreter")
    if (Error e = runOn("Interpreter", ref)) {
      ADD_FAILURE() << "running on the Interpreter: " << e.toString();
      return false;
    }
  results_.clear();
  for (auto &in : inputs_)
    results_.insert(in.first, in.second.clone());
  bool skipped = false;
  if (Error e = compileAndRun(backend, F_, results_, skipped)) {
    if (skipped) {
      std::unique_ptr<Backend> b = exitOnError(createBackend(backend));
      skip(partlySupportedNote(*b) + e.message());
    } else {
      ADD_FAILURE() << "running on " << backend << ": " << e.toString();
    }
    return false;
  }
  if (backend == "Interpreter")
    return true;
  for (SaveNode *s : F_->getSaves()) {
    auto *ph = cast<Placeholder>(s->getOutput().node);
    EXPECT_TRUE(results_.get(ph)->isEqual(*ref.get(ph), atol, rtol, /*verbose=*/true))
        << "output '" << ph->getName() << "' of " << backend << " differs from the Interpreter";
  }
  return !::testing::Test::HasFailure();
}

const Tensor &BackendTest::output(SaveNode *s) {
  Tensor *t = results_.get(cast<Placeholder>(s->getOutput().node));
  CHECK(t) << "output() before a successful run()";
  read_.insert(s);
  return *t;
}

void BackendTest::expectValues(const Tensor &t, const std::vector<double> &expected, double atol,
                               double rtol) {
  ASSERT_EQ(t.size(), expected.size()) << "element count of " << t.getType().toString();
  for (size_t i = 0; i < expected.size(); i++) {
    double a = t.getAsDouble(i), e = expected[i];
    if (std::isnan(e)) {
      EXPECT_TRUE(std::isnan(a)) << "element " << i << ": expected NaN, got " << a;
      continue;
    }
    if (std::isinf(e)) {
      EXPECT_EQ(a, e) << "element " << i;
      continue;
    }
    EXPECT_NEAR(a, e, atol + rtol * std::fabs(e)) << "element " << i << " of "
                                                  << t.getType().toString();
  }
}

Tensor makeTensor(const Type &ty, std::initializer_list<double> values) {
  Tensor t(ty);
  CHECK_EQ(values.size(), t.size()) << "value count does not match " << ty.toString();
  size_t i = 0;
  for (double v : values)
    t.setFromDouble(i++, v);
  return t;
}

Tensor qTensor(ElemKind k, Dims dims, float scale, int32_t offset,
               std::initializer_list<double> raw) {
  return makeTensor(Type(k, dims, scale, offset), raw);
}

Tensor randomTensor(const Type &ty, float lo, float hi, uint64_t seed) {
  Tensor t(ty);
  PseudoRNG rng(seed);
  t.randomize(lo, hi, rng);
  return t;
}

std::vector<double> toDoubles(const Tensor &t) {
  std::vector<double> v(t.size());
  for (size_t i = 0; i < v.size(); i++)
    v[i] = t.getAsDouble(i);
  return v;
}

namespace {
std::vector<std::string> &selectedBackends() {
  static std::vector<std::string> names;
  return names;
}
} // namespace

std::vector<std::string> backendsUnderTest() {
  return selectedBackends().empty() ? getRegisteredBackends() : selectedBackends();
}

void setBackendsUnderTest(std::vector<std::string> names) { selectedBackends() = std::move(names); }

namespace {
std::set<std::string> &interpreterKernelBackends() {
  // The Sim compiles every function with the Interpreter and runs its kernels.
  static std::set<std::string> names = {"Sim"};
  return names;
}
} // namespace

bool runsInterpreterKernels(const std::string &backend) {
  return interpreterKernelBackends().count(backend) != 0;
}

void addInterpreterKernelBackend(std::string name) {
  interpreterKernelBackends().insert(std::move(name));
}

double quantizeRef(double real, double scale, int offset) {
  double q = std::round(real / scale) + offset;
  return std::min(127.0, std::max(-128.0, q));
}

} // namespace kiln::test
