/// \file
/// What Jit.cpp and SharedKernels.cpp share: the embedded bitcode, lazy loading of the
/// parts of it a module needs, and the phase timer. Private to backends/CPU/jit.
#ifndef KILN_BACKENDS_CPU_JIT_JITINTERNAL_H
#define KILN_BACKENDS_CPU_JIT_JITINTERNAL_H

#include "kiln/Base/Error.h"

#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/Function.h"
#include "llvm/Target/TargetMachine.h"
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

/// A part of a module whose code is generated on its own (splitCodegen): some of its
/// definitions, at -O0 when \p fast.
struct CodegenPart {
  std::vector<llvm::Function *> functions;
  bool fast = false;
};

/// How code generation of module \p M is split (splitCodegen): the functions marked
/// optnone (a program's stages, which only call) in one part generated as at -O0, the
/// others over the cores left, by instruction count. Empty (one object, as before) for
/// small modules and for modules with data or with functions whose address is taken (only
/// direct calls may cross parts). \p beforeOptimising: \p M is not optimised yet, and each
/// part is to be optimised on its own; the local functions that only optimised functions
/// call (the kernel library's inline helpers) and local constants are then in no part,
/// every part gets a copy of them (as the inliner would), and the functions an optnone
/// stage calls must be noinline (else empty).
std::vector<CodegenPart> planCodegenParts(const llvm::Module &M, bool beforeOptimising);

/// Object code of module \p M in one object per part of \p plan, generated on up to one
/// thread per core, each part with a context and a target machine (\p jtmb) of its own.
/// The definitions of the parts are made external first (each part calls the others'
/// functions through the linker), and \p M keeps them so. \p optimise: each part but the
/// -O0 one goes through optimiseModule first (\p M was planned beforeOptimising); its
/// optimised IR is appended to \p ir when given. \p times: each part's phases are
/// timed (PhaseTimer).
Expected<std::vector<std::string>> splitCodegen(llvm::Module &M,
                                                const std::vector<CodegenPart> &plan,
                                                const llvm::orc::JITTargetMachineBuilder &jtmb,
                                                bool optimise, std::string *ir, bool times);

/// LLVM's O3 pipeline for \p tm, after dropping the functions nobody calls.
void optimiseModule(llvm::Module &M, llvm::TargetMachine &tm);

/// The interprocedural passes of O3 that need a whole program's module before it is split
/// into parts optimised one by one: constants passed to a loop function at every call
/// (its length) become constants in its body (IPSCCP), dead arguments are dropped.
void interproceduralPasses(llvm::Module &M, llvm::TargetMachine &tm);

/// Several objects as one file of the kernel cache (a header, the sizes, the objects),
/// and back: false when \p file is not such a file (a single object) or is cut short.
std::string packObjectParts(const std::vector<std::string> &objects);
bool unpackObjectParts(llvm::StringRef file, std::vector<llvm::StringRef> &objects);

/// Writes \p data to \p path through a temporary file renamed into place, so that
/// concurrent processes never read half a file; false on failure (nothing is left).
bool writeFileAtomically(const std::string &path, llvm::StringRef data);

/// Prints the wall time of a JIT phase to stderr when \p on (JitOptions::times).
class PhaseTimer {
public:
  PhaseTimer(std::string what, bool on);
  ~PhaseTimer() { stop(); }
  /// Prints now (once) instead of at the end of the scope.
  void stop();

private:
  std::string what_;
  bool on_;
  std::chrono::steady_clock::time_point start_;
};

} // namespace kiln::cpu

#endif // KILN_BACKENDS_CPU_JIT_JITINTERNAL_H
