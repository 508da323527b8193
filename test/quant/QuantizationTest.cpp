// Profiles, schemas, calibration and the quantization transform, against hand-computed
// values (kiln/Quantization).

#include "kiln/Quantization/Quantize.h"
#include "kiln/kiln.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace kiln;

namespace {

unsigned countKind(const Function *f, NodeKind k) {
  unsigned n = 0;
  for (const auto &node : f->getNodes())
    n += node->getKind() == k;
  return n;
}

} // namespace

// ------------------------------------------------------------------ histogram

// 4 bins. {0,1,2,3,4} over [0,4] (width 1; 4 lands in the last bin): {1,1,1,2}. Adding -4
// doubles downwards to [-4,4] (width 2): old bins pair into the upper half {2,3}, -4 goes
// to bin 0: {1,0,2,3}. Adding 12 doubles upwards to [-4,12] (width 4): {1+0, 2+3} in the
// lower half, 12 in the last bin: {1,5,0,1}.
TEST(Histogram, GrowsByDoublingAndMergesPairs) {
  Histogram h(4);
  float a[] = {0, 1, 2, 3, 4};
  h.add(a, 5);
  EXPECT_EQ(h.lo(), 0);
  EXPECT_EQ(h.hi(), 4);
  EXPECT_EQ(h.counts(), (std::vector<uint64_t>{1, 1, 1, 2}));
  float b[] = {-4};
  h.add(b, 1);
  EXPECT_EQ(h.lo(), -4);
  EXPECT_EQ(h.hi(), 4);
  EXPECT_EQ(h.counts(), (std::vector<uint64_t>{1, 0, 2, 3}));
  float c[] = {12, NAN};
  h.add(c, 2);
  EXPECT_EQ(h.lo(), -4);
  EXPECT_EQ(h.hi(), 12);
  EXPECT_EQ(h.counts(), (std::vector<uint64_t>{1, 5, 0, 1}));
  EXPECT_EQ(h.count(), 7u); // the NaN is not counted
  EXPECT_EQ(h.min(), -4);
  EXPECT_EQ(h.max(), 12);
}

// x = [-2, 0.5, 3, 1] through Relu: x's profile is min -2, max 3; the Relu's 0 and 3.
// Second run x = [5, -1, 0, 0]: x's max becomes 5, min stays -2; the Relu's max 5.
TEST(Profiler, RecordsMinMaxOverRuns) {
  ExecutionEngine ee("Interpreter");
  Module &m = ee.getModule();
  Function *f = m.createFunction("main");
  Placeholder *x = m.createPlaceholder(ElemKind::Float, {4}, "x");
  auto *r = f->createRelu("relu", x);
  auto *s = f->createSave("y", r);
  Profiler prof(8);
  EXPECT_EQ(prof.instrument(f), 2u);
  ASSERT_FALSE(ee.compile());
  PlaceholderBindings b;
  b.allocate(m.getPlaceholders());
  prof.allocate(b);
  for (auto vals : {std::vector<float>{-2, 0.5, 3, 1}, std::vector<float>{5, -1, 0, 0}}) {
    auto h = b.get(x)->getHandle<float>();
    for (size_t i = 0; i < 4; i++)
      h.raw(i) = vals[i];
    ASSERT_FALSE(ee.run(b));
    ASSERT_FALSE(prof.record(b));
  }
  (void)s;
  const ValueProfile *px = prof.profile().find("x");
  const ValueProfile *pr = prof.profile().find("relu");
  ASSERT_TRUE(px && pr);
  EXPECT_EQ(px->hist.min(), -2);
  EXPECT_EQ(px->hist.max(), 5);
  EXPECT_EQ(px->hist.count(), 8u);
  EXPECT_EQ(pr->hist.min(), 0);
  EXPECT_EQ(pr->hist.max(), 5);
  EXPECT_EQ(pr->kind, "Relu");
  // The JSON form reads back to the same numbers.
  Expected<QuantizationProfile> back = QuantizationProfile::fromJSON(prof.profile().toJSON());
  ASSERT_TRUE(bool(back)) << back.getError().toString();
  ASSERT_TRUE(back->find("relu"));
  EXPECT_EQ(back->find("relu")->hist.max(), 5);
  EXPECT_EQ(back->find("x")->hist.counts(), px->hist.counts());
}

TEST(Profile, HandEditedJSONAndErrors) {
  Expected<QuantizationProfile> p = QuantizationProfile::fromJSON(
      "{\"kiln_quantization_profile\": 1, \"values\": [\n"
      "  {\"name\": \"a\", \"min\": -1, \"max\": 2.5}]}");
  ASSERT_TRUE(bool(p)) << p.getError().toString();
  EXPECT_EQ(p->find("a")->hist.min(), -1);
  EXPECT_EQ(p->find("a")->hist.max(), 2.5);
  auto bad = QuantizationProfile::fromJSON(
      "{\"kiln_quantization_profile\": 1, \"values\": [\n  {\"name\": \"a\", \"min\": 3, "
      "\"max\": 2}]}");
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(bad.getError().message().find("'a'"), std::string::npos);
  auto broken = QuantizationProfile::fromJSON("{\"kiln_quantization_profile\": 1,\n \"values\": [");
  ASSERT_FALSE(bool(broken));
  EXPECT_NE(broken.getError().message().find("line 2"), std::string::npos);
}

// ------------------------------------------------------------------ schemas

TEST(Schema, ScalesAndOffsetsByHand) {
  // Asymmetric [-1, 3]: scale 4/255; offset round(-128 + 1/(4/255)) = round(-64.25) = -64.
  QuantParams p = chooseQuantParams(-1, 3, QuantSchema::Asymmetric);
  EXPECT_FLOAT_EQ(p.scale, 4.0f / 255);
  EXPECT_EQ(p.offset, -64);
  // Asymmetric [1, 2] widens to [0, 2]: scale 2/255, offset -128.
  p = chooseQuantParams(1, 2, QuantSchema::Asymmetric);
  EXPECT_FLOAT_EQ(p.scale, 2.0f / 255);
  EXPECT_EQ(p.offset, -128);
  // Symmetric [-1, 3]: 3/127, offset 0.
  p = chooseQuantParams(-1, 3, QuantSchema::Symmetric);
  EXPECT_FLOAT_EQ(p.scale, 3.0f / 127);
  EXPECT_EQ(p.offset, 0);
  // Symmetric with uint8: [0.5, 2.55] is non-negative: 2.55/255 = 0.01, offset -128;
  // [-1, 3] is not: as Symmetric.
  p = chooseQuantParams(0.5f, 2.55f, QuantSchema::SymmetricWithUInt8);
  EXPECT_FLOAT_EQ(p.scale, 0.01f);
  EXPECT_EQ(p.offset, -128);
  p = chooseQuantParams(-1, 3, QuantSchema::SymmetricWithUInt8);
  EXPECT_FLOAT_EQ(p.scale, 3.0f / 127);
  EXPECT_EQ(p.offset, 0);
  // Power of two: 3/127 = 0.0236 -> 2^ceil(log2 0.0236) = 2^-5.
  p = chooseQuantParams(-1, 3, QuantSchema::SymmetricWithPower2Scale);
  EXPECT_FLOAT_EQ(p.scale, 0.03125f);
  EXPECT_EQ(p.offset, 0);
  // Always 0: [0, 1e-3].
  p = chooseQuantParams(0, 0, QuantSchema::Asymmetric);
  EXPECT_FLOAT_EQ(p.scale, 1e-3f / 255);
  EXPECT_EQ(p.offset, -128);
}

TEST(Schema, ParseNames) {
  for (auto s : {"asymmetric", "symmetric", "symmetric-uint8", "power2"})
    EXPECT_EQ(quantSchemaName(*parseQuantSchema(s)), std::string(s));
  EXPECT_FALSE(bool(parseQuantSchema("int4")));
  for (auto s : {"minmax", "percentile", "mse"})
    EXPECT_EQ(calibrationName(*parseCalibration(s)), std::string(s));
}

// ------------------------------------------------------------------ calibration

// 100 bins of width 1 over [0, 100], 10 values each (1000 in all). The 98th percentile
// cuts 1000 * 2 / 200 = 10 values off each end: exactly bin 0 and bin 99, so [1, 99].
TEST(Calibration, PercentileCutsWholeBinsAtEachEnd) {
  Histogram h = Histogram::fromParts(0, 100, 0, 100, std::vector<uint64_t>(100, 10));
  auto r = calibrateRange(h, Calibration::Percentile, QuantSchema::Asymmetric, 98.0f);
  EXPECT_FLOAT_EQ(r.first, 1);
  EXPECT_FLOAT_EQ(r.second, 99);
  r = calibrateRange(h, Calibration::MinMax, QuantSchema::Asymmetric);
  EXPECT_FLOAT_EQ(r.first, 0);
  EXPECT_FLOAT_EQ(r.second, 100);
}

// 200000 values uniform on [-1, 1] and one at 2, symmetric schema. Keeping the outlier
// (k = 1: a = 2) costs rounding (2/127)^2/12 = 2.07e-5 per value, 4.1 in all. Clipping it
// (k = 1/2: range [-0.5, 1], a = 1) costs (1/127)^2/12 * 200000 = 1.03 plus (2 - 1)^2 = 1:
// 2.03. Below k = 1/2 the uniform part is clipped at a rate of 200000/2 values per unit,
// which costs more than the rounding saves. So MSE picks a range with a near 1; min/max 2.
TEST(Calibration, MSEClipsALoneOutlier) {
  Histogram h(2048);
  std::vector<float> v;
  for (int i = 0; i < 200000; i++)
    v.push_back(-1.0f + 2.0f * (float(i) + 0.5f) / 200000.0f);
  v.push_back(2.0f);
  h.add(v.data(), v.size());
  auto r = calibrateRange(h, Calibration::MSE, QuantSchema::Symmetric);
  float a = std::max(-r.first, r.second);
  EXPECT_GT(a, 0.95f);
  EXPECT_LT(a, 1.06f);
  auto mm = calibrateRange(h, Calibration::MinMax, QuantSchema::Symmetric);
  EXPECT_EQ(mm.second, 2.0f);
}

// ------------------------------------------------------------------ transform

namespace {

/// x[2,4] -> FC(4->3) -> Relu -> FC(3->5) -> SoftMax -> Save, random weights.
struct SmallMLP {
  ExecutionEngine ee{"Interpreter"};
  Function *f;
  Placeholder *x;
  SaveNode *save;
  SmallMLP() {
    Module &m = ee.getModule();
    f = m.createFunction("main");
    x = m.createPlaceholder(ElemKind::Float, {2, 4}, "x");
    auto *fc1 = f->createFullyConnected("fc1", x, 3, 1);
    auto *relu = f->createRelu("relu", fc1);
    auto *fc2 = f->createFullyConnected("fc2", relu, 5, 2);
    auto *sm = f->createSoftMax("sm", fc2, 1);
    save = f->createSave("y", sm);
  }
};

} // namespace

TEST(Transform, QuantizeAndDequantizeOnlyAtRegionEdges) {
  SmallMLP n;
  // Profile: instrument the function itself and run it; then rebuild and quantize.
  Profiler prof(64);
  ASSERT_FALSE(prepareForQuantization(n.f));
  prof.instrument(n.f);
  ASSERT_FALSE(n.ee.compile());
  PlaceholderBindings b;
  b.allocate(n.ee.getModule().getPlaceholders());
  prof.allocate(b);
  PseudoRNG rng(7);
  for (int i = 0; i < 4; i++) {
    b.get(n.x)->randomize(-1, 1, rng);
    ASSERT_FALSE(n.ee.run(b));
    ASSERT_FALSE(prof.record(b));
  }
  for (const char *name : {"x", "fc1", "relu", "fc2", "sm"})
    EXPECT_TRUE(prof.profile().find(name)) << name;

  SmallMLP q;
  ASSERT_FALSE(prepareForQuantization(q.f));
  Expected<QuantizationReport> r = quantizeFunction(q.f, prof.profile());
  ASSERT_TRUE(bool(r)) << r.getError().toString();
  EXPECT_EQ(r->quantizedNodes, 3u); // fc1, relu, fc2 (SoftMax has no int8 form)
  EXPECT_EQ(countKind(q.f, NodeKind::Quantize), 1u);
  EXPECT_EQ(countKind(q.f, NodeKind::Dequantize), 1u);
  auto *fc1 = q.f->getNodeByName("fc1");
  auto *fc2 = q.f->getNodeByName("fc2");
  ASSERT_TRUE(fc1 && fc2);
  EXPECT_EQ(fc1->getType(0)->kind, ElemKind::Int8Q);
  EXPECT_EQ(fc1->getNthInput(0).node->getKind(), NodeKind::Quantize);
  EXPECT_EQ(fc1->getNthInput(2).getElementType(), ElemKind::Int32Q);
  EXPECT_FLOAT_EQ(fc1->getNthInput(2).getType()->scale,
                  fc1->getNthInput(0).getType()->scale * fc1->getNthInput(1).getType()->scale);
  // fc1's only user is the Relu: fc1 outputs on the Relu's grid. That grid (asymmetric,
  // min 0) has offset -128, so the Relu maps it to itself and is dropped: fc2 reads fc1,
  // with no Dequantize/Quantize between them.
  EXPECT_EQ(r->foldedIntoRelu, 1u);
  EXPECT_EQ(r->identityRelus, 1u);
  EXPECT_EQ(q.f->getNodeByName("relu"), nullptr);
  EXPECT_EQ(fc2->getNthInput(0).node, fc1);
  EXPECT_EQ(fc1->getType(0)->offset, -128);
  EXPECT_NE(r->toString().find("1 Relus dropped as identities"), std::string::npos)
      << r->toString();

  // Symmetric: the Relu's grid has offset 0 (negative values on it), so it stays, fc1 on
  // its grid.
  SmallMLP s;
  ASSERT_FALSE(prepareForQuantization(s.f));
  QuantizationOptions so;
  so.schema = QuantSchema::Symmetric;
  r = quantizeFunction(s.f, prof.profile(), so);
  ASSERT_TRUE(bool(r)) << r.getError().toString();
  EXPECT_EQ(r->identityRelus, 0u);
  ASSERT_NE(s.f->getNodeByName("relu"), nullptr);
  EXPECT_EQ(s.f->getNodeByName("fc2")->getNthInput(0).node->getKind(), NodeKind::Relu);
  EXPECT_EQ(s.f->getNodeByName("fc1")->getType(0), s.f->getNodeByName("relu")->getType(0));
  auto *sm = q.f->getNodeByName("sm");
  EXPECT_EQ(sm->getNthInput(0).node->getKind(), NodeKind::Dequantize);

  // Keeping Relu in float splits the region in two.
  SmallMLP k;
  ASSERT_FALSE(prepareForQuantization(k.f));
  QuantizationOptions o;
  o.keepFloat = {"Relu"};
  r = quantizeFunction(k.f, prof.profile(), o);
  ASSERT_TRUE(bool(r)) << r.getError().toString();
  EXPECT_EQ(countKind(k.f, NodeKind::Quantize), 2u);
  EXPECT_EQ(countKind(k.f, NodeKind::Dequantize), 2u);
  EXPECT_EQ(k.f->getNodeByName("relu")->getType(0)->kind, ElemKind::Float);
  ASSERT_EQ(r->keptFloat.size(), 1u);
  EXPECT_EQ(r->keptFloat[0].second, "keep-float");

  // Without a profile entry for x nothing can enter a region.
  SmallMLP e;
  ASSERT_FALSE(prepareForQuantization(e.f));
  r = quantizeFunction(e.f, QuantizationProfile());
  ASSERT_TRUE(bool(r));
  EXPECT_EQ(r->quantizedNodes, 0u);
  EXPECT_EQ(countKind(e.f, NodeKind::Quantize), 0u);
}

TEST(Transform, ConcatRescalesFoldIntoProducersAndClipBecomesRelu) {
  ExecutionEngine ee("Interpreter");
  Module &m = ee.getModule();
  Function *f = m.createFunction("main");
  Placeholder *x = m.createPlaceholder(ElemKind::Float, {1, 2, 3, 3}, "x");
  auto *c1 = f->createConv("c1", x, 2, 1, 1, 0, 1, 1, 1);
  auto *c2 = f->createConv("c2", x, 3, 1, 1, 0, 1, 1, 2);
  auto *cl = f->createClip("clip", c1, 0.0f, 6.0f);
  auto *cat = f->createConcat("cat", {cl, c2}, 1);
  f->createSave("y", cat);
  QuantizationProfile p;
  auto set = [&](const char *name, float lo, float hi) {
    ValueProfile &v = p.getOrAdd(name, "", 2);
    v.hist = Histogram::fromParts(lo, hi, lo, hi, {0, 0});
  };
  set("x", -1, 1);
  set("c1", -4, 8);
  set("c2", -3, 3);
  set("cat", -3, 6);
  ASSERT_FALSE(prepareForQuantization(f));
  Expected<QuantizationReport> r = quantizeFunction(f, p);
  ASSERT_TRUE(bool(r)) << r.getError().toString();
  // c2 feeds only the Concat: its output takes the Concat's type, no rescale left. The
  // Clip became a Relu with the grid [0, 6] (asymmetric: scale 6/255, offset -128), whose
  // type differs from the Concat's, and a Relu's grid is fixed: one rescale stays. c1
  // took the Relu's grid, on which the Relu is the identity: it is dropped and the rescale
  // reads c1 (which saturates at 0 and 6 itself).
  EXPECT_EQ(r->foldedRescales, 1u);
  EXPECT_EQ(r->rescaleNodes, 1u);
  EXPECT_EQ(r->identityRelus, 1u);
  EXPECT_EQ(countKind(f, NodeKind::Clip), 0u);
  EXPECT_EQ(countKind(f, NodeKind::Relu), 0u);
  EXPECT_EQ(f->getNodeByName("c1")->getType(0)->offset, -128);
  EXPECT_FLOAT_EQ(f->getNodeByName("c1")->getType(0)->scale, 6.0f / 255.0f);
  EXPECT_EQ(countKind(f, NodeKind::RescaleQuantized), 1u);
  Node *c2q = f->getNodeByName("c2");
  EXPECT_EQ(c2q->getType(0)->scale, f->getNodeByName("cat")->getType(0)->scale);
  EXPECT_EQ(c2q->getType(0)->offset, f->getNodeByName("cat")->getType(0)->offset);
  EXPECT_EQ(countKind(f, NodeKind::Quantize), 1u);
  EXPECT_EQ(countKind(f, NodeKind::Dequantize), 1u);
  EXPECT_EQ(r->dequantizeNodes, 1u); // the replaced Clip is no float user of c1
  (void)x;

  // Power-of-two scales cannot end a grid exactly at 6: the Clip stays float.
  Function *g = m.createFunction("g");
  auto *d1 = g->createConv("d1", x, 2, 1, 1, 0, 1, 1, 1);
  g->createSave("z", g->createClip("clip6", d1, 0.0f, 6.0f));
  set("d1", -4, 8);
  QuantizationOptions o;
  o.schema = QuantSchema::SymmetricWithPower2Scale;
  r = quantizeFunction(g, p, o);
  ASSERT_TRUE(bool(r));
  EXPECT_EQ(countKind(g, NodeKind::Clip), 1u);
}

// End to end: x[8,16] -> FC(16->32) -> Relu -> FC(32->10), asymmetric, profiled on the same
// inputs it is tested on (so nothing saturates). Worst-case error, layer by layer, with
// s_x, s_w, s_b, s_y the scales of the input, weights, bias and output of a layer:
//   x rounds by <= s_x/2 and W by <= s_w/2, so |dot(x', W') - dot(x, W)| <= sum_k
//   (e_k |W_kj| + |x_k| s_w/2 + e_k s_w/2), e_k the error of input k; the bias rounds by
//   <= s_b/2 and the output by <= s_y/2. The Relu requantizes (<= s_r/2) and does not
//   grow errors. The test computes this bound from the quantized graph's scales and the
//   float values, and checks every output element against it.
TEST(Transform, SmallNetworkIsCloseToFloat) {
  ExecutionEngine ee("Interpreter");
  Module &m = ee.getModule();
  auto build = [&](const std::string &name, Placeholder *x) {
    Function *f = m.createFunction(name);
    auto *fc1 = f->createFullyConnected("fc1", x, 32, 11);
    auto *relu = f->createRelu("relu", fc1);
    auto *fc2 = f->createFullyConnected("fc2", relu, 10, 12);
    return std::make_pair(f, f->createSave(name + "_y", fc2));
  };
  Placeholder *x = m.createPlaceholder(ElemKind::Float, {8, 16}, "x");
  auto [ff, fsave] = build("float", x);
  // Same random weights: the builders are seeded.
  auto [qf, qsave] = build("quant", x);
  // Profile the float function (a clone, so the float one stays unprofiled).
  Function *pf = ff->clone("prof");
  ASSERT_FALSE(prepareForQuantization(pf));
  Profiler prof(256);
  prof.instrument(pf);
  ASSERT_FALSE(ee.compile());
  PlaceholderBindings b;
  b.allocate(m.getPlaceholders());
  prof.allocate(b);
  PseudoRNG rng(3);
  b.get(x)->randomize(-1, 1, rng);
  ASSERT_FALSE(ee.run(b, "prof"));
  ASSERT_FALSE(prof.record(b));
  ASSERT_FALSE(prepareForQuantization(qf));
  Expected<QuantizationReport> r = quantizeFunction(qf, prof.profile());
  ASSERT_TRUE(bool(r)) << r.getError().toString();
  ASSERT_EQ(r->quantizedNodes, 3u);
  ASSERT_FALSE(ee.compile());
  b.allocate(m.getPlaceholders());
  ASSERT_FALSE(ee.run(b, "float"));
  ASSERT_FALSE(ee.run(b, "quant"));

  // Float forward pass in double and the bound, from the weights (float constants of
  // the float function) and the quantized graph's scales.
  auto *fc1 = cast<FullyConnectedNode>(ff->getNodeByName("fc1"));
  auto *fc2 = cast<FullyConnectedNode>(ff->getNodeByName("fc2"));
  auto *q1 = qf->getNodeByName("fc1");
  // The Relu is dropped (fc1 outputs on its grid, offset -128: the identity); a kept one
  // would add its rounding s_r/2.
  EXPECT_EQ(r->identityRelus, 1u);
  auto *qr = qf->getNodeByName("relu");
  auto *q2 = qf->getNodeByName("fc2");
  auto W1 = cast<Constant>(fc1->getWeights().node)->getPayload().getHandle<float>();
  auto B1 = cast<Constant>(fc1->getBias().node)->getPayload().getHandle<float>();
  auto W2 = cast<Constant>(fc2->getWeights().node)->getPayload().getHandle<float>();
  auto B2 = cast<Constant>(fc2->getBias().node)->getPayload().getHandle<float>();
  const double sx = q1->getNthInput(0).getType()->scale, sw1 = q1->getNthInput(1).getType()->scale,
               sb1 = q1->getNthInput(2).getType()->scale, sy1 = q1->getType(0)->scale,
               sr = qr ? qr->getType(0)->scale : 0.0, sw2 = q2->getNthInput(1).getType()->scale,
               sb2 = q2->getNthInput(2).getType()->scale, sy2 = q2->getType(0)->scale;
  auto X = b.get(x)->getHandle<float>();
  auto Yf = b.get(fsave->getPlaceholder())->getHandle<float>();
  auto Yq = b.get(qsave->getPlaceholder())->getHandle<float>();
  double worst = 0;
  for (dim_t n = 0; n < 8; n++) {
    std::vector<double> h(32), e1(32);
    for (dim_t j = 0; j < 32; j++) {
      double acc = B1.at({j}), err = 0;
      for (dim_t k = 0; k < 16; k++) {
        double xv = X.at({n, k}), w = W1.at({k, j});
        acc += xv * w;
        err += sx / 2 * std::fabs(w) + std::fabs(xv) * sw1 / 2 + sx / 2 * sw1 / 2;
      }
      h[j] = std::max(acc, 0.0);
      e1[j] = err + sb1 / 2 + sy1 / 2 + sr / 2;
    }
    for (dim_t j = 0; j < 10; j++) {
      double acc = B2.at({j}), err = 0;
      for (dim_t k = 0; k < 32; k++) {
        double w = W2.at({k, j});
        acc += h[k] * w;
        err += e1[k] * std::fabs(w) + h[k] * sw2 / 2 + e1[k] * sw2 / 2;
      }
      double bound = err + sb2 / 2 + sy2 / 2;
      EXPECT_NEAR(Yf.at({n, j}), acc, 1e-4);
      EXPECT_LE(std::fabs(Yq.at({n, j}) - Yf.at({n, j})), bound + 1e-5)
          << "n " << n << " j " << j;
      worst = std::max(worst, std::fabs(Yq.at({n, j}) - Yf.at({n, j})) / bound);
    }
  }
  // The bound is worst-case; typical errors are well inside it.
  EXPECT_LT(worst, 1.0);
}

// Attention's products: a BatchMatMul of two activations becomes int8 (Rule::Free: both
// operands quantized from their profiles, its own output grid), and its result is within
// the rounding bound of the operands' and the output's grids: per output
// sum_k (sa/2 |b| + |a| sb/2 + sa/2 sb/2) + sy/2.
TEST(Transform, BatchMatMulOfActivationsIsQuantized) {
  ExecutionEngine ee("Interpreter");
  Module &m = ee.getModule();
  Placeholder *a = m.createPlaceholder(ElemKind::Float, {2, 3, 4}, "a");
  Placeholder *bp = m.createPlaceholder(ElemKind::Float, {2, 4, 5}, "b");
  auto build = [&](const std::string &name) {
    Function *f = m.createFunction(name);
    return std::make_pair(f, f->createSave(name + "_y", f->createBatchMatMul("bmm", a, bp)));
  };
  auto [ff, fsave] = build("float");
  auto [qf, qsave] = build("quant");
  Function *pf = ff->clone("prof");
  ASSERT_FALSE(prepareForQuantization(pf));
  Profiler prof(256);
  prof.instrument(pf);
  ASSERT_FALSE(ee.compile());
  PlaceholderBindings b;
  b.allocate(m.getPlaceholders());
  prof.allocate(b);
  PseudoRNG rng(5);
  b.get(a)->randomize(-1, 1, rng);
  b.get(bp)->randomize(-2, 2, rng);
  ASSERT_FALSE(ee.run(b, "prof"));
  ASSERT_FALSE(prof.record(b));
  ASSERT_FALSE(prepareForQuantization(qf));
  Expected<QuantizationReport> r = quantizeFunction(qf, prof.profile());
  ASSERT_TRUE(bool(r)) << r.getError().toString();
  EXPECT_EQ(r->quantizedNodes, 1u);
  auto *q = qf->getNodeByName("bmm");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->getType(0)->kind, ElemKind::Int8Q);
  EXPECT_EQ(countKind(qf, NodeKind::Quantize), 2u);
  EXPECT_EQ(countKind(qf, NodeKind::Dequantize), 1u);
  ASSERT_FALSE(ee.compile());
  b.allocate(m.getPlaceholders());
  ASSERT_FALSE(ee.run(b, "float"));
  ASSERT_FALSE(ee.run(b, "quant"));
  const double sa = q->getNthInput(0).getType()->scale, sb = q->getNthInput(1).getType()->scale,
               sy = q->getType(0)->scale;
  auto A = b.get(a)->getHandle<float>(), B = b.get(bp)->getHandle<float>();
  auto Yf = b.get(fsave->getPlaceholder())->getHandle<float>();
  auto Yq = b.get(qsave->getPlaceholder())->getHandle<float>();
  for (dim_t t = 0; t < 2; t++)
    for (dim_t i = 0; i < 3; i++)
      for (dim_t j = 0; j < 5; j++) {
        double bound = sy / 2;
        for (dim_t k = 0; k < 4; k++)
          bound += sa / 2 * std::fabs(B.at({t, k, j})) + std::fabs(A.at({t, i, k})) * sb / 2 +
                   sa / 2 * sb / 2;
        EXPECT_LE(std::fabs(Yq.at({t, i, j}) - Yf.at({t, i, j})), bound + 1e-5)
            << t << " " << i << " " << j;
      }
}

// Per-channel weights, symmetric: a 1x1 convolution with two output channels of very
// different magnitudes. Channel 0's filter {1, -0.25} gets scale 1/127, channel 1's
// {0.02, 0.005} 0.02/127 (per-tensor both would get 1/127, and channel 1 would round to
// {3, 1}: 0.0236 and 0.0079, errors of 18% and 57%). Bias 0.5 of channel 0 is
// round(0.5 / (inScale / 127)) accumulator units, inScale = 2/127 (x in [-2, 2]).
TEST(Transform, PerChannelWeightsGetTheirOwnScales) {
  ExecutionEngine ee("Interpreter");
  Module &m = ee.getModule();
  Function *f = m.createFunction("main");
  Placeholder *x = m.createPlaceholder(ElemKind::Float, {1, 2, 1, 1}, "x");
  Tensor w(ElemKind::Float, {2, 2, 1, 1}, {1, -0.25, 0.02, 0.005});
  Tensor bias(ElemKind::Float, {2}, {0.5, 0});
  auto *conv = f->createConvolution("conv", x, m.createConstant("w", std::move(w)),
                                    m.createConstant("b", std::move(bias)), {1, 1}, {1, 1},
                                    {0, 0, 0, 0}, {1, 1}, 1);
  auto *save = f->createSave("y", conv);
  QuantizationProfile p;
  auto set = [&](const char *name, float lo, float hi) {
    p.getOrAdd(name, "", 2).hist = Histogram::fromParts(lo, hi, lo, hi, {0, 0});
  };
  set("x", -2, 2);
  set("conv", -3, 3);
  QuantizationOptions o;
  o.schema = QuantSchema::Symmetric;
  o.perChannel = true;
  Expected<QuantizationReport> r = quantizeFunction(f, p, o);
  ASSERT_TRUE(bool(r)) << r.getError().toString();
  EXPECT_EQ(countKind(f, NodeKind::Convolution), 0u);
  ASSERT_EQ(countKind(f, NodeKind::ChannelwiseQuantizedConvolution), 1u);
  Node *cw = nullptr;
  for (const auto &n : f->getNodes())
    if (n->getKind() == NodeKind::ChannelwiseQuantizedConvolution)
      cw = n.get();
  auto scales = cast<Constant>(cw->getNthInput(2).node)->getPayload().getHandle<float>();
  EXPECT_FLOAT_EQ(scales.raw(0), 1.0f / 127);
  EXPECT_FLOAT_EQ(scales.raw(1), 0.02f / 127);
  auto fw = cast<Constant>(cw->getNthInput(1).node)->getPayload().getHandle<int8_t>();
  EXPECT_EQ(fw.raw(0), 127);
  EXPECT_EQ(fw.raw(1), -32); // -0.25 * 127 = -31.75
  EXPECT_EQ(fw.raw(2), 127);
  EXPECT_EQ(fw.raw(3), 32);  // 0.005 / (0.02/127) = 31.75
  auto qb = cast<Constant>(cw->getNthInput(4).node)->getPayload().getHandle<int32_t>();
  const double acc0 = double(2.0f / 127) * double(1.0f / 127);
  EXPECT_EQ(qb.raw(0), int32_t(std::round(0.5 / acc0)));
  EXPECT_EQ(qb.raw(1), 0);
  // Numbers: x = {1, -1}: channel 0 = 1 + 0.25 + 0.5 = 1.75, channel 1 = 0.02 - 0.005.
  ASSERT_FALSE(ee.compile());
  PlaceholderBindings b;
  b.allocate(m.getPlaceholders());
  b.get(x)->getHandle<float>().raw(0) = 1;
  b.get(x)->getHandle<float>().raw(1) = -1;
  ASSERT_FALSE(ee.run(b));
  auto y = b.get(save->getPlaceholder())->getHandle<float>();
  // Output grid 3/127 = 0.0236: within half a step (plus the input and weight rounding,
  // well below it here: x is on its grid, channel 1's weights to 0.8%).
  EXPECT_NEAR(y.raw(0), 1.75, 3.0 / 127);
  EXPECT_NEAR(y.raw(1), 0.015, 3.0 / 127 / 2 + 1e-3);
}

// weightSchema: asymmetric activations with symmetric per-channel weights (offset 0, scale
// max |w| / 127), where the activations' schema gives weight offsets that are not 0. Unset,
// weightSchema defaults to symmetric for per-channel weights (an embedder asking for
// per-channel weights gets offset-0 ones, as the tools' --per-channel does).
TEST(Transform, PerChannelSymmetricWeightsWithAsymmetricActivations) {
  for (int mode : {0, 1, 2}) { // weightSchema Asymmetric, Symmetric, unset
    const bool symmetricWeights = mode != 0;
    SCOPED_TRACE(mode == 0 ? "asymmetric weights" : mode == 1 ? "symmetric weights" : "unset");
    ExecutionEngine ee("Interpreter");
    Module &m = ee.getModule();
    Function *f = m.createFunction("main");
    Placeholder *x = m.createPlaceholder(ElemKind::Float, {1, 2, 1, 1}, "x");
    Tensor w(ElemKind::Float, {2, 2, 1, 1}, {1, -0.25, 0.01, -0.04});
    Tensor bias(ElemKind::Float, {2}, {0.5, 0});
    auto *conv = f->createConvolution("conv", x, m.createConstant("w", std::move(w)),
                                      m.createConstant("b", std::move(bias)), {1, 1}, {1, 1},
                                      {0, 0, 0, 0}, {1, 1}, 1);
    f->createSave("y", conv);
    QuantizationProfile p;
    auto set = [&](const char *name, float lo, float hi) {
      p.getOrAdd(name, "", 2).hist = Histogram::fromParts(lo, hi, lo, hi, {0, 0});
    };
    set("x", -1, 3);
    set("conv", -1, 3);
    QuantizationOptions o;
    o.schema = QuantSchema::Asymmetric;
    o.perChannel = true;
    if (mode < 2)
      o.weightSchema = mode == 0 ? QuantSchema::Asymmetric : QuantSchema::Symmetric;
    Expected<QuantizationReport> r = quantizeFunction(f, p, o);
    ASSERT_TRUE(bool(r)) << r.getError().toString();
    Node *cw = nullptr;
    for (const auto &n : f->getNodes())
      if (n->getKind() == NodeKind::ChannelwiseQuantizedConvolution)
        cw = n.get();
    ASSERT_NE(cw, nullptr);
    // The activations keep the asymmetric grid: [-1, 3] in 255 steps, offset -128 + 64 = -64.
    EXPECT_EQ(cw->getType(0)->offset, -64);
    auto scales = cast<Constant>(cw->getNthInput(2).node)->getPayload().getHandle<float>();
    auto offsets = cast<Constant>(cw->getNthInput(3).node)->getPayload().getHandle<int32_t>();
    auto fw = cast<Constant>(cw->getNthInput(1).node)->getPayload().getHandle<int8_t>();
    if (!symmetricWeights) {
      // Asymmetric [-0.25, 1]: offset -128 + round(0.25 / (1.25 / 255)) = -77, not 0.
      EXPECT_EQ(offsets.raw(0), -77);
      continue;
    }
    EXPECT_EQ(offsets.raw(0), 0);
    EXPECT_EQ(offsets.raw(1), 0);
    EXPECT_FLOAT_EQ(scales.raw(0), 1.0f / 127);
    EXPECT_FLOAT_EQ(scales.raw(1), 0.04f / 127);
    EXPECT_EQ(fw.raw(0), 127);
    EXPECT_EQ(fw.raw(1), -32); // -0.25 * 127 = -31.75
    EXPECT_EQ(fw.raw(2), 32);  // 0.01 / (0.04 / 127) = 31.75
    EXPECT_EQ(fw.raw(3), -127);
  }
}

TEST(Sqnr, ByHand) {
  // signal 1+4 = 5, noise 0.01+0.04 = 0.05: 10 log10(100) = 20 dB.
  EXPECT_NEAR(sqnrDB({1, 2}, {1.1f, 2.2f}), 20.0, 1e-4);
}
