// Base types: Error/Expected, element kinds and types, float16/bfloat16 conversions,
// Tensor and Handle.

#include "kiln/Base/Error.h"
#include "kiln/Base/Pages.h"
#include "kiln/Base/Tensor.h"

#include "test/base/HugePageAdvice.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <vector>

using namespace kiln;

namespace {

Expected<int> half(int x) {
  if (x % 2)
    return makeError(ErrorCode::InvalidArgument, "odd value ", x);
  return x / 2;
}

Error quarter(int x, int &out) {
  KILN_ASSIGN_OR_RETURN(int h, half(x));
  KILN_ASSIGN_OR_RETURN(out, half(h));
  return Error::success();
}

} // namespace

TEST(Error, SuccessAndFailure) {
  Error ok = Error::success();
  EXPECT_FALSE(ok);
  Error bad = makeError(ErrorCode::OutOfMemory, "device ", 3, " has ", 10, " bytes");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad.code(), ErrorCode::OutOfMemory);
  EXPECT_EQ(bad.message(), "device 3 has 10 bytes");
  EXPECT_EQ(bad.toString(), "out-of-memory: device 3 has 10 bytes");
  Error ctx = std::move(bad).addContext("loading 'net'");
  EXPECT_EQ(ctx.message(), "loading 'net': device 3 has 10 bytes");
  EXPECT_EQ(ctx.code(), ErrorCode::OutOfMemory);
}

TEST(Error, ExpectedPropagation) {
  int out = 0;
  EXPECT_FALSE(quarter(12, out));
  EXPECT_EQ(out, 3);
  Error e = quarter(6, out); // 6 -> 3 is odd
  ASSERT_TRUE(e);
  EXPECT_EQ(e.message(), "odd value 3");
  Expected<int> v = half(7);
  EXPECT_FALSE(v);
  EXPECT_EQ(v.takeError().code(), ErrorCode::InvalidArgument);
}

// More dimensions than kMaxDims do not abort: the Dims keeps eight, says it is not valid,
// and prints so; it differs from the eight-dimension Dims it starts with.
TEST(Type, TooManyDimensionsAreMarkedNotAborted) {
  Dims ok = {1, 2, 3, 4, 5, 6, 7, 8};
  Dims nine = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_TRUE(ok.valid());
  EXPECT_FALSE(nine.valid());
  EXPECT_EQ(nine.size(), kMaxDims);
  EXPECT_NE(nine, ok);
  Dims grown = ok;
  grown.push_back(10);
  EXPECT_FALSE(grown.valid());
  EXPECT_FALSE(Dims(std::vector<dim_t>(11, 1)).valid());
  Type t(ElemKind::Float, nine);
  EXPECT_NE(t, Type(ElemKind::Float, ok));
  EXPECT_NE(t.toString().find("more than 8 dimensions"), std::string::npos) << t.toString();
}

TEST(Type, SizesNamesAndStrides) {
  EXPECT_EQ(elemSize(ElemKind::Float), 4u);
  EXPECT_EQ(elemSize(ElemKind::Float16), 2u);
  EXPECT_EQ(elemSize(ElemKind::BFloat16), 2u);
  EXPECT_EQ(elemSize(ElemKind::Int8Q), 1u);
  EXPECT_EQ(elemSize(ElemKind::Int64I), 8u);
  EXPECT_EQ(elemSize(ElemKind::Bool), 1u);
  for (unsigned i = 0; i < kNumElemKinds; i++) {
    ElemKind k;
    ASSERT_TRUE(parseElemKind(elemKindName(ElemKind(i)), k));
    EXPECT_EQ(k, ElemKind(i));
  }
  Type t(ElemKind::Float, {2, 3, 4});
  EXPECT_EQ(t.numElements(), 24u);
  EXPECT_EQ(t.sizeInBytes(), 96u);
  Dims s = t.strides();
  EXPECT_EQ(s, Dims({12, 4, 1}));
  EXPECT_EQ(t.toString(), "float<2x3x4>");
  EXPECT_EQ(Type(ElemKind::Int8Q, {2}, 0.25f, -3).toString(), "i8q<2:0.25:-3>");
  EXPECT_EQ(Type(ElemKind::Float, {}).toString(), "float<>");
  EXPECT_EQ(Type(ElemKind::Float, {}).numElements(), 1u);
  // Quantization parameters matter only for quantized kinds.
  EXPECT_EQ(Type(ElemKind::Float, {2}, 0.5f, 1), Type(ElemKind::Float, {2}));
  EXPECT_NE(Type(ElemKind::Int8Q, {2}, 0.5f, 1), Type(ElemKind::Int8Q, {2}, 0.5f, 2));
}

TEST(Float16, ExactValuesAndRounding) {
  // Exactly representable values.
  for (float f : {0.0f, 1.0f, -2.0f, 0.5f, 65504.0f, 6.103515625e-05f /* min normal */,
                  5.9604644775390625e-08f /* min subnormal */})
    EXPECT_EQ(float(float16(f)), f) << f;
  EXPECT_EQ(float16(1.0f).bits(), 0x3c00);
  EXPECT_EQ(float16(-2.0f).bits(), 0xc000);
  EXPECT_EQ(float16(65504.0f).bits(), 0x7bff);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(float16(1.0f + std::ldexp(1.0f, -11)).bits(), 0x3c00);
  // 1 + 3*2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9: rounds up to even.
  EXPECT_EQ(float16(1.0f + 3 * std::ldexp(1.0f, -11)).bits(), 0x3c02);
  // Overflow to infinity; 65520 is the first value that rounds to infinity.
  EXPECT_EQ(float16(65520.0f).bits(), 0x7c00);
  EXPECT_EQ(float16(65519.0f).bits(), 0x7bff);
  EXPECT_TRUE(std::isinf(float(float16(1e10f))));
  EXPECT_TRUE(std::isnan(float(float16(std::numeric_limits<float>::quiet_NaN()))));
  // Subnormal: 3 * 2^-24.
  EXPECT_EQ(float16(3 * std::ldexp(1.0f, -24)).bits(), 0x0003);
  // Below half the smallest subnormal: zero, keeping the sign.
  EXPECT_EQ(float16(-std::ldexp(1.0f, -26)).bits(), 0x8000);
  // Every finite half converts to float and back unchanged.
  for (uint32_t b = 0; b < 0x10000; b++) {
    if ((b & 0x7c00) == 0x7c00)
      continue;
    float16 h = float16::fromBits(uint16_t(b));
    ASSERT_EQ(float16(float(h)).bits(), b) << b;
  }
}

TEST(BFloat16, Rounding) {
  EXPECT_EQ(bfloat16(1.0f).bits(), 0x3f80);
  EXPECT_EQ(float(bfloat16(3.0f)), 3.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even.
  EXPECT_EQ(float(bfloat16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(float(bfloat16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(float(bfloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Tensor, HandleAccessAndViews) {
  Tensor t(ElemKind::Float, {2, 3});
  auto h = t.getHandle<float>();
  for (dim_t i = 0; i < 2; i++)
    for (dim_t j = 0; j < 3; j++)
      h.at({i, j}) = float(10 * i + j);
  EXPECT_EQ(h.raw(4), 11.0f); // row-major
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.getUnsafePtr()) % 64, 0u);
  Tensor v = Tensor::view(Type(ElemKind::Float, {3, 2}), t.getUnsafePtr());
  EXPECT_FALSE(v.isOwning());
  EXPECT_EQ(v.getHandle<float>().at({2, 1}), 12.0f);
  Tensor c = t.clone();
  c.getHandle<float>().raw(0) = 99;
  EXPECT_EQ(h.raw(0), 0.0f);
  EXPECT_FALSE(c.isEqual(t));
  c.getHandle<float>().raw(0) = 0.5f;
  EXPECT_TRUE(c.isEqual(t, 0.5f));
  EXPECT_FALSE(c.isEqual(t, 0.49f));
  EXPECT_DOUBLE_EQ(c.maxAbsDiff(t), 0.5);
}

TEST(Tensor, ConversionsSaturateAndRound) {
  Tensor q(ElemKind::Int8Q, {4}, {1.5, -200, 300, -2.5});
  EXPECT_EQ(q.getHandle<int8_t>().raw(0), 2);    // nearest even of 1.5
  EXPECT_EQ(q.getHandle<int8_t>().raw(1), -128); // saturated
  EXPECT_EQ(q.getHandle<int8_t>().raw(2), 127);
  EXPECT_EQ(q.getHandle<int8_t>().raw(3), -2);
  Tensor b(ElemKind::Bool, {2}, {0, 3});
  EXPECT_FALSE(b.getHandle<bool>().raw(0));
  EXPECT_TRUE(b.getHandle<bool>().raw(1));
  Tensor big(ElemKind::Int64I, {3}, {1e30, -1e30, std::nan("")});
  EXPECT_EQ(big.getHandle<int64_t>().raw(0), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(big.getHandle<int64_t>().raw(1), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(big.getHandle<int64_t>().raw(2), 0);
  Tensor u8(ElemKind::UInt8Q, {3}, {255.4, 256, -1});
  EXPECT_EQ(u8.getHandle<uint8_t>().raw(0), 255);
  EXPECT_EQ(u8.getHandle<uint8_t>().raw(1), 255);
  EXPECT_EQ(u8.getHandle<uint8_t>().raw(2), 0);
  Tensor i64(ElemKind::Int64I, {1}, {-5});
  EXPECT_EQ(i64.getHandle<int64_t>().raw(0), -5);
  EXPECT_EQ(i64.toString(), "i64<1> [-5]");
}

TEST(Tensor, SeededRandomIsReproducibleAndInRange) {
  Tensor a(ElemKind::Float, {100}), b(ElemKind::Float, {100});
  PseudoRNG r1(42), r2(42);
  a.randomize(-1, 1, r1);
  b.randomize(-1, 1, r2);
  EXPECT_TRUE(a.isEqual(b));
  for (size_t i = 0; i < 100; i++) {
    EXPECT_GE(a.getAsDouble(i), -1.0);
    EXPECT_LE(a.getAsDouble(i), 1.0);
  }
  Tensor q(Type(ElemKind::Int8Q, {1000}, 0.1f, 0));
  PseudoRNG r3(1);
  q.randomize(-3, 3, r3);
  for (size_t i = 0; i < 1000; i++) {
    EXPECT_GE(q.getAsDouble(i), -3.0);
    EXPECT_LE(q.getAsDouble(i), 3.0);
  }
}

TEST(Tensor, DefaultIsEmpty) {
  Tensor t;
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.getSizeInBytes(), 0u);
  EXPECT_EQ(t.toString(), "float<0> []");
  Tensor u;
  EXPECT_TRUE(t.isEqual(u));
}

// A new tensor is zero and 64-byte aligned whatever memory it gets: fresh pages (a large
// one), or memory a freed tensor filled with ones before (small and large sizes, and the
// same size again, which the allocator hands back); clones copy every byte.
TEST(Tensor, NewTensorsAreZeroAndAligned) {
  // Small ones come from calloc; from 64 KiB (2^14 floats) on they are cut from shared
  // chunks, from 4 MiB (2^20 floats) on they get mappings of their own.
  for (dim_t n : {dim_t(1), dim_t(17), dim_t(4096), (dim_t(1) << 14) - 1, dim_t(1) << 14,
                  (dim_t(1) << 14) + 3, dim_t(300000), (dim_t(1) << 20) - 1, dim_t(1) << 20,
                  (dim_t(1) << 20) + 5, dim_t(3) << 20}) {
    for (int round = 0; round < 2; round++) {
      Tensor t(ElemKind::Float, {n});
      ASSERT_EQ(reinterpret_cast<uintptr_t>(t.getUnsafePtr()) % 64, 0u) << n;
      const float *p = reinterpret_cast<const float *>(t.getUnsafePtr());
      for (dim_t i = 0; i < n; i++)
        ASSERT_EQ(p[i], 0.0f) << "size " << n << " element " << i;
      std::memset(t.getUnsafePtr(), 0xff, t.getSizeInBytes());
      Tensor c = t.clone();
      ASSERT_EQ(reinterpret_cast<uintptr_t>(c.getUnsafePtr()) % 64, 0u);
      EXPECT_EQ(std::memcmp(c.getUnsafePtr(), t.getUnsafePtr(), t.getSizeInBytes()), 0);
    }
  }
}

// A tensor the host cannot hold (2^60 floats: 4 EiB) is an error, not the end of the
// process: tryCreate says so, the throwing constructor's std::bad_alloc becomes an
// OutOfMemory error under guardHostMemory, and the guard passes everything else through.
TEST(Tensor, HostOutOfMemoryIsAnError) {
  const Type huge(ElemKind::Float, {dim_t(1) << 30, dim_t(1) << 30});
  Expected<Tensor> t = Tensor::tryCreate(huge);
  ASSERT_FALSE(t);
  Error e = t.takeError();
  EXPECT_EQ(e.code(), ErrorCode::OutOfMemory);
  EXPECT_NE(e.message().find("4611686018427387904 bytes"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find(huge.toString()), std::string::npos) << e.message();

  Error g = guardHostMemory("building the test's tensor", [&]() -> Error {
    Tensor big(huge);
    ADD_FAILURE() << "allocated " << big.getSizeInBytes() << " bytes";
    return Error::success();
  });
  ASSERT_TRUE(g);
  EXPECT_EQ(g.code(), ErrorCode::OutOfMemory);
  EXPECT_EQ(g.message(), "out of host memory building the test's tensor");

  Expected<int> fine = guardHostMemory("halving", [] { return half(8); });
  ASSERT_TRUE(fine);
  EXPECT_EQ(*fine, 4);
  Expected<int> odd = guardHostMemory("halving", [] { return half(7); });
  ASSERT_FALSE(odd);
  EXPECT_EQ(odd.takeError().code(), ErrorCode::InvalidArgument);

  Expected<Tensor> small = Tensor::tryCreate(Type(ElemKind::Int8Q, {5}, 0.5f, 3));
  ASSERT_TRUE(small);
  for (dim_t i = 0; i < 5; i++)
    EXPECT_EQ(reinterpret_cast<const int8_t *>(small->getUnsafePtr())[i], 3); // the offset
}

// Mid-size tensors share chunks: many of them, over several chunks, each filled with its
// own value, keep their values while others are freed (their pages given back) and new
// ones, which are zero, are made; no two overlap.
TEST(Tensor, SharedChunksKeepNeighbours) {
  auto fill = [](Tensor &t, float v) {
    float *p = reinterpret_cast<float *>(t.getUnsafePtr());
    for (dim_t i = 0; i < t.size(); i++)
      p[i] = v;
  };
  auto holds = [](const Tensor &t, float v) {
    const float *p = reinterpret_cast<const float *>(t.getUnsafePtr());
    for (dim_t i = 0; i < t.size(); i++)
      if (p[i] != v)
        return false;
    return true;
  };
  std::vector<Tensor> ts;
  for (int i = 0; i < 120; i++) { // 120 x 64-1000 KB: several 32 MiB chunks
    ts.emplace_back(ElemKind::Float, Dims({dim_t(16384 + (i * 7919) % 240000)}));
    ASSERT_EQ(reinterpret_cast<uintptr_t>(ts.back().getUnsafePtr()) % 64, 0u);
    ASSERT_TRUE(holds(ts.back(), 0.0f)) << i;
    fill(ts.back(), float(i + 1));
  }
  for (int i = 0; i < 120; i += 2)
    ts[size_t(i)] = Tensor(); // freed
  for (int i = 0; i < 40; i++) {
    ts.emplace_back(ElemKind::Float, Dims({dim_t(20000 + i * 1000)}));
    ASSERT_TRUE(holds(ts.back(), 0.0f)) << "new " << i;
    fill(ts.back(), float(-i - 1));
  }
  for (int i = 1; i < 120; i += 2)
    EXPECT_TRUE(holds(ts[size_t(i)], float(i + 1))) << i;
  for (int i = 0; i < 40; i++)
    EXPECT_TRUE(holds(ts[120 + size_t(i)], float(-i - 1))) << "new " << i;
}

TEST(Tensor, QuantizedZeroIsOffset) {
  Tensor q(Type(ElemKind::Int8Q, {3}, 0.5f, -7));
  for (size_t i = 0; i < 3; i++)
    EXPECT_EQ(q.getHandle<int8_t>().raw(i), -7);
  EXPECT_FLOAT_EQ(q.getHandle<int8_t>().dequantizedAt(0), 0.0f);
}

// ---- The page policy (kiln/Base/Pages.h) ----

using kiln::testing::PagePolicyScope;

TEST(Pages, ParsesThePolicyNames) {
  PagePolicy p = PagePolicy::Auto;
  EXPECT_TRUE(parsePagePolicy("huge", &p));
  EXPECT_EQ(p, PagePolicy::Huge);
  EXPECT_TRUE(parsePagePolicy("small", &p));
  EXPECT_EQ(p, PagePolicy::Small);
  EXPECT_TRUE(parsePagePolicy("auto", &p));
  EXPECT_EQ(p, PagePolicy::Auto);
  EXPECT_FALSE(parsePagePolicy("Huge", &p));
  EXPECT_FALSE(parsePagePolicy("", &p));
  EXPECT_EQ(p, PagePolicy::Auto) << "a failed parse leaves the policy as it was";
}

namespace {

/// A fake sysfs root with virtio devices given as (device id, features) pairs.
std::string fakeSysfs(const std::string &name,
                      const std::vector<std::pair<std::string, std::string>> &devices) {
  namespace fs = std::filesystem;
  const char *tmp = std::getenv("TEST_TMPDIR");
  fs::path root = fs::path(tmp ? tmp : fs::temp_directory_path().string()) / name;
  fs::remove_all(root);
  fs::create_directories(root / "bus/virtio/devices");
  for (size_t i = 0; i < devices.size(); i++) {
    fs::path dev = root / "bus/virtio/devices" / ("virtio" + std::to_string(i));
    fs::create_directories(dev);
    std::ofstream(dev / "device") << devices[i].first << "\n";
    std::ofstream(dev / "features") << devices[i].second << "\n";
  }
  return root.string();
}

} // namespace

// Only a balloon (virtio device 5) that negotiated free page reporting (feature bit 5,
// the sixth character) makes fresh huge pages host faults.
TEST(Pages, FreePageReportingIsABalloonWithFeatureBitFive) {
  const std::string reporting = "0110010100000000000000000000000010";
  const std::string noReporting = "0110000100000000000000000000000010";
  EXPECT_TRUE(freshHugePagesAreHostFaults(
      fakeSysfs("reporting", {{"0x0002", "0000000"}, {"0x0005", reporting}})));
  EXPECT_FALSE(freshHugePagesAreHostFaults(fakeSysfs("no_reporting", {{"0x0005", noReporting}})));
  // The same bit on another device (a network card) says nothing about memory.
  EXPECT_FALSE(freshHugePagesAreHostFaults(fakeSysfs("net_only", {{"0x0001", reporting}})));
  EXPECT_FALSE(freshHugePagesAreHostFaults(fakeSysfs("short", {{"0x0005", "01100"}})));
  EXPECT_FALSE(freshHugePagesAreHostFaults(fakeSysfs("none", {})));
  EXPECT_FALSE(freshHugePagesAreHostFaults("/nonexistent/sysfs/root"));
}

TEST(Pages, ExplicitPoliciesOverrideTheHost) {
  PagePolicyScope scope;
  setPagePolicy(PagePolicy::Huge);
  EXPECT_TRUE(longLivedMemoryInHugePages());
  setPagePolicy(PagePolicy::Small);
  EXPECT_FALSE(longLivedMemoryInHugePages());
  setPagePolicy(PagePolicy::Auto);
  EXPECT_EQ(longLivedMemoryInHugePages(), !freshHugePagesAreHostFaults("/sys"));
}

// A large tensor's mapping carries the kernel's huge-page advice, or the advice against
// huge pages, as the policy says (read back from /proc/self/smaps). Under AddressSanitizer
// tensors come from calloc, and a kernel without transparent huge pages has neither
// advice: skipped there.
TEST(Pages, LargeTensorsFollowThePolicy) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "tensors come from calloc under AddressSanitizer";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "tensors come from calloc under AddressSanitizer";
#endif
#endif
  if (!std::filesystem::exists("/sys/kernel/mm/transparent_hugepage"))
    GTEST_SKIP() << "no transparent huge pages on this kernel";
  using kiln::testing::PageAdvice;
  PagePolicyScope scope;
  const Type big(ElemKind::Float, {dim_t(3) << 20});  // 12 MiB: a mapping of its own
  const Type mid(ElemKind::Float, {dim_t(64) << 10}); // 256 KiB: cut from a shared chunk
  for (PagePolicy policy : {PagePolicy::Huge, PagePolicy::Small}) {
    setPagePolicy(policy);
    Tensor t(big);
    t.getHandle<float>().raw(0) = 1.0f;
    std::optional<PageAdvice> advice = kiln::testing::pageAdviceAt(t.getUnsafePtr());
    ASSERT_TRUE(advice.has_value()) << "no mapping found for the tensor";
    EXPECT_EQ(*advice, policy == PagePolicy::Huge ? PageAdvice::Huge : PageAdvice::NoHuge);
  }
  // A chunk takes the policy when it is mapped; a new policy shows in the chunk a later
  // block starts (a 32 MiB chunk holds fewer than 130 blocks of 256 KiB).
  for (PagePolicy policy : {PagePolicy::Small, PagePolicy::Huge}) {
    setPagePolicy(policy);
    std::vector<Tensor> fill;
    for (int i = 0; i < 130; i++)
      fill.emplace_back(mid);
    std::optional<PageAdvice> advice = kiln::testing::pageAdviceAt(fill.back().getUnsafePtr());
    ASSERT_TRUE(advice.has_value());
    EXPECT_EQ(*advice, policy == PagePolicy::Huge ? PageAdvice::Huge : PageAdvice::NoHuge);
  }
}
