// A two-layer perceptron built with Kiln's C++ API and run on a backend of your choice.
// Its weights are set by hand so that it computes XOR of two inputs: the hidden layer
// computes OR and AND, the output OR AND NOT AND. All four input pairs run as one batch.
//
//   bazel run //examples:mlp [-- Interpreter|CPU|Sim]   (it links //:kiln: every backend)

#include "kiln/kiln.h"

#include <cstdio>

using namespace kiln;

int main(int argc, char **argv) {
  const char *backend = argc > 1 ? argv[1] : "Interpreter";
  ExecutionEngine ee(backend);
  Module &m = ee.getModule();
  Function *f = m.createFunction("xor");

  Placeholder *x = m.createPlaceholder(ElemKind::Float, {4, 2}, "x");
  // Hidden layer: h0 = sigmoid(20a + 20b - 10) ~ OR, h1 = sigmoid(20a + 20b - 30) ~ AND.
  Constant *w1 = m.createConstant("w1", Tensor(ElemKind::Float, {2, 2}, {20, 20, 20, 20}));
  Constant *b1 = m.createConstant("b1", Tensor(ElemKind::Float, {2}, {-10, -30}));
  // Output: sigmoid(20 h0 - 20 h1 - 10) ~ OR and not AND.
  Constant *w2 = m.createConstant("w2", Tensor(ElemKind::Float, {2, 1}, {20, -20}));
  Constant *b2 = m.createConstant("b2", Tensor(ElemKind::Float, {1}, {-10}));

  auto *h = f->createSigmoid(
      "hidden", f->createFullyConnected("fc1", NodeValue(x), NodeValue(w1), NodeValue(b1)));
  auto *y = f->createSigmoid(
      "out", f->createFullyConnected("fc2", NodeValue(h), NodeValue(w2), NodeValue(b2)));
  SaveNode *save = f->createSave("y", NodeValue(y));

  exitOnError(ee.compile(), "compile");

  PlaceholderBindings bindings;
  bindings.allocate(m.getPlaceholders());
  bindings.get(x)->getHandle<float>().set({0, 0, 0, 1, 1, 0, 1, 1});
  exitOnError(ee.run(bindings), "run");

  auto in = bindings.get(x)->getHandle<float>();
  auto out = bindings.get(save->getPlaceholder())->getHandle<float>();
  std::printf("Kiln MLP on %s: XOR by a 2-2-1 perceptron\n", backend);
  for (dim_t i = 0; i < 4; i++)
    std::printf("  %g xor %g = %.4f\n", in.at({i, 0}), in.at({i, 1}), out.at({i, 0}));
  return 0;
}
