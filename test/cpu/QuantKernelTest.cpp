// The CPU's int8 convolution, fully connected, MatMul, BatchMatMul, Add/Sub, BatchedAdd,
// Relu, MaxPool, AvgPool and AdaptiveAvgPool kernels (libjit_qconv.cpp, libjit_qelem.cpp,
// libjit_qpool.cpp) against the Interpreter,
// bit for bit: Convolution and FullyConnected with per-tensor weights and their
// channelwise forms, on AVX-512 VNNI
// (where the host has it) and AVX2 (the backend's avx512=0), at 1 and 2 threads. Shapes
// with odd channel counts, pads, strides, dilations, groups and depthwise; offsets at and
// inside the int8 limits; weights and activations at -128 and 127, and biases and scales
// that drive outputs into saturation; Relu and Clip fused into the layers (their bounds
// as the kernels' saturation bounds), on the layer's grid and on another.
// The CPU program is compiled without any fallback: a node the CPU did not take would
// fail the compile, and each case checks that the stage names the int8 kernel of the ISA.
#include "backends/CPU/CPUBackend.h"
#include "backends/CPU/ThreadPool.h"
#include "backends/CPU/codegen/Codegen.h"
#include "backends/CPU/jit/Jit.h"
#include "kiln/Backend/Compiler.h"
#include "kiln/Memory/MemoryPipeline.h"
#include "kiln/kiln.h"

#include <gtest/gtest.h>

#include <iterator>
#include <utility>
#include <vector>

#include <cmath>
#include <cstring>
#include <random>

namespace kiln {
namespace {

constexpr ElemKind I8Q = ElemKind::Int8Q;

struct Net {
  Module mod;
  Function *F = nullptr;
  Placeholder *x = nullptr;
  SaveNode *save = nullptr;
  /// Run-time operands other than x (weights, biases) and their values.
  std::vector<std::pair<Placeholder *, Tensor>> inputs;
};

/// Raw int8 values: mostly uniform in [lo, hi], with every 7th at -128 or 127 when
/// \p extremes.
std::vector<int8_t> randomBytes(size_t n, uint64_t seed, int lo, int hi, bool extremes) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<int8_t> v(n);
  for (size_t i = 0; i < n; i++)
    v[i] = int8_t(extremes && i % 7 == 3 ? (i % 2 ? 127 : -128) : d(rng));
  return v;
}

Tensor int8Tensor(const Type &ty, uint64_t seed, int lo, int hi, bool extremes) {
  Tensor t(ty);
  std::vector<int8_t> v = randomBytes(t.size(), seed, lo, hi, extremes);
  std::memcpy(t.getUnsafePtr(), v.data(), v.size());
  return t;
}

Tensor int32Tensor(const Type &ty, uint64_t seed, int lo, int hi) {
  Tensor t(ty);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  auto *p = reinterpret_cast<int32_t *>(t.getUnsafePtr());
  for (size_t i = 0; i < t.size(); i++)
    p[i] = d(rng);
  return t;
}

Tensor floatTensor(const Type &ty, uint64_t seed, float lo, float hi) {
  Tensor t(ty);
  PseudoRNG rng(seed);
  t.randomize(lo, hi, rng);
  return t;
}

std::vector<int8_t> inputBytes(Net &net, uint64_t seed, bool extremes) {
  return randomBytes(net.x->getType()->numElements(), seed, -128, 127, extremes);
}

/// The bytes of the result (int8, uint8 or int32 elements).
std::vector<int8_t> runCompiled(Net &net, CompiledFunction &fn, const std::vector<int8_t> &x) {
  PlaceholderBindings b;
  b.allocate(net.mod.getPlaceholders());
  std::memcpy(b.get(net.x)->getUnsafePtr(), x.data(), x.size());
  for (auto &[ph, value] : net.inputs)
    std::memcpy(b.get(ph)->getUnsafePtr(), value.getUnsafePtr(), value.getSizeInBytes());
  ExecutionContext ctx(&b);
  Error e = fn.execute(ctx);
  EXPECT_FALSE(bool(e)) << e.message();
  Tensor *t = b.get(net.save->getPlaceholder());
  const int8_t *p = reinterpret_cast<const int8_t *>(t->getUnsafePtr());
  return std::vector<int8_t>(p, p + t->getSizeInBytes());
}

std::vector<int8_t> reference(Net &net, const std::vector<int8_t> &x) {
  auto interp = exitOnError(createBackend("Interpreter"));
  Function *f = net.F->clone("ref");
  auto cf = compileFunction(f, *interp, CompileOptions());
  EXPECT_TRUE(bool(cf)) << cf.getError().message();
  if (!cf)
    return {};
  // The clone saves into the same placeholder.
  return runCompiled(net, **cf, x);
}

/// \p net compiled for the CPU (no fallback), its stage names in \p stages.
std::vector<int8_t> runCPU(Net &net, bool avx512, unsigned threads,
                           const std::vector<int8_t> &x, std::vector<std::string> &stages) {
  cpu::CPUBackend backend;
  Function *f = net.F->clone(avx512 ? "cpu512" : "cpu2");
  for (const auto &n : f->getNodes())
    EXPECT_TRUE(backend.isOpSupported(*n)) << n->getKindName() << " '" << n->getName() << "'";
  Error prep = prepareFunction(f, backend);
  EXPECT_FALSE(bool(prep)) << prep.message();
  auto ir = generateIR(f);
  EXPECT_TRUE(bool(ir)) << ir.getError().message();
  if (!ir)
    return {};
  auto plan = planMemory(**ir);
  EXPECT_TRUE(bool(plan)) << plan.getError().message();
  if (!plan)
    return {};
  cpu::CodegenOptions co;
  co.threads = threads;
  co.jit.disableAvx512 = !avx512;
  co.profile = true; // one stage per instruction, named after its kernel
  co.jit.cacheDir = cpu::CPUBackendOptions::defaultKernelCacheDir();
  auto prog = cpu::generateProgram(**ir, *plan, co);
  EXPECT_TRUE(bool(prog)) << prog.getError().message();
  if (!prog)
    return {};
  for (const cpu::Stage &s : (*prog)->stages)
    stages.push_back(s.desc);
  cpu::CPUFunction fn(std::move(*prog), std::make_shared<cpu::ThreadPool>(threads));
  return runCompiled(net, fn, x);
}

/// The int8 kernels' ISA on this host with and without AVX-512.
std::string expectedIsa(bool avx512) {
  cpu::JitOptions o;
  o.disableAvx512 = !avx512;
  cpu::HostInfo h = cpu::detectHost(o);
  if (h.avx512 && h.features.find("+avx512vnni") != std::string::npos)
    return "vnni";
  return h.avx2 ? "avx2" : "generic";
}

/// Runs \p net on both ISAs and 1 and 2 threads and compares every output byte with the
/// Interpreter's; \p kernel is the stage-name prefix the int8 kernel must show.
void checkNet(Net &net, const std::string &kernel, uint64_t seed, bool extremes = true,
              const std::string &alsoStage = "", int xLo = -128, int xHi = 127) {
  std::vector<int8_t> x =
      randomBytes(net.x->getType()->numElements(), seed, xLo, xHi, extremes);
  std::vector<int8_t> ref = reference(net, x);
  ASSERT_FALSE(ref.empty());
  for (bool avx512 : {true, false})
    for (unsigned threads : {1u, 2u}) {
      SCOPED_TRACE(std::string(avx512 ? "avx512" : "avx2") + ", " + std::to_string(threads) +
                   " threads");
      std::vector<std::string> stages;
      std::vector<int8_t> got = runCPU(net, avx512, threads, x, stages);
      ASSERT_EQ(got.size(), ref.size());
      size_t bad = 0, first = 0;
      for (size_t i = 0; i < ref.size(); i++)
        if (got[i] != ref[i] && bad++ == 0)
          first = i;
      EXPECT_EQ(bad, 0u) << "first at " << first << ": " << int(got[first]) << " vs "
                         << int(ref[first]);
      bool found = false, also = alsoStage.empty();
      std::string all;
      for (const std::string &s : stages) {
        found |= s.find(kernel + " ") != std::string::npos &&
                 s.find(" " + expectedIsa(avx512)) != std::string::npos;
        also |= !alsoStage.empty() && s == alsoStage;
        all += "[" + s + "] ";
      }
      EXPECT_TRUE(found) << "no '" << kernel << " ... " << expectedIsa(avx512) << "' stage in "
                         << all;
      EXPECT_TRUE(also) << "no '" << alsoStage << "' stage in " << all;
    }
}

/// Runs the pooling \p net on both ISAs and 1 to 3 threads and compares every output byte
/// with the Interpreter's; the pool's stage is \p kernel, followed by the ISA's name when
/// \p isaKernel (the max pooling's vector kernels).
void checkPoolNet(Net &net, const std::string &kernel, uint64_t seed, bool isaKernel) {
  std::vector<int8_t> x = randomBytes(net.x->getType()->numElements(), seed, -128, 127, true);
  std::vector<int8_t> ref = reference(net, x);
  ASSERT_FALSE(ref.empty());
  for (bool avx512 : {true, false})
    for (unsigned threads : {1u, 2u, 3u}) {
      SCOPED_TRACE(std::string(avx512 ? "avx512" : "avx2") + ", " + std::to_string(threads) +
                   " threads");
      std::vector<std::string> stages;
      EXPECT_EQ(runCPU(net, avx512, threads, x, stages), ref);
      const std::string isa = expectedIsa(avx512);
      const std::string want = isaKernel && isa != "generic" ? kernel + " " + isa : kernel;
      EXPECT_NE(std::find(stages.begin(), stages.end(), want), stages.end()) << want;
    }
}

struct ConvCase {
  Dims in;
  dim_t outC;
  std::vector<dim_t> kernels, strides, pads, dilations;
  dim_t group;
  Dims outDims() const {
    auto o = [&](unsigned d) {
      return (in[2 + d] + pads[d] + pads[d + 2] - dilations[d] * (kernels[d] - 1) - 1) /
                 strides[d] +
             1;
    };
    return {in[0], outC, o(0), o(1)};
  }
};

/// An int8 Convolution (per-tensor weights, offsets xOff and fOff) or, with \p channelwise,
/// a ChannelwiseQuantizedConvolution with per-channel scales and offsets.
void buildConv(Net &n, const ConvCase &c, bool channelwise, int32_t xOff, int32_t fOff,
               float outScale, uint64_t seed) {
  n.F = n.mod.createFunction("main");
  n.x = n.mod.createPlaceholder(n.mod.uniqueType(I8Q, c.in, 0.05f, xOff), "x");
  Dims fd{c.outC, c.in[1] / c.group, c.kernels[0], c.kernels[1]};
  auto outTy = n.mod.uniqueType(I8Q, c.outDims(), outScale, -7);
  Node *conv;
  if (!channelwise) {
    auto *f = n.mod.createConstant("f", int8Tensor(Type(I8Q, fd, 0.02f, fOff), seed, -128, 127, true));
    auto *b = n.mod.createConstant(
        "b", int32Tensor(Type(ElemKind::Int32Q, {c.outC}, 0.05f * 0.02f, 0), seed + 1, -20000, 20000));
    conv = n.F->createConvolution("conv", outTy, n.x, f, b, c.kernels, c.strides, c.pads,
                                  c.dilations, c.group);
  } else {
    auto *f = n.mod.createConstant("f", int8Tensor(Type(I8Q, fd, 1.0f, 0), seed, -128, 127, true));
    auto *sc = n.mod.createConstant("s", floatTensor(Type(ElemKind::Float, {c.outC}), seed + 2,
                                                     0.005f, 0.04f));
    Tensor off(ElemKind::Int32I, {c.outC});
    auto oh = off.getHandle<int32_t>();
    for (dim_t o = 0; o < c.outC; o++)
      oh.raw(o) = fOff == 0 ? 0 : int32_t(o % 5) * fOff / 2 - fOff;
    auto *so = n.mod.createConstant("o", std::move(off));
    auto *b = n.mod.createConstant(
        "b", int32Tensor(Type(ElemKind::Int32I, {c.outC}), seed + 1, -20000, 20000));
    conv = n.F->createChannelwiseQuantizedConvolution("conv", outTy, n.x, f, sc, so, b,
                                                       c.kernels, c.strides, c.pads,
                                                       c.dilations, c.group, "None", 0.0f, 0.0f);
  }
  n.save = n.F->createSave("out", conv);
}

const ConvCase kCases[] = {
    {{1, 3, 7, 6}, 5, {3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},      // odd channels
    {{2, 4, 9, 8}, 6, {3, 2}, {2, 3}, {1, 2, 2, 0}, {1, 1}, 1},      // pads, strides
    {{1, 2, 9, 9}, 3, {3, 3}, {1, 2}, {2, 2, 2, 2}, {2, 3}, 1},      // dilations
    {{1, 6, 5, 5}, 4, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2},      // groups
    {{1, 7, 10, 9}, 7, {3, 3}, {2, 2}, {1, 0, 1, 1}, {1, 1}, 7},     // depthwise, stride 2
    {{1, 33, 6, 7}, 17, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},    // pointwise
    {{1, 64, 14, 14}, 40, {1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},  // 1x1 stride 2
    {{1, 19, 12, 11}, 21, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 1},  // 5x5
    {{1, 3, 23, 23}, 8, {7, 7}, {2, 2}, {3, 3, 3, 3}, {1, 1}, 1},    // stem-like
    {{1, 130, 9, 9}, 130, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 10}, // K not a multiple of 4
    {{2, 5, 13, 11}, 5, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 5},    // depthwise, stride 1
    {{1, 6, 14, 15}, 6, {5, 5}, {2, 2}, {2, 1, 2, 3}, {1, 1}, 6},    // depthwise 5x5/2
    {{1, 4, 12, 12}, 4, {3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 4},    // depthwise dilated
    {{1, 3, 9, 10}, 6, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3},     // multiplier 2 (GEMM)
    {{1, 3, 6, 41}, 3, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3},     // depthwise, wide rows
    {{1, 4, 7, 75}, 4, {3, 3}, {2, 3}, {1, 0, 1, 2}, {1, 1}, 4},     // depthwise, stride 3
    {{1, 3, 5, 70}, 3, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3},     // depthwise, rows of 70
    {{1, 4, 8, 9}, 4, {3, 1}, {1, 1}, {1, 0, 1, 0}, {2, 5}, 4},      // depthwise 3x1, dilated
    {{1, 4, 11, 13}, 6, {3, 3}, {2, 2}, {1, 1, 1, 1}, {2, 2}, 1},    // stride 2, dilation 2
    {{1, 21, 30, 29}, 10, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},  // many tiles, direct
    {{1, 17, 31, 33}, 9, {3, 3}, {2, 2}, {0, 1, 1, 0}, {1, 1}, 1},   // stride 2, many tiles
    {{1, 16, 13, 14}, 40, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},  // direct, odd tiles: halves
    {{1, 64, 25, 44}, 24, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},  // pointwise, odd patches
};

/// Whether a case checks offset pair \p pair of \p pairs: the first case every pair, each
/// other case two in rotation, so every pair meets several shapes with half the compiles of
/// the full cross product (each check compiles four programs: both ISAs, 1 and 2 threads).
bool checksPair(size_t caseIndex, size_t pair, size_t pairs) {
  return caseIndex == 0 || pair == caseIndex % pairs || pair == (caseIndex + 2) % pairs;
}

/// Every case of kCases with its share of \p offsets (checksPair), per-tensor or channelwise
/// weights, seeds from \p seed on.
void checkConvCases(bool channelwise, const std::vector<std::pair<int32_t, int32_t>> &offsets,
                    uint64_t seed) {
  for (size_t ci = 0; ci < std::size(kCases); ci++)
    for (size_t oi = 0; oi < offsets.size(); oi++) {
      if (!checksPair(ci, oi, offsets.size()))
        continue;
      auto [xOff, fOff] = offsets[oi];
      SCOPED_TRACE("case " + std::to_string(seed) + " xOff " + std::to_string(xOff) + " fOff " +
                   std::to_string(fOff));
      Net n;
      buildConv(n, kCases[ci], channelwise, xOff, fOff, 0.08f, seed);
      checkNet(n, "qconv", seed++);
    }
}

TEST(QuantKernel, ConvPerTensor) {
  checkConvCases(false, {{0, 0}, {-128, 0}, {127, -128}, {5, 3}, {-17, 127}}, 10);
}

TEST(QuantKernel, ConvChannelwise) {
  checkConvCases(true, {{0, 0}, {-128, 0}, {9, 6}, {127, 40}}, 200);
}

// 1x1 unpadded strided convolutions run as stride-1 ones on their subsampled input
// (libjit_qsubsample_i8, then the pointwise path): strides 2 on even and odd sizes (the
// subsample's word pairs and its last byte), 3 x 2 and 2 x 1, two images, K not a multiple
// of 4, per-tensor and channelwise weights with and without weight offsets (the per-pixel
// sums of the subsampled input), against the Interpreter on both ISAs at 1 and 2 threads.
TEST(QuantKernel, Conv1x1StridedSubsampled) {
  const ConvCase cases[] = {{{1, 64, 14, 14}, 40, {1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},
                            {{1, 37, 13, 11}, 21, {1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},
                            {{2, 20, 9, 10}, 12, {1, 1}, {3, 2}, {0, 0, 0, 0}, {1, 1}, 1},
                            {{1, 9, 7, 12}, 5, {1, 1}, {2, 1}, {0, 0, 0, 0}, {1, 1}, 1}};
  uint64_t seed = 260;
  for (const ConvCase &c : cases)
    for (bool channelwise : {false, true})
      for (int32_t fOff : {0, 6}) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        Net n;
        buildConv(n, c, channelwise, channelwise ? -20 : 9, fOff, 0.08f, seed);
        checkNet(n, "qconv 1x1/" + std::to_string(c.strides[0]), seed++, true, "qsubsample");
      }
}

/// Each depthwise case as an int8 Convolution and as a ChannelwiseQuantizedConvolution
/// (weight offsets \p fOff and \p channelwiseFOff), input offset \p evenXOff on the even
/// cases and -128 on the odd ones, against the Interpreter; seeds from \p seed.
template <size_t N>
void checkDepthwiseCases(const ConvCase (&cases)[N], int32_t evenXOff, int32_t fOff,
                         int32_t channelwiseFOff, uint64_t seed) {
  for (size_t i = 0; i < N; i++)
    for (bool channelwise : {false, true}) {
      SCOPED_TRACE("case " + std::to_string(i) + (channelwise ? " channelwise" : ""));
      Net n;
      buildConv(n, cases[i], channelwise, i % 2 ? -128 : evenXOff,
                channelwise ? channelwiseFOff : fOff, 0.08f, seed);
      checkNet(n, "qconv dw", seed++);
    }
}

// Depthwise at stride 2 (the flat row-parity planes of qdwconv): rows wider than 4 vectors
// (requantized in place) and narrow ones (compacted), even and odd kernel widths, odd and
// even padded widths, 1 and 2 images.
TEST(QuantKernel, DepthwiseStride2) {
  const ConvCase cases[] = {
      {{1, 3, 9, 140}, 3, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 3},
      {{2, 5, 8, 8}, 5, {3, 3}, {2, 2}, {0, 0, 1, 1}, {1, 1}, 5},
      {{1, 4, 11, 13}, 4, {4, 4}, {2, 2}, {1, 2, 1, 0}, {1, 1}, 4},
      {{1, 2, 15, 9}, 2, {5, 5}, {2, 2}, {2, 2, 2, 2}, {1, 1}, 2},
      {{1, 6, 7, 7}, 6, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 6},
      {{1, 3, 4, 3}, 3, {1, 3}, {2, 2}, {0, 1, 0, 0}, {1, 1}, 3},
  };
  checkDepthwiseCases(cases, 17, -3, 9, 1300);
}

// Depthwise at stride 1 (the flat plane of qdwconv and its pair plane): 7x7 and 14x14
// planes (grids that are not a whole number of vectors), odd and even kernel widths, a
// 1-wide kernel, dilated rows, asymmetric pads, 1 and 2 images, offsets at the int8 limits
// (centred values of +-255).
TEST(QuantKernel, DepthwiseStride1) {
  const ConvCase cases[] = {
      {{1, 6, 7, 7}, 6, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 6},
      {{1, 3, 14, 14}, 3, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3},
      {{2, 4, 9, 33}, 4, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 4},
      {{1, 3, 10, 12}, 3, {2, 4}, {1, 1}, {0, 1, 1, 2}, {1, 1}, 3},
      {{1, 5, 9, 11}, 5, {3, 3}, {1, 1}, {2, 3, 2, 3}, {2, 3}, 5},
      {{1, 2, 6, 5}, 2, {1, 3}, {1, 1}, {0, 1, 0, 1}, {1, 1}, 2},
      {{1, 3, 3, 100}, 3, {3, 1}, {1, 1}, {1, 0, 1, 0}, {1, 1}, 3},
      {{1, 2, 21, 57}, 2, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2},
  };
  checkDepthwiseCases(cases, 127, -128, 9, 1400);
}

// Stride-1 depthwise layers whose centred taps are all int8 (weight offsets 0: the
// per-channel symmetric weights kiln-run's --per-channel gives), with kernel rows of at
// most 4 taps and grids of 512 outputs or more: on AVX-512 they take the quad path (bytes
// x + 128 times the taps by vpdpbusd, libjit_qconv_impl.h dwQuadRun). Input offsets at
// both ends (the pads are bytes 0 and 255 there), batches of 2, dilated rows, 4-tap rows,
// 1-tap rows, and a 14 x 14 plane (below the quad path's size: the int16 path) alongside.
TEST(QuantKernel, DepthwiseStride1Int8Taps) {
  const ConvCase cases[] = {
      {{1, 4, 30, 30}, 4, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 4},
      {{2, 3, 21, 57}, 3, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3},
      {{1, 3, 24, 40}, 3, {2, 4}, {1, 1}, {0, 1, 1, 2}, {1, 1}, 3},
      {{1, 2, 33, 29}, 2, {3, 3}, {1, 1}, {2, 1, 2, 1}, {2, 1}, 2},
      {{1, 3, 20, 45}, 3, {5, 1}, {1, 1}, {2, 0, 2, 0}, {1, 1}, 3},
      {{1, 5, 14, 14}, 5, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 5},
  };
  checkDepthwiseCases(cases, 127, 0, 0, 1500);
}

// Small planes with channels as the vector lanes (padded planes of at most 324 pixels:
// libjit_qconv_impl.h dwLanesRun): blocks of 16 (AVX-512) or 8 (AVX2) channels, with
// channel counts that leave a partial block (20, 33, 17, 18, 24), 7x7 and 14x14 planes
// (49 and 196 pixels: a last partial group of 4L), strides 1 and 2 (and 2 x 1), a 5x5
// kernel (taps not the constant 9), a 3x1 one, dilation 2, asymmetric pads, 2 images.
TEST(QuantKernel, DepthwiseLanes) {
  const ConvCase cases[] = {
      {{1, 20, 7, 7}, 20, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 20},
      {{2, 33, 14, 14}, 33, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 33},
      {{1, 16, 14, 14}, 16, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 16},
      {{1, 24, 9, 11}, 24, {5, 5}, {1, 1}, {2, 1, 2, 3}, {1, 1}, 24},
      {{1, 17, 8, 8}, 17, {3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 17},
      {{1, 18, 5, 13}, 18, {3, 1}, {2, 1}, {1, 0, 0, 0}, {1, 1}, 18},
  };
  checkDepthwiseCases(cases, 127, -128, 9, 1600);
  checkDepthwiseCases(cases, 5, 0, 0, 1700);
}

// A tiny output scale: nearly every output saturates at -128 or 127; both must appear.
TEST(QuantKernel, ConvSaturates) {
  Net n;
  buildConv(n, kCases[1], false, 3, -2, 0.0005f, 77);
  checkNet(n, "qconv", 77);
  std::vector<int8_t> x = inputBytes(n, 77, true);
  std::vector<int8_t> ref = reference(n, x);
  EXPECT_NE(std::count(ref.begin(), ref.end(), int8_t(127)), 0);
  EXPECT_NE(std::count(ref.begin(), ref.end(), int8_t(-128)), 0);
}

// Power-of-two scales (input 0.5, weights 0.25 and 0.5, output 1): the real value of
// an output is acc / 8 or acc / 4 exactly, so many land on halves, which round away from
// zero; wide outputs (the vector requantization) and a saturating output scale.
// Then the weight scales times 1 - 2^-24 and 1 + 2^-23 (output scale 1): the outputs fall
// a hair below or above those halves (a few 2^-24 relative), where the vector kernels'
// float quotient cannot tell the side (libjit_qconv.cpp, FastRQ) and must take the double
// path: the Interpreter rounds 2.5 - 2^-22 to 2, not 3.
TEST(QuantKernel, ConvRoundsHalvesAwayFromZero) {
  const ConvCase cases[] = {
      {{1, 5, 6, 40}, 7, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {{1, 6, 9, 53}, 6, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 6},
      {{1, 16, 5, 23}, 9, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {{1, 20, 7, 7}, 20, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 20}, // channels as lanes
  };
  struct Scales {
    float out, weightFactor;
  };
  const Scales scales[] = {{1.0f, 1.0f},
                           {4.0f, 1.0f},
                           {0.0625f, 1.0f},
                           {1.0f, 1.0f - 0x1p-24f},
                           {1.0f, 1.0f + 0x1p-23f}};
  uint64_t seed = 600;
  for (const ConvCase &c : cases)
    for (const Scales &sv : scales)
      for (bool channelwise : {false, true}) {
        const float outScale = sv.out, wf = sv.weightFactor;
        SCOPED_TRACE("seed " + std::to_string(seed));
        Net n;
        n.F = n.mod.createFunction("main");
        n.x = n.mod.createPlaceholder(n.mod.uniqueType(I8Q, c.in, 0.5f, 3), "x");
        Dims fd{c.outC, c.in[1] / c.group, c.kernels[0], c.kernels[1]};
        auto outTy = n.mod.uniqueType(I8Q, c.outDims(), outScale, -5);
        Node *conv;
        if (!channelwise) {
          auto *f = n.mod.createConstant(
              "f", int8Tensor(Type(I8Q, fd, 0.25f * wf, -1), seed, -9, 9, false));
          auto *b = n.mod.createConstant(
              "b", int32Tensor(Type(ElemKind::Int32Q, {c.outC}, 0.125f, 0), seed + 1, -9, 9));
          conv = n.F->createConvolution("conv", outTy, n.x, f, b, c.kernels, c.strides, c.pads,
                                        c.dilations, c.group);
        } else {
          auto *f =
              n.mod.createConstant("f", int8Tensor(Type(I8Q, fd, 1.0f, 0), seed, -9, 9, false));
          Tensor sc(ElemKind::Float, {c.outC}), off(ElemKind::Int32I, {c.outC});
          for (dim_t o = 0; o < c.outC; o++) {
            sc.getHandle<float>().raw(o) = (o % 2 ? 0.25f : 0.5f) * wf;
            off.getHandle<int32_t>().raw(o) = int32_t(o % 3) - 1;
          }
          auto *scc = n.mod.createConstant("s", std::move(sc));
          auto *so = n.mod.createConstant("o", std::move(off));
          auto *b = n.mod.createConstant(
              "b", int32Tensor(Type(ElemKind::Int32I, {c.outC}), seed + 1, -9, 9));
          conv = n.F->createChannelwiseQuantizedConvolution("conv", outTy, n.x, f, scc, so, b,
                                                             c.kernels, c.strides, c.pads,
                                                             c.dilations, c.group, "None", 0.0f, 0.0f);
        }
        n.save = n.F->createSave("out", conv);
        // Small inputs so that acc / 8 mostly falls inside the int8 range.
        checkNet(n, "qconv", seed++, false, "", -6, 12);
      }
}

// An int8 Relu after a convolution that is also saved (so fuse-activations leaves it): on
// the convolution's grid (what the quantizer makes) its table is max(q, offset), run as a
// clamp ("qrelu clamp"); on another grid, a table.
TEST(QuantKernel, ReluClampAndTable) {
  for (bool sameGrid : {true, false}) {
    SCOPED_TRACE(sameGrid ? "same grid" : "other grid");
    Net n;
    buildConv(n, kCases[5], false, 5, 3, 0.08f, 700);
    Node *conv = n.save->getInput().getNode();
    auto reluTy = sameGrid ? conv->getType(0)
                           : n.mod.uniqueType(I8Q, conv->getType(0)->dims, 0.1f, -128);
    auto *relu = n.F->createRelu("relu", reluTy, conv);
    n.save = n.F->createSave("out_relu", relu);
    checkNet(n, "qconv", 700, true, sameGrid ? "qrelu clamp" : "qrelu");
  }
}

// int8 MaxPool (libjit_qpool_i8_<isa>: column strides 1 and 2 in registers, the others
// portable) against the Interpreter, bit for bit, both ISAs, 1 to 3 threads: on its input's
// type (the quantizer's choice, no table) and on another grid (the requantization table),
// wide rows (a vector and a tail), rows narrower than a vector and than half of one
// (outputs under 32: the AVX2 kernel's buffered row), odd sizes, strides 1, 2 (odd and even
// widths) and 3, asymmetric pads, pads as wide as the window less one (windows that are
// mostly padding), wide windows, a single row, and resnet50's 3x3 stride-2 pool on 112x112
// planes.
TEST(QuantKernel, MaxPool) {
  struct P {
    Dims in;
    std::vector<dim_t> k, s, pads;
  };
  const P cases[] = {{{1, 5, 23, 41}, {3, 3}, {2, 2}, {1, 1, 1, 1}},
                     {{2, 3, 12, 37}, {3, 3}, {1, 1}, {1, 0, 1, 2}},
                     {{1, 4, 16, 50}, {2, 2}, {2, 2}, {0, 0, 0, 0}},
                     {{1, 2, 9, 40}, {3, 2}, {3, 3}, {2, 1, 0, 1}},
                     {{1, 3, 7, 7}, {3, 3}, {1, 1}, {2, 2, 2, 2}},
                     {{1, 3, 11, 13}, {2, 3}, {2, 2}, {1, 2, 0, 1}},
                     {{1, 2, 5, 150}, {1, 5}, {1, 1}, {0, 4, 0, 2}},
                     {{2, 3, 6, 133}, {4, 7}, {2, 2}, {3, 3, 2, 6}},
                     {{1, 2, 1, 67}, {1, 2}, {1, 2}, {0, 0, 0, 1}},
                     {{1, 3, 112, 112}, {3, 3}, {2, 2}, {1, 1, 1, 1}}};
  uint64_t seed = 800;
  for (const P &c : cases)
    for (bool requant : {false, true}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + (requant ? ", other grid" : ""));
      Net n;
      n.F = n.mod.createFunction("main");
      n.x = n.mod.createPlaceholder(n.mod.uniqueType(I8Q, c.in, 0.05f, 3), "x");
      MaxPoolNode *same = n.F->createMaxPool("same", n.x, c.k, c.s, c.pads);
      Node *pool = same;
      if (requant)
        pool = n.F->createMaxPool("pool",
                                  n.mod.uniqueType(I8Q, same->getResult().dims(), 0.07f, -9),
                                  n.x, c.k, c.s, c.pads);
      n.save = n.F->createSave("out", pool);
      checkPoolNet(n, "qMaxPool", seed++, true);
    }
}

// int8 AvgPool and AdaptiveAvgPool (libjit_qpool_i8_generic: sums of x - offset in int32,
// the mean requantized in double) against the Interpreter, bit for bit, 1 to 3 threads:
// padded windows with and without the pads counted, strides 1 and 2, odd sizes, a global
// pool (windows of whole rows, summed as one run) and uneven adaptive cells.
TEST(QuantKernel, AvgPools) {
  struct P {
    Dims in;
    std::vector<dim_t> k, s, pads;
  };
  const P cases[] = {{{1, 3, 9, 11}, {3, 3}, {1, 1}, {1, 1, 1, 1}},
                     {{2, 2, 13, 10}, {3, 2}, {2, 2}, {1, 0, 1, 1}},
                     {{1, 4, 7, 7}, {7, 7}, {1, 1}, {0, 0, 0, 0}}};
  uint64_t seed = 850;
  for (const P &c : cases)
    for (bool countPads : {false, true}) {
      SCOPED_TRACE("seed " + std::to_string(seed));
      Net n;
      n.F = n.mod.createFunction("main");
      n.x = n.mod.createPlaceholder(n.mod.uniqueType(I8Q, c.in, 0.05f, 3), "x");
      AvgPoolNode *ref = n.F->createAvgPool("ref", n.x, c.k, c.s, c.pads, countPads);
      auto outTy = n.mod.uniqueType(I8Q, ref->getResult().dims(), 0.03f, -5);
      n.save = n.F->createSave(
          "out", n.F->createAvgPool("pool", outTy, n.x, c.k, c.s, c.pads, countPads));
      checkPoolNet(n, "qAvgPool", seed++, false);
    }
  for (auto [in, out] : {std::pair<Dims, std::vector<dim_t>>{{1, 5, 7, 7}, {1, 1}},
                         {{2, 3, 10, 9}, {3, 4}},
                         {{1, 2, 5, 130}, {2, 7}}}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Net n;
    n.F = n.mod.createFunction("main");
    n.x = n.mod.createPlaceholder(n.mod.uniqueType(I8Q, in, 0.05f, 3), "x");
    auto outTy = n.mod.uniqueType(I8Q, {in[0], in[1], out[0], out[1]}, 0.02f, 6);
    n.save = n.F->createSave("out", n.F->createAdaptiveAvgPool("gap", outTy, n.x, out));
    checkPoolNet(n, "qAdaptiveAvgPool", seed++, false);
  }
}

// int8 Add and Sub (libjit_qadd_i8_<isa>: the Interpreter's double arithmetic through an
// exact float shortcut) of the input and a constant, each with its own scale and offset:
// a long tensor (blocks of 64, vectors and a tail), one of 64 + 16 + 10 elements (each of
// the AVX-512 kernel's loops), one shorter than a vector, an output scale that saturates
// both ends, power-of-two scales where results land on halves (away from zero), scales a
// hair off those (x (1 - 2^-24), x (1 + 2^-23)) where the shortcut must defer to the
// double formula, a quotient past the AVX-512 rounding's range (every element by the
// double formula) and resnet50's first residual Add (its scales and offsets).
TEST(QuantKernel, AddSub) {
  struct S {
    float sx, sc, so;
    int32_t ox, oc, oo;
  };
  const S scales[] = {{0.05f, 0.031f, 0.07f, 3, -20, 5},
                      {0.013f, 0.2f, 0.11f, -128, 127, -128},
                      {0.05f, 0.04f, 0.001f, 0, 0, 0},
                      {0.5f, 0.25f, 1.0f, 1, -3, 2},
                      {0.5f, 0.25f * (1.0f - 0x1p-24f), 1.0f, 1, -3, 2},
                      {0.5f * (1.0f + 0x1p-23f), 0.25f, 1.0f, -1, 3, -2},
                      {0.05f, 0.04f, 2e-6f, 100, -100, 7},
                      {0.0924481377f, 0.0680061653f, 0.0506683327f, -8, -4, -128}};
  uint64_t seed = 900;
  for (Dims d : {Dims{1, 3, 37, 41}, Dims{90}, Dims{11}})
    for (const S &sc : scales)
      for (bool sub : {false, true}) {
        SCOPED_TRACE(std::string(sub ? "Sub" : "Add") + " seed " + std::to_string(seed));
        Net n;
        n.F = n.mod.createFunction("main");
        n.x = n.mod.createPlaceholder(n.mod.uniqueType(I8Q, d, sc.sx, sc.ox), "x");
        auto *c = n.mod.createConstant(
            "c", int8Tensor(Type(I8Q, d, sc.sc, sc.oc), seed + 1, -128, 127, true));
        auto outTy = n.mod.uniqueType(I8Q, d, sc.so, sc.oo);
        Node *r = sub ? static_cast<Node *>(n.F->createSub("sub", outTy, c, n.x))
                      : static_cast<Node *>(n.F->createAdd("add", outTy, n.x, c));
        n.save = n.F->createSave("out", r);
        checkNet(n, sub ? "qSub" : "qAdd", seed++);
      }
}

// Quantize f32 -> int8 (libjit_quantize_f32_i8_vnni on AVX-512: a float quotient that
// defers to the double formula near half-integers) against the Interpreter, on both ISAs
// and 1 and 2 threads: random reals over and past the output grid, exact half-integer
// quotients (away from zero), their neighbouring floats, NaN, infinities, huge and
// subnormal values, a length that leaves a tail; scales with offsets at both ends.
TEST(QuantKernel, QuantizeF32) {
  const std::pair<float, int32_t> grids[] = {{0.05f, 3}, {0.125f, -128}, {1e-3f, 127},
                                              {0.0173f, 0}};
  uint64_t seed = 950;
  for (auto [scale, offset] : grids) {
    SCOPED_TRACE("scale " + std::to_string(scale) + " offset " + std::to_string(offset));
    const dim_t n = 1000;
    std::vector<float> x(n);
    std::mt19937_64 rng(seed++);
    std::uniform_real_distribution<float> u(-200.0f * scale, 200.0f * scale);
    for (dim_t i = 0; i < n; i++) {
      const float half = (float(int(i % 300) - 150) + 0.5f) * scale;
      switch (i % 8) {
      case 0: x[i] = half; break;
      case 1: x[i] = std::nextafter(half, 1e30f); break;
      case 2: x[i] = std::nextafter(half, -1e30f); break;
      default: x[i] = u(rng);
      }
    }
    const float special[] = {std::nanf(""), INFINITY, -INFINITY, 3e38f, -3e38f, 1e-40f,
                             -1e-40f, 0.0f, -0.0f};
    for (size_t k = 0; k < std::size(special); k++)
      x[7 + 61 * k] = special[k];
    Net net;
    net.F = net.mod.createFunction("main");
    net.x = net.mod.createPlaceholder(net.mod.uniqueType(ElemKind::Float, {n}), "x");
    Node *q = net.F->createQuantize("q", net.mod.uniqueType(I8Q, {n}, scale, offset), net.x);
    net.save = net.F->createSave("out", q);
    std::vector<int8_t> bytes(n * sizeof(float));
    std::memcpy(bytes.data(), x.data(), bytes.size());
    std::vector<int8_t> ref = reference(net, bytes);
    ASSERT_EQ(ref.size(), size_t(n));
    for (bool avx512 : {true, false})
      for (unsigned threads : {1u, 2u}) {
        std::vector<std::string> stages;
        std::vector<int8_t> got = runCPU(net, avx512, threads, bytes, stages);
        EXPECT_EQ(got, ref) << (avx512 ? "avx512" : "avx2") << ", " << threads << " threads";
        const std::string want = expectedIsa(avx512) == "vnni" ? "quantize vnni" : "quantize";
        EXPECT_NE(std::find(stages.begin(), stages.end(), want), stages.end()) << want;
      }
  }
}

/// FullyConnected [N, K] x [K, M] (per tensor) or its channelwise form.
void buildFC(Net &n, dim_t N, dim_t K, dim_t M, bool channelwise, int32_t xOff, int32_t wOff,
             uint64_t seed) {
  n.F = n.mod.createFunction("main");
  n.x = n.mod.createPlaceholder(n.mod.uniqueType(I8Q, {N, K}, 0.05f, xOff), "x");
  auto outTy = n.mod.uniqueType(I8Q, {N, M}, 0.3f, 4);
  Node *fc;
  if (!channelwise) {
    auto *w = n.mod.createConstant(
        "w", int8Tensor(Type(I8Q, {K, M}, 0.02f, wOff), seed, -128, 127, true));
    auto *b = n.mod.createConstant(
        "b", int32Tensor(Type(ElemKind::Int32Q, {M}, 0.001f, 0), seed + 1, -30000, 30000));
    fc = n.F->createFullyConnected("fc", outTy, n.x, w, b);
  } else {
    auto *w =
        n.mod.createConstant("w", int8Tensor(Type(I8Q, {K, M}, 1.0f, 0), seed, -128, 127, true));
    auto *sc =
        n.mod.createConstant("s", floatTensor(Type(ElemKind::Float, {M}), seed + 2, 0.005f, 0.04f));
    Tensor off(ElemKind::Int32I, {M});
    auto oh = off.getHandle<int32_t>();
    for (dim_t m = 0; m < M; m++)
      oh.raw(m) = wOff == 0 ? 0 : int32_t(m % 3) * wOff - wOff;
    auto *so = n.mod.createConstant("o", std::move(off));
    auto *b = n.mod.createConstant("b", floatTensor(Type(ElemKind::Float, {M}), seed + 1, -3, 3));
    fc = n.F->createChannelwiseQuantizedFullyConnected("fc", outTy, n.x, w, sc, so, b, "None", 0.0f, 0.0f);
  }
  n.save = n.F->createSave("out", fc);
}

TEST(QuantKernel, FullyConnected) {
  uint64_t seed = 400;
  struct S {
    dim_t N, K, M;
  };
  const S shapes[] = {{1, 2048, 1000}, {3, 37, 5}, {5, 64, 33}, {4, 3, 70}, {9, 130, 16}};
  const std::pair<int32_t, int32_t> offsets[] = {{0, 0}, {-128, 0}, {127, -128}, {-3, 7}};
  size_t ci = 0;
  for (S s : shapes)
    for (bool cw : {false, true})
      for (size_t oi = 0, index = ci++; oi < std::size(offsets); oi++) {
        auto [xOff, wOff] = offsets[oi];
        if ((cw && wOff == -128) || !checksPair(index, oi, std::size(offsets)))
          continue;
        SCOPED_TRACE(std::to_string(s.N) + "x" + std::to_string(s.K) + "x" + std::to_string(s.M) +
                     (cw ? " channelwise" : "") + " xOff " + std::to_string(xOff) + " wOff " +
                     std::to_string(wOff));
        Net n;
        buildFC(n, s.N, s.K, s.M, cw, xOff, wOff, seed);
        checkNet(n, "qfc", seed++);
      }
}

// Weights computed at run time (graph inputs, as ONNX's QLinearConv, ConvInteger,
// QLinearMatMul and MatMulInteger node tests give them: packed per run by
// libjit_qpack_*_rt), and uint8 inputs, weights and results and i32 results (the
// accumulators), against the Interpreter bit for bit, both ISAs, 1 and 2 threads.

constexpr ElemKind U8Q = ElemKind::UInt8Q, I32 = ElemKind::Int32I;

/// The operand kinds of a case: input, weights, result.
struct QKinds {
  ElemKind x, w, y;
};
const QKinds kKindMixes[] = {{I8Q, I8Q, I8Q}, {U8Q, U8Q, U8Q}, {U8Q, U8Q, I32},
                             {I8Q, U8Q, I32}, {U8Q, I8Q, I8Q}, {I8Q, I8Q, U8Q}};

/// A quantized type of kind \p k (an i32 result has no scale or offset).
TypeRef qType(Module &mod, ElemKind k, const Dims &d, float scale, int32_t offset) {
  return k == I32 ? mod.uniqueType(I32, d) : mod.uniqueType(k, d, scale, offset);
}

/// \p t as a Constant, or a Placeholder bound to it at each run when \p runtime.
NodeValue operand(Net &n, const std::string &name, Tensor t, bool runtime) {
  if (!runtime)
    return n.mod.createConstant(name, std::move(t));
  Placeholder *ph = n.mod.createPlaceholder(n.mod.uniqueType(t.getType()), name);
  n.inputs.emplace_back(ph, std::move(t));
  return ph;
}

/// A ChannelwiseQuantizedConvolution of kinds \p k (or, with \p perTensor, an int8
/// Convolution) whose filter and, with \p rtBias, bias are run-time inputs when \p rtFilter;
/// \p floatBias: a float bias (channelwise only).
void buildConvKinds(Net &n, const ConvCase &c, QKinds k, bool perTensor, bool rtFilter,
                    bool rtBias, bool floatBias, int32_t xOff, int32_t fOff, uint64_t seed) {
  n.F = n.mod.createFunction("main");
  n.x = n.mod.createPlaceholder(n.mod.uniqueType(k.x, c.in, 0.05f, xOff), "x");
  Dims fd{c.outC, c.in[1] / c.group, c.kernels[0], c.kernels[1]};
  auto outTy = qType(n.mod, k.y, c.outDims(), 0.08f, k.y == U8Q ? 131 : -7);
  Node *conv;
  if (perTensor) {
    NodeValue f = operand(n, "f", int8Tensor(Type(I8Q, fd, 0.02f, fOff), seed, -128, 127, true),
                          rtFilter);
    NodeValue b = operand(
        n, "b",
        int32Tensor(Type(ElemKind::Int32Q, {c.outC}, 0.05f * 0.02f, 0), seed + 1, -20000, 20000),
        rtBias);
    conv = n.F->createConvolution("conv", outTy, n.x, f, b, c.kernels, c.strides, c.pads,
                                  c.dilations, c.group);
  } else {
    NodeValue f =
        operand(n, "f", int8Tensor(Type(k.w, fd, 1.0f, 0), seed, -128, 127, true), rtFilter);
    auto *sc = n.mod.createConstant("s", floatTensor(Type(ElemKind::Float, {c.outC}), seed + 2,
                                                     0.005f, 0.04f));
    Tensor off(ElemKind::Int32I, {c.outC});
    for (dim_t o = 0; o < c.outC; o++)
      off.getHandle<int32_t>().raw(o) = fOff + int32_t(o % 3) - 1;
    auto *so = n.mod.createConstant("o", std::move(off));
    NodeValue b = operand(
        n, "b",
        floatBias ? floatTensor(Type(ElemKind::Float, {c.outC}), seed + 1, -3, 3)
                  : int32Tensor(Type(ElemKind::Int32I, {c.outC}), seed + 1, -20000, 20000),
        rtBias);
    conv = n.F->createChannelwiseQuantizedConvolution("conv", outTy, n.x, f, sc, so, b,
                                                       c.kernels, c.strides, c.pads,
                                                       c.dilations, c.group, "None", 0.0f, 0.0f);
  }
  n.save = n.F->createSave("out", conv);
}

/// An input offset of kind \p k, spread over its range by \p i.
int32_t offsetOf(ElemKind k, size_t i) {
  const int32_t v[] = {0, 127, -128, 37, -5, 100};
  int32_t o = v[i % std::size(v)];
  return k == U8Q ? o + 128 : o;
}

TEST(QuantKernel, ConvRuntimeWeights) {
  uint64_t seed = 1000;
  for (size_t ci = 0; ci < std::size(kCases); ci++) {
    const QKinds k = kKindMixes[ci % std::size(kKindMixes)];
    const bool perTensor = ci % 5 == 2, rtBias = ci % 2 == 1, floatBias = ci % 3 == 0;
    const int32_t xOff = offsetOf(k.x, ci), fOff = k.w == U8Q && !perTensor ? 128 : 0;
    const QKinds kk = perTensor ? QKinds{I8Q, I8Q, I8Q} : k;
    SCOPED_TRACE("case " + std::to_string(ci) + " kinds " + std::to_string(int(kk.x)) + "," +
                 std::to_string(int(kk.w)) + "," + std::to_string(int(kk.y)) +
                 (perTensor ? " per-tensor" : "") + (rtBias ? " run-time bias" : "") +
                 " xOff " + std::to_string(xOff));
    Net n;
    buildConvKinds(n, kCases[ci], kk, perTensor, true, rtBias,
                   floatBias && !perTensor && kk.y != I32,
                   perTensor ? offsetOf(I8Q, ci) : xOff, fOff + int32_t(ci % 4) * 9 - 13,
                   seed);
    checkNet(n, "qconv", seed++);
  }
}

// uint8 operands and i32 results with constant weights (packed at compile time; the
// depthwise kernel for Group == C == O).
TEST(QuantKernel, ConvUInt8AndInt32ConstantWeights) {
  uint64_t seed = 1100;
  const size_t picks[] = {0, 4, 5, 10, 12, 19};
  size_t i = 0;
  for (size_t ci : picks)
    for (QKinds k : {QKinds{U8Q, U8Q, U8Q}, QKinds{U8Q, I8Q, I32}, QKinds{I8Q, U8Q, U8Q}}) {
      SCOPED_TRACE("case " + std::to_string(ci) + " kinds " + std::to_string(int(k.x)) + "," +
                   std::to_string(int(k.w)) + "," + std::to_string(int(k.y)));
      Net n;
      buildConvKinds(n, kCases[ci], k, false, false, false, i % 2 == 0 && k.y != I32,
                     offsetOf(k.x, i),
                     k.w == U8Q ? 120 + int32_t(i) : -3, seed);
      checkNet(n, "qconv", seed++);
      i++;
    }
}

/// A ChannelwiseQuantizedFullyConnected of kinds \p k (or, with \p perTensor, an int8
/// FullyConnected) with weights and, with \p rtBias, bias given at run time.
void buildFCKinds(Net &n, dim_t N, dim_t K, dim_t M, QKinds k, bool perTensor, bool rtBias,
                  int32_t xOff, int32_t wOff, uint64_t seed) {
  n.F = n.mod.createFunction("main");
  n.x = n.mod.createPlaceholder(n.mod.uniqueType(k.x, {N, K}, 0.05f, xOff), "x");
  auto outTy = qType(n.mod, k.y, {N, M}, 0.3f, k.y == U8Q ? 120 : 4);
  Node *fc;
  if (perTensor) {
    NodeValue w =
        operand(n, "w", int8Tensor(Type(I8Q, {K, M}, 0.02f, wOff), seed, -128, 127, true), true);
    NodeValue b = operand(
        n, "b", int32Tensor(Type(ElemKind::Int32Q, {M}, 0.001f, 0), seed + 1, -30000, 30000),
        rtBias);
    fc = n.F->createFullyConnected("fc", outTy, n.x, w, b);
  } else {
    NodeValue w =
        operand(n, "w", int8Tensor(Type(k.w, {K, M}, 1.0f, 0), seed, -128, 127, true), true);
    auto *sc =
        n.mod.createConstant("s", floatTensor(Type(ElemKind::Float, {M}), seed + 2, 0.005f, 0.04f));
    Tensor off(ElemKind::Int32I, {M});
    for (dim_t m = 0; m < M; m++)
      off.getHandle<int32_t>().raw(m) = wOff + int32_t(m % 3) - 1;
    auto *so = n.mod.createConstant("o", std::move(off));
    NodeValue b = operand(
        n, "b", int32Tensor(Type(ElemKind::Int32I, {M}), seed + 1, -30000, 30000), rtBias);
    fc = n.F->createChannelwiseQuantizedFullyConnected("fc", outTy, n.x, w, sc, so, b, "None", 0.0f, 0.0f);
  }
  n.save = n.F->createSave("out", fc);
}

TEST(QuantKernel, FullyConnectedRuntimeWeights) {
  uint64_t seed = 1200;
  struct S {
    dim_t N, K, M;
  };
  const S shapes[] = {{1, 2048, 1000}, {3, 37, 5}, {5, 64, 33}, {4, 3, 70}, {9, 130, 16},
                      {2, 7, 3}};
  size_t i = 0;
  for (S s : shapes)
    for (size_t r = 0; r < 2; r++, i++) {
      const QKinds k = kKindMixes[i % std::size(kKindMixes)];
      const bool perTensor = i % 4 == 3, rtBias = i % 2 == 0;
      const QKinds kk = perTensor ? QKinds{I8Q, I8Q, I8Q} : k;
      SCOPED_TRACE(std::to_string(s.N) + "x" + std::to_string(s.K) + "x" + std::to_string(s.M) +
                   " kinds " + std::to_string(int(kk.x)) + "," + std::to_string(int(kk.w)) +
                   "," + std::to_string(int(kk.y)) + (perTensor ? " per-tensor" : ""));
      Net n;
      buildFCKinds(n, s.N, s.K, s.M, kk, perTensor, rtBias, offsetOf(kk.x, i),
                   kk.w == U8Q ? 127 + int32_t(i % 3) : int32_t(i % 5) - 2, seed);
      checkNet(n, "qfc", seed++);
    }
}

/// The activations fused into an int8 layer in the tests below: a Relu or a Clip with both
/// bounds inside the result's range, on the layer's grid (the quantizer's clamp, offset
/// -7 or 4: asymmetric) or on another one (symmetric for the Relu, asymmetric for the Clip).
struct FusedAct {
  bool clip, sameGrid;
};
const FusedAct kFusedActs[] = {{false, true}, {true, false}, {true, true}, {false, false}};

/// \p layer (an int8 Convolution or FullyConnected, or a channelwise one) with activation
/// \p act (Relu, or the Clip [-1.5, 3]) built in, and result type \p ty.
Node *withActivation(Function *F, Node *layer, TypeRef ty, const std::string &act) {
  const float lo = act == "Clip" ? -1.5f : 0.0f, hi = act == "Clip" ? 3.0f : 0.0f;
  if (auto *c = dyn_cast<ConvolutionNode>(layer))
    return F->createFusedConvolution("act", ty, c->getInput(), c->getFilter(), c->getBias(), {},
                                     c->getKernels(), c->getStrides(), c->getPads(),
                                     c->getDilations(), c->getGroup(), act, lo, hi);
  if (auto *fc = dyn_cast<FullyConnectedNode>(layer))
    return F->createFusedFullyConnected("act", ty, fc->getInput(), fc->getWeights(),
                                        fc->getBias(), {}, act, lo, hi);
  if (auto *c = dyn_cast<ChannelwiseQuantizedConvolutionNode>(layer))
    return F->createChannelwiseQuantizedConvolution(
        "act", ty, c->getInput(), c->getFilter(), c->getFilterScales(), c->getFilterOffsets(),
        c->getBias(), c->getKernels(), c->getStrides(), c->getPads(), c->getDilations(),
        c->getGroup(), act, lo, hi);
  auto *fc = cast<ChannelwiseQuantizedFullyConnectedNode>(layer);
  return F->createChannelwiseQuantizedFullyConnected("act", ty, fc->getInput(), fc->getWeights(),
                                                     fc->getWeightScales(),
                                                     fc->getWeightOffsets(), fc->getBias(),
                                                     act, lo, hi);
}

/// Replaces \p n's saved layer by the layer with activation \p a. A Relu on the layer's grid
/// is a Relu node after it, which fuse-activations folds in on the CPU, while the
/// Interpreter's reference runs the pair unfused (equal: on one grid the fused rounding is
/// the pair's). Otherwise the activation is built into the node (withActivation): the
/// Interpreter's pipeline does not fuse, and no backend runs an int8 Clip node (the
/// quantizer makes Relus of Clips) or a uint8 Relu node.
void addFusedActivation(Net &n, FusedAct a) {
  Node *layer = n.save->getInput().getNode();
  const Type &lt = *layer->getType(0);
  const int32_t shift = lt.kind == U8Q ? 128 : 0;
  TypeRef ty = a.sameGrid ? layer->getType(0)
                          : n.mod.uniqueType(lt.kind, lt.dims, a.clip ? 0.03f : 0.05f,
                                             (a.clip ? -20 : 0) + shift);
  const bool reluNode = !a.clip && a.sameGrid && lt.kind != U8Q; // no uint8 Relu node runs
  Node *act = reluNode ? n.F->createRelu("act", ty, layer)
                       : withActivation(n.F, layer, ty, a.clip ? "Clip" : "Relu");
  n.F->eraseNode(n.save);
  if (!reluNode)
    n.F->eraseNode(layer);
  n.save = n.F->createSave("out_act", act);
}

/// checkNet for a layer with a fused activation: the prepared CPU graph keeps no Relu, so
/// the program is the layer's kernel alone (no separate clamp or table pass).
void checkFused(Net &n, FusedAct a, const std::string &kernel, uint64_t seed) {
  SCOPED_TRACE(std::string(a.clip ? "Clip" : "Relu") + (a.sameGrid ? " same grid" : " other grid"));
  addFusedActivation(n, a);
  cpu::CPUBackend backend;
  Function *probe = n.F->clone("probe");
  ASSERT_FALSE(bool(prepareFunction(probe, backend)));
  for (const auto &node : probe->getNodes())
    EXPECT_NE(node->getKind(), NodeKind::Relu) << "'" << node->getName() << "' was not fused";
  n.mod.eraseFunction(probe);
  checkNet(n, kernel, seed);
}

// A Relu or Clip fused into the int8 convolution (per tensor: FusedConvolution; per
// channel: the node's Activation): the GEMM, direct and depthwise kernels saturate at the
// activation's bounds on its grid, bit for bit with the Interpreter's rounding of the
// activated real value.
TEST(QuantKernel, ConvFusedActivation) {
  uint64_t seed = 1400;
  const size_t picks[] = {0, 1, 4, 5, 10, 12, 19, 20};
  size_t i = 0;
  for (size_t ci : picks)
    for (bool channelwise : {false, true}) {
      for (size_t r = 0; r < 2; r++, i++) {
        SCOPED_TRACE("case " + std::to_string(ci) + (channelwise ? " channelwise" : ""));
        Net n;
        buildConv(n, kCases[ci], channelwise, i % 3 == 0 ? -128 : 9, channelwise ? 6 : -3,
                  0.08f, seed);
        const std::string kernel =
            kCases[ci].group == kCases[ci].in[1] && kCases[ci].group == kCases[ci].outC
                ? "qconv dw"
                : "qconv";
        checkFused(n, kFusedActs[i % std::size(kFusedActs)], kernel, seed++);
      }
    }
}

// The same for uint8 results of the channelwise convolution (the bounds in the kernels'
// shifted domain) and for the FC kernels, per tensor and channelwise.
TEST(QuantKernel, FusedActivationUInt8AndFC) {
  uint64_t seed = 1500;
  for (size_t ci : {size_t(5), size_t(10)})
    for (size_t a = 0; a < std::size(kFusedActs); a++) {
      SCOPED_TRACE("u8 case " + std::to_string(ci));
      Net n;
      buildConvKinds(n, kCases[ci], QKinds{I8Q, I8Q, U8Q}, false, false, false, a % 2 == 0, 3,
                     -2, seed);
      checkFused(n, kFusedActs[a], ci == 10 ? "qconv dw" : "qconv", seed++);
    }
  struct S {
    dim_t N, K, M;
  };
  const S shapes[] = {{3, 37, 5}, {9, 130, 16}, {1, 256, 40}};
  size_t i = 0;
  for (S s : shapes)
    for (bool cw : {false, true})
      for (size_t r = 0; r < 2; r++, i++) {
        SCOPED_TRACE(std::to_string(s.N) + "x" + std::to_string(s.K) + "x" + std::to_string(s.M) +
                     (cw ? " channelwise" : ""));
        Net n;
        buildFC(n, s.N, s.K, s.M, cw, i % 2 ? -128 : 11, cw ? 0 : 5, seed);
        checkFused(n, kFusedActs[i % std::size(kFusedActs)], "qfc", seed++);
      }
}

// int8 MatMul and BatchMatMul (libjit_qbmm_i8_<isa>: the FC micro-kernel per batch, no
// bias, rows requantized by the convolutions' vector path) and BatchedAdd
// (libjit_qbadd_i8_<isa>) against the Interpreter, bit for bit, both ISAs, 1 and 2 threads.

/// An int8 MatMul [N, K] x [K, M] (B = 0) or BatchMatMul [B, N, K] x [B, K, M] of x and an
/// operand given at run time (\p rtRhs) or constant; with \p xIsRhs x is the right operand
/// and the left one a constant. Scales \p sa, \p sb (operands) and \p so (result); raw
/// operand values of the other operand in [lo, hi] (every 7th at -128 or 127).
struct MatMulCase {
  dim_t B, N, K, M;
  int32_t oa, ob, oo;
  float sa, sb, so;
  bool rtRhs, xIsRhs;
  int lo = -128, hi = 127;
};

void buildMatMul(Net &n, const MatMulCase &c, uint64_t seed) {
  n.F = n.mod.createFunction("main");
  auto dims = [&](dim_t r, dim_t col) { return c.B ? Dims{c.B, r, col} : Dims{r, col}; };
  const Type at(I8Q, dims(c.N, c.K), c.sa, c.oa), bt(I8Q, dims(c.K, c.M), c.sb, c.ob);
  NodeValue l, r;
  if (c.xIsRhs) {
    n.x = n.mod.createPlaceholder(n.mod.uniqueType(bt), "x");
    l = n.mod.createConstant("a", int8Tensor(at, seed, c.lo, c.hi, true));
    r = n.x;
  } else {
    n.x = n.mod.createPlaceholder(n.mod.uniqueType(at), "x");
    l = n.x;
    r = operand(n, "b", int8Tensor(bt, seed, c.lo, c.hi, true), c.rtRhs);
  }
  auto outTy = n.mod.uniqueType(I8Q, dims(c.N, c.M), c.so, c.oo);
  Node *mm = c.B ? static_cast<Node *>(n.F->createBatchMatMul("mm", outTy, l, r))
                 : static_cast<Node *>(n.F->createMatMul("mm", outTy, l, r));
  n.save = n.F->createSave("out", mm);
}

// Shapes off every tile of the kernels (rows in fours and in chunks of 64, columns in
// tiles of 32 or 16, K in quads), K = 1, one row and one column; offsets at both ends of
// int8 and in between (the pixel-sum term only where the right operand's offset is not 0);
// constant right operands (packed at compile time, one block per batch), run-time ones
// (attention's Q K^T and P V: packed per run) and a constant left operand; output scales
// that spread the results over the grid, one that saturates nearly every output, exact
// power-of-two scales whose results land on halves, and right-operand scales a hair off
// them (the fast float requantization must defer to the double formula).
TEST(QuantKernel, MatMulAndBatchMatMul) {
  const float s2 = 0x1p-2f, off = 1.0f - 0x1p-24f;
  const MatMulCase cases[] = {
      {0, 3, 37, 5, 0, 0, 4, 0.05f, 0.02f, 0.3f, false, false},
      {0, 67, 64, 33, -128, 127, -7, 0.05f, 0.02f, 1.1f, false, false},
      {0, 5, 130, 70, 127, -128, 0, 0.04f, 0.03f, 2.2f, true, false},
      {0, 9, 1, 17, -3, 7, 11, 0.05f, 0.02f, 0.02f, true, false},
      {0, 1, 768, 200, 5, 0, -20, 0.013f, 0.021f, 3.7f, false, false},
      {0, 70, 9, 1, 9, -2, 1, 0.05f, 0.02f, 0.15f, false, true},
      {0, 40, 48, 36, -1, 3, 0, 0.05f, 0.02f, 0.001f, true, false},  // saturates
      {0, 6, 3, 40, 0, 0, -2, 0.5f, s2, 1.0f, true, false, -6, 6},      // halves
      {0, 6, 3, 40, 1, -1, 2, 0.5f, s2 * off, 1.0f, false, false, -6, 6},
      {3, 4, 13, 5, 2, -9, 3, 0.05f, 0.02f, 0.4f, true, false},
      {12, 16, 64, 16, -5, 4, -1, 0.05f, 0.02f, 1.1f, true, false},    // attention Q K^T
      {4, 65, 33, 70, 127, -128, 6, 0.03f, 0.05f, 2.1f, false, false},
      {2, 2, 1, 3, -128, 127, 0, 0.05f, 0.02f, 0.01f, false, true},
      {2, 9, 64, 40, 0, 0, 5, 0.05f, 0.02f, 0.8f, false, false},
      {5, 3, 3, 33, 0, 0, 0, 0.5f, s2, 1.0f, true, false, -6, 6},       // halves
  };
  uint64_t seed = 1300;
  for (const MatMulCase &c : cases) {
    SCOPED_TRACE(std::to_string(c.B) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) +
                 "x" + std::to_string(c.M) + " offsets " + std::to_string(c.oa) + "," +
                 std::to_string(c.ob) + (c.rtRhs ? " run-time" : "") +
                 (c.xIsRhs ? " x right" : ""));
    Net n;
    buildMatMul(n, c, seed);
    // x gets the case's value range too (the halves cases need small products).
    checkNet(n, c.B ? "qbmm" : "qmatmul", seed++, true, "", c.lo, c.hi);
  }
}

// BatchedAdd of x and a constant or run-time slice: rows of 37 (vectors and tails), of 3
// (every run shorter than a vector), of 1000 (a row split between the two threads), the
// Add's scale sets (saturating, power-of-two halves, a hair off them).
TEST(QuantKernel, BatchedAdd) {
  struct S {
    float sx, sc, so;
    int32_t ox, oc, oo;
  };
  const S scales[] = {{0.05f, 0.031f, 0.07f, 3, -20, 5},
                      {0.013f, 0.2f, 0.11f, -128, 127, -128},
                      {0.05f, 0.04f, 0.001f, 0, 0, 0},
                      {0.5f, 0.25f, 1.0f, 1, -3, 2},
                      {0.5f, 0.25f * (1.0f - 0x1p-24f), 1.0f, 1, -3, 2}};
  const std::pair<Dims, Dims> shapes[] = {
      {{5, 37}, {37}}, {{3, 4, 20}, {4, 20}}, {{70, 3}, {3}}, {{3, 1000}, {1000}}};
  uint64_t seed = 1400;
  size_t i = 0;
  for (const auto &[bd, sd] : shapes)
    for (const S &sc : scales) {
      const bool rt = i++ % 2 == 1;
      SCOPED_TRACE("seed " + std::to_string(seed) + (rt ? " run-time slice" : ""));
      Net n;
      n.F = n.mod.createFunction("main");
      n.x = n.mod.createPlaceholder(n.mod.uniqueType(I8Q, bd, sc.sx, sc.ox), "x");
      NodeValue s = operand(n, "s", int8Tensor(Type(I8Q, sd, sc.sc, sc.oc), seed + 1, -128, 127, true), rt);
      auto outTy = n.mod.uniqueType(I8Q, bd, sc.so, sc.oo);
      n.save = n.F->createSave("out", n.F->createBatchedAdd("ba", outTy, n.x, s));
      checkNet(n, "qbatchedadd", seed++);
    }
}

} // namespace
} // namespace kiln
