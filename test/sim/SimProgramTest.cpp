// The Sim chip's program: tiled Convolution / FullyConnected / MatMul / Add / Relu steps
// are bit-exact against the Interpreter (the reference) for float32 and int8 across
// scratchpad sizes; a scratchpad too small for one tile is a clear error; the
// double-buffered schedule matches a hand-computed timeline; the scratchpad plan passes
// the IR's memory plan verifier, and a corrupted one does not.

#include "backends/Sim/Sim.h"

#include "kiln/Backend/Compiler.h"
#include "kiln/Memory/MemoryPipeline.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace kiln;

namespace {

bool contains(const std::string &s, const std::string &sub) {
  return s.find(sub) != std::string::npos;
}

/// A function with one input placeholder and its outputs.
struct Net {
  Function *f = nullptr;
  std::vector<Placeholder *> inputs;
  std::vector<Placeholder *> outputs;
};

/// Deterministic input data: floats in [-1, 1], or int8 raw values spread over [-90, 90].
Tensor makeInput(const Type &t, uint64_t seed) {
  Tensor x(t);
  if (t.kind == ElemKind::Int8Q) {
    uint64_t s = seed * 2654435761u + 1;
    auto h = x.getHandle<int8_t>();
    for (size_t i = 0; i < x.size(); i++) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      h.raw(i) = int8_t(int64_t((s >> 33) % 181) - 90);
    }
    return x;
  }
  PseudoRNG rng(seed);
  x.randomize(-1.0f, 1.0f, rng);
  return x;
}

std::unique_ptr<PlaceholderBindings> bindingsFor(const Net &n) {
  auto b = std::make_unique<PlaceholderBindings>();
  for (size_t i = 0; i < n.inputs.size(); i++)
    b->insert(n.inputs[i], makeInput(*n.inputs[i]->getType(), 11 + i));
  for (Placeholder *o : n.outputs)
    b->allocate(o);
  return b;
}

std::vector<Tensor> runOn(const std::string &backend, const Net &n, const CompileOptions &opts) {
  auto be = exitOnError(createBackend(backend));
  auto cf = exitOnError(be->compile(n.f, opts));
  auto b = bindingsFor(n);
  ExecutionContext ctx(b.get());
  exitOnError(cf->execute(ctx), (backend + " run").c_str());
  std::vector<Tensor> out;
  for (Placeholder *o : n.outputs)
    out.push_back(b->get(o)->clone());
  return out;
}

CompileOptions simOptions(uint64_t scratchpad) {
  CompileOptions o;
  o.backendOptions["scratchpad"] = std::to_string(scratchpad);
  return o;
}

/// The Sim program of \p n for \p config (the function as the Sim compiles it).
std::unique_ptr<SimProgram> programOf(const Net &n, const SimConfig &config) {
  auto sim = exitOnError(createBackend("Sim"));
  CompileOptions co;
  PlannedIR P = exitOnError(sim->planIR(n.f, co));
  return exitOnError(SimProgram::build(P, config));
}

/// Runs \p n on the Interpreter and on the Sim with each scratchpad size; every output
/// must be equal byte for byte. Returns the Sim programs' DMA bytes per size.
std::vector<uint64_t> expectExact(const Net &n, const std::vector<uint64_t> &sizes) {
  std::vector<Tensor> ref = runOn("Interpreter", n, {});
  std::vector<uint64_t> dma;
  for (uint64_t s : sizes) {
    std::vector<Tensor> got = runOn("Sim", n, simOptions(s));
    for (size_t i = 0; i < ref.size(); i++) {
      EXPECT_EQ(got[i].getSizeInBytes(), ref[i].getSizeInBytes());
      if (got[i].getSizeInBytes() != ref[i].getSizeInBytes())
        continue;
      EXPECT_EQ(std::memcmp(got[i].getUnsafePtr(), ref[i].getUnsafePtr(), ref[i].getSizeInBytes()),
                0)
          << "output " << i << " differs with a scratchpad of " << s << " bytes";
    }
    SimConfig c;
    c.scratchpadBytes = s;
    dma.push_back(programOf(n, c)->dmaBytes());
  }
  return dma;
}

/// Kinds of the program's layers that were tiled.
std::vector<std::string> tiledKinds(const SimProgram &p) {
  std::vector<std::string> k;
  for (const SimLayerStats &l : p.layers())
    if (contains(l.how, "tiled"))
      k.push_back(l.kind);
  return k;
}

Constant *randomConstant(Module &m, const std::string &name, TypeRef t, uint64_t seed) {
  return m.createConstant(name, makeInput(*t, seed));
}

/// Float convolution [N,C,H,W] -> O channels, with a random filter and bias.
Net floatConv(Module &m, dim_t N, dim_t C, dim_t H, dim_t W, dim_t O, dim_t k, dim_t stride,
              dim_t pad, dim_t group) {
  Net n;
  n.f = m.createFunction("conv");
  auto *x = m.createPlaceholder(ElemKind::Float, {N, C, H, W}, "x");
  n.inputs.push_back(x);
  auto *flt = randomConstant(m, "filter", m.uniqueType(ElemKind::Float, {O, C / group, k, k}), 3);
  auto *bias = randomConstant(m, "bias", m.uniqueType(ElemKind::Float, {O}), 4);
  auto *cv = n.f->createConvolution("conv", x, flt, bias, {k, k}, {stride, stride},
                                    {pad, pad, pad, pad}, {1, 1}, group);
  n.outputs.push_back(n.f->createSave("y", cv)->getPlaceholder());
  return n;
}

} // namespace

TEST(SimProgram, ConvolutionsAreBitExactAcrossScratchpads) {
  struct Case {
    dim_t N, C, H, W, O, k, s, p, g;
  };
  // Odd sizes: plain, strided, grouped, depthwise (a row-vector product per group), and a
  // depth of 3*3*67 = 603 (more than one of Eigen's depth blocks).
  for (Case c : {Case{2, 5, 13, 11, 7, 3, 1, 1, 1}, Case{1, 6, 17, 9, 9, 3, 2, 1, 3},
                 Case{1, 6, 15, 15, 6, 3, 1, 1, 6}, Case{1, 67, 9, 7, 21, 3, 1, 0, 1},
                 Case{1, 3, 29, 31, 16, 1, 1, 0, 1}}) {
    Module m;
    Net n = floatConv(m, c.N, c.C, c.H, c.W, c.O, c.k, c.s, c.p, c.g);
    SCOPED_TRACE("conv C=" + std::to_string(c.C) + " O=" + std::to_string(c.O) +
                 " group=" + std::to_string(c.g));
    std::vector<uint64_t> dma = expectExact(n, {64 << 10, 256 << 10, 4 << 20});
    SimConfig small;
    small.scratchpadBytes = 64 << 10;
    auto p = programOf(n, small);
    EXPECT_EQ(tiledKinds(*p), std::vector<std::string>{"Convolution"});
    EXPECT_GE(dma[0], dma[2]); // more scratchpad, no more DMA
  }
}

TEST(SimProgram, TinyScratchpadsCutTilesAndStayExact) {
  // 16 KiB forces several tiles in every dimension of a 3x3 convolution of depth 27*... and
  // of a product with a depth over Eigen's depth block.
  Module m;
  Net n = floatConv(m, 1, 8, 23, 19, 24, 3, 1, 1, 1);
  std::vector<uint64_t> dma = expectExact(n, {16 << 10, 32 << 10, 1 << 20});
  EXPECT_GT(dma[0], dma[2]);
  SimConfig c;
  c.scratchpadBytes = 16 << 10;
  auto p = programOf(n, c);
  size_t gemms = 0;
  for (const SimInstr &x : p->instrs())
    gemms += x.op == SimOpcode::Gemm;
  EXPECT_GT(gemms, 4u);
  EXPECT_LE(p->total().arenaBytes, 16u << 10);
}

TEST(SimProgram, FullyConnectedAndMatMulAreBitExact) {
  struct Case {
    dim_t batch, K, N;
  };
  // One sample (row-vector path, depth blocks of 16), several (blocked product), a depth
  // over 504 (several depth blocks), and a depth under 128 (one row-vector block).
  for (Case c : {Case{1, 300, 37}, Case{3, 300, 37}, Case{4, 1100, 50}, Case{1, 100, 1000},
                 Case{17, 129, 65}}) {
    Module m;
    Net n;
    n.f = m.createFunction("fc");
    auto *x = m.createPlaceholder(ElemKind::Float, {c.batch, c.K}, "x");
    n.inputs.push_back(x);
    auto *w = randomConstant(m, "w", m.uniqueType(ElemKind::Float, {c.K, c.N}), 5);
    auto *b = randomConstant(m, "b", m.uniqueType(ElemKind::Float, {c.N}), 6);
    auto *fc = n.f->createFullyConnected("fc", x, w, b);
    auto *w2 = randomConstant(m, "w2", m.uniqueType(ElemKind::Float, {c.N, 23}), 7);
    auto *mm = n.f->createMatMul("mm", fc, w2);
    n.outputs.push_back(n.f->createSave("y", fc)->getPlaceholder());
    n.outputs.push_back(n.f->createSave("z", mm)->getPlaceholder());
    SCOPED_TRACE("fc " + std::to_string(c.batch) + "x" + std::to_string(c.K) + "x" +
                 std::to_string(c.N));
    // The smallest f32 tile step takes whole depth blocks of Eigen's (up to ~500 deep).
    expectExact(n, {64 << 10, 256 << 10, 4 << 20});
    SimConfig cfg;
    cfg.scratchpadBytes = 64 << 10;
    auto p = programOf(n, cfg);
    auto kinds = tiledKinds(*p);
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), "FullyConnected"), kinds.end());
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), "MatMul"), kinds.end());
  }
}

TEST(SimProgram, ElementwiseIsBitExactFloatAndInt8) {
  Module m;
  Net n;
  n.f = m.createFunction("ew");
  auto *a = m.createPlaceholder(ElemKind::Float, {7, 11, 13}, "a");
  auto *b = m.createPlaceholder(ElemKind::Float, {7, 11, 13}, "b");
  n.inputs = {a, b};
  auto *add = n.f->createAdd("add", a, b);
  auto *relu = n.f->createRelu("relu", add);
  n.outputs.push_back(n.f->createSave("y", relu)->getPlaceholder());
  TypeRef qa = m.uniqueType(ElemKind::Int8Q, {7, 11, 13}, 0.03f, 3);
  TypeRef qb = m.uniqueType(ElemKind::Int8Q, {7, 11, 13}, 0.05f, -7);
  TypeRef qo = m.uniqueType(ElemKind::Int8Q, {7, 11, 13}, 0.07f, 1);
  auto *ia = m.createPlaceholder(qa, "ia");
  auto *ib = m.createPlaceholder(qb, "ib");
  n.inputs.push_back(ia);
  n.inputs.push_back(ib);
  auto *qadd = n.f->createAdd("qadd", qo, ia, ib);
  auto *qrelu = n.f->createRelu("qrelu", m.uniqueType(ElemKind::Int8Q, {7, 11, 13}, 0.04f, -20),
                                qadd);
  n.outputs.push_back(n.f->createSave("qy", qrelu)->getPlaceholder());
  expectExact(n, {1 << 10, 4 << 10, 1 << 20});
  SimConfig c;
  c.scratchpadBytes = 1 << 10;
  auto p = programOf(n, c);
  EXPECT_EQ(tiledKinds(*p), (std::vector<std::string>{"Add", "Relu", "Add", "Relu"}));
}

TEST(SimProgram, Int8ConvolutionAndFullyConnectedAreBitExact) {
  Module m;
  Net n;
  n.f = m.createFunction("q");
  TypeRef xt = m.uniqueType(ElemKind::Int8Q, {2, 5, 11, 9}, 0.04f, -3);
  auto *x = m.createPlaceholder(xt, "x");
  n.inputs.push_back(x);
  auto *flt = randomConstant(m, "f", m.uniqueType(ElemKind::Int8Q, {6, 5, 3, 3}, 0.01f, 2), 8);
  auto *bias = randomConstant(m, "b", m.uniqueType(ElemKind::Int32Q, {6}, 0.0004f, 0), 9);
  TypeRef ct = m.uniqueType(ElemKind::Int8Q, {2, 6, 6, 5}, 0.08f, 4);
  auto *cv = n.f->createConvolution("qconv", ct, x, flt, bias, {3, 3}, {2, 2}, {1, 1, 1, 1},
                                    {1, 1}, 1);
  auto *flat = n.f->createReshape("flat", cv, {2, 6 * 6 * 5});
  auto *w = randomConstant(m, "w", m.uniqueType(ElemKind::Int8Q, {180, 19}, 0.02f, -1), 10);
  auto *fb = randomConstant(m, "fb", m.uniqueType(ElemKind::Int32Q, {19}, 0.0016f, 0), 12);
  auto *fc = n.f->createFullyConnected("qfc", m.uniqueType(ElemKind::Int8Q, {2, 19}, 0.3f, 0),
                                       flat, w, fb);
  n.outputs.push_back(n.f->createSave("y", fc)->getPlaceholder());
  n.outputs.push_back(n.f->createSave("c", cv)->getPlaceholder());
  expectExact(n, {1 << 10, 4 << 10, 1 << 20});
  SimConfig c;
  c.scratchpadBytes = 1 << 10;
  auto p = programOf(n, c);
  auto kinds = tiledKinds(*p);
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "Convolution"), kinds.end());
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "FullyConnected"), kinds.end());
}

TEST(SimProgram, ScratchpadTooSmallForOneTileIsAClearError) {
  Module m;
  Net n = floatConv(m, 1, 64, 14, 14, 32, 3, 1, 1, 1);
  auto sim = exitOnError(createBackend("Sim"));
  auto cf = sim->compile(n.f, simOptions(4096));
  ASSERT_FALSE(cf);
  const Error &e = cf.getError();
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  std::string msg = e.message();
  EXPECT_TRUE(contains(msg, "scratchpad (4096 bytes) cannot hold one tile step of Convolution 'conv'"))
      << msg;
  EXPECT_TRUE(contains(msg, "float<1x64x14x14>")) << msg; // the input's shape
  EXPECT_TRUE(contains(msg, "bytes")) << msg;
  // A bad value of the parameter is refused too.
  auto bad = sim->compile(n.f, [] {
    CompileOptions o;
    o.backendOptions["scratchpad"] = "lots";
    return o;
  }());
  ASSERT_FALSE(bad);
  EXPECT_TRUE(contains(bad.getError().message(), "'lots' is not a number")) << bad.getError().message();
}

TEST(SimProgram, DoubleBufferingOverlapsDmaWithCompute) {
  // Relu over 192 floats with room for two 64-float tiles: three steps. DMA moves 4 bytes
  // a cycle (64 cycles a tile), the vector unit one element a cycle (64 cycles a step).
  // Program order: in0 in1 relu0 out0 in2 relu1 out1 relu2 out2, the DMA engine and the
  // vector unit each in order, in2 reusing in0's bytes once out0 is done:
  //   dma:    in0 [0,64)  in1 [64,128)  out0 [128,192)  in2 [192,256)  out1 [256,320)
  //           out2 [320,384)
  //   vector: relu0 [64,128)  relu1 [128,192)  relu2 [256,320)
  // so the layer takes 384 cycles (576 without overlap) and 3 of its 6 DMA slots run under
  // compute.
  Module m;
  Net n;
  n.f = m.createFunction("r");
  auto *x = m.createPlaceholder(ElemKind::Float, {192}, "x");
  n.inputs.push_back(x);
  n.outputs.push_back(n.f->createSave("y", n.f->createRelu("relu", x))->getPlaceholder());
  SimConfig c;
  c.scratchpadBytes = 2 * 64 * 4;
  c.dmaBytesPerCycle = 4;
  c.dmaSetupCycles = 0;
  c.vectorLanes = 1;
  c.launchCycles = 0;
  auto p = programOf(n, c);
  const SimLayerStats *relu = nullptr;
  for (const SimLayerStats &l : p->layers())
    if (l.kind == "Relu")
      relu = &l;
  ASSERT_NE(relu, nullptr);
  EXPECT_EQ(relu->cycles(), 384u);
  EXPECT_EQ(relu->dmaCycles, 384u);
  EXPECT_EQ(relu->vectorCycles, 192u);
  EXPECT_EQ(relu->exposedDmaCycles, 192u);
  EXPECT_DOUBLE_EQ(relu->hiddenDma(), 0.5);
  EXPECT_EQ(relu->dmaBytes, 2u * 192 * 4);
  // The two loads in flight live in different places; the third reuses the first's.
  std::vector<uint64_t> inOffsets;
  for (const SimInstr &i : p->instrs())
    if (i.op == SimOpcode::DmaIn)
      inOffsets.push_back(p->tiles()[i.dst].offset);
  ASSERT_EQ(inOffsets.size(), 3u);
  EXPECT_NE(inOffsets[0], inOffsets[1]);
  EXPECT_EQ(inOffsets[2], inOffsets[0]);
  // And the result is still the Interpreter's.
  std::vector<Tensor> ref = runOn("Interpreter", n, {});
  auto b = bindingsFor(n);
  exitOnError(p->run(*b));
  EXPECT_EQ(std::memcmp(b->get(n.outputs[0])->getUnsafePtr(), ref[0].getUnsafePtr(), 192 * 4), 0);
}

TEST(SimProgram, CyclesComeFromTheProgram) {
  Module m;
  Net n = floatConv(m, 1, 16, 28, 28, 32, 3, 1, 1, 1);
  SimConfig small, big;
  small.scratchpadBytes = 32 << 10;
  big.scratchpadBytes = 4 << 20;
  auto ps = programOf(n, small), pb = programOf(n, big);
  EXPECT_GT(ps->dmaBytes(), pb->dmaBytes());
  // Every engine's busy time bounds the makespan from below; overlap keeps it under the sum.
  for (const SimProgram *p : {ps.get(), pb.get()}) {
    const SimLayerStats &t = p->total();
    uint64_t busy = t.dmaCycles + t.macCycles + t.vectorCycles + t.hostCycles;
    EXPECT_GE(p->cycles(), p->getConfig().launchCycles + std::max(t.dmaCycles, t.macCycles));
    EXPECT_LT(p->cycles(), p->getConfig().launchCycles + busy);
    EXPECT_GT(t.hiddenDma(), 0.0);
  }
  std::string r = ps->report();
  EXPECT_TRUE(contains(r, "conv")) << r;
  EXPECT_TRUE(contains(r, "hidden under compute")) << r;
}

TEST(SimProgram, TheScratchpadPlanPassesTheVerifierAndACorruptedOneFails) {
  Module m;
  Net n = floatConv(m, 1, 8, 23, 19, 24, 3, 1, 1, 1);
  SimConfig c;
  c.scratchpadBytes = 16 << 10;
  auto p = programOf(n, c);
  const IRFunction &S = p->scratchpad();
  MemoryPlan plan = p->scratchpadPlan();
  EXPECT_FALSE(verifyMemoryPlan(S, plan));
  EXPECT_LE(plan.activationBytes, c.scratchpadBytes);
  // Move a tile onto another that is live at the same time.
  bool corrupted = false;
  for (size_t i = 0; i < plan.buffers.size() && !corrupted; i++)
    for (size_t j = i + 1; j < plan.buffers.size() && !corrupted; j++) {
      PlannedBuffer &a = plan.buffers[i], &b = plan.buffers[j];
      if (a.start < b.end && b.start < a.end && a.offset != b.offset && a.size <= b.size) {
        a.offset = b.offset;
        corrupted = true;
      }
    }
  ASSERT_TRUE(corrupted);
  Error e = verifyMemoryPlan(S, plan);
  ASSERT_TRUE(bool(e));
  EXPECT_TRUE(contains(e.message(), "live at the same time and share bytes")) << e.message();
}
