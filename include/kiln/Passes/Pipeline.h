/// \file
/// Graph pass pipelines. A pipeline is data: a list of steps, each naming one or more
/// passes (by their names in src/Passes/Graph/Passes.def, e.g. "cse"), the options they
/// run with, and whether the step runs once or until none of its passes changes the
/// function. The pass manager (runPipeline) is the one place that verifies after each
/// pass, dumps the function after the passes asked for, and times every pass.
///
/// Text form of a pass list (kiln-opt `--pass=`, golden tests):
/// \code
///   list := item (',' item)*
///   item := name ['*'] | '(' name (',' name)* ')' ['*']     // '*': until fixed point
/// \endcode
/// e.g. `cse,(sink-transposes,merge-reshapes,dce)*`.
#ifndef KILN_PASSES_PIPELINE_H
#define KILN_PASSES_PIPELINE_H

#include "kiln/Base/Error.h"
#include "kiln/Passes/PassContext.h"

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace kiln {

class Function;
class Tracer; // kiln/Base/Trace.h

/// Whether a step runs once or is repeated until its passes report no change.
enum class Convergence { Once, FixedPoint };

/// One step of a pipeline: its passes run in order; a FixedPoint step repeats them (at
/// most PassManagerOptions::maxIterations times) until none of them changes anything.
struct PipelineStep {
  std::vector<std::string> passes;
  Convergence convergence = Convergence::Once;
  PassOptions options;

  static PipelineStep once(std::string pass, PassOptions o = {}) {
    return {{std::move(pass)}, Convergence::Once, o};
  }
  static PipelineStep fixedPoint(std::vector<std::string> passes, PassOptions o = {}) {
    return {std::move(passes), Convergence::FixedPoint, o};
  }
};

/// A named list of steps.
struct Pipeline {
  std::string name;
  std::vector<PipelineStep> steps;
  /// The pass-list text form of the steps (options are not shown).
  std::string toString() const;
};

/// Names of every graph pass, in the order of Passes.def.
std::vector<std::string> getGraphPassNames();
/// One-line description of pass \p name, or an empty string when there is none.
std::string getGraphPassDescription(const std::string &name);

/// Parses a pass list (see the file comment). Unknown pass names and malformed lists are
/// InvalidArgument errors naming the offending text and listing the known passes.
Expected<Pipeline> parsePassList(const std::string &text);

/// The default pipeline: simplify and fold (BatchNorm folding, constant folding, CSE,
/// transpose sinking...), lower what the backend asks for, simplify again.
Pipeline getDefaultPipeline();
/// The default pipeline plus fuse-activations before the final dce. Fusing is a backend's
/// choice, not the default: the Interpreter runs fused nodes (it is the oracle for them)
/// but must not receive them unasked. A backend that wants them registers this pipeline
/// (registerBackendPipeline) or its own.
Pipeline getFusingPipeline();
/// A pipeline by name: "default", "fusing", or "none" (no steps).
Expected<Pipeline> getNamedPipeline(const std::string &name);

/// A backend may supply its own pipeline: register a factory under the backend's name
/// (at static-initialisation time, next to KILN_REGISTER_BACKEND).
using PipelineFactory = std::function<Pipeline()>;
void registerBackendPipeline(const std::string &backendName, PipelineFactory factory);
/// The pipeline registered for \p backend, else the default pipeline.
Pipeline getPipelineForBackend(const Backend *backend);

/// Options of the pass manager.
struct PassManagerOptions {
  /// Verify the function after every pass run; a pass that breaks it is an Internal
  /// error naming the pass.
  bool verifyEach = true;
  /// Print the function after each run of these passes ("*": after every pass).
  std::vector<std::string> dumpAfter;
  /// Where dumps go; null means std::cerr.
  std::ostream *dumpStream = nullptr;
  /// Upper bound on the rounds of a FixedPoint step.
  unsigned maxIterations = 20;
  /// Records one event per pass run (category "pass") when set; not owned.
  Tracer *tracer = nullptr;
  /// Called after every pass run with its name and the function as it left it.
  std::function<void(const std::string &pass, const Function &f)> afterPass;
};

/// What the pass manager measured for one pass name over a pipeline run.
struct PassRecord {
  std::string pass;
  unsigned runs = 0;
  unsigned changed = 0; ///< Runs that changed the function.
  double seconds = 0;   ///< Time inside the pass (verification and dumps excluded).
};

/// What the pass manager measured over one run of a graph pipeline.
struct PipelineReport {
  std::vector<PassRecord> passes; ///< In order of first run.
  double totalSeconds = 0;        ///< Whole pipeline, verification included.
  /// A table of per-pass times (the `--time-passes` output).
  std::string timingTable() const;
};

/// Runs \p pipeline on \p f for \p backend (which may be null: see PassContext).
Expected<PipelineReport> runPipeline(Function *f, const Pipeline &pipeline, const Backend *backend,
                                     const PassManagerOptions &opts = PassManagerOptions());

/// Optimises and lowers \p f with the pipeline of \p backend (what compiling does).
Error optimizeFunction(Function *f, const Backend &backend,
                       const PassManagerOptions &opts = PassManagerOptions());

} // namespace kiln

#endif // KILN_PASSES_PIPELINE_H
