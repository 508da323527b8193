// The CPU graph step widen-half-floats (backends/CPU/WidenHalfFloats.h): structure (which
// nodes become ConvertTo -> float32 node -> ConvertTo, which stay) and numbers (the
// function before and after the step on the Interpreter, and the CPU backend against the
// Interpreter on the original function, element for element).
#include "backends/CPU/CPUBackend.h"
#include "backends/CPU/WidenHalfFloats.h"
#include "kiln/Backend/Compiler.h"
#include "kiln/kiln.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

/// Counts the nodes of \p f of kind \p k.
unsigned count(const Function *f, NodeKind k) {
  unsigned n = 0;
  for (const auto &up : f->getNodes())
    n += up->getKind() == k;
  return n;
}

/// Conv -> Relu -> Add(residual) -> Concat with a bf16 branch -> Save, and a compare of
/// 16-bit values into Bool: every computing node has 16-bit operands.
struct Graph16 {
  Module mod;
  Function *F;
  Placeholder *x, *w, *b, *v;
  Graph16() : F(mod.createFunction("half")) {
    x = mod.createPlaceholder(ElemKind::Float16, {1, 2, 4, 4}, "x");
    w = mod.createPlaceholder(ElemKind::Float16, {2, 2, 3, 3}, "w");
    b = mod.createPlaceholder(ElemKind::Float16, {2}, "b");
    v = mod.createPlaceholder(ElemKind::BFloat16, {1, 2, 4, 4}, "v");
    auto *c = F->createConvolution("conv", x, w, b, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
    NodeValue r = F->createRelu("relu", c);
    NodeValue a = F->createAdd("add", r, x);
    NodeValue t = F->createTranspose("tr", a, {0, 1, 3, 2}); // moves f16 as it is
    F->createSave("y", t);
    NodeValue e = F->createExp("exp", v);
    F->createSave("e", e);
    F->createSave("lt", F->createCmpLT("lt", e, v));
  }
  void bind(PlaceholderBindings &pb) {
    PseudoRNG rng(7);
    for (Placeholder *p : {x, w, b, v}) {
      Tensor t(p->getType()->kind, p->getType()->dims);
      t.randomize(-2, 2, rng);
      pb.insert(p, std::move(t));
    }
    for (SaveNode *s : F->getSaves())
      pb.allocate(s->getPlaceholder());
  }
};

Error runOn(const std::string &backend, Function *f, PlaceholderBindings &pb) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Backend> be, createBackend(backend));
  KILN_ASSIGN_OR_RETURN(auto cf, be->compile(f, CompileOptions()));
  ExecutionContext ctx(&pb);
  return cf->execute(ctx);
}

TEST(WidenHalfFloats, StructureOfTheRewrite) {
  Graph16 g;
  cpu::CPUBackend cpu;
  for (const auto &up : g.F->getNodes()) {
    if (!isa<SaveNode>(up.get())) {
      EXPECT_TRUE(cpu.isOpSupported(*up)) << up->describe();
    }
  }
  // Natively: the Transpose (moves elements) only; the others run widened.
  EXPECT_TRUE(cpu.isNativelySupported(*g.F->getNodeByName("tr")));
  EXPECT_FALSE(cpu.isNativelySupported(*g.F->getNodeByName("conv")));
  bool changed = cpu::widenHalfFloats(g.F, [&](const Node &n) {
    return !cpu.isNativelySupported(n) && cpu.isOpSupported(n);
  });
  EXPECT_TRUE(changed);
  ASSERT_FALSE(bool(g.F->verify()));
  // conv: 3 operands in, 1 result out; relu 1 + 1; add 2 + 1; exp 1 + 1; lt 2 in, Bool out.
  EXPECT_EQ(count(g.F, NodeKind::ConvertTo), 4u + 2u + 3u + 2u + 2u);
  for (const auto &up : g.F->getNodes()) {
    const Node &n = *up;
    if (isa<ConvertToNode>(&n) || isa<SaveNode>(&n) || isa<TransposeNode>(&n))
      continue;
    // Every computing node is float32 now (Bool results stay Bool).
    for (unsigned i = 0; i < n.getNumInputs(); i++)
      EXPECT_EQ(n.getNthInput(i).getElementType(), ElemKind::Float) << n.describe();
    EXPECT_NE(n.getType(0)->kind, ElemKind::Float16) << n.describe();
    EXPECT_NE(n.getType(0)->kind, ElemKind::BFloat16) << n.describe();
    EXPECT_TRUE(cpu.isNativelySupported(n)) << n.describe();
  }
  auto *tr = cast<TransposeNode>(g.F->getNodeByName("tr"));
  EXPECT_EQ(tr->getType(0)->kind, ElemKind::Float16);
  // The Transpose reads the rounding ConvertTo of the widened Add.
  auto *round = dyn_cast<ConvertToNode>(tr->getInput().node);
  ASSERT_NE(round, nullptr);
  EXPECT_EQ(round->getInput().getElementType(), ElemKind::Float);
  EXPECT_TRUE(isa<AddNode>(round->getInput().node));
  // A second run changes nothing.
  EXPECT_FALSE(cpu::widenHalfFloats(g.F, [&](const Node &n) {
    return !cpu.isNativelySupported(n) && cpu.isOpSupported(n);
  }));
}

TEST(WidenHalfFloats, SameNumbersOnTheInterpreterAndTheCPU) {
  Graph16 before, after;
  cpu::CPUBackend cpu;
  cpu::widenHalfFloats(after.F, [&](const Node &n) {
    return !cpu.isNativelySupported(n) && cpu.isOpSupported(n);
  });
  PlaceholderBindings pb0, pb1, pb2;
  before.bind(pb0);
  after.bind(pb1);
  ASSERT_FALSE(bool(runOn("Interpreter", before.F, pb0)));
  ASSERT_FALSE(bool(runOn("Interpreter", after.F, pb1)));
  // The CPU compiles the original function: its compile runs the step itself.
  Graph16 onCpu;
  onCpu.bind(pb2);
  Error e = runOn("CPU", onCpu.F, pb2);
  ASSERT_FALSE(bool(e)) << e.message();
  EXPECT_EQ(count(onCpu.F, NodeKind::Convolution), 1u);
  EXPECT_GT(count(onCpu.F, NodeKind::ConvertTo), 0u);
  for (size_t s = 0; s < before.F->getSaves().size(); s++) {
    const Tensor &t0 = *pb0.get(before.F->getSaves()[s]->getPlaceholder());
    const Tensor &t1 = *pb1.get(after.F->getSaves()[s]->getPlaceholder());
    const Tensor &t2 = *pb2.get(onCpu.F->getSaves()[s]->getPlaceholder());
    // Rounded once per operator either way: equal on the Interpreter; the CPU's float32
    // kernels differ from the Interpreter's by float rounding, which 16-bit results
    // mostly absorb (within one 16-bit ulp).
    EXPECT_TRUE(t0.isEqual(t1, 0, 0, true)) << before.F->getSaves()[s]->getName();
    EXPECT_TRUE(t0.isEqual(t2, 1e-2f, 1e-2f, true)) << before.F->getSaves()[s]->getName();
  }
}

// An f16 constant filter becomes a float32 constant at compile time (its values exactly),
// shared by both convolutions that read it; the activation still goes through ConvertTo.
// (bf16 convolutions of group 1 run natively: Bf16ConvTest.cpp.)
TEST(WidenHalfFloats, ConstantOperandsBecomeFloat32Constants) {
  Module mod;
  Function *F = mod.createFunction("f");
  auto *x = mod.createPlaceholder(ElemKind::Float16, {1, 1, 3, 3}, "x");
  Tensor wt(ElemKind::Float16, {1, 1, 1, 1}, {1.0078125});
  Tensor bt(ElemKind::Float16, {1}, {-0.5});
  Constant *w = mod.createConstant("w", std::move(wt));
  Constant *b = mod.createConstant("b", std::move(bt));
  auto *c1 = F->createConvolution("c1", x, w, b, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  auto *c2 = F->createConvolution("c2", x, w, b, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  F->createSave("y1", c1);
  F->createSave("y2", c2);
  cpu::CPUBackend cpu;
  EXPECT_TRUE(cpu::widenHalfFloats(F, [&](const Node &n) {
    return !cpu.isNativelySupported(n) && cpu.isOpSupported(n);
  }));
  ASSERT_FALSE(bool(F->verify()));
  auto *w1 = cast<ConvolutionNode>(F->getNodeByName("c1.f32"));
  auto *w2 = cast<ConvolutionNode>(F->getNodeByName("c2.f32"));
  auto *fw = dyn_cast<Constant>(w1->getFilter().node);
  ASSERT_NE(fw, nullptr);
  EXPECT_EQ(fw, w2->getFilter().node);
  EXPECT_EQ(fw->getType()->kind, ElemKind::Float);
  EXPECT_EQ(fw->getPayload().getHandle<float>().raw(0), 1.0078125f);
  auto *fb = dyn_cast<Constant>(w1->getBias().node);
  ASSERT_NE(fb, nullptr);
  EXPECT_EQ(fb->getPayload().getHandle<float>().raw(0), -0.5f);
  EXPECT_TRUE(isa<ConvertToNode>(w1->getInput().node));
  // 2 widened inputs (one per convolution) and 2 rounded results.
  EXPECT_EQ(count(F, NodeKind::ConvertTo), 4u);
}

TEST(WidenHalfFloats, FusedNodesAndFloat32AreLeftAlone) {
  Module mod;
  Function *F = mod.createFunction("f");
  auto *x = mod.createPlaceholder(ElemKind::Float, {4}, "x");
  auto *h = mod.createPlaceholder(ElemKind::Float16, {4}, "h");
  F->createSave("y", F->createTanh("t", x));
  F->createSave("c", F->createConvertTo("c", mod.uniqueType(ElemKind::Float, {4}), h));
  cpu::CPUBackend cpu;
  EXPECT_FALSE(cpu::widenHalfFloats(F, [&](const Node &n) {
    return !cpu.isNativelySupported(n) && cpu.isOpSupported(n);
  }));
  // A fused f16 convolution would round once where its unfused nodes round three times:
  // the CPU does not claim it, so fuse-activations leaves f16 convolutions unfused.
  auto *in = mod.createPlaceholder(ElemKind::Float16, {1, 1, 3, 3}, "in");
  auto *w = mod.createPlaceholder(ElemKind::Float16, {1, 1, 1, 1}, "w");
  auto *b = mod.createPlaceholder(ElemKind::Float16, {1}, "b");
  auto *fc = F->createFusedConvolution("fc", in, w, b, {}, {1, 1}, {1, 1}, {0, 0, 0, 0},
                                       {1, 1}, 1, "Relu", 0, 0);
  F->createSave("fcs", fc);
  EXPECT_FALSE(cpu.isOpSupported(*fc));
}

} // namespace
} // namespace kiln
