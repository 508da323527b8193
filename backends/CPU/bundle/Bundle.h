/// \file
/// Ahead-of-time bundles: a function compiled by the CPU backend once, written to disk as
/// an object file, a plain C header and the packed weights, for programs that link it with
/// no LLVM and no Kiln at run time (docs/Bundles.md is the header's contract).
///
/// The code is the JIT's: the compile driver's plan, the same emitters and kernels
/// (emitProgram), optimised by the same pipeline (compileToObject), for a named target
/// instead of the host. Kernels the JIT shares between programs (getSharedKernels) are
/// compiled into the object, out of line as in the JIT. An entry function `NAME` replaces
/// CPUFunction::execute: it points the stages at the caller's three regions and runs them
/// in order, parallel ones through a caller-supplied parallel-for when built for threads.
#ifndef KILN_BACKENDS_CPU_BUNDLE_BUNDLE_H
#define KILN_BACKENDS_CPU_BUNDLE_BUNDLE_H

#include "kiln/Backend/CompileOptions.h"
#include "kiln/Base/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {
class Function;
class Placeholder;
} // namespace kiln

namespace kiln::cpu {

struct BundleOptions {
  /// The entry point's name and the files' stem: a C identifier.
  std::string name;
  /// The folder the files go to (created when missing).
  std::string outDir;
  /// "host" (the CPU and features the JIT would use here), "x86-64-v4" (AVX-512),
  /// "x86-64-v3" (AVX2) or "x86-64" (SSE2; the AVX2 kernels split by LLVM).
  std::string target = "host";
  /// 0 or 1: a serial entry point. N > 1: compiled for N threads; the entry point takes
  /// a parallel-for callback that runs each parallel stage's N shares.
  unsigned threads = 0;
  /// Put the weights into the object (`NAME_weights`) instead of NAME.weights.
  bool embedWeights = false;
  /// Where the model came from, for the header's first line.
  std::string source;
  /// Backend parameters (`--backend-opt`), as for the JIT.
  CompileOptions compile;
};

/// A graph input or output by the name the header gives it.
struct BundleTensor {
  std::string name;
  const Placeholder *placeholder = nullptr;
};

/// What writeBundle wrote.
struct BundleResult {
  std::vector<std::string> files; ///< paths, in the order object, header, weights
  uint64_t constantBytes = 0, mutableBytes = 0, activationBytes = 0;
  std::string target; ///< the LLVM CPU name compiled for
  bool avx512 = false;
};

/// True when \p name can name a bundle (a C identifier of at most 64 characters).
bool isValidBundleName(const std::string &name);

/// Compiles \p f (not yet prepared for a backend) with the CPU backend and writes
/// NAME.o, NAME.h and NAME.weights (not with embedWeights) into opts.outDir. \p inputs and
/// \p outputs list the function's placeholders in the order the header lists them;
/// placeholders the program uses that neither lists are an error. Files appear only when
/// all were written: on any error nothing new is left in the folder.
Expected<BundleResult> writeBundle(Function *f, const std::vector<BundleTensor> &inputs,
                                   const std::vector<BundleTensor> &outputs,
                                   const BundleOptions &opts);

} // namespace kiln::cpu

#endif // KILN_BACKENDS_CPU_BUNDLE_BUNDLE_H
