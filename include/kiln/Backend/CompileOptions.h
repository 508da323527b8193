/// \file
/// CompileOptions: the options of one compilation, for ExecutionEngine::compile,
/// HostManager networks and Backend::compile.
#ifndef KILN_BACKEND_COMPILEOPTIONS_H
#define KILN_BACKEND_COMPILEOPTIONS_H

#include <string>

namespace kiln {

/// Options of one compilation; passed in, never global.
struct CompileOptions {
  /// Intra-op threads for backends that use them; 0 means all cores.
  unsigned threads = 0;
  /// Optimise the low-level IR for memory: a memory-aware node order
  /// (kiln/Memory/Scheduler.h) and the IR passes (kiln/Passes/IR/IRPasses.h: buffer
  /// sharing, copy elimination...).
  bool optimizeIR = false;
  /// Run from a static memory plan (kiln/Memory/MemoryPlanner.h): weights, inputs/outputs
  /// and activations at planned offsets of three preallocated regions, no allocation per
  /// activation. Backends without such a mode ignore it.
  bool staticMemoryPlan = false;
  /// For backends that generate code (CPU): write the optimised LLVM IR / the host
  /// assembly of each compiled function to this file ("-": stderr; empty: no dump). The
  /// first dump to a path in a process truncates it, later ones append. Others ignore it.
  std::string dumpLLVMIR;
  std::string dumpAsm;
};

} // namespace kiln

#endif // KILN_BACKEND_COMPILEOPTIONS_H
