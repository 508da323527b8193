/// \file
/// A two-layer network with hand-computed results, shared by the engine tests and the CPU
/// backend's parameter tests: y = relu(x W + b) with W = [[1, -1], [2, 0.5]], b = [0.5, -1].
#ifndef KILN_TEST_ENGINE_SMALLNET_H
#define KILN_TEST_ENGINE_SMALLNET_H

#include "kiln/kiln.h"

#include <string>

namespace kiln::test {

inline bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

/// Builds the network as function "main" of \p m; \p x receives the [2, 2] input.
inline SaveNode *buildSmallNet(Module &m, Placeholder *&x) {
  Function *f = m.createFunction("main");
  x = m.createPlaceholder(ElemKind::Float, {2, 2}, "x");
  auto *w = m.createConstant("w", Tensor(ElemKind::Float, {2, 2}, {1, -1, 2, 0.5}));
  auto *b = m.createConstant("b", Tensor(ElemKind::Float, {2}, {0.5, -1}));
  auto *fc = f->createFullyConnected("fc", NodeValue(x), NodeValue(w), NodeValue(b));
  return f->createSave("y", NodeValue(f->createRelu("relu", NodeValue(fc))));
}

} // namespace kiln::test

#endif // KILN_TEST_ENGINE_SMALLNET_H
