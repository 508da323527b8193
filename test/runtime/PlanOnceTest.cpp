// A function is planned once: the plan the partitioner charges a partition (its schedule,
// IR, IR passes and static memory plan) is the plan its compile takes over, for the CPU,
// the Sim and the Interpreter with a static plan, one partition or several.

#include "RuntimeTestUtils.h"

#include "kiln/Backend/Compiler.h"
#include "kiln/Base/Trace.h"
#include "kiln/Runtime/Partitioner.h"
#include "kiln/Runtime/Provisioner.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>

using namespace kiln;
using namespace kiln::test;

namespace {

/// How many times each function (by module and name) was planned by a PlanCounting
/// backend.
std::mutex countsMu;
std::map<std::pair<const Module *, std::string>, unsigned> planCounts;

/// Forgets every count (a new module may take the address of one freed before).
void resetPlanCounts() {
  std::lock_guard<std::mutex> lock(countsMu);
  planCounts.clear();
}

unsigned plansOf(const Function *f) {
  std::lock_guard<std::mutex> lock(countsMu);
  auto it = planCounts.find({f->getParent(), f->getName()});
  return it == planCounts.end() ? 0 : it->second;
}

/// Runs \p inner's code under the counting backend's name (a device runs only code of
/// its own backend).
class RenamedFunction final : public CompiledFunction {
public:
  RenamedFunction(std::unique_ptr<CompiledFunction> inner, std::string name)
      : inner_(std::move(inner)), name_(std::move(name)) {}
  Error execute(ExecutionContext &ctx) override { return inner_->execute(ctx); }
  std::string getBackendName() const override { return name_; }

private:
  std::unique_ptr<CompiledFunction> inner_;
  std::string name_;
};

/// Backend \p inner under another name, run on the generic host device, counting each
/// planning of a function: a first graph step in its compile spec, which Backend::planIR
/// runs once per planning and nothing else runs.
class PlanCounting : public Backend {
public:
  PlanCounting(std::string name, std::string inner)
      : name_(std::move(name)), innerName_(std::move(inner)) {}
  std::string getName() const override { return name_; }
  bool isOpSupported(const Node &n) const override { return inner()->isOpSupported(n); }
  bool shouldLower(const Node &n) const override { return inner()->shouldLower(n); }
  std::vector<BackendParameter> getParameters() const override {
    return inner()->getParameters();
  }
  BackendCompileSpec getCompileSpec(const CompileOptions &opts) const override {
    BackendCompileSpec spec = inner()->getCompileSpec(opts);
    spec.graphSteps.insert(spec.graphSteps.begin(), {"count-plans", [](Function *f) {
                                                       std::lock_guard<std::mutex> lock(countsMu);
                                                       planCounts[{f->getParent(), f->getName()}]++;
                                                       return false;
                                                     }});
    return spec;
  }
  Expected<std::unique_ptr<CompiledFunction>>
  generateCode(Function *f, PlannedIR &ir, const CompileOptions &opts) const override {
    KILN_ASSIGN_OR_RETURN(auto inner, inner()->generateCode(f, ir, opts));
    return std::unique_ptr<CompiledFunction>(new RenamedFunction(std::move(inner), name_));
  }

private:
  /// From the registry on first use (not in the constructor: backends are built under the
  /// registry's lock).
  const Backend *inner() const {
    std::call_once(once_, [this] { inner_ = exitOnError(createBackend(innerName_)); });
    return inner_.get();
  }
  std::string name_, innerName_;
  mutable std::once_flag once_;
  mutable std::unique_ptr<Backend> inner_;
};

struct CountedCPU : PlanCounting {
  CountedCPU() : PlanCounting("CountedCPU", "CPU") {}
};
struct CountedInterpreter : PlanCounting {
  CountedInterpreter() : PlanCounting("CountedInterpreter", "Interpreter") {}
};
KILN_REGISTER_BACKEND(CountedCPU, "CountedCPU");
KILN_REGISTER_BACKEND(CountedInterpreter, "CountedInterpreter");

/// Compares a CPU run with the Interpreter's (the CPU's kernels are not bit-identical).
void expectClose(const Net &n, const PlaceholderBindings &b, const std::vector<Tensor> &ref) {
  const float tol[] = {1e-4f, 0.051f}; // y (float), yq (dequantized int8, scale 0.05)
  for (size_t i = 0; i < n.outputs.size(); i++) {
    const Tensor *t = b.get(n.outputs[i]);
    ASSERT_TRUE(t);
    EXPECT_LE(t->maxAbsDiff(ref[i]), tol[i]) << n.outputs[i]->getName();
  }
}

/// The "compile" category events named \p prefix followed by anything.
std::vector<TraceEvent> compileEvents(const Tracer &t, const std::string &prefix) {
  std::vector<TraceEvent> out;
  for (const TraceEvent &e : t.getEvents())
    if (e.phase == 'X' && e.category == "compile" && e.name.compare(0, prefix.size(), prefix) == 0)
      out.push_back(e);
  return out;
}

std::string argOf(const TraceEvent &e, const std::string &key) {
  for (const TraceArg &a : e.args)
    if (a.key == key)
      return a.value;
  return "";
}

bool inside(const TraceEvent &in, const TraceEvent &out) {
  return in.tid == out.tid && out.startNs <= in.startNs &&
         in.startNs + in.durNs <= out.startNs + out.durNs;
}

/// Every compile of \p t took the plan the partitioner made, every planning ran inside
/// the partitioner, and \p partitions functions were planned once each.
void expectPlannedOnceInPartitioner(const Tracer &t, size_t partitions) {
  std::vector<TraceEvent> part = compileEvents(t, "partition");
  ASSERT_EQ(part.size(), 1u);
  std::vector<TraceEvent> compiles = compileEvents(t, "compile ");
  EXPECT_EQ(compiles.size(), partitions);
  for (const TraceEvent &c : compiles)
    EXPECT_EQ(argOf(c, "plan"), "prepared") << c.name;
  std::map<std::string, unsigned> plans;
  for (const TraceEvent &p : compileEvents(t, "plan ")) {
    EXPECT_TRUE(inside(p, part[0])) << p.name << " planned outside the partitioner";
    plans[p.name]++;
  }
  EXPECT_EQ(plans.size(), partitions);
  for (const auto &[name, n] : plans)
    EXPECT_EQ(n, 1u) << name;
}

} // namespace

// The defect this guards against: a CPU network (host devices have bounded memory, so the
// partitioner charges the plan) was scheduled, lowered and planned twice, once by the
// partitioner and again by the compile.
TEST(PlanOnce, CpuNetworkThroughExecutionEngineIsPlannedOnce) {
  resetPlanCounts();
  ExecutionEngine ee("CountedCPU");
  Net n = buildMixed(ee.getModule(), "mixed");
  Tensor x = makeInput(n.input, 0);
  std::vector<Tensor> ref = reference(n, x);
  Tracer tracer;
  CompileOptions opts;
  opts.tracer = &tracer;
  ASSERT_FALSE(ee.compile(opts));
  EXPECT_EQ(plansOf(n.f), 1u);
  expectPlannedOnceInPartitioner(tracer, 1);
  auto b = makeBindings(n, x);
  Error e = ee.run(*b);
  ASSERT_FALSE(e) << e.message();
  expectClose(n, *b, ref);
}

// Backend parameters that change the plan (the CPU's optimize-ir) reach the partitioner:
// the partition is charged and compiled from the plan made under them.
TEST(PlanOnce, CpuBackendParametersPlanOnceUnderThoseParameters) {
  for (const char *optimize : {"0", "1"}) {
    resetPlanCounts();
    ExecutionEngine ee("CountedCPU");
    Net n = buildMixed(ee.getModule(), "mixed");
    Tensor x = makeInput(n.input, 1);
    std::vector<Tensor> ref = reference(n, x);
    Tracer tracer;
    CompileOptions opts;
    opts.tracer = &tracer;
    ASSERT_FALSE(opts.setBackendOption(std::string("optimize-ir=") + optimize));
    ASSERT_FALSE(ee.compile(opts));
    EXPECT_EQ(plansOf(n.f), 1u) << "optimize-ir=" << optimize;
    expectPlannedOnceInPartitioner(tracer, 1);
    auto b = makeBindings(n, x);
    Error e = ee.run(*b);
    ASSERT_FALSE(e) << e.message();
    expectClose(n, *b, ref);
  }
}

// The footprint the partitioner charges is the plan under the compile's options: with
// optimize-ir=0 (topological order, no IR passes) the CPU's plan of a chain of
// element-wise nodes needs two buffers, with the IR passes one.
TEST(PlanOnce, FootprintFollowsTheCompileOptions) {
  auto cpu = exitOnError(createBackend("CPU"));
  auto plannedBytes = [&](const CompileOptions &opts) {
    Module m;
    Function *f = m.createFunction("chain");
    auto *x = m.createPlaceholder(ElemKind::Float, {1, 1024}, "x");
    NodeValue v(x);
    for (unsigned i = 0; i < 6; i++)
      v = i % 2 ? NodeValue(f->createTanh("t" + std::to_string(i), v))
                : NodeValue(f->createSigmoid("s" + std::to_string(i), v));
    f->createSave("y", v);
    const uint64_t memory = uint64_t(1) << 30;
    auto plan = exitOnError(partitionFunction(f, "chain", {{cpu.get(), memory, 1, opts}}));
    EXPECT_EQ(plan.partitions.size(), 1u);
    const Partition &p = plan.partitions[0];
    EXPECT_TRUE(p.prepared.ir);
    EXPECT_EQ(p.prepared.options.backendOptions, opts.backendOptions);
    // x (4 KiB) and y (4 KiB) are the placeholders; the results are activations.
    EXPECT_EQ(p.footprint.ioBytes, 2u * 4096);
    return p.footprint.activationBytes;
  };
  CompileOptions plain;
  ASSERT_FALSE(plain.setBackendOption("optimize-ir=0"));
  // Topological order, no sharing: each node's operand and result (4 KiB each) are live
  // together, so the arena holds two buffers (the planner reuses dead ones).
  EXPECT_EQ(plannedBytes(plain), 2u * 4096);
  // The IR passes: each element-wise result after the first overwrites its dying operand
  // (the first reads x, a placeholder) and the last is written into y: one buffer.
  EXPECT_EQ(plannedBytes(CompileOptions()), 1u * 4096);
}

// A plan made under options other than the compile's is not used: the compile plans
// again, and the stale plan is dropped.
TEST(PlanOnce, CompileUnderOtherOptionsPlansAgain) {
  resetPlanCounts();
  auto cpu = exitOnError(createBackend("CountedCPU"));
  Module m;
  Net n = buildMixed(m, "mixed");
  Tensor x = makeInput(n.input, 2);
  std::vector<Tensor> ref = reference(n, x);
  ASSERT_FALSE(prepareFunction(n.f, *cpu));
  const uint64_t memory = uint64_t(1) << 30;
  auto plan = exitOnError(partitionFunction(n.f, "mixed", {{cpu.get(), memory, 1}}));
  ASSERT_EQ(plan.partitions.size(), 1u);
  Partition &p = plan.partitions[0];
  ASSERT_TRUE(p.prepared.ir);
  EXPECT_EQ(plansOf(n.f), 1u);
  CompileOptions other;
  ASSERT_FALSE(other.setBackendOption("optimize-ir=0"));
  Tracer tracer;
  other.tracer = &tracer;
  auto cf = exitOnError(cpu->compile(n.f, other, &p.prepared));
  EXPECT_FALSE(p.prepared.ir);
  EXPECT_EQ(plansOf(n.f), 2u);
  std::vector<TraceEvent> compiles = compileEvents(tracer, "compile ");
  ASSERT_EQ(compiles.size(), 1u);
  EXPECT_EQ(argOf(compiles[0], "plan"), "made");
  auto b = makeBindings(n, x);
  ExecutionContext ctx(b.get());
  ASSERT_FALSE(cf->execute(ctx));
  expectClose(n, *b, ref);
  // A plan is taken once: compiling again plans again.
  auto again = exitOnError(cpu->compile(n.f, CompileOptions(), &p.prepared));
  EXPECT_EQ(plansOf(n.f), 3u);
}

// The Interpreter is charged by its plan only when it makes one (staticMemoryPlan); then
// that plan is compiled. Without one it is planned at compile time, once.
TEST(PlanOnce, InterpreterPlansOnceWithOrWithoutAStaticPlan) {
  for (bool staticPlan : {false, true}) {
    resetPlanCounts();
    ExecutionEngine ee("CountedInterpreter");
    Net n = buildMixed(ee.getModule(), "mixed");
    Tensor x = makeInput(n.input, 3);
    std::vector<Tensor> ref = reference(n, x);
    Tracer tracer;
    CompileOptions opts;
    opts.tracer = &tracer;
    opts.optimizeIR = opts.staticMemoryPlan = staticPlan;
    ASSERT_FALSE(ee.compile(opts));
    EXPECT_EQ(plansOf(n.f), 1u) << "static plan " << staticPlan;
    if (staticPlan) {
      expectPlannedOnceInPartitioner(tracer, 1);
    } else {
      std::vector<TraceEvent> compiles = compileEvents(tracer, "compile ");
      ASSERT_EQ(compiles.size(), 1u);
      EXPECT_EQ(argOf(compiles[0], "plan"), "made");
    }
    auto b = makeBindings(n, x);
    ASSERT_FALSE(ee.run(*b));
    std::string why;
    EXPECT_TRUE(sameOutputs(n, *b, ref, &why)) << why;
  }
}

// Sim devices: one partition (the partitioner's check of the cut against the plan and its
// charge share one planning) and several (each compile takes its partition's plan).
TEST(PlanOnce, SimPartitionsAreCompiledFromThePartitionersPlans) {
  for (uint64_t memory : {uint64_t(1) << 20, uint64_t(12) << 10}) {
    Module m;
    Net n = buildMLP(m, "mlp", 4, 32);
    Tensor x = makeInput(n.input, 4);
    std::vector<Tensor> ref = reference(n, x);
    auto hm = exitOnError(HostManager::create(simDevices(4, memory, false)));
    Tracer tracer;
    NetworkOptions no;
    no.compile.tracer = &tracer;
    ASSERT_FALSE(hm->addNetwork(n.f, no));
    size_t parts = exitOnError(hm->getNumPartitions("mlp"));
    if (memory == uint64_t(1) << 20) {
      EXPECT_EQ(parts, 1u);
      expectPlannedOnceInPartitioner(tracer, 1);
    } else {
      EXPECT_GT(parts, 1u) << exitOnError(hm->getPlanText("mlp"));
      // Every compile takes a plan made in the partitioner (which also measured the
      // candidate cut, in a scratch module, before making the partitions).
      std::vector<TraceEvent> compiles = compileEvents(tracer, "compile ");
      EXPECT_EQ(compiles.size(), parts);
      for (const TraceEvent &c : compiles)
        EXPECT_EQ(argOf(c, "plan"), "prepared") << c.name;
      std::vector<TraceEvent> part = compileEvents(tracer, "partition");
      ASSERT_EQ(part.size(), 1u);
      for (const TraceEvent &p : compileEvents(tracer, "plan "))
        EXPECT_TRUE(inside(p, part[0])) << p.name;
    }
    auto b = makeBindings(n, x);
    Error e = hm->runNetworkBlocking("mlp", *b);
    ASSERT_FALSE(e) << e.message();
    std::string why;
    EXPECT_TRUE(sameOutputs(n, *b, ref, &why)) << why;
  }
}
