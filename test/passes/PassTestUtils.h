/// \file
/// Numeric equivalence for graph rewrites: run a function before and after passes on the
/// Interpreter, on the same inputs, and compare every output (Glow's
/// checkNumericalEquivalence).
#ifndef KILN_TEST_PASSES_PASSTESTUTILS_H
#define KILN_TEST_PASSES_PASSTESTUTILS_H

#include "kiln/Backend/Backend.h"
#include "kiln/Graph/Graph.h"
#include "kiln/Passes/Pipeline.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln::test {

/// A copy of \p f (sharing its storage) after the passes \p passes (a pass list, e.g.
/// "cse,dce") ran on it for \p backend (null: no backend). Fails the test on errors.
Function *optimizedCopy(Function *f, const std::string &passes, const Backend *backend = nullptr);

/// Runs \p before and \p after (functions of one module) on the Interpreter with the same
/// seeded random inputs and expects every saved output within \p atol + \p rtol * |x|.
void expectSameNumbers(Function *before, Function *after, float atol = 1e-5f, float rtol = 1e-5f,
                       uint64_t seed = 1);

/// The number of nodes of kind \p k in \p f.
unsigned countKind(const Function *f, NodeKind k);

/// A float Constant of \p dims with seeded uniform values in [lo, hi].
Constant *randomConstant(Module &m, const std::string &name, Dims dims, float lo, float hi,
                         uint64_t seed);

} // namespace kiln::test

#endif // KILN_TEST_PASSES_PASSTESTUTILS_H
