/// \file
/// The differential oracle of the compiler fuzzer (test/fuzz/README.md): a module is run on
/// the Interpreter with no graph passes (the reference) and under every configuration of
/// configNames() (the Interpreter's default pipeline and planned mode, the CPU backend at
/// 1 and 2 threads with fusion on and off, with each convolution algorithm forced, its
/// static-plan path, and the quantized path), and every output is compared with the
/// reference within a tolerance derived per element kind and per graph.
#ifndef KILN_TEST_FUZZ_ORACLE_H
#define KILN_TEST_FUZZ_ORACLE_H

#include "kiln/Base/Error.h"
#include "kiln/Base/Tensor.h"
#include "kiln/Graph/Node.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kiln::fuzz {

/// What a configuration found wrong.
struct Finding {
  std::string config;
  /// "error" (the configuration failed on a graph the reference runs, other than an
  /// unsupported-operator refusal), "mismatch", or "crash" (set by the isolated runner).
  std::string kind;
  std::string detail;
};

/// The verdict on one module.
struct GraphResult {
  /// The reference could not run it on any input range (or gave non-finite or huge
  /// intermediate values): not compared, not a finding.
  bool rejected = false;
  std::string rejectReason;
  unsigned configsRun = 0;
  /// Configurations skipped, by reason ("CPU: unsupported", "no convolution for conv_wino").
  std::map<std::string, unsigned> skipped;
  /// Outputs not compared because a discontinuous operator reads a rounded float value.
  unsigned unstableOutputs = 0;
  /// Outputs not compared because they depend on a value that was not finite (or above
  /// 1e4 in magnitude) on the reference's inputs.
  unsigned nonFiniteOutputs = 0;
  /// Outputs compared with a bound widened by an ill-conditioned ancestor (an operator whose
  /// slope on the reference's values exceeds 1: LayerNorm over nearly equal values, Div by
  /// a small value, Tan near a pole; README, "Tolerances").
  unsigned amplifiedOutputs = 0;
  std::vector<Finding> findings;
  /// The input range the reference accepted (part of the reproduction).
  int inputStrategy = -1;
};

/// Options of checkModule.
struct OracleOptions {
  /// Only configurations whose name contains this (empty: all).
  std::string configFilter;
  /// Configurations not run (exact names; not counted as skipped).
  std::vector<std::string> skipConfigs;
  /// Seed of the inputs (the same seed and module give the same inputs).
  uint64_t inputSeed = 1;
  /// Each float output of every configuration multiplied by (1 + this) before it is
  /// compared: an injected relative error, to test what the tolerances let through.
  double candidateError = 0;
};

/// The values of a node's operand or result on the reference run (null when unknown).
using ValueOf = std::function<const Tensor *(NodeValue)>;

/// Per result element, the largest |d result / d operand| of \p n on the reference's values
/// (summed over its float operands; at least 1), for the operators whose slope the
/// magnitude scale M does not bound: a pole or an unbounded slope (Tan, Log, Sqrt, Rsqrt,
/// Reciprocal, Div, Pow, the inverse trigonometric and hyperbolic functions near the ends
/// of their domain) or a division by a standard deviation (LayerNormalization, one slope
/// per normalised row; BatchNormalization). Empty for every other operator, whose slope
/// the bound's premise covers (README, "Tolerances"). The oracle multiplies the error
/// bounds that reach an element by its slope.
std::vector<double> conditionSlopes(Node &n, const ValueOf &val);
/// The largest of conditionSlopes (1 when empty).
double conditionGain(Node &n, const ValueOf &val);

/// Drops an error that is expected (a rejected candidate, a skipped configuration).
inline void consumeError(Error e) { (void)e; }

/// Every configuration's name, in the order they run.
std::vector<std::string> configNames();

/// Runs the module given as text IR (one function) through the oracle.
GraphResult checkModule(const std::string &moduleText, const OracleOptions &opts);

/// The same in a child process, so that a crash is a finding ("crash", with the signal)
/// instead of the end of the run; \p timeoutSeconds bounds the child (0: none).
GraphResult checkModuleIsolated(const std::string &moduleText, const OracleOptions &opts,
                                unsigned timeoutSeconds = 120);

/// One line per finding ("config: kind: detail").
std::string describeFindings(const GraphResult &r);

} // namespace kiln::fuzz

#endif // KILN_TEST_FUZZ_ORACLE_H
