// Activations fused into the epilogues of the CPU's convolution and GEMM kernels, against
// the Interpreter running the same graph unfused: every activation kind (as a node, or as
// the element-wise chain an importer writes) after every convolution algorithm (forced
// with CodegenOptions::forceConv) and after FullyConnected and MatMul, odd sizes, with
// and without a residual, at 1 and 2 threads, AVX-512 and AVX2 kernels. Each case also
// checks that fuse-activations left no element-wise stage behind (with
// CPUBackendOptions::fuseSigmoids, which the default leaves off). And the
// squeeze-and-excitation fold (the channel scale moved onto the next convolution's
// filter) on a small SE block.
#include "backends/CPU/CPUBackend.h"
#include "backends/CPU/ThreadPool.h"
#include "backends/CPU/codegen/Codegen.h"
#include "backends/CPU/jit/Jit.h"
#include "kiln/Backend/Compiler.h"
#include "kiln/Memory/MemoryPipeline.h"
#include "kiln/kiln.h"
#include "test/cpu/CodegenRun.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kiln {
namespace {

using cpu::ConvAlgorithm;
using cpu::convAlgorithmName;

struct Net {
  Module mod;
  Function *F = nullptr;
  std::vector<Placeholder *> inputs;
  std::vector<SaveNode *> saves;
};

Tensor randomTensor(Dims dims, uint64_t seed, float lo, float hi) {
  Tensor t(ElemKind::Float, dims);
  PseudoRNG rng(seed);
  t.randomize(lo, hi, rng);
  return t;
}

Constant *randomConstant(Module &m, const std::string &name, Dims dims, uint64_t seed,
                         float scale) {
  return m.createConstant(name, randomTensor(dims, seed, -scale, scale));
}

std::vector<std::vector<float>> execute(Net &net, CompiledFunction &fn) {
  PlaceholderBindings b;
  b.allocate(net.mod.getPlaceholders());
  for (size_t i = 0; i < net.inputs.size(); i++) {
    Tensor *t = b.get(net.inputs[i]);
    Tensor r = randomTensor(t->getType().dims, 100 + i, -2.0f, 2.0f);
    std::memcpy(t->getUnsafePtr(), r.getUnsafePtr(), r.getSizeInBytes());
  }
  ExecutionContext ctx(&b);
  Error e = fn.execute(ctx);
  EXPECT_FALSE(bool(e)) << e.message();
  std::vector<std::vector<float>> outs;
  for (SaveNode *s : net.saves) {
    Tensor *t = b.get(s->getPlaceholder());
    const float *p = reinterpret_cast<const float *>(t->getUnsafePtr());
    outs.emplace_back(p, p + t->size());
  }
  return outs;
}

/// The Interpreter's results, the graph unfused (its pipeline has no fuse-activations).
std::vector<std::vector<float>> reference(Net &net) {
  auto interp = exitOnError(createBackend("Interpreter"));
  auto cf = compileFunction(net.F, *interp, CompileOptions());
  EXPECT_TRUE(bool(cf)) << cf.getError().message();
  if (!cf)
    return {};
  return execute(net, **cf);
}

/// \p net on the CPU with \p co; the stage descriptions in \p stages.
std::vector<std::vector<float>> runCPU(Net &net, const cpu::CodegenOptions &co,
                                       std::vector<std::string> &stages) {
  cpu::CPUBackendOptions o;
  o.fuseSigmoids = true; // every kind the kernels have
  cpu::CPUBackend cpu(o);
  auto fn = test::compileWithCodegen(net.F, cpu, co, stages);
  if (!fn)
    return {};
  return execute(net, *fn);
}

/// The activations, each as the graph writes it: a node, or an importer's chain.
enum class Act {
  Relu,
  Clip,
  LeakyRelu,
  PRelu,
  Sigmoid,
  Tanh,
  Swish,
  SwishChain,
  HardSwish,
  HardSwishChain,
  HardSigmoidChain,
  Gelu,
  GeluTanh,
  GeluChain,
};
const Act kActs[] = {Act::Relu,      Act::Clip,           Act::LeakyRelu,        Act::PRelu,
                     Act::Sigmoid,   Act::Tanh,           Act::Swish,            Act::SwishChain,
                     Act::HardSwish, Act::HardSwishChain, Act::HardSigmoidChain, Act::Gelu,
                     Act::GeluTanh,  Act::GeluChain};
const char *actName(Act a) {
  static const char *names[] = {"Relu",      "Clip",           "LeakyRelu",        "PRelu",
                                "Sigmoid",   "Tanh",           "Swish",            "SwishChain",
                                "HardSwish", "HardSwishChain", "HardSigmoidChain", "Gelu",
                                "GeluTanh",  "GeluChain"};
  return names[int(a)];
}

/// \p a applied to \p x.
NodeValue activate(Function *F, Act a, NodeValue x) {
  auto splat = [&](const char *name, float v) {
    return NodeValue(F->createSplat(name, x.getType(), v));
  };
  auto hardSigmoid = [&](float alpha, float beta) {
    NodeValue s = F->createMul("hs.scale", x, splat("hs.alpha", alpha));
    NodeValue t = F->createAdd("hs.shift", splat("hs.beta", beta), s);
    return NodeValue(F->createClip("hs", t, 0.0f, 1.0f));
  };
  switch (a) {
  case Act::Relu:
    return F->createRelu("act", x);
  case Act::Clip:
    return F->createClip("act", x, -0.5f, 1.5f);
  case Act::LeakyRelu:
    return F->createLeakyRelu("act", x, 0.1f);
  case Act::PRelu:
    return F->createPRelu("act", x, splat("slope", 0.25f));
  case Act::Sigmoid:
    return F->createSigmoid("act", x);
  case Act::Tanh:
    return F->createTanh("act", x);
  case Act::Swish:
    return F->createSwish("act", x);
  case Act::SwishChain:
    return F->createMul("act", x, F->createSigmoid("sg", x));
  case Act::HardSwish:
    return F->createHardSwish("act", x);
  case Act::HardSwishChain:
    return F->createMul("act", hardSigmoid(1.0f / 6.0f, 0.5f), x);
  case Act::HardSigmoidChain:
    return hardSigmoid(0.2f, 0.5f);
  case Act::Gelu:
    return F->createGelu("act", x, false);
  case Act::GeluTanh:
    return F->createGelu("act", x, true);
  case Act::GeluChain: {
    NodeValue d = F->createDiv("g.div", x, splat("g.sqrt2", 1.41421354f));
    NodeValue p = F->createAdd("g.add", F->createErf("g.erf", d), splat("g.one", 1.0f));
    return F->createMul("act", F->createMul("g.mul", x, p), splat("g.half", 0.5f));
  }
  }
  return x;
}

/// Checks \p build's net on the CPU (1 and 2 threads, AVX-512 and AVX2) against the
/// Interpreter, with every convolution forced to \p force when set; no element-wise stage
/// may remain unless \p elementwiseStages.
template <class Build>
void checkFused(Build build, std::optional<ConvAlgorithm> force, float tol,
                bool elementwiseStages = false) {
  Net ref;
  build(ref);
  ASSERT_FALSE(bool(ref.F->verify()));
  auto expected = reference(ref);
  for (unsigned threads : {1u, 2u})
    for (bool noAvx512 : {false, true}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + (noAvx512 ? " avx2" : ""));
      cpu::CodegenOptions co;
      co.threads = threads;
      co.winograd = true;
      co.fastWinograd = true;
      co.forceConv = force;
      co.jit.disableAvx512 = noAvx512;
      Net net;
      build(net);
      std::vector<std::string> stages;
      auto got = runCPU(net, co, stages);
      bool forced = false;
      for (const std::string &s : stages) {
        if (!elementwiseStages) {
          EXPECT_EQ(s.find("elementwise"), std::string::npos) << s;
        }
        forced |= force && s.find(std::string(convAlgorithmName(*force)) + " ") == 0;
      }
      EXPECT_TRUE(!force || forced);
      ASSERT_EQ(got.size(), expected.size());
      for (size_t i = 0; i < got.size(); i++) {
        ASSERT_EQ(got[i].size(), expected[i].size());
        for (size_t j = 0; j < got[i].size(); j++)
          ASSERT_NEAR(got[i][j], expected[i][j], tol * (1.0f + std::fabs(expected[i][j])))
              << "output " << i << " element " << j;
      }
    }
}

/// One convolution C -> O, k x k, stride s, pad p, group g on [1, C, H, W] (+ a residual
/// when \p residual), then \p act; saved.
void buildConv(Net &n, Act act, dim_t C, dim_t O, dim_t H, dim_t W, dim_t k, dim_t s, dim_t p,
               dim_t g, bool residual) {
  n.F = n.mod.createFunction("main");
  auto *x = n.mod.createPlaceholder(ElemKind::Float, {1, C, H, W}, "x");
  n.inputs = {x};
  auto *w = randomConstant(n.mod, "w", {O, C / g, k, k}, 7, 1.5f / std::sqrt(float(C / g * k * k)));
  auto *b = randomConstant(n.mod, "b", {O}, 8, 0.5f);
  NodeValue y = n.F->createConvolution("conv", x, w, b, {k, k}, {s, s}, {p, p, p, p}, {1, 1}, g);
  if (residual) {
    auto *r = n.mod.createPlaceholder(ElemKind::Float, y.dims(), "r");
    n.inputs.push_back(r);
    y = n.F->createAdd("sum", y, r);
  }
  n.saves = {n.F->createSave("y", activate(n.F, act, y))};
}

struct ConvCase {
  ConvAlgorithm algo;
  dim_t C, O, H, W, k, s, p, g;
  bool residual;
};

// Odd sizes: channels off the register tiles, images off the vectors.
const ConvCase kConvCases[] = {
    {ConvAlgorithm::PackedGemm, 13, 19, 9, 11, 3, 1, 1, 1, true},
    {ConvAlgorithm::PackedGemm, 7, 21, 8, 13, 1, 2, 0, 1, false},
    {ConvAlgorithm::Strip, 11, 37, 10, 21, 1, 1, 0, 1, true},
    {ConvAlgorithm::Strip, 5, 18, 13, 17, 3, 1, 1, 1, false},
    {ConvAlgorithm::Transposed, 9, 35, 7, 9, 3, 1, 1, 1, true},
    {ConvAlgorithm::Winograd, 8, 17, 13, 15, 3, 1, 1, 1, true},
    {ConvAlgorithm::WinogradRows2, 8, 19, 11, 14, 3, 1, 1, 1, true},
    {ConvAlgorithm::WinogradRows4, 6, 18, 17, 13, 3, 1, 1, 1, false},
    {ConvAlgorithm::Depthwise, 12, 12, 15, 19, 3, 1, 1, 12, false},
    {ConvAlgorithm::Depthwise, 10, 10, 21, 23, 5, 2, 2, 10, false},
    // The ring path at stride 2 (output rows of 16 or more; an odd number of them).
    {ConvAlgorithm::Depthwise, 6, 6, 33, 37, 5, 2, 2, 6, false},
    {ConvAlgorithm::Depthwise, 5, 5, 35, 64, 3, 2, 1, 5, false},
    // The small-plane path (7x7 and 14x13 planes at stride 1).
    {ConvAlgorithm::Depthwise, 9, 9, 7, 7, 5, 1, 2, 9, false},
    {ConvAlgorithm::Depthwise, 11, 11, 14, 13, 3, 1, 1, 11, false},
    // 16 output channels per group on narrow planes at stride 1: the lanes path on AVX-512
    // (7 x 2 tiles), the small-plane path on AVX2; 8 per group: the small-plane path.
    {ConvAlgorithm::Grouped, 32, 32, 7, 7, 3, 1, 1, 2, true},
    {ConvAlgorithm::Grouped, 16, 32, 14, 13, 3, 1, 1, 2, false},
    {ConvAlgorithm::Grouped, 16, 16, 7, 7, 3, 1, 1, 2, true},
    // The lanes path's other tiles: 32 output channels per group at stride 2 (7 x 2), and
    // on rows of 30 (14 x 1 tiles, the last one overlapping).
    {ConvAlgorithm::Grouped, 64, 64, 15, 16, 3, 2, 1, 2, true},
    {ConvAlgorithm::Grouped, 64, 64, 9, 30, 3, 1, 1, 2, false},
};

TEST(FusedActivation, EveryKindEveryConvolution) {
  for (const ConvCase &c : kConvCases)
    for (Act a : kActs) {
      SCOPED_TRACE(std::string(convAlgorithmName(c.algo)) + " " + actName(a) + " C" +
                   std::to_string(c.C) + " O" + std::to_string(c.O) + " k" + std::to_string(c.k));
      checkFused(
          [&](Net &n) { buildConv(n, a, c.C, c.O, c.H, c.W, c.k, c.s, c.p, c.g, c.residual); },
          c.algo, 2e-5f);
    }
}

/// [N, K] x [K, M] + bias (a FullyConnected, or a MatMul behind Reshapes, as ONNX's
/// MatMul of a rank-3 input imports), then \p act.
void buildGemm(Net &n, Act act, dim_t N, dim_t K, dim_t M, bool matmul, bool residual) {
  n.F = n.mod.createFunction("main");
  auto *w = randomConstant(n.mod, "w", {K, M}, 9, 1.5f / std::sqrt(float(K)));
  NodeValue y;
  if (matmul) {
    auto *x = n.mod.createPlaceholder(ElemKind::Float, {1, N, K}, "x");
    n.inputs = {x};
    NodeValue rows = n.F->createReshape("rows", x, {N, K});
    y = n.F->createReshape("out", n.F->createMatMul("mm", rows, w), {1, N, M});
  } else {
    auto *x = n.mod.createPlaceholder(ElemKind::Float, {N, K}, "x");
    n.inputs = {x};
    auto *b = randomConstant(n.mod, "b", {M}, 10, 0.5f);
    y = n.F->createFullyConnected("fc", x, w, b);
    if (residual) {
      auto *r = n.mod.createPlaceholder(ElemKind::Float, y.dims(), "r");
      n.inputs.push_back(r);
      y = n.F->createAdd("sum", y, r);
    }
  }
  n.saves = {n.F->createSave("y", activate(n.F, act, y))};
}

TEST(FusedActivation, EveryKindFullyConnectedAndMatMul) {
  for (Act a : kActs) {
    SCOPED_TRACE(actName(a));
    checkFused([&](Net &n) { buildGemm(n, a, 37, 29, 45, false, true); }, std::nullopt, 2e-5f);
    checkFused([&](Net &n) { buildGemm(n, a, 3, 64, 17, false, false); }, std::nullopt, 2e-5f);
    checkFused([&](Net &n) { buildGemm(n, a, 50, 24, 33, true, false); }, std::nullopt, 2e-5f);
    // One row: the weights read in place (libjit_fc_row_f32), its epilogue; small enough
    // to run on one thread, and large enough for rows split between two (partial sums).
    checkFused([&](Net &n) { buildGemm(n, a, 1, 300, 70, false, true); }, std::nullopt, 2e-5f);
    checkFused([&](Net &n) { buildGemm(n, a, 1, 2000, 700, false, true); }, std::nullopt, 2e-5f);
    // Its groups of 16 weight rows: one group and 3 single rows over 9 columns (no whole
    // vector); three blocks of 256 rows, the last 5 rows single, 1003 columns (a tail of 11).
    checkFused([&](Net &n) { buildGemm(n, a, 1, 19, 9, false, true); }, std::nullopt, 2e-5f);
    checkFused([&](Net &n) { buildGemm(n, a, 1, 517, 1003, false, true); }, std::nullopt, 2e-5f);
  }
}

/// A squeeze-and-excitation block: x -> 3x3 depthwise + Swish -> global pool -> 1x1 (C ->
/// C/4) + Swish -> 1x1 (C/4 -> C) + the gate (Sigmoid, or the importer's HardSigmoid) ->
/// per-channel Mul -> 1x1 projection C -> P.
void buildSE(Net &n, dim_t C, dim_t S, dim_t P, bool hard) {
  n.F = n.mod.createFunction("main");
  auto *x = n.mod.createPlaceholder(ElemKind::Float, {1, C, S, S}, "x");
  n.inputs = {x};
  auto conv = [&](const std::string &name, NodeValue in, dim_t c, dim_t o, dim_t k, dim_t g,
                  uint64_t seed) {
    auto *w = randomConstant(n.mod, name + ".w", {o, c / g, k, k}, seed,
                             1.5f / std::sqrt(float(c / g * k * k)));
    auto *b = randomConstant(n.mod, name + ".b", {o}, seed + 1, 0.5f);
    dim_t p = k / 2;
    return NodeValue(
        n.F->createConvolution(name, in, w, b, {k, k}, {1, 1}, {p, p, p, p}, {1, 1}, g));
  };
  NodeValue d = activate(n.F, Act::SwishChain, conv("dw", x, C, C, 3, C, 20));
  NodeValue pooled = n.F->createGlobalAvgPool("pool", d);
  NodeValue f1 = activate(n.F, Act::Swish, conv("fc1", pooled, C, C / 4, 1, 1, 22));
  NodeValue f2 = conv("fc2", f1, C / 4, C, 1, 1, 24);
  NodeValue gate = activate(n.F, hard ? Act::HardSigmoidChain : Act::Sigmoid, f2);
  NodeValue scaled = n.F->createMul("se", d, n.F->createBroadcastTo("se.b", gate, d.dims()));
  n.saves = {n.F->createSave("y", conv("proj", scaled, C, P, 1, 1, 26))};
}

TEST(FusedActivation, SqueezeExcitation) {
  for (bool hard : {false, true}) {
    SCOPED_TRACE(hard ? "hard-sigmoid" : "sigmoid");
    // (The filter's scaling is an element-wise stage.)
    checkFused([&](Net &n) { buildSE(n, 24, 15, 16, hard); }, std::nullopt, 2e-5f, true);
    // The channel scale went onto the projection's filter: no Mul of the activation.
    Net n;
    buildSE(n, 24, 15, 16, hard);
    cpu::CPUBackendOptions o;
    o.fuseSigmoids = true;
    cpu::CPUBackend cpu(o);
    ASSERT_FALSE(bool(prepareFunction(n.F, cpu)));
    unsigned bigMuls = 0, fused = 0;
    for (const auto &np : n.F->getNodes()) {
      const Node &node = *np;
      bigMuls += node.getKind() == NodeKind::Mul && node.getType(0)->dims[2] == 15;
      fused += node.getKind() == NodeKind::FusedConvolution;
    }
    EXPECT_EQ(bigMuls, 0u);
    EXPECT_EQ(fused, 3u); // dw + Swish, fc1 + Swish, fc2 + the gate
  }
}

} // namespace
} // namespace kiln
