// A program that uses Kiln from its own Bazel workspace: it builds a small graph with the
// C++ API, y = relu(x W + b), runs it on each backend named on the command line (default:
// the Interpreter and the CPU backend) and checks y against values computed by hand.
//
//   bazel run //:hello                        # Interpreter and CPU
//   bazel run //:hello -- Sim
//   bazel run //:hello_interpreter -- Interpreter

#include "kiln/kiln.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

// x [2, 3] = [[1, 2, 3], [4, 5, 6]], W [3, 2] = [[1, 0], [0, 1], [-1, 1]], b = [0.5, -6]:
//   row 0: [1 - 3 + 0.5, 2 + 3 - 6] = [-1.5, -1] -> relu [0, 0]
//   row 1: [4 - 6 + 0.5, 5 + 6 - 6] = [-1.5, 5] -> relu [0, 5]
// and with x row 0 = [3, 2, 1]: [3 - 1 + 0.5, 2 + 1 - 6] = [2.5, -3] -> relu [2.5, 0].
static const std::vector<float> kX = {3, 2, 1, 4, 5, 6};
static const std::vector<float> kY = {2.5f, 0, 0, 5};

// Builds, compiles and runs the graph on \p backend; returns whether y came out right.
static bool runOn(const std::string &backend) {
  kiln::ExecutionEngine ee(backend);
  kiln::Module &m = ee.getModule();
  kiln::Function *f = m.createFunction("main");
  kiln::Placeholder *x = m.createPlaceholder(kiln::ElemKind::Float, {2, 3}, "x");
  kiln::Constant *w =
      m.createConstant("w", kiln::Tensor(kiln::ElemKind::Float, {3, 2}, {1, 0, 0, 1, -1, 1}));
  kiln::Constant *b = m.createConstant("b", kiln::Tensor(kiln::ElemKind::Float, {2}, {0.5, -6}));
  kiln::Node *fc = f->createFullyConnected("fc", kiln::NodeValue(x), kiln::NodeValue(w),
                                           kiln::NodeValue(b));
  kiln::SaveNode *y = f->createSave("y", kiln::NodeValue(f->createRelu("relu", fc)));

  if (kiln::Error e = ee.compile()) {
    std::fprintf(stderr, "%s: compile: %s\n", backend.c_str(), e.message().c_str());
    return false;
  }
  kiln::PlaceholderBindings bindings;
  bindings.allocate(m.getPlaceholders());
  auto in = bindings.get(x)->getHandle<float>();
  for (size_t i = 0; i < kX.size(); i++)
    in.raw(i) = kX[i];
  if (kiln::Error e = ee.run(bindings)) {
    std::fprintf(stderr, "%s: run: %s\n", backend.c_str(), e.message().c_str());
    return false;
  }
  auto out = bindings.get(y->getPlaceholder())->getHandle<float>();
  bool ok = true;
  for (size_t i = 0; i < kY.size(); i++)
    ok = ok && std::fabs(out.raw(i) - kY[i]) <= 1e-5f;
  std::printf("%s: y = [%g %g; %g %g] %s\n", backend.c_str(), out.raw(0), out.raw(1),
              out.raw(2), out.raw(3), ok ? "(as expected)" : "(WRONG: expected [2.5 0; 0 5])");
  return ok;
}

int main(int argc, char **argv) {
  std::vector<std::string> backends(argv + 1, argv + argc);
  if (backends.empty())
    backends = {"Interpreter", "CPU"};
  bool ok = true;
  for (const std::string &backend : backends)
    ok = runOn(backend) && ok;
  return ok ? 0 : 1;
}
