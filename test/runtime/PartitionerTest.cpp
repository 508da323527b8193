// Partitioner: by backend support, by device memory, and as the user says; the plan in
// text and DOT.

#include "RuntimeTestUtils.h"

#include "backends/Sim/Sim.h"
#include "kiln/Runtime/Partitioner.h"

#include <gtest/gtest.h>

#include <set>

using namespace kiln;
using namespace kiln::test;

namespace {

struct Backends {
  std::unique_ptr<Backend> sim = exitOnError(createBackend("Sim"));
  std::unique_ptr<Backend> interp = exitOnError(createBackend("Interpreter"));
  /// Sim devices of \p simMemory bytes (\p simDevices of them; 0: as many as it takes),
  /// then one host device.
  std::vector<PartitionerBackend> list(uint64_t simMemory, unsigned simDevices = 0) {
    return {{sim.get(), simMemory, simDevices}, {interp.get(), uint64_t(1) << 34, 1}};
  }
  std::vector<PartitionerBackend> simOnly(uint64_t simMemory, unsigned simDevices) {
    return {{sim.get(), simMemory, simDevices}};
  }
};

/// x [1, 32] through \p layers FullyConnected layers of 32x32 float weights (4096 bytes)
/// and 32 float biases (128 bytes), no activation functions, then saved. Every value is
/// 128 bytes (an activation rounds up to 128 too).
Net buildFCChain(Module &m, const std::string &name, unsigned layers) {
  Net n;
  n.f = m.createFunction(name);
  n.input = m.createPlaceholder(ElemKind::Float, {1, 32}, name + ".x");
  NodeValue v(n.input);
  for (unsigned i = 0; i < layers; i++)
    v = n.f->createFullyConnected(name + ".fc" + std::to_string(i), v, 32, 200 + i);
  n.outputs.push_back(n.f->createSave(name + ".y", v)->getPlaceholder());
  return n;
}

/// The device memory of \p f compiled for the Sim: what its program holds.
uint64_t simDeviceBytes(const Backends &b, Function *f) {
  std::unique_ptr<CompiledFunction> cf = exitOnError(b.sim->compile(f, CompileOptions()));
  return static_cast<SimFunction &>(*cf).getProgram().deviceBytes();
}

/// The names of the FullyConnected nodes of \p p, in order.
std::vector<std::string> fcsOf(const Partition &p) {
  std::vector<std::string> r;
  for (const auto &n : p.function->getNodes())
    if (n->getKind() == NodeKind::FullyConnected)
      r.push_back(n->getName());
  return r;
}

/// Every original node appears in exactly one partition, by name.
void expectCovers(const PartitionPlan &plan, const Function &f) {
  size_t nodes = 0;
  for (const Partition &p : plan.partitions)
    nodes += p.numNodes;
  size_t live = 0;
  for (const auto &n : f.getNodes())
    live += n->getKind() != NodeKind::Placeholder;
  EXPECT_EQ(nodes, live);
}

} // namespace

TEST(Partitioner, OneBackendThatFitsKeepsTheOriginalFunction) {
  Module m;
  Net n = buildMLP(m, "mlp", 3, 8);
  Backends b;
  auto plan = exitOnError(partitionFunction(n.f, "mlp", b.list(1 << 20)));
  ASSERT_EQ(plan.partitions.size(), 1u);
  EXPECT_EQ(plan.partitions[0].function, n.f);
  EXPECT_FALSE(plan.createdFunctions());
  EXPECT_EQ(plan.partitions[0].backendName, "Sim");
  EXPECT_EQ(m.getFunctions().size(), 1u);
  EXPECT_EQ(plan.inputs, std::vector<Placeholder *>{n.input});
  EXPECT_EQ(plan.outputs, n.outputs);
}

TEST(Partitioner, SplitsByBackendSupportIntoADag) {
  Module m;
  Net n = buildMixed(m, "mixed");
  Backends b;
  auto plan = exitOnError(partitionFunction(n.f, "mixed", b.list(1 << 20)));
  std::set<std::string> backends;
  for (const Partition &p : plan.partitions)
    backends.insert(p.backendName);
  EXPECT_EQ(backends, (std::set<std::string>{"Interpreter", "Sim"}));
  // Sim, then Sigmoid on the host, then Sim, then Tanh on the host, then Sim.
  EXPECT_GE(plan.partitions.size(), 5u);
  expectCovers(plan, *n.f);
  for (size_t i = 0; i < plan.partitions.size(); i++) {
    const Partition &p = plan.partitions[i];
    EXPECT_FALSE(p.function->verify()) << p.name;
    for (unsigned parent : p.parents)
      EXPECT_LT(parent, i) << "parents come first";
    for (const auto &node : p.function->getNodes()) {
      if (node->getKind() == NodeKind::Sigmoid || node->getKind() == NodeKind::Tanh) {
        EXPECT_EQ(p.backendName, "Interpreter");
      }
    }
  }
  EXPECT_FALSE(plan.intermediates.empty());
  EXPECT_EQ(plan.inputs, std::vector<Placeholder *>{n.input});
  EXPECT_EQ(plan.outputs.size(), 2u);
  std::string text = plan.toString();
  EXPECT_TRUE(contains(text, "plan for network 'mixed'")) << text;
  EXPECT_TRUE(contains(text, "on Sim")) << text;
  EXPECT_TRUE(contains(text, "on Interpreter")) << text;
  std::string dot = plan.toDot();
  EXPECT_TRUE(contains(dot, "digraph")) << dot;
  EXPECT_TRUE(contains(dot, "p0 -> p1")) << dot;
}

TEST(Partitioner, ErasesTheFunctionsItCreated) {
  Module m;
  Net n = buildMixed(m, "mixed");
  Backends b;
  {
    auto plan = exitOnError(partitionFunction(n.f, "mixed", b.list(1 << 20)));
    EXPECT_GT(m.getFunctions().size(), 1u);
  }
  EXPECT_EQ(m.getFunctions().size(), 1u);
  EXPECT_FALSE(n.f->verify());
}

TEST(Partitioner, SplitsByDeviceMemory) {
  Module m;
  Net n = buildMLP(m, "mlp", 6, 32); // 6 x (4 KiB weights + 128 B bias + activations)
  Backends b;
  uint64_t whole = exitOnError(estimateFootprint(*n.f)).total();
  uint64_t cap = whole / 3;
  auto plan = exitOnError(partitionFunction(n.f, "mlp", b.list(cap)));
  EXPECT_GE(plan.partitions.size(), 3u);
  expectCovers(plan, *n.f);
  for (const Partition &p : plan.partitions) {
    EXPECT_EQ(p.backendName, "Sim");
    EXPECT_LE(p.memoryBytes, cap) << p.name;
    EXPECT_EQ(p.memoryBytes, p.footprint.total());
    // What its Sim program holds; the model without the Sim's reuse never counts less.
    EXPECT_EQ(p.memoryBytes, simDeviceBytes(b, p.function)) << p.name;
    EXPECT_LE(p.memoryBytes, exitOnError(estimateFootprint(*p.function)).total()) << p.name;
    EXPECT_LE(p.memoryBytes, estimateMemory(*p.function)) << "reuse never needs more";
  }
  // A chain: each partition after the previous one.
  for (size_t i = 1; i < plan.partitions.size(); i++)
    EXPECT_EQ(plan.partitions[i].parents, std::vector<unsigned>{unsigned(i - 1)});
}

TEST(Partitioner, ANodeTooLargeForTheAcceleratorGoesToTheHost) {
  Module m;
  Net n = buildMLP(m, "mlp", 2, 64); // each FC has 16 KiB of weights
  Backends b;
  auto plan = exitOnError(partitionFunction(n.f, "mlp", b.list(4096)));
  for (const Partition &p : plan.partitions) {
    for (const auto &node : p.function->getNodes()) {
      if (node->getKind() == NodeKind::FullyConnected) {
        EXPECT_EQ(p.backendName, "Interpreter");
      }
    }
  }
  // With no host to fall back on, the error says why.
  std::vector<PartitionerBackend> simOnly = {{b.sim.get(), 4096}};
  auto e = partitionFunction(n.f, "mlp", simOnly);
  ASSERT_FALSE(e);
  Error err = e.takeError();
  EXPECT_EQ(err.code(), ErrorCode::OutOfMemory);
  EXPECT_TRUE(contains(err.message(), "mlp.fc0")) << err.message();
  EXPECT_TRUE(contains(err.message(), "its device has 4096")) << err.message();
}

TEST(Partitioner, UnsupportedEverywhereNamesTheNodes) {
  Module m;
  Net n = buildMixed(m, "mixed");
  Backends b;
  std::vector<PartitionerBackend> simOnly = {{b.sim.get(), 1 << 20}};
  auto e = partitionFunction(n.f, "mixed", simOnly);
  ASSERT_FALSE(e);
  Error err = e.takeError();
  EXPECT_EQ(err.code(), ErrorCode::Unsupported);
  EXPECT_TRUE(contains(err.message(), "'mixed.sig' (Sigmoid)")) << err.message();
  EXPECT_TRUE(contains(err.message(), "'mixed.tanh' (Tanh)")) << err.message();
  EXPECT_EQ(m.getFunctions().size(), 1u);
}

TEST(Partitioner, HonoursAUserPartition) {
  Module m;
  Net n = buildMLP(m, "mlp", 3, 8);
  Backends b;
  PartitionConfig user;
  user.partitions = {{"front", "Interpreter"}, {"back", "Sim"}};
  for (const auto &node : n.f->getNodes()) {
    const std::string &nm = node->getName();
    if (node->getKind() == NodeKind::Save)
      continue; // follows the node it saves
    user.nodeToPartition[nm] = contains(nm, "fc0") ? 0 : 1;
  }
  auto plan = exitOnError(partitionFunction(n.f, "mlp", b.list(1 << 20), &user));
  ASSERT_EQ(plan.partitions.size(), 2u);
  EXPECT_EQ(plan.partitions[0].name, "mlp.front");
  EXPECT_EQ(plan.partitions[0].backendName, "Interpreter");
  EXPECT_EQ(plan.partitions[1].name, "mlp.back");
  EXPECT_EQ(plan.partitions[1].backendName, "Sim");
  EXPECT_EQ(plan.partitions[1].parents, std::vector<unsigned>{0});
  EXPECT_EQ(plan.partitions[0].numNodes, 2u); // fc0 and its relu
}

TEST(Partitioner, UserPartitionErrors) {
  Module m;
  Net n = buildMixed(m, "mixed");
  Backends b;
  PartitionConfig user;
  user.partitions = {{"a", "Sim"}, {"b", "Interpreter"}};
  user.nodeToPartition["mixed.conv1"] = 0;
  auto e1 = partitionFunction(n.f, "mixed", b.list(1 << 20), &user);
  ASSERT_FALSE(e1);
  Error unmapped = e1.takeError();
  EXPECT_EQ(unmapped.code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(unmapped.message(), "'mixed.relu1'")) << unmapped.message();

  // Everything on the Sim: the Sigmoid cannot run there.
  for (const auto &node : n.f->getNodes())
    user.nodeToPartition[node->getName()] = 0;
  auto e2 = partitionFunction(n.f, "mixed", b.list(1 << 20), &user);
  ASSERT_FALSE(e2);
  Error unsupported = e2.takeError();
  EXPECT_EQ(unsupported.code(), ErrorCode::Unsupported);
  EXPECT_TRUE(contains(unsupported.message(), "'mixed.sig'")) << unsupported.message();

  // conv1 -> relu1 -> sig: relu1 in b, conv1 and sig in a is a cycle a -> b -> a.
  for (const auto &node : n.f->getNodes())
    user.nodeToPartition[node->getName()] = 1;
  user.nodeToPartition["mixed.conv1"] = 0;
  user.nodeToPartition["mixed.relu1"] = 1;
  user.nodeToPartition["mixed.sig"] = 0;
  user.partitions[0].backendName = "Interpreter";
  auto e3 = partitionFunction(n.f, "mixed", b.list(1 << 20), &user);
  ASSERT_FALSE(e3);
  Error cycle = e3.takeError();
  EXPECT_TRUE(contains(cycle.message(), "cycle")) << cycle.message();

  // A user partition that does not fit its device is refused, not cut.
  user.partitions[0].backendName = "Sim";
  user.partitions[1].backendName = "Sim";
  PartitionConfig onePart;
  onePart.partitions = {{"all", "Sim"}};
  Module m2;
  Net mlp = buildMLP(m2, "mlp", 3, 32);
  for (const auto &node : mlp.f->getNodes())
    onePart.nodeToPartition[node->getName()] = 0;
  auto e4 = partitionFunction(mlp.f, "mlp", b.list(1024), &onePart);
  ASSERT_FALSE(e4);
  EXPECT_EQ(e4.takeError().code(), ErrorCode::OutOfMemory);
  EXPECT_EQ(m2.getFunctions().size(), 1u);
}

TEST(Partitioner, PlanTextAndDot) {
  Module m;
  Net n = buildMLP(m, "mlp", 2, 4);
  Backends b;
  PartitionConfig user;
  user.partitions = {{"a", "Sim"}, {"b", "Interpreter"}};
  user.nodeToPartition = {{"mlp.fc0", 0}, {"mlp.fc0.relu", 0}, {"mlp.fc1", 1}, {"mlp.fc1.relu", 1}};
  auto plan = exitOnError(partitionFunction(n.f, "mlp", b.list(1 << 20), &user));
  plan.partitions[0].devices = {"sim0", "sim1"};
  // Partition a, as the Sim's plan lays it out (every buffer rounded up to 64 bytes):
  // weights 4x4x4 and 4x4 (64 + 64); x (an input, in the arena until fc0 reads it) and
  // fc0's result are live together (128); the relu writes in place over fc0's result,
  // which becomes the output placeholder. Sim cost, from the unrounded bytes:
  // 16 MACs (1 cycle), 4 Relu elements (1 cycle), 32 DMA bytes (1 cycle) at 1 GHz. The
  // Interpreter's default model: 16 MACs + 4 elements at 1 ns each.
  EXPECT_EQ(plan.toString(), R"(plan for network 'mlp': 2 partitions (Interpreter: 1, Sim: 1)
  partition 0 'mlp.a' on Sim [sim0, sim1]: 2 nodes, 256 bytes
    memory:  weights 128 B, activations with I/O 128 B; cost 3 ns
    nodes:   mlp.fc0, mlp.fc0.relu
    after:   -
    inputs:  mlp.x
    outputs: mlp.mlp.fc0.relu
  partition 1 'mlp.b' on Interpreter: 3 nodes, 240 bytes
    memory:  weights 80 B, activations 128 B, I/O 32 B; cost 20 ns
    nodes:   mlp.fc1, mlp.fc1.relu, mlp.y
    after:   0 (16 B)
    inputs:  mlp.mlp.fc0.relu
    outputs: mlp.y
)");
  EXPECT_EQ(plan.toDot(), R"(digraph "mlp" {
  rankdir=TB;
  node [shape=box];
  p0 [label="mlp.a\nSim sim0 sim1\n2 nodes, 256 bytes"];
  p1 [label="mlp.b\nInterpreter\n3 nodes, 240 bytes"];
  p0 -> p1 [label="mlp.mlp.fc0.relu float<1x4>"];
}
)");
}

// The chain of six FullyConnected layers, by hand. Without a backend's rules
// (estimateFootprint) a piece of k layers (not the last) needs 4224k bytes of weights,
// 128 in, 128 out, and activations of 128 (k = 1) or 256 (k >= 2: a layer's input and its
// result live at once; the last result stays to the end); the last piece reads 128 and
// writes y (128) instead. All six: 25344 + 256 + 256 = 25856. On the Sim, inputs and
// outputs share the activation arena while live: the value in is live with the first
// result, each result with the next, and the last result is the output placeholder, so
// any piece needs 4224k + 256 (all six: 25600).
TEST(Partitioner, AChainThatFitsStaysWhole) {
  Module m;
  Net n = buildFCChain(m, "chain", 6);
  Backends b;
  PartitionFootprint whole = exitOnError(estimateFootprint(*n.f));
  EXPECT_EQ(whole.weightBytes, 25344u);
  EXPECT_EQ(whole.ioBytes, 256u);
  EXPECT_EQ(whole.activationBytes, 256u);
  auto plan = exitOnError(partitionFunction(n.f, "chain", b.simOnly(25600, 4)));
  ASSERT_EQ(plan.partitions.size(), 1u) << "fits one of the four devices: not cut";
  EXPECT_EQ(plan.partitions[0].function, n.f);
  EXPECT_EQ(plan.partitions[0].memoryBytes, 25600u);
  EXPECT_EQ(plan.partitions[0].footprint.activationBytes, 256u);
  EXPECT_EQ(plan.partitions[0].footprint.ioBytes, 0u);
  EXPECT_TRUE(plan.partitions[0].footprint.ioInActivations);
  // One byte less: cut.
  auto cut = exitOnError(partitionFunction(n.f, "chain", b.simOnly(25599, 4)));
  EXPECT_GT(cut.partitions.size(), 1u);
}

TEST(Partitioner, CutsAChainIntoPiecesThatFitTheDevices) {
  Module m;
  Net n = buildFCChain(m, "chain", 6);
  Backends b;
  // 10000 bytes hold two layers (8448 + 256 = 8704), not three (12672 + 256 = 12928).
  auto plan = exitOnError(partitionFunction(n.f, "chain", b.simOnly(10000, 3)));
  ASSERT_EQ(plan.partitions.size(), 3u) << plan.toString();
  const std::vector<std::vector<std::string>> expected = {
      {"chain.fc0", "chain.fc1"}, {"chain.fc2", "chain.fc3"}, {"chain.fc4", "chain.fc5"}};
  for (unsigned i = 0; i < 3; i++) {
    const Partition &p = plan.partitions[i];
    EXPECT_EQ(fcsOf(p), expected[i]) << plan.toString();
    EXPECT_EQ(p.footprint.weightBytes, 8448u) << p.name;
    EXPECT_EQ(p.footprint.ioBytes, 0u) << p.name;
    EXPECT_EQ(p.footprint.activationBytes, 256u) << p.name;
    EXPECT_EQ(p.memoryBytes, 8704u) << p.name;
    EXPECT_EQ(p.memoryBytes, simDeviceBytes(b, p.function)) << p.name;
    EXPECT_EQ(p.device, int(i)) << "one device each";
    // Sim cost: 2 x 1024 MACs / 256 per cycle = 8 cycles, 256 DMA bytes / 32 = 8 cycles.
    EXPECT_DOUBLE_EQ(p.costSeconds, 16e-9) << p.name;
    if (i) {
      EXPECT_EQ(p.parents, std::vector<unsigned>{i - 1});
      EXPECT_EQ(p.parentBytes, std::vector<uint64_t>{128}) << "one [1, 32] float crosses";
    }
  }
  // Four devices: a fourth piece would not make the slowest piece faster (six equal
  // layers leave two on some device), so the cut with the fewest crossing bytes wins.
  auto four = exitOnError(partitionFunction(n.f, "chain", b.simOnly(10000, 4)));
  EXPECT_EQ(four.partitions.size(), 3u) << four.toString();
}

TEST(Partitioner, BalancesPiecesByCostOverTheDevices) {
  Module m;
  Net n = buildFCChain(m, "chain", 6);
  Backends b;
  // 15000 bytes hold three layers (12672 + 256 = 12928): two pieces would do, but three
  // devices make the slowest piece two layers instead of three.
  auto two = exitOnError(partitionFunction(n.f, "chain", b.simOnly(15000, 2)));
  ASSERT_EQ(two.partitions.size(), 2u) << two.toString();
  EXPECT_EQ(fcsOf(two.partitions[0]).size(), 3u) << two.toString();
  auto three = exitOnError(partitionFunction(n.f, "chain", b.simOnly(15000, 3)));
  ASSERT_EQ(three.partitions.size(), 3u) << three.toString();
  for (const Partition &p : three.partitions)
    EXPECT_EQ(fcsOf(p).size(), 2u) << three.toString();
  // Without a device count: the fewest pieces that fit, balanced.
  auto any = exitOnError(partitionFunction(n.f, "chain", b.simOnly(15000, 0)));
  EXPECT_EQ(any.partitions.size(), 2u) << any.toString();
}

TEST(Partitioner, ANetworkTooLargeForTheDevicesNamesTheShortfall) {
  Module m;
  Net n = buildFCChain(m, "chain", 6);
  Backends b;
  // Two devices of 10000 bytes: 20000 in all, 25600 needed.
  auto e = partitionFunction(n.f, "chain", b.simOnly(10000, 2));
  ASSERT_FALSE(e);
  Error err = e.takeError();
  EXPECT_EQ(err.code(), ErrorCode::OutOfMemory);
  const std::string &msg = err.message();
  EXPECT_TRUE(contains(msg, "does not fit on 2 Sim devices of 9.77 KiB (10000 bytes) "
                            "(19.5 KiB (20000 bytes) in all)")) << msg;
  EXPECT_TRUE(contains(msg, "it needs 25 KiB (25600 bytes) uncut (weights 24.8 KiB "
                            "(25344 bytes), activations with the inputs and outputs, each "
                            "while live, at their planned peak 256 bytes)")) << msg;
  EXPECT_TRUE(contains(msg, "5.47 KiB (5600 bytes) more than the devices hold")) << msg;
  EXPECT_TRUE(contains(msg, "it takes 3 devices")) << msg;
  // One layer alone: x or a value in (128), weights 4224, its result (128), which is the
  // output.
  EXPECT_TRUE(contains(msg, "the largest node, which cannot be cut, needs 4.38 KiB (4480 bytes) "
                            "(node 'chain.fc0' (FullyConnected)")) << msg;
  EXPECT_EQ(m.getFunctions().size(), 1u);

  // Enough memory in all (4 x 8600), but a device holds one layer only (8704 > 8600).
  auto e2 = partitionFunction(n.f, "chain", b.simOnly(8600, 4));
  ASSERT_FALSE(e2);
  std::string msg2 = e2.takeError().message();
  EXPECT_TRUE(contains(msg2, "it takes 6 devices")) << msg2;
  EXPECT_FALSE(contains(msg2, "more than the devices hold")) << msg2;
}

TEST(Partitioner, GroupsOfOneBackendShareDevicesByPlan) {
  // Sim, then Sigmoid on the host, then Sim, ...: the Sim groups are small, so with one
  // device's worth of memory they all go on one device load.
  Module m;
  Net n = buildMixed(m, "mixed");
  Backends b;
  auto plan = exitOnError(partitionFunction(n.f, "mixed", b.list(1 << 20, 2)));
  for (const Partition &p : plan.partitions)
    EXPECT_EQ(p.device, 0) << p.name;
}

namespace {

/// ResNet's shape in small: a stem, then per stage a strided convolution and a residual
/// block (two 3x3 convolutions and an Add), channels doubling and weights growing stage
/// by stage, then global average pooling and a classifier.
Net buildResidual(Module &m, const std::string &name) {
  Net n;
  Function *f = n.f = m.createFunction(name);
  n.input = m.createPlaceholder(ElemKind::Float, {1, 3, 32, 32}, name + ".x");
  uint64_t seed = 300;
  NodeValue v = f->createRelu(name + ".stem.relu",
                              f->createConv(name + ".stem", n.input, 16, 3, 1, 1, 1, 1, seed++));
  for (dim_t c : {32, 64, 128}) {
    std::string s = name + ".s" + std::to_string(c);
    v = f->createRelu(s + ".down.relu", f->createConv(s + ".down", v, c, 3, 2, 1, 1, 1, seed++));
    NodeValue r = f->createRelu(s + ".a.relu", f->createConv(s + ".a", v, c, 3, 1, 1, 1, 1, seed++));
    NodeValue b = f->createConv(s + ".b", r, c, 3, 1, 1, 1, 1, seed++);
    v = f->createRelu(s + ".relu", f->createAdd(s + ".add", b, v));
  }
  NodeValue pooled = f->createFlatten(name + ".flat", f->createGlobalAvgPool(name + ".gap", v));
  n.outputs.push_back(
      f->createSave(name + ".y", f->createFullyConnected(name + ".fc", pooled, 10, seed))
          ->getPlaceholder());
  return n;
}

} // namespace

// The resnet50 case in small: a device memory that three devices cannot hold the network
// in, four can. It loads in four partitions, one per device, and runs exactly as the
// Interpreter does; on three devices the error names the shortfall.
TEST(Partitioner, AResidualNetworkOverFourSimDevicesMatchesTheInterpreter) {
  Module m;
  Net n = buildResidual(m, "res");
  uint64_t whole = exitOnError(estimateFootprint(*n.f)).total();
  uint64_t mem = whole * 35 / 100; // four devices fit from 31% on, three from 44%
  auto hm = exitOnError(HostManager::create(simDevices(4, mem, /*withHost=*/false)));
  NetworkOptions opts;
  opts.prepare = false; // the function as built, which `whole` measured
  Error added = hm->addNetwork(n.f, opts);
  ASSERT_FALSE(added) << "whole " << whole << ", device " << mem << ": " << added.message();
  std::string plan = exitOnError(hm->getPlanText("res"));
  EXPECT_EQ(exitOnError(hm->getNumPartitions("res")), 4u) << plan;
  for (unsigned i = 0; i < 4; i++) {
    EXPECT_GT(hm->getDevice(i)->getUsedMemory(), 0u) << plan;
    EXPECT_LE(hm->getDevice(i)->getUsedMemory(), mem) << plan;
  }
  for (unsigned i = 0; i < 2; i++) {
    Tensor x = makeInput(n.input, i);
    auto b = makeBindings(n, x);
    ASSERT_FALSE(hm->runNetworkBlocking("res", *b));
    std::string why;
    EXPECT_TRUE(sameOutputs(n, *b, reference(n, x), &why)) << why;
  }

  Module m2;
  Net n2 = buildResidual(m2, "res");
  auto three = exitOnError(HostManager::create(simDevices(3, mem, /*withHost=*/false)));
  Error e = three->addNetwork(n2.f, opts);
  ASSERT_TRUE(e);
  EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
  EXPECT_TRUE(contains(e.message(), "does not fit on 3 Sim devices")) << e.message();
  EXPECT_TRUE(contains(e.message(), "it takes 4 devices")) << e.message();
  EXPECT_FALSE(three->hasNetwork("res"));
}

namespace {

/// A backend for the partitioner only: it runs every node, a node's cost is the number of
/// microseconds given for its name (when not listed: 1 us for a FullyConnected, nothing
/// for the rest), and moving bytes costs nothing. It never compiles.
class CostedBackend : public Backend {
public:
  explicit CostedBackend(std::map<std::string, double> micros) : micros_(std::move(micros)) {}
  std::string getName() const override { return "Costed"; }
  bool isOpSupported(const Node &) const override { return true; }
  double estimateNodeSeconds(const Node &n) const override {
    auto it = micros_.find(n.getName());
    if (it != micros_.end())
      return it->second * 1e-6;
    return n.getKind() == NodeKind::FullyConnected ? 1e-6 : 0.0;
  }
  Expected<std::unique_ptr<CompiledFunction>> generateCode(Function *, PlannedIR &,
                                                           const CompileOptions &) const override {
    return makeError(ErrorCode::Unsupported, "the Costed backend only partitions");
  }

private:
  std::map<std::string, double> micros_;
};

/// Layers per partition of a plan of an FC chain.
std::vector<size_t> layerCounts(const PartitionPlan &plan) {
  std::vector<size_t> r;
  for (const Partition &p : plan.partitions)
    r.push_back(fcsOf(p).size());
  return r;
}

} // namespace

TEST(Partitioner, BalancesByTheCostModelNotByNodeCount) {
  // Eight layers; the first and the last cost 4 us, the others 1 us (14 us in all). 18000
  // bytes hold four layers (4 x 4224 + 256 + 256 = 17408), not five (21632). Over three
  // devices the slowest piece is at best 5 us, and only 2 + 4 + 2 layers reach it (fc0-1:
  // 5, fc2-5: 4, fc6-7: 5); equal layer counts (3 + 3 + 2) would make a 6 us piece.
  Module m;
  Net n = buildFCChain(m, "chain", 8);
  CostedBackend costed({{"chain.fc0", 4}, {"chain.fc7", 4}});
  auto plan = exitOnError(partitionFunction(n.f, "chain", {{&costed, 18000, 3}}));
  EXPECT_EQ(layerCounts(plan), (std::vector<size_t>{2, 4, 2})) << plan.toString();
  const double expected[] = {5e-6, 4e-6, 5e-6};
  for (size_t i = 0; i < plan.partitions.size() && i < 3; i++) {
    EXPECT_NEAR(plan.partitions[i].costSeconds, expected[i], 1e-12) << plan.toString();
    EXPECT_EQ(plan.partitions[i].device, int(i));
    EXPECT_LE(plan.partitions[i].memoryBytes, 18000u);
  }
  // Two devices: 4 + 4 layers are the only cut that fits (7 us each).
  auto two = exitOnError(partitionFunction(n.f, "chain", {{&costed, 18000, 2}}));
  EXPECT_EQ(layerCounts(two), (std::vector<size_t>{4, 4})) << two.toString();
  // A heavy middle layer: fc3 costs 10 us, so the slowest piece is fc3 alone whatever
  // the cut; fc0-2 and fc4-7 fit around it, and a fourth piece would add a crossing.
  CostedBackend heavy({{"chain.fc3", 10}});
  auto four = exitOnError(partitionFunction(n.f, "chain", {{&heavy, 18000, 4}}));
  ASSERT_EQ(four.partitions.size(), 3u) << "a fourth piece cannot beat fc3's 10 us; fewer "
                                           "cuts cross fewer bytes\n"
                                        << four.toString();
  EXPECT_EQ(fcsOf(four.partitions[1]), std::vector<std::string>{"chain.fc3"}) << four.toString();
}

TEST(Partitioner, EightDevicesHoldASixteenLayerChainTwoLayersEach) {
  Module m;
  Net n = buildFCChain(m, "chain", 16);
  Backends b;
  // 10000 bytes hold two layers (8704), not three (12928): 16 layers need all 8 devices.
  auto plan = exitOnError(partitionFunction(n.f, "chain", b.simOnly(10000, 8)));
  ASSERT_EQ(plan.partitions.size(), 8u) << plan.toString();
  for (unsigned i = 0; i < 8; i++) {
    const Partition &p = plan.partitions[i];
    EXPECT_EQ(fcsOf(p), (std::vector<std::string>{"chain.fc" + std::to_string(2 * i),
                                                  "chain.fc" + std::to_string(2 * i + 1)}))
        << plan.toString();
    EXPECT_EQ(p.memoryBytes, 8704u) << p.name;
    EXPECT_EQ(p.device, int(i));
    if (i) {
      EXPECT_EQ(p.parentBytes, std::vector<uint64_t>{128}) << "one [1, 32] float per cut";
    }
  }
  // Seven devices: 70000 bytes in all hold the 67840 the chain needs uncut, but some piece
  // must take three layers (12928 bytes).
  auto e = partitionFunction(n.f, "chain", b.simOnly(10000, 7));
  ASSERT_FALSE(e);
  Error err = e.takeError();
  EXPECT_EQ(err.code(), ErrorCode::OutOfMemory);
  const std::string &msg = err.message();
  EXPECT_TRUE(contains(msg, "it needs 66.2 KiB (67840 bytes) uncut")) << msg;
  EXPECT_TRUE(contains(msg, "9.46 KiB (9692 bytes) per device on average, but a piece ends "
                            "only between nodes")) << msg;
  EXPECT_TRUE(contains(msg, "it takes 8 devices")) << msg;
  EXPECT_TRUE(contains(msg, "cut into 7 pieces the best cut needs devices of 12.6 KiB (12928 "
                            "bytes), 2.86 KiB (2928 bytes) more than each has: its largest "
                            "piece ('chain.fc")) << msg;
  EXPECT_TRUE(contains(msg, "needs weights 12.4 KiB (12672 bytes), activations with the "
                            "inputs and outputs, each while live, at their planned peak 256 "
                            "bytes")) << msg;
  EXPECT_FALSE(contains(msg, "more than the devices hold")) << msg;
}

TEST(Partitioner, PacksDeviceLoadsWhereTheGreedyChoiceFails) {
  // Most room first puts 3 and 3 on different devices, then 2 + 2 and no room for the
  // last 2; the only packing is 3 + 3 and 2 + 2 + 2.
  std::vector<unsigned> at = packDeviceLoads({3, 3, 2, 2, 2}, {6, 6});
  ASSERT_EQ(at.size(), 5u);
  EXPECT_EQ(at[0], at[1]);
  EXPECT_NE(at[0], at[2]);
  EXPECT_EQ(at[2], at[3]);
  EXPECT_EQ(at[3], at[4]);
  // Spreads when there is room: the two largest on different devices.
  std::vector<unsigned> spread = packDeviceLoads({5, 4, 1}, {10, 10});
  ASSERT_EQ(spread.size(), 3u);
  EXPECT_NE(spread[0], spread[1]);
  EXPECT_TRUE(packDeviceLoads({7, 6}, {6, 6}).empty()) << "7 fits nowhere";
  EXPECT_TRUE(packDeviceLoads({4, 4, 4}, {6, 6}).empty()) << "three loads, two devices";
  EXPECT_TRUE(packDeviceLoads({1}, {}).empty()) << "no device";
}

TEST(Partitioner, DotEscapesNames) {
  Module m;
  Net n = buildMLP(m, "mlp", 2, 4);
  Backends b;
  PartitionConfig user;
  user.partitions = {{"say \"hi\"", "Sim"}, {"back\\slash", "Interpreter"}};
  user.nodeToPartition = {{"mlp.fc0", 0}, {"mlp.fc0.relu", 0}, {"mlp.fc1", 1}, {"mlp.fc1.relu", 1}};
  auto plan = exitOnError(partitionFunction(n.f, "net \"q\"", b.list(1 << 20), &user));
  plan.partitions[0].devices = {"sim\"0"};
  EXPECT_EQ(plan.toDot(), R"(digraph "net \"q\"" {
  rankdir=TB;
  node [shape=box];
  p0 [label="net \"q\".say \"hi\"\nSim sim\"0\n2 nodes, 256 bytes"];
  p1 [label="net \"q\".back\\slash\nInterpreter\n3 nodes, 240 bytes"];
  p0 -> p1 [label="net \"q\".mlp.fc0.relu float<1x4>"];
}
)");
}

TEST(Partitioner, ASixteenLayerChainRunsOverEightSimDevices) {
  // Two layers (8704 bytes) per device of 10000, one piece per device, every device used;
  // the outputs equal the Interpreter's on the whole function.
  Module m;
  Net n = buildFCChain(m, "chain", 16);
  auto hm = exitOnError(HostManager::create(simDevices(8, 10000, /*withHost=*/false)));
  NetworkOptions opts;
  opts.prepare = false;
  Error added = hm->addNetwork(n.f, opts);
  ASSERT_FALSE(added) << added.message();
  std::string plan = exitOnError(hm->getPlanText("chain"));
  EXPECT_EQ(exitOnError(hm->getNumPartitions("chain")), 8u) << plan;
  for (unsigned i = 0; i < 8; i++)
    EXPECT_EQ(hm->getDevice(i)->getUsedMemory(), 8704u) << plan;
  for (unsigned i = 0; i < 2; i++) {
    Tensor x = makeInput(n.input, i);
    auto b = makeBindings(n, x);
    ASSERT_FALSE(hm->runNetworkBlocking("chain", *b));
    std::string why;
    EXPECT_TRUE(sameOutputs(n, *b, reference(n, x), &why)) << why;
  }
}

TEST(Partitioner, PlanTextKeepsFiguresBelowAThousandOfTheirUnit) {
  Module m;
  Net n = buildMLP(m, "mlp", 2, 4);
  Backends b;
  auto plan = exitOnError(partitionFunction(n.f, "mlp", b.list(1 << 20)));
  ASSERT_EQ(plan.partitions.size(), 1u);
  Partition &p = plan.partitions[0];
  // 1028160 bytes are 1004 KiB, 0.981 MiB; 0.9997 ms would be 999.7 us.
  p.memoryBytes = p.footprint.weightBytes = 1028160;
  p.costSeconds = 0.9997e-3;
  std::string text = plan.toString();
  EXPECT_TRUE(contains(text, "0.981 MiB (1028160 bytes)")) << text;
  EXPECT_TRUE(contains(text, "weights 0.981 MiB")) << text;
  EXPECT_TRUE(contains(text, "cost 1 ms")) << text;
  EXPECT_FALSE(contains(text, "e+")) << text;
}

// A residual block, by hand: x [1, 256] floats (1 KiB); a = fc(x), b = fc(a) (each 256x256
// weights and 256 biases: 263168 bytes); c = a + b; d = relu(c); save d. Every value is
// 1024 bytes.
//  - Without reuse (estimateFootprint, no backend): a, b and c live at the Add: 3072 bytes
//    of activations, x and y in a region of their own (2048): 526336 + 2048 + 3072 = 531456.
//  - On the Sim, whose IR passes let an element-wise node write over an operand that dies
//    there, and whose placeholders share the arena while live: x with a (2048) at the
//    first fc, a with b (2048) at the second and at the Add (c over a), then d over c, and
//    y takes d's buffer: 2048 bytes of activations and I/O, 528384 in all.
TEST(Partitioner, CountsTheSimsInPlaceReuseAsItsPlanDoes) {
  Module m;
  Net n;
  n.f = m.createFunction("res");
  n.input = m.createPlaceholder(ElemKind::Float, {1, 256}, "res.x");
  auto *a = n.f->createFullyConnected("res.a", n.input, 256, 7);
  auto *bb = n.f->createFullyConnected("res.b", a, 256, 8);
  auto *c = n.f->createAdd("res.c", a, bb);
  auto *d = n.f->createRelu("res.d", c);
  n.outputs.push_back(n.f->createSave("res.y", d)->getPlaceholder());
  Backends b;
  PartitionFootprint plain = exitOnError(estimateFootprint(*n.f));
  EXPECT_EQ(plain.weightBytes, 526336u);
  EXPECT_EQ(plain.ioBytes, 2048u);
  EXPECT_EQ(plain.activationBytes, 3072u);
  EXPECT_EQ(plain.total(), 531456u);

  auto plan = exitOnError(partitionFunction(n.f, "res", b.simOnly(528384, 1)));
  ASSERT_EQ(plan.partitions.size(), 1u);
  const Partition &p = plan.partitions[0];
  EXPECT_EQ(p.footprint.weightBytes, 526336u);
  EXPECT_EQ(p.footprint.activationBytes, 2048u);
  EXPECT_EQ(p.footprint.ioBytes, 0u);
  EXPECT_EQ(p.memoryBytes, 528384u);
  EXPECT_EQ(p.memoryBytes, simDeviceBytes(b, n.f)) << "what the Sim's program holds";
  // A byte less does not fit one device.
  auto e = partitionFunction(n.f, "res", b.simOnly(528383, 1));
  ASSERT_FALSE(e);
  EXPECT_EQ(e.takeError().code(), ErrorCode::OutOfMemory);

  // Loaded on a Sim device of exactly that size, it runs and matches the Interpreter.
  auto hm = exitOnError(HostManager::create(simDevices(1, 528384, /*withHost=*/false)));
  NetworkOptions opts;
  opts.prepare = false;
  Error added = hm->addNetwork(n.f, opts);
  ASSERT_FALSE(added) << added.message();
  EXPECT_EQ(hm->getDevice(0)->getUsedMemory(), 528384u);
  Tensor x = makeInput(n.input, 3);
  auto bind = makeBindings(n, x);
  ASSERT_FALSE(hm->runNetworkBlocking("res", *bind));
  std::string why;
  EXPECT_TRUE(sameOutputs(n, *bind, reference(n, x), &why)) << why;
}
