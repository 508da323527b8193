// Automatic fallback: nodes the chosen backend cannot run go to the Interpreter on the
// host, with one warning, and the network runs; strict mode keeps the error.
//
// The robust case registers, as "CPU", the real CPU backend with Tanh refused, so that
// ExecutionEngine("CPU") itself meets a node it cannot run whatever kernels the CPU
// backend gains. The real case uses the real CPU backend with the nodes it refuses today.

#include "backends/CPU/CPUBackend.h"
#include "kiln/Runtime/HostManager.h"
#include "kiln/kiln.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <thread>

using namespace kiln;
using kiln::cpu::CPUBackend;

namespace {

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

size_t count(const std::string &s, const std::string &part) {
  size_t n = 0;
  for (size_t p = s.find(part); p != std::string::npos; p = s.find(part, p + 1))
    n++;
  return n;
}

/// The CPU backend, refusing Tanh.
class CPUWithoutTanh final : public Backend {
public:
  std::string getName() const override { return "CPU"; }
  bool isOpSupported(const Node &n) const override {
    return n.getKind() != NodeKind::Tanh && cpu_.isOpSupported(n);
  }
  bool shouldLower(const Node &n) const override { return cpu_.shouldLower(n); }
  std::vector<BackendParameter> getParameters() const override { return cpu_.getParameters(); }
  BackendCompileSpec getCompileSpec(const CompileOptions &o) const override {
    return cpu_.getCompileSpec(o);
  }
  Expected<std::unique_ptr<CompiledFunction>> generateCode(Function *f, PlannedIR &ir,
                                                           const CompileOptions &o) const override {
    return cpu_.generateCode(f, ir, o);
  }

private:
  CPUBackend cpu_;
};

/// Registers CPUWithoutTanh as "CPU" for the duration of a test.
class RefusingCPU : public ::testing::Test {
protected:
  void SetUp() override {
    registerBackend("CPU", [] { return std::unique_ptr<Backend>(new CPUWithoutTanh()); });
  }
  void TearDown() override {
    registerBackend("CPU", [] { return std::unique_ptr<Backend>(new CPUBackend()); });
  }
};

// y = relu(tanh(x W1 + b1) W2 + b2), x [2, 3].
const float kW1[] = {0.5f, -1, 0.25f, 2, 1, 0.5f, -0.5f, 0, -1, 0.75f, 1, -0.25f};
const float kB1[] = {0.1f, -0.2f, 0.3f, 0};
const float kW2[] = {1, -1, 0.5f, 2, -0.75f, 1, 1.5f, 0.25f};
const float kB2[] = {0.05f, -0.1f};
const float kX[] = {1, -2, 0.5f, -1, 0.25f, 2};

/// A float tensor of \p dims holding \p v.
Tensor floats(Dims dims, const float *v) {
  Tensor t(ElemKind::Float, dims);
  for (size_t i = 0; i < t.size(); i++)
    t.getHandle<float>().raw(i) = v[i];
  return t;
}

struct Net {
  Placeholder *x;
  Placeholder *y;
};

/// Builds the network as function "main"; with \p twoTanh, a second Tanh follows the first.
Net buildNet(Module &m, bool twoTanh = false) {
  Function *f = m.createFunction("main");
  Net n;
  n.x = m.createPlaceholder(ElemKind::Float, {2, 3}, "x");
  auto *w1 = m.createConstant("w1", floats({3, 4}, kW1));
  auto *b1 = m.createConstant("b1", floats({4}, kB1));
  auto *w2 = m.createConstant("w2", floats({4, 2}, kW2));
  auto *b2 = m.createConstant("b2", floats({2}, kB2));
  NodeValue h = f->createFullyConnected("fc1", NodeValue(n.x), NodeValue(w1), NodeValue(b1));
  h = f->createTanh("tanh", h);
  if (twoTanh)
    h = f->createTanh("tanh2", h);
  NodeValue o = f->createFullyConnected("fc2", h, NodeValue(w2), NodeValue(b2));
  n.y = f->createSave("y", NodeValue(f->createRelu("relu", o)))->getPlaceholder();
  return n;
}

/// The network's result in double precision, from the formula.
std::vector<double> expected() {
  std::vector<double> y;
  for (int r = 0; r < 2; r++) {
    double h[4];
    for (int j = 0; j < 4; j++) {
      double s = kB1[j];
      for (int k = 0; k < 3; k++)
        s += double(kX[r * 3 + k]) * kW1[k * 4 + j];
      h[j] = std::tanh(s);
    }
    for (int j = 0; j < 2; j++) {
      double s = kB2[j];
      for (int k = 0; k < 4; k++)
        s += h[k] * kW2[k * 2 + j];
      y.push_back(std::max(s, 0.0));
    }
  }
  return y;
}

/// Runs the network on \p backend (compiled), returns y.
std::vector<float> runNet(ExecutionEngine &ee, const Net &n) {
  PlaceholderBindings b;
  b.allocate(ee.getModule().getPlaceholders());
  b.insert(n.x, floats({2, 3}, kX));
  Error e = ee.run(b);
  EXPECT_FALSE(e) << e.message();
  std::vector<float> y;
  for (size_t i = 0; i < 4; i++)
    y.push_back(b.get(n.y)->getHandle<float>().raw(i));
  return y;
}

TEST_F(RefusingCPU, UnsupportedNodeFallsBackToTheInterpreterWithOneWarning) {
  ExecutionEngine ee("CPU");
  Net n = buildNet(ee.getModule());
  testing::internal::CaptureStderr();
  Error e = ee.compile();
  std::string err = testing::internal::GetCapturedStderr();
  ASSERT_FALSE(e) << e.message();
  // One warning naming the node, its kind and its shapes, and where it went.
  EXPECT_EQ(count(err, "kiln: warning:"), 1u) << err;
  EXPECT_TRUE(contains(err, "backend CPU cannot run 1 node of network 'main'")) << err;
  EXPECT_TRUE(contains(err, "node 'tanh' (Tanh): float<2x4> -> float<2x4>")) << err;
  EXPECT_TRUE(contains(err, "on Interpreter on the host")) << err;

  Expected<NetworkSplit> split = ee.getNetworkSplit();
  ASSERT_TRUE(bool(split)) << split.getError().message();
  ASSERT_EQ(split->backends.size(), 2u) << split->toString();
  EXPECT_EQ(split->backends[0].backend, "CPU");
  EXPECT_EQ(split->backends[0].partitions, 2u) << split->toString(); // before and after tanh
  EXPECT_EQ(split->backends[1].backend, "Interpreter");
  EXPECT_EQ(split->backends[1].partitions, 1u);
  EXPECT_EQ(split->backends[1].nodes, 1u);
  EXPECT_EQ(split->fallbackBackend, "Interpreter");
  ASSERT_EQ(split->fallbackNodes.size(), 1u);
  EXPECT_EQ(split->fallbackNodes[0].name, "tanh");
  EXPECT_EQ(split->fallbackNodes[0].kind, "Tanh");

  // The result: the formula, and the Interpreter alone.
  std::vector<double> want = expected();
  std::vector<float> got = runNet(ee, n);
  ExecutionEngine ref("Interpreter");
  Net rn = buildNet(ref.getModule());
  ASSERT_FALSE(ref.compile());
  std::vector<float> refY = runNet(ref, rn);
  for (size_t i = 0; i < 4; i++) {
    EXPECT_NEAR(got[i], want[i], 1e-5) << i;
    EXPECT_NEAR(got[i], refY[i], 1e-5) << i;
  }
  EXPECT_GT(want[0] + want[1] + want[2] + want[3], 0.1); // not all clipped to zero

  // Runs from several threads at once give the same result.
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; t++)
    ts.emplace_back([&] {
      for (int k = 0; k < 10; k++) {
        std::vector<float> y = runNet(ee, n);
        for (size_t i = 0; i < 4; i++)
          EXPECT_EQ(y[i], got[i]);
      }
    });
  for (auto &t : ts)
    t.join();
}

TEST_F(RefusingCPU, StrictBackendKeepsTheErrorListingEveryNode) {
  ExecutionEngine ee("CPU");
  buildNet(ee.getModule(), /*twoTanh=*/true);
  ee.setStrictBackend(true);
  testing::internal::CaptureStderr();
  Error e = ee.compile();
  std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(e);
  EXPECT_EQ(e.code(), ErrorCode::Unsupported);
  EXPECT_TRUE(contains(e.message(), "backend CPU does not support 2 node(s)")) << e.message();
  EXPECT_TRUE(contains(e.message(), "'tanh'")) << e.message();
  EXPECT_TRUE(contains(e.message(), "'tanh2'")) << e.message();
  EXPECT_TRUE(contains(e.message(), "float<2x4>")) << e.message();
  EXPECT_FALSE(contains(err, "warning")) << err;
  // Off again: the same module compiles and runs.
  ee.setStrictBackend(false);
  std::string warning;
  ee.setWarningHandler([&](const std::string &w) { warning += w; });
  ASSERT_FALSE(ee.compile());
  EXPECT_TRUE(contains(warning, "cannot run 2 nodes")) << warning;
}

// Two functions that both fall back: still one warning for the compile, naming both.
TEST_F(RefusingCPU, OneWarningPerCompileWhateverTheFunctions) {
  ExecutionEngine ee("CPU");
  Module &m = ee.getModule();
  for (const char *name : {"a", "b"}) {
    Function *f = m.createFunction(name);
    auto *x = m.createPlaceholder(ElemKind::Float, {3}, std::string(name) + ".x");
    f->createSave(std::string(name) + ".y",
                  NodeValue(f->createTanh(std::string(name) + ".tanh", NodeValue(x))));
  }
  testing::internal::CaptureStderr();
  ASSERT_FALSE(ee.compile());
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(err, "kiln: warning:"), 1u) << err;
  EXPECT_TRUE(contains(err, "node 'a.tanh' (Tanh)")) << err;
  EXPECT_TRUE(contains(err, "node 'b.tanh' (Tanh)")) << err;
  PlaceholderBindings b;
  b.allocate(m.getPlaceholders());
  b.getByName("b.x")->getHandle<float>().set({-1, 0, 0.5f});
  ASSERT_FALSE(ee.run(b, "b"));
  EXPECT_NEAR(b.getByName("b.y")->getHandle<float>().raw(0), std::tanh(-1.0), 1e-6);
  EXPECT_NEAR(b.getByName("b.y")->getHandle<float>().raw(2), std::tanh(0.5), 1e-6);
}

TEST_F(RefusingCPU, HostManagerFallsBackAndHonoursStrict) {
  auto hm = HostManager::create({DeviceConfig{"CPU"}});
  ASSERT_TRUE(bool(hm));
  Module m;
  Net n = buildNet(m);
  Function *f = m.getFunction("main");
  NetworkOptions strict;
  strict.prepare = true;
  strict.strictBackend = true;
  Error e = (*hm)->addNetwork(f, strict);
  ASSERT_TRUE(e);
  EXPECT_EQ(e.code(), ErrorCode::Unsupported);
  EXPECT_TRUE(contains(e.message(), "'tanh'")) << e.message();

  NetworkOptions opts;
  opts.prepare = true;
  std::string warning;
  opts.onWarning = [&](const std::string &w) { warning += w; };
  ASSERT_FALSE((*hm)->addNetwork(f, opts));
  EXPECT_TRUE(contains(warning, "node 'tanh' (Tanh)")) << warning;
  EXPECT_EQ((*hm)->getNumDevices(), 1u); // the host fallback device is not one of them
  Expected<size_t> parts = (*hm)->getNumPartitions("main");
  ASSERT_TRUE(bool(parts));
  EXPECT_EQ(*parts, 3u);
  PlaceholderBindings b;
  b.allocate(m.getPlaceholders());
  b.insert(n.x, floats({2, 3}, kX));
  ASSERT_FALSE((*hm)->runNetworkBlocking("main", b));
  std::vector<double> want = expected();
  for (size_t i = 0; i < 4; i++)
    EXPECT_NEAR(b.get(n.y)->getHandle<float>().raw(i), want[i], 1e-5);
  ASSERT_FALSE((*hm)->removeNetwork("main"));
}

// The real CPU backend and the nodes it refuses today (each case runs only while the CPU
// backend lacks its node): the same warning and the Interpreter's result.
TEST(RealCPU, NodesTheCPUBackendLacksRunOnTheInterpreter) {
  Expected<std::unique_ptr<Backend>> cpu = createBackend("CPU");
  ASSERT_TRUE(bool(cpu));
  struct Case {
    const char *what;
    // Builds "main" in the module; returns the node the CPU backend may lack.
    std::function<Node *(Module &)> build;
  };
  std::vector<Case> cases = {
      {"Gather", [](Module &m) -> Node * {
         Function *f = m.createFunction("main");
         auto *data = m.createPlaceholder(ElemKind::Float, {4, 3}, "data");
         auto *idx = m.createPlaceholder(ElemKind::Int64I, {2}, "idx");
         NodeValue r = f->createRelu("relu", NodeValue(data));
         auto *g = f->createGather("gather", r, NodeValue(idx), 0);
         f->createSave("out", NodeValue(f->createTanh("tanh", NodeValue(g))));
         return g;
       }},
      {"ArgMax", [](Module &m) -> Node * {
         Function *f = m.createFunction("main");
         auto *data = m.createPlaceholder(ElemKind::Float, {4, 3}, "data");
         NodeValue r = f->createRelu("relu", NodeValue(data));
         auto *a = f->createArgMax("argmax", r, 1, false);
         f->createSave("out", NodeValue(a));
         return a;
       }},
      {"CmpLT + Select", [](Module &m) -> Node * {
         Function *f = m.createFunction("main");
         auto *data = m.createPlaceholder(ElemKind::Float, {4, 3}, "data");
         auto *other = m.createPlaceholder(ElemKind::Float, {4, 3}, "other");
         NodeValue r = f->createRelu("relu", NodeValue(data));
         auto *lt = f->createCmpLT("lt", r, NodeValue(other));
         auto *s = f->createSelect("select", NodeValue(lt), r, NodeValue(other));
         f->createSave("out", NodeValue(s));
         return lt;
       }},
  };
  unsigned ran = 0;
  for (const Case &c : cases) {
    Module probe;
    Node *key = c.build(probe);
    if ((*cpu)->isOpSupported(*key))
      continue; // the CPU backend runs it now: nothing falls back
    ran++;
    SCOPED_TRACE(c.what);
    ExecutionEngine ee("CPU"), ref("Interpreter");
    c.build(ee.getModule());
    c.build(ref.getModule());
    testing::internal::CaptureStderr();
    Error e = ee.compile();
    std::string err = testing::internal::GetCapturedStderr();
    ASSERT_FALSE(e) << e.message();
    ASSERT_FALSE(ref.compile());
    EXPECT_EQ(count(err, "kiln: warning:"), 1u) << err;
    EXPECT_TRUE(contains(err, "(" + std::string(key->getKindName()) + ")")) << err;
    Expected<NetworkSplit> split = ee.getNetworkSplit();
    ASSERT_TRUE(bool(split));
    EXPECT_EQ(split->backends.front().backend, "CPU") << split->toString();
    EXPECT_EQ(split->backends.back().backend, "Interpreter") << split->toString();
    // The same inputs on both; the Interpreter alone is the reference.
    PlaceholderBindings b, rb;
    b.allocate(ee.getModule().getPlaceholders());
    rb.allocate(ref.getModule().getPlaceholders());
    PseudoRNG rng;
    // The reference's placeholders: the engine's module also holds those that carry
    // values between its partitions.
    for (const auto &ph : ref.getModule().getPlaceholders()) {
      Tensor *t = b.getByName(ph->getName());
      Tensor *rt = rb.get(ph.get());
      ASSERT_NE(t, nullptr) << ph->getName();
      if (ph->getName() == "idx") {
        t->getHandle<int64_t>().set({3, 1});
      } else if (ph->getName() != "out") {
        t->randomize(-1, 1, rng);
      }
      for (size_t i = 0; i < t->size(); i++)
        rt->setFromDouble(i, t->getAsDouble(i));
    }
    ASSERT_FALSE(ee.run(b));
    ASSERT_FALSE(ref.run(rb));
    const Tensor *out = b.getByName("out"), *refOut = rb.getByName("out");
    ASSERT_EQ(out->size(), refOut->size());
    for (size_t i = 0; i < out->size(); i++)
      EXPECT_NEAR(out->getAsDouble(i), refOut->getAsDouble(i), 1e-6) << i;
  }
  if (!ran)
    GTEST_SKIP() << "the CPU backend runs every node of these cases now";
}

// Backend parameters go only to the backend they name: the CPU's profile=1 never reaches
// the Interpreter partition the fallback adds (it used to fail there as an unknown
// option), an unknown one is still an error of the backend it names, and a qualified
// one ("Interpreter:...") reaches only that backend.
TEST_F(RefusingCPU, BackendOptionsGoOnlyToTheBackendTheyName) {
  {
    ExecutionEngine ee("CPU");
    Net n = buildNet(ee.getModule());
    ee.setWarningHandler([](const std::string &) {});
    CompileOptions o;
    ASSERT_FALSE(o.setBackendOption("profile=1"));
    Error e = ee.compile(o);
    ASSERT_FALSE(e) << e.message();
    std::vector<double> want = expected();
    for (int run = 0; run < 3; run++) {
      std::vector<float> got = runNet(ee, n);
      for (size_t i = 0; i < 4; i++)
        EXPECT_NEAR(got[i], want[i], 1e-5) << i;
    }
    // The CPU partitions profiled their stages (runs after the first).
    Expected<std::vector<StageTiming>> p = ee.getHostManager()->getProfile("main");
    ASSERT_TRUE(bool(p)) << p.getError().message();
    ASSERT_FALSE(p->empty());
    for (const StageTiming &t : *p)
      EXPECT_EQ(t.runs, 2u) << t.name;
  }
  {
    ExecutionEngine ee("CPU");
    buildNet(ee.getModule());
    ee.setWarningHandler([](const std::string &) {});
    CompileOptions o;
    ASSERT_FALSE(o.setBackendOption("no-such-option=1"));
    Error e = ee.compile(o);
    ASSERT_TRUE(bool(e));
    EXPECT_TRUE(contains(e.message(), "backend CPU: unknown option 'no-such-option'"))
        << e.message();
  }
  {
    ExecutionEngine ee("CPU");
    buildNet(ee.getModule());
    ee.setWarningHandler([](const std::string &) {});
    CompileOptions o;
    ASSERT_FALSE(o.setBackendOption("Interpreter:no-such-option=1"));
    ASSERT_FALSE(o.setBackendOption("CPU:spin-us=0"));
    Error e = ee.compile(o);
    ASSERT_TRUE(bool(e));
    EXPECT_TRUE(contains(e.message(), "backend Interpreter: unknown option 'no-such-option'"))
        << e.message();
  }
  {
    // Qualified for the CPU only: the Interpreter partition ignores it.
    ExecutionEngine ee("CPU");
    Net n = buildNet(ee.getModule());
    ee.setWarningHandler([](const std::string &) {});
    CompileOptions o;
    ASSERT_FALSE(o.setBackendOption("CPU:spin-us=0"));
    ASSERT_FALSE(o.setBackendOption("Sim:anything=1"));
    Error e = ee.compile(o);
    ASSERT_FALSE(e) << e.message();
    std::vector<float> got = runNet(ee, n);
    std::vector<double> want = expected();
    for (size_t i = 0; i < 4; i++)
      EXPECT_NEAR(got[i], want[i], 1e-5) << i;
  }
  CompileOptions bad;
  EXPECT_TRUE(bool(bad.setBackendOption(":profile=1")));
  EXPECT_TRUE(bool(bad.setBackendOption("CPU:=1")));
}

TEST(CompileOptions, ForBackendKeepsItsOwnAndUnqualifiedParameters) {
  CompileOptions o;
  ASSERT_FALSE(o.setBackendOption("profile=1"));
  ASSERT_FALSE(o.setBackendOption("CPU:spin-us=0"));
  ASSERT_FALSE(o.setBackendOption("CPU:threads=3"));
  ASSERT_FALSE(o.setBackendOption("Sim:config_file=x"));
  CompileOptions cpu = o.forBackend("CPU");
  EXPECT_EQ(cpu.backendOptions.size(), 2u);
  EXPECT_EQ(cpu.backendOptions["profile"], "1");
  EXPECT_EQ(cpu.backendOptions["spin-us"], "0");
  EXPECT_EQ(cpu.threads, 3u);
  CompileOptions interp = o.forBackend("Interpreter", /*unqualified=*/false);
  EXPECT_TRUE(interp.backendOptions.empty());
  EXPECT_EQ(interp.threads, 0u);
  CompileOptions sim = o.forBackend("Sim");
  EXPECT_EQ(sim.backendOptions.size(), 2u);
  EXPECT_EQ(sim.backendOptions["config_file"], "x");
  // "CP" is not a prefix match for "CPU:".
  EXPECT_EQ(o.forBackend("CP", false).backendOptions.size(), 0u);
}

} // namespace
