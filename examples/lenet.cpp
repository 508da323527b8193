// LeNet-5 built with Kiln's C++ API (random weights, a seeded random 28x28 image), run on
// a backend of your choice; prints the ten class probabilities and the time per run.
//
//   bazel run //examples:lenet [-- Interpreter|CPU|Sim]   (it links //:kiln: every backend)

#include "kiln/kiln.h"

#include <chrono>
#include <cstdio>

using namespace kiln;

int main(int argc, char **argv) {
  const char *backend = argc > 1 ? argv[1] : "Interpreter";
  ExecutionEngine ee(backend);
  Module &m = ee.getModule();
  Function *f = m.createFunction("lenet");

  Placeholder *image = m.createPlaceholder(ElemKind::Float, {1, 1, 28, 28}, "image");
  NodeValue v(image);
  v = f->createRelu("relu1", f->createConv("conv1", v, 6, 5, 1, 2)); // 6x28x28
  v = f->createMaxPool("pool1", v, {2, 2}, {2, 2}, {0, 0, 0, 0});    // 6x14x14
  v = f->createRelu("relu2", f->createConv("conv2", v, 16, 5));      // 16x10x10
  v = f->createMaxPool("pool2", v, {2, 2}, {2, 2}, {0, 0, 0, 0});    // 16x5x5
  v = f->createRelu("relu3", f->createFullyConnected("fc1", v, 120));
  v = f->createRelu("relu4", f->createFullyConnected("fc2", v, 84));
  v = f->createFullyConnected("fc3", v, 10);
  SaveNode *probs = f->createSave("probs", f->createSoftMax("softmax", v, 1));

  exitOnError(ee.compile(), "compile");

  PlaceholderBindings bindings;
  bindings.allocate(m.getPlaceholders());
  PseudoRNG rng(7);
  bindings.get(image)->getHandle<float>().randomize(0.0, 1.0, rng);

  auto start = std::chrono::steady_clock::now();
  const int runs = 10;
  for (int i = 0; i < runs; i++)
    exitOnError(ee.run(bindings), "run");
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                  .count() / runs;

  auto p = bindings.get(probs->getPlaceholder())->getHandle<float>();
  std::printf("Kiln LeNet-5 on %s (random weights), %.3f ms per run\n", backend, ms);
  for (dim_t c = 0; c < 10; c++)
    std::printf("  class %llu: %.4f\n", (unsigned long long)c, p.at({0, c}));
  return 0;
}
