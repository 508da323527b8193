// The CPU backend's constant arena (codegen/Codegen.h): weights packed into it keep their
// bytes as it grows, new bytes are zero, and the program takes the memory over.
#include "backends/CPU/codegen/Codegen.h"
#include "kiln/Base/Pages.h"
#include "test/base/HugePageAdvice.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

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

#if defined(__linux__)
/// The pages of [p, p + bytes) that are resident (mincore).
uint64_t residentPages(const char *p, uint64_t bytes) {
  const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((bytes + page - 1) / page);
  EXPECT_EQ(mincore(const_cast<char *>(p), bytes, v.data()), 0);
  uint64_t n = 0;
  for (unsigned char c : v)
    n += c & 1;
  return n;
}

// The arena grows by half its capacity at a time (mremap moves pages, not bytes), but
// only the pages its contents reach are ever faulted in: a network's fresh pages at
// compile are its packed weights', not the arena's spare capacity (README, "Memory").
TEST(ConstantArena, LargeGrowthsTouchNoSpareCapacity) {
  constexpr uint64_t kHuge = 2u << 20;
  ConstantArena a;
  uint64_t size = 0;
  for (uint64_t step : {uint64_t(20) << 20, uint64_t(9) << 20, uint64_t(12) << 20}) {
    const uint64_t old = size;
    size += step;
    ASSERT_TRUE(a.resize(size));
    for (uint64_t i = old; i < size; i += 4096) {
      ASSERT_EQ(a.data()[i], 0) << "new byte " << i;
      a.data()[i] = char(uint8_t(i / 4096 * 13 + 1));
    }
    for (uint64_t i = 0; i < size; i += 4096)
      ASSERT_EQ(uint8_t(a.data()[i]), uint8_t(i / 4096 * 13 + 1)) << "byte " << i;
  }
  auto r = a.release();
  ASSERT_TRUE(bool(r));
  ConstantArena::Released mem = std::move(r).get();
  const uint64_t used = (size + kHuge - 1) / kHuge * kHuge;
  ASSERT_GT(mem.mappedBytes, used) << "the test needs spare capacity";
  EXPECT_EQ(residentPages(mem.data + used, mem.mappedBytes - used), 0u);
  // Every page the contents reach is there (in 2 MiB pages where the host has them).
  const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  EXPECT_GE(residentPages(mem.data, used), size / page);
  freeConstantArena(mem.data, mem.mappedBytes);
}

// An arena of several huge pages asks for them, or asks the kernel not to use them, as the
// page policy says (kiln/Base/Pages.h; read back from /proc/self/smaps); a small one gives
// no advice.
TEST(ConstantArena, FollowsThePagePolicy) {
  if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage"))
    GTEST_SKIP() << "no transparent huge pages on this kernel";
  using kiln::testing::PageAdvice;
  kiln::testing::PagePolicyScope scope;
  struct Case {
    kiln::PagePolicy policy;
    uint64_t bytes;
    PageAdvice advice;
  };
  for (Case c : {Case{kiln::PagePolicy::Huge, uint64_t(6) << 20, PageAdvice::Huge},
                 Case{kiln::PagePolicy::Small, uint64_t(6) << 20, PageAdvice::NoHuge},
                 Case{kiln::PagePolicy::Huge, uint64_t(1) << 20, PageAdvice::None}}) {
    SCOPED_TRACE(std::to_string(c.bytes) + " bytes");
    kiln::setPagePolicy(c.policy);
    ConstantArena a;
    ASSERT_TRUE(a.resize(c.bytes));
    a.data()[0] = 1;
    std::optional<PageAdvice> advice = kiln::testing::pageAdviceAt(a.data());
    ASSERT_TRUE(advice.has_value()) << "no mapping found for the arena";
    EXPECT_EQ(*advice, c.advice);
    auto r = a.release();
    ASSERT_TRUE(bool(r));
    ConstantArena::Released mem = std::move(r).get();
    freeConstantArena(mem.data, mem.mappedBytes);
  }
}

#endif

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
