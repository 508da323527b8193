// Converters added for ONNX breadth: Resize in every mode, ConvTranspose, Trilu, Pad
// edge/reflect, Hardmax, OneHot, NegativeLogLikelihoodLoss, Clip with run-time bounds and
// the importer-folded window functions. Expectations are by hand (from the ONNX operator
// documentation's worked examples where one exists) or from naive loops written here.

#include "ImporterTestBase.h"

#include <tuple>

namespace kiln::test {
namespace {

using TP = onnx::TensorProto;
using B = ONNXBuilder;

std::map<std::string, Tensor> one(const std::string &name, Tensor t) {
  std::map<std::string, Tensor> m;
  m.emplace(name, std::move(t));
  return m;
}

TEST_F(ImporterTest, ResizeLinearHalfPixelUpsample) {
  B m(13);
  m.input("x", {1, 1, 2, 2}).init("roi", {0}, {}).init("scales", {4}, {1, 1, 2, 2}).output("y");
  auto &r = m.node("Resize", {"x", "roi", "scales"}, {"y"});
  B::attrString(r, "mode", "linear");
  // ONNX's documented example (test_resize_upsample_scales_linear).
  expectValues(run(m, one("x", floats({1, 1, 2, 2}, {1, 2, 3, 4}))), {1, 1, 4, 4},
               {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
}

TEST_F(ImporterTest, ResizeNearestDownsampleAndAlignCornersSizes) {
  B m(13);
  m.input("x", {1, 1, 2, 4}).init("roi", {0}, {}).init("scales", {4}, {1, 1, 0.6f, 0.6f});
  m.output("y");
  m.node("Resize", {"x", "roi", "scales"}, {"y"});
  // test_resize_downsample_scales_nearest: [[1, 3]].
  expectValues(run(m, one("x", floats({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}))), {1, 1, 1, 2},
               {1, 3});
}

TEST_F(ImporterTest, ResizeNearestAlignCornersFloorBySizes) {
  B m(13);
  m.input("x", {1, 1, 1, 3}).init("roi", {0}, {}).init("scales", {0}, {});
  m.initI64("sizes", {4}, {1, 1, 1, 5}).output("y");
  auto &r = m.node("Resize", {"x", "roi", "scales", "sizes"}, {"y"});
  B::attrString(r, "coordinate_transformation_mode", "align_corners");
  B::attrString(r, "nearest_mode", "floor");
  // Source x * 2 / 4 = 0, 0.5, 1, 1.5, 2, floored.
  expectValues(run(m, one("x", floats({1, 1, 1, 3}, {10, 20, 30}))), {1, 1, 1, 5},
               {10, 10, 20, 20, 30});
}

TEST_F(ImporterTest, ResizeCubicAsymmetric) {
  B m(13);
  m.input("x", {1, 1, 1, 4}).init("roi", {0}, {}).init("scales", {4}, {1, 1, 1, 2}).output("y");
  auto &r = m.node("Resize", {"x", "roi", "scales"}, {"y"});
  B::attrString(r, "mode", "cubic");
  B::attrString(r, "coordinate_transformation_mode", "asymmetric");
  // x = 0..3; cubic convolution (A = -0.75) reproduces a linear ramp exactly in the
  // interior, with edge clamping at the ends: source 0, .5, 1, ..., 3.5.
  std::vector<double> e;
  for (int i = 0; i < 8; i++) {
    double s = i / 2.0, A = -0.75;
    auto w = [&](double t) {
      t = std::fabs(t);
      return t <= 1 ? ((A + 2) * t - (A + 3)) * t * t + 1
                    : t < 2 ? ((A * t - 5 * A) * t + 8 * A) * t - 4 * A : 0;
    };
    int lo = int(std::floor(s));
    double v = 0;
    for (int k = lo - 1; k <= lo + 2; k++)
      v += w(s - k) * std::clamp(k, 0, 3);
    if (s == std::floor(s))
      v = s; // integer source: the element itself
    e.push_back(v);
  }
  expectValues(run(m, one("x", floats({1, 1, 1, 4}, {0, 1, 2, 3}))), {1, 1, 1, 8}, e, 1e-5);
}

TEST_F(ImporterTest, ConvTransposeDocumentedExample) {
  B m(13);
  m.input("x", {1, 1, 3, 3}).init("w", {1, 2, 3, 3}, std::vector<float>(18, 1.0f)).output("y");
  m.node("ConvTranspose", {"x", "w"}, {"y"});
  std::vector<double> ch = {0, 1, 3,  3,  2,  3, 8,  15, 12, 7,  9,  21, 36,
                            27, 15, 9, 20, 33, 24, 13, 6, 13, 21, 15, 8};
  std::vector<double> e = ch;
  e.insert(e.end(), ch.begin(), ch.end());
  expectValues(run(m, one("x", floats({1, 1, 3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8}))),
               {1, 2, 5, 5}, e);
}

TEST_F(ImporterTest, ConvTransposeStridesPadsDilationsOutputPadding) {
  std::vector<float> x = ramp(2 * 3 * 3), w = ramp(2 * 3 * 2 * 2, 0.07f), b = {0.5f, -1, 0.25f};
  B m(13);
  m.input("x", {1, 2, 3, 3}).init("w", {2, 3, 2, 2}, w).init("b", {3}, b).output("y");
  auto &c = m.node("ConvTranspose", {"x", "w", "b"}, {"y"});
  B::attrInts(c, "strides", {2, 1});
  B::attrInts(c, "pads", {1, 0, 0, 1});
  B::attrInts(c, "dilations", {1, 2});
  B::attrInts(c, "output_padding", {1, 0});
  // Naive scatter: y[o, ih*s + kh*d - pb, ...] += x[c, ih, iw] * w[c, o, kh, kw].
  int OH = 2 * 2 + 1 + 2 - 1 - 0, OW = 1 * 2 + 0 + 3 - 0 - 1;
  std::vector<double> y(3 * OH * OW);
  for (int o = 0; o < 3; o++)
    for (int i = 0; i < OH * OW; i++)
      y[o * OH * OW + i] = b[o];
  for (int c = 0; c < 2; c++)
    for (int ih = 0; ih < 3; ih++)
      for (int iw = 0; iw < 3; iw++)
        for (int o = 0; o < 3; o++)
          for (int kh = 0; kh < 2; kh++)
            for (int kw = 0; kw < 2; kw++) {
              int oh = ih * 2 + kh - 1, ow = iw + kw * 2 - 0;
              if (oh < 0 || ow < 0 || oh >= OH || ow >= OW)
                continue;
              y[(o * OH + oh) * OW + ow] +=
                  double(x[(c * 3 + ih) * 3 + iw]) * w[((c * 3 + o) * 2 + kh) * 2 + kw];
            }
  expectValues(run(m, one("x", floats({1, 2, 3, 3}, x))),
               {1, 3, dim_t(OH), dim_t(OW)}, y, 1e-5);
  // The known filter was rearranged at load: no Gather in the graph.
  EXPECT_EQ(count(NodeKind::Gather), 0u);
}

/// 3-D ConvTranspose by a naive scatter: y[n, g*og + oo, id*s - pb + kd*d, ...] +=
/// x[n, c, id, ih, iw] * w[c, oo, kd, kh, kw] for c in group g, plus the bias.
struct ConvT3D {
  std::vector<int> xd, wd, st, pads, dil, op; // xd [N,C,D,H,W], wd [C,O/g,kd,kh,kw]
  int group = 1;
  std::vector<int> outDims() const {
    std::vector<int> o = {xd[0], wd[1] * group};
    for (int a = 0; a < 3; a++)
      o.push_back((xd[2 + a] - 1) * st[a] + (wd[2 + a] - 1) * dil[a] + 1 + op[a] - pads[a] -
                  pads[3 + a]);
    return o;
  }
  std::vector<double> run(const std::vector<float> &x, const std::vector<float> &w,
                          const std::vector<float> &b) const {
    std::vector<int> od = outDims();
    int N = xd[0], C = xd[1], O = od[1], cg = C / group, og = O / group;
    std::vector<double> y(size_t(N) * O * od[2] * od[3] * od[4]);
    auto yAt = [&](int n, int o, int d, int h, int ww) -> double & {
      return y[(((size_t(n) * O + o) * od[2] + d) * od[3] + h) * od[4] + ww];
    };
    for (int n = 0; n < N; n++)
      for (int o = 0; o < O; o++)
        for (int d = 0; d < od[2]; d++)
          for (int h = 0; h < od[3]; h++)
            for (int ww = 0; ww < od[4]; ww++)
              yAt(n, o, d, h, ww) = b.empty() ? 0.0 : b[o];
    for (int n = 0; n < N; n++)
      for (int c = 0; c < C; c++)
        for (int id = 0; id < xd[2]; id++)
          for (int ih = 0; ih < xd[3]; ih++)
            for (int iw = 0; iw < xd[4]; iw++) {
              double xv = x[(((size_t(n) * C + c) * xd[2] + id) * xd[3] + ih) * xd[4] + iw];
              for (int oo = 0; oo < og; oo++)
                for (int kd = 0; kd < wd[2]; kd++)
                  for (int kh = 0; kh < wd[3]; kh++)
                    for (int kw = 0; kw < wd[4]; kw++) {
                      int d = id * st[0] - pads[0] + kd * dil[0];
                      int h = ih * st[1] - pads[1] + kh * dil[1];
                      int ww = iw * st[2] - pads[2] + kw * dil[2];
                      if (d < 0 || h < 0 || ww < 0 || d >= od[2] || h >= od[3] || ww >= od[4])
                        continue;
                      double wv = w[(((size_t(c) * og + oo) * wd[2] + kd) * wd[3] + kh) *
                                        wd[4] + kw];
                      yAt(n, (c / cg) * og + oo, d, h, ww) += xv * wv;
                    }
            }
    return y;
  }
};

std::vector<int64_t> i64s(const std::vector<int> &v) { return {v.begin(), v.end()}; }
Dims dimsOf(const std::vector<int> &v) {
  Dims d;
  for (int x : v)
    d.push_back(dim_t(x));
  return d;
}

TEST_F(ImporterTest, ConvTranspose3DGroupsStridesPadsDilationsOutputPadding) {
  ConvT3D c;
  c.xd = {2, 4, 2, 3, 3};
  c.wd = {4, 3, 2, 2, 3};
  c.group = 2;
  c.st = {2, 1, 2};
  c.pads = {1, 0, 0, 0, 1, 2};
  c.dil = {1, 2, 1};
  c.op = {1, 0, 1};
  size_t nx = 2 * 4 * 2 * 3 * 3, nw = 4 * 3 * 2 * 2 * 3;
  std::vector<float> x = ramp(nx), w = ramp(nw, 0.05f), b = {0.5f, -1, 0.25f, 2, 0, -0.75f};
  B m(13);
  m.input("x", i64s(c.xd)).init("w", i64s(c.wd), w).init("b", {6}, b).output("y");
  auto &n = m.node("ConvTranspose", {"x", "w", "b"}, {"y"});
  B::attrInt(n, "group", 2);
  B::attrInts(n, "strides", i64s(c.st));
  B::attrInts(n, "pads", i64s(c.pads));
  B::attrInts(n, "dilations", i64s(c.dil));
  B::attrInts(n, "output_padding", i64s(c.op));
  expectValues(run(m, one("x", floats(dimsOf(c.xd), x))), dimsOf(c.outDims()), c.run(x, w, b),
               1e-5);
  EXPECT_EQ(count(NodeKind::Gather) > 0, true); // the depth taps (window3D)
}

/// A filter that is a graph input (rearranged and flipped in the graph), no bias, strides
/// in depth only, SAME_UPPER (pads from the output size in * stride).
TEST_F(ImporterTest, ConvTranspose3DRuntimeFilterAutoPad) {
  ConvT3D c;
  c.xd = {1, 2, 3, 2, 2};
  c.wd = {2, 2, 3, 2, 2};
  c.st = {2, 1, 1};
  c.dil = {1, 1, 1};
  c.op = {0, 0, 0};
  // SAME_UPPER: total = s (in - 1) + k - in s; begin = total / 2, the rest at the end.
  c.pads.assign(6, 0);
  for (int a = 0; a < 3; a++) {
    int total = c.st[a] * (c.xd[2 + a] - 1) + c.wd[2 + a] - c.xd[2 + a] * c.st[a];
    c.pads[a] = total / 2;
    c.pads[3 + a] = total - total / 2;
  }
  size_t nx = 1 * 2 * 3 * 2 * 2, nw = 2 * 2 * 3 * 2 * 2;
  std::vector<float> x = ramp(nx), w = ramp(nw, 0.3f);
  B m(13);
  m.input("x", i64s(c.xd)).input("w", i64s(c.wd)).output("y");
  auto &n = m.node("ConvTranspose", {"x", "w"}, {"y"});
  B::attrInts(n, "strides", i64s(c.st));
  B::attrString(n, "auto_pad", "SAME_UPPER");
  std::map<std::string, Tensor> in;
  in.emplace("x", floats(dimsOf(c.xd), x));
  in.emplace("w", floats(dimsOf(c.wd), w));
  std::vector<int> od = c.outDims();
  EXPECT_EQ(od[2], 6); // in * stride
  expectValues(run(m, std::move(in)), dimsOf(od), c.run(x, w, {}), 1e-5);
}

TEST_F(ImporterTest, TriluUpperAndLowerWithK) {
  B m(14);
  m.input("x", {3, 3}).initI64("k", {}, {1}).output("u").output("l");
  m.node("Trilu", {"x", "k"}, {"u"});
  auto &t = m.node("Trilu", {"x", "k"}, {"l"});
  B::attrInt(t, "upper", 0);
  expectValues(run(m, one("x", floats({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})), "u"), {3, 3},
               {0, 2, 3, 0, 0, 6, 0, 0, 0});
  expectValues(bindings_.get(model_.getOutputPlaceholder("l")), {3, 3},
               {1, 2, 0, 4, 5, 6, 7, 8, 9});
}

TEST_F(ImporterTest, PadEdgeAndReflect) {
  B m(13);
  m.input("x", {1, 3}).initI64("pads", {4}, {0, 2, 0, 1}).output("e").output("r");
  auto &e = m.node("Pad", {"x", "pads"}, {"e"});
  B::attrString(e, "mode", "edge");
  auto &r = m.node("Pad", {"x", "pads"}, {"r"});
  B::attrString(r, "mode", "reflect");
  expectValues(run(m, one("x", floats({1, 3}, {1, 2, 3})), "e"), {1, 6}, {1, 1, 1, 2, 3, 3});
  expectValues(bindings_.get(model_.getOutputPlaceholder("r")), {1, 6}, {3, 2, 1, 2, 3, 2});
}

TEST_F(ImporterTest, HardmaxFirstMaximum) {
  B m(13);
  m.input("x", {2, 3}).output("y");
  m.node("Hardmax", {"x"}, {"y"});
  expectValues(run(m, one("x", floats({2, 3}, {1, 3, 3, -1, 0, -2}))), {2, 3},
               {0, 1, 0, 0, 1, 0});
}

TEST_F(ImporterTest, OneHotNegativeAndOutOfRangeIndices) {
  B m(11);
  m.input("i", {3}, TP::INT64).initI64("depth", {}, {4}).init("v", {2}, {-1, 5}).output("y");
  m.node("OneHot", {"i", "depth", "v"}, {"y"});
  Tensor idx(ElemKind::Int64I, {3});
  idx.getHandle<int64_t>().set({0, -1, 7});
  expectValues(run(m, one("i", std::move(idx))), {3, 4},
               {5, -1, -1, -1, -1, -1, -1, 5, -1, -1, -1, -1});
}

TEST_F(ImporterTest, NegativeLogLikelihoodWeightedMeanAndIgnoreIndex) {
  B m(13);
  m.input("x", {2, 3}).input("t", {2}, TP::INT64).init("w", {3}, {0.2f, 0.3f, 0.5f});
  m.output("mean").output("ii");
  m.node("NegativeLogLikelihoodLoss", {"x", "t", "w"}, {"mean"});
  auto &n = m.node("NegativeLogLikelihoodLoss", {"x", "t", "w"}, {"ii"});
  B::attrInt(n, "ignore_index", 0);
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({2, 3}, {-1.0f, -2.0f, -0.5f, -0.3f, -1.5f, -2.5f}));
  Tensor t(ElemKind::Int64I, {2});
  t.getHandle<int64_t>().set({2, 0});
  in.emplace("t", std::move(t));
  // (0.5 * 0.5 + 0.3 * 0.2) / (0.5 + 0.2); ignoring class 0: 0.25 / 0.5.
  expectValues(run(m, std::move(in), "mean"), {}, {0.31 / 0.7});
  expectValues(bindings_.get(model_.getOutputPlaceholder("ii")), {}, {0.5});
}

TEST_F(ImporterTest, ClipWithRunTimeBounds) {
  B m(13);
  m.input("x", {4}).input("lo", {}).output("y");
  m.node("Clip", {"x", "lo"}, {"y"});
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({4}, {-2, -0.5f, 0.5f, 3}));
  in.emplace("lo", floats({}, {-1}));
  expectValues(run(m, std::move(in)), {4}, {-1, -0.5, 0.5, 3});
}

TEST_F(ImporterTest, HannWindowFoldsToAConstant) {
  B m(17);
  m.initI64("n", {}, {4}).output("y");
  m.node("HannWindow", {"n"}, {"y"});
  // Periodic: 0.5 - 0.5 cos(2 pi i / 4).
  expectValues(run(m, {}), {4}, {0, 0.5, 1, 0.5});
}

TEST_F(ImporterTest, MaxPoolDilationsAndIndices) {
  B m(12);
  m.input("x", {1, 1, 3, 4}).output("y").output("i", TP::INT64);
  auto &p = m.node("MaxPool", {"x"}, {"y", "i"});
  B::attrInts(p, "kernel_shape", {2, 2});
  B::attrInts(p, "dilations", {1, 2});
  // Taps (h, w), (h, w + 2), (h + 1, w), (h + 1, w + 2) for h in 0..1, w in 0..1.
  std::vector<float> x = {1, 9, 3, 4, 5, 6, 7, 2, 8, 0, 7, 9};
  expectValues(run(m, one("x", floats({1, 1, 3, 4}, x))), {1, 1, 2, 2}, {7, 9, 8, 9});
  // The first largest tap: 7 at (1, 2) = 6; 9 at (0, 1) = 1; 8 at (2, 0) = 8; 9 at (2, 3)
  // = 11 (the earlier 9 at (0, 1) is not in that window).
  expectValues(bindings_.get(model_.getOutputPlaceholder("i")), {1, 1, 2, 2}, {6, 1, 8, 11});
}

TEST_F(ImporterTest, CompressWithKnownCondition) {
  B m(11);
  m.input("x", {3, 2}).output("y");
  onnx::TensorProto c;
  c.set_name("c");
  c.set_data_type(TP::BOOL);
  c.add_dims(3);
  for (int v : {0, 1, 1})
    c.add_int32_data(v);
  *m.rawInit() = c;
  auto &n = m.node("Compress", {"x", "c"}, {"y"});
  B::attrInt(n, "axis", 0);
  expectValues(run(m, one("x", floats({3, 2}, {1, 2, 3, 4, 5, 6}))), {2, 2}, {3, 4, 5, 6});
}

TEST_F(ImporterTest, EinsumBatchMatMulAndDiagonal) {
  B m(12);
  m.input("a", {2, 2, 3}).input("b", {2, 3, 2}).input("d", {2, 3, 3}).output("y").output("g");
  auto &e = m.node("Einsum", {"a", "b"}, {"y"});
  B::attrString(e, "equation", "bij,bjk->bik");
  auto &g = m.node("Einsum", {"d"}, {"g"});
  B::attrString(g, "equation", "...ii->...i");
  std::vector<float> a = ramp(12), b = ramp(12, 0.3f), d = ramp(18, 0.5f);
  std::vector<double> y, diag;
  for (int bi = 0; bi < 2; bi++)
    for (int i = 0; i < 2; i++)
      for (int k = 0; k < 2; k++) {
        double v = 0;
        for (int j = 0; j < 3; j++)
          v += double(a[(bi * 2 + i) * 3 + j]) * b[(bi * 3 + j) * 2 + k];
        y.push_back(v);
      }
  for (int bi = 0; bi < 2; bi++)
    for (int i = 0; i < 3; i++)
      diag.push_back(d[(bi * 3 + i) * 3 + i]);
  std::map<std::string, Tensor> in;
  in.emplace("a", floats({2, 2, 3}, a));
  in.emplace("b", floats({2, 3, 2}, b));
  in.emplace("d", floats({2, 3, 3}, d));
  expectValues(run(m, std::move(in)), {2, 2, 2}, y);
  expectValues(bindings_.get(model_.getOutputPlaceholder("g")), {2, 3}, diag);
}

TEST_F(ImporterTest, RNNForwardTwoStepsWithBiasAndInitialState) {
  // hidden 1, input 1, batch 1: h_t = tanh(w x_t + r h_{t-1} + wb + rb).
  B m(14);
  m.input("x", {2, 1, 1}).init("W", {1, 1, 1}, {0.5f}).init("R", {1, 1, 1}, {-1.0f});
  m.init("B", {1, 2}, {0.1f, 0.2f}).init("h0", {1, 1, 1}, {0.3f}).output("y").output("yh");
  auto &r = m.node("RNN", {"x", "W", "R", "B", "", "h0"}, {"y", "yh"});
  B::attrInt(r, "hidden_size", 1);
  double h1 = std::tanh(0.5 * 1.0 - 0.3 + 0.3), h2 = std::tanh(0.5 * -2.0 - h1 + 0.3);
  expectValues(run(m, one("x", floats({2, 1, 1}, {1.0f, -2.0f}))), {2, 1, 1, 1}, {h1, h2});
  expectValues(bindings_.get(model_.getOutputPlaceholder("yh")), {1, 1, 1}, {h2});
}

TEST_F(ImporterTest, Conv3DMatchesNaiveLoops) {
  std::vector<float> x = ramp(1 * 2 * 3 * 4 * 4), w = ramp(2 * 2 * 2 * 3 * 3, 0.05f);
  B m(13);
  m.input("x", {1, 2, 3, 4, 4}).init("w", {2, 2, 2, 3, 3}, w).init("b", {2}, {0.5f, -0.5f});
  m.output("y");
  auto &c = m.node("Conv", {"x", "w", "b"}, {"y"});
  B::attrInts(c, "pads", {1, 1, 0, 0, 1, 1});
  B::attrInts(c, "strides", {2, 1, 2});
  // Out: D (3 + 1 - 2) / 2 + 1 = 2, H (4 + 2 - 3) + 1 = 4, W (4 - 3) / 2 + 1 = 1... with
  // pads [d0 h0 w0 d1 h1 w1] = [1 1 0 0 1 1]: W (4 + 1 - 3) / 2 + 1 = 2.
  int OD = 2, OH = 4, OW = 2;
  std::vector<double> y;
  for (int o = 0; o < 2; o++)
    for (int od = 0; od < OD; od++)
      for (int oh = 0; oh < OH; oh++)
        for (int ow = 0; ow < OW; ow++) {
          double v = o == 0 ? 0.5 : -0.5;
          for (int ci = 0; ci < 2; ci++)
            for (int kd = 0; kd < 2; kd++)
              for (int kh = 0; kh < 3; kh++)
                for (int kw = 0; kw < 3; kw++) {
                  int id = od * 2 - 1 + kd, ih = oh - 1 + kh, iw = ow * 2 + kw;
                  if (id < 0 || id >= 3 || ih < 0 || ih >= 4 || iw < 0 || iw >= 4)
                    continue;
                  v += double(x[((ci * 3 + id) * 4 + ih) * 4 + iw]) *
                       w[(((o * 2 + ci) * 2 + kd) * 3 + kh) * 3 + kw];
                }
          y.push_back(v);
        }
  expectValues(run(m, one("x", floats({1, 2, 3, 4, 4}, x))), {1, 2, dim_t(OD), dim_t(OH), dim_t(OW)},
               y, 1e-5);
}

// A constant 3-D filter of several depths is cut into one 2-D filter per depth at import;
// the whole filter is then no longer held: the module's constants are the cut filters (and
// the small bias, zero-bias and depth-index ones), never a 5-D copy besides them.
TEST_F(ImporterTest, Conv3DFilterIsHeldOnlyAsItsCutDepths) {
  B m(13);
  m.input("x", {1, 2, 3, 4, 4}).init("w", {4, 2, 3, 3, 3}, ramp(4 * 2 * 3 * 3 * 3, 0.01f), true);
  m.init("b", {4}, {0, 1, 2, 3}).output("y");
  m.node("Conv", {"x", "w", "b"}, {"y"});
  ASSERT_FALSE(load(m));
  uint64_t filterFloats = 0;
  for (const auto &c : ee_.getModule().getConstants()) {
    EXPECT_NE(c->getType()->dims.size(), 5u) << c->getName();
    if (c->getType()->dims.size() == 4)
      filterFloats += c->getPayload().size();
  }
  EXPECT_EQ(filterFloats, uint64_t(4 * 2 * 3 * 3 * 3)); // three [4, 2, 3, 3] depths
}

// The whole filter is freed only when its Conv is its only reader: a second Conv reading
// the same initializer still finds it and computes the same result.
TEST_F(ImporterTest, Conv3DFilterSharedByTwoConvs) {
  std::vector<float> x = ramp(1 * 1 * 3 * 2 * 2), w = ramp(1 * 1 * 2 * 1 * 1, 0.5f);
  B m(13);
  m.input("x", {1, 1, 3, 2, 2}).init("w", {1, 1, 2, 1, 1}, w).output("y").output("y2");
  m.node("Conv", {"x", "w"}, {"y"});
  m.node("Conv", {"x", "w"}, {"y2"});
  // y[d][i] = w0 x[d][i] + w1 x[d + 1][i], d = 0, 1.
  std::vector<double> y;
  for (int d = 0; d < 2; d++)
    for (int i = 0; i < 4; i++)
      y.push_back(double(w[0]) * x[d * 4 + i] + double(w[1]) * x[(d + 1) * 4 + i]);
  expectValues(run(m, one("x", floats({1, 1, 3, 2, 2}, x))), {1, 1, 2, 2, 2}, y, 1e-6);
  expectValues(bindings_.get(model_.getOutputPlaceholder("y2")), {1, 1, 2, 2, 2}, y, 1e-6);
}

/// A 3-D convolution (group 1, undilated) by naive loops over x [N, C, D, H, W] and
/// w [O, C, KD, KH, KW]; pads [d0 h0 w0 d1 h1 w1]; returns y [N, O, OD, OH, OW] in \p yd.
std::vector<double> naiveConv3D(const std::vector<float> &x, const std::vector<int> &xd,
                                const std::vector<float> &w, const std::vector<int> &wd,
                                const std::vector<float> &b, const std::vector<int> &st,
                                const std::vector<int> &pads, Dims &yd) {
  int N = xd[0], C = xd[1], O = wd[0], od[3];
  for (int a = 0; a < 3; a++)
    od[a] = (xd[2 + a] + pads[a] + pads[3 + a] - wd[2 + a]) / st[a] + 1;
  yd = {dim_t(N), dim_t(O), dim_t(od[0]), dim_t(od[1]), dim_t(od[2])};
  std::vector<double> y;
  for (int n = 0; n < N; n++)
    for (int o = 0; o < O; o++)
      for (int d = 0; d < od[0]; d++)
        for (int h = 0; h < od[1]; h++)
          for (int ww = 0; ww < od[2]; ww++) {
            double v = b[o];
            for (int c = 0; c < C; c++)
              for (int kd = 0; kd < wd[2]; kd++)
                for (int kh = 0; kh < wd[3]; kh++)
                  for (int kw = 0; kw < wd[4]; kw++) {
                    int id = d * st[0] - pads[0] + kd, ih = h * st[1] - pads[1] + kh,
                        iw = ww * st[2] - pads[2] + kw;
                    if (id < 0 || ih < 0 || iw < 0 || id >= xd[2] || ih >= xd[3] || iw >= xd[4])
                      continue;
                    v += double(x[(((n * C + c) * xd[2] + id) * xd[3] + ih) * xd[4] + iw]) *
                         w[(((o * C + c) * wd[2] + kd) * wd[3] + kh) * wd[4] + kw];
                  }
            y.push_back(v);
          }
  return y;
}

// A kernel depth whose gathered depths are all padding adds nothing and is left out, with
// its filter depth; the bias moves to the first depth computed. Checks a 3x3x3 Conv with
// pads of 1 on an input of \p depth depths at depth stride \p stride against naive loops,
// and that it became \p convs 2-D convolutions holding only their filter depths.
class Conv3DPaddingTest : public ImporterTest {
protected:
  void check(int depth, int stride, size_t convs) {
    const std::vector<int> xd = {1, 2, depth, 4, 4}, wd = {3, 2, 3, 3, 3};
    const std::vector<int> st = {stride, 1, 1}, pads = {1, 1, 1, 1, 1, 1};
    std::vector<float> x = ramp(size_t(2 * depth * 16)), w = ramp(3 * 2 * 27, 0.03f);
    std::vector<float> b = {0.5f, -0.25f, 1.0f};
    B m(13);
    m.input("x", {1, 2, depth, 4, 4}).init("w", {3, 2, 3, 3, 3}, w).init("b", {3}, b);
    m.output("y");
    auto &c = m.node("Conv", {"x", "w", "b"}, {"y"});
    B::attrInts(c, "pads", {1, 1, 1, 1, 1, 1});
    B::attrInts(c, "strides", {stride, 1, 1});
    Dims yd;
    std::vector<double> y = naiveConv3D(x, xd, w, wd, b, st, pads, yd);
    expectValues(run(m, one("x", floats({1, 2, dim_t(depth), 4, 4}, x))), yd, y, 1e-5);
    EXPECT_EQ(count(NodeKind::Convolution), convs);
    uint64_t filterFloats = 0;
    for (const auto &cst : ee_.getModule().getConstants())
      if (cst->getType()->dims.size() == 4)
        filterFloats += cst->getPayload().size();
    EXPECT_EQ(filterFloats, uint64_t(convs * 3 * 2 * 9)); // only the depths computed
  }
};

// Depth 1: only the middle kernel depth meets the input (r3d_18's last layers).
TEST_F(Conv3DPaddingTest, DepthOneComputesOnlyTheMiddleDepth) { check(1, 1, 1); }

// Depth 2 at depth stride 2: one output depth, whose first kernel depth meets the front pad.
TEST_F(Conv3DPaddingTest, StridedLeavesOutTheFrontDepth) { check(2, 2, 2); }

// Depth 3: every kernel depth meets the input at some output depth; all three stay.
TEST_F(Conv3DPaddingTest, EveryDepthReadingTheInputStays) { check(3, 1, 3); }

// The same for 3-D pools: at input depth 1 with a depth pad of 1 the max and the window
// sums come from the one real depth (a -inf or zero slab left out), and the average still
// divides by the window's count, padding counted (\p countPads) or not.
class Pool3DPaddingTest : public ImporterTest {
protected:
  void check(int countPads) {
    std::vector<float> x = ramp(2 * 3 * 3);
    B m(11);
    m.input("x", {1, 2, 1, 3, 3}).output("y").output("z");
    auto &mp = m.node("MaxPool", {"x"}, {"y"});
    auto &ap = m.node("AveragePool", {"x"}, {"z"});
    for (onnx::NodeProto *p : {&mp, &ap}) {
      B::attrInts(*p, "kernel_shape", {3, 3, 3});
      B::attrInts(*p, "pads", {1, 1, 1, 1, 1, 1});
    }
    B::attrInt(ap, "count_include_pad", countPads);
    std::vector<double> mx, avg;
    for (int c = 0; c < 2; c++)
      for (int h = 0; h < 3; h++)
        for (int ww = 0; ww < 3; ww++) {
          double best = -1e30, sum = 0;
          int n = 0;
          for (int ih = h - 1; ih <= h + 1; ih++)
            for (int iw = ww - 1; iw <= ww + 1; iw++)
              if (ih >= 0 && iw >= 0 && ih < 3 && iw < 3) {
                double v = x[(c * 3 + ih) * 3 + iw];
                best = std::max(best, v), sum += v, n++;
              }
          mx.push_back(best);
          avg.push_back(sum / (countPads ? 27 : n));
        }
    expectValues(run(m, one("x", floats({1, 2, 1, 3, 3}, x)), "y"), {1, 2, 1, 3, 3}, mx);
    expectValues(bindings_.get(model_.getOutputPlaceholder("z")), {1, 2, 1, 3, 3}, avg);
    EXPECT_EQ(count(NodeKind::MaxPool), 1u);
    EXPECT_EQ(count(NodeKind::AvgPool), 1u);
  }
};

TEST_F(Pool3DPaddingTest, PaddingNotCounted) { check(0); }
TEST_F(Pool3DPaddingTest, PaddingCounted) { check(1); }

/// A subgraph with the given inputs, outputs and nodes (op, inputs, outputs).
onnx::GraphProto subgraph(std::vector<std::tuple<std::string, std::vector<int64_t>, int32_t>> ins,
                          std::vector<std::string> outs,
                          std::vector<std::tuple<std::string, std::vector<std::string>,
                                                 std::vector<std::string>>> nodes) {
  onnx::GraphProto g;
  g.set_name("sub");
  for (auto &[name, dims, type] : ins) {
    auto *vi = g.add_input();
    vi->set_name(name);
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    auto *shape = tt->mutable_shape();
    for (int64_t d : dims)
      shape->add_dim()->set_dim_value(d);
  }
  for (auto &o : outs)
    g.add_output()->set_name(o);
  for (auto &[op, in, out] : nodes) {
    auto *nd = g.add_node();
    nd->set_op_type(op);
    for (auto &i : in)
      nd->add_input(i);
    for (auto &o : out)
      nd->add_output(o);
  }
  return g;
}

void attrGraph(onnx::NodeProto &n, const std::string &name, onnx::GraphProto g) {
  auto *a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = std::move(g);
}

onnx::TensorProto boolScalar(const std::string &name, bool v) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(TP::BOOL);
  t.add_int32_data(v);
  return t;
}

TEST_F(ImporterTest, IfWithAKnownConditionTakesItsBranch) {
  B m(13);
  m.input("x", {3}).output("y");
  *m.rawInit() = boolScalar("c", false);
  auto &n = m.node("If", {"c"}, {"y"});
  attrGraph(n, "then_branch", subgraph({}, {"t"}, {{"Relu", {"x"}, {"t"}}}));
  attrGraph(n, "else_branch", subgraph({}, {"e"}, {{"Neg", {"x"}, {"e"}}}));
  expectValues(run(m, one("x", floats({3}, {1, -2, 3}))), {3}, {-1, 2, -3});
  EXPECT_EQ(count(NodeKind::Relu), 0u);
}

// Weights stored as raw_data are read from the model's bytes into their tensors (the
// model is parsed without them); a Gemm's transB operand is transposed at import and the
// original freed only when nothing else reads it: here an If branch reads the same
// initializer by name after the Gemm has been converted, and a second Gemm shares it.
TEST_F(ImporterTest, TransposedGemmWeightsStayForOtherReaders) {
  const std::vector<float> a = {1, 2, 3}, w = {0.5f, -1, 2, 3, 0.25f, -2};
  B m(13);
  m.input("a", {1, 3}).init("w", {2, 3}, w, /*raw=*/true).output("y").output("y2").output("z");
  *m.rawInit() = boolScalar("c", true);
  B::attrInt(m.node("Gemm", {"a", "w"}, {"y"}), "transB", 1);
  auto &n = m.node("If", {"c"}, {"z"});
  attrGraph(n, "then_branch", subgraph({}, {"t"}, {{"Neg", {"w"}, {"t"}}}));
  attrGraph(n, "else_branch", subgraph({}, {"e"}, {{"Relu", {"w"}, {"e"}}}));
  B::attrInt(m.node("Gemm", {"a", "w"}, {"y2"}), "transB", 1);
  // y = a w^T: [1*0.5 - 2 + 6, 3 + 0.5 - 6].
  const Tensor *y = run(m, one("a", floats({1, 3}, a)));
  expectValues(y, {1, 2}, {4.5, -2.5});
  std::vector<double> negW;
  for (float v : w)
    negW.push_back(-v);
  expectValues(bindings_.get(model_.getOutputPlaceholder("z")), {2, 3}, negW);
  expectValues(bindings_.get(model_.getOutputPlaceholder("y2")), {1, 2}, {4.5, -2.5});
}

TEST_F(ImporterTest, LoopWithAKnownTripCountUnrolls) {
  B m(13);
  m.input("x", {2}).initI64("M", {}, {3}).output("v").output("s");
  *m.rawInit() = boolScalar("c", true);
  auto &n = m.node("Loop", {"M", "c", "x"}, {"v", "s"});
  // Body: v' = v + x; scan v'; the condition passes through.
  attrGraph(n, "body", subgraph({{"i", {}, TP::INT64}, {"ci", {}, TP::BOOL}, {"vi", {2}, TP::FLOAT}},
                                {"co", "vo", "so"},
                                {{"Add", {"vi", "x"}, {"vo"}},
                                 {"Identity", {"ci"}, {"co"}},
                                 {"Identity", {"vo"}, {"so"}}}));
  expectValues(run(m, one("x", floats({2}, {1, -0.5f})), "v"), {2}, {4, -2});
  expectValues(bindings_.get(model_.getOutputPlaceholder("s")), {3, 2}, {2, -1, 3, -1.5, 4, -2});
}

} // namespace
} // namespace kiln::test
