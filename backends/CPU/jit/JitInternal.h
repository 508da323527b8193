/// \file
/// What Jit.cpp and SharedKernels.cpp share: the embedded bitcode, lazy loading of the
/// parts of it a module needs, and the phase timer. Private to backends/CPU/jit.
#ifndef KILN_BACKENDS_CPU_JIT_JITINTERNAL_H
#define KILN_BACKENDS_CPU_JIT_JITINTERNAL_H

#include "llvm/IR/Function.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/Error.h"

#include <chrono>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace kiln::cpu {

extern const unsigned char kLibjitBitcode[];
extern const size_t kLibjitBitcodeSize;

std::string errString(llvm::Error e);

/// A shared helper of the kernel library: a `noinline` function defined in a header that
/// several kernel files include (linkonce_odr), such as the GEMM micro-kernels. Each is
/// compiled once and called by every shared kernel that uses it (see getSharedKernels),
/// rather than compiled again inside each of them.
inline bool isSharedHelper(const llvm::Function &f) {
  return f.hasLinkOnceODRLinkage() && f.hasFnAttribute(llvm::Attribute::NoInline);
}

/// Materialises the bodies of the functions reachable from \p roots in a lazily loaded
/// module (all of them when it is not lazy: then this only walks), not entering the
/// functions \p stop accepts; their names go to \p boundary when given. \p visit, when
/// given, sees each function reached once.
llvm::Error
materializeReachable(llvm::Module &m, const std::vector<std::string> &roots,
                     const std::function<bool(const llvm::Function &)> &stop,
                     std::set<std::string> *boundary,
                     const std::function<void(const llvm::Function &)> &visit = nullptr);

/// Makes a lazily loaded module complete: the bodies not materialised yet are dropped
/// (those functions become declarations), then the rest of the module is read.
llvm::Error dropUnmaterialized(llvm::Module &m);

/// Prints the wall time of a JIT phase to stderr when \p on (JitOptions::times).
class PhaseTimer {
public:
  PhaseTimer(std::string what, bool on);
  ~PhaseTimer();

private:
  std::string what_;
  bool on_;
  std::chrono::steady_clock::time_point start_;
};

} // namespace kiln::cpu

#endif // KILN_BACKENDS_CPU_JIT_JITINTERNAL_H
