// A program built outside Bazel against an installed Kiln (//:install): with pkg-config and
// a plain compiler command, and with CMake's find_package(kiln). It builds
// y = relu(x W + b) with the C++ API and runs it on each backend named on the command line
// (default: Interpreter and CPU), checking y against values computed by hand; it also
// checks that a bad graph comes back as an Error. Prints "consumer: ok" and exits 0 when
// every check passes.

#include "kiln/kiln.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace {

int failures = 0;

void fail(const std::string &what) {
  std::fprintf(stderr, "FAILED: %s\n", what.c_str());
  failures++;
}

// x [2, 2] = [[1, 3], [-2, -1]], W [2, 2] = [[2, 0], [1, -1]], b = [5, 1]:
//   row 0: [2 + 3 + 5, 0 - 3 + 1] = [10, -2] -> relu [10, 0]
//   row 1: [-4 - 1 + 5, 0 + 1 + 1] = [0, 2]  -> relu [0, 2]
const std::vector<float> kX = {1, 3, -2, -1};
const std::vector<float> kY = {10, 0, 0, 2};

void runOn(const std::string &backend) {
  kiln::ExecutionEngine ee(backend);
  kiln::Module &m = ee.getModule();
  kiln::Function *f = m.createFunction("main");
  auto *x = m.createPlaceholder(kiln::ElemKind::Float, {2, 2}, "x");
  auto *w = m.createConstant("w", kiln::Tensor(kiln::ElemKind::Float, {2, 2}, {2, 0, 1, -1}));
  auto *b = m.createConstant("b", kiln::Tensor(kiln::ElemKind::Float, {2}, {5, 1}));
  auto *fc = f->createFullyConnected("fc", kiln::NodeValue(x), kiln::NodeValue(w),
                                     kiln::NodeValue(b));
  auto *save = f->createSave("y", kiln::NodeValue(f->createRelu("relu", kiln::NodeValue(fc))));
  if (kiln::Error e = ee.compile()) {
    fail(backend + ": compile: " + e.message());
    return;
  }
  kiln::PlaceholderBindings bindings;
  bindings.allocate(m.getPlaceholders());
  auto in = bindings.get(x)->getHandle<float>();
  for (size_t i = 0; i < kX.size(); i++)
    in.raw(i) = kX[i];
  if (kiln::Error e = ee.run(bindings)) {
    fail(backend + ": run: " + e.message());
    return;
  }
  auto out = bindings.get(save->getPlaceholder())->getHandle<float>();
  for (size_t i = 0; i < kY.size(); i++)
    if (std::fabs(out.raw(i) - kY[i]) > 1e-5f)
      fail(backend + ": y[" + std::to_string(i) + "] = " + std::to_string(out.raw(i)) +
           ", expected " + std::to_string(kY[i]));
  std::printf("consumer: %s computed y = [%g %g; %g %g]\n", backend.c_str(), out.raw(0),
              out.raw(1), out.raw(2), out.raw(3));
}

// A FullyConnected whose weights have the wrong number of rows: compile() returns an Error
// naming the node.
void badGraphIsAnError() {
  kiln::ExecutionEngine ee("Interpreter");
  kiln::Module &m = ee.getModule();
  kiln::Function *f = m.createFunction("main");
  auto *x = m.createPlaceholder(kiln::ElemKind::Float, {2, 3}, "x");
  auto *w = m.createConstant(kiln::ElemKind::Float, {4, 2}, "w");
  auto *b = m.createConstant(kiln::ElemKind::Float, {2}, "b");
  f->createSave("y", kiln::NodeValue(f->createFullyConnected(
                         "badfc", kiln::NodeValue(x), kiln::NodeValue(w), kiln::NodeValue(b))));
  kiln::Error e = ee.compile();
  if (!e)
    fail("a FullyConnected with [4, 2] weights for a [2, 3] input compiled");
  else if (e.message().find("badfc") == std::string::npos)
    fail("the error does not name the node: " + e.message());
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> backends;
  for (int i = 1; i < argc; i++)
    backends.push_back(argv[i]);
  if (backends.empty())
    backends = {"Interpreter", "CPU"};
  for (const std::string &backend : backends)
    runOn(backend);
  badGraphIsAnError();
  if (failures) {
    std::fprintf(stderr, "consumer: %d check(s) failed\n", failures);
    return 1;
  }
  std::printf("consumer: ok\n");
  return 0;
}
