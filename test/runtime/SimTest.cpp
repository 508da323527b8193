// The Sim backend: its config, its operator subset, exactness against the Interpreter,
// and its cost model.

#include "RuntimeTestUtils.h"

#include "backends/Sim/Sim.h"
#include "backends/Sim/SimDeviceManager.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <future>

using namespace kiln;
using namespace kiln::test;

TEST(SimConfig, DefaultsJsonAndParameters) {
  SimConfig d;
  EXPECT_EQ(d.memoryBytes, uint64_t(64) << 20);
  auto c = exitOnError(SimConfig::fromJSON(
      R"({"memory_bytes": 4096, "clock_mhz": 500.5, "macs_per_cycle_i8": 8192})"));
  EXPECT_EQ(c.memoryBytes, 4096u);
  EXPECT_DOUBLE_EQ(c.clockMHz, 500.5);
  EXPECT_EQ(c.macsPerCycleI8, 8192u);
  EXPECT_EQ(c.macsPerCycleF32, d.macsPerCycleF32);
  // Round trip.
  auto again = exitOnError(SimConfig::fromJSON(c.toJSON()));
  EXPECT_EQ(again.toJSON(), c.toJSON());

  std::string path = ::testing::TempDir() + "/sim.json";
  {
    std::ofstream f(path);
    f << "{ \"vector_lanes\": 16,\n  \"dma_bytes_per_cycle\": 8 }\n";
  }
  auto p = exitOnError(SimConfig::fromParameters({{"config_file", path}, {"vector_lanes", "32"}}));
  EXPECT_EQ(p.vectorLanes, 32u); // parameters override the file
  EXPECT_EQ(p.dmaBytesPerCycle, 8u);
  std::remove(path.c_str());
}

TEST(SimConfig, TheExampleFileIsValid) {
  auto c = SimConfig::fromFile("backends/Sim/example-config.json");
  ASSERT_TRUE(c) << c.getError().message();
  EXPECT_EQ(c->memoryBytes, uint64_t(32) << 20);
}

TEST(SimConfig, ErrorsNameTheProblem) {
  auto unknown = SimConfig::fromJSON(R"({"memory": 1})");
  ASSERT_FALSE(unknown);
  EXPECT_TRUE(contains(unknown.getError().message(), "unknown key 'memory'"));
  auto bad = SimConfig::fromJSON(R"({"vector_lanes": 0})");
  ASSERT_FALSE(bad);
  EXPECT_TRUE(contains(bad.getError().message(), "vector_lanes must be a positive integer"));
  auto nested = SimConfig::fromJSON(R"({"mac": {"f32": 1}})");
  ASSERT_FALSE(nested);
  EXPECT_TRUE(contains(nested.getError().message(), "flat object of numbers"));
  auto syntax = SimConfig::fromJSON(R"({"clock_mhz": 1,})");
  ASSERT_FALSE(syntax);
  EXPECT_EQ(syntax.getError().code(), ErrorCode::InvalidArgument);
  auto missing = SimConfig::fromFile("/nonexistent/sim.json");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.getError().code(), ErrorCode::NotFound);
  auto param = SimConfig::fromParameters({{"clock_mhz", "fast"}});
  ASSERT_FALSE(param);
  EXPECT_TRUE(contains(param.getError().message(), "'fast' is not a number"));
}

TEST(Sim, SupportsItsSubsetOnly) {
  auto sim = exitOnError(createBackend("Sim"));
  Module m;
  Function *f = m.createFunction("f");
  auto *x = m.createPlaceholder(ElemKind::Float, {1, 4}, "x");
  auto *xb = m.createPlaceholder(ElemKind::BFloat16, {1, 4}, "xb");
  EXPECT_TRUE(sim->isOpSupported(*f->createRelu("relu", x)));
  EXPECT_TRUE(sim->isOpSupported(*f->createAdd("add", x, x)));
  EXPECT_FALSE(sim->isOpSupported(*f->createSigmoid("sig", x)));
  EXPECT_FALSE(sim->isOpSupported(*f->createSub("sub", x, x)));
  EXPECT_FALSE(sim->isOpSupported(*f->createRelu("relu_bf16", xb))); // no bfloat16 path
  TypeRef q = m.uniqueType(ElemKind::Int8Q, {1, 4}, 0.1f, 0);
  auto *qn = f->createQuantize("q", q, x);
  EXPECT_TRUE(sim->isOpSupported(*qn));
  EXPECT_TRUE(sim->isOpSupported(*f->createRelu("qrelu", qn)));
  EXPECT_TRUE(
      sim->isOpSupported(*f->createDequantize("dq", m.uniqueType(ElemKind::Float, {1, 4}), qn)));
}

namespace {

/// Compiles \p n for the Sim and runs it through a Sim device; checks the outputs equal
/// the Interpreter's bit for bit and returns the device's stats.
SimDeviceManager::Stats runOnSim(const Net &n, uint64_t *cycles = nullptr) {
  auto sim = exitOnError(createBackend("Sim"));
  auto cf = exitOnError(sim->compile(n.f, {}));
  DeviceConfig c;
  c.backendName = "Sim";
  auto dm = exitOnError(createDeviceManager(*sim, c));
  exitOnError(dm->init());
  exitOnError(dm->addNetwork("n", cf.get(), 1000));
  Tensor x = makeInput(n.input, 7);
  std::vector<Tensor> ref = reference(n, x);
  auto b = makeBindings(n, x);
  ExecutionContext ctx(b.get());
  std::promise<std::pair<std::string, uint64_t>> done;
  dm->runFunction("n", &ctx, [&](Error e, const DeviceRunStats &s) {
    done.set_value({e ? e.message() : "", s.cycles});
  });
  auto r = done.get_future().get();
  EXPECT_EQ(r.first, "");
  if (cycles)
    *cycles = r.second;
  std::string why;
  EXPECT_TRUE(sameOutputs(n, *b, ref, &why)) << why;
  return static_cast<SimDeviceManager &>(*dm).getStats();
}

} // namespace

TEST(Sim, ExactAgainstTheInterpreterForFloat32) {
  Module m;
  Net n = buildMLP(m, "mlp", 3, 16);
  uint64_t cycles = 0;
  auto stats = runOnSim(n, &cycles);
  EXPECT_EQ(stats.runs, 1u);
  EXPECT_EQ(stats.cycles, cycles);
  EXPECT_GT(cycles, 0u);
  // Input in and output out (2 x 16 floats), and the program's tiles: per layer the
  // FullyConnected's input row, weights, bias and result (16 + 256 + 16 + 16 floats) and
  // the Relu's input and result (16 + 16 floats).
  EXPECT_EQ(stats.dmaBytes, 2u * 16 * 4 + 3u * (16 + 256 + 16 + 16 + 16 + 16) * 4);
  EXPECT_EQ(stats.loadDmaBytes, 3u * (16 * 16 + 16) * 4); // weights and biases, once
}

TEST(Sim, ExactAgainstTheInterpreterForInt8) {
  Module m;
  Net n;
  Function *f = n.f = m.createFunction("convs");
  n.input = m.createPlaceholder(ElemKind::Float, {1, 2, 6, 6}, "x");
  auto *conv = f->createConv("conv", n.input, 3, 3, 1, 1, 1, 1, 5);
  TypeRef q = m.uniqueType(ElemKind::Int8Q, conv->getResult().dims(), 0.02f, -4);
  auto *qc = f->createQuantize("q", q, conv);
  auto *relu = f->createRelu("qrelu", qc);
  auto *pool = f->createMaxPool("qpool", relu, {2, 2}, {2, 2}, {0, 0, 0, 0});
  auto *dq =
      f->createDequantize("dq", m.uniqueType(ElemKind::Float, pool->getResult().dims()), pool);
  n.outputs.push_back(f->createSave("y", dq)->getPlaceholder());
  runOnSim(n);
}

TEST(Sim, ExactAgainstTheInterpreterForFloat16) {
  Module m;
  Net n;
  n.f = m.createFunction("h");
  n.input = m.createPlaceholder(ElemKind::Float16, {2, 8}, "x16");
  Tensor w(ElemKind::Float16, {8, 8});
  PseudoRNG rng(3);
  w.randomize(-1, 1, rng);
  auto *mm = n.f->createMatMul("mm", n.input, m.createConstant("w", std::move(w)));
  auto *r = n.f->createRelu("r", mm);
  n.outputs.push_back(n.f->createSave("y", n.f->createAdd("add", r, mm))->getPlaceholder());
  SimWork work = countWork(*n.f);
  EXPECT_EQ(work.macsF16, 2u * 8 * 8);
  EXPECT_EQ(work.macsF32, 0u);
  runOnSim(n);
}

TEST(Sim, CostModelCountsMacsPerPathAndDma) {
  Module m;
  Function *f = m.createFunction("f");
  auto *x = m.createPlaceholder(ElemKind::Float, {1, 3, 8, 8}, "x");
  auto *conv = f->createConv("conv", x, 4, 3, 1, 1); // out [1,4,8,8], 3*3*3 MACs each
  auto *pool = f->createMaxPool("pool", conv, {2, 2}, {2, 2}, {0, 0, 0, 0}); // [1,4,4,4]
  f->createSave("y", pool);
  SimWork w = countWork(*f);
  EXPECT_EQ(w.macsF32, 4u * 8 * 8 * 27);
  EXPECT_EQ(w.vectorElems, 4u * 4 * 4 * 4);
  EXPECT_EQ(w.inputBytes, 3u * 8 * 8 * 4);
  EXPECT_EQ(w.outputBytes, 4u * 4 * 4 * 4);
  EXPECT_EQ(w.weightBytes, (4u * 27 + 4) * 4);
  SimConfig c;
  c.macsPerCycleF32 = 64;
  c.vectorLanes = 16;
  c.dmaBytesPerCycle = 16;
  c.launchCycles = 10;
  c.clockMHz = 100;
  SimCost cost = estimateCost(w, c);
  EXPECT_EQ(cost.computeCycles, 4u * 8 * 8 * 27 / 64 + 256 / 16);
  EXPECT_EQ(cost.dmaBytes, w.inputBytes + w.outputBytes);
  EXPECT_EQ(cost.dmaCycles, (768u + 256) / 16);
  EXPECT_EQ(cost.cycles, 10 + cost.computeCycles + cost.dmaCycles);
  EXPECT_DOUBLE_EQ(cost.seconds, double(cost.cycles) / 100e6);
}

TEST(Sim, DeviceTakesItsMemoryFromTheConfig) {
  auto sim = exitOnError(createBackend("Sim"));
  DeviceConfig c;
  c.backendName = "Sim";
  c.parameters = {{"memory_bytes", "12345"}};
  auto dm = exitOnError(createDeviceManager(*sim, c));
  ASSERT_FALSE(dm->init());
  EXPECT_EQ(dm->getMaximumMemory(), 12345u);
  c.memoryBytes = 777; // the runtime's setting wins
  auto dm2 = exitOnError(createDeviceManager(*sim, c));
  ASSERT_FALSE(dm2->init());
  EXPECT_EQ(dm2->getMaximumMemory(), 777u);
  c.parameters = {{"no_such_key", "1"}};
  auto dm3 = exitOnError(createDeviceManager(*sim, c));
  Error e = dm3->init();
  ASSERT_TRUE(e);
  EXPECT_TRUE(contains(e.message(), "no_such_key")) << e.message();
}
