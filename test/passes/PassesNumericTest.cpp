// Every graph pass, on graphs built with the API: the rewrite happens (structure) and the
// function computes the same numbers before and after on the Interpreter. One test per
// pass of Passes.def, named after it.

#include "PassTestUtils.h"

#include "kiln/Passes/Pipeline.h"

#include <algorithm>
#include <cstring>

namespace kiln::test {

namespace {

class PassNumericTest : public ::testing::Test {
protected:
  Module m_;
  Function *F_ = m_.createFunction("main");
  Placeholder *input(const std::string &name, Dims dims) {
    return m_.createPlaceholder(ElemKind::Float, dims, name);
  }
  Constant *rand(const std::string &name, Dims dims, float lo = -1, float hi = 1) {
    return randomConstant(m_, name, dims, lo, hi, std::hash<std::string>()(name));
  }
  Constant *positive(const std::string &name, Dims dims) { return rand(name, dims, 0.5f, 2); }
  void save(NodeValue v, const std::string &name = "out") { F_->createSave(name, v); }
};

TEST_F(PassNumericTest, dce) {
  auto *x = input("x", {3, 4});
  F_->createTanh("dead", x);
  save(F_->createRelu("r", x));
  Function *g = optimizedCopy(F_, "dce");
  EXPECT_EQ(countKind(g, NodeKind::Tanh), 0u);
  expectSameNumbers(F_, g);
}

TEST_F(PassNumericTest, cse) {
  auto *x = input("x", {3, 4});
  auto *a = F_->createConv("c", F_->createReshape("r", x, {1, 1, 3, 4}), 2, 1);
  auto *b =
      F_->createConvolution("c2", a->getInput(), a->getFilter(), a->getBias(), a->getKernels(),
                            a->getStrides(), a->getPads(), a->getDilations(), 1);
  save(F_->createAdd("sum", F_->createSigmoid("s1", a), F_->createSigmoid("s2", b)));
  Function *g = optimizedCopy(F_, "cse,dce");
  EXPECT_EQ(countKind(g, NodeKind::Convolution), 1u);
  EXPECT_EQ(countKind(g, NodeKind::Sigmoid), 1u);
  expectSameNumbers(F_, g);
}

TEST_F(PassNumericTest, constant_fold) {
  auto *x = input("x", {4, 8});
  auto *w = rand("w", {8, 8});
  auto *t = F_->createTranspose("wt", w, {1, 0});
  auto *e = F_->createExp("we", t);
  save(F_->createMatMul("mm", x, e));
  Function *g = optimizedCopy(F_, "constant-fold,dce");
  EXPECT_EQ(countKind(g, NodeKind::Exp), 0u);
  EXPECT_EQ(countKind(g, NodeKind::Transpose), 0u);
  expectSameNumbers(F_, g);
}

// Slices of Constants are copied directly, by rows: inner and outer boxes of a 5-D filter
// (the planes of a 3-D convolution's), one element per row, one that also feeds a node
// folded on the Interpreter (an Exp), a slice of that slice, and a plane read only through
// a Reshape (as the importer cuts a 3-D convolution's filter); each must compute what the
// Interpreter's Slice computes on the unfolded graph.
TEST_F(PassNumericTest, constant_fold_slices) {
  auto *w = rand("w", {4, 3, 2, 5, 7});
  auto *inner = F_->createSlice("inner", w, {0, 0, 1, 0, 0}, {4, 3, 2, 5, 7});
  auto *box = F_->createSlice("box", w, {1, 0, 0, 1, 2}, {3, 3, 2, 4, 6});
  auto *col = F_->createSlice("col", w, {0, 0, 0, 0, 6}, {4, 3, 1, 5, 7});
  auto *twice = F_->createSlice("twice", inner, {0, 1, 0, 2, 0}, {4, 3, 1, 5, 7});
  auto plus = [&](const char *name, NodeValue v) {
    save(F_->createAdd(name, input(std::string(name) + ".x", v.getType()->dims), v),
         std::string(name) + ".out");
  };
  plus("p_inner", inner);
  plus("p_exp", F_->createExp("e", inner));
  plus("p_box", box);
  plus("p_col", col);
  plus("p_twice", twice);
  auto *first = F_->createSlice("first", w, {0, 0, 0, 0, 0}, {4, 3, 1, 5, 7});
  plus("p_plane", F_->createReshape("plane", first, {4, 3, 5, 7}));
  plus("p_whole", F_->createReshape("whole", w, {12, 70}));
  Function *g = optimizedCopy(F_, "constant-fold,dce");
  EXPECT_EQ(countKind(g, NodeKind::Slice), 0u);
  EXPECT_EQ(countKind(g, NodeKind::Exp), 0u);
  expectSameNumbers(F_, g);
}

// A Slice that takes all of a Constant and a Reshape of one, each its only reader (as the
// importer reads a 3-D convolution's filter of one depth): the folded Constant takes the
// original's bytes over instead of copying them, and the original keeps its type and no
// memory; a Constant with a second reader is copied and keeps its data. The folded values
// are the original bytes in the new shape.
TEST_F(PassNumericTest, constant_fold_moves_sole_reader) {
  auto *w = rand("w", {4, 3, 1, 5, 7});
  auto *v = rand("v", {6, 10});
  auto *shared = rand("shared", {2, 8});
  const Tensor wantW = w->getPayload().clone(), wantV = v->getPayload().clone();
  const Tensor wantShared = shared->getPayload().clone();
  auto *all = F_->createSlice("all", w, {0, 0, 0, 0, 0}, {4, 3, 1, 5, 7});
  auto *plane = F_->createReshape("plane", all, {4, 3, 5, 7});
  auto *flat = F_->createReshape("flat", v, {60});
  auto *sflat = F_->createReshape("sflat", shared, {16});
  save(F_->createAdd("a", input("x", {4, 3, 5, 7}), plane), "o1");
  save(F_->createAdd("b", input("y", {60}), flat), "o2");
  save(F_->createAdd("c", input("z", {16}), sflat), "o3");
  save(F_->createRelu("r", shared), "o4");
  Expected<Pipeline> p = parsePassList("constant-fold,dce");
  ASSERT_TRUE(bool(p)) << p.getError().message();
  Expected<PipelineReport> r = runPipeline(F_, *p, nullptr);
  ASSERT_TRUE(bool(r)) << r.getError().message();
  EXPECT_EQ(countKind(F_, NodeKind::Slice), 0u);
  EXPECT_EQ(countKind(F_, NodeKind::Reshape), 0u);
  auto foldedOperand = [&](const char *add) -> const Tensor * {
    for (const auto &n : F_->getNodes())
      if (n->getName() == add)
        if (auto *c = dyn_cast<Constant>(n->getNthInput(1).node))
          return &c->getPayload();
    return nullptr;
  };
  struct Case {
    const char *add;
    const Tensor &want;
    Dims dims;
  };
  for (const Case &c : {Case{"a", wantW, {4, 3, 5, 7}}, Case{"b", wantV, {60}},
                        Case{"c", wantShared, {16}}}) {
    const Tensor *t = foldedOperand(c.add);
    ASSERT_TRUE(t) << c.add;
    ASSERT_EQ(t->getType().dims, c.dims) << c.add;
    ASSERT_EQ(t->getSizeInBytes(), c.want.getSizeInBytes()) << c.add;
    EXPECT_EQ(std::memcmp(t->getUnsafePtr(), c.want.getUnsafePtr(), c.want.getSizeInBytes()), 0)
        << c.add;
  }
  for (const Constant *moved : {w, v}) {
    EXPECT_EQ(moved->getPayload().getUnsafePtr(), nullptr) << moved->getName();
    EXPECT_EQ(moved->getPayload().getType(), *moved->getType()) << moved->getName();
  }
  ASSERT_NE(shared->getPayload().getUnsafePtr(), nullptr);
  EXPECT_EQ(std::memcmp(shared->getPayload().getUnsafePtr(), wantShared.getUnsafePtr(),
                        wantShared.getSizeInBytes()),
            0);
}

TEST_F(PassNumericTest, fold_batch_norm) {
  auto *x = input("x", {2, 3, 8, 8});
  auto *c = F_->createConv("conv", x, 6, 3, 1, 1);
  auto *bn = F_->createBatchNormalization("bn", c, positive("s", {6}), rand("b", {6}),
                                          rand("m", {6}), positive("v", {6}), 1e-5f, 1);
  auto *fc = F_->createFullyConnected("fc", F_->createFlatten("flat", bn, 1), 5);
  auto *bn2 = F_->createBatchNormalization("bn2", fc, positive("s2", {5}), rand("b2", {5}),
                                           rand("m2", {5}), positive("v2", {5}), 1e-3f, 1);
  save(bn2);
  Function *g = optimizedCopy(F_, "fold-batch-norm");
  EXPECT_EQ(countKind(g, NodeKind::BatchNormalization), 0u);
  expectSameNumbers(F_, g, 1e-5f, 1e-5f);
}

/// The export forms of LayerNorm fold-layer-norm recognises (see FoldLayerNorm.cpp).
struct LayerNormForm {
  bool mulSquare;   ///< Mul(d, d) instead of Pow(d, 2)
  int inverse;      ///< 0: Div by the Sqrt, 1: Mul by Reciprocal, 2: Mul by Rsqrt, 3: Mul by 1/s
  bool epsFirst;    ///< Add(eps, var)
  int affine;       ///< 0: none, 1: scale, 2: scale and shift, 3: shift only
};

/// A LayerNorm over the trailing axes of \p x from \p axis, written out in primitives.
NodeValue decomposedLayerNorm(Module &m, Function *f, NodeValue x, size_t axis,
                              const LayerNormForm &form) {
  const Dims &dims = x.getType()->dims;
  std::vector<int64_t> axes;
  for (size_t a = axis; a < dims.size(); a++)
    axes.push_back(int64_t(a));
  std::vector<dim_t> td(dims.begin(), dims.end());
  auto *mean = f->createReduceMean("mean", x, axes, true);
  auto *d = f->createSub("d", x, f->createBroadcast("mb", mean, td));
  Node *sq = form.mulSquare
                 ? static_cast<Node *>(f->createMul("sq", d, d))
                 : f->createPow("sq", d, f->createSplat("two", d->getType(0), 2.0f));
  auto *var = f->createReduceMean("var", sq, axes, true);
  auto *eps = f->createSplat("eps", var->getType(0), 1e-5f);
  auto *ve = form.epsFirst ? f->createAdd("ve", eps, var) : f->createAdd("ve", var, eps);
  NodeValue y;
  if (form.inverse == 0) {
    y = f->createDiv("y", d, f->createBroadcast("sb", f->createSqrt("s", ve), td));
  } else {
    NodeValue inv;
    if (form.inverse == 1)
      inv = f->createReciprocal("inv", f->createSqrt("s", ve));
    else if (form.inverse == 2)
      inv = f->createRsqrt("inv", ve);
    else
      inv = f->createDiv("inv", f->createSplat("one", ve->getType(0), 1.0f), f->createSqrt("s", ve));
    y = f->createMul("y", f->createBroadcast("ib", inv, td), d);
  }
  Dims nd(std::vector<dim_t>(dims.begin() + axis, dims.end()));
  if (form.affine == 1 || form.affine == 2) {
    auto *g = randomConstant(m, "gamma", nd, 0.5f, 2, 7);
    y = f->createMul("ys", y, f->createBroadcast("gb", g, td));
  }
  if (form.affine >= 2) {
    auto *b = randomConstant(m, "beta", nd, -1, 1, 8);
    y = f->createAdd("yb", f->createBroadcast("bb", b, td), y);
  }
  return y;
}

TEST_F(PassNumericTest, fold_layer_norm) {
  const LayerNormForm forms[] = {{false, 0, false, 2}, {true, 1, true, 1}, {false, 2, false, 0},
                                 {true, 3, false, 3}, {false, 0, true, 2}};
  for (const LayerNormForm &form : forms) {
    Module m;
    Function *f = m.createFunction("main");
    auto *x = m.createPlaceholder(ElemKind::Float, {2, 5, 12}, "x");
    f->createSave("out", decomposedLayerNorm(m, f, x, 2, form));
    Function *g = optimizedCopy(f, "fold-layer-norm,dce");
    EXPECT_EQ(countKind(g, NodeKind::LayerNormalization), 1u);
    for (NodeKind k : {NodeKind::ReduceMean, NodeKind::Sub, NodeKind::Sqrt, NodeKind::Div,
                       NodeKind::Mul, NodeKind::Add, NodeKind::Rsqrt, NodeKind::Reciprocal})
      EXPECT_EQ(countKind(g, k), 0u) << getNodeKindName(k) << " form " << form.inverse;
    expectSameNumbers(f, g, 1e-5f, 1e-4f);
  }
  // Over the last two axes; and a mean over other axes than the variance's is left alone.
  {
    Module m;
    Function *f = m.createFunction("main");
    auto *x = m.createPlaceholder(ElemKind::Float, {3, 4, 6}, "x");
    f->createSave("out", decomposedLayerNorm(m, f, x, 1, {false, 0, false, 2}));
    Function *g = optimizedCopy(f, "fold-layer-norm,dce");
    EXPECT_EQ(countKind(g, NodeKind::LayerNormalization), 1u);
    expectSameNumbers(f, g, 1e-5f, 1e-4f);
  }
  // Epsilon after the Sqrt is another function: not folded.
  {
    Module m;
    Function *f = m.createFunction("main");
    auto *x = m.createPlaceholder(ElemKind::Float, {2, 8}, "x");
    auto *mean = f->createReduceMean("mean", x, {1}, true);
    auto *d = f->createSub("d", x, f->createBroadcast("mb", mean, {2, 8}));
    auto *var = f->createReduceMean("var", f->createMul("sq", d, d), {1}, true);
    auto *s = f->createAdd("se", f->createSqrt("s", var), f->createSplat("eps", var->getType(0), 1e-5f));
    f->createSave("out", f->createDiv("y", d, f->createBroadcast("sb", s, {2, 8})));
    Function *g = optimizedCopy(f, "fold-layer-norm,dce");
    EXPECT_EQ(countKind(g, NodeKind::LayerNormalization), 0u);
  }
  // The centred value read elsewhere too: not folded (it would be computed twice).
  {
    Module m;
    Function *f = m.createFunction("main");
    auto *x = m.createPlaceholder(ElemKind::Float, {2, 8}, "x");
    NodeValue y = decomposedLayerNorm(m, f, x, 1, {false, 0, false, 0});
    Node *d = nullptr;
    for (const auto &n : f->getNodes())
      if (n->getName() == "d")
        d = n.get();
    ASSERT_NE(d, nullptr);
    f->createSave("out", y);
    f->createSave("out2", f->createRelu("r", NodeValue(d, 0)));
    Function *g = optimizedCopy(f, "fold-layer-norm,dce");
    EXPECT_EQ(countKind(g, NodeKind::LayerNormalization), 0u);
  }
  // The Interpreter runs LayerNormalization whole, so it gets the folded node.
  {
    std::unique_ptr<Backend> interp = exitOnError(createBackend("Interpreter"));
    Module m;
    Function *f = m.createFunction("main");
    auto *x = m.createPlaceholder(ElemKind::Float, {2, 8}, "x");
    f->createSave("out", decomposedLayerNorm(m, f, x, 1, {false, 0, false, 2}));
    Function *g = optimizedCopy(f, "fold-layer-norm", interp.get());
    EXPECT_EQ(countKind(g, NodeKind::LayerNormalization), 1u);
    expectSameNumbers(f, g, 1e-5f, 1e-4f);
  }
}

// A QDQ convolution (per-tensor int8 weights) and a QDQ fully-connected layer (per-column
// weights in the importer's Mul(Sub(Dequantize, zero points), scales) form, and a Relu the
// uint8 offset 0 makes redundant) become integer nodes; the outputs agree within one output
// step (float then rounded vs integer then rounded), two for the second layer.
TEST_F(PassNumericTest, fold_qdq) {
  Module &m = m_;
  auto *x = input("x", {1, 2, 5, 5});
  auto f32 = [&](const Dims &d) { return m.uniqueType(ElemKind::Float, d); };
  NodeValue qx = F_->createQuantize("qx", m.uniqueType(ElemKind::UInt8Q, {1, 2, 5, 5}, 1.0f / 127, 128), x);
  Tensor wt(Type(ElemKind::Int8Q, {3, 2, 3, 3}, 0.01f, 0));
  PseudoRNG rng(3);
  wt.randomize(-100, 100, rng);
  NodeValue w = F_->createDequantize("dqw", f32({3, 2, 3, 3}), m.createConstant("w", std::move(wt)));
  NodeValue conv = F_->createConvolution("conv", F_->createDequantize("dqx", f32({1, 2, 5, 5}), qx), w,
                                         rand("b", {3}), {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
  NodeValue qy = F_->createQuantize("qy", m.uniqueType(ElemKind::Int8Q, {1, 3, 5, 5}, 0.02f, -3), conv);
  save(F_->createDequantize("dqy", f32({1, 3, 5, 5}), qy), "conv_out");
  NodeValue flat = F_->createReshape("flat", qy, {1, 75});
  Tensor ft(Type(ElemKind::UInt8Q, {75, 4}, 1.0f, 0));
  ft.randomize(0, 255, rng);
  NodeValue raw = F_->createDequantize("raw", f32({75, 4}), m.createConstant("fw", std::move(ft)));
  NodeValue zp = F_->createBroadcast("zp", m.createConstant("fz", Tensor(ElemKind::Float, {1, 4}, {128, 120, 130, 127})), {75, 4});
  NodeValue sc = F_->createBroadcast("sc", m.createConstant("fs", Tensor(ElemKind::Float, {1, 4}, {0.002, 0.004, 0.001, 0.003})), {75, 4});
  NodeValue fw = F_->createMul("fwf", F_->createSub("centre", raw, zp), sc);
  NodeValue fc = F_->createFullyConnected("fc", F_->createDequantize("dqflat", f32({1, 75}), flat), fw,
                                          rand("fb", {4}));
  NodeValue qfc = F_->createQuantize("qfc", m.uniqueType(ElemKind::UInt8Q, {1, 4}, 0.05f, 0),
                                     F_->createRelu("relu", fc));
  save(F_->createDequantize("dqfc", f32({1, 4}), qfc), "fc_out");
  Function *g = optimizedCopy(F_, "fold-qdq");
  EXPECT_EQ(countKind(g, NodeKind::ChannelwiseQuantizedConvolution), 1u);
  EXPECT_EQ(countKind(g, NodeKind::ChannelwiseQuantizedFullyConnected), 1u);
  EXPECT_EQ(countKind(g, NodeKind::Convolution), 0u);
  EXPECT_EQ(countKind(g, NodeKind::FullyConnected), 0u);
  EXPECT_EQ(countKind(g, NodeKind::Relu), 0u);
  expectSameNumbers(F_, g, 0.1001f, 0);
}

// A uint8 Quantize read only by Dequantize nodes becomes the int8 Quantize of the same
// numbers (offset - 128), saturation included: the Dequantize results are identical. One read
// by something else (here a Save of the raw values) keeps its type.
TEST_F(PassNumericTest, fold_qdq_signs_unsigned_activations) {
  Module &m = m_;
  auto *x = input("x", {4, 16});
  auto f32 = m.uniqueType(ElemKind::Float, {4, 16});
  // x in [-1, 1] at 50 steps per unit around offset 250 saturates above x = 0.1.
  NodeValue q = F_->createQuantize("q", m.uniqueType(ElemKind::UInt8Q, {4, 16}, 0.02f, 250), x);
  save(F_->createDequantize("dq", f32, q), "a");
  save(F_->createTanh("t", F_->createDequantize("dq2", f32, q)), "b");
  NodeValue kept = F_->createQuantize("kept", m.uniqueType(ElemKind::UInt8Q, {4, 16}, 0.01f, 3), x);
  save(kept, "raw");
  save(F_->createDequantize("dq3", f32, kept), "c");
  Function *g = optimizedCopy(F_, "fold-qdq");
  unsigned signedQ = 0, unsignedQ = 0;
  for (const auto &n : g->getNodes())
    if (auto *qn = dyn_cast<QuantizeNode>(n.get())) {
      const Type &t = *qn->getResultType();
      if (t.kind == ElemKind::Int8Q) {
        signedQ++;
        EXPECT_EQ(t.offset, 250 - 128);
        EXPECT_EQ(t.scale, 0.02f);
      } else {
        unsignedQ++;
        EXPECT_EQ(t.offset, 3);
      }
    }
  EXPECT_EQ(signedQ, 1u);
  EXPECT_EQ(unsignedQ, 1u);
  expectSameNumbers(F_, g, 0, 0);
}

// A ReLU6 between a QDQ convolution and a Quantize whose range is [0, 6] folds into the int8
// node (the saturation clamps as the Clip does); outputs agree within one output step.
TEST_F(PassNumericTest, fold_qdq_relu6) {
  Module &m = m_;
  auto *x = input("x", {1, 3, 6, 6});
  auto f32 = [&](const Dims &d) { return m.uniqueType(ElemKind::Float, d); };
  NodeValue qx = F_->createQuantize("qx", m.uniqueType(ElemKind::Int8Q, {1, 3, 6, 6}, 1.0f / 127, 0), x);
  Tensor wt(Type(ElemKind::Int8Q, {4, 3, 3, 3}, 0.05f, 0));
  PseudoRNG rng(5);
  wt.randomize(-120, 120, rng);
  NodeValue w = F_->createDequantize("dqw", f32({4, 3, 3, 3}), m.createConstant("w", std::move(wt)));
  NodeValue conv = F_->createConvolution("conv", F_->createDequantize("dqx", f32({1, 3, 6, 6}), qx), w,
                                         rand("b", {4}), {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
  NodeValue clip = F_->createClip("relu6", conv, 0, 6);
  const float step = 6.0f / 255;
  NodeValue qy = F_->createQuantize("qy", m.uniqueType(ElemKind::Int8Q, {1, 4, 6, 6}, step, -128), clip);
  save(F_->createDequantize("dqy", f32({1, 4, 6, 6}), qy), "y");
  Function *g = optimizedCopy(F_, "fold-qdq");
  EXPECT_EQ(countKind(g, NodeKind::ChannelwiseQuantizedConvolution), 1u);
  EXPECT_EQ(countKind(g, NodeKind::Clip), 0u);
  expectSameNumbers(F_, g, step * 1.001f, 0);
}

// Element-wise arithmetic and pooling between Dequantize and Quantize nodes (a residual Add of
// two differently scaled values, a max pool, a global average pool and a flatten that keeps
// its scale) become the same nodes on int8 values; outputs agree within one output step.
TEST_F(PassNumericTest, fold_qdq_elementwise_and_pools) {
  Module &m = m_;
  auto f32 = [&](const Dims &d) { return m.uniqueType(ElemKind::Float, d); };
  auto i8 = [&](const Dims &d, float s, int32_t o) { return m.uniqueType(ElemKind::Int8Q, d, s, o); };
  const Dims d = {1, 2, 6, 6};
  auto *a = input("a", d);
  auto *b = input("b", d);
  NodeValue qa = F_->createQuantize("qa", i8(d, 1.0f / 100, 5), a);
  NodeValue qb = F_->createQuantize("qb", i8(d, 1.0f / 60, -7), b);
  NodeValue sum = F_->createAdd("sum", F_->createDequantize("dqa", f32(d), qa),
                                F_->createDequantize("dqb", f32(d), qb));
  NodeValue qs = F_->createQuantize("qs", i8(d, 1.0f / 50, -20), sum);
  NodeValue relu = F_->createRelu("relu", F_->createDequantize("dqs", f32(d), qs));
  NodeValue qr = F_->createQuantize("qr", i8(d, 1.0f / 60, -128), relu);
  NodeValue pool = F_->createMaxPool("pool", F_->createDequantize("dqr", f32(d), qr), {2, 2}, {2, 2},
                                     {0, 0, 0, 0});
  const Dims pd = {1, 2, 3, 3};
  NodeValue qp = F_->createQuantize("qp", i8(pd, 1.0f / 70, -128), pool);
  NodeValue gap = F_->createAdaptiveAvgPool("gap", F_->createDequantize("dqp", f32(pd), qp), {1, 1});
  NodeValue qg = F_->createQuantize("qg", i8({1, 2, 1, 1}, 1.0f / 90, -128), gap);
  NodeValue flat = F_->createReshape("flat", F_->createDequantize("dqg", f32({1, 2, 1, 1}), qg), {1, 2});
  NodeValue qf = F_->createQuantize("qf", i8({1, 2}, 1.0f / 90, -128), flat);
  save(F_->createDequantize("dqs_out", f32(d), qs), "sum");
  save(F_->createDequantize("dqf", f32({1, 2}), qf), "flat");
  Function *g = optimizedCopy(F_, "fold-qdq");
  for (NodeKind k : {NodeKind::Add, NodeKind::Relu, NodeKind::MaxPool, NodeKind::AdaptiveAvgPool,
                     NodeKind::Reshape}) {
    unsigned quantized = 0;
    for (const auto &n : g->getNodes())
      quantized += n->getKind() == k && n->getType(0)->kind == ElemKind::Int8Q;
    EXPECT_EQ(quantized, 1u) << "kind " << unsigned(k);
  }
  EXPECT_EQ(countKind(g, NodeKind::Dequantize), 2u);
  expectSameNumbers(F_, g, 1.0f / 50 * 1.001f, 0);
}

TEST_F(PassNumericTest, fuse_bias_add) {
  auto *x = input("x", {2, 3, 5, 5});
  auto *c = F_->createConv("conv", x, 4, 3, 1, 1);
  auto *bias = F_->createBroadcast("bias", rand("cb", {4, 1, 1}), {2, 4, 5, 5});
  auto *fc = F_->createFullyConnected(
      "fc", F_->createFlatten("flat", F_->createAdd("add", c, bias), 1), 3);
  save(F_->createBatchedAdd("badd", fc, rand("slice", {3})));
  Function *g = optimizedCopy(F_, "fuse-bias-add");
  EXPECT_EQ(countKind(g, NodeKind::Add), 0u);
  EXPECT_EQ(countKind(g, NodeKind::BatchedAdd), 0u);
  expectSameNumbers(F_, g);
}

TEST_F(PassNumericTest, fuse_activations) {
  std::unique_ptr<Backend> interp = exitOnError(createBackend("Interpreter"));
  auto *x = input("x", {1, 3, 6, 6});
  auto *c = F_->createConv("conv", x, 4, 3, 1, 1);
  auto *r = F_->createClip("clip", c, 0, 0.3f);
  auto *fc = F_->createFullyConnected("fc", r, 7);
  save(F_->createTanh("tanh", fc));
  Function *g = optimizedCopy(F_, "fuse-activations", interp.get());
  EXPECT_EQ(countKind(g, NodeKind::FusedConvolution), 1u);
  EXPECT_EQ(countKind(g, NodeKind::FusedFullyConnected), 1u);
  EXPECT_EQ(countKind(g, NodeKind::Clip), 0u);
  expectSameNumbers(F_, g);
  // Without a backend nothing fuses.
  Function *h = optimizedCopy(F_, "fuse-activations");
  EXPECT_EQ(countKind(h, NodeKind::FusedConvolution), 0u);
}

TEST_F(PassNumericTest, sink_transposes) {
  auto *x = input("x", {2, 4, 5, 3}); // NHWC
  auto *t = F_->createTranspose("toNCHW", x, {0, 3, 1, 2});
  auto *bn = F_->createBatchNormalization("bn", t, positive("s", {3}), rand("b", {3}),
                                          rand("m", {3}), positive("v", {3}), 1e-5f, 1);
  auto *r = F_->createRelu("relu", bn);
  auto *a = F_->createAdd("add", r, F_->createSplat("one", r->getResultType(), 1.0f));
  save(F_->createTranspose("toNHWC", a, {0, 2, 3, 1}));
  Function *g = optimizedCopy(F_, "(sink-transposes,dce)*");
  EXPECT_EQ(countKind(g, NodeKind::Transpose), 0u);
  expectSameNumbers(F_, g);
}

TEST_F(PassNumericTest, merge_reshapes) {
  auto *x = input("x", {2, 3, 4});
  auto *r = F_->createReshape("r1", x, {6, 4});
  r = F_->createReshape("r2", F_->createRelu("relu", r), {24});
  r = F_->createReshape("r3", r, {4, 6});
  save(F_->createReshape("r4", r, {2, 12}));
  Function *g = optimizedCopy(F_, "merge-reshapes");
  EXPECT_EQ(countKind(g, NodeKind::Reshape), 2u);
  expectSameNumbers(F_, g);
}

TEST_F(PassNumericTest, remove_no_ops) {
  auto *x = input("x", {2, 3});
  NodeValue v = F_->createSlice("s", x, {0, 0}, {2, 3});
  v = F_->createTranspose("t", v, {0, 1});
  v = F_->createTile("tile", v, {1, 1});
  v = F_->createPad("pad", v, {0, 0, 0, 0}, 0);
  save(F_->createTanh("tanh", v));
  Function *g = optimizedCopy(F_, "remove-no-ops");
  EXPECT_EQ(g->numNodes(), 2u);
  expectSameNumbers(F_, g);
}

TEST_F(PassNumericTest, flatten_concats) {
  auto *x = input("x", {6, 2});
  auto *y = input("y", {2, 2});
  auto *s1 = F_->createSlice("s1", x, {0, 0}, {2, 2});
  auto *s2 = F_->createSlice("s2", x, {2, 0}, {5, 2});
  auto *inner = F_->createConcat("inner", {s2, y}, 0);
  save(F_->createConcat("outer", {s1, inner, y}, 0));
  Function *g = optimizedCopy(F_, "flatten-concats,dce");
  EXPECT_EQ(countKind(g, NodeKind::Concat), 1u);
  EXPECT_EQ(countKind(g, NodeKind::Slice), 1u);
  expectSameNumbers(F_, g);
}

TEST_F(PassNumericTest, simplify_splats) {
  auto *x = input("x", {3, 4});
  TypeRef ty = m_.uniqueType(ElemKind::Float, {4, 3});
  auto *s = F_->createSplat("s", ty, 0.25f);
  auto *t = F_->createTranspose("t", s, {1, 0});
  auto *e = F_->createSigmoid("sig", F_->createAdd("a", t, t));
  save(F_->createMul("m", x, e));
  Function *g = optimizedCopy(F_, "(simplify-splats,dce)*");
  EXPECT_EQ(countKind(g, NodeKind::Sigmoid), 0u);
  EXPECT_EQ(countKind(g, NodeKind::Splat), 1u);
  expectSameNumbers(F_, g, 1e-6f, 1e-6f);
}

TEST_F(PassNumericTest, merge_pads) {
  auto *x = input("x", {1, 2, 6, 6});
  auto *p = F_->createPad("pad", x, {0, 0, 1, 2, 0, 0, 2, 1}, 0);
  auto *c = F_->createConv("conv", p, 3, 3, 2, 0);
  auto *q = F_->createPad("pad2", c, {0, 0, 1, 1, 0, 0, 1, 1}, 0);
  save(F_->createAvgPool("pool", q, {3, 3}, {1, 1}, {0, 0, 0, 0}, false));
  Function *g = optimizedCopy(F_, "merge-pads");
  EXPECT_EQ(countKind(g, NodeKind::Pad), 0u);
  expectSameNumbers(F_, g);
}

// Dilated 3x3 convolutions on a 5x6 map: dilation 6 with pads 6 reads real input only
// through its centre tap (a 1x1 convolution after the pass); dilation 3 with pads 3 keeps
// its rows and columns (each reaches the map for some output) but splits into bands of
// equal live taps: rows 0-1 taps 1-2, row 2 tap 1, rows 3-4 taps 0-1 (9 of 15 pairs);
// columns 0-2 taps 1-2, 3-5 taps 0-1 (12 of 18): 0.4 of the work, six convolutions of
// 2x2, 1x2, 2x2 by 2 kernels; dilation
// (5, 1) with pads (5, 1) loses its top and bottom rows only.
TEST_F(PassNumericTest, prune_conv_taps) {
  auto *x = input("x", {1, 3, 5, 6});
  auto conv = [&](const std::string &name, dim_t dh, dim_t dw) {
    auto *w = rand(name + ".w", {2, 3, 3, 3});
    auto *b = rand(name + ".b", {2});
    return F_->createConvolution(name, x, w, b, {3, 3}, {1, 1}, {dh, dw, dh, dw}, {dh, dw}, 1);
  };
  save(conv("d6", 6, 6));
  save(conv("d3", 3, 3));
  save(conv("d51", 5, 1));
  Function *g = optimizedCopy(F_, "prune-conv-taps,dce");
  std::vector<std::vector<dim_t>> kernels;
  for (const auto &n : g->getNodes())
    if (auto *c = dyn_cast<ConvolutionNode>(n.get()))
      kernels.push_back(c->getKernels());
  std::sort(kernels.begin(), kernels.end());
  EXPECT_EQ(kernels, (std::vector<std::vector<dim_t>>{
                         {1, 1}, {1, 2}, {1, 2}, {1, 3}, {2, 2}, {2, 2}, {2, 2}, {2, 2}}));
  expectSameNumbers(F_, g, 1e-6f, 1e-5f);
}

// An ASPP-like layer: 64 -> 64 channels, dilation 4 with pads 4 on a 6x6 map. Per axis
// outputs 0-1 read the map through taps 1-2, 2-3 through tap 1, 4-5 through taps 0-1, so
// bands would read 25 tap slices of the filter (2x2 + 2x1 + ... over the 3 x 3 bands);
// the sum over the 9 taps reads each slice once, plus 8 padded partial outputs of 9 KB:
// nine 1x1 convolutions, each over the output block where its tap reads the map (the
// centre tap all of it, with the bias), padded and added.
TEST_F(PassNumericTest, prune_conv_taps_sums_taps_when_that_reads_less) {
  auto *x = input("x", {1, 64, 6, 6});
  auto *w = rand("w", {64, 64, 3, 3});
  auto *b = rand("b", {64});
  save(F_->createConvolution("aspp", x, w, b, {3, 3}, {1, 1}, {4, 4, 4, 4}, {4, 4}, 1));
  Function *g = optimizedCopy(F_, "prune-conv-taps,dce");
  std::vector<std::vector<dim_t>> outs;
  for (const auto &n : g->getNodes())
    if (auto *c = dyn_cast<ConvolutionNode>(n.get())) {
      EXPECT_EQ(c->getKernels(), (std::vector<dim_t>{1, 1}));
      const Dims &d = c->getResultType()->dims;
      outs.push_back({d[2], d[3]});
    }
  std::sort(outs.begin(), outs.end());
  // Tap rows 0 and 2 reach outputs 4-5 and 0-1 (2 rows), tap row 1 all 6; likewise columns.
  EXPECT_EQ(outs, (std::vector<std::vector<dim_t>>{
                      {2, 2}, {2, 2}, {2, 2}, {2, 2}, {2, 6}, {2, 6}, {6, 2}, {6, 2}, {6, 6}}));
  EXPECT_EQ(countKind(g, NodeKind::Pad), 8u);
  EXPECT_EQ(countKind(g, NodeKind::Add), 8u);
  EXPECT_EQ(countKind(g, NodeKind::Concat), 0u);
  expectSameNumbers(F_, g, 1e-5f, 1e-5f);
}

TEST_F(PassNumericTest, simplify_arithmetic) {
  auto *x = input("x", {5});
  TypeRef ty = x->getType();
  auto *one = F_->createSplat("one", ty, 1);
  auto *zero = F_->createSplat("zero", ty, 0);
  NodeValue v = F_->createMul("m", x, one);
  v = F_->createAdd("a", zero, v);
  v = F_->createDiv("d", v, one);
  v = F_->createExp("e", v);
  save(F_->createAdd("r", v, F_->createSub("xx", x, x)));
  Function *g = optimizedCopy(F_, "simplify-arithmetic,dce");
  EXPECT_EQ(countKind(g, NodeKind::Mul) + countKind(g, NodeKind::Div) + countKind(g, NodeKind::Sub),
            0u);
  expectSameNumbers(F_, g);
}

TEST_F(PassNumericTest, drop_identities) {
  auto *x = input("x", {5});
  NodeValue v = F_->createConvertTo("cv", x->getType(), x);
  v = F_->createRelu("r2", F_->createRelu("r1", v));
  v = F_->createNeg("n2", F_->createNeg("n1", v));
  save(v);
  Function *g = optimizedCopy(F_, "drop-identities,dce");
  EXPECT_EQ(g->numNodes(), 2u); // Relu, Save
  expectSameNumbers(F_, g);
}

TEST_F(PassNumericTest, lower) {
  auto *x = input("x", {2, 4, 3, 3});
  auto *c = F_->createConv("gconv", x, 4, 3, 1, 1, /*group=*/2);
  auto *bn = F_->createBatchNormalization("bn", c, positive("s", {4}), rand("b", {4}),
                                          rand("m", {4}), positive("v", {4}), 1e-5f, 1);
  auto *g1 = F_->createGelu("gelu", bn, false);
  auto *hs = F_->createHardSwish("hs", g1);
  auto *fc = F_->createFullyConnected("fc", hs, 6);
  auto *ln = F_->createLayerNormalization("ln", fc, positive("ls", {6}), rand("lb", {6}), 1, 1e-5f);
  save(F_->createLogSoftMax("lsm", ln, 1));
  Function *g = optimizedCopy(F_, "lower");
  for (NodeKind k :
       {NodeKind::BatchNormalization, NodeKind::Gelu, NodeKind::HardSwish, NodeKind::FullyConnected,
        NodeKind::LayerNormalization, NodeKind::LogSoftMax, NodeKind::Broadcast})
    EXPECT_EQ(countKind(g, k), 0u) << getNodeKindName(k);
  EXPECT_EQ(countKind(g, NodeKind::Convolution), 2u); // one per group
  expectSameNumbers(F_, g, 1e-5f, 1e-4f);
}

/// Every pass of Passes.def has a test above: a check that the list did not grow unseen.
TEST(PassList, IsTheOneTested) {
  std::vector<std::string> tested = {"dce",
                                     "cse",
                                     "constant-fold",
                                     "fold-qdq",
                                     "fold-batch-norm",
                                     "fold-layer-norm",
                                     "fuse-bias-add",
                                     "fuse-activations",
                                     "sink-transposes",
                                     "merge-reshapes",
                                     "remove-no-ops",
                                     "flatten-concats",
                                     "simplify-splats",
                                     "merge-pads",
                                     "prune-conv-taps",
                                     "simplify-arithmetic",
                                     "drop-identities",
                                     "lower"};
  EXPECT_EQ(getGraphPassNames(), tested);
}

} // namespace

} // namespace kiln::test
