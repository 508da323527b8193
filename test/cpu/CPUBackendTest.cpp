// Whole functions compiled by the CPU backend against the Interpreter: small networks
// that exercise GEMM-based convolution and FC, fused epilogues, element-wise fusion,
// data movement, threads, and the AVX2 path on AVX-512 hosts.
#include "backends/CPU/CPUBackend.h"
#include "backends/CPU/ThreadPool.h"
#include "backends/CPU/codegen/Codegen.h"
#include "backends/CPU/jit/Jit.h"
#include "backends/CPU/jit/Prebuilt.h"
#include "kiln/Backend/Compiler.h"
#include "kiln/Memory/MemoryPipeline.h"
#include "kiln/kiln.h"
#include "test/cpu/CodegenRun.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <functional>
#include <iterator>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>

namespace kiln {
namespace {

struct Net {
  Module mod;
  Function *F = nullptr;
  std::vector<Placeholder *> inputs;
  std::vector<SaveNode *> saves;
};

/// Random tensor of the given dims.
Tensor randomTensor(Dims dims, uint64_t seed, float lo = -1, float hi = 1) {
  Tensor t(ElemKind::Float, dims);
  PseudoRNG rng(seed);
  t.randomize(lo, hi, rng);
  return t;
}

Constant *randomConstant(Module &m, const std::string &name, Dims dims, uint64_t seed,
                         float scale = 0.2f) {
  return m.createConstant(name, randomTensor(dims, seed, -scale, scale));
}

/// A square-kernel convolution of \p in with seeded random weights [o, c / g, k, k] and
/// bias [o] (seeds \p seed and seed + 1), added to \p n's function.
NodeValue randomConv(Net &n, const std::string &name, NodeValue in, dim_t c, dim_t o, dim_t k,
                     dim_t s, std::vector<dim_t> pads, uint64_t seed, dim_t g = 1) {
  auto *w = randomConstant(n.mod, name + ".w", {o, c / g, k, k}, seed);
  auto *b = randomConstant(n.mod, name + ".b", {o}, seed + 1);
  return n.F->createConvolution(name, in, w, b, {k, k}, {s, s}, pads, {1, 1}, g);
}
/// The same with the same pad \p p on every side.
NodeValue randomConv(Net &n, const std::string &name, NodeValue in, dim_t c, dim_t o, dim_t k,
                     dim_t s, dim_t p, uint64_t seed, dim_t g = 1) {
  return randomConv(n, name, in, c, o, k, s, {p, p, p, p}, seed, g);
}

/// Binds seeded random inputs, runs \p fn \p runs times and returns copies of the saved
/// tensors.
std::vector<std::vector<float>> executeOn(Net &net, CompiledFunction &fn, int runs = 1) {
  PlaceholderBindings b;
  b.allocate(net.mod.getPlaceholders());
  for (size_t i = 0; i < net.inputs.size(); i++) {
    Tensor *t = b.get(net.inputs[i]);
    Tensor r = randomTensor(t->getType().dims, 100 + i);
    std::memcpy(t->getUnsafePtr(), r.getUnsafePtr(), r.getSizeInBytes());
  }
  for (int r = 0; r < runs; r++) {
    ExecutionContext ctx(&b);
    Error e = fn.execute(ctx);
    EXPECT_FALSE(bool(e)) << e.message();
  }
  std::vector<std::vector<float>> outs;
  for (SaveNode *s : net.saves) {
    Tensor *t = b.get(s->getPlaceholder());
    const float *p = reinterpret_cast<const float *>(t->getUnsafePtr());
    outs.emplace_back(p, p + t->size());
  }
  return outs;
}

/// Runs \p net on \p backend and returns copies of the saved tensors.
std::vector<std::vector<float>> runOn(Net &net, Backend &backend, const CompileOptions &opts,
                                      std::string *stats = nullptr, int runs = 1) {
  auto cf = compileFunction(net.F, backend, opts);
  EXPECT_TRUE(bool(cf)) << cf.getError().message();
  if (!cf)
    return {};
  if (stats)
    if (auto *c = dynamic_cast<cpu::CPUFunction *>(cf->get()))
      *stats = c->getStats();
  return executeOn(net, **cf, runs);
}

void expectClose(const std::vector<std::vector<float>> &a,
                 const std::vector<std::vector<float>> &b, float atol = 1e-4f,
                 float rtol = 1e-4f) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); i++) {
    ASSERT_EQ(a[i].size(), b[i].size());
    for (size_t j = 0; j < a[i].size(); j++)
      ASSERT_NEAR(a[i][j], b[i][j], atol + rtol * std::fabs(b[i][j]))
          << "output " << i << " element " << j;
  }
}

/// Checks \p build's net on the CPU backend (several configurations) against the
/// Interpreter.
template <class Build> void checkAgainstInterpreter(Build build) {
  auto interp = exitOnError(createBackend("Interpreter"));
  Net ref;
  build(ref);
  ASSERT_FALSE(bool(ref.F->verify()));
  auto expected = runOn(ref, *interp, {});
  struct Config {
    unsigned threads;
    bool noAvx512;
    bool fuse;
    bool optimizeIR;
  };
  for (Config c : {Config{1, false, true, true}, Config{2, false, true, true},
                   Config{1, true, true, true}, Config{2, true, false, true},
                   Config{1, false, true, false}}) {
    SCOPED_TRACE("threads " + std::to_string(c.threads) + (c.noAvx512 ? " avx2" : "") +
                 (c.fuse ? "" : " unfused") + (c.optimizeIR ? "" : " plain IR"));
    cpu::CPUBackendOptions o;
    o.disableAvx512 = c.noAvx512;
    o.fuseEpilogues = o.fuseElementwise = c.fuse;
    o.optimizeIR = c.optimizeIR;
    cpu::CPUBackend cpu(o);
    Net net;
    build(net);
    for (const auto &n : net.F->getNodes())
      ASSERT_TRUE(cpu.isOpSupported(*n)) << n->getKindName();
    CompileOptions opts;
    opts.threads = c.threads;
    std::string stats;
    auto got = runOn(net, cpu, opts, &stats, 2);
    expectClose(got, expected);
  }
}

TEST(CPUBackend, Registered) {
  auto b = createBackend("CPU");
  ASSERT_TRUE(bool(b));
  EXPECT_EQ((*b)->getName(), "CPU");
}

TEST(CPUBackend, MLP) {
  checkAgainstInterpreter([](Net &n) {
    n.F = n.mod.createFunction("main");
    auto *x = n.mod.createPlaceholder(ElemKind::Float, {3, 67}, "x");
    n.inputs = {x};
    auto *w1 = randomConstant(n.mod, "w1", {67, 45}, 1);
    auto *b1 = randomConstant(n.mod, "b1", {45}, 2);
    auto *w2 = randomConstant(n.mod, "w2", {45, 10}, 3);
    auto *b2 = randomConstant(n.mod, "b2", {10}, 4);
    auto *h = n.F->createRelu("r", n.F->createFullyConnected("fc1", x, w1, b1));
    auto *y = n.F->createSoftMax("sm", n.F->createFullyConnected("fc2", h, w2, b2), 1);
    n.saves = {n.F->createSave("y", y)};
  });
}

TEST(CPUBackend, MatMulWithRuntimeOperands) {
  checkAgainstInterpreter([](Net &n) {
    n.F = n.mod.createFunction("main");
    auto *a = n.mod.createPlaceholder(ElemKind::Float, {37, 70}, "a");
    auto *b = n.mod.createPlaceholder(ElemKind::Float, {70, 53}, "b");
    auto *c = n.mod.createPlaceholder(ElemKind::Float, {3, 9, 20}, "c");
    auto *d = n.mod.createPlaceholder(ElemKind::Float, {3, 20, 35}, "d");
    n.inputs = {a, b, c, d};
    n.saves = {n.F->createSave("mm", n.F->createMatMul("mm", a, b)),
               n.F->createSave("bmm", n.F->createBatchMatMul("bmm", c, d))};
  });
}

/// A ResNet basic block on [1, 16, 20, 20]: conv3x3 -> relu -> conv3x3 -> + x -> relu,
/// then a strided 1x1 projection, pooling and a classifier.
TEST(CPUBackend, ResidualBlock) {
  checkAgainstInterpreter([](Net &n) {
    n.F = n.mod.createFunction("main");
    Function *F = n.F;
    auto *x = n.mod.createPlaceholder(ElemKind::Float, {1, 16, 20, 20}, "x");
    n.inputs = {x};
    NodeValue h = F->createRelu("r1", randomConv(n, "c1", x, 16, 16, 3, 1, 1, 10));
    NodeValue h2 = randomConv(n, "c2", h, 16, 16, 3, 1, 1, 20);
    NodeValue r = F->createRelu("r2", F->createAdd("add", h2, x));
    NodeValue p = randomConv(n, "proj", r, 16, 40, 1, 2, 0, 30);
    NodeValue dw = F->createClip("relu6", randomConv(n, "dw", p, 40, 40, 3, 1, 1, 40, 40), 0, 6);
    NodeValue mp = F->createMaxPool("mp", dw, {3, 3}, {2, 2}, {1, 1, 1, 1});
    NodeValue gp = F->createAdaptiveAvgPool("gap", mp, {1, 1});
    NodeValue flat = F->createReshape("flat", gp, {1, 40});
    auto *w = randomConstant(n.mod, "fc.w", {40, 7}, 50);
    auto *b = randomConstant(n.mod, "fc.b", {7}, 51);
    n.saves = {F->createSave("y", F->createFullyConnected("fc", flat, w, b)),
               F->createSave("r", r)};
  });
}

// Small images take the transposed convolution (pixels as GEMM rows) with the fused
// residual add and Relu; also a depthwise stride-2 convolution and a strided max pool.
TEST(CPUBackend, SmallImageConvolutions) {
  checkAgainstInterpreter([](Net &n) {
    n.F = n.mod.createFunction("main");
    Function *F = n.F;
    auto *x = n.mod.createPlaceholder(ElemKind::Float, {1, 24, 7, 7}, "x");
    n.inputs = {x};
    NodeValue a = randomConv(n, "a", x, 24, 40, 3, 1, 1, 60);
    NodeValue b = randomConv(n, "b", x, 24, 40, 1, 1, 0, 70);
    NodeValue r = F->createRelu("r", F->createAdd("add", a, b));
    NodeValue d = randomConv(n, "dw", r, 40, 40, 3, 2, 1, 80, 40);
    NodeValue m = F->createMaxPool("mp", r, {3, 3}, {2, 2}, {0, 0, 0, 0});
    n.saves = {F->createSave("r", r), F->createSave("d", d), F->createSave("m", m)};
  });
}

// Larger images take the strip convolution: a 3-channel stride-2 stem, pointwise layers
// with 12-20 channels (tiles of 8, 4 and fewer rows), a residual add and clamps fused in.
TEST(CPUBackend, StripConvolutions) {
  checkAgainstInterpreter([](Net &n) {
    n.F = n.mod.createFunction("main");
    Function *F = n.F;
    auto *x = n.mod.createPlaceholder(ElemKind::Float, {1, 3, 64, 62}, "x");
    n.inputs = {x};
    NodeValue stem = F->createRelu("r0", randomConv(n, "stem", x, 3, 12, 3, 2, 1, 90));
    NodeValue e = F->createClip("r6", randomConv(n, "expand", stem, 12, 20, 1, 1, 0, 91), 0, 6);
    NodeValue p = randomConv(n, "project", e, 20, 12, 1, 1, 0, 92);
    NodeValue r = F->createRelu("r1", F->createAdd("add", p, stem));
    NodeValue big = randomConv(n, "big", r, 12, 7, 5, 1, 2, 93);
    n.saves = {F->createSave("r", r), F->createSave("big", big)};
  });
}

/// A SqueezeNet fire module: squeeze 1x1 + Relu, then 1x1 and 3x3 expands + Relu
/// concatenated on channels, read by a 1x1 convolution and a max pool.
void buildFireModule(Net &n) {
  n.F = n.mod.createFunction("main");
  Function *F = n.F;
  auto *x = n.mod.createPlaceholder(ElemKind::Float, {1, 24, 15, 13}, "x");
  n.inputs = {x};
  NodeValue sq = F->createRelu("sq.r", randomConv(n, "sq", x, 24, 8, 1, 1, 0, 110));
  NodeValue e1 = F->createRelu("e1.r", randomConv(n, "e1", sq, 8, 16, 1, 1, 0, 111));
  NodeValue e3 = F->createRelu("e3.r", randomConv(n, "e3", sq, 8, 24, 3, 1, 1, 112));
  NodeValue cat = F->createConcat("cat", {e1, e3}, 1);
  NodeValue next = randomConv(n, "next", cat, 40, 10, 1, 1, 0, 113);
  NodeValue mp = F->createMaxPool("mp", cat, {3, 3}, {2, 2}, {0, 0, 0, 0});
  n.saves = {F->createSave("next", next), F->createSave("mp", mp)};
}

TEST(CPUBackend, FireModuleConcat) { checkAgainstInterpreter(buildFireModule); }

// With the IR passes, both expands (Relu fused into each) write their halves of the
// Concat's result directly: no copy in the generated code, and less activation memory than
// the plain IR, which writes each half to a buffer of its own.
TEST(CPUBackend, ConcatOperandsBecomeViews) {
  auto activationBytes = [](const std::string &stats) {
    return std::stoll(stats.substr(stats.find("activations ") + 12));
  };
  // A copy is the memcpy intrinsic, or a call of the process's memcpy through the
  // constant arena (Emitter::memCopy: the only call there that returns a pointer).
  auto copies = [](const std::string &ir) {
    size_t n = 0;
    for (const char *call : {"call void @llvm.memcpy", "call i8* %"})
      for (size_t at = ir.find(call); at != std::string::npos; at = ir.find(call, at + 1))
        n++;
    return n;
  };
  std::string stats[2], ir[2];
  for (bool optimizeIR : {true, false}) {
    cpu::CPUBackendOptions o;
    o.optimizeIR = optimizeIR;
    o.keepIR = true;
    cpu::CPUBackend cpu(o);
    Net net;
    buildFireModule(net);
    CompileOptions opts;
    opts.threads = 1;
    auto cf = compileFunction(net.F, cpu, opts);
    ASSERT_TRUE(bool(cf)) << cf.getError().message();
    auto *c = dynamic_cast<cpu::CPUFunction *>(cf->get());
    ASSERT_NE(c, nullptr);
    stats[optimizeIR] = c->getStats();
    ir[optimizeIR] = c->getIR();
  }
  EXPECT_NE(stats[1].find("fused epilogues 3"), std::string::npos) << stats[1];
  EXPECT_NE(stats[0].find("fused epilogues 3"), std::string::npos) << stats[0];
  // The plain IR copies both halves into the Concat's result and both saved results into
  // their placeholders; copy elimination lets the producers write the placeholders too.
  EXPECT_EQ(copies(ir[1]), 0u) << ir[1];
  EXPECT_EQ(copies(ir[0]), 4u) << ir[0];
  EXPECT_LT(activationBytes(stats[1]), activationBytes(stats[0])) << stats[1] << "\n" << stats[0];
}

/// The LLVM IR (as optimised) of the network \p build makes, compiled by the CPU backend for
/// \p threads threads ("" when it does not compile); its stats to \p stats when given.
std::string compiledIR(void (*build)(Net &), unsigned threads, std::string *stats = nullptr) {
  cpu::CPUBackendOptions o;
  o.keepIR = true;
  cpu::CPUBackend cpu(o);
  Net net;
  build(net);
  CompileOptions opts;
  opts.threads = threads;
  auto cf = compileFunction(net.F, cpu, opts);
  EXPECT_TRUE(bool(cf)) << cf.getError().message();
  if (!cf)
    return "";
  auto *c = static_cast<cpu::CPUFunction *>(cf->get());
  if (stats)
    *stats = c->getStats();
  return c->getIR();
}

/// A residual block whose Add and Relu fuse into the second convolution.
void buildResidualPair(Net &n) {
  n.F = n.mod.createFunction("main");
  Function *F = n.F;
  auto *x = n.mod.createPlaceholder(ElemKind::Float, {1, 8, 10, 10}, "x");
  n.inputs = {x};
  NodeValue h = F->createRelu("r1", randomConv(n, "c1", x, 8, 8, 3, 1, 1, 60));
  NodeValue h2 = randomConv(n, "c2", h, 8, 8, 3, 1, 1, 61);
  NodeValue r = F->createRelu("r2", F->createAdd("add", h2, h));
  n.saves = {F->createSave("y", F->createMaxPool("mp", r, {2, 2}, {2, 2}, {0, 0, 0, 0}))};
}

// A program whose stages only call kernels compiled elsewhere (no loop functions: the Add
// and Relus fuse into the convolutions) is generated as at -O0 with no IR passes: its
// stage keeps the address arithmetic as emitted (zero offsets from a base pointer, which
// the IR passes fold away), and it computes what the Interpreter does.
TEST(CPUBackend, StagesOfCallsAloneGetNoIRPasses) {
  checkAgainstInterpreter(buildResidualPair);
  std::string ir = compiledIR(buildResidualPair, 1);
  EXPECT_EQ(ir.find("@kiln_ew_"), std::string::npos) << ir;
  EXPECT_NE(ir.find("optnone"), std::string::npos) << ir;
  EXPECT_NE(ir.find(", i64 0\n"), std::string::npos) << ir;
}

// The CPU compiles from the shared static plan (kiln/Memory): the arena the compiled code
// reports is the plan's, the fused epilogue's residual and destination are apart, and the
// plan verifier rejects a plan whose buffers overlap while both are live.
TEST(CPUBackend, CompilesFromTheVerifiedSharedPlan) {
  cpu::CPUBackend cpu;
  Net net;
  buildResidualPair(net);
  ASSERT_FALSE(bool(prepareFunction(net.F, cpu)));
  auto P = cpu.planIR(net.F, {});
  ASSERT_TRUE(bool(P)) << P.getError().message();
  ASSERT_TRUE(P->planned);
  EXPECT_FALSE(bool(verifyMemoryPlan(*P->F, P->plan)));
  // c2 + h, then Relu: one fused instruction whose residual (h) lives apart from its
  // destination.
  const FusedConvolutionInst *fused = nullptr;
  for (const auto &I : P->F->getInstrs())
    if (auto *fc = dyn_cast<FusedConvolutionInst>(I.get()))
      if (!fc->getResidual().empty())
        fused = fc;
  ASSERT_NE(fused, nullptr) << P->F->toString();
  EXPECT_EQ(fused->getActivation(), "Relu");
  MemoryRegion rr, rd;
  uint64_t offRes = 0, offDest = 0;
  ASSERT_TRUE(P->plan.locate(fused->getResidual().front(), rr, offRes));
  ASSERT_TRUE(P->plan.locate(fused->getDest(), rd, offDest));
  uint64_t bytes = fused->getDest()->getType()->sizeInBytes();
  EXPECT_TRUE(rr != rd || offRes + bytes <= offDest || offDest + bytes <= offRes)
      << "residual at " << offRes << ", destination at " << offDest;
  uint64_t planned = P->plan.activationBytes;
  auto cf = cpu.generateCode(net.F, *P, {});
  ASSERT_TRUE(bool(cf)) << cf.getError().message();
  std::string stats = static_cast<cpu::CPUFunction *>(cf->get())->getStats();
  EXPECT_NE(stats.find("activations " + std::to_string(planned) + " B"), std::string::npos)
      << stats;

  // Two activations live at once placed on the same bytes: the CPU refuses the plan.
  auto broken = cpu.planIR(net.F, {});
  ASSERT_TRUE(bool(broken));
  PlannedBuffer *a = nullptr, *b = nullptr;
  for (PlannedBuffer &x : broken->plan.buffers)
    for (PlannedBuffer &y : broken->plan.buffers)
      if (!a && &x != &y && x.region == MemoryRegion::Activation &&
          y.region == MemoryRegion::Activation && x.size && y.size && x.start < y.end &&
          y.start < x.end)
        a = &x, b = &y;
  ASSERT_NE(a, nullptr);
  b->offset = a->offset;
  auto bad = cpu.generateCode(net.F, *broken, {});
  ASSERT_FALSE(bool(bad));
  Error e = bad.takeError();
  EXPECT_EQ(e.code(), ErrorCode::Internal);
  EXPECT_NE(e.message().find("memory plan"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find(b->value->getName()), std::string::npos) << e.message();
}

// Compiled whole (fused, planned, verified) the pair matches the Interpreter.
TEST(CPUBackend, ResidualPair) { checkAgainstInterpreter(buildResidualPair); }

// The pool's spin bounds change only how threads wait: blocking at once (0, between
// stages too), spinning between stages only, and spinning long (1 ms) all give the
// Interpreter's results at 2 threads, run after run.
TEST(CPUBackend, SpinBoundsKeepResults) {
  auto interp = exitOnError(createBackend("Interpreter"));
  Net ref;
  buildFireModule(ref);
  auto expected = runOn(ref, *interp, {});
  for (auto [spin, stageSpin] : {std::pair{0u, 0u}, {0u, 1000u}, {1000u, 0u}}) {
    SCOPED_TRACE("spin " + std::to_string(spin) + " stage " + std::to_string(stageSpin));
    cpu::CPUBackendOptions o;
    o.spinMicros = spin;
    o.stageSpinMicros = stageSpin;
    cpu::CPUBackend cpu(o);
    Net net;
    buildFireModule(net);
    CompileOptions opts;
    opts.threads = 2;
    expectClose(runOn(net, cpu, opts, nullptr, 5), expected);
  }
}

// Reshapes that reorder the dimensions' sizes (2x3x4 as 4x2x3 and 2x6x2) become views of the
// same memory once the IR passes drop their copies; the backend addresses them as such.
TEST(CPUBackend, ReshapeViews) {
  checkAgainstInterpreter([](Net &n) {
    n.F = n.mod.createFunction("main");
    auto *x = n.mod.createPlaceholder(ElemKind::Float, {2, 3, 4}, "x");
    n.inputs = {x};
    NodeValue a = n.F->createReshape("a", n.F->createRelu("r", x), {4, 2, 3});
    NodeValue b = n.F->createReshape("b", x, {2, 6, 2});
    n.saves = {n.F->createSave("ya", a), n.F->createSave("yb", n.F->createTanh("t", b))};
  });
}

TEST(CPUBackend, GroupedDilatedConv) {
  checkAgainstInterpreter([](Net &n) {
    n.F = n.mod.createFunction("main");
    auto *x = n.mod.createPlaceholder(ElemKind::Float, {2, 6, 11, 9}, "x");
    n.inputs = {x};
    auto *w = randomConstant(n.mod, "w", {9, 2, 3, 2}, 5);
    auto *b = randomConstant(n.mod, "b", {9}, 6);
    auto *c = n.F->createConvolution("c", x, w, b, {3, 2}, {2, 1}, {2, 1, 0, 1}, {2, 3}, 3);
    n.saves = {n.F->createSave("y", c)};
  });
}

// LayerNormalization and SoftMax/LogSoftMax on sizes that leave vector tails (the row and
// column kernels of libjit_norm.cpp): rows of 197, 37 and 5, columns of 37 (two blocks of
// 16 and 5 single ones), rows split between 2 threads, AVX-512 and AVX2.
TEST(CPUBackend, NormalizationsOddSizes) {
  checkAgainstInterpreter([](Net &n) {
    n.F = n.mod.createFunction("main");
    Function *F = n.F;
    auto *a = n.mod.createPlaceholder(ElemKind::Float, {3, 7, 197}, "a");
    auto *b = n.mod.createPlaceholder(ElemKind::Float, {2, 37, 37}, "b");
    auto *c = n.mod.createPlaceholder(ElemKind::Float, {9, 5}, "c");
    n.inputs = {a, b, c};
    auto ln = [&](const char *name, NodeValue x, int64_t axis) {
      const Dims &d = x.getType()->dims;
      size_t ax = size_t(axis < 0 ? axis + int64_t(d.size()) : axis);
      Dims nd(std::vector<dim_t>(d.begin() + ax, d.end()));
      return F->createLayerNormalization(name, x,
                                         randomConstant(n.mod, std::string(name) + ".g", nd, 7, 2),
                                         randomConstant(n.mod, std::string(name) + ".b", nd, 8, 1),
                                         axis, 1e-5f);
    };
    n.saves = {F->createSave("ln_a", ln("lna", a, -1)),
               F->createSave("ln_b", ln("lnb", b, 1)),
               F->createSave("ln_c", ln("lnc", c, 1)),
               F->createSave("sm_a", F->createSoftMax("sma", a, 2)),
               F->createSave("sm_b", F->createSoftMax("smb", b, 1)),
               F->createSave("sm_b0", F->createSoftMax("smb0", b, 0)),
               F->createSave("sm_c", F->createSoftMax("smc", c, 1)),
               F->createSave("lsm_a", F->createLogSoftMax("lsma", a, 2)),
               F->createSave("lsm_b", F->createLogSoftMax("lsmb", b, 1))};
  });
}

// The float reductions (sum, mean's sum and scaling, max, min, prod) and fills are shared
// kernels, called with their shapes as tables: odd sizes, inner, outer and several axes,
// kept and dropped dimensions, on each configuration (the unfused one fills its Splat with
// libjit_splat).
TEST(CPUBackend, SharedReductionsAndFills) {
  checkAgainstInterpreter([](Net &n) {
    n.F = n.mod.createFunction("main");
    Function *F = n.F;
    auto *a = n.mod.createPlaceholder(ElemKind::Float, {3, 7, 13}, "a");
    auto *b = n.mod.createPlaceholder(ElemKind::Float, {2, 5, 9, 11}, "b");
    n.inputs = {a, b};
    n.saves = {F->createSave("sum_a", F->createReduceSum("sa", a, {2}, false)),
               F->createSave("mean_b", F->createReduceMean("mb", b, {2, 3}, true)),
               F->createSave("max_a", F->createReduceMax("xa", a, {0}, true)),
               F->createSave("min_b", F->createReduceMin("nb", b, {1, 3}, false)),
               F->createSave("prod_a", F->createReduceProd("pa", a, {1}, false)),
               F->createSave("fill", F->createSplat("s", a->getType(), 0.75f))};
  });
}

// BatchMatMul with more batches than threads (whole batches per thread: 5 over 2) and
// with fewer (one batch split inside), on sizes that leave partial register tiles.
TEST(CPUBackend, BatchMatMulSplits) {
  checkAgainstInterpreter([](Net &n) {
    n.F = n.mod.createFunction("main");
    Function *F = n.F;
    auto *a = n.mod.createPlaceholder(ElemKind::Float, {5, 19, 7}, "a");
    auto *b = n.mod.createPlaceholder(ElemKind::Float, {5, 7, 33}, "b");
    auto *c = n.mod.createPlaceholder(ElemKind::Float, {1, 37, 20}, "c");
    auto *d = n.mod.createPlaceholder(ElemKind::Float, {1, 20, 70}, "d");
    n.inputs = {a, b, c, d};
    n.saves = {F->createSave("ab", F->createBatchMatMul("mab", a, b)),
               F->createSave("cd", F->createBatchMatMul("mcd", c, d))};
  });
}

TEST(CPUBackend, ElementwiseChainAndData) {
  checkAgainstInterpreter([](Net &n) {
    n.F = n.mod.createFunction("main");
    Function *F = n.F;
    auto *a = n.mod.createPlaceholder(ElemKind::Float, {4, 33, 130}, "a");
    auto *b = n.mod.createPlaceholder(ElemKind::Float, {4, 33, 130}, "b");
    n.inputs = {a, b};
    NodeValue t = F->createMul("m", F->createAdd("s", a, b), a);
    t = F->createTanh("t", F->createSigmoid("sg", F->createSub("d", t, b)));
    t = F->createMax("mx", F->createLeakyRelu("lr", t, 0.1f), b);
    NodeValue tr = F->createTranspose("tr", t, {2, 0, 1});
    NodeValue sl = F->createSlice("sl", tr, {1, 1, 2}, {100, 4, 30});
    NodeValue cc = F->createConcat("cc", {sl, sl}, 1);
    NodeValue rs = F->createReduceSum("rs", t, {1}, false);
    NodeValue rm = F->createReduceMax("rm", t, {0, 2}, true);
    NodeValue bn = F->createBroadcast("bc", rm, {4, 33, 130});
    n.saves = {F->createSave("cc", cc), F->createSave("rs", rs), F->createSave("bc", bn),
               F->createSave("t", t)};
  });
}

/// The same element-wise chains at several lengths (one of them long enough to be split
/// between threads), a broadcast of a value per row at two row counts and a broadcast of
/// a channel vector at three row lengths (24 and 40 leave remainders after the vector
/// loop; 300 x 72 is split between threads), each broadcast product added to its row (so
/// that the chain is no shared loop kernel's): each length is its own loop, and the
/// Interpreter's results hold on every configuration.
void buildRepeatedChains(Net &n) {
  n.F = n.mod.createFunction("main");
  Function *F = n.F;
  std::vector<NodeValue> outs;
  for (dim_t len : {150, 7001, 40000}) {
    auto *x = n.mod.createPlaceholder(ElemKind::Float, {len}, "x" + std::to_string(len));
    auto *y = n.mod.createPlaceholder(ElemKind::Float, {len}, "y" + std::to_string(len));
    n.inputs.push_back(x);
    n.inputs.push_back(y);
    NodeValue t = F->createTanh("t", x);
    NodeValue g = F->createAdd("g", F->createMul("m", F->createSigmoid("s", y), y), x);
    outs.push_back(t);
    outs.push_back(g);
  }
  for (dim_t rows : {3, 70}) {
    auto *a = n.mod.createPlaceholder(ElemKind::Float, {rows, 16, 9}, "a" + std::to_string(rows));
    auto *c = n.mod.createPlaceholder(ElemKind::Float, {rows, 16, 1}, "c" + std::to_string(rows));
    n.inputs.push_back(a);
    n.inputs.push_back(c);
    outs.push_back(
        F->createAdd("sa", F->createMul("sc", a, F->createBroadcast("b", c, {rows, 16, 9})), a));
  }
  for (auto [rows, channels] : {std::pair<dim_t, dim_t>{5, 24}, {3, 40}, {300, 72}}) {
    std::string shape = std::to_string(rows) + "x" + std::to_string(channels);
    auto *x = n.mod.createPlaceholder(ElemKind::Float, {rows, channels}, "cx" + shape);
    auto *v = n.mod.createPlaceholder(ElemKind::Float, {channels}, "cv" + shape);
    n.inputs.push_back(x);
    n.inputs.push_back(v);
    outs.push_back(
        F->createAdd("ca", F->createMul("cs", x, F->createBroadcast("cb", v, {rows, channels})), x));
  }
  for (size_t i = 0; i < outs.size(); i++)
    n.saves.push_back(F->createSave("o" + std::to_string(i), outs[i]));
}

TEST(CPUBackend, RepeatedElementwiseChains) { checkAgainstInterpreter(buildRepeatedChains); }

/// The optimised LLVM IR of the element-wise loop functions (kiln_ew_*) of the network
/// \p build makes, compiled for \p threads threads; the program's stats to \p stats.
std::vector<std::string> loopFunctionsOf(void (*build)(Net &), unsigned threads,
                                         std::string &stats) {
  std::string ir = compiledIR(build, threads, &stats);
  std::vector<std::string> loops;
  for (size_t at = ir.find("define"); at != std::string::npos; at = ir.find("define", at + 1))
    if (ir.substr(at, ir.find('\n', at) - at).find("@kiln_ew_") != std::string::npos)
      loops.push_back(ir.substr(at, ir.find("\n}", at) - at));
  return loops;
}

// Chains that compute the same thing on other buffers or lengths call one loop function:
// the module has fewer loop functions than loops.
TEST(CPUBackend, RepeatedChainsShareTheirLoop) {
  std::string stats;
  std::vector<std::string> loops = loopFunctionsOf(buildRepeatedChains, 2, stats);
  // 8 loops: the tanh and the sigmoid chain of each length in one (the same length), at 3
  // lengths; the broadcast per row at 2 row counts; the channel vector at 3 shapes.
  // Functions: one for the 3 lengths; one per broadcast pattern, whose rows' length and
  // strides are arguments (a space of two dimensions).
  EXPECT_NE(stats.find("element-wise loops 8 "), std::string::npos) << stats;
  EXPECT_NE(stats.find(" 0 shared)"), std::string::npos) << stats;
  EXPECT_EQ(loops.size(), 3u);
}

/// A value per row of 28 broadcast over [6, 28, 28]: a space of three dimensions whose
/// rows (28 elements, a constant) are short. The broadcast is saved too, so the loop
/// stores it as well as the product (as lraspp_mobilenet_v3's chains do).
void buildShortBroadcastRows(Net &n) {
  n.F = n.mod.createFunction("main");
  auto *x = n.mod.createPlaceholder(ElemKind::Float, {6, 28, 28}, "x");
  auto *v = n.mod.createPlaceholder(ElemKind::Float, {28, 1}, "v");
  n.inputs = {x, v};
  NodeValue b = n.F->createBroadcast("b", v, {6, 28, 28});
  NodeValue y = n.F->createMul("m", x, b);
  n.saves = {n.F->createSave("y", y), n.F->createSave("bs", b)};
}

TEST(CPUBackend, ShortBroadcastRows) { checkAgainstInterpreter(buildShortBroadcastRows); }

// A short constant row is a loop that stays one (vectorised), not 28 scalar copies.
TEST(CPUBackend, ShortBroadcastRowsAreVectorised) {
  std::string stats;
  std::vector<std::string> loops = loopFunctionsOf(buildShortBroadcastRows, 1, stats);
  ASSERT_EQ(loops.size(), 1u);
  const std::string &loop = loops.front();
  EXPECT_NE(loop.find("fmul <"), std::string::npos) << loop;
  size_t scalarMuls = 0;
  for (size_t p = loop.find("fmul float"); p != std::string::npos; p = loop.find("fmul float", p + 1))
    scalarMuls++;
  EXPECT_LE(scalarMuls, 1u) << loop;
}

/// The chains that shared loop kernels compute (libjit_ewloops.h) instead of loop functions
/// of the program, each over a shape of its own (so that no two fuse into one loop) and
/// read by a transpose (so that its result is an activation, whose buffer the planner may
/// share with an operand's): the lone float activations and binary operations of the list
/// whose results stay finite on inputs in [-1, 1] (the operator suite, //test/backend, runs
/// every one of them on its own inputs), over 7 x 143 (a remainder after the vector loop)
/// and 120 x 211 (split between threads); x * sigmoid(x) in both operand orders, and with
/// the sigmoid's result in a buffer of its own that nothing reads after the chain; a value
/// per row (a squeeze-and-excitation scale, [2, 6, 7, 7] by [2, 6, 1, 1]) and a channel
/// vector per row ([5, 24] by [24], [300, 72] by [72], split between threads) added and
/// multiplied, the broadcast on either side.
void buildSharedLoopChains(Net &n) {
  n.F = n.mod.createFunction("main");
  Function *F = n.F;
  using Chain = std::function<NodeValue(NodeValue, NodeValue)>;
  std::vector<Chain> chains = {
      [&](NodeValue x, NodeValue) { return F->createRelu("relu", x); },
      [&](NodeValue x, NodeValue) { return F->createSigmoid("sig", x); },
      [&](NodeValue x, NodeValue) { return F->createTanh("tanh", x); },
      [&](NodeValue x, NodeValue) { return F->createHardSwish("hsw", x); },
      [&](NodeValue x, NodeValue) { return F->createSwish("swi", x); },
      [&](NodeValue x, NodeValue) { return F->createExp("exp", x); },
      [&](NodeValue x, NodeValue) { return F->createErf("erf", x); },
      [&](NodeValue x, NodeValue) { return F->createNeg("neg", x); },
      [&](NodeValue x, NodeValue) { return F->createAbs("abs", x); },
      [&](NodeValue x, NodeValue y) { return F->createAdd("add", x, y); },
      [&](NodeValue x, NodeValue y) { return F->createSub("sub", x, y); },
      [&](NodeValue x, NodeValue y) { return F->createMul("mul", x, y); },
      [&](NodeValue x, NodeValue y) { return F->createDiv("div", x, y); },
      [&](NodeValue x, NodeValue y) { return F->createMax("max", x, y); },
      [&](NodeValue x, NodeValue y) { return F->createMin("min", y, x); },
      [&](NodeValue x, NodeValue) { return F->createMul("silu1", x, F->createSigmoid("s1", x)); },
      [&](NodeValue x, NodeValue) { return F->createMul("silu2", F->createSigmoid("s2", x), x); },
      // x an activation that dies at the product, which takes its buffer (in place): the
      // sigmoid's result has a buffer of its own that nothing reads after the chain.
      [&](NodeValue x, NodeValue) {
        NodeValue a = F->createTranspose("xt", x, {1, 0});
        return F->createMul("silu3", a, F->createSigmoid("s3", a));
      }};
  std::vector<NodeValue> outs;
  auto input = [&](const std::string &name, Dims dims) {
    auto *p = n.mod.createPlaceholder(ElemKind::Float, dims, name);
    n.inputs.push_back(p);
    return NodeValue(p);
  };
  for (dim_t rows : {7, 120})
    for (size_t i = 0; i < chains.size(); i++) {
      dim_t cols = (rows == 7 ? 143 : 211) + 2 * dim_t(i);
      std::string k = std::to_string(rows) + "_" + std::to_string(i);
      outs.push_back(chains[i](input("x" + k, {rows, cols}), input("y" + k, {rows, cols})));
    }
  // (Two scales: one broadcast read by two chains would be stored, a chain of its own.)
  NodeValue a = input("a", {2, 6, 7, 7}), se = input("se", {2, 6, 1, 1});
  NodeValue se2 = input("se2", {2, 6, 1, 1});
  outs.push_back(F->createMul("sem", a, F->createBroadcast("seb", se, {2, 6, 7, 7})));
  outs.push_back(F->createAdd("sea", F->createBroadcast("seb2", se2, {2, 6, 7, 7}), a));
  for (auto [rows, channels] : {std::pair<dim_t, dim_t>{5, 24}, {300, 72}}) {
    std::string shape = std::to_string(rows) + "x" + std::to_string(channels);
    NodeValue x = input("cx" + shape, {rows, channels}), v = input("cv" + shape, {channels});
    outs.push_back(F->createMul("cm", F->createBroadcast("cb", v, {rows, channels}), x));
    NodeValue x2 = input("cy" + shape, {rows, channels + 1});
    NodeValue v2 = input("cw" + shape, {channels + 1});
    outs.push_back(F->createAdd("ca", x2, F->createBroadcast("cb2", v2, {rows, channels + 1})));
  }
  for (size_t i = 0; i < outs.size(); i++) {
    auto dims = outs[i].getType()->dims;
    std::vector<dim_t> reverse;
    for (size_t d = dims.size(); d-- > 0;)
      reverse.push_back(dim_t(d));
    n.saves.push_back(F->createSave("o" + std::to_string(i),
                                    F->createTranspose("t" + std::to_string(i), outs[i], reverse)));
  }
}

TEST(CPUBackend, SharedLoopChains) { checkAgainstInterpreter(buildSharedLoopChains); }

// Those chains call the shared loop kernels: no loop function is compiled for the lone
// operations, the products with a sigmoid or the broadcast rows.
TEST(CPUBackend, SharedLoopChainsCompileNoLoopFunctions) {
  for (unsigned threads : {1u, 2u}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    std::string stats;
    std::vector<std::string> loops = loopFunctionsOf(buildSharedLoopChains, threads, stats);
    // 18 chains at two shapes (the SiLUs of two instructions), 6 broadcasts (of two).
    EXPECT_NE(stats.find("element-wise loops 42 (54 instrs, 42 shared)"), std::string::npos)
        << stats;
    EXPECT_EQ(loops.size(), 0u);
  }
}

// Two programs whose stages are alike but whose loops compute different things are
// different programs: the reuse key covers the loop functions, not only the stages that
// call them.
TEST(CPUBackend, ProgramsDifferingInTheirLoopsAreNotReused) {
  auto interp = exitOnError(createBackend("Interpreter"));
  cpu::CPUBackend cpu;
  CompileOptions opts;
  opts.threads = 1;
  for (bool tanh : {true, false}) {
    SCOPED_TRACE(tanh ? "tanh" : "sigmoid");
    auto build = [tanh](Net &n) {
      n.F = n.mod.createFunction("main");
      auto *x = n.mod.createPlaceholder(ElemKind::Float, {1000}, "x");
      n.inputs = {x};
      NodeValue r = tanh ? NodeValue(n.F->createTanh("f", x)) : NodeValue(n.F->createSigmoid("f", x));
      // Added to x: a chain of two, a loop function (a lone activation is a shared kernel).
      n.saves = {n.F->createSave("y", n.F->createAdd("a", r, x))};
    };
    Net ref, net;
    build(ref);
    build(net);
    auto expected = runOn(ref, *interp, {});
    std::string stats;
    expectClose(runOn(net, cpu, opts, &stats), expected);
    EXPECT_EQ(stats.find("native code reused"), std::string::npos) << stats;
  }
}

/// An index constant of kind \p k holding \p v.
Constant *indexConstant(Module &m, const std::string &name, ElemKind k, std::vector<int64_t> v) {
  Tensor t(k, {dim_t(v.size())});
  for (size_t i = 0; i < v.size(); i++)
    t.setFromDouble(i, double(v[i]));
  return m.createConstant(name, std::move(t));
}

// Data movement large enough to be split between the threads (each thread copies a range
// of the outermost dimension, or of the gathered rows): NCHW <-> NHWC transposes with
// ragged 16 x 16 blocks (37 channels, 41 columns) and with whole ones, a 2-D transpose, a
// slice, a concat, a broadcast, and gathers of one element per index (a Resize's last
// axis) and of whole rows, with negative indices, Int32 and Int64.
TEST(CPUBackend, DataMovementSplitBetweenThreads) {
  checkAgainstInterpreter([](Net &n) {
    n.F = n.mod.createFunction("main");
    Function *F = n.F;
    auto *x = n.mod.createPlaceholder(ElemKind::Float, {2, 37, 45, 41}, "x");
    auto *y = n.mod.createPlaceholder(ElemKind::Float, {1, 48, 32, 32}, "y");
    auto *z = n.mod.createPlaceholder(ElemKind::Float, {67, 1029}, "z");
    auto *r = n.mod.createPlaceholder(ElemKind::Float, {2, 37, 1, 41}, "r");
    n.inputs = {x, y, z, r};
    NodeValue nhwc = F->createTranspose("nhwc", x, {0, 2, 3, 1});
    NodeValue back = F->createTranspose("back", F->createTanh("th", nhwc), {0, 3, 1, 2});
    NodeValue ty = F->createTranspose("ty", y, {0, 2, 3, 1});
    NodeValue tz = F->createTranspose("tz", z, {1, 0});
    NodeValue sl = F->createSlice("sl", x, {0, 3, 2, 1}, {2, 36, 44, 40});
    NodeValue cc = F->createConcat("cc", {x, back}, 2);
    NodeValue bc = F->createBroadcast("bc", r, {2, 37, 45, 41});
    std::vector<int64_t> last;
    for (int64_t i = 0; i < 97; i++)
      last.push_back((i * 13) % 82 - 41); // -41 .. 40
    NodeValue g1 = F->createGather("g1", x, indexConstant(n.mod, "i1", ElemKind::Int64I, last), 3);
    NodeValue g2 = F->createGather(
        "g2", x, indexConstant(n.mod, "i2", ElemKind::Int32I, {5, -1, 0, 36, -37, 20}), 1);
    n.saves = {F->createSave("back", back), F->createSave("ty", ty), F->createSave("tz", tz),
               F->createSave("sl", sl),     F->createSave("cc", cc), F->createSave("bc", bc),
               F->createSave("g1", g1),     F->createSave("g2", g2)};
  });
}

// Stride-1 pools whose output is the input's size (the flat-plane path): 3x3 pads 1 on
// 35x35, 17x17 and 8x8 planes (inception's average pools, googlenet's max pools), 5x5
// pads 2 on 13x13, 3x3 with all the padding at the bottom and right, and 2x2 on 4x4;
// average with and without the pads counted.
TEST(CPUBackend, SameSizePools) {
  checkAgainstInterpreter([](Net &n) {
    n.F = n.mod.createFunction("main");
    Function *F = n.F;
    auto *a = n.mod.createPlaceholder(ElemKind::Float, {2, 7, 35, 35}, "a");
    auto *b = n.mod.createPlaceholder(ElemKind::Float, {1, 9, 17, 17}, "b");
    auto *c = n.mod.createPlaceholder(ElemKind::Float, {1, 33, 8, 8}, "c");
    auto *d = n.mod.createPlaceholder(ElemKind::Float, {1, 3, 13, 13}, "d");
    auto *e = n.mod.createPlaceholder(ElemKind::Float, {1, 5, 4, 4}, "e");
    n.inputs = {a, b, c, d, e};
    for (bool count : {true, false}) {
      std::string k = count ? "i" : "x";
      n.saves.push_back(
          F->createSave("a" + k, F->createAvgPool("pa" + k, a, {3, 3}, {1, 1}, {1, 1, 1, 1}, count)));
      n.saves.push_back(
          F->createSave("b" + k, F->createAvgPool("pb" + k, b, {3, 3}, {1, 1}, {1, 1, 1, 1}, count)));
      n.saves.push_back(
          F->createSave("c" + k, F->createAvgPool("pc" + k, c, {3, 3}, {1, 1}, {1, 1, 1, 1}, count)));
      n.saves.push_back(
          F->createSave("d" + k, F->createAvgPool("pd" + k, d, {5, 5}, {1, 1}, {2, 2, 2, 2}, count)));
      n.saves.push_back(
          F->createSave("e" + k, F->createAvgPool("pe" + k, b, {3, 3}, {1, 1}, {0, 0, 2, 2}, count)));
      n.saves.push_back(
          F->createSave("f" + k, F->createAvgPool("pf" + k, e, {2, 2}, {1, 1}, {1, 1, 0, 0}, count)));
    }
    n.saves.push_back(F->createSave("ma", F->createMaxPool("ma", a, {3, 3}, {1, 1}, {1, 1, 1, 1})));
    n.saves.push_back(F->createSave("mc", F->createMaxPool("mc", c, {3, 3}, {1, 1}, {1, 1, 1, 1})));
    n.saves.push_back(F->createSave("md", F->createMaxPool("md", d, {5, 5}, {1, 1}, {2, 2, 2, 2})));
    n.saves.push_back(F->createSave("me", F->createMaxPool("me", b, {3, 3}, {1, 1}, {2, 2, 0, 0})));
  });
}

// 2x2 stride-2 pools without pads (computed in registers, pool2x2Planes): rows of 7
// outputs stored as whole vectors (densenet121's 14x14 average pool), two overlapping
// blocks of 16 (56x56), odd sizes whose last row and column no window reads, and a plane
// count that splits unevenly between 2 threads; average with and without the pads counted
// (no pads: the same), max.
TEST(CPUBackend, TwoByTwoStrideTwoPools) {
  checkAgainstInterpreter([](Net &n) {
    n.F = n.mod.createFunction("main");
    Function *F = n.F;
    auto *a = n.mod.createPlaceholder(ElemKind::Float, {2, 5, 14, 14}, "a");
    auto *b = n.mod.createPlaceholder(ElemKind::Float, {1, 3, 56, 56}, "b");
    auto *c = n.mod.createPlaceholder(ElemKind::Float, {1, 7, 15, 13}, "c");
    n.inputs = {a, b, c};
    int i = 0;
    for (Placeholder *x : {a, b, c}) {
      std::string k = std::to_string(i++);
      for (bool count : {true, false})
        n.saves.push_back(F->createSave(
            "a" + k + (count ? "i" : "x"),
            F->createAvgPool("pa" + k + (count ? "i" : "x"), x, {2, 2}, {2, 2}, {0, 0, 0, 0}, count)));
      n.saves.push_back(
          F->createSave("m" + k, F->createMaxPool("pm" + k, x, {2, 2}, {2, 2}, {0, 0, 0, 0})));
    }
  });
}

// Depthwise stride-2 layers with output rows under 16 (the flat path, whose rows are split
// into column phases): 3x3 and 5x5 on rows of 8 to 31 columns, odd and even, with the pads
// on both sides, on the bottom and right only, and none.
TEST(CPUBackend, DepthwiseStrideTwoNarrowRows) {
  checkAgainstInterpreter([](Net &n) {
    n.F = n.mod.createFunction("main");
    struct Case {
      dim_t c, h, w, k;
      std::vector<dim_t> pads;
    };
    std::vector<Case> cases = {{5, 28, 28, 3, {1, 1, 1, 1}}, {3, 13, 13, 3, {1, 1, 1, 1}},
                               {4, 8, 8, 5, {2, 2, 2, 2}},   {6, 31, 31, 5, {2, 2, 2, 2}},
                               {3, 14, 30, 3, {0, 0, 1, 1}}, {2, 17, 9, 5, {0, 0, 0, 0}},
                               {3, 20, 24, 5, {1, 2, 2, 1}}};
    uint64_t seed = 900;
    for (const Case &c : cases) {
      std::string nm = "dw" + std::to_string(seed);
      auto *x = n.mod.createPlaceholder(ElemKind::Float, {1, c.c, c.h, c.w}, nm + ".x");
      n.inputs.push_back(x);
      NodeValue y = randomConv(n, nm, x, c.c, c.c, c.k, 2, c.pads, seed, c.c);
      n.saves.push_back(n.F->createSave(nm, y));
      seed += 2;
    }
  });
}

// Depthwise layers on the ring path (output rows of 32 or more, or 16 or more with SH !=
// SW): 3x3 and 5x5 at strides 1 and 2, an odd number of output rows (a last block of one
// row), rows that end mid-vector, pads beyond the kernel's half, asymmetric and none; a
// 3x3 and a 5x5 with row stride 2 and column stride 1, row strides 3 and 4 (no rows
// copied ahead); with a fused Clip.
TEST(CPUBackend, DepthwiseRingRows) {
  checkAgainstInterpreter([](Net &n) {
    n.F = n.mod.createFunction("main");
    struct Case {
      dim_t c, h, w, k, sh, sw;
      std::vector<dim_t> pads;
    };
    std::vector<Case> cases = {{4, 19, 45, 3, 1, 1, {1, 1, 1, 1}},  {3, 21, 40, 5, 1, 1, {2, 2, 2, 2}},
                               {3, 17, 70, 5, 2, 2, {2, 2, 2, 2}},  {5, 29, 64, 3, 2, 2, {0, 0, 1, 1}},
                               {2, 12, 36, 3, 1, 1, {0, 0, 0, 0}},  {3, 15, 33, 5, 1, 1, {3, 3, 3, 3}},
                               {3, 16, 77, 5, 2, 2, {1, 2, 2, 1}},  {4, 23, 19, 3, 2, 1, {1, 1, 1, 1}},
                               {3, 26, 40, 5, 2, 1, {2, 2, 2, 2}},  {2, 20, 35, 3, 3, 1, {1, 1, 1, 1}},
                               {2, 22, 50, 5, 4, 2, {0, 2, 1, 2}}};
    uint64_t seed = 940;
    for (const Case &c : cases) {
      std::string nm = "ring" + std::to_string(seed);
      auto *x = n.mod.createPlaceholder(ElemKind::Float, {1, c.c, c.h, c.w}, nm + ".x");
      n.inputs.push_back(x);
      auto *w = randomConstant(n.mod, nm + ".w", {c.c, 1, c.k, c.k}, seed);
      auto *b = randomConstant(n.mod, nm + ".b", {c.c}, seed + 1);
      NodeValue y = n.F->createConvolution(nm, x, w, b, {c.k, c.k}, {c.sh, c.sw}, c.pads,
                                           {1, 1}, c.c);
      if (seed % 4 == 0)
        y = n.F->createClip(nm + ".clip", y, -0.5f, 0.5f);
      n.saves.push_back(n.F->createSave(nm, y));
      seed += 2;
    }
  });
}

// Depthwise layers on the lanes path (at least 16 channels, 3x3 and 5x5, SH == SW <= 2,
// output rows of 7 to 28) as the mobile networks have them (7x7, 14x14, 28x28 at strides
// 1 and 2), a last block of channels overlapping its predecessor (40, 120), odd sizes, a
// batch of 2 whose images split between threads mid-image, asymmetric pads, dilation 2;
// with a fused Clip and a fused HardSwish.
TEST(CPUBackend, DepthwiseLanes) {
  checkAgainstInterpreter([](Net &n) {
    n.F = n.mod.createFunction("main");
    struct Case {
      dim_t n, c, h, w, k, s;
      std::vector<dim_t> pads;
      dim_t d = 1;
    };
    std::vector<Case> cases = {{1, 48, 7, 7, 5, 1, {2, 2, 2, 2}},     {1, 32, 7, 7, 3, 1, {1, 1, 1, 1}},
                               {1, 40, 14, 14, 5, 2, {2, 2, 2, 2}},   {1, 120, 28, 28, 5, 1, {2, 2, 2, 2}},
                               {2, 20, 14, 14, 3, 1, {1, 1, 1, 1}},   {1, 24, 28, 28, 3, 2, {0, 0, 1, 1}},
                               {1, 17, 13, 19, 5, 2, {1, 2, 2, 1}},   {1, 16, 11, 9, 3, 1, {1, 1, 1, 1}},
                               {1, 32, 14, 14, 5, 1, {4, 4, 4, 4}, 2}, {1, 24, 15, 15, 3, 2, {2, 2, 2, 1}, 2}};
    uint64_t seed = 980;
    for (const Case &c : cases) {
      std::string nm = "lanes" + std::to_string(seed);
      auto *x = n.mod.createPlaceholder(ElemKind::Float, {c.n, c.c, c.h, c.w}, nm + ".x");
      n.inputs.push_back(x);
      auto *w = randomConstant(n.mod, nm + ".w", {c.c, 1, c.k, c.k}, seed);
      auto *b = randomConstant(n.mod, nm + ".b", {c.c}, seed + 1);
      NodeValue y = n.F->createConvolution(nm, x, w, b, {c.k, c.k}, {c.s, c.s}, c.pads, {c.d, c.d},
                                           c.c);
      if (seed % 6 == 0)
        y = n.F->createClip(nm + ".clip", y, -0.5f, 0.5f);
      else if (seed % 6 == 2)
        y = n.F->createHardSwish(nm + ".hswish", y);
      n.saves.push_back(n.F->createSave(nm, y));
      seed += 2;
    }
  });
}

/// Runs \p net compiled by the code generator with \p co (threads, ISA, Winograd) and
/// returns the outputs and the stage descriptions.
std::vector<std::vector<float>> runWithCodegen(Net &net, const cpu::CodegenOptions &co,
                                               std::vector<std::string> &stages) {
  cpu::CPUBackend cpu;
  auto fn = test::compileWithCodegen(net.F, cpu, co, stages);
  if (!fn)
    return {};
  return executeOn(net, *fn);
}

// 3x3 stride-1 convolutions with Winograd off, the default (F(2x2) at these channel counts), fast (F(4x4)
// too) and each Winograd kernel forced, against the Interpreter: ragged image sizes,
// asymmetric pads, batch 2 (48 and 60 tiles: both panel widths of the AVX-512 kernel),
// bias with a fused residual add and Relu, a Clip, and a chain (one Winograd convolution
// feeding another); 1 and 2 threads, AVX-512 and AVX2 kernels.
TEST(CPUBackend, WinogradConvolutions) {
  auto build = [](Net &n) {
    n.F = n.mod.createFunction("main");
    Function *F = n.F;
    auto *x = n.mod.createPlaceholder(ElemKind::Float, {2, 24, 16, 23}, "x");
    n.inputs = {x};
    auto conv = [&](const std::string &name, NodeValue in, dim_t c, dim_t o,
                    std::vector<dim_t> pads, uint64_t seed) {
      return randomConv(n, name, in, c, o, 3, 1, std::move(pads), seed);
    };
    NodeValue a = F->createRelu("a.relu", conv("a", x, 24, 40, {1, 1, 1, 1}, 10));
    NodeValue b = conv("b", a, 40, 24, {1, 1, 1, 1}, 20);
    NodeValue r = F->createRelu("r", F->createAdd("add", b, x));
    NodeValue c = F->createClip("c.clip", conv("c", r, 24, 33, {2, 0, 1, 2}, 30), -0.2f, 0.3f);
    NodeValue d = conv("d", c, 33, 20, {0, 2, 0, 1}, 40);
    n.saves = {F->createSave("r", r), F->createSave("c", c), F->createSave("d", d)};
  };
  auto interp = exitOnError(createBackend("Interpreter"));
  Net ref;
  build(ref);
  ASSERT_FALSE(bool(ref.F->verify()));
  auto expected = runOn(ref, *interp, {});
  // Modes: winograd=0, the default, winograd=fast (the cost model chooses), and each
  // Winograd kernel forced on all four layers.
  const std::optional<cpu::ConvAlgorithm> forced[] = {
      std::nullopt, std::nullopt, std::nullopt, cpu::ConvAlgorithm::WinogradRows2,
      cpu::ConvAlgorithm::WinogradRows4, cpu::ConvAlgorithm::Winograd};
  for (int mode = 0; mode < 6; mode++)
    for (unsigned threads : {1u, 2u})
      for (bool noAvx512 : {false, true}) {
        const bool wino = mode > 0;
        SCOPED_TRACE(std::string(forced[mode] ? cpu::convAlgorithmName(*forced[mode])
                                 : mode == 2  ? "winograd=fast"
                                 : wino       ? "winograd"
                                              : "gemm") +
                     " threads " + std::to_string(threads) + (noAvx512 ? " avx2" : ""));
        cpu::CodegenOptions co;
        co.threads = threads;
        co.winograd = wino;
        co.fastWinograd = mode == 2;
        co.forceConv = forced[mode];
        co.jit.disableAvx512 = noAvx512;
        Net net;
        build(net);
        std::vector<std::string> stages;
        auto got = runWithCodegen(net, co, stages);
        // Parallel stages hold one kernel each (serial ones merge their descriptions).
        unsigned winoStages = 0, f4Stages = 0, forcedStages = 0;
        for (const std::string &s : stages) {
          winoStages += s.find("conv_wino") != std::string::npos;
          f4Stages += s.find("conv_wino ") != std::string::npos ||
                      s.find("conv_wino4r ") != std::string::npos;
          if (forced[mode])
            forcedStages +=
                s.find(std::string(cpu::convAlgorithmName(*forced[mode])) + " ") != std::string::npos;
        }
        if (mode == 0) {
          EXPECT_EQ(winoStages, 0u);
        }
        if (mode == 1) {
          EXPECT_EQ(f4Stages, 0u);
        }
        if (forced[mode] && threads > 1) {
          EXPECT_EQ(forcedStages, 4u);
        }
        // Winograd's transforms cost a few ulps more than the direct sum.
        expectClose(got, expected, 2e-4f, 2e-4f);
      }
}

/// Runs \p build's net on the CPU backend at 1 and 2 threads, AVX-512 and AVX2 kernels,
/// against the Interpreter (within \p relTol of the largest output, and 1e-5 of each), and
/// calls \p checkStages with the thread count, whether the AVX-512 kernels ran and a
/// counter of a kernel's stages (serial stages merge their kernels' descriptions, so every
/// occurrence counts).
template <class Build, class Check>
void checkPlannedConvolutions(Build build, float relTol, Check checkStages,
                              bool fastWinograd = false,
                              std::optional<cpu::ConvAlgorithm> force = std::nullopt) {
  auto interp = exitOnError(createBackend("Interpreter"));
  Net ref;
  build(ref);
  ASSERT_FALSE(bool(ref.F->verify()));
  auto expected = runOn(ref, *interp, {});
  float maxAbs = 0;
  for (const auto &v : expected)
    for (float y : v)
      maxAbs = std::max(maxAbs, std::fabs(y));
  ASSERT_GT(maxAbs, 1.0f);
  for (unsigned threads : {1u, 2u})
    for (bool noAvx512 : {false, true}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + (noAvx512 ? " avx2" : ""));
      cpu::CodegenOptions co;
      co.threads = threads;
      co.fastWinograd = fastWinograd;
      co.forceConv = force;
      co.jit.disableAvx512 = noAvx512;
      Net net;
      build(net);
      std::vector<std::string> stages;
      auto got = runWithCodegen(net, co, stages);
      auto count = [&](const std::string &what) {
        unsigned k = 0;
        for (const std::string &s : stages)
          for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
            k++;
        return k;
      };
      checkStages(threads, cpu::detectHost(co.jit).avx512, count);
      expectClose(got, expected, relTol * maxAbs, 1e-5f);
    }
}

// Large weights (8 MB and more) packed at compile time, partial last panels included:
// GEMM A panels of a grouped convolution (130 output channels per group: 9 panels of 14
// rows and a partial one on AVX-512, 21 of 6 and a partial one on AVX2), B panels of W^T
// (the transposed convolution, 130 output channels) and of a fully-connected layer's
// weights (2050 columns: a partial last panel).
TEST(CPUBackend, LargeWeightsPacked) {
  for (dim_t groups : {2, 1}) {
    SCOPED_TRACE("groups " + std::to_string(groups));
    auto build = [groups](Net &n) {
      n.F = n.mod.createFunction("main");
      auto *x = n.mod.createPlaceholder(ElemKind::Float, {1, 1800, 5, 5}, "x");
      n.inputs = {x};
      n.saves = {n.F->createSave("y", randomConv(n, "c", x, 1800, 130 * groups, 3, 1, 1, 41,
                                                 groups))};
    };
    checkPlannedConvolutions(
        build, 1e-4f, [](unsigned, bool, const auto &) {}, false,
        groups == 2 ? cpu::ConvAlgorithm::PackedGemm : cpu::ConvAlgorithm::Transposed);
  }
  checkAgainstInterpreter([](Net &n) {
    n.F = n.mod.createFunction("main");
    auto *x = n.mod.createPlaceholder(ElemKind::Float, {20, 1030}, "x");
    n.inputs = {x};
    auto *w = randomConstant(n.mod, "w", {1030, 2050}, 43);
    auto *b = randomConstant(n.mod, "b", {2050}, 44);
    n.saves = {n.F->createSave("y", n.F->createFullyConnected("fc", x, w, b))};
  });
}

/// x [1, C, S, S] -> r = Relu(3x3 conv C->C, pad 1, + x) -> a 3x3 conv C->O2 with \p pads2;
/// saves r and the last conv (weights seeded from \p seed).
void buildResidualThen3x3(Net &n, dim_t C, dim_t S, dim_t O2, std::vector<dim_t> pads2,
                          uint64_t seed) {
  n.F = n.mod.createFunction("main");
  auto *x = n.mod.createPlaceholder(ElemKind::Float, {1, C, S, S}, "x");
  n.inputs = {x};
  NodeValue a = randomConv(n, "a", x, C, C, 3, 1, 1, seed);
  NodeValue r = n.F->createRelu("r", n.F->createAdd("add", a, x));
  NodeValue b = randomConv(n, "b", r, C, O2, 3, 1, std::move(pads2), seed + 10);
  n.saves = {n.F->createSave("r", r), n.F->createSave("b", b)};
}

// Winograd F(2x2, 3x3) (tiles as GEMM rows), the only Winograd kernel the planner
// takes by default, and F(4x4) (tiles as columns), forced (conv-algorithm): a 256->256
// layer with a fused residual add and Relu feeding a 256->272 one (channels off the
// register tile, asymmetric pads). Sums of 2304 terms reach |y| ~ 30: Winograd's error is
// a few ulps of the terms, so the bound scales with the output (as in LibjitTest's
// Winograd cases). By default no F(4x4) kernel.
TEST(CPUBackend, WinogradF2x2Convolutions) {
  auto build = [](Net &n) { buildResidualThen3x3(n, 256, 14, 272, {1, 0, 2, 1}, 50); };
  checkPlannedConvolutions(build, 2e-5f, [](unsigned, bool, auto count) {
    EXPECT_EQ(count("conv_wino "), 0u);
    EXPECT_EQ(count("conv_wino4r "), 0u);
  });
  checkPlannedConvolutions(
      build, 2e-5f, [](unsigned, bool, auto count) { EXPECT_EQ(count("conv_wino2 "), 2u); },
      false, cpu::ConvAlgorithm::WinogradRows2);
  checkPlannedConvolutions(
      build, 2e-5f, [](unsigned, bool, auto count) { EXPECT_EQ(count("conv_wino "), 2u); },
      /*fastWinograd=*/true, cpu::ConvAlgorithm::Winograd);
}

// Winograd F(4x4, 3x3) with the tiles as GEMM rows (forced), and F(2x2): a 28x28 image
// (49 F(4x4) tiles), a residual add and Relu, and a second layer on a 27x27 image with
// asymmetric pads. By default no F(4x4).
TEST(CPUBackend, WinogradTilesAsRows) {
  auto build = [](Net &n) { buildResidualThen3x3(n, 32, 28, 45, {0, 1, 1, 0}, 70); };
  checkPlannedConvolutions(
      build, 2e-5f, [](unsigned, bool, auto count) { EXPECT_EQ(count("conv_wino4r "), 2u); },
      /*fastWinograd=*/true, cpu::ConvAlgorithm::WinogradRows4);
  checkPlannedConvolutions(
      build, 2e-5f, [](unsigned, bool, auto count) { EXPECT_EQ(count("conv_wino2 "), 2u); },
      false, cpu::ConvAlgorithm::WinogradRows2);
  checkPlannedConvolutions(build, 2e-5f, [](unsigned, bool, auto count) {
    EXPECT_EQ(count("conv_wino4r "), 0u);
    EXPECT_EQ(count("conv_wino "), 0u);
  });
}

// Stride-1 dilated convolutions computed as their dilation phases (F(2x2) forced, which
// only the phases let compute them): dilation 2 on 13x11 (sizes not divisible by it),
// dilation 3 with asymmetric pads that are not multiples of it, dilation 4, and
// dilations 2 x 3 on one layer; batch 2, fused Relu and Clip. Then, by the cost model,
// a 3x3 dilation-2 256->256 14x14 layer (fcn_resnet50's kind, smaller), which it splits.
TEST(CPUBackend, DilatedConvolutionPhases) {
  auto build = [](Net &n) {
    n.F = n.mod.createFunction("main");
    Function *F = n.F;
    auto *x = n.mod.createPlaceholder(ElemKind::Float, {2, 24, 13, 11}, "x");
    n.inputs = {x};
    auto conv = [&](const std::string &name, NodeValue in, dim_t c, dim_t o,
                    std::vector<dim_t> pads, std::vector<dim_t> dil, uint64_t seed) {
      auto *w = randomConstant(n.mod, name + ".w", {o, c, 3, 3}, seed);
      auto *b = randomConstant(n.mod, name + ".b", {o}, seed + 1);
      return F->createConvolution(name, in, w, b, {3, 3}, {1, 1}, pads, dil, 1);
    };
    NodeValue a = F->createRelu("a.relu", conv("a", x, 24, 40, {2, 2, 2, 2}, {2, 2}, 10));
    NodeValue b = conv("b", a, 40, 24, {2, 1, 3, 2}, {3, 3}, 20);
    NodeValue c = F->createClip("c.clip", conv("c", b, 24, 33, {4, 4, 4, 4}, {4, 4}, 30),
                                -0.2f, 0.3f);
    NodeValue d = conv("d", c, 33, 20, {2, 3, 2, 3}, {2, 3}, 40);
    n.saves = {F->createSave("a", a), F->createSave("b", b), F->createSave("c", c),
               F->createSave("d", d)};
  };
  checkPlannedConvolutions(
      build, 2e-5f,
      [](unsigned threads, bool, auto count) {
        // Parallel stages hold one kernel each; at 1 thread these short ones run as serial
        // stages, which keep one name.
        if (threads > 1) {
          EXPECT_EQ(count(" phases"), 4u);
          EXPECT_EQ(count("conv_phase_split"), 4u);
          EXPECT_EQ(count("conv_phase_merge"), 4u);
        }
      },
      false, cpu::ConvAlgorithm::WinogradRows2);
  checkPlannedConvolutions(build, 2e-5f, [](unsigned, bool, auto) {});
  auto fcnLike = [](Net &n) {
    n.F = n.mod.createFunction("main");
    auto *x = n.mod.createPlaceholder(ElemKind::Float, {1, 256, 14, 14}, "x");
    n.inputs = {x};
    auto *w = randomConstant(n.mod, "w", {256, 256, 3, 3}, 60, 0.05f);
    auto *b = randomConstant(n.mod, "b", {256}, 61);
    NodeValue y = n.F->createConvolution("y", x, w, b, {3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 1);
    n.saves = {n.F->createSave("y", n.F->createRelu("r", y))};
  };
  checkPlannedConvolutions(fcnLike, 2e-5f, [](unsigned, bool, auto count) {
    EXPECT_EQ(count("conv_wino2 3x3/1 256->256 14x14 d2x2 phases"), 1u);
  });
}

// F(2x2) with several whole images in one block of tiles (WinoRows::IB: the weights
// streamed once per block, not per image): batches of 3 and 5 images of 7x7 (blocks of 3
// images, and of 3 and 2), a residual add and Relu, a layer with asymmetric pads (7x6).
TEST(CPUBackend, WinogradImagesPerBlock) {
  for (dim_t batch : {3, 5}) {
    auto build = [batch](Net &n) {
      n.F = n.mod.createFunction("main");
      auto *x = n.mod.createPlaceholder(ElemKind::Float, {batch, 64, 7, 7}, "x");
      n.inputs = {x};
      NodeValue a = randomConv(n, "a", x, 64, 64, 3, 1, 1, 80);
      NodeValue r = n.F->createRelu("r", n.F->createAdd("add", a, x));
      NodeValue b = randomConv(n, "b", r, 64, 48, 3, 1, {0, 1, 2, 0}, 82);
      n.saves = {n.F->createSave("r", r), n.F->createSave("b", b)};
    };
    checkPlannedConvolutions(
        build, 2e-5f,
        [](unsigned threads, bool, auto count) {
          if (threads > 1) {
            EXPECT_EQ(count("conv_wino2 "), 2u);
          }
        },
        false, cpu::ConvAlgorithm::WinogradRows2);
  }
}

// The strip kernel on a stride-1 kernel with taps and K = 1600 (alexnet's 5x5 64->192
// 27x27 shape, 40 output channels), forced: the tap planes on AVX-512, the im2col from
// phase planes on AVX2.
TEST(CPUBackend, StripTapsStrideOne) {
  auto build = [](Net &n) {
    n.F = n.mod.createFunction("main");
    auto *x = n.mod.createPlaceholder(ElemKind::Float, {1, 64, 27, 27}, "x");
    n.inputs = {x};
    NodeValue a = randomConv(n, "a", x, 64, 40, 5, 1, 2, 90);
    n.saves = {n.F->createSave("a", n.F->createRelu("r", a))};
  };
  checkPlannedConvolutions(
      build, 1e-5f, [](unsigned, bool, auto count) { EXPECT_EQ(count("convS 5x5/1 "), 1u); },
      false, cpu::ConvAlgorithm::Strip);
}

// Arenas: 64-byte aligned; from 4 MB on 2 MB aligned (transparent huge pages), and the
// whole requested size writable.
TEST(CPUBackend, ArenaAlignment) {
  for (uint64_t bytes : {uint64_t(1), uint64_t(100), uint64_t(3) << 20, (uint64_t(4) << 20) + 5,
                         uint64_t(9) << 20}) {
    SCOPED_TRACE(std::to_string(bytes));
    char *p = cpu::allocArena(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    if (bytes >= (uint64_t(4) << 20)) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (uint64_t(2) << 20), 0u);
    }
    std::memset(p, 0x5a, bytes);
    EXPECT_EQ(p[bytes - 1], 0x5a);
    std::free(p);
  }
}

TEST(CPUBackend, DumpsIRAndAssembly) {
  Module m;
  Function *F = m.createFunction("main");
  auto *x = m.createPlaceholder(ElemKind::Float, {8, 64}, "x");
  F->createSave("y", F->createRelu("r", F->createAdd("a", x, x)));
  cpu::CPUBackendOptions o;
  o.keepIR = o.keepAsm = true;
  cpu::CPUBackend cpu(o);
  auto cf = compileFunction(F, cpu);
  ASSERT_TRUE(bool(cf)) << cf.getError().message();
  auto *c = static_cast<cpu::CPUFunction *>(cf->get());
  EXPECT_NE(c->getIR().find("define"), std::string::npos);
  EXPECT_NE(c->getAsm().find("kiln_stage_0"), std::string::npos);
}

/// A small conv net whose weights come from \p seed and whose input has \p channels.
void buildConvNet(Net &n, uint64_t seed, dim_t channels = 8) {
  n.F = n.mod.createFunction("main");
  Function *F = n.F;
  auto *x = n.mod.createPlaceholder(ElemKind::Float, {1, channels, 12, 12}, "x");
  n.inputs = {x};
  NodeValue h = F->createRelu("r", randomConv(n, "c", x, channels, 16, 3, 1, 1, seed));
  NodeValue flat = F->createReshape("flat", h, {1, 16 * 12 * 12});
  auto *fw = randomConstant(n.mod, "fc.w", {16 * 12 * 12, 5}, seed + 2, 0.05f);
  auto *fb = randomConstant(n.mod, "fc.b", {5}, seed + 3);
  n.saves = {F->createSave("y", F->createFullyConnected("fc", flat, fw, fb))};
}

/// A scratch path unique to this process under the test's temporary folder.
std::string scratchPath(const std::string &stem) {
  const char *tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp ? tmp : "/tmp") + "/" + stem + "-" + std::to_string(::getpid());
}

/// Runs this test binary's ProgramCacheChild in a process of its own, with kernel cache
/// \p dir and prebuilt-kernels=\p prebuilt ("": the default); returns the compiled
/// program's stats.
/// \p env: more NAME=VALUE settings for the child (KILN_NET, KILN_AVX512).
std::string runProgramCacheChild(const std::string &dir, const std::string &statsFile,
                                 const std::string &prebuilt = "", const std::string &env = "") {
  std::string run = "env -u TEST_PREMATURE_EXIT_FILE KILN_STAGE_CACHE_DIR=" + dir +
                    " KILN_STAGE_CACHE_STATS=" + statsFile +
                    (prebuilt.empty() ? "" : " KILN_PREBUILT=" + prebuilt) + " " + env +
                    " /proc/" +
                    std::to_string(::getpid()) +
                    "/exe --gtest_filter=CPUBackend.ProgramCacheChild > /dev/null 2>&1";
  EXPECT_EQ(std::system(run.c_str()), 0) << run;
  std::ifstream in(statsFile);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The compiled program's native code is kept in the kernel cache on disk: a process that
// compiles a graph another process compiled before loads the object instead of running
// LLVM, and computes what the Interpreter computes. Each process here is a child running
// the Child test below on its own, with the cache directory in the environment.
TEST(CPUBackend, SecondProcessLoadsProgramFromDisk) {
  if (std::getenv("KILN_STAGE_CACHE_DIR"))
    GTEST_SKIP() << "run by the parent only";
  std::string dir = scratchPath("kiln-stage-cache");
  std::string first = runProgramCacheChild(dir, dir + ".first");
  std::string second = runProgramCacheChild(dir, dir + ".second");
  EXPECT_NE(first.find("stages"), std::string::npos) << first;
  EXPECT_EQ(first.find("native code from disk"), std::string::npos) << first;
  EXPECT_NE(second.find("native code from disk"), std::string::npos) << second;
}

/// Element-wise chains that each compute something else (SiLU, a hard-swish, tanh of a
/// difference, ...): each is a loop function of its own, so the program's module is large
/// enough to have its code generated in parts.
void buildDistinctChains(Net &n) {
  n.F = n.mod.createFunction("main");
  Function *F = n.F;
  // Each chain over a length of its own, so that no two fuse into one loop.
  std::vector<std::function<NodeValue(NodeValue, NodeValue)>> chains = {
      [&](NodeValue x, NodeValue) { return F->createMul("silu", F->createSigmoid("sg", x), x); },
      [&](NodeValue x, NodeValue) {
        NodeValue k3 = F->createSplat("k3", x.getType(), 3), k6 = F->createSplat("k6", x.getType(), 6);
        NodeValue r6 = F->createClip("c6", F->createAdd("p3", x, k3), 0, 6);
        return F->createDiv("hs", F->createMul("hsm", r6, x), k6);
      },
      [&](NodeValue x, NodeValue y) { return F->createTanh("th", F->createSub("d", x, y)); },
      [&](NodeValue x, NodeValue y) {
        return F->createMax("mx", F->createLeakyRelu("lr", y, 0.2f), x);
      },
      [&](NodeValue x, NodeValue y) {
        return F->createMin("mn", F->createMul("m2", x, y), F->createAdd("a2", y, y));
      },
      [&](NodeValue x, NodeValue y) {
        return F->createSigmoid("sg2", F->createAdd("a3", F->createMul("m3", y, y), x));
      },
      [&](NodeValue x, NodeValue y) {
        return F->createClip("cl", F->createSub("s4", F->createMul("m4", x, x), y), -0.5f, 0.5f);
      },
      [&](NodeValue x, NodeValue y) {
        return F->createRelu("r5", F->createAdd("a5", F->createTanh("t5", y), F->createMul("m5", x, y)));
      }};
  for (size_t i = 0; i < chains.size(); i++) {
    dim_t len = 1001 + 17 * i;
    auto *x = n.mod.createPlaceholder(ElemKind::Float, {3, len}, "x" + std::to_string(i));
    auto *y = n.mod.createPlaceholder(ElemKind::Float, {3, len}, "y" + std::to_string(i));
    n.inputs.push_back(x);
    n.inputs.push_back(y);
    n.saves.push_back(F->createSave("o" + std::to_string(i), chains[i](x, y)));
  }
}

/// The stats of two processes (ProgramCacheChild) that compile network \p net (KILN_NET)
/// with AVX-512 on or off (\p avx512: "1" or "0") one after the other, with the kernel
/// cache \p dir; each checks its results against the Interpreter.
std::pair<std::string, std::string> compileInTwoProcesses(const std::string &net,
                                                          const char *avx512,
                                                          const std::string &dir) {
  std::string env = "KILN_NET=" + net + " KILN_AVX512=" + avx512;
  std::string first = runProgramCacheChild(dir, dir + ".first", "", env);
  return {first, runProgramCacheChild(dir, dir + ".second", "", env)};
}

// A module large enough is generated in parts, one object each on up to one thread per
// core (its stages of calls at -O0), kept in the cache as one file: a second process
// loads all of its objects from the file, a file cut short is compiled again, and each
// process computes what the Interpreter computes, on both instruction sets.
TEST(CPUBackend, ProgramInPartsGoesToDiskAndBack) {
  if (std::getenv("KILN_STAGE_CACHE_DIR"))
    GTEST_SKIP() << "run by the parent only";
  for (const char *avx512 : {"1", "0"}) {
    SCOPED_TRACE(std::string("avx512=") + avx512);
    std::string env = std::string("KILN_NET=chains KILN_AVX512=") + avx512;
    std::string dir = scratchPath(std::string("kiln-parts-") + avx512);
    auto [first, second] = compileInTwoProcesses("chains", avx512, dir);
    EXPECT_EQ(first.find("native code from disk"), std::string::npos) << first;
    EXPECT_NE(first.find(" objects)"), std::string::npos) << first;
    EXPECT_NE(second.find("native code from disk"), std::string::npos) << second;
    EXPECT_NE(second.find(" objects)"), std::string::npos) << second;
    // Cut every cached file short: the third process finds none it can load.
    if (DIR *d = ::opendir(dir.c_str())) {
      while (dirent *e = ::readdir(d)) {
        std::string path = dir + "/" + e->d_name;
        struct stat st;
        if (std::string(e->d_name).rfind("kernel-", 0) == 0 && ::stat(path.c_str(), &st) == 0) {
          EXPECT_EQ(::truncate(path.c_str(), st.st_size / 2), 0) << path;
        }
      }
      ::closedir(d);
    }
    std::string third = runProgramCacheChild(dir, dir + ".third", "", env);
    EXPECT_EQ(third.find("native code from disk"), std::string::npos) << third;
    EXPECT_NE(third.find("stages"), std::string::npos) << third;
  }
}

// A program of shared loop kernels (and no loop function) compiled by one process and
// loaded from the kernel cache by the next: the object holds no kernel address (the
// stages read them from the constant arena, which each process fills with its own), and
// both compute what the Interpreter computes, on both instruction sets.
TEST(CPUBackend, SharedLoopsProgramFromDisk) {
  if (std::getenv("KILN_STAGE_CACHE_DIR"))
    GTEST_SKIP() << "run by the parent only";
  for (const char *avx512 : {"1", "0"}) {
    SCOPED_TRACE(std::string("avx512=") + avx512);
    auto [first, second] =
        compileInTwoProcesses("shared", avx512, scratchPath(std::string("kiln-shared-") + avx512));
    EXPECT_EQ(first.find("native code from disk"), std::string::npos) << first;
    EXPECT_NE(first.find(" 42 shared)"), std::string::npos) << first;
    EXPECT_NE(second.find("native code from disk"), std::string::npos) << second;
  }
}

// Stages of calls reach the shared kernels through their addresses in the constant arena:
// no direct call of a kernel remains in the -O0 stage, whose code generation then takes
// the fast instruction selection (backends/CPU/README.md, "Start-up, seventh pass"), and
// it computes what the Interpreter does (also with the code loaded from disk by another
// process: ProgramCacheChild, SharedLoopsProgramFromDisk).
TEST(CPUBackend, StagesCallSharedKernelsThroughTheArena) {
  std::string ir = compiledIR([](Net &n) { buildConvNet(n, 7); }, 1);
  size_t stage = ir.find("@kiln_stage_0(");
  ASSERT_NE(stage, std::string::npos) << ir;
  std::string body = ir.substr(stage, ir.find("\n}", stage) - stage);
  EXPECT_EQ(body.find("call void @libjit_"), std::string::npos) << body;
  EXPECT_NE(body.find("call void %"), std::string::npos) << body;
}

// With the assembly kept, the module is optimised whole (the assembly is printed from
// it) and only its code generation is split into parts; the parts compute what the
// Interpreter computes.
TEST(CPUBackend, WholeModuleOptimisedThenGeneratedInParts) {
  auto interp = exitOnError(createBackend("Interpreter"));
  cpu::CPUBackendOptions o;
  o.keepAsm = true;
  cpu::CPUBackend cpu(o);
  Net ref, net;
  buildDistinctChains(ref);
  buildDistinctChains(net);
  auto expected = runOn(ref, *interp, {});
  CompileOptions opts;
  opts.threads = 1;
  std::string stats;
  auto got = runOn(net, cpu, opts, &stats);
  expectClose(got, expected);
  EXPECT_NE(stats.find(" objects)"), std::string::npos) << stats;
}

// The backend carries the shared kernels compiled at build time for both levels: a fresh
// process with an empty kernel cache loads them instead of compiling them (the cache then
// receives only the program's own module), and computes what the Interpreter computes; with
// prebuilt-kernels=0 it compiles them for the host and writes each to the cache.
TEST(CPUBackend, PrebuiltKernelsSkipTheJit) {
  if (std::getenv("KILN_STAGE_CACHE_DIR"))
    GTEST_SKIP() << "run by the parent only";
  for (bool avx512 : {true, false})
    for (const std::string &k : cpu::sharedKernelNames(avx512))
      EXPECT_NE(cpu::findPrebuiltUnit(avx512 ? "x86-64-v4" : "x86-64-v3", k), nullptr) << k;
  auto objectsAfterChild = [](const std::string &dir, const std::string &prebuilt) {
    runProgramCacheChild(dir, dir + ".stats", prebuilt);
    size_t n = 0;
    if (DIR *d = ::opendir(dir.c_str())) {
      while (dirent *e = ::readdir(d))
        n += std::string(e->d_name).rfind("kernel-", 0) == 0;
      ::closedir(d);
    }
    return n;
  };
  std::string base = scratchPath("kiln-prebuilt");
  EXPECT_EQ(objectsAfterChild(base + "-on", "1"), 1u); // the program's module only
  EXPECT_GT(objectsAfterChild(base + "-off", "0"), 2u); // its shared kernels and helpers too
}

TEST(CPUBackend, ProgramCacheChild) {
  const char *dir = std::getenv("KILN_STAGE_CACHE_DIR");
  const char *statsFile = std::getenv("KILN_STAGE_CACHE_STATS");
  if (!dir || !statsFile)
    GTEST_SKIP() << "a child of SecondProcessLoadsProgramFromDisk";
  auto interp = exitOnError(createBackend("Interpreter"));
  cpu::CPUBackend cpu;
  CompileOptions opts;
  opts.threads = 1;
  opts.backendOptions["cache-dir"] = dir;
  if (const char *prebuilt = std::getenv("KILN_PREBUILT"))
    opts.backendOptions["prebuilt-kernels"] = prebuilt;
  if (const char *avx512 = std::getenv("KILN_AVX512"))
    opts.backendOptions["avx512"] = avx512;
  // KILN_NET=chains: many distinct element-wise loops, a module large enough to be
  // generated in parts (one object each); KILN_NET=shared: chains of the shared loop
  // kernels, called through the constant arena.
  std::string which = std::getenv("KILN_NET") ? std::getenv("KILN_NET") : "";
  Net ref, net;
  if (which == "chains") {
    buildDistinctChains(ref);
    buildDistinctChains(net);
  } else if (which == "shared") {
    buildSharedLoopChains(ref);
    buildSharedLoopChains(net);
  } else {
    buildConvNet(ref, 900);
    buildConvNet(net, 900);
  }
  auto expected = runOn(ref, *interp, {});
  std::string stats;
  auto got = runOn(net, cpu, opts, &stats);
  expectClose(got, expected);
  std::ofstream(statsFile) << stats;
}

// A second compile of the same graph reuses the first one's native code, also when the
// weights differ (code addresses constants through the constant arena); each program
// still computes with its own weights. A different shape compiles anew.
TEST(CPUBackend, SecondCompileReusesNativeCode) {
  auto interp = exitOnError(createBackend("Interpreter"));
  cpu::CPUBackend cpu;
  CompileOptions opts;
  opts.threads = 1;
  std::vector<std::vector<std::vector<float>>> results;
  for (uint64_t seed : {500, 700}) {
    SCOPED_TRACE("weights seed " + std::to_string(seed));
    Net ref, net;
    buildConvNet(ref, seed);
    buildConvNet(net, seed);
    auto expected = runOn(ref, *interp, {});
    size_t hitsBefore = cpu::getJitCacheStats().hits;
    std::string stats;
    auto got = runOn(net, cpu, opts, &stats);
    expectClose(got, expected);
    bool reused = stats.find("native code reused") != std::string::npos;
    EXPECT_EQ(reused, seed == 700) << stats;
    EXPECT_EQ(cpu::getJitCacheStats().hits, hitsBefore + (seed == 700 ? 1 : 0));
    results.push_back(got);
  }
  // The two weight sets give different outputs: the reused code did not keep the first
  // program's constants.
  ASSERT_EQ(results.size(), 2u);
  EXPECT_NE(results[0][0], results[1][0]);

  Net other;
  buildConvNet(other, 500, /*channels=*/6);
  size_t hitsBefore = cpu::getJitCacheStats().hits;
  std::string stats;
  runOn(other, cpu, opts, &stats);
  EXPECT_EQ(stats.find("native code reused"), std::string::npos) << stats;
  EXPECT_EQ(cpu::getJitCacheStats().hits, hitsBefore);
}

/// x [5, 40] -> FC (w1 [40, 48], b1) -> + addend [5, 48] -> FC (w2 [48, 16], b2); w2 is
/// also read by a second function of the module; "unread" by none.
void buildReleasable(Net &n) {
  n.F = n.mod.createFunction("main");
  auto *x = n.mod.createPlaceholder(ElemKind::Float, {5, 40}, "x");
  n.inputs = {x};
  auto *w1 = randomConstant(n.mod, "w1", {40, 48}, 61);
  auto *b1 = randomConstant(n.mod, "b1", {48}, 62);
  auto *addend = randomConstant(n.mod, "addend", {5, 48}, 63);
  auto *w2 = randomConstant(n.mod, "w2", {48, 16}, 64);
  auto *b2 = randomConstant(n.mod, "b2", {16}, 65);
  randomConstant(n.mod, "unread", {64, 32}, 66); // no function reads it
  NodeValue h = n.F->createAdd("add", n.F->createFullyConnected("fc1", x, w1, b1), addend);
  n.saves = {n.F->createSave("y", n.F->createFullyConnected("fc2", h, w2, b2))};
  Function *other = n.mod.createFunction("other");
  auto *z = n.mod.createPlaceholder(ElemKind::Float, {2, 48}, "z");
  other->createSave("o", other->createFullyConnected("fc", z, w2, b2));
}

// release-constants: a weight packed for its one reader is freed from the graph (its
// payload keeps its type and holds no memory), and so is a constant that no function
// reads; one read in place (the element-wise addend, the biases) or used by another
// function of the module stays. The results match
// the Interpreter's, and compiling the function again is an error naming a freed weight.
TEST(CPUBackend, ReleaseConstantsFreesPackedWeightsOnly) {
  auto interp = exitOnError(createBackend("Interpreter"));
  Net ref;
  buildReleasable(ref);
  auto expected = runOn(ref, *interp, {});
  for (bool avx2 : {false, true}) {
    SCOPED_TRACE(avx2 ? "avx2" : "avx512");
    cpu::CPUBackendOptions o;
    o.disableAvx512 = avx2;
    cpu::CPUBackend cpu(o);
    Net net;
    buildReleasable(net);
    CompileOptions opts;
    opts.threads = 1;
    opts.backendOptions["release-constants"] = "1";
    expectClose(runOn(net, cpu, opts), expected);
    for (const char *freed : {"w1", "unread"}) {
      const Constant *c = net.mod.getConstantByName(freed);
      ASSERT_TRUE(c) << freed;
      EXPECT_EQ(c->getPayload().getUnsafePtr(), nullptr) << freed;
      EXPECT_EQ(c->getPayload().getType(), *c->getType()) << freed;
    }
    for (const char *kept : {"w2", "b1", "b2", "addend"}) {
      const Constant *c = net.mod.getConstantByName(kept);
      ASSERT_TRUE(c) << kept;
      EXPECT_NE(c->getPayload().getUnsafePtr(), nullptr) << kept;
    }
    auto again = cpu.compile(net.F, opts);
    ASSERT_FALSE(bool(again));
    EXPECT_NE(again.getError().message().find("'w1'"), std::string::npos)
        << again.getError().message();
  }
  // Off (the default): every constant keeps its data.
  cpu::CPUBackend cpu;
  Net net;
  buildReleasable(net);
  expectClose(runOn(net, cpu, {}), expected);
  for (const auto &c : net.mod.getConstants())
    EXPECT_NE(c->getPayload().getUnsafePtr(), nullptr) << c->getName();
}

// The strip kernel reads its constant filter as it is, from a copy in the constant arena:
// with release-constants the graph's copy is freed once the convolution is planned, as a
// packed filter's is (it was held twice to the end: fcn_resnet50's 41 MB of 1x1 filters),
// the bias read in place stays; the results match the Interpreter's on both ISAs.
TEST(CPUBackend, ReleaseConstantsFreesTheStripsFilter) {
  auto build = [](Net &n) {
    n.F = n.mod.createFunction("main");
    auto *x = n.mod.createPlaceholder(ElemKind::Float, {1, 8, 10, 9}, "x");
    n.inputs = {x};
    auto *w = randomConstant(n.mod, "w", {16, 8, 3, 3}, 81);
    auto *b = randomConstant(n.mod, "b", {16}, 82);
    n.saves = {n.F->createSave(
        "y", n.F->createConvolution("conv", x, w, b, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1))};
  };
  auto interp = exitOnError(createBackend("Interpreter"));
  Net ref;
  build(ref);
  auto expected = runOn(ref, *interp, {});
  for (bool release : {true, false})
    for (bool avx2 : {false, true}) {
      SCOPED_TRACE(std::string(avx2 ? "avx2" : "avx512") + (release ? " release" : " keep"));
      cpu::CPUBackendOptions o;
      o.disableAvx512 = avx2;
      cpu::CPUBackend cpu(o);
      Net net;
      build(net);
      CompileOptions opts;
      opts.threads = 1;
      opts.backendOptions["conv-algorithm"] = "convS";
      if (release)
        opts.backendOptions["release-constants"] = "1";
      std::string stats;
      expectClose(runOn(net, cpu, opts, &stats), expected);
      const Constant *w = net.mod.getConstantByName("w"), *b = net.mod.getConstantByName("b");
      ASSERT_TRUE(w && b);
      EXPECT_EQ(w->getPayload().getUnsafePtr() == nullptr, release);
      EXPECT_NE(b->getPayload().getUnsafePtr(), nullptr);
    }
}

TEST(CPUBackend, UnboundPlaceholderIsAnError) {
  Module m;
  Function *F = m.createFunction("main");
  auto *x = m.createPlaceholder(ElemKind::Float, {4}, "x");
  F->createSave("y", F->createRelu("r", x));
  cpu::CPUBackend cpu;
  auto cf = compileFunction(F, cpu);
  ASSERT_TRUE(bool(cf));
  PlaceholderBindings b;
  ExecutionContext ctx(&b);
  Error e = (*cf)->execute(ctx);
  EXPECT_TRUE(bool(e));
}

} // namespace
} // namespace kiln
