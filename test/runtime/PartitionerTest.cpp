// Partitioner: by backend support, by device memory, and as the user says; the plan in
// text and DOT.

#include "RuntimeTestUtils.h"

#include "kiln/Runtime/Partitioner.h"

#include <gtest/gtest.h>

#include <set>

using namespace kiln;
using namespace kiln::test;

namespace {

struct Backends {
  std::unique_ptr<Backend> sim = exitOnError(createBackend("Sim"));
  std::unique_ptr<Backend> interp = exitOnError(createBackend("Interpreter"));
  std::vector<PartitionerBackend> list(uint64_t simMemory) {
    return {{sim.get(), simMemory}, {interp.get(), uint64_t(1) << 34}};
  }
};

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
  uint64_t whole = estimateMemory(*n.f);
  uint64_t cap = whole / 3;
  auto plan = exitOnError(partitionFunction(n.f, "mlp", b.list(cap)));
  EXPECT_GE(plan.partitions.size(), 3u);
  expectCovers(plan, *n.f);
  for (const Partition &p : plan.partitions) {
    EXPECT_EQ(p.backendName, "Sim");
    EXPECT_LE(p.memoryBytes, cap) << p.name;
    EXPECT_EQ(p.memoryBytes, estimateMemory(*p.function));
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
  EXPECT_EQ(plan.toString(), R"(plan for network 'mlp': 2 partitions (Interpreter: 1, Sim: 1)
  partition 0 'mlp.a' on Sim [sim0, sim1]: 2 nodes, 144 bytes
    nodes:   mlp.fc0, mlp.fc0.relu
    after:   -
    inputs:  mlp.x
    outputs: mlp.mlp.fc0.relu
  partition 1 'mlp.b' on Interpreter: 3 nodes, 144 bytes
    nodes:   mlp.fc1, mlp.fc1.relu, mlp.y
    after:   0
    inputs:  mlp.mlp.fc0.relu
    outputs: mlp.y
)");
  EXPECT_EQ(plan.toDot(), R"(digraph "mlp" {
  rankdir=TB;
  node [shape=box];
  p0 [label="mlp.a\nSim sim0 sim1\n2 nodes, 144 bytes"];
  p1 [label="mlp.b\nInterpreter\n3 nodes, 144 bytes"];
  p0 -> p1 [label="mlp.mlp.fc0.relu float<1x4>"];
}
)");
}
