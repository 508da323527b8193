// kiln-plan: schedules a network for memory, lowers it to the low-level IR, runs the IR
// passes and plans its memory; prints the figures and draws the activation plan.
//
//   kiln-plan [options] MODEL     (`kiln-plan --help` lists the flags)
//   kiln-plan --report            the figures of the three built-in networks
//   kiln-plan --backend CPU MODEL the plan that backend compiles from: the function goes
//                                 through the compile driver (kiln/Backend/Compiler.h),
//                                 with the backend's graph pipeline, schedule and IR passes;
//                                 nodes the backend cannot run (Sim: SoftMax, ...) go to
//                                 Interpreter partitions, as the runtime places them, and
//                                 every partition's plan is printed
//   kiln-plan --backend Sim MODEL also the Sim program of each Sim partition: per layer its
//                                 cycles and DMA bytes, and its scratchpad plan (--svg
//                                 draws it into FILE-scratchpad.svg; --dump-ir prints
//                                 the program; --backend-opt scratchpad=BYTES or
//                                 config=PATH set the chip)
//
// MODEL is resnet50, mobilenetv2 or transformer (built with the API, batch 1, random
// weights), or a file in the graph text form.
//
// Example (the picture of ResNet-50's plan):
//   bazel run -c opt //src/tools:kiln-plan -- resnet50 --svg=/tmp/resnet50-plan.svg

#include "Flags.h"
#include "Networks.h"

#include "backends/Sim/Sim.h"

#include "kiln/Backend/Compiler.h"
#include "kiln/Graph/TextIR.h"
#include "kiln/Memory/MemoryPipeline.h"
#include "kiln/Runtime/Partitioner.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

using namespace kiln;

namespace {

struct Options {
  std::string model, function, svg, irPasses = "default", backend, dot;
  std::vector<std::string> dumpAfter;
  CompileOptions compile; ///< --backend-opt
  bool topological = false, dumpIR = false, timePasses = false, report = false;
};

/// Parses the flags into \p o; returns the exit status when the tool should stop.
std::optional<int> parseOptions(int argc, char **argv, Options &o) {
  tools::Flags flags("kiln-plan", "usage: kiln-plan [options] MODEL\n       kiln-plan --report",
                     "MODEL: resnet50 | mobilenetv2 | transformer (built with the API, batch 1, "
                     "random weights),\nor a file in the graph text form.\n");
  flags.add("--function", o.function, "NAME",
            "the function of a text module to plan (default: the first)");
  flags.add("--svg", o.svg, "FILE", "write the activation plan as an SVG timeline");
  flags.add("--ir-passes", o.irPasses, "LIST",
            "IR passes to run: default, none or a comma-separated list");
  flags.add("--backend", o.backend, "NAME",
            "plan as backend NAME compiles: its graph pipeline, schedule, IR passes and "
            "alignment (--ir-passes, --topological and --dump-after do not apply)");
  flags.add("--backend-opt", "NAME=VALUE",
            "with --backend: a backend parameter, repeatable (Sim: scratchpad=BYTES, "
            "config=PATH)",
            "NAME=VALUE", "none",
            [&o](const std::string &v) { return !bool(o.compile.setBackendOption(v)); });
  flags.add("--dot", o.dot, "FILE",
            "with --backend: write Graphviz DOT of the prepared graph, or of the partition "
            "plan when part of it falls back to the Interpreter");
  flags.add("--topological", o.topological,
            "plain topological order instead of the memory-aware schedule");
  flags.add("--dump-ir", o.dumpIR, "print the final IR");
  flags.add("--dump-after", o.dumpAfter, "LIST",
            "print the IR after each run of these passes (* = all)");
  flags.add("--time-passes", o.timePasses, "print per-pass times");
  flags.add("--report", o.report,
            "the figures of all three built-in networks, optimised and plain (topological "
            "order, no IR passes); MODEL is not needed");
  flags.positional(o.model, "MODEL");
  if (std::optional<int> exitCode = flags.parse(argc, argv))
    return exitCode;
  if (o.model.empty() && !o.report)
    return flags.fail("no MODEL");
  return std::nullopt;
}

double mib(uint64_t b) { return double(b) / (1024.0 * 1024.0); }

/// Builds a network by name or parses a text module; returns the function to plan.
Expected<Function *> loadModel(const Options &o, Module &m) {
  if (Function *f = networks::buildNetwork(o.model, m))
    return f;
  std::ifstream in(o.model);
  if (!in)
    return makeError(ErrorCode::NotFound, "'", o.model,
                     "' is neither a built-in network (resnet50, mobilenetv2, transformer) nor "
                     "a readable file");
  std::stringstream ss;
  ss << in.rdbuf();
  KILN_RETURN_IF_ERR(parseFunctionInto(m, ss.str()));
  if (m.getFunctions().empty())
    return makeError(ErrorCode::ModelParse, "'", o.model, "' defines no function");
  if (o.function.empty())
    return m.getFunctions().front().get();
  if (Function *f = m.getFunction(o.function))
    return f;
  return makeError(ErrorCode::NotFound, "no function '", o.function, "' in '", o.model, "'");
}

/// Sum of every activation's aligned size: the memory of a plan that shares nothing.
uint64_t totalActivationBytes(const MemoryPlan &p) {
  uint64_t s = 0;
  for (const PlannedBuffer &b : p.buffers)
    if (b.region == MemoryRegion::Activation)
      s += (b.size + p.alignment - 1) / p.alignment * p.alignment;
  return s;
}

void printPlan(const std::string &what, const PlannedIR &P) {
  const MemoryPlan &p = P.plan;
  size_t allocs = 0;
  for (const auto &ip : P.F->getInstrs())
    allocs += isa<AllocActivationInst>(ip.get());
  std::printf("%s\n", what.c_str());
  std::printf("  schedule: %s, peak %.3f MiB (plain topological %.3f MiB)\n",
              P.schedule.strategy.c_str(), mib(P.schedule.peakBytes),
              mib(P.schedule.topologicalPeakBytes));
  for (const auto &c : P.schedule.candidates)
    std::printf("    %-14s %10.3f MiB\n", c.first.c_str(), mib(c.second));
  std::printf("  IR: %zu instructions, %zu activations (%.3f MiB if none shared)\n",
              P.F->getInstrs().size(), allocs, mib(totalActivationBytes(p)));
  std::printf("  regions: constant %.3f MiB, mutable %.3f MiB\n", mib(p.constantBytes),
              mib(p.mutableBytes));
  std::printf("  activations: arena %.3f MiB, max-live %.3f MiB, arena/max-live %.4f "
              "(efficiency %.1f%%), placement %s\n",
              mib(p.activationBytes), mib(p.maxLiveBytes),
              p.maxLiveBytes ? double(p.activationBytes) / double(p.maxLiveBytes) : 1.0,
              100 * p.efficiency(), p.strategy.c_str());
  for (const auto &s : p.strategyArenas)
    std::printf("    %-24s %10.3f MiB\n", s.first.c_str(), mib(s.second));
}

int report() {
  std::printf("%-12s %13s %13s %13s %13s %13s %13s %8s\n", "network", "topo peak", "sched peak",
              "plain maxlive", "plain arena", "opt maxlive", "opt arena", "arena/ml");
  int status = 0;
  for (const std::string &name : networks::getNetworkNames()) {
    Module m;
    Function *f = networks::buildNetwork(name, m);
    MemoryPipelineOptions plainOpts;
    plainOpts.memoryAwareSchedule = false;
    plainOpts.runIRPasses = false;
    auto plain = generatePlannedIR(f, plainOpts);
    auto opt = generatePlannedIR(f, {});
    if (!plain || !opt) {
      std::cerr << name << ": "
                << (plain ? opt.getError().toString() : plain.getError().toString()) << "\n";
      return 1;
    }
    const MemoryPlan &pp = plain->plan, &op = opt->plan;
    double ratio = double(op.activationBytes) / double(std::max<uint64_t>(1, op.maxLiveBytes));
    std::printf("%-12s %9.3f MiB %9.3f MiB %9.3f MiB %9.3f MiB %9.3f MiB %9.3f MiB %8.4f\n",
                name.c_str(), mib(opt->schedule.topologicalPeakBytes), mib(opt->schedule.peakBytes),
                mib(pp.maxLiveBytes), mib(pp.activationBytes), mib(op.maxLiveBytes),
                mib(op.activationBytes), ratio);
    if (ratio > 1.05 || op.activationBytes > pp.maxLiveBytes)
      status = 1;
  }
  std::printf("\ntopo/sched peak: scheduler model (no sharing) of plain topological order and of "
              "the chosen order.\nplain: topological order, no IR passes. opt: chosen order and "
              "the default IR pipeline.\nTargets: opt arena <= 1.05 x opt max-live, and opt arena "
              "<= plain max-live.\n");
  return status;
}

/// Prints (and draws) the plan \p P of function \p what ("name'" or "name' for B"),
/// drawing into \p svg.
int finish(const Options &o, const PlannedIR &P, const std::string &what, const std::string &svg) {
  if (o.dumpIR)
    std::cout << P.F->toString();
  printPlan("plan of '" + what, P);
  if (o.timePasses)
    std::cout << P.passes.timingTable();
  if (!svg.empty()) {
    std::ofstream out(svg);
    out << renderMemoryPlanSVG(*P.F, P.plan, P.F->getName());
    if (!out) {
      std::cerr << "kiln-plan: cannot write " << svg << "\n";
      return 1;
    }
    std::printf("  wrote %s\n", svg.c_str());
  }
  return 0;
}

int finish(const Options &o, const PlannedIR &P, const std::string &what) {
  return finish(o, P, what, o.svg);
}

bool writeText(const std::string &path, const std::string &text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) {
    std::cerr << "kiln-plan: cannot write " << path << "\n";
    return false;
  }
  std::printf("wrote %s\n", path.c_str());
  return true;
}

/// "plan.svg", 2 -> "plan-p2.svg".
std::string partitionPath(const std::string &path, size_t i) {
  if (path.empty())
    return path;
  size_t dot = path.rfind('.');
  size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash))
    dot = path.size();
  return path.substr(0, dot) + "-p" + std::to_string(i) + path.substr(dot);
}

/// The Sim program of plan \p P (a Sim partition): its per-layer table, its scratchpad
/// plan's summary, and with --svg the scratchpad plan drawn into SVG-scratchpad.svg.
int finishSim(const Options &o, PlannedIR &P, const CompileOptions &co, const std::string &svg) {
  Expected<SimConfig> c = simConfigFromOptions(co);
  if (!c) {
    std::cerr << "kiln-plan: " << c.getError().toString() << "\n";
    return 1;
  }
  std::string name = P.F->getName();
  Expected<std::unique_ptr<SimProgram>> prog = SimProgram::build(P, *c);
  if (!prog) {
    std::cerr << "kiln-plan: " << prog.getError().toString() << "\n";
    return 1;
  }
  const SimProgram &p = **prog;
  std::printf("  Sim program (scratchpad %llu bytes, %zu instructions):\n%s",
              (unsigned long long)c->scratchpadBytes, p.instrs().size(), p.report().c_str());
  if (o.dumpIR) // the program, the first instructions of each layer
    std::printf("%s", p.toString(12).c_str());
  const MemoryPlan &sp = p.scratchpadPlan();
  std::printf("  scratchpad plan: %zu tiles, arena %llu bytes (max-live %llu), verified\n",
              p.tiles().size(), (unsigned long long)sp.activationBytes,
              (unsigned long long)sp.maxLiveBytes);
  if (!svg.empty()) {
    std::string path = svg;
    size_t dot = path.rfind('.');
    path = (dot == std::string::npos ? path : path.substr(0, dot)) + "-scratchpad.svg";
    std::ofstream out(path);
    out << renderMemoryPlanSVG(p.scratchpad(), sp, name + " scratchpad");
    if (!out) {
      std::cerr << "kiln-plan: cannot write " << path << "\n";
      return 1;
    }
    std::printf("  wrote %s\n", path.c_str());
  }
  return 0;
}

/// Plans \p f as backend \p b compiles it: prepared with its pipeline; when it cannot run
/// every node, split as the runtime splits it, the rest on the Interpreter, and every
/// partition planned by its own backend.
int planForBackend(const Options &o, Function *f, const Backend &b) {
  CompileOptions co = o.compile.forBackend(b.getName());
  // Backends whose static plan is optional (the Interpreter) plan with their optimised IR.
  co.optimizeIR = co.staticMemoryPlan = true;
  PrepareOptions prep;
  prep.checkSupport = false;
  if (Error e = prepareFunction(f, b, prep)) {
    std::cerr << "kiln-plan: " << e.toString() << "\n";
    return 1;
  }
  std::vector<const Node *> unsupported;
  for (const auto &n : f->getNodes())
    if (!b.isOpSupported(*n))
      unsupported.push_back(n.get());
  if (unsupported.empty()) {
    if (!o.dot.empty() && !writeText(o.dot, f->toDot()))
      return 1;
    Expected<PlannedIR> P = b.planIR(f, co);
    if (!P) {
      std::cerr << "kiln-plan: " << P.getError().toString() << "\n";
      return 1;
    }
    if (!P->planned) {
      std::cerr << "kiln-plan: backend " << b.getName() << " does not plan memory statically\n";
      return 1;
    }
    if (int rc = finish(o, *P, f->getName() + "' for " + b.getName()))
      return rc;
    return b.getName() == "Sim" ? finishSim(o, *P, co, o.svg) : 0;
  }
  Expected<std::unique_ptr<Backend>> interp = createBackend("Interpreter");
  if (b.getName() == "Interpreter" || !interp) {
    std::cerr << "kiln-plan: " << b.checkAllNodesSupported(*f).toString() << "\n";
    return 1;
  }
  std::printf("%zu node%s of '%s' fall back to the Interpreter:", unsupported.size(),
              unsupported.size() == 1 ? "" : "s", f->getName().c_str());
  for (const Node *n : unsupported)
    std::printf(" %s (%s)", n->getName().c_str(), n->getKindName());
  std::printf("\n");
  const uint64_t unlimited = ~uint64_t(0);
  std::vector<PartitionerBackend> pbs = {{&b, unlimited}, {interp->get(), unlimited}};
  Expected<PartitionPlan> plan = partitionFunction(f, f->getName(), pbs);
  if (!plan) {
    std::cerr << "kiln-plan: " << plan.getError().toString() << "\n";
    return 1;
  }
  std::printf("%s\n", plan->toString().c_str());
  if (!o.dot.empty() && !writeText(o.dot, plan->toDot()))
    return 1;
  for (size_t i = 0; i < plan->partitions.size(); i++) {
    const Partition &p = plan->partitions[i];
    const Backend &pb = p.backendName == b.getName() ? b : **interp;
    Expected<PlannedIR> P = pb.planIR(p.function, co);
    if (!P) {
      std::cerr << "kiln-plan: " << P.getError().toString() << "\n";
      return 1;
    }
    if (int rc = finish(o, *P, p.name + "' for " + pb.getName(), partitionPath(o.svg, i)))
      return rc;
    if (pb.getName() == "Sim")
      if (int rc = finishSim(o, *P, co, partitionPath(o.svg, i)))
        return rc;
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  if (std::optional<int> exitCode = parseOptions(argc, argv, o))
    return *exitCode;
  if (o.report)
    return report();

  Module m;
  auto f = loadModel(o, m);
  if (!f) {
    std::cerr << "kiln-plan: " << f.getError().toString() << "\n";
    return 1;
  }
  if (!o.backend.empty()) {
    Expected<std::unique_ptr<Backend>> b = createBackend(o.backend);
    if (!b) {
      std::cerr << "kiln-plan: " << b.getError().toString() << "\n";
      return 2;
    }
    return planForBackend(o, *f, **b);
  }
  if (Error e = (*f)->verify()) {
    std::cerr << "kiln-plan: " << e.toString() << "\n";
    return 1;
  }
  MemoryPipelineOptions mo;
  mo.memoryAwareSchedule = !o.topological;
  if (o.irPasses == "none") {
    mo.runIRPasses = false;
  } else {
    auto list = parseIRPassList(o.irPasses);
    if (!list) {
      std::cerr << "kiln-plan: " << list.getError().toString() << "\n";
      return 2;
    }
    mo.irPasses = *list;
  }
  mo.passManager.dumpAfter = o.dumpAfter;
  mo.passManager.dumpStream = &std::cout;
  auto P = generatePlannedIR(*f, mo);
  if (!P) {
    std::cerr << "kiln-plan: " << P.getError().toString() << "\n";
    return 1;
  }
  return finish(o, *P, (*f)->getName() + "'");
}
