/// \file
/// Shared kernels compiled when Kiln is built. The build runs `prebuild_kernels`, which
/// compiles every shared kernel (sharedKernelNames) and the shared helpers they call for
/// two levels, x86-64-v4 (the AVX-512 kernels) and x86-64-v3 (the AVX2 kernels), and
/// writes their object code into a generated source file that registers it here when the
/// program starts (the `//backends/CPU/jit:prebuilt` library). getSharedKernels then loads
/// those objects instead of running LLVM on first use, so a process's first compile costs
/// what later ones do. A binary without the library compiles the kernels as before.
#ifndef KILN_BACKENDS_CPU_JIT_PREBUILT_H
#define KILN_BACKENDS_CPU_JIT_PREBUILT_H

#include "kiln/Base/Error.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::cpu {

/// The object code of one unit (a kernel or a shared helper) for one level.
struct PrebuiltUnit {
  const char *level; ///< "x86-64-v4" or "x86-64-v3"
  const char *unit;  ///< the kernel's or helper's name
  const char *data;  ///< ELF object code, static storage
  size_t size;
  /// The shared helpers the unit calls, comma-separated ("" for none), and its own IR
  /// instruction count: what getSharedKernels would otherwise read from the kernel
  /// library's bitcode, which a process would otherwise have to parse (backends/CPU/README.md,
  /// "Compile time").
  const char *helpers;
  size_t instrs;
};

/// Registers \p n units of static storage, compiled from the kernel library whose bitcode
/// hashes to \p bitcodeHash (libjitBitcodeHash of the build that made them); units of
/// another bitcode are never returned by findPrebuiltUnit. Returns true (for use in a static
/// initialiser).
bool registerPrebuiltUnits(const PrebuiltUnit *units, size_t n, uint64_t bitcodeHash);

/// The registered unit \p unit for \p level, or null.
const PrebuiltUnit *findPrebuiltUnit(const std::string &level, const std::string &unit);

/// The shared helpers \p unit calls, directly or through its own internal functions, as
/// the kernel bitcode says (what a prebuilt unit records, read again: for tests).
Expected<std::vector<std::string>> sharedUnitHelpers(const std::string &unit);

/// A hash of the embedded kernel bitcode.
uint64_t libjitBitcodeHash();

/// One unit as the build tool writes it.
struct CompiledUnit {
  std::string name;
  std::string object;               ///< ELF object code
  std::vector<std::string> helpers; ///< the shared helpers it calls
  size_t instrs = 0;                ///< its own IR instructions
};

/// For the build tool: compiles \p kernels and every shared helper they call for \p level
/// ("x86-64-v4" or "x86-64-v3"), writing the objects through \p scratchDir, and returns
/// each unit, helpers included.
Expected<std::vector<CompiledUnit>>
compileSharedUnits(const std::string &level, const std::vector<std::string> &kernels,
                   const std::string &scratchDir);

} // namespace kiln::cpu

#endif // KILN_BACKENDS_CPU_JIT_PREBUILT_H
