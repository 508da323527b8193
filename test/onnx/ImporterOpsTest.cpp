// Operators imported from small ONNX models built in C++, run on the Interpreter and
// checked against expectations computed here independently (naive loops) or by hand.

#include "ImporterTestBase.h"

namespace kiln::test {
namespace {

using TP = onnx::TensorProto;
using B = ONNXBuilder;

/// Naive NCHW convolution, pads [top, left, bottom, right].
std::vector<double> refConv(const std::vector<float> &x, Dims xd, const std::vector<float> &w,
                            Dims wd, const std::vector<float> &bias, std::vector<int> st,
                            std::vector<int> pads, Dims &od, int group = 1) {
  int N = xd[0], C = xd[1], H = xd[2], W = xd[3], O = wd[0], KH = wd[2], KW = wd[3];
  int OH = (H + pads[0] + pads[2] - KH) / st[0] + 1, OW = (W + pads[1] + pads[3] - KW) / st[1] + 1;
  od = Dims({dim_t(N), dim_t(O), dim_t(OH), dim_t(OW)});
  int cpg = C / group, opg = O / group;
  std::vector<double> y;
  for (int n = 0; n < N; n++)
    for (int o = 0; o < O; o++)
      for (int oh = 0; oh < OH; oh++)
        for (int ow = 0; ow < OW; ow++) {
          double s = bias.empty() ? 0 : bias[o];
          int g = o / opg;
          for (int c = 0; c < cpg; c++)
            for (int kh = 0; kh < KH; kh++)
              for (int kw = 0; kw < KW; kw++) {
                int ih = oh * st[0] - pads[0] + kh, iw = ow * st[1] - pads[1] + kw;
                if (ih < 0 || iw < 0 || ih >= H || iw >= W)
                  continue;
                s += double(x[((n * C + g * cpg + c) * H + ih) * W + iw]) *
                     w[((o * cpg + c) * KH + kh) * KW + kw];
              }
          y.push_back(s);
        }
  return y;
}

TEST_F(ImporterTest, ConvWithBiasPadsStridesThenRelu) {
  std::vector<float> x = ramp(2 * 3 * 5 * 5), w = ramp(4 * 3 * 3 * 3, 0.05f), b = {0.1f, -0.2f, 0.3f, 0};
  B m;
  m.input("x", {2, 3, 5, 5}).init("w", {4, 3, 3, 3}, w, /*raw=*/true).init("b", {4}, b).output("y");
  auto &c = m.node("Conv", {"x", "w", "b"}, {"c"}, "conv1");
  B::attrInts(c, "pads", {1, 0, 1, 2});
  B::attrInts(c, "strides", {2, 1});
  B::attrInts(c, "kernel_shape", {3, 3});
  m.node("Relu", {"c"}, {"y"});
  Dims od;
  std::vector<double> e = refConv(x, {2, 3, 5, 5}, w, {4, 3, 3, 3}, b, {2, 1}, {1, 0, 1, 2}, od);
  for (double &v : e)
    v = std::max(v, 0.0);
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({2, 3, 5, 5}, x));
  expectValues(run(m, std::move(in)), od, e);
  EXPECT_EQ(count(NodeKind::Convolution), 1u);
  EXPECT_EQ(model_.inputNames, std::vector<std::string>{"x"}); // initializers are not inputs
}

TEST_F(ImporterTest, ConvAutoPadSameUpperGroupedNoBias) {
  std::vector<float> x = ramp(1 * 4 * 5 * 5), w = ramp(4 * 2 * 2 * 2, 0.03f);
  B m;
  m.input("x", {1, 4, 5, 5}).init("w", {4, 2, 2, 2}, w).output("y");
  auto &c = m.node("Conv", {"x", "w"}, {"y"});
  B::attrString(c, "auto_pad", "SAME_UPPER");
  B::attrInt(c, "group", 2);
  B::attrInts(c, "strides", {2, 2});
  // out = ceil(5/2) = 3; total pad = (3-1)*2 + 2 - 5 = 1: 0 before, 1 after.
  Dims od;
  std::vector<double> e = refConv(x, {1, 4, 5, 5}, w, {4, 2, 2, 2}, {}, {2, 2}, {0, 0, 1, 1}, od, 2);
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({1, 4, 5, 5}, x));
  expectValues(run(m, std::move(in)), od, e);
}

TEST_F(ImporterTest, Conv1DRunsAs2D) {
  std::vector<float> x = ramp(1 * 2 * 7), w = ramp(3 * 2 * 3, 0.2f);
  B m;
  m.input("x", {1, 2, 7}).init("w", {3, 2, 3}, w).output("y");
  auto &c = m.node("Conv", {"x", "w"}, {"y"});
  B::attrInts(c, "pads", {1, 1});
  Dims od;
  std::vector<double> e = refConv(x, {1, 2, 1, 7}, w, {3, 2, 1, 3}, {}, {1, 1}, {0, 1, 0, 1}, od);
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({1, 2, 7}, x));
  expectValues(run(m, std::move(in)), {1, 3, 7}, e);
}

TEST_F(ImporterTest, GemmTransBAlphaBetaRowBias) {
  std::vector<float> a = ramp(2 * 3), w = ramp(4 * 3, 0.3f), c = {1, 2, 3, 4};
  B m;
  m.input("a", {2, 3}).init("w", {4, 3}, w).init("c", {4}, c).output("y");
  auto &g = m.node("Gemm", {"a", "w", "c"}, {"y"});
  B::attrInt(g, "transB", 1);
  B::attrFloat(g, "alpha", 0.5f);
  B::attrFloat(g, "beta", 2.0f);
  std::vector<double> e;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++) {
      double s = 0;
      for (int k = 0; k < 3; k++)
        s += double(a[i * 3 + k]) * w[j * 3 + k];
      e.push_back(0.5 * s + 2.0 * c[j]);
    }
  std::map<std::string, Tensor> in;
  in.emplace("a", floats({2, 3}, a));
  expectValues(run(m, std::move(in)), {2, 4}, e);
  EXPECT_EQ(count(NodeKind::FullyConnected), 1u);
}

/// Gemm(a, w, transB=1) = a w^T, computed naively in double.
std::vector<double> refGemmTransB(const std::vector<float> &a, const std::vector<float> &w,
                                  int m, int k, int n) {
  std::vector<double> e;
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = 0;
      for (int q = 0; q < k; q++)
        s += double(a[i * k + q]) * w[j * k + q];
      e.push_back(s);
    }
  return e;
}

// Loaded from a file, the weights of a Gemm with transB that only it reads are read
// transposed from the file a band of 64 rows at a time (several bands, a partial last one,
// a width that is no multiple of the tiles); weights read by two nodes and weights in the
// typed field take the ordinary path. All three must compute a w^T.
TEST_F(ImporterTest, GemmTransBWeightsReadTransposedFromAFile) {
  const int m = 2, k = 131, n = 150;
  std::vector<float> a = ramp(m * k, 0.01f), w = ramp(n * k, 0.002f), v = ramp(5 * k, 0.03f);
  B mb;
  mb.input("a", {m, k}).init("w", {n, k}, w, /*raw=*/true).init("v", {5, k}, v, /*raw=*/false);
  mb.init("u", {5, k}, v, /*raw=*/true).output("y").output("y2").output("y3");
  B::attrInt(mb.node("Gemm", {"a", "w"}, {"y"}), "transB", 1);
  B::attrInt(mb.node("Gemm", {"a", "v"}, {"y2"}), "transB", 1);
  B::attrInt(mb.node("Gemm", {"a", "u"}, {"y3"}), "transB", 1);
  mb.node("Identity", {"u"}, {"u_again"}); // u has a second reader
  if (Error e = loadFile(mb, "gemm_transposed_on_load.onnx"))
    FAIL() << e.toString();
  // w's constant is the initializer itself, [k, n]: read transposed, not copied then
  // transposed into a second constant.
  const Constant *wc = ee_.getModule().getConstantByName("w");
  ASSERT_NE(wc, nullptr);
  EXPECT_EQ(wc->getPayload().dims(), Dims({k, n}));
  std::map<std::string, Tensor> in;
  in.emplace("a", floats({m, k}, a));
  const Tensor *y = runLoaded(std::move(in), "y");
  ASSERT_NE(y, nullptr);
  expectValues(y, {m, n}, refGemmTransB(a, w, m, k, n));
  expectValues(bindings_.get(model_.getOutputPlaceholder("y2")), {m, 5}, refGemmTransB(a, v, m, k, 5));
  expectValues(bindings_.get(model_.getOutputPlaceholder("y3")), {m, 5}, refGemmTransB(a, v, m, k, 5));
}

TEST_F(ImporterTest, GemmTransAWithMatrixC) {
  std::vector<float> a = ramp(3 * 2), b = ramp(3 * 2, 0.2f), c = ramp(2 * 2, 0.5f);
  B m;
  m.input("a", {3, 2}).input("b", {3, 2}).init("c", {2, 1}, {c[0], c[1]}).output("y");
  auto &g = m.node("Gemm", {"a", "b", "c"}, {"y"});
  B::attrInt(g, "transA", 1);
  std::vector<double> e;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      double s = c[i];
      for (int k = 0; k < 3; k++)
        s += double(a[k * 2 + i]) * b[k * 2 + j];
      e.push_back(s);
    }
  std::map<std::string, Tensor> in;
  in.emplace("a", floats({3, 2}, a));
  in.emplace("b", floats({3, 2}, b));
  expectValues(run(m, std::move(in)), {2, 2}, e);
}

TEST_F(ImporterTest, MatMulBatchedWithBroadcast) {
  // [2,1,2,3] x [3,3,2] -> [2,3,2,2]
  std::vector<float> a = ramp(2 * 2 * 3), b = ramp(3 * 3 * 2, 0.2f);
  B m;
  m.input("a", {2, 1, 2, 3}).input("b", {3, 3, 2}).output("y");
  m.node("MatMul", {"a", "b"}, {"y"});
  std::vector<double> e;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      for (int r = 0; r < 2; r++)
        for (int c = 0; c < 2; c++) {
          double s = 0;
          for (int k = 0; k < 3; k++)
            s += double(a[(i * 2 + r) * 3 + k]) * b[(j * 3 + k) * 2 + c];
          e.push_back(s);
        }
  std::map<std::string, Tensor> in;
  in.emplace("a", floats({2, 1, 2, 3}, a));
  in.emplace("b", floats({3, 3, 2}, b));
  expectValues(run(m, std::move(in)), {2, 3, 2, 2}, e);
}

TEST_F(ImporterTest, MatMul3DBy2DAndVector) {
  std::vector<float> a = ramp(2 * 2 * 3), w = ramp(3 * 2, 0.2f), v = {1, 2};
  B m;
  m.input("a", {2, 2, 3}).init("w", {3, 2}, w).init("v", {2}, v).output("y");
  m.node("MatMul", {"a", "w"}, {"t"});
  m.node("MatMul", {"t", "v"}, {"y"}); // [2,2,2] x [2] -> [2,2]
  std::vector<double> e;
  for (int r = 0; r < 4; r++) {
    double s = 0;
    for (int c = 0; c < 2; c++) {
      double t = 0;
      for (int k = 0; k < 3; k++)
        t += double(a[r * 3 + k]) * w[k * 2 + c];
      s += t * v[c];
    }
    e.push_back(s);
  }
  std::map<std::string, Tensor> in;
  in.emplace("a", floats({2, 2, 3}, a));
  expectValues(run(m, std::move(in)), {2, 2}, e);
}

TEST_F(ImporterTest, MaxPoolCeilModeAndAvgPoolCountIncludePad) {
  std::vector<float> x(16);
  for (int i = 0; i < 16; i++)
    x[i] = float(i);
  B m(11);
  m.input("x", {1, 1, 4, 4}).output("y").output("z");
  auto &mp = m.node("MaxPool", {"x"}, {"y"});
  B::attrInts(mp, "kernel_shape", {3, 3});
  B::attrInts(mp, "strides", {2, 2});
  B::attrInt(mp, "ceil_mode", 1);
  auto &ap = m.node("AveragePool", {"x"}, {"z"});
  B::attrInts(ap, "kernel_shape", {2, 2});
  B::attrInts(ap, "pads", {1, 1, 0, 0});
  B::attrInt(ap, "count_include_pad", 1);
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({1, 1, 4, 4}, x));
  // ceil((4-3)/2)+1 = 2 windows: rows/cols {0..2}, {2..3}.
  expectValues(run(m, std::move(in), "y"), {1, 1, 2, 2}, {10, 11, 14, 15});
  // 4x4 windows of 2x2 over the input padded by one row/column at the top/left, /4.
  std::vector<double> e;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      double s = 0;
      for (int a = i - 1; a <= i; a++)
        for (int b = j - 1; b <= j; b++)
          if (a >= 0 && b >= 0)
            s += a * 4 + b;
      e.push_back(s / 4);
    }
  expectValues(bindings_.get(model_.getOutputPlaceholder("z")), {1, 1, 4, 4}, e);
}

TEST_F(ImporterTest, GlobalPoolsAndFlatten) {
  std::vector<float> x = ramp(2 * 3 * 2 * 2);
  B m;
  m.input("x", {2, 3, 2, 2}).output("y").output("z");
  m.node("GlobalAveragePool", {"x"}, {"g"});
  auto &f = m.node("Flatten", {"g"}, {"y"});
  B::attrInt(f, "axis", 1);
  m.node("GlobalMaxPool", {"x"}, {"z"});
  std::vector<double> avg, mx;
  for (int i = 0; i < 6; i++) {
    double s = 0, mm = -1e9;
    for (int k = 0; k < 4; k++) {
      s += x[i * 4 + k];
      mm = std::max(mm, double(x[i * 4 + k]));
    }
    avg.push_back(s / 4);
    mx.push_back(mm);
  }
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({2, 3, 2, 2}, x));
  expectValues(run(m, std::move(in)), {2, 3}, avg);
  expectValues(bindings_.get(model_.getOutputPlaceholder("z")), {2, 3, 1, 1}, mx);
}

TEST_F(ImporterTest, BatchNormalization) {
  std::vector<float> x = ramp(1 * 2 * 2 * 2);
  B m;
  m.input("x", {1, 2, 2, 2}).init("s", {2}, {2, 0.5f}).init("b", {2}, {1, -1})
      .init("mean", {2}, {0.1f, -0.1f}).init("var", {2}, {4, 0.25f}).output("y");
  auto &bn = m.node("BatchNormalization", {"x", "s", "b", "mean", "var"}, {"y"});
  B::attrFloat(bn, "epsilon", 0.0f);
  std::vector<double> e;
  for (int c = 0; c < 2; c++)
    for (int i = 0; i < 4; i++) {
      double s[] = {2, 0.5}, b[] = {1, -1}, mu[] = {0.1, -0.1}, sd[] = {2, 0.5};
      e.push_back((x[c * 4 + i] - mu[c]) / sd[c] * s[c] + b[c]);
    }
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({1, 2, 2, 2}, x));
  expectValues(run(m, std::move(in)), {1, 2, 2, 2}, e);
}

std::vector<double> softmaxRows(const std::vector<float> &x, size_t rows, size_t cols) {
  std::vector<double> y;
  for (size_t r = 0; r < rows; r++) {
    double mx = -1e30, s = 0;
    for (size_t c = 0; c < cols; c++)
      mx = std::max(mx, double(x[r * cols + c]));
    for (size_t c = 0; c < cols; c++)
      s += std::exp(x[r * cols + c] - mx);
    for (size_t c = 0; c < cols; c++)
      y.push_back(std::exp(x[r * cols + c] - mx) / s);
  }
  return y;
}

TEST_F(ImporterTest, SoftmaxOpset11CoercesTo2D) {
  std::vector<float> x = ramp(2 * 3 * 4);
  B m(11);
  m.input("x", {2, 3, 4}).output("y");
  m.node("Softmax", {"x"}, {"y"}); // axis 1: rows of 12
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({2, 3, 4}, x));
  expectValues(run(m, std::move(in)), {2, 3, 4}, softmaxRows(x, 2, 12));
}

TEST_F(ImporterTest, SoftmaxOpset13SingleAxis) {
  std::vector<float> x = ramp(2 * 3);
  B m(13);
  m.input("x", {2, 3}).output("y");
  auto &s = m.node("Softmax", {"x"}, {"y"});
  B::attrInt(s, "axis", 0);
  std::vector<float> xt = {x[0], x[3], x[1], x[4], x[2], x[5]};
  std::vector<double> et = softmaxRows(xt, 3, 2), e(6);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++)
      e[j * 3 + i] = et[i * 2 + j];
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({2, 3}, x));
  expectValues(run(m, std::move(in)), {2, 3}, e);
}

TEST_F(ImporterTest, ElementwiseBroadcastInsertsBroadcastNodes) {
  B m;
  m.input("a", {2, 3}).input("b", {3}).init("k", {}, {2.0f}).output("y");
  m.node("Add", {"a", "b"}, {"s"});
  m.node("Mul", {"s", "k"}, {"y"});
  std::map<std::string, Tensor> in;
  in.emplace("a", floats({2, 3}, {1, 2, 3, 4, 5, 6}));
  in.emplace("b", floats({3}, {10, 20, 30}));
  expectValues(run(m, std::move(in)), {2, 3}, {22, 44, 66, 28, 50, 72});
  EXPECT_EQ(count(NodeKind::Broadcast), 1u);
  EXPECT_EQ(count(NodeKind::Splat), 1u); // the scalar constant
}

TEST_F(ImporterTest, ShapeSubgraphIsFoldedAtLoadTime) {
  // y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])): [2,3,4] -> [2,12].
  B m(13);
  m.input("x", {2, 3, 4}).initI64("zero", {}, {0}).initI64("ax", {1}, {0})
      .initI64("minus1", {1}, {-1}).output("y");
  m.node("Shape", {"x"}, {"shape"});
  m.node("Gather", {"shape", "zero"}, {"n"});
  m.node("Unsqueeze", {"n", "ax"}, {"n1"});
  auto &c = m.node("Concat", {"n1", "minus1"}, {"target"});
  B::attrInt(c, "axis", 0);
  m.node("Cast", {"target"}, {"target64"});
  B::attrInt(m.graph().mutable_node(4)[0], "to", TP::INT64);
  m.node("Reshape", {"x", "target64"}, {"y"});
  std::vector<float> x = ramp(24);
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({2, 3, 4}, x));
  std::vector<double> e(x.begin(), x.end());
  expectValues(run(m, std::move(in)), {2, 12}, e);
  EXPECT_EQ(F_->numNodes(), 2u) << F_->toString(); // Reshape and Save only
  EXPECT_EQ(ee_.getModule().getConstants().size(), 0u);
}

TEST_F(ImporterTest, ReshapeZeroAndMinusOneAndSymbolicBatch) {
  B m(13);
  m.input("x", {-1, 3, 4}).initI64("shape", {3}, {0, -1, 2}).output("y");
  m.node("Reshape", {"x", "shape"}, {"y"});
  ONNXLoadOptions o;
  o.symbolicDims["N"] = 2;
  std::vector<float> x = ramp(24);
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({2, 3, 4}, x));
  expectValues(run(m, std::move(in), "y", o), {2, 6, 2}, std::vector<double>(x.begin(), x.end()));
}

TEST_F(ImporterTest, SqueezeUnsqueezeAttrFormOpset11) {
  B m(11);
  m.input("x", {1, 3, 1}).output("y");
  auto &s = m.node("Squeeze", {"x"}, {"s"});
  B::attrInts(s, "axes", {0, -1});
  auto &u = m.node("Unsqueeze", {"s"}, {"y"});
  B::attrInts(u, "axes", {0, 2});
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({1, 3, 1}, {1, 2, 3}));
  expectValues(run(m, std::move(in)), {1, 3, 1}, {1, 2, 3});
}

TEST_F(ImporterTest, SqueezeUnsqueezeInputFormOpset13) {
  B m(13);
  m.input("x", {1, 3, 1}).initI64("a", {1}, {2}).initI64("b", {2}, {0, 3}).output("y");
  m.node("Squeeze", {"x", "a"}, {"s"});        // [1,3]
  m.node("Unsqueeze", {"s", "b"}, {"y"});      // [1,1,3,1]
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({1, 3, 1}, {1, 2, 3}));
  expectValues(run(m, std::move(in)), {1, 1, 3, 1}, {1, 2, 3});
}

TEST_F(ImporterTest, SliceOpset9AttributesAndOpset13Inputs) {
  std::vector<float> x(20);
  for (int i = 0; i < 20; i++)
    x[i] = float(i);
  {
    B m(9);
    m.input("x", {4, 5}).output("y");
    auto &s = m.node("Slice", {"x"}, {"y"});
    B::attrInts(s, "starts", {1, -3});
    B::attrInts(s, "ends", {1000, -1});
    B::attrInts(s, "axes", {0, 1});
    std::map<std::string, Tensor> in;
    in.emplace("x", floats({4, 5}, x));
    expectValues(run(m, std::move(in)), {3, 2}, {7, 8, 12, 13, 17, 18});
  }
}

TEST_F(ImporterTest, SliceOpset13InputsNegativeAndClamped) {
  std::vector<float> x(20);
  for (int i = 0; i < 20; i++)
    x[i] = float(i);
  B m(13);
  m.input("x", {4, 5}).initI64("st", {1}, {-100}).initI64("en", {1}, {INT64_MAX})
      .initI64("ax", {1}, {-1}).initI64("st2", {1}, {2}).initI64("en2", {1}, {3})
      .initI64("ax2", {1}, {0}).output("y");
  m.node("Slice", {"x", "st", "en", "ax"}, {"t"}); // whole rows
  m.node("Slice", {"t", "st2", "en2", "ax2"}, {"y"});
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({4, 5}, x));
  expectValues(run(m, std::move(in)), {1, 5}, {10, 11, 12, 13, 14});
}

TEST_F(ImporterTest, SplitAndConcat) {
  B m(13);
  m.input("x", {2, 5}).initI64("split", {2}, {2, 3}).output("y");
  auto &s = m.node("Split", {"x", "split"}, {"a", "b"});
  B::attrInt(s, "axis", 1);
  auto &c = m.node("Concat", {"b", "a"}, {"y"});
  B::attrInt(c, "axis", -1);
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  expectValues(run(m, std::move(in)), {2, 5}, {2, 3, 4, 0, 1, 7, 8, 9, 5, 6});
}

TEST_F(ImporterTest, GatherTransposeTileExpandPad) {
  B m(13);
  m.input("x", {3, 2}).initI64("idx", {2}, {2, 0}).initI64("reps", {2}, {1, 2})
      .initI64("shape", {3}, {2, 1, 1}).initI64("pads", {6}, {0, 0, 1, 0, 0, 0}).output("y");
  auto &g = m.node("Gather", {"x", "idx"}, {"g"}); // rows 2, 0: [[4,5],[0,1]]
  B::attrInt(g, "axis", 0);
  m.node("Transpose", {"g"}, {"t"});                // [[4,0],[5,1]]
  m.node("Tile", {"t", "reps"}, {"tt"});            // [[4,0,4,0],[5,1,5,1]]
  m.node("Expand", {"tt", "shape"}, {"e"});         // [2,2,4]
  m.node("Pad", {"e", "pads"}, {"y"});              // [2,2,5] with a leading zero column
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({3, 2}, {0, 1, 2, 3, 4, 5}));
  std::vector<double> row = {0, 4, 0, 4, 0, 0, 5, 1, 5, 1};
  std::vector<double> e(row);
  e.insert(e.end(), row.begin(), row.end());
  expectValues(run(m, std::move(in)), {2, 2, 5}, e);
}

TEST_F(ImporterTest, ReductionsAndArgMax) {
  B m(13);
  m.input("x", {2, 3}).initI64("axes", {1}, {1}).output("y").output("z").output("w", TP::INT64);
  m.node("ReduceSum", {"x", "axes"}, {"y"});
  auto &r = m.node("ReduceMean", {"x"}, {"z"});
  B::attrInts(r, "axes", {0});
  B::attrInt(r, "keepdims", 0);
  auto &a = m.node("ArgMax", {"x"}, {"w"});
  B::attrInt(a, "axis", 1);
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({2, 3}, {1, 5, 2, 7, 3, 4}));
  expectValues(run(m, std::move(in)), {2, 1}, {8, 14});
  expectValues(bindings_.get(model_.getOutputPlaceholder("z")), {3}, {4, 4, 3});
  expectValues(bindings_.get(model_.getOutputPlaceholder("w")), {2, 1}, {1, 0});
}

TEST_F(ImporterTest, ClipAttributeFormOpset7AndInputFormOpset13) {
  {
    B m(7);
    m.input("x", {4}).output("y");
    auto &c = m.node("Clip", {"x"}, {"y"});
    B::attrFloat(c, "min", -1);
    B::attrFloat(c, "max", 2);
    std::map<std::string, Tensor> in;
    in.emplace("x", floats({4}, {-3, 0.5f, 1.5f, 9}));
    expectValues(run(m, std::move(in)), {4}, {-1, 0.5, 1.5, 2});
  }
}

TEST_F(ImporterTest, ClipInputFormOpset13WithOnlyMax) {
  B m(13);
  m.input("x", {4}).init("hi", {}, {1.0f}).output("y");
  m.node("Clip", {"x", "", "hi"}, {"y"});
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({4}, {-3, 0.5f, 1.5f, 9}));
  expectValues(run(m, std::move(in)), {4}, {-3, 0.5, 1, 1});
}

TEST_F(ImporterTest, CompareWhereCast) {
  B m(13);
  m.input("a", {4}).input("b", {4}).output("y").output("c", TP::INT32);
  m.node("Greater", {"a", "b"}, {"gt"});
  m.node("Where", {"gt", "a", "b"}, {"y"}); // max(a, b)
  auto &c = m.node("Cast", {"a"}, {"c"});
  B::attrInt(c, "to", TP::INT32);
  std::map<std::string, Tensor> in;
  in.emplace("a", floats({4}, {1, -2.7f, 3, 2.5f}));
  in.emplace("b", floats({4}, {0, 5, 3, -1}));
  expectValues(run(m, std::move(in)), {4}, {1, 5, 3, 2.5});
  // Cast truncates toward zero.
  expectValues(bindings_.get(model_.getOutputPlaceholder("c")), {4}, {1, -2, 3, 2});
}

TEST_F(ImporterTest, ConstantConstantOfShapeIdentityDropout) {
  B m(13);
  m.input("x", {2, 2}).initI64("shape", {2}, {2, 2}).output("y");
  auto &k = m.node("Constant", {}, {"k"});
  B::attrTensor(k, "value", B::floatTensor("", {2, 2}, {1, 2, 3, 4}));
  auto &cs = m.node("ConstantOfShape", {"shape"}, {"ones"});
  B::attrTensor(cs, "value", B::floatTensor("", {1}, {0.5f}));
  m.node("Add", {"x", "k"}, {"s"});
  m.node("Mul", {"s", "ones"}, {"d"});
  m.node("Dropout", {"d"}, {"i"});
  m.node("Identity", {"i"}, {"y"});
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({2, 2}, {1, 1, 1, 1}));
  expectValues(run(m, std::move(in)), {2, 2}, {1, 1.5, 2, 2.5});
}

TEST_F(ImporterTest, LayerNormalizationOpset17) {
  std::vector<float> x = ramp(2 * 4);
  B m(17);
  m.input("x", {2, 4}).init("s", {4}, {1, 2, 1, 2}).init("b", {4}, {0, 0, 1, 1}).output("y");
  m.node("LayerNormalization", {"x", "s", "b"}, {"y"});
  std::vector<double> e;
  for (int r = 0; r < 2; r++) {
    double mu = 0, var = 0;
    for (int c = 0; c < 4; c++)
      mu += x[r * 4 + c] / 4.0;
    for (int c = 0; c < 4; c++)
      var += (x[r * 4 + c] - mu) * (x[r * 4 + c] - mu) / 4.0;
    double s[] = {1, 2, 1, 2}, b[] = {0, 0, 1, 1};
    for (int c = 0; c < 4; c++)
      e.push_back((x[r * 4 + c] - mu) / std::sqrt(var + 1e-5) * s[c] + b[c]);
  }
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({2, 4}, x));
  expectValues(run(m, std::move(in)), {2, 4}, e, 1e-3);
}

TEST_F(ImporterTest, ActivationsComposedFromPrimitives) {
  B m(13);
  m.input("x", {4}).output("y").output("z").output("w");
  auto &e = m.node("Elu", {"x"}, {"y"});
  B::attrFloat(e, "alpha", 0.5f);
  m.node("HardSigmoid", {"x"}, {"z"});
  m.node("Softplus", {"x"}, {"w"});
  std::vector<float> x = {-2, -0.5f, 0.5f, 3};
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({4}, x));
  std::vector<double> ey, ez, ew;
  for (float v : x) {
    ey.push_back(v > 0 ? v : 0.5 * (std::exp(v) - 1));
    ez.push_back(std::min(1.0, std::max(0.0, 0.2 * v + 0.5)));
    ew.push_back(std::log(1 + std::exp(double(v))));
  }
  expectValues(run(m, std::move(in)), {4}, ey);
  expectValues(bindings_.get(model_.getOutputPlaceholder("z")), {4}, ez);
  expectValues(bindings_.get(model_.getOutputPlaceholder("w")), {4}, ew);
}

TEST_F(ImporterTest, ResizeNearestIntegerScale) {
  B m(13);
  m.input("x", {1, 1, 2, 2}).init("scales", {4}, {1, 1, 2, 3}).output("y");
  auto &r = m.node("Resize", {"x", "", "scales"}, {"y"});
  B::attrString(r, "mode", "nearest");
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({1, 1, 2, 2}, {1, 2, 3, 4}));
  expectValues(run(m, std::move(in)), {1, 1, 4, 6},
               {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
}

TEST_F(ImporterTest, ResizeLinearOfIntegersIsUnsupported) {
  B m(13);
  m.input("x", {1, 1, 2, 2}, TP::INT32).init("scales", {4}, {1, 1, 2, 2}).output("y", TP::INT32);
  auto &r = m.node("Resize", {"x", "", "scales"}, {"y"}, "up");
  B::attrString(r, "mode", "linear");
  Error e = load(m);
  ASSERT_TRUE(e);
  EXPECT_EQ(e.code(), ErrorCode::Unsupported);
  EXPECT_NE(e.message().find("'up' (Resize, opset 13)"), std::string::npos) << e.message();
}

TEST_F(ImporterTest, SliceWithStepsUsesGather) {
  B m(13);
  m.input("x", {2, 6}).initI64("st", {2}, {-1, 5}).initI64("en", {2}, {INT64_MIN, 0})
      .initI64("ax", {2}, {0, 1}).initI64("sp", {2}, {-1, -2}).output("y");
  m.node("Slice", {"x", "st", "en", "ax", "sp"}, {"y"});
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({2, 6}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  // Rows reversed; columns 5, 3, 1.
  expectValues(run(m, std::move(in)), {2, 3}, {11, 9, 7, 5, 3, 1});
}

TEST_F(ImporterTest, ArgMinSelectLastIndex) {
  B m(13);
  m.input("x", {2, 4}).output("y", TP::INT64);
  auto &a = m.node("ArgMin", {"x"}, {"y"});
  B::attrInt(a, "axis", 1);
  B::attrInt(a, "keepdims", 0);
  B::attrInt(a, "select_last_index", 1);
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({2, 4}, {1, 0, 3, 0, 2, 2, 5, 2}));
  expectValues(run(m, std::move(in)), {2}, {3, 3});
}

TEST_F(ImporterTest, ConstantInputsOption) {
  // A shape fed as a graph input folds when its value is given at load time.
  B m(13);
  m.input("x", {2, 3}).input("shape", {2}, TP::INT64).output("y");
  m.node("Reshape", {"x", "shape"}, {"y"});
  Tensor shape(ElemKind::Int64I, {2}, {3, 2});
  ONNXLoadOptions o;
  o.constantInputs["shape"] = &shape;
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({2, 3}, {1, 2, 3, 4, 5, 6}));
  expectValues(run(m, std::move(in), "y", o), {3, 2}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(model_.inputNames, std::vector<std::string>{"x"});
}

TEST_F(ImporterTest, SymbolicDimDefaultsAndFixedShapes) {
  B m(13);
  m.input("x", {-1, 2}).output("y");
  m.node("Relu", {"x"}, {"y"});
  ASSERT_FALSE(load(m));
  EXPECT_EQ(model_.getInput("x")->getType()->dims, Dims({1, 2}));
}

TEST_F(ImporterTest, SymbolicDimWithoutValueIsAnError) {
  B m(13);
  m.input("x", {-1, 2}).output("y");
  m.node("Relu", {"x"}, {"y"});
  ONNXLoadOptions o;
  o.defaultSymbolicDim = 0;
  Error e = load(m, o);
  ASSERT_TRUE(e);
  EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  EXPECT_NE(e.message().find("symbolic"), std::string::npos) << e.message();
}

TEST_F(ImporterTest, InputShapesOption) {
  B m(13);
  m.input("x", {1, 2}).output("y");
  m.node("Relu", {"x"}, {"y"});
  ONNXLoadOptions o;
  o.inputShapes["x"] = {3, 2};
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({3, 2}, {-1, 1, -2, 2, -3, 3}));
  expectValues(run(m, std::move(in), "y", o), {3, 2}, {0, 1, 0, 2, 0, 3});
}

TEST_F(ImporterTest, InitializerListedAsInputIsAConstant) {
  B m(13);
  m.input("x", {2}).input("w", {2}).init("w", {2}, {3, 4}).output("y");
  m.node("Mul", {"x", "w"}, {"y"});
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({2}, {1, 2}));
  expectValues(run(m, std::move(in)), {2}, {3, 8});
  EXPECT_EQ(model_.inputNames.size(), 1u);
  EXPECT_EQ(model_.getInput("w"), nullptr);
}

TEST_F(ImporterTest, TensorFilesRoundTrip) {
  onnx::TensorProto t = B::floatTensor("in", {2, 2}, {1, 2, 3, 4}, true);
  std::string s = t.SerializeAsString();
  std::string name;
  Expected<Tensor> r = loadONNXTensorFromBuffer(s.data(), s.size(), &name);
  ASSERT_TRUE(r) << r.getError().toString();
  EXPECT_EQ(name, "in");
  expectValues(&*r, {2, 2}, {1, 2, 3, 4});
  onnx::TensorProto d;
  d.set_data_type(TP::DOUBLE);
  d.add_dims(2);
  d.add_double_data(0.5);
  d.add_double_data(-1.5);
  s = d.SerializeAsString();
  r = loadONNXTensorFromBuffer(s.data(), s.size());
  ASSERT_TRUE(r) << r.getError().toString();
  EXPECT_EQ(r->getElementType(), ElemKind::Float);
  expectValues(&*r, {2}, {0.5, -1.5});
}

} // namespace
} // namespace kiln::test
