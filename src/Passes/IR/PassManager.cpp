// The IR pass manager: the list of passes (Passes.def), the default pipeline, and the one
// place that verifies after each pass, dumps and times.

#include "kiln/Passes/IR/IRPasses.h"
#include "kiln/Base/Trace.h"

#include "CopyElimination.h"
#include "DeadStoreElimination.h"
#include "DeleteDeadAllocs.h"
#include "HoistDeallocs.h"
#include "InsertExtractToViews.h"
#include "Peephole.h"
#include "ShareBuffers.h"
#include "SinkAllocs.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>

namespace kiln {

namespace {

struct IRPassInfo {
  const char *name;
  bool (*fn)(IRFunction &);
  const char *doc;
};

const std::vector<IRPassInfo> &passes() {
  static const std::vector<IRPassInfo> kPasses = {
#define KILN_IR_PASS(NAME, FN, DOC) {NAME, FN, DOC},
#include "Passes.def"
  };
  return kPasses;
}

const IRPassInfo *findPass(const std::string &name) {
  for (const IRPassInfo &p : passes())
    if (name == p.name)
      return &p;
  return nullptr;
}

std::string knownPasses() {
  std::string s;
  for (const IRPassInfo &p : passes())
    s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

} // namespace

std::vector<std::string> getIRPassNames() {
  std::vector<std::string> r;
  for (const IRPassInfo &p : passes())
    r.push_back(p.name);
  return r;
}

std::string getIRPassDescription(const std::string &name) {
  const IRPassInfo *p = findPass(name);
  return p ? p->doc : "";
}

std::vector<std::string> getDefaultIRPipeline() {
  return {"peephole",         "insert-extract-to-views", "copy-elimination",
          "share-buffers",    "dead-store-elimination",  "delete-dead-allocs",
          "copy-elimination", "sink-allocs",             "hoist-deallocs",
          "peephole"};
}

Expected<std::vector<std::string>> parseIRPassList(const std::string &text) {
  std::vector<std::string> r;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item == "default") {
      for (const std::string &p : getDefaultIRPipeline())
        r.push_back(p);
      continue;
    }
    if (!findPass(item))
      return makeError(ErrorCode::InvalidArgument, "unknown IR pass '", item,
                       "'; known passes: ", knownPasses(), " (or 'default')");
    r.push_back(item);
  }
  return r;
}

std::string IRPipelineReport::timingTable() const {
  std::ostringstream os;
  char line[160];
  std::snprintf(line, sizeof(line), "%-26s %10s  %s\n", "IR pass", "ms", "changed");
  os << line;
  for (const IRPassRecord &r : runs) {
    std::snprintf(line, sizeof(line), "%-26s %10.3f  %s\n", r.pass.c_str(), r.seconds * 1e3,
                  r.changed ? "yes" : "no");
    os << line;
  }
  std::snprintf(line, sizeof(line), "%-26s %10.3f\n", "total (with verification)",
                totalSeconds * 1e3);
  os << line;
  return os.str();
}

Expected<IRPipelineReport> runIRPipeline(IRFunction &F, const std::vector<std::string> &pipeline,
                                         const IRPassManagerOptions &opts) {
  using Clock = std::chrono::steady_clock;
  IRPipelineReport report;
  auto t0 = Clock::now();
  std::ostream &dump = opts.dumpStream ? *opts.dumpStream : std::cerr;
  for (const std::string &name : pipeline) {
    const IRPassInfo *p = findPass(name);
    if (!p)
      return makeError(ErrorCode::InvalidArgument, "unknown IR pass '", name,
                       "'; known passes: ", knownPasses());
    auto s = Clock::now();
    int64_t traceStart = opts.tracer ? opts.tracer->nowNs() : 0;
    bool changed = p->fn(F);
    if (opts.tracer)
      opts.tracer->complete(Tracer::kHostPid, "pass", name, traceStart, opts.tracer->nowNs(),
                            {{"function", F.getName()}, {"changed", changed ? "1" : "0", true}});
    double secs = std::chrono::duration<double>(Clock::now() - s).count();
    report.runs.push_back({name, changed, secs});
    if (opts.verifyEach)
      if (Error e = F.verify())
        return makeError(ErrorCode::Internal, "IR pass '", name, "' broke function '",
                         F.getName(), "': ", e.message());
    const auto &da = opts.dumpAfter;
    if (std::find(da.begin(), da.end(), "*") != da.end() ||
        std::find(da.begin(), da.end(), name) != da.end())
      dump << "// IR after " << name << (changed ? "" : " (unchanged)") << "\n"
           << F.toString();
  }
  report.totalSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return report;
}

Error optimizeIR(IRFunction &F, const IRPassManagerOptions &opts) {
  KILN_ASSIGN_OR_RETURN(IRPipelineReport r, runIRPipeline(F, getDefaultIRPipeline(), opts));
  (void)r;
  return Error::success();
}

} // namespace kiln
