/// \file
/// The oracle's bundle configurations (test/fuzz/README.md): a module compiled by
/// cpu::writeBundle into a fresh temporary folder, linked with test/bundle/run_bundle.c by
/// the host C compiler (`cc`), run as a separate program on the inputs' raw bytes, and its
/// outputs read back.
#ifndef KILN_TEST_FUZZ_BUNDLERUN_H
#define KILN_TEST_FUZZ_BUNDLERUN_H

#include "kiln/Backend/CompileOptions.h"
#include "kiln/Base/Tensor.h"

#include <map>
#include <string>

namespace kiln::fuzz {

struct BundleRunOptions {
  /// cpu::BundleOptions::target ("host", "x86-64-v3", ...).
  std::string target = "host";
  /// 0 or 1: serial entry point; N > 1: run through run_bundle.c's pthread parallel-for.
  unsigned threads = 0;
  /// The weights inside the object (run_bundle's "-") instead of the weights file.
  bool embedWeights = false;
  /// Backend options, as for the JIT.
  CompileOptions compile;
  /// Bound on the bundle program's run (it is killed after that: a "crash").
  unsigned timeoutSeconds = 60;
};

struct BundleRunResult {
  enum Kind {
    Ok,      ///< outputs holds every saved placeholder's value
    Skipped, ///< detail: the counted reason (no C compiler, an unsupported operator, ...)
    Error,   ///< detail: what failed (writeBundle, the link, a non-zero exit)
    Crash,   ///< detail: the signal or the timeout of the bundle program
  };
  Kind kind = Ok;
  std::string detail;
  std::map<std::string, Tensor> outputs;
};

/// Compiles \p moduleText's function as a bundle and runs it on \p inputs (by placeholder
/// name; a placeholder absent from it is zero, as for the JIT configurations). Every saved
/// placeholder is an output, every other placeholder an input. The temporary folder is
/// removed before returning.
BundleRunResult runBundle(const std::string &moduleText, const BundleRunOptions &opts,
                          const std::map<std::string, Tensor> &inputs);

/// The path of run_bundle.c found from the runfiles (empty when not found):
/// $KILN_RUN_BUNDLE_C, test/bundle/run_bundle.c under the working folder (bazel test,
/// bazel run), $TEST_SRCDIR or $RUNFILES_DIR, or the binary's own .runfiles folder.
std::string findRunBundleSource();

/// The host C compiler ("cc") on PATH, or empty.
std::string findCCompiler();

} // namespace kiln::fuzz

#endif // KILN_TEST_FUZZ_BUNDLERUN_H
