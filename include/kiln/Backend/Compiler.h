/// \file
/// The compile driver: the one path from a Function to a backend's compiled code. Every
/// caller (ExecutionEngine, HostManager's Provisioner, MultiDevice, the tools) goes
/// through it, in two phases because the runtime partitions the optimised graph and then
/// compiles each partition:
///
///  1. prepareFunction (src/Compiler): verify the function once; run the backend's graph
///     pipeline (getPipelineForBackend: lowering where the backend's shouldLower says so,
///     fusion where it supports the fused node, ...); check that the backend supports
///     every node (all unsupported nodes in one error).
///  2. Backend::compile (src/Backend/Compile.cpp) on a prepared function (or a partition
///     of one): the schedule, IRGen, the backend's IR passes, the static memory plan
///     (always checked by verifyMemoryPlan) as its BackendCompileSpec asks, then the
///     backend's generateCode() with the planned IR.
///
/// compileFunction does both.
#ifndef KILN_BACKEND_COMPILER_H
#define KILN_BACKEND_COMPILER_H

#include "kiln/Backend/Backend.h"

#include <functional>
#include <memory>

namespace kiln {

/// Options of prepareFunction.
struct PrepareOptions {
  /// Check that the backend supports every node. Off where a partitioner places the nodes
  /// a backend cannot run on a fallback backend (it checks each partition's nodes).
  bool checkSupport = true;
  /// Records the phases (verify, each graph pass, support check) when set; not owned.
  Tracer *tracer = nullptr;
  /// Called after each graph pass (CompileOptions::afterGraphPass).
  std::function<void(const std::string &pass, const Function &f)> afterPass;
};

/// Phase 1: verifies \p f, runs \p backend's graph pipeline on it (in place), and checks
/// that \p backend supports every node that is left. Errors name the function.
Error prepareFunction(Function *f, const Backend &backend, const PrepareOptions &opts = {});

/// Both phases: prepareFunction, then backend.compile.
Expected<std::unique_ptr<CompiledFunction>> compileFunction(Function *f, const Backend &backend,
                                                            const CompileOptions &opts = {});

} // namespace kiln

#endif // KILN_BACKEND_COMPILER_H
