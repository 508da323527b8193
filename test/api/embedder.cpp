// An embedder's program: it includes kiln/kiln.h and nothing else of Kiln, links //:kiln,
// builds a tiny network with the API and runs it through ExecutionEngine on every linked
// backend and through a HostManager, checking the outputs against values computed by hand.
// test/api:kiln_h_includes_test checks the include listing of this very file.

#include "kiln/kiln.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

using namespace kiln;

namespace {

int failures = 0;

void expect(bool ok, const std::string &what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
    failures++;
  }
}

/// y = relu(x W + b) with x [2, 3], W [3, 2] = [[1, -1], [0, 2], [1, 0]], b = [0.5, -2].
SaveNode *buildNet(Module &m, Placeholder *&x) {
  Function *f = m.createFunction("main");
  x = m.createPlaceholder(ElemKind::Float, {2, 3}, "x");
  Constant *w = m.createConstant("w", Tensor(ElemKind::Float, {3, 2}, {1, -1, 0, 2, 1, 0}));
  Constant *b = m.createConstant("b", Tensor(ElemKind::Float, {2}, {0.5, -2}));
  auto *fc = f->createFullyConnected("fc", NodeValue(x), NodeValue(w), NodeValue(b));
  return f->createSave("y", NodeValue(f->createRelu("relu", NodeValue(fc))));
}

// x = [[1, 2, 3], [-1, 0, 2]]:
//   row 0: [1 + 0 + 3 + 0.5, -1 + 4 + 0 - 2] = [4.5, 1]
//   row 1: [-1 + 0 + 2 + 0.5, 1 + 0 + 0 - 2] = [1.5, -1] -> relu [1.5, 0]
const std::vector<float> kInput = {1, 2, 3, -1, 0, 2};
const std::vector<float> kExpected = {4.5f, 1, 1.5f, 0};

void checkOutput(const Tensor *t, const std::string &where) {
  expect(t != nullptr, where + ": output bound");
  if (!t)
    return;
  expect(t->getType().dims == Dims({2, 2}), where + ": output dims [2, 2]");
  auto h = t->getHandle<float>();
  for (size_t i = 0; i < kExpected.size(); i++)
    expect(std::fabs(h.raw(i) - kExpected[i]) <= 1e-5f,
           where + ": y[" + std::to_string(i) + "] = " + std::to_string(h.raw(i)) +
               ", expected " + std::to_string(kExpected[i]));
}

void setInput(PlaceholderBindings &b, Placeholder *x) {
  auto h = b.get(x)->getHandle<float>();
  for (size_t i = 0; i < kInput.size(); i++)
    h.raw(i) = kInput[i];
}

void runEngine(const std::string &backend) {
  ExecutionEngine ee(backend);
  Placeholder *x;
  SaveNode *y = buildNet(ee.getModule(), x);
  if (Error e = ee.compile()) {
    expect(false, backend + ": compile: " + e.message());
    return;
  }
  // Twice with the same bindings: a compiled function runs many times.
  PlaceholderBindings b;
  b.allocate(ee.getModule().getPlaceholders());
  for (int run = 0; run < 2; run++) {
    setInput(b, x);
    if (Error e = ee.run(b)) {
      expect(false, backend + ": run: " + e.message());
      return;
    }
    checkOutput(b.get(y->getPlaceholder()), backend + " run " + std::to_string(run));
  }
}

/// A caller's mistake comes back as an Error naming the node, never as an abort.
void badShapeIsAnError() {
  ExecutionEngine ee("Interpreter");
  Module &m = ee.getModule();
  Function *f = m.createFunction("main");
  Placeholder *x = m.createPlaceholder(ElemKind::Float, {2, 3}, "x");
  Constant *w = m.createConstant(ElemKind::Float, {4, 2}, "w"); // needs 3 rows
  Constant *b = m.createConstant(ElemKind::Float, {2}, "b");
  f->createSave("y", NodeValue(f->createFullyConnected("badfc", NodeValue(x), NodeValue(w),
                                                       NodeValue(b))));
  Error e = ee.compile();
  expect(bool(e), "bad FullyConnected weights: compile fails");
  if (e)
    expect(e.message().find("badfc") != std::string::npos,
           "the error names the node: " + e.message());
}

void runHostManager() {
  auto hm = HostManager::create({DeviceConfig{"Interpreter"}});
  if (!hm) {
    expect(false, "HostManager::create: " + hm.takeError().message());
    return;
  }
  auto m = std::make_unique<Module>();
  Placeholder *x;
  SaveNode *y = buildNet(*m, x);
  Placeholder *out = y->getPlaceholder();
  std::vector<Placeholder *> phs = {x, out};
  if (Error e = (*hm)->addNetwork(std::move(m))) {
    expect(false, "HostManager::addNetwork: " + e.message());
    return;
  }
  PlaceholderBindings b;
  b.allocate(phs);
  setInput(b, x);
  RunReport report;
  if (Error e = (*hm)->runNetworkBlocking("main", b, {}, &report)) {
    expect(false, "HostManager::runNetworkBlocking: " + e.message());
    return;
  }
  checkOutput(b.get(out), "HostManager");
  expect(report.partitions.size() == 1, "HostManager: one partition ran");
}

} // namespace

int main() {
  // //:kiln links the Interpreter, CPU and Sim backends; each registers itself.
  for (const char *backend : {"Interpreter", "CPU"})
    runEngine(backend);
  badShapeIsAnError();
  runHostManager();
  if (failures) {
    std::fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  std::printf("embedder: all checks passed\n");
  return 0;
}
