/// \file
/// The CPU backend's JIT: an ORC LLJIT per compiled module, configured for the host CPU.
/// This header keeps LLVM out (only forward declarations) so that widely included
/// backend headers stay cheap to compile.
#ifndef KILN_BACKENDS_CPU_JIT_JIT_H
#define KILN_BACKENDS_CPU_JIT_JIT_H

#include "kiln/Base/Error.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace llvm {
class LLVMContext;
class MemoryBuffer;
class Module;
namespace orc {
class JITTargetMachineBuilder;
} // namespace orc
} // namespace llvm

namespace kiln::cpu {

struct CodegenPart;

/// What the JIT targets and how hard it optimises.
struct JitOptions {
  /// Preferred vector width in bits for auto-vectorised loops (0: 512 on AVX-512 hosts,
  /// 256 elsewhere). Explicit vector code in the kernels is not affected.
  unsigned preferVectorWidth = 0;
  /// Keep the optimised LLVM IR and the host assembly of the module (see JitModule).
  bool keepIR = false;
  bool keepAsm = false;
  /// Pretend the host has no AVX-512 (for testing the AVX2 paths on an AVX-512 host).
  bool disableAvx512 = false;
  /// Print the wall time of each JIT phase to stderr.
  bool times = false;
  /// Compile for this LLVM CPU instead of the host ("": the host), with the CPU's own
  /// features: "x86-64-v4" (AVX-512 kernels), "x86-64-v3" (AVX2), "x86-64" (the AVX2
  /// kernels, which LLVM splits into SSE vectors). Ahead-of-time bundles use it
  /// (compileToObject); disableAvx512 does not apply.
  std::string targetCpu;
  /// Where getSharedKernels keeps compiled kernels across processes, created on demand;
  /// "" keeps them in the process only.
  std::string cacheDir;
  /// getSharedKernels takes the kernels compiled when Kiln was built (Prebuilt.h) for the
  /// host's level (x86-64-v4 with AVX-512, x86-64-v3 with AVX2) when the binary has them
  /// and preferVectorWidth is 0, instead of compiling them on first use; off: they are
  /// compiled for the host CPU (or found in cacheDir).
  bool prebuilt = true;
  /// JitModule::compile optimises and generates the code of a large module on several
  /// threads, in parts (one object each, linked together; see planCodegenParts); off: the
  /// whole module, one object, on the calling thread.
  /// getSharedKernels compiles its units one per thread already and turns it off.
  bool splitCodegen = true;
};

/// The host as the JIT sees it.
struct HostInfo {
  std::string cpu;       ///< LLVM's name, e.g. "icelake-client"
  std::string features;  ///< "+avx2,+fma,..."
  bool avx512 = false;   ///< AVX-512 F/BW/DQ/VL usable (after JitOptions::disableAvx512)
  bool avx2 = false;     ///< AVX2 + FMA usable
  bool avx512bf16 = false; ///< AVX512_BF16 (vdpbf16ps) usable, with avx512
};

/// Detects the host CPU (honouring \p opts.disableAvx512).
HostInfo detectHost(const JitOptions &opts);

/// True when this machine has AVX512_BF16 (with AVX-512 F/BW/DQ/VL): what detectHost
/// reports for the JIT when AVX-512 is not disabled.
bool hostHasAvx512Bf16();

/// The embedded kernel bitcode (libjit) in \p ctx, loaded lazily: function bodies are read
/// when JitModule::compile needs them (those its entry points reach).
Expected<std::unique_ptr<llvm::Module>> loadLibjitModule(llvm::LLVMContext &ctx);

/// The kernels named \p names, each JIT-compiled from the embedded bitcode once per
/// process and host configuration (a cache: later calls return the same addresses) and kept
/// on disk as object code; kernels missing from both caches compile in parallel, one
/// thread each. Compiled functions call these instead of compiling their own copies, which
/// keeps compile times short for the large GEMM micro-kernels. The library's shared
/// helpers (the GEMM micro-kernels, which several kernels call) are compiled the same way,
/// once, before the kernels that call them.
Expected<std::map<std::string, void *>> getSharedKernels(const std::vector<std::string> &names,
                                                         const JitOptions &opts);

/// The object file that holds the code of reuse key \p key in cache directory \p dir
/// (created on demand), or "" when \p dir is "", "off", "0" or cannot be created. The
/// key is combined with a hash of the embedded kernel library, so objects written by
/// another build are never found.
std::string cachedObjectPath(const std::string &dir, const std::string &key);

/// The kernels compiled once per process rather than into each program (getSharedKernels):
/// the GEMM-based convolutions, FC and batched MatMul, and the loop nests that gain little
/// from constant shapes (depthwise convolution, pooling, strided copies, Gather, SoftMax,
/// BatchNorm, LayerNorm, float reductions, fills); \p avx512 picks the AVX-512 or the AVX2
/// GEMM kernels.
std::vector<std::string> sharedKernelNames(bool avx512);

/// Keeps the kernel cache \p dir under \p maxBytes of object files: deletes the ones used
/// least recently (loads refresh a file's time, see touchCachedObject) until it fits.
void trimObjectCache(const std::string &dir, uint64_t maxBytes);
/// Marks \p path as just used (its modification time), for trimObjectCache.
void touchCachedObject(const std::string &path);
/// The size trimObjectCache keeps a kernel cache under when a program writes to it.
constexpr uint64_t kObjectCacheMaxBytes = uint64_t(512) << 20;

/// True for the CPU names JitOptions::targetCpu accepts.
bool isKnownTargetCpu(const std::string &cpu);

/// Optimises \p module for the target of \p opts exactly as JitModule::compile does
/// (every function except \p entryPoints internalised, the functions in \p outOfLine kept
/// from being inlined) and returns it as a relocatable ELF object (position-independent
/// code), for ahead-of-time bundles.
Expected<std::string> compileToObject(std::unique_ptr<llvm::Module> module,
                                      const std::vector<std::string> &entryPoints,
                                      const JitOptions &opts,
                                      const std::vector<std::string> &outOfLine);

/// A module compiled to native code. Owns the LLJIT instance; the code lives as long as
/// this object.
class JitModule {
public:
  /// Optimises \p module for the host (every function except \p entryPoints is
  /// internalised first) and compiles it.
  /// Functions named in \p externals are not compiled again: their bodies are dropped
  /// and calls go to the given addresses (see getSharedKernels).
  /// With \p objectCachePath, the object code is also written to that file (see
  /// loadObject); for deterministic modules only (getSharedKernels). The module may be
  /// loaded lazily (loadLibjitModule): only what the entry points reach is read.
  static Expected<std::unique_ptr<JitModule>>
  compile(std::unique_ptr<llvm::LLVMContext> ctx, std::unique_ptr<llvm::Module> module,
          const std::vector<std::string> &entryPoints, const JitOptions &opts,
          const std::map<std::string, void *> &externals = {},
          const std::string &objectCachePath = "");
  /// Loads object code written by compile() with an objectCachePath (and the same
  /// \p externals); null when the file is missing, unreadable or lacks one of
  /// \p entryPoints.
  static std::unique_ptr<JitModule> loadObject(const std::string &path,
                                               const std::vector<std::string> &entryPoints,
                                               const JitOptions &opts,
                                               const std::map<std::string, void *> &externals = {});
  /// The same for object code in memory (\p size bytes at \p data, which must outlive
  /// the module; \p name labels it in LLVM's messages), e.g. prebuilt kernels.
  static std::unique_ptr<JitModule> loadObject(const void *data, size_t size,
                                               const std::string &name,
                                               const std::vector<std::string> &entryPoints,
                                               const JitOptions &opts,
                                               const std::map<std::string, void *> &externals = {});
  /// Object code in memory, static or outliving the module that loads it.
  struct ObjectBytes {
    const void *data;
    size_t size;
    std::string name; ///< labels it in LLVM's messages
  };
  /// Several objects in one JIT: their symbols resolve among themselves first, then
  /// against \p externals and the process; every entry point is looked up (linked) before
  /// it returns. Null when an object does not load or an entry point does not link.
  static std::unique_ptr<JitModule> loadObjects(const std::vector<ObjectBytes> &objects,
                                                const std::vector<std::string> &entryPoints,
                                                const JitOptions &opts,
                                                const std::map<std::string, void *> &externals = {});
  ~JitModule();
  JitModule(const JitModule &) = delete;
  JitModule &operator=(const JitModule &) = delete;

  /// The address of entry point \p name.
  Expected<void *> lookup(const std::string &name);
  /// The optimised IR and assembly text, when asked for in JitOptions.
  const std::string &getIR() const { return ir_; }
  const std::string &getAsm() const { return asm_; }
  const HostInfo &getHost() const { return host_; }
  /// The object files the code was linked from: one, or the parts of a split compile
  /// (JitOptions::splitCodegen), also when loaded from the cache.
  size_t objectCount() const { return objects_; }

private:
  JitModule();
  static std::unique_ptr<JitModule>
  loadObjectBuffers(std::vector<std::unique_ptr<llvm::MemoryBuffer>> bufs,
                    const std::vector<std::string> &entryPoints, const JitOptions &opts,
                    const std::map<std::string, void *> &externals);
  /// The rest of compile() for a module whose code is generated in \p parts (one object
  /// each, see planCodegenParts), linked into one JIT; \p jm holds the kept IR and assembly.
  /// \p optimise: the parts are optimised one by one (the module was not).
  static Expected<std::unique_ptr<JitModule>>
  compileInParts(std::unique_ptr<JitModule> jm, llvm::Module &M,
                 const std::vector<CodegenPart> &parts,
                 const llvm::orc::JITTargetMachineBuilder &jtmb,
                 const std::vector<std::string> &entryPoints, const JitOptions &opts,
                 const std::map<std::string, void *> &externals,
                 const std::string &objectCachePath, bool optimise);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string ir_, asm_;
  HostInfo host_;
  size_t objects_ = 1;
  std::shared_ptr<void> cacheWriter_; ///< outlives the compile that writes the object
};

} // namespace kiln::cpu

#endif // KILN_BACKENDS_CPU_JIT_JIT_H
