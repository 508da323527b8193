// The CPU backend's constant arena (codegen/Codegen.h): weights packed into it keep their
// bytes as it grows, new bytes are zero, and the program takes the memory over.
#include "backends/CPU/codegen/Codegen.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace {

using namespace kiln::cpu;

TEST(ConstantArena, GrowsKeepingBytesAndZeroFillsNewOnes) {
  ConstantArena a;
  EXPECT_TRUE(a.empty());
  // Grow in steps across several capacity increases (the first mapping is 2 MB).
  uint64_t size = 0;
  for (uint64_t step : {uint64_t(100), uint64_t(3) << 20, uint64_t(5) << 20, uint64_t(1) << 20}) {
    uint64_t old = size;
    size += step;
    ASSERT_TRUE(a.resize(size));
    ASSERT_EQ(a.size(), size);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u);
    for (uint64_t i = 0; i < old; i++) // what was written before is still there
      ASSERT_EQ(uint8_t(a.data()[i]), uint8_t(i * 7 + 3)) << "byte " << i;
    for (uint64_t i = old; i < size; i++) {
      ASSERT_EQ(a.data()[i], 0) << "new byte " << i;
      a.data()[i] = char(uint8_t(i * 7 + 3));
    }
  }
  // Asking for less never shrinks it.
  ASSERT_TRUE(a.resize(10));
  EXPECT_EQ(a.size(), size);

  auto r = a.release();
  ASSERT_TRUE(bool(r));
  ConstantArena::Released mem = std::move(r).get();
  EXPECT_TRUE(a.empty());
  EXPECT_GE(mem.mappedBytes, size);
  EXPECT_EQ(uint8_t(mem.data[size - 1]), uint8_t((size - 1) * 7 + 3));
  freeConstantArena(mem.data, mem.mappedBytes);
}

TEST(ConstantArena, AnEmptyArenaStillHandsOverMemory) {
  ConstantArena a;
  auto r = a.release();
  ASSERT_TRUE(bool(r));
  ConstantArena::Released mem = std::move(r).get();
  EXPECT_NE(mem.data, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(mem.data) % 64, 0u);
  freeConstantArena(mem.data, mem.mappedBytes);
}

} // namespace
