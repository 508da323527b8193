/// \file
/// Helpers of the low-level IR tests: LLVM's FileCheck for golden files, and running an
/// IRFunction on the Interpreter (unplanned or with a memory plan).
#ifndef KILN_TEST_IR_IRTESTUTILS_H
#define KILN_TEST_IR_IRTESTUTILS_H

#include "kiln/IR/IR.h"
#include "kiln/Memory/MemoryPlanner.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln::test {

/// Checks \p output against the directives in \p checks with LLVM's FileCheck
/// (test/filecheck: CHECK, CHECK-NEXT, CHECK-NOT, CHECK-DAG, CHECK-LABEL, {{regex}}, ...),
/// plus one of Kiln's own:
///   CHECK-NONE: text  no line of the output contains text
/// Returns an empty string on success, else FileCheck's diagnostics; directives are named
/// by their line in \p checks plus \p firstLine - 1.
std::string fileCheck(const std::string &output, const std::string &checks, size_t firstLine = 1);

/// One case of a golden file: the text between `// -----` separators.
struct GoldenCase {
  size_t line = 0;       ///< Line of the case's first line in its file.
  std::string text;      ///< The whole case (IR and directives).
  std::string passes;    ///< From `// RUN: <passes>`, empty if absent.
};
/// Splits a golden file into cases.
std::vector<GoldenCase> splitGoldenFile(const std::string &text);

/// Reads a file; empty with \p ok false when it cannot be read.
std::string readFile(const std::string &path, bool &ok);

/// Creates a placeholder (mutable) or a random constant (const) in \p m for every weight
/// of \p F, named and typed alike, so that parsing the same text into \p m links them.
void addStorageForWeights(const IRFunction &F, Module &m, uint64_t seed = 7);

/// Runs \p F (whose weights have origins in \p m) on the Interpreter with every
/// placeholder of \p m bound to seeded random values. With \p planned, F is first
/// planned (planMemory, checked by verifyMemoryPlan) and runs from the plan's regions.
/// Returns the final tensors of the placeholders by name.
Expected<std::map<std::string, Tensor>> runOnInterpreter(std::unique_ptr<IRFunction> F,
                                                         Module &m, bool planned,
                                                         uint64_t seed = 11);

} // namespace kiln::test

#endif // KILN_TEST_IR_IRTESTUTILS_H
