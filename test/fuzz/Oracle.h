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

#include <cstdint>
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
};

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
