// bfloat16 Convolution on the CPU (libjit_conv_bf16_* in libjit_bf16.cpp, emitter
// codegen/EmitBf16.cpp): the kernels natively against a double-precision reference, and
// the backend on both ISAs (vdpbf16ps on this host when it has AVX512_BF16; the generic
// kernel under avx512=0) against the Interpreter.
//
// Bounds (as Bf16GemmTest.cpp's). Operands are bf16 values, so every product x*w is exact
// in float32. A float32 sum of the K = C KH KW products in any order (padding taps add
// exact zeros) is within (K - 1) 2^-24 S of the exact sum, S = sum |x w|; adding the bias
// rounds once more; rounding to bf16 adds at most 2^-8 |y|. So the convolution's t
// against the exact c: |t - c| <= B = 2^-8 |c| + (K + 1) 2^-24 (S + |b|) (1 + 2^-8).
// With a residual r and a clamp (the fused epilogue: float(t) + r, clamped, rounded
// again): |out - clamp(c + r)| <= B + 2^-24 (|c + r| + B) + 2^-8 (|clamp(c + r)| + B +
// 2^-24 (|c + r| + B)) (the float add's rounding, the clamp 1-Lipschitz, the last
// rounding). Against the Interpreter (its own float32 order, then the same roundings): two
// bf16 roundings of float32 sums are at most 2^-7 |y| apart plus twice the accumulation
// bound, and the fused epilogue's second rounding adds another 2^-7 |out|.
#include "backends/CPU/CPUBackend.h"
#include "backends/CPU/jit/Jit.h"
#include "backends/CPU/libjit/libjit.h"
#include "test/cpu/Bf16Values.h"
#include "kiln/Backend/Compiler.h"
#include "kiln/Passes/Pipeline.h"
#include "kiln/kiln.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace kiln {
namespace {

struct Shape {
  int64_t N, C, H, W, O, KH, KW, SH, SW, PT, PL, PB, PR, DH, DW;
  int64_t OH() const { return (H + PT + PB - DH * (KH - 1) - 1) / SH + 1; }
  int64_t OW() const { return (W + PL + PR - DW * (KW - 1) - 1) / SW + 1; }
  int64_t K() const { return C * KH * KW; }
  std::string str() const {
    return std::to_string(N) + "x" + std::to_string(C) + "x" + std::to_string(H) + "x" +
           std::to_string(W) + " -> " + std::to_string(O) + " k" + std::to_string(KH) + "x" +
           std::to_string(KW) + " s" + std::to_string(SH) + "," + std::to_string(SW) + " p" +
           std::to_string(PT) + "," + std::to_string(PL) + "," + std::to_string(PB) + "," +
           std::to_string(PR) + " d" + std::to_string(DH) + "," + std::to_string(DW);
  }
};

using bf16test::f;
using bf16test::randomBf16;

/// Exact convolution (double) and S = sum |x w| per output (bias not included).
void reference(const Shape &s, const std::vector<uint16_t> &x, const std::vector<uint16_t> &w,
               std::vector<double> &exact, std::vector<double> &sumAbs) {
  const int64_t OH = s.OH(), OW = s.OW();
  exact.assign(s.N * s.O * OH * OW, 0.0);
  sumAbs.assign(exact.size(), 0.0);
  for (int64_t n = 0; n < s.N; n++)
    for (int64_t o = 0; o < s.O; o++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          double e = 0, a = 0;
          for (int64_t c = 0; c < s.C; c++)
            for (int64_t kh = 0; kh < s.KH; kh++)
              for (int64_t kw = 0; kw < s.KW; kw++) {
                int64_t ih = oh * s.SH - s.PT + kh * s.DH, iw = ow * s.SW - s.PL + kw * s.DW;
                if (ih < 0 || iw < 0 || ih >= s.H || iw >= s.W)
                  continue;
                double p = double(f(x[((n * s.C + c) * s.H + ih) * s.W + iw])) *
                           f(w[((o * s.C + c) * s.KH + kh) * s.KW + kw]);
                e += p, a += std::fabs(p);
              }
          size_t i = ((n * s.O + o) * OH + oh) * OW + ow;
          exact[i] = e, sumAbs[i] = a;
        }
}

using Kernel = void (*)(uint16_t *, const uint16_t *, const uint32_t *, const uint16_t *,
                        const uint16_t *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                        int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                        int64_t, int64_t, float, float, char *, int64_t, int64_t, int64_t);

/// Runs \p k on \p s with \p nthreads shares (one after the other) and checks every output
/// within the file comment's bound: plain (no bias), with a bias, or fused (bias, a
/// residual, a clamp to [-0.5, 0.75]).
enum class Mode { Plain, Bias, Fused };

/// Returns the outputs. \p channelLanes: \p k is libjit_conv_bf16_cl_avx512bf16 (its
/// filter packing).
std::vector<uint16_t> checkKernel(Kernel k, const char *name, const Shape &s, int64_t nthreads,
                                  Mode mode, bool channelLanes = false) {
  SCOPED_TRACE(std::string(name) + " " + s.str() + " threads " + std::to_string(nthreads) +
               " mode " + std::to_string(int(mode)));
  const int64_t OH = s.OH(), OW = s.OW(), K = s.K(), outElems = s.N * s.O * OH * OW;
  std::vector<uint16_t> x = randomBf16(s.N * s.C * s.H * s.W, 1), w = randomBf16(s.O * K, 2),
                        b = randomBf16(s.O, 3), r = randomBf16(outElems, 4);
  const int64_t taps = s.KH * s.KW;
  std::vector<uint32_t> packed((channelLanes ? libjit_conv_wt_bf16_elems(s.O, s.C, taps)
                                              : libjit_conv_w_bf16_elems(s.O, s.C, taps)) /
                                    2,
                                0xffffffffu);
  auto *dst = reinterpret_cast<uint16_t *>(packed.data());
  if (channelLanes)
    libjit_pack_conv_wt_bf16(dst, w.data(), s.O, s.C, taps);
  else
    libjit_pack_conv_w_bf16(dst, w.data(), s.O, s.C, taps);
  const int64_t stride =
      (libjit_conv_bf16_scratch_bytes(s.C, OH, OW, s.KH, s.KW, s.SH, s.SW, s.DH, s.DW) + 63) /
      64 * 64;
  std::vector<char> scratch(stride * nthreads, char(0x55));
  std::vector<uint16_t> y(outElems, 0xffff);
  const bool hasBias = mode != Mode::Plain, fused = mode == Mode::Fused;
  const float lo = -0.5f, hi = 0.75f;
  for (int64_t t = 0; t < nthreads; t++)
    k(y.data(), x.data(), packed.data(), hasBias ? b.data() : nullptr,
      fused ? r.data() : nullptr, s.N, s.C, s.H, s.W, s.O, OH, OW, s.KH, s.KW, s.SH, s.SW, s.PT,
      s.PL, s.DH, s.DW, fused ? 1 : 0, lo, hi, scratch.data(), stride, t, nthreads);
  std::vector<double> exact, sumAbs;
  reference(s, x, w, exact, sumAbs);
  const double u = std::ldexp(1.0, -8), e24 = std::ldexp(1.0, -24);
  for (int64_t i = 0; i < outElems; i++) {
    const int64_t o = (i / (OH * OW)) % s.O;
    const double bias = hasBias ? f(b[o]) : 0.0;
    const double c = exact[i] + bias;
    const double B = u * std::fabs(c) + double(K + 1) * e24 * (sumAbs[i] + std::fabs(bias)) * (1 + u);
    double want = c, bound = B;
    if (fused) {
      const double cr = c + f(r[i]);
      want = std::min(std::max(cr, double(lo)), double(hi));
      const double add = e24 * (std::fabs(cr) + B);
      bound = B + add + u * (std::fabs(want) + B + add);
    }
    EXPECT_LE(std::fabs(f(y[i]) - want), bound) << "y[" << i << "] = " << f(y[i]) << ", want "
                                                << want;
    if (std::fabs(f(y[i]) - want) > bound)
      break;
  }
  return y;
}

// Odd channel counts (K odd: the last pair half zero), output channels not a multiple of 4,
// planes whose pixel count is not a multiple of 16 or 64 (tails), pads on every side,
// strides, dilations, batches, 1x1 direct (unpadded stride 1) and 1x1 strided or padded,
// a 7x7 plane (one tile split between threads), a 7x7/2 stem.
const Shape kShapes[] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},
    {1, 3, 7, 6, 4, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1},
    {2, 5, 9, 8, 6, 3, 2, 2, 3, 1, 2, 2, 0, 1, 1},
    {1, 2, 9, 9, 3, 3, 3, 1, 2, 2, 2, 2, 2, 2, 3},
    {1, 33, 9, 10, 21, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},
    {2, 16, 8, 8, 9, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1},
    {1, 8, 5, 5, 7, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    {1, 64, 7, 7, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {1, 3, 23, 21, 10, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1},
    {1, 17, 14, 13, 37, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    // a last tile of 4 pixels (one panel: 16 rows at once, then 4) and of 32 (two panels:
    // 8 rows at once), channels not a multiple of 16
    {1, 20, 14, 14, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {1, 9, 12, 8, 24, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},
    // batches whose threads' shares of pixel panels start inside an image and cross into
    // the next (2 threads: 20 and 19 of 39 panels; 9 and 9 of 18), windowed and 1x1 direct
    {3, 6, 14, 14, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {3, 10, 10, 9, 11, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},
    // planes of fewer than 64 pixels, not a multiple of 16, with at least 512 pairs (the
    // channel-lanes kernel): more than 32 output channels, odd C, a 1x1 direct one, a
    // strided one to 7x7, a 2x2 one, a 3x5 one with 16 channels
    {1, 1025, 7, 7, 70, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},
    {2, 115, 14, 14, 33, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
    {1, 114, 2, 2, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {1, 128, 3, 5, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    // at least 256 pairs (tiles in passes of 2 panels) with whole 4-panel tiles, and panels
    // the threads share in halves (2 threads: 12.5 of 25 panels each; 4.5 of 9, the halved
    // panel the first of the second image), windowed and 1x1 direct
    {1, 80, 20, 20, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {3, 520, 6, 7, 9, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},
};

// Within the bound at 1 thread, and the same outputs bit for bit at 2 and 3 (however the
// threads share the pixels and channels, each output is the same chain over its pairs).
TEST(Bf16Conv, GenericKernelWithinTheBound) {
  for (const Shape &s : kShapes)
    for (Mode m : {Mode::Plain, Mode::Bias, Mode::Fused}) {
      const std::vector<uint16_t> one = checkKernel(libjit_conv_bf16_generic, "generic", s, 1, m);
      for (int64_t threads : {2, 3})
        EXPECT_EQ(checkKernel(libjit_conv_bf16_generic, "generic", s, threads, m), one)
            << s.str() << ": " << threads << " threads";
    }
}

TEST(Bf16Conv, Avx512Bf16KernelWithinTheBound) {
  if (!__builtin_cpu_supports("avx512bf16"))
    GTEST_SKIP() << "this host has no AVX512_BF16";
  for (const Shape &s : kShapes)
    for (Mode m : {Mode::Plain, Mode::Bias, Mode::Fused}) {
      const std::vector<uint16_t> one =
          checkKernel(libjit_conv_bf16_avx512bf16, "avx512bf16", s, 1, m);
      for (int64_t threads : {2, 3})
        EXPECT_EQ(checkKernel(libjit_conv_bf16_avx512bf16, "avx512bf16", s, threads, m), one)
            << s.str() << ": " << threads << " threads";
    }
}

// The channel-lanes kernel (small planes) within the bound, and bit for bit the pixel-lane
// kernel's results (each lane runs the same vdpbf16ps chain).
TEST(Bf16Conv, ChannelLanesKernelWithinTheBoundAndAsThePixelLaneOne) {
  if (!__builtin_cpu_supports("avx512bf16"))
    GTEST_SKIP() << "this host has no AVX512_BF16";
  int checked = 0;
  for (const Shape &s : kShapes) {
    if (!libjit_conv_bf16_channel_lanes(s.C, s.KH * s.KW, s.OH(), s.OW()))
      continue;
    checked++;
    for (int64_t threads : {1, 2, 3})
      for (Mode m : {Mode::Plain, Mode::Bias, Mode::Fused}) {
        std::vector<uint16_t> cl =
            checkKernel(libjit_conv_bf16_cl_avx512bf16, "cl_avx512bf16", s, threads, m, true);
        std::vector<uint16_t> pl =
            checkKernel(libjit_conv_bf16_avx512bf16, "avx512bf16", s, threads, m);
        ASSERT_EQ(cl.size(), pl.size());
        for (size_t i = 0; i < cl.size(); i++)
          ASSERT_EQ(cl[i], pl[i]) << s.str() << " output " << i;
      }
  }
  EXPECT_EQ(checked, 4);
}

// Hand-computed: a 1x1 convolution of 2 channels, x = (256, 1), w = (1, 1), bias 0: the
// float32 sum is 257, a tie between the bf16 neighbours 256 and 258 (8 significant bits),
// rounded to even: 256. A residual 1 is added to the rounded 256 (257, rounded again: 256),
// as the Interpreter's FusedConvolution stores the convolution, then applies its epilogue;
// one rounding of 257 + 1 would give 258. A pixel x = (-3, 0.5) with Relu: -2.5 -> 0.
TEST(Bf16Conv, RoundsTheConvolutionThenTheEpilogue) {
  const std::vector<uint16_t> x = {bfloat16(256.0f).bits(), bfloat16(-3.0f).bits(),
                                   bfloat16(1.0f).bits(), bfloat16(0.5f).bits()};
  const std::vector<uint16_t> w = {bfloat16(1.0f).bits(), bfloat16(1.0f).bits()};
  const std::vector<uint16_t> res = {bfloat16(1.0f).bits(), bfloat16(1.0f).bits()};
  std::vector<uint32_t> packed(libjit_conv_w_bf16_elems(1, 2, 1) / 2);
  libjit_pack_conv_w_bf16(reinterpret_cast<uint16_t *>(packed.data()), w.data(), 1, 2, 1);
  std::vector<char> scratch(libjit_conv_bf16_scratch_bytes(2, 1, 2, 1, 1, 1, 1, 1, 1));
  std::vector<std::pair<Kernel, const char *>> kernels = {{libjit_conv_bf16_generic, "generic"}};
  if (__builtin_cpu_supports("avx512bf16"))
    kernels.push_back({libjit_conv_bf16_avx512bf16, "avx512bf16"});
  for (auto [k, name] : kernels) {
    SCOPED_TRACE(name);
    std::vector<uint16_t> y(2, 0xffff);
    // x is [1, 2, 1, 2]: channel 0 = (256, -3), channel 1 = (1, 0.5).
    k(y.data(), x.data(), packed.data(), nullptr, nullptr, 1, 2, 1, 2, 1, 1, 2, 1, 1, 1, 1, 0,
      0, 1, 1, 0, 0, 0, scratch.data(), int64_t(scratch.size()), 0, 1);
    EXPECT_EQ(f(y[0]), 256.0f);
    EXPECT_EQ(f(y[1]), -2.5f);
    k(y.data(), x.data(), packed.data(), nullptr, res.data(), 1, 2, 1, 2, 1, 1, 2, 1, 1, 1, 1,
      0, 0, 1, 1, 1, 0.0f, INFINITY, scratch.data(), int64_t(scratch.size()), 0, 1);
    EXPECT_EQ(f(y[0]), 256.0f);
    EXPECT_EQ(f(y[1]), 0.0f);
  }
}

// Filter packing: blocks of 4 output channels; pair q = (channel pair cp, tap) holds the
// 4 channels' {W[o][2cp][tap], W[o][2cp + 1][tap]} side by side. W = [[1, 2, 3], [4, 5, 6]]
// (O 2, C 3, 1 tap): pair 0 = {1,2, 4,5, 0,0, 0,0}, pair 1 = {3,0, 6,0, 0,0, 0,0}. With 2
// taps, W[0] = [[1, 2], [3, 4], [5, 6]] (O 1, C 3): pairs (0, 0) {1,3}, (0, 1) {2,4},
// (1, 0) {5,0}, (1, 1) {6,0}, channels 1-3 of each block zero.
TEST(Bf16Conv, FilterPackingLayout) {
  std::vector<uint16_t> w;
  for (float v : {1, 2, 3, 4, 5, 6})
    w.push_back(bfloat16(v).bits());
  auto pack = [&](int64_t O, int64_t C, int64_t taps) {
    std::vector<uint16_t> p(libjit_conv_w_bf16_elems(O, C, taps), 0xffff);
    libjit_pack_conv_w_bf16(p.data(), w.data(), O, C, taps);
    std::vector<float> got;
    for (uint16_t v : p)
      got.push_back(f(v));
    return got;
  };
  ASSERT_EQ(libjit_conv_w_bf16_elems(2, 3, 1), 16);
  EXPECT_EQ(pack(2, 3, 1),
            std::vector<float>({1, 2, 4, 5, 0, 0, 0, 0, 3, 0, 6, 0, 0, 0, 0, 0}));
  ASSERT_EQ(libjit_conv_w_bf16_elems(1, 3, 2), 32);
  std::vector<float> want(32, 0.0f);
  want[0] = 1, want[1] = 3, want[8] = 2, want[9] = 4, want[16] = 5, want[24] = 6;
  EXPECT_EQ(pack(1, 3, 2), want);
}

// What runs natively: bf16 Convolution and FusedConvolution (Relu, Clip, residual) of
// group 1 with a constant filter; a grouped one or a run-time filter is widened; a fused
// one the kernel does not run (Sigmoid, grouped) is not supported at all (widened, it
// would round once where the Interpreter rounds twice), so fuse-activations leaves it.
TEST(Bf16Conv, WhatRunsNatively) {
  Module mod;
  Function *F = mod.createFunction("f");
  auto *x = mod.createPlaceholder(ElemKind::BFloat16, {1, 4, 5, 5}, "x");
  auto *r = mod.createPlaceholder(ElemKind::BFloat16, {1, 4, 5, 5}, "r");
  auto *wp = mod.createPlaceholder(ElemKind::BFloat16, {4, 4, 3, 3}, "wp");
  Constant *w = mod.createConstant("w", Tensor(ElemKind::BFloat16, {4, 4, 3, 3}));
  Constant *wg = mod.createConstant("wg", Tensor(ElemKind::BFloat16, {4, 2, 3, 3}));
  Constant *b = mod.createConstant("b", Tensor(ElemKind::BFloat16, {4}));
  const std::vector<dim_t> k{3, 3}, s{1, 1}, p{1, 1, 1, 1}, d{1, 1};
  cpu::CPUBackend cpu;
  auto *c = F->createConvolution("c", x, w, b, k, s, p, d, 1);
  EXPECT_TRUE(cpu.isNativelySupported(*c));
  auto *g = F->createConvolution("g", x, wg, b, k, s, p, d, 2);
  EXPECT_FALSE(cpu.isNativelySupported(*g));
  EXPECT_TRUE(cpu.isOpSupported(*g));
  auto *cp = F->createConvolution("cp", x, wp, b, k, s, p, d, 1);
  EXPECT_FALSE(cpu.isNativelySupported(*cp));
  EXPECT_TRUE(cpu.isOpSupported(*cp));
  for (const char *act : {"Relu", "Clip", ""}) {
    auto *fr = F->createFusedConvolution("fr", x, w, b, {r}, k, s, p, d, 1, act, 0, 6);
    EXPECT_TRUE(cpu.isNativelySupported(*fr)) << act;
  }
  auto *fs = F->createFusedConvolution("fs", x, w, b, {}, k, s, p, d, 1, "Sigmoid", 0, 0);
  EXPECT_FALSE(cpu.isOpSupported(*fs));
  auto *fg = F->createFusedConvolution("fg", x, wg, b, {}, k, s, p, d, 2, "Relu", 0, 0);
  EXPECT_FALSE(cpu.isOpSupported(*fg));
}

/// A bf16 network: a 3x3 padded convolution, a 1x1 one whose result gets the first's
/// result added and a Relu (fused into a FusedConvolution by the CPU), a strided
/// convolution, and a grouped one (widened: group 2).
struct Net {
  Module mod;
  Function *F = mod.createFunction("main");
  Placeholder *x;
  Net() {
    PseudoRNG rng(7);
    auto cst = [&](const char *name, Dims d) {
      Tensor t(ElemKind::BFloat16, d);
      t.randomize(-1, 1, rng);
      return mod.createConstant(name, std::move(t));
    };
    x = mod.createPlaceholder(ElemKind::BFloat16, {1, 5, 11, 9}, "x");
    auto *c1 = F->createConvolution("c1", x, cst("w1", {12, 5, 3, 3}), cst("b1", {12}), {3, 3},
                                    {1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
    auto *c2 = F->createConvolution("c2", c1, cst("w2", {12, 12, 1, 1}), cst("b2", {12}),
                                    {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
    auto *r = F->createRelu("relu", F->createAdd("add", c2, c1));
    auto *c3 = F->createConvolution("c3", r, cst("w3", {7, 12, 3, 3}), cst("b3", {7}), {3, 3},
                                    {2, 2}, {1, 0, 1, 1}, {1, 1}, 1);
    F->createSave("y", c3);
    auto *g = F->createConvolution("g", r, cst("wg", {6, 6, 3, 3}), cst("bg", {6}), {3, 3},
                                   {1, 1}, {1, 1, 1, 1}, {1, 1}, 2);
    F->createSave("z", g);
  }
  void bind(PlaceholderBindings &pb) {
    PseudoRNG rng(5);
    Tensor t(*x->getType());
    t.randomize(-1, 1, rng);
    pb.insert(x, std::move(t));
    for (SaveNode *s : F->getSaves())
      pb.allocate(s->getPlaceholder());
  }
};

unsigned count(const Function *f, NodeKind k) {
  unsigned n = 0;
  for (const auto &up : f->getNodes())
    n += up->getKind() == k;
  return n;
}

// The network on the CPU (default ISA and avx512=0, 1 and 2 threads) against the
// Interpreter. Each result went through up to 4 bf16 convolutions (and an add), so the
// check is a relative one of 4 bf16 units (2^-6) plus an absolute 2^-7 for values near
// cancellation: the inputs of each layer differ by a few units already, not only its own
// summation order (the kernel-level bound is checked exactly above).
TEST(Bf16Conv, BackendAgainstTheInterpreterOnBothIsas) {
  Net ref;
  PlaceholderBindings rb;
  ref.bind(rb);
  {
    auto be = createBackend("Interpreter");
    ASSERT_TRUE(bool(be));
    auto cf = (*be)->compile(ref.F, CompileOptions());
    ASSERT_TRUE(bool(cf)) << cf.getError().message();
    ExecutionContext ctx(&rb);
    ASSERT_FALSE(bool((*cf)->execute(ctx)));
  }
  cpu::CPUBackend probe;
  for (bool avx512 : {true, false})
    for (unsigned threads : {1u, 2u}) {
      SCOPED_TRACE(std::string(avx512 ? "default ISA" : "avx512=0") + ", threads " +
                   std::to_string(threads));
      Net net;
      EXPECT_TRUE(probe.isNativelySupported(*net.F->getNodeByName("c1")));
      EXPECT_FALSE(probe.isNativelySupported(*net.F->getNodeByName("g")));
      EXPECT_TRUE(probe.isOpSupported(*net.F->getNodeByName("g")));
      PlaceholderBindings pb;
      net.bind(pb);
      cpu::CPUBackend cpu;
      CompileOptions co;
      co.threads = threads;
      if (!avx512)
        co.backendOptions["avx512"] = "0";
      // The CPU's graph pipeline (fuse-activations among it), as compiling a network does.
      Error opt = optimizeFunction(net.F, cpu);
      ASSERT_FALSE(bool(opt)) << opt.message();
      auto cf = cpu.compile(net.F, co);
      ASSERT_TRUE(bool(cf)) << cf.getError().message();
      // c2 + add + relu became one FusedConvolution; only the grouped one is widened (its
      // input, its filter at compile time, its result: 2 ConvertTo nodes).
      EXPECT_EQ(count(net.F, NodeKind::FusedConvolution), 1u);
      EXPECT_EQ(count(net.F, NodeKind::ConvertTo), 2u);
      ExecutionContext ctx(&pb);
      ASSERT_FALSE(bool((*cf)->execute(ctx)));
      for (unsigned s = 0; s < 2; s++) {
        const Tensor &want = *rb.get(ref.F->getSaves()[s]->getPlaceholder());
        const Tensor &got = *pb.get(net.F->getSaves()[s]->getPlaceholder());
        ASSERT_EQ(want.size(), got.size());
        for (size_t i = 0; i < want.size(); i++) {
          double w = want.getAsDouble(i), g = got.getAsDouble(i);
          EXPECT_LE(std::fabs(g - w), std::ldexp(std::fabs(w), -6) + std::ldexp(1.0, -7))
              << net.F->getSaves()[s]->getName() << "[" << i << "]";
        }
      }
    }
}

} // namespace
} // namespace kiln
