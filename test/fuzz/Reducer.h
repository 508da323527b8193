/// \file
/// The reducer of the compiler fuzzer: shrinks a module that makes the oracle report a
/// finding while the finding persists (same configuration and kind), by deleting outputs
/// and nodes (a node's result becomes a new input, or one of its operands of the same
/// type; one node the only output), turning constants into inputs, halving dimensions of inputs and constants, and
/// simplifying attributes (each rewrite re-derives the types by the operators' rules and
/// is dropped when the graph no longer verifies).
#ifndef KILN_TEST_FUZZ_REDUCER_H
#define KILN_TEST_FUZZ_REDUCER_H

#include "Oracle.h"

#include <functional>
#include <string>

namespace kiln::fuzz {

/// True when \p moduleText still shows the failure being reduced.
using FailurePredicate = std::function<bool(const std::string &moduleText)>;

/// The predicate "the oracle (isolated, restricted to \p f's configuration) still reports a
/// finding of \p f's kind for that configuration".
FailurePredicate sameFinding(const Finding &f, const OracleOptions &opts);

/// Shrinks \p moduleText while \p fails holds, trying at most \p maxChecks candidates.
std::string reduceModule(const std::string &moduleText, const FailurePredicate &fails,
                         unsigned maxChecks = 400);

/// The text of a regression file: a comment header (what, input seed, configuration) and
/// the module; compiler_fuzz_regress_test replays it.
std::string regressionFile(const std::string &moduleText, const Finding &f, uint64_t inputSeed);

} // namespace kiln::fuzz

#endif // KILN_TEST_FUZZ_REDUCER_H
