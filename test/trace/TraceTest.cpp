// Traces of compiles and runs, written as Chrome trace event JSON, read back with a JSON
// reader of the test's own (TraceCheck) and checked for structure: the compile phases
// nest inside the compile, each pass inside its pipeline, kernels inside their
// partition's run, runs inside their request, one process per device; the CPU's
// profile table is the same kernel events summed.

#include "TraceCheck.h"

#include "backends/CPU/CPUBackend.h"
#include "kiln/Base/Trace.h"
#include "kiln/Runtime/MultiDevice.h"
#include "test/runtime/RuntimeTestUtils.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace kiln::test {
namespace {

std::string tempPath(const std::string &name) {
  const char *d = std::getenv("TEST_TMPDIR");
  return std::string(d && *d ? d : "/tmp") + "/" + name;
}

/// Writes \p t as JSON to a file, reads the file back and checks its structure.
ParsedTrace writeAndRead(const Tracer &t, const std::string &name) {
  std::string path = tempPath(name);
  Error e = t.writeJSON(path);
  EXPECT_FALSE(e) << e.message();
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  ParsedTrace pt;
  std::string why = readTrace(ss.str(), pt);
  EXPECT_EQ(why, "") << path;
  return pt;
}

/// The innermost event of category \p cat on \p e's thread that contains \p e, or null.
const ParsedEvent *enclosing(const ParsedTrace &t, const ParsedEvent &e, const std::string &cat,
                             const std::string &name = "") {
  const ParsedEvent *best = nullptr;
  for (const ParsedEvent &o : t.events)
    if (&o != &e && o.cat == cat && (name.empty() || o.name == name) && o.pid == e.pid &&
        o.tid == e.tid && o.contains(e) && (!best || best->contains(o)))
      best = &o;
  return best;
}

bool startsWith(const std::string &s, const std::string &p) { return s.rfind(p, 0) == 0; }

/// The checks every traced run of network \p net shares; \p runs requests ran.
void checkRuns(const ParsedTrace &t, const std::string &net, size_t runs, bool kernels) {
  std::vector<const ParsedEvent *> requests = t.select("runtime", "run " + net);
  ASSERT_EQ(requests.size(), runs);
  for (size_t i = 1; i < requests.size(); i++) // monotonic: requests one after another
    EXPECT_LE(requests[i - 1]->end(), requests[i]->ts);
  std::vector<const ParsedEvent *> parts = t.select("partition");
  ASSERT_FALSE(parts.empty());
  std::map<const ParsedEvent *, size_t> kernelsIn;
  for (const ParsedEvent *p : parts) {
    // On the process of the device it names, never the host's.
    EXPECT_NE(p->pid, Tracer::kHostPid);
    EXPECT_EQ(t.processes.at(p->pid), p->args.at("device")) << p->name;
    EXPECT_EQ(p->args.at("ok"), "1");
    // Inside one request (requests are on the host: compare times).
    size_t inside = 0;
    for (const ParsedEvent *r : requests)
      inside += r->contains(*p);
    EXPECT_EQ(inside, 1u) << p->name << " at " << p->ts;
    kernelsIn[p] = 0;
  }
  std::vector<const ParsedEvent *> ks = t.select("kernel");
  if (!kernels) {
    EXPECT_TRUE(ks.empty());
    return;
  }
  int64_t last = -1;
  const ParsedEvent *lastPart = nullptr;
  for (const ParsedEvent *k : ks) {
    const ParsedEvent *p = enclosing(t, *k, "partition");
    ASSERT_NE(p, nullptr) << "kernel '" << k->name << "' outside every partition run";
    kernelsIn[p]++;
    // Within a partition's run, kernels follow each other in the file and in time.
    if (p == lastPart)
      EXPECT_LE(last, k->ts) << k->name;
    last = k->end();
    lastPart = p;
  }
  for (const auto &kv : kernelsIn)
    EXPECT_GT(kv.second, 0u) << "partition run '" << kv.first->name << "' has no kernel events";
}

/// Every compile phase lies inside the network's "add network" event, each graph pass
/// inside graph-passes, each IR pass inside ir-passes, each backend phase inside its
/// partition's compile.
void checkCompile(const ParsedTrace &t, const std::string &net, bool memoryPlan) {
  std::vector<const ParsedEvent *> add = t.select("compile", "add network " + net);
  ASSERT_EQ(add.size(), 1u);
  const ParsedEvent &a = *add[0];
  for (const char *phase : {"verify", "graph-passes", "partition", "schedule", "irgen",
                            "codegen"}) {
    std::vector<const ParsedEvent *> ps = t.select("compile", phase);
    EXPECT_FALSE(ps.empty()) << "no '" << phase << "' phase";
    for (const ParsedEvent *p : ps)
      EXPECT_TRUE(a.contains(*p) && p->tid == a.tid) << phase;
  }
  EXPECT_EQ(t.select("compile", "prepare " + net).size(), 1u);
  EXPECT_EQ(t.select("compile", "provision " + net).size(), 1u);
  EXPECT_EQ(t.select("compile", "load " + net).size(), 1u);
  EXPECT_EQ(t.select("compile", "memory-plan").empty(), !memoryPlan);
  // The planning phases inside one planning of a function ("plan <function>"), made by
  // the partitioner for a partition charged by its plan and taken over by its compile, or
  // else by the compile; code generation inside the compile.
  for (const char *phase : {"schedule", "irgen", "memory-plan", "ir-passes"})
    for (const ParsedEvent *p : t.select("compile", phase)) {
      const ParsedEvent *c = enclosing(t, *p, "compile");
      ASSERT_NE(c, nullptr) << phase;
      EXPECT_TRUE(startsWith(c->name, "plan ")) << phase << " inside " << c->name;
    }
  std::map<std::string, const ParsedEvent *> compiles;
  for (const ParsedEvent *c : t.select("compile")) {
    if (!startsWith(c->name, "compile "))
      continue;
    EXPECT_FALSE(c->args.at("backend").empty());
    EXPECT_NE(enclosing(t, *c, "compile", "provision " + net), nullptr);
    EXPECT_TRUE(compiles.emplace(c->name.substr(8), c).second) << c->name << " twice";
  }
  for (const ParsedEvent *p : t.select("compile", "codegen")) {
    const ParsedEvent *c = enclosing(t, *p, "compile");
    ASSERT_NE(c, nullptr);
    EXPECT_TRUE(startsWith(c->name, "compile ")) << "codegen inside " << c->name;
  }
  // Each compiled function planned once for its compile: in the partitioner when the
  // compile took that plan ("prepared"), else inside the compile ("made").
  std::map<std::string, std::vector<const ParsedEvent *>> plans;
  for (const ParsedEvent *p : t.select("compile"))
    if (startsWith(p->name, "plan "))
      plans[p->name.substr(5)].push_back(p);
  for (const auto &[fn, c] : compiles) {
    const std::string how = c->args.at("plan");
    size_t inCompile = 0, inPartitioner = 0;
    for (const ParsedEvent *p : plans[fn]) {
      EXPECT_FALSE(p->args.at("backend").empty());
      if (const ParsedEvent *in = enclosing(t, *p, "compile"))
        inCompile += in == c;
      inPartitioner += enclosing(t, *p, "compile", "partition") != nullptr;
    }
    if (how == "prepared") {
      EXPECT_EQ(inCompile, 0u) << fn;
      EXPECT_GE(inPartitioner, 1u) << fn;
    } else {
      EXPECT_EQ(how, "made") << fn;
      EXPECT_EQ(inCompile, 1u) << fn;
    }
  }
  std::vector<const ParsedEvent *> passes = t.select("pass");
  ASSERT_FALSE(passes.empty());
  bool sawLower = false, sawIR = false;
  for (const ParsedEvent *p : passes) {
    const ParsedEvent *in = enclosing(t, *p, "compile");
    ASSERT_NE(in, nullptr) << p->name;
    EXPECT_TRUE(in->name == "graph-passes" || in->name == "ir-passes")
        << "pass " << p->name << " inside " << in->name;
    sawLower |= p->name == "lower";
    sawIR |= in->name == "ir-passes";
    EXPECT_TRUE(p->args.count("function") && p->args.count("changed")) << p->name;
  }
  EXPECT_TRUE(sawLower);
  (void)sawIR;
}

TEST(Trace, TwoSimDevicesWithAFallback) {
  Module m;
  Net n = buildMixed(m, "mixed");
  auto trace = std::make_shared<Tracer>(TraceOptions{/*kernels=*/true});
  MultiDeviceOptions o;
  o.devices = 2;
  o.fallbacks = {"Interpreter"};
  o.compile.tracer = trace.get();
  auto created = createMultiDeviceNetwork(n.f, o);
  ASSERT_TRUE(created) << created.getError().message();
  MultiDeviceNetwork &md = created.get();
  md.host->startTrace(trace);
  const size_t runs = 3;
  for (unsigned i = 0; i < runs; i++) {
    Tensor x = makeInput(n.input, i);
    auto b = makeBindings(n, x);
    ASSERT_FALSE(md.host->runNetworkBlocking(md.network, *b));
    EXPECT_TRUE(sameOutputs(n, *b, reference(n, x)));
  }
  EXPECT_EQ(md.host->stopTrace(), trace);
  EXPECT_EQ(md.host->getTrace(), nullptr);
  ParsedTrace t = writeAndRead(*trace, "sim.json");
  // The Sim always plans its partitions' memory (the plan is its device memory).
  checkCompile(t, "mixed", /*memoryPlan=*/true);
  checkRuns(t, "mixed", runs, /*kernels=*/true);

  // One process per device that ran a partition: the host, the Sim device(s) the plan
  // placed the Sim pieces on (the provisioner may put both on sim0: they fit it) and the
  // Interpreter device of the fallback.
  EXPECT_EQ(t.processes.at(Tracer::kHostPid), "host");
  std::set<std::string> devices;
  for (const ParsedEvent *p : t.select("partition"))
    devices.insert(p->args.at("device"));
  size_t sims = 0;
  for (const std::string &d : devices)
    sims += d.rfind("sim", 0) == 0;
  EXPECT_GE(sims, 1u);
  EXPECT_EQ(devices.size(), sims + 1) << "one fallback device besides the Sim ones";
  EXPECT_EQ(t.processes.size(), devices.size() + 1);
  // Partition runs: every partition in every run.
  EXPECT_EQ(t.select("partition").size(), runs * md.numPartitions);
  // Values crossing partitions are transfers on the host; the Sim's DMA on its device.
  std::vector<const ParsedEvent *> transfers = t.select("transfer");
  size_t handOffs = 0, dma = 0;
  for (const ParsedEvent *x : transfers) {
    EXPECT_GT(std::stoll(x->args.at("bytes")), 0) << x->name;
    if (x->name == "dma") {
      dma++;
      EXPECT_TRUE(startsWith(t.processes.at(x->pid), "sim"));
      EXPECT_NE(enclosing(t, *x, "partition"), nullptr);
    } else {
      handOffs++;
      EXPECT_EQ(x->pid, Tracer::kHostPid);
    }
  }
  EXPECT_GT(handOffs, 0u);
  EXPECT_GT(dma, 0u);
  // Partitions handed to a device's worker wait in its queue: asynchronous spans there.
  ASSERT_FALSE(t.spans.empty());
  for (const ParsedEvent &q : t.spans) {
    EXPECT_EQ(q.cat, "queue");
    EXPECT_NE(q.pid, Tracer::kHostPid);
  }
  // Kernels: one per executed instruction of the partitions, each run.
  EXPECT_GE(t.select("kernel").size(), runs * md.numPartitions);
}

/// x [1, 3, 16, 16] -> Convolution, Relu, MaxPool, FullyConnected, SoftMax: stages of
/// several kinds on the CPU.
Net buildConvNet(Module &m, const std::string &name) {
  Net n;
  Function *f = n.f = m.createFunction(name);
  n.input = m.createPlaceholder(ElemKind::Float, {1, 3, 16, 16}, name + ".x");
  auto *c = f->createConv(name + ".conv", n.input, 8, 3, 1, 1, 1, 1, 21);
  auto *r = f->createRelu(name + ".relu", c);
  auto *p = f->createMaxPool(name + ".pool", r, {2, 2}, {2, 2}, {0, 0, 0, 0});
  auto *fc = f->createFullyConnected(name + ".fc", p, 10, 22);
  auto *sm = f->createSoftMax(name + ".sm", fc, 1);
  n.outputs.push_back(f->createSave(name + ".y", sm)->getPlaceholder());
  return n;
}

TEST(Trace, CPUKernelsAndTheProfileAreOneCollection) {
  ExecutionEngine ee("CPU");
  Net n = buildConvNet(ee.getModule(), "mlp");
  ee.startTrace(TraceOptions{/*kernels=*/true});
  CompileOptions co;
  co.threads = 2;
  ASSERT_FALSE(co.setBackendOption("profile=1"));
  ASSERT_FALSE(ee.compile(co));
  const size_t runs = 4;
  for (unsigned i = 0; i < runs; i++) {
    Tensor x = makeInput(n.input, i);
    auto b = makeBindings(n, x);
    ASSERT_FALSE(ee.run(*b));
    std::vector<Tensor> ref = reference(n, x);
    EXPECT_TRUE(b->get(n.outputs[0])->isEqual(ref[0], 1e-4f, 1e-4f));
  }
  std::shared_ptr<Tracer> trace = ee.stopTrace();
  ASSERT_NE(trace, nullptr);
  EXPECT_EQ(ee.getTrace(), nullptr);
  ParsedTrace t = writeAndRead(*trace, "cpu.json");
  checkCompile(t, "mlp", /*memoryPlan=*/true);
  checkRuns(t, "mlp", runs, /*kernels=*/true);
  // The JIT's phases inside codegen.
  for (const char *phase : {"llvm-irgen", "jit"}) {
    std::vector<const ParsedEvent *> ps = t.select("compile", phase);
    ASSERT_EQ(ps.size(), 1u) << phase;
    EXPECT_NE(enclosing(t, *ps[0], "compile", "codegen"), nullptr) << phase;
  }
  EXPECT_EQ(t.processes.size(), 2u); // host, cpu0

  // The profile (profile=1) is the same kernel events summed over the runs after the
  // first: the same stages, counts, sums and minima to the nanosecond. Event i of a run
  // is stage i.
  std::vector<StageTiming> profile = exitOnError(ee.getHostManager()->getProfile("mlp"));
  std::vector<TraceEvent> kernels;
  for (const TraceEvent &e : trace->getEvents())
    if (e.category == "kernel")
      kernels.push_back(e);
  size_t stages = profile.size();
  std::string names;
  for (const StageTiming &p : profile)
    names += " [" + p.name + "]";
  ASSERT_GE(stages, 3u) << names; // Convolution+Relu, MaxPool, FullyConnected, SoftMax
  ASSERT_EQ(kernels.size(), runs * stages) << names; // every stage once per run
  for (size_t i = 0; i < stages; i++) {
    int64_t minNs = 0, sumNs = 0;
    for (size_t r = 1; r < runs; r++) {
      const TraceEvent &e = kernels[r * stages + i];
      EXPECT_EQ(profile[i].name.substr(2), e.name);
      minNs = r == 1 ? e.durNs : std::min(minNs, e.durNs);
      sumNs += e.durNs;
    }
    EXPECT_EQ(profile[i].runs, runs - 1);
    EXPECT_EQ(std::llround(profile[i].minMs * 1e6), minNs) << profile[i].name;
    EXPECT_NEAR(profile[i].meanMs, double(sumNs) / double(runs - 1) * 1e-6, 1e-9);
  }
  // The generic view, grouped by name, counts the same events.
  uint64_t counted = 0;
  for (const TraceSummary &s : summarizeTrace(trace->getEvents(), "kernel", false))
    counted += s.count;
  EXPECT_EQ(counted, kernels.size());
}

TEST(Trace, WithoutKernelsAndWithoutATrace) {
  ExecutionEngine ee("Interpreter");
  Net n = buildMLP(ee.getModule(), "mlp", 2, 8);
  EXPECT_EQ(ee.getTrace(), nullptr);
  Error none = ee.writeTrace(tempPath("none.json"));
  EXPECT_TRUE(bool(none));
  EXPECT_NE(none.message().find("no trace"), std::string::npos) << none.message();
  ee.startTrace(); // no kernel events
  ASSERT_FALSE(ee.compile());
  for (unsigned i = 0; i < 2; i++) {
    Tensor x = makeInput(n.input, i);
    auto b = makeBindings(n, x);
    ASSERT_FALSE(ee.run(*b));
  }
  std::string path = tempPath("interp.json");
  ASSERT_FALSE(ee.writeTrace(path)); // while recording
  std::shared_ptr<Tracer> trace = ee.stopTrace();
  ASSERT_NE(trace, nullptr);
  ParsedTrace t = writeAndRead(*trace, "interp2.json");
  checkCompile(t, "mlp", /*memoryPlan=*/false);
  checkRuns(t, "mlp", 2, /*kernels=*/false);
  // After stopTrace nothing more is recorded; writeTrace writes the last one.
  size_t before = trace->size();
  Tensor x = makeInput(n.input, 7);
  auto b = makeBindings(n, x);
  ASSERT_FALSE(ee.run(*b));
  EXPECT_EQ(trace->size(), before);
  ASSERT_FALSE(ee.writeTrace(path));
  EXPECT_TRUE(bool(trace->writeJSON("/nonexistent-dir/x.json")));
}

TEST(Trace, InterpreterKernelsAreInstructions) {
  ExecutionEngine ee("Interpreter");
  Net n = buildMLP(ee.getModule(), "mlp", 2, 8);
  ee.startTrace(TraceOptions{/*kernels=*/true});
  ASSERT_FALSE(ee.compile());
  Tensor x = makeInput(n.input, 0);
  auto b = makeBindings(n, x);
  ASSERT_FALSE(ee.run(*b));
  ParsedTrace t = writeAndRead(*ee.stopTrace(), "interp-kernels.json");
  checkRuns(t, "mlp", 1, /*kernels=*/true);
  std::set<std::string> kinds;
  for (const ParsedEvent *k : t.select("kernel"))
    kinds.insert(k->args.at("kind"));
  EXPECT_TRUE(kinds.count("FullyConnected") && kinds.count("Relu")) << kinds.size();
}

TEST(TraceCheck, RejectsBrokenTraces) {
  ParsedTrace t;
  EXPECT_NE(readTrace("{\"traceEvents\": [", t), "");
  EXPECT_NE(readTrace("[]", t), "");
  const std::string meta = "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": 1, \"tid\": 0, "
                           "\"args\": {\"name\": \"host\"}}";
  auto ev = [](const char *name, double ts, double dur) {
    return std::string("{\"ph\": \"X\", \"name\": \"") + name +
           "\", \"cat\": \"c\", \"pid\": 1, \"tid\": 1, \"ts\": " + std::to_string(ts) +
           ", \"dur\": " + std::to_string(dur) + "}";
  };
  auto doc = [&](const std::string &events) { return "{\"traceEvents\": [" + events + "]}"; };
  ParsedTrace ok;
  EXPECT_EQ(readTrace(doc(meta + "," + ev("a", 0, 10) + "," + ev("b", 2, 3)), ok), "");
  EXPECT_EQ(ok.events.size(), 2u);
  ParsedTrace bad1, bad2, bad3;
  EXPECT_NE(readTrace(doc(meta + "," + ev("a", 0, 10) + "," + ev("b", 5, 10)), bad1), "");
  EXPECT_NE(readTrace(doc(ev("a", 0, 10)), bad2), ""); // unnamed process
  EXPECT_NE(readTrace(doc(meta + "," + meta), bad3), "");
}

} // namespace
} // namespace kiln::test
