// Provisioner: partitions packed onto the devices' free memory, each device load on one
// device.

#include "RuntimeTestUtils.h"

#include "kiln/Runtime/Partitioner.h"
#include "kiln/Runtime/Provisioner.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::test;

namespace {

/// x [1, 32] through \p layers FullyConnected layers of 32x32 float weights and 32 biases
/// (4224 bytes a layer), then saved.
Net buildFCChain(Module &m, const std::string &name, unsigned layers) {
  Net n;
  n.f = m.createFunction(name);
  n.input = m.createPlaceholder(ElemKind::Float, {1, 32}, name + ".x");
  NodeValue v(n.input);
  for (unsigned i = 0; i < layers; i++)
    v = n.f->createFullyConnected(name + ".fc" + std::to_string(i), v, 32, 400 + i);
  n.outputs.push_back(n.f->createSave(name + ".y", v)->getPlaceholder());
  return n;
}

std::shared_ptr<DeviceManager> makeSim(const Backend &sim, uint64_t memory, unsigned index) {
  DeviceConfig c;
  c.backendName = "Sim";
  c.memoryBytes = memory;
  auto d = exitOnError(createDeviceManager(sim, c, index));
  exitOnError(d->init());
  return d;
}

} // namespace

TEST(Provisioner, PacksATightFitThatMostFreeFirstWouldMiss) {
  // Twelve layers in five user partitions: 3 + 3 layers (12928 bytes each: 3 x 4224
  // weights and 256 of activations with the value in and out, which the Sim's plan keeps
  // in the arena while live) and 2 + 2 + 2 (8704 each). Two devices of 26112 bytes hold
  // them only as {3, 3} and {2, 2, 2}; most free memory first would
  // put the two large ones apart and leave the last small one without room.
  Module m;
  Net n = buildFCChain(m, "chain", 12);
  PartitionConfig user;
  const unsigned partOf[] = {0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 4, 4};
  for (unsigned p = 0; p < 5; p++)
    user.partitions.push_back({"u" + std::to_string(p), "Sim"});
  for (unsigned i = 0; i < 12; i++)
    user.nodeToPartition["chain.fc" + std::to_string(i)] = partOf[i];
  auto sim = exitOnError(createBackend("Sim"));
  const uint64_t memory = 26112;
  auto plan = exitOnError(partitionFunction(n.f, "chain", {{sim.get(), memory, 2}}, &user));
  ASSERT_EQ(plan.partitions.size(), 5u);
  const uint64_t sizes[] = {12928, 12928, 8704, 8704, 8704};
  for (unsigned p = 0; p < 5; p++)
    EXPECT_EQ(plan.partitions[p].memoryBytes, sizes[p]) << plan.toString();

  auto d0 = makeSim(*sim, memory, 0), d1 = makeSim(*sim, memory, 1);
  Provisioner prov({d0.get(), d1.get()}, {{"Sim", sim.get()}});
  auto loaded = prov.provision(plan, {});
  ASSERT_TRUE(loaded) << loaded.getError().message();
  ASSERT_EQ(loaded->size(), 5u);
  DeviceManager *large = (*loaded)[0].devices.at(0), *small = (*loaded)[2].devices.at(0);
  EXPECT_NE(large, small);
  EXPECT_EQ((*loaded)[1].devices.at(0), large);
  EXPECT_EQ((*loaded)[3].devices.at(0), small);
  EXPECT_EQ((*loaded)[4].devices.at(0), small);
  EXPECT_EQ(large->getUsedMemory(), 25856u);
  EXPECT_EQ(small->getUsedMemory(), 26112u);
  prov.unprovision(*loaded);
  EXPECT_EQ(d0->getUsedMemory(), 0u);
  EXPECT_EQ(d1->getUsedMemory(), 0u);
}

TEST(Provisioner, PartitionsThatCannotBePlacedNameTheLoads) {
  // Three partitions of 12928 bytes on two devices of 20000: 40000 bytes would hold the
  // 38784 they need, but no device holds two.
  Module m;
  Net n = buildFCChain(m, "chain", 9);
  PartitionConfig user;
  for (unsigned p = 0; p < 3; p++)
    user.partitions.push_back({"u" + std::to_string(p), "Sim"});
  for (unsigned i = 0; i < 9; i++)
    user.nodeToPartition["chain.fc" + std::to_string(i)] = i / 3;
  auto sim = exitOnError(createBackend("Sim"));
  auto e = partitionFunction(n.f, "chain", {{sim.get(), 20000, 2}}, &user);
  ASSERT_FALSE(e);
  Error err = e.takeError();
  EXPECT_EQ(err.code(), ErrorCode::OutOfMemory);
  EXPECT_TRUE(contains(err.message(), "its Sim partitions need 37.9 KiB (38784 bytes) in all but "
                                      "cannot be placed on 2 devices of 19.5 KiB (20000 bytes)"))
      << err.message();
  EXPECT_TRUE(contains(err.message(), "partition 'chain.u0' 12.6 KiB, partition 'chain.u1' "
                                      "12.6 KiB, partition 'chain.u2' 12.6 KiB"))
      << err.message();
}
