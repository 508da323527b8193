/// \file
/// Passes on the low-level IR and their pass manager. The passes are a closed list
/// (src/Passes/IR/Passes.def): one `.cpp` per pass, named as on the command line
/// (`share-buffers` is ShareBuffers.cpp and test/ir/golden/share-buffers.txt). A pipeline
/// is data: a list of pass names. The pass manager is the one place that verifies after
/// each pass, dumps the function after the passes asked for, and times every pass.
///
/// The passes only move, merge and delete buffers and copies; they never change what an
/// instruction computes. Two buffers that a pass merges must never be live at once, and
/// WeightVars (the function's inputs, outputs and constants) are never used as scratch
/// space: everything a caller can observe stays as it was.
#ifndef KILN_PASSES_IR_IRPASSES_H
#define KILN_PASSES_IR_IRPASSES_H

#include "kiln/IR/IR.h"

#include <iosfwd>
#include <string>
#include <vector>

namespace kiln {

class Tracer; // kiln/Base/Trace.h

/// Names of every IR pass, in the order of Passes.def.
std::vector<std::string> getIRPassNames();
/// One-line description of IR pass \p name, or an empty string when there is none.
std::string getIRPassDescription(const std::string &name);

/// The default IR pipeline: peephole cleanups, views for Concat/Slice on the outermost
/// dimension, copy elimination, buffer sharing, dead-store elimination, dead allocs, then
/// tight lifetimes (sink allocs, hoist deallocs).
std::vector<std::string> getDefaultIRPipeline();

/// Parses a comma-separated list of IR pass names ("copy-elimination,share-buffers");
/// "default" stands for the default pipeline. Unknown names are InvalidArgument errors
/// that list the known passes.
Expected<std::vector<std::string>> parseIRPassList(const std::string &text);

/// Options of the IR pass manager.
struct IRPassManagerOptions {
  /// Verify the function after every pass; a pass that breaks it is an Internal error
  /// naming the pass.
  bool verifyEach = true;
  /// Print the function after each run of these passes ("*": after every pass).
  std::vector<std::string> dumpAfter;
  /// Where dumps go; null means std::cerr.
  std::ostream *dumpStream = nullptr;
  /// Records one event per pass run (category "pass") when set; not owned.
  Tracer *tracer = nullptr;
};

/// What the pass manager measured for one pass run.
struct IRPassRecord {
  std::string pass;
  bool changed = false;
  double seconds = 0; ///< Time inside the pass (verification and dumps excluded).
};

/// What the IR pass manager measured over one run of an IR pipeline.
struct IRPipelineReport {
  std::vector<IRPassRecord> runs; ///< In order.
  double totalSeconds = 0;        ///< Whole pipeline, verification included.
  /// A table of per-pass times and whether each changed the function.
  std::string timingTable() const;
};

/// Runs the passes named in \p pipeline on \p F, in order.
Expected<IRPipelineReport> runIRPipeline(IRFunction &F, const std::vector<std::string> &pipeline,
                                         const IRPassManagerOptions &opts = {});

/// Runs the default pipeline on \p F.
Error optimizeIR(IRFunction &F, const IRPassManagerOptions &opts = {});

} // namespace kiln

#endif // KILN_PASSES_IR_IRPASSES_H
