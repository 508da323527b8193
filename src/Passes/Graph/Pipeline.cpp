// Pipelines as data, and the pass manager: the one place that verifies after each pass,
// dumps the function after the passes asked for, and times every pass. The passes
// themselves come from Passes.def.

#include "kiln/Passes/Pipeline.h"
#include "kiln/Base/Trace.h"

#include "kiln/Backend/Backend.h"
#include "kiln/Graph/Graph.h"

#include <cctype>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>

namespace kiln {

// Declarations of the pass functions (each also has its own one-function header).
#define KILN_GRAPH_PASS(NAME, FN, DOC) bool FN(Function *f, const PassContext &ctx);
#include "Passes.def"
#undef KILN_GRAPH_PASS

namespace {

using PassFn = bool (*)(Function *, const PassContext &);

struct PassInfo {
  const char *name;
  PassFn fn;
  const char *doc;
};

const PassInfo kPasses[] = {
#define KILN_GRAPH_PASS(NAME, FN, DOC) {NAME, &FN, DOC},
#include "Passes.def"
#undef KILN_GRAPH_PASS
};

const PassInfo *findPass(const std::string &name) {
  for (const PassInfo &p : kPasses)
    if (name == p.name)
      return &p;
  return nullptr;
}

std::string knownPasses() {
  std::string s;
  for (const PassInfo &p : kPasses)
    s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

struct PipelineRegistry {
  std::mutex mu;
  std::map<std::string, PipelineFactory> factories;
};
PipelineRegistry &pipelineRegistry() {
  static PipelineRegistry r;
  return r;
}

std::string trim(const std::string &s) {
  size_t b = s.find_first_not_of(" \t\n\r");
  if (b == std::string::npos)
    return "";
  size_t e = s.find_last_not_of(" \t\n\r");
  return s.substr(b, e - b + 1);
}

Error badList(const std::string &text, const std::string &why) {
  return makeError(ErrorCode::InvalidArgument, "invalid pass list '", text, "': ", why,
                   " (known passes: ", knownPasses(), ")");
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

std::vector<std::string> getGraphPassNames() {
  std::vector<std::string> names;
  for (const PassInfo &p : kPasses)
    names.push_back(p.name);
  return names;
}

std::string getGraphPassDescription(const std::string &name) {
  const PassInfo *p = findPass(name);
  return p ? p->doc : "";
}

std::string Pipeline::toString() const {
  std::string s;
  for (const PipelineStep &step : steps) {
    if (!s.empty())
      s += ",";
    bool group = step.passes.size() != 1;
    if (group)
      s += "(";
    for (size_t i = 0; i < step.passes.size(); i++)
      s += (i ? "," : "") + step.passes[i];
    if (group)
      s += ")";
    if (step.convergence == Convergence::FixedPoint)
      s += "*";
  }
  return s;
}

Expected<Pipeline> parsePassList(const std::string &text) {
  Pipeline p;
  p.name = "custom";
  size_t i = 0, n = text.size();
  auto skipSpace = [&] {
    while (i < n && std::isspace(static_cast<unsigned char>(text[i])))
      i++;
  };
  auto readName = [&]() -> std::string {
    size_t b = i;
    while (i < n && text[i] != ',' && text[i] != '(' && text[i] != ')' && text[i] != '*')
      i++;
    return trim(text.substr(b, i - b));
  };
  auto checkName = [&](const std::string &name) -> Error {
    if (name.empty())
      return badList(text, "empty pass name at offset " + std::to_string(i));
    if (!findPass(name))
      return badList(text, "unknown pass '" + name + "'");
    return Error::success();
  };
  skipSpace();
  if (i == n)
    return badList(text, "no passes");
  while (true) {
    skipSpace();
    PipelineStep step;
    if (i < n && text[i] == '(') {
      i++;
      while (true) {
        std::string name = readName();
        KILN_RETURN_IF_ERR(checkName(name));
        step.passes.push_back(name);
        if (i < n && text[i] == ',') {
          i++;
          continue;
        }
        if (i < n && text[i] == ')') {
          i++;
          break;
        }
        return badList(text, "expected ',' or ')' at offset " + std::to_string(i));
      }
    } else {
      std::string name = readName();
      KILN_RETURN_IF_ERR(checkName(name));
      step.passes.push_back(name);
    }
    skipSpace();
    if (i < n && text[i] == '*') {
      step.convergence = Convergence::FixedPoint;
      i++;
      skipSpace();
    }
    p.steps.push_back(std::move(step));
    if (i == n)
      break;
    if (text[i] != ',')
      return badList(text,
                     std::string("unexpected '") + text[i] + "' at offset " + std::to_string(i));
    i++;
  }
  return p;
}

Pipeline getDefaultPipeline() {
  using S = PipelineStep;
  // Cheap local rewrites, repeated together because each exposes work for the others.
  std::vector<std::string> simplify = {"drop-identities", "simplify-arithmetic", "simplify-splats",
                                       "remove-no-ops",   "merge-reshapes",      "flatten-concats",
                                       "sink-transposes", "merge-pads",          "prune-conv-taps",
                                       "dce"};
  Pipeline p;
  p.name = "default";
  // fold-qdq first: constant-fold would fold the dequantized weights it recognises.
  p.steps = {
      S::once("fold-qdq"),
      S::fixedPoint(simplify),  S::once("fold-batch-norm"),
      S::once("fold-layer-norm"), S::once("fuse-bias-add"),
      S::once("cse"),
      S::once("constant-fold"), S::once("lower"),
      S::fixedPoint(simplify),  S::once("cse"),
      S::once("constant-fold"), S::once("fuse-bias-add"),
      S::once("dce"),
  };
  return p;
}

Pipeline getFusingPipeline() {
  Pipeline p = getDefaultPipeline();
  p.name = "fusing";
  p.steps.insert(p.steps.end() - 1, PipelineStep::once("fuse-activations"));
  return p;
}

Expected<Pipeline> getNamedPipeline(const std::string &name) {
  if (name == "default")
    return getDefaultPipeline();
  if (name == "fusing")
    return getFusingPipeline();
  if (name == "none") {
    Pipeline p;
    p.name = "none";
    return p;
  }
  return makeError(ErrorCode::InvalidArgument, "unknown pipeline '", name,
                   "' (known: default, fusing, none)");
}

void registerBackendPipeline(const std::string &backendName, PipelineFactory factory) {
  PipelineRegistry &r = pipelineRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.factories[backendName] = std::move(factory);
}

Pipeline getPipelineForBackend(const Backend *backend) {
  if (backend) {
    PipelineRegistry &r = pipelineRegistry();
    PipelineFactory factory;
    {
      std::lock_guard<std::mutex> lock(r.mu);
      auto it = r.factories.find(backend->getName());
      if (it != r.factories.end())
        factory = it->second;
    }
    if (factory)
      return factory();
  }
  return getDefaultPipeline();
}

std::string PipelineReport::timingTable() const {
  std::ostringstream os;
  os << "===-------------------------------------------------------------===\n"
     << "  Graph pass timing (total " << std::fixed << std::setprecision(3) << totalSeconds * 1e3
     << " ms)\n"
     << "===-------------------------------------------------------------===\n"
     << "   time (ms)    %   runs changed  pass\n";
  double sum = 0;
  for (const PassRecord &r : passes)
    sum += r.seconds;
  for (const PassRecord &r : passes) {
    double pct = totalSeconds > 0 ? 100.0 * r.seconds / totalSeconds : 0;
    os << std::setw(12) << std::setprecision(3) << r.seconds * 1e3 << std::setw(6)
       << std::setprecision(1) << pct << std::setw(6) << r.runs << std::setw(8) << r.changed << "  "
       << r.pass << "\n";
  }
  os << std::setw(12) << std::setprecision(3) << (totalSeconds - sum) * 1e3
     << "          (verification, dumps)\n";
  return os.str();
}

Expected<PipelineReport> runPipeline(Function *f, const Pipeline &pipeline, const Backend *backend,
                                     const PassManagerOptions &opts) {
  auto t0 = std::chrono::steady_clock::now();
  PipelineReport report;
  std::map<std::string, size_t> recordOf;
  std::ostream &dump = opts.dumpStream ? *opts.dumpStream : std::cerr;
  auto wantsDump = [&](const std::string &name) {
    for (const std::string &d : opts.dumpAfter)
      if (d == name || d == "*")
        return true;
    return false;
  };
  for (const std::string &d : opts.dumpAfter)
    if (d != "*" && !findPass(d))
      return makeError(ErrorCode::InvalidArgument, "--dump-after: unknown pass '", d,
                       "' (known passes: ", knownPasses(), ")");

  if (opts.verifyEach)
    if (Error e = f->verify())
      return std::move(e).addContext("before the pipeline '" + pipeline.name + "'");

  for (const PipelineStep &step : pipeline.steps) {
    PassContext ctx;
    ctx.backend = backend;
    ctx.options = step.options;
    unsigned rounds = step.convergence == Convergence::FixedPoint ? opts.maxIterations : 1;
    for (unsigned round = 0; round < rounds; round++) {
      bool anyChange = false;
      for (const std::string &name : step.passes) {
        const PassInfo *info = findPass(name);
        if (!info)
          return makeError(ErrorCode::InvalidArgument, "pipeline '", pipeline.name,
                           "': unknown pass '", name, "' (known passes: ", knownPasses(), ")");
        auto it = recordOf.find(name);
        if (it == recordOf.end()) {
          it = recordOf.emplace(name, report.passes.size()).first;
          report.passes.push_back(PassRecord{name});
        }
        PassRecord &rec = report.passes[it->second];
        auto tp = std::chrono::steady_clock::now();
        int64_t traceStart = opts.tracer ? opts.tracer->nowNs() : 0;
        bool changed = info->fn(f, ctx);
        rec.seconds += secondsSince(tp);
        if (opts.tracer)
          opts.tracer->complete(Tracer::kHostPid, "pass", name, traceStart, opts.tracer->nowNs(),
                                {{"function", f->getName()}, {"changed", changed ? "1" : "0", true}});
        rec.runs++;
        rec.changed += changed;
        anyChange |= changed;
        if (opts.verifyEach && changed)
          if (Error e = f->verify())
            return makeError(ErrorCode::Internal, "pass '", name, "' left function '", f->getName(),
                             "' invalid: ", e.message());
        if (opts.afterPass)
          opts.afterPass(name, *f);
        if (wantsDump(name))
          dump << "// ----- after " << name << " (function " << f->getName()
               << (changed ? "" : ", unchanged") << ") -----\n"
               << f->toString() << "\n";
      }
      if (!anyChange)
        break;
    }
  }
  report.totalSeconds = secondsSince(t0);
  return report;
}

Error optimizeFunction(Function *f, const Backend &backend, const PassManagerOptions &opts) {
  Pipeline p = getPipelineForBackend(&backend);
  Expected<PipelineReport> r = runPipeline(f, p, &backend, opts);
  if (!r)
    return r.takeError();
  return Error::success();
}

} // namespace kiln
