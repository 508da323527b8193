/// \file
/// The options of one compilation, shared by every backend: the generic settings and a
/// map of backend parameters (name=value strings, as `--backend-opt spin-us=100` gives
/// them). Each backend declares the parameters it takes (Backend::getParameters) and
/// rejects the others when it compiles.
#ifndef KILN_BACKEND_COMPILEOPTIONS_H
#define KILN_BACKEND_COMPILEOPTIONS_H

#include "kiln/Base/Error.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kiln {

class Function; // kiln/Graph/Graph.h
class Tracer;   // kiln/Base/Trace.h

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
  /// Backend parameters by name (e.g. "spin-us" -> "100"), checked by the backend that
  /// compiles: an unknown name or a bad value fails the compile. A name qualified by a
  /// backend ("CPU:profile") goes to that backend only; the others ignore it. The runtime
  /// hands unqualified names only to the backends a network was given, never to the
  /// fallback backend it adds for the nodes those cannot run (NetworkOptions).
  std::map<std::string, std::string> backendOptions;
  /// Records the compile's phases (schedule, IRGen, IR passes, memory plan, codegen,
  /// JIT) when set; not owned (kiln/Base/Trace.h).
  Tracer *tracer = nullptr;
  /// Called after every graph pass that the compile driver's front half runs
  /// (prepareFunction, through ExecutionEngine::compile or HostManager::addNetwork with
  /// NetworkOptions::prepare), with the pass name and the function as it left it; for
  /// pictures of the graph between passes (kiln-run --dump-graph).
  std::function<void(const std::string &pass, const Function &f)> afterGraphPass;

  /// Takes one "name=value" item. The generic name "threads" sets `threads`; any other
  /// name is stored in backendOptions (a later item of the same name replaces it).
  /// InvalidArgument for an item without '=' or a name, or a bad thread count.
  Error setBackendOption(const std::string &item);

  /// True when every setting equals \p other's (threads, optimizeIR, staticMemoryPlan,
  /// backendOptions); the tracer and afterGraphPass, which observe a compile without
  /// changing it, are not compared. Backend::compile reuses a plan made ahead only under
  /// options with the same settings: a new setting must be compared here.
  bool sameSettings(const CompileOptions &other) const;

  /// The options as backend \p backend takes them: its qualified parameters with the
  /// qualifier removed (a qualified "threads" sets `threads`), the unqualified ones when
  /// \p unqualified, and no parameter qualified for another backend.
  CompileOptions forBackend(const std::string &backend, bool unqualified = true) const;
};

/// A parameter a backend takes in CompileOptions::backendOptions.
struct BackendParameter {
  std::string name; ///< As given in `--backend-opt NAME=VALUE`.
  std::string value; ///< what it takes, e.g. "0|1", "N", "PATH"
  std::string help; ///< A one-line description.
};

/// Success when every name in \p opts.backendOptions is one of \p params; otherwise
/// InvalidArgument naming backend \p backend, the unknown name and the known ones.
Error checkBackendOptions(const std::string &backend, const CompileOptions &opts,
                          const std::vector<BackendParameter> &params);

/// Parses the value of backend parameter \p name: 0|1|true|false|on|off, or a decimal
/// unsigned number. InvalidArgument naming the parameter and the value otherwise.
Expected<bool> parseBoolParameter(const std::string &name, const std::string &value);
Expected<unsigned> parseUnsignedParameter(const std::string &name, const std::string &value);

} // namespace kiln

#endif // KILN_BACKEND_COMPILEOPTIONS_H
