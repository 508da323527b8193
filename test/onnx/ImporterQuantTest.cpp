// The quantization converters (src/Importer/ConvertQuant.cpp): QuantizeLinear,
// DequantizeLinear, QLinearConv, MatMulInteger, QLinearMatMul, com.microsoft QLinearAdd, and
// 8-bit initializers kept 8-bit. Expected values are worked out by hand in the comments.

#include "ImporterTestBase.h"

namespace kiln::test {
namespace {

using TP = onnx::TensorProto;

/// An INT8 / UINT8 (or INT32) initializer; \p raw stores raw_data, else int32_data.
void init8(ONNXBuilder &b, const std::string &name, std::vector<int64_t> dims,
           const std::vector<int> &v, int32_t type, bool raw = false) {
  TP *t = b.rawInit();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims)
    t->add_dims(d);
  if (raw && type != TP::INT32) {
    std::string bytes;
    for (int x : v)
      bytes.push_back(char(x));
    t->set_raw_data(bytes);
  } else {
    for (int x : v)
      t->add_int32_data(x);
  }
}

std::map<std::string, Tensor> one(const std::string &name, Tensor t) {
  std::map<std::string, Tensor> m;
  m.emplace(name, std::move(t));
  return m;
}

const Constant *constantOfKind(Module &m, ElemKind k) {
  for (const auto &c : m.getConstants())
    if (c->getType()->kind == k)
      return c.get();
  return nullptr;
}

// float x -> QuantizeLinear (0.5, uint8 128) -> QLinearConv with int8 per-channel weights
// -> DequantizeLinear. x [0.5, -1, 2, 0] -> q [129, 126, 132, 128], centred [1, -2, 4, 0].
// Channel 0: w 4, scale 0.25, bias 3 (units of 0.5 * 0.25): acc [4, -8, 16, 0] + 3 ->
// reals 0.125 * [7, -5, 19, 3] = [0.875, -0.625, 2.375, 0.375] -> / 0.5 rounded + 100:
// [102, 99, 105, 101] -> dequantized [1, -0.5, 2.5, 0.5]. Channel 1: w -2, scale 1, bias -1:
// acc [-3, 3, -9, -1] -> reals 0.5 * acc -> [97, 103, 91, 99] -> [-1.5, 1.5, -4.5, -0.5].
TEST_F(ImporterTest, QDQAroundQLinearConvWithPerChannelInt8Weights) {
  ONNXBuilder b(13);
  b.input("x", {1, 1, 2, 2});
  b.init("xs", {}, {0.5f});
  init8(b, "xz", {}, {128}, TP::UINT8);
  init8(b, "w", {2, 1, 1, 1}, {4, -2}, TP::INT8, /*raw=*/true);
  b.init("ws", {2}, {0.25f, 1.0f});
  init8(b, "wz", {2}, {0, 0}, TP::INT8);
  b.init("ys", {}, {0.5f});
  init8(b, "yz", {}, {100}, TP::UINT8);
  init8(b, "bias", {2}, {3, -1}, TP::INT32);
  b.node("QuantizeLinear", {"x", "xs", "xz"}, {"q"});
  b.node("QLinearConv", {"q", "xs", "xz", "w", "ws", "wz", "ys", "yz", "bias"}, {"qy"});
  b.node("DequantizeLinear", {"qy", "ys", "yz"}, {"y"});
  b.output("y");
  const Tensor *y = run(b, one("x", floats({1, 1, 2, 2}, {0.5f, -1, 2, 0})));
  expectValues(y, {1, 2, 2, 2}, {1, -0.5, 2.5, 0.5, -1.5, 1.5, -4.5, -0.5}, 0);
  EXPECT_EQ(count(NodeKind::ChannelwiseQuantizedConvolution), 1u);
  // The int8 weights stay 8-bit.
  const Constant *w = constantOfKind(ee_.getModule(), ElemKind::Int8Q);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->getType()->toString(), "i8q<2x1x1x1:1:0>");
}

// MatMulInteger of a uint8 graph input (zero point 5) and int8 weights with a zero point per
// column (1, -1): centred A [[5, 15, 25], [-5, 0, 250]], B columns [0, 1, -4] and [0, 1, 5]:
// [[-85, 140], [-1000, 1250]].
TEST_F(ImporterTest, MatMulIntegerPerColumnZeroPoints) {
  ONNXBuilder b(13);
  b.input("a", {2, 3}, TP::UINT8);
  init8(b, "az", {}, {5}, TP::UINT8);
  init8(b, "bm", {3, 2}, {1, -1, 2, 0, -3, 4}, TP::INT8);
  init8(b, "bz", {2}, {1, -1}, TP::INT8);
  b.node("MatMulInteger", {"a", "bm", "az", "bz"}, {"y"});
  b.output("y", TP::INT32);
  Tensor a(ElemKind::Int32I, {2, 3});
  int av[6] = {10, 20, 30, 0, 5, 255};
  for (int i = 0; i < 6; i++)
    a.getHandle<int32_t>().raw(i) = av[i];
  const Tensor *y = run(b, one("a", std::move(a)));
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->getElementType(), ElemKind::Int32I);
  expectValues(y, {2, 2}, {-85, 140, -1000, 1250}, 0);
}

TEST_F(ImporterTest, MatMulIntegerPerRowZeroPointIsRefused) {
  ONNXBuilder b(13);
  b.input("a", {2, 3}, TP::UINT8);
  init8(b, "az", {2}, {5, 6}, TP::UINT8);
  init8(b, "bm", {3, 2}, {1, -1, 2, 0, -3, 4}, TP::INT8);
  b.node("MatMulInteger", {"a", "bm", "az"}, {"y"}, "mmi");
  b.output("y", TP::INT32);
  Error e = load(b);
  ASSERT_TRUE(bool(e));
  EXPECT_EQ(e.code(), ErrorCode::Unsupported);
  for (const char *part : {"'mmi'", "MatMulInteger", "a_zero_point 2", "(a 2x3)"})
    EXPECT_NE(e.message().find(part), std::string::npos) << part << " in " << e.message();
}

// QuantizeLinear with its scale and zero point computed at run time (DynamicQuantizeLinear's
// expansion): scale s = 0.5 and a uint8 zero point Cast from float zf = 10. x [1, 1.25,
// -0.25, 700] / 0.5 = [2, 2.5, -0.5, 1400], halves to even [2, 2, -0, 1400], + 10 = [12, 12,
// 10, 1410], saturated to uint8 [12, 12, 10, 255].
TEST_F(ImporterTest, QuantizeLinearScaleAndZeroPointAtRunTime) {
  ONNXBuilder b(13);
  b.input("x", {4}).input("s", {}).input("zf", {});
  auto &cast = b.node("Cast", {"zf"}, {"z"});
  ONNXBuilder::attrInt(cast, "to", TP::UINT8);
  b.node("QuantizeLinear", {"x", "s", "z"}, {"y"}, "ql");
  b.output("y", TP::UINT8);
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({4}, {1, 1.25f, -0.25f, 700}));
  in.emplace("s", floats({}, {0.5f}));
  in.emplace("zf", floats({}, {10}));
  const Tensor *y = run(b, std::move(in), "y");
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->getElementType(), ElemKind::UInt8Q);
  expectValues(y, {4}, {12, 12, 10, 255}, 0);
}

// The same per axis 1 of a [2, 2] input with run-time scales [0.5, 2] and an int8 zero
// point Cast from float 5 (one for every channel): x [[100, 3], [-100, 0.75]] / s =
// [[200, 1.5], [-200, 0.375]] -> [[200, 2], [-200, 0]] + 5 -> int8 [[127, 7], [-128, 5]].
TEST_F(ImporterTest, PerAxisQuantizeLinearAtRunTime) {
  ONNXBuilder b(13);
  b.input("x", {2, 2}).input("s", {2}).input("zf", {});
  auto &cast = b.node("Cast", {"zf"}, {"z"});
  ONNXBuilder::attrInt(cast, "to", TP::INT8);
  b.node("QuantizeLinear", {"x", "s", "z"}, {"y"});
  b.output("y", TP::INT8);
  std::map<std::string, Tensor> in;
  in.emplace("x", floats({2, 2}, {100, 3, -100, 0.75f}));
  in.emplace("s", floats({2}, {0.5f, 2}));
  in.emplace("zf", floats({}, {5}));
  const Tensor *y = run(b, std::move(in), "y");
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->getElementType(), ElemKind::Int8Q);
  expectValues(y, {2, 2}, {127, 7, -128, 5}, 0);
}

// A run-time scale must be one value or one per channel: a [2, 2] scale is refused, naming
// the node and the shape.
TEST_F(ImporterTest, QuantizeLinearMatrixScaleAtRunTimeIsRefused) {
  ONNXBuilder b(13);
  b.input("x", {2, 2}).input("s", {2, 2});
  b.node("QuantizeLinear", {"x", "s"}, {"y"}, "ql");
  b.output("y", TP::UINT8);
  Error e = load(b);
  ASSERT_TRUE(bool(e));
  for (const char *part : {"'ql'", "QuantizeLinear", "y_scale", "2x2"})
    EXPECT_NE(e.message().find(part), std::string::npos) << part << " in " << e.message();
}

TEST_F(ImporterTest, QLinearMatMulBroadcastBatchIsRefused) {
  ONNXBuilder b(13);
  b.input("a", {2, 2, 3}, TP::UINT8).input("bm", {1, 3, 4}, TP::UINT8);
  b.init("s", {}, {0.5f});
  init8(b, "z", {}, {0}, TP::UINT8);
  b.node("QLinearMatMul", {"a", "s", "z", "bm", "s", "z", "s", "z"}, {"y"}, "qmm");
  b.output("y", TP::UINT8);
  Error e = load(b);
  ASSERT_TRUE(bool(e));
  for (const char *part : {"'qmm'", "QLinearMatMul", "1x3x4", "2x2x3"})
    EXPECT_NE(e.message().find(part), std::string::npos) << part << " in " << e.message();
}

// Per-axis: DequantizeLinear of constant int8 weights [[1, -2], [3, 4]] along axis 0 with
// scales [0.5, 2] and zero points [0, 1]: [[0.5, -1], [4, 6]] (folded). QuantizeLinear of x
// [[1, 3], [-0.25, 5]] along axis 1 with scales [0.5, 2] and uint8 zero points [10, 20]:
// x / s = [[2, 1.5], [-0.5, 2.5]], halves to even (ONNX) -> [[2, 2], [0, 2]] -> [[12, 22],
// [10, 22]].
TEST_F(ImporterTest, PerAxisQuantizeAndDequantizeLinear) {
  ONNXBuilder b(13);
  b.input("x", {2, 2});
  init8(b, "w", {2, 2}, {1, -2, 3, 4}, TP::INT8);
  b.init("ws", {2}, {0.5f, 2.0f});
  init8(b, "wz", {2}, {0, 1}, TP::INT8);
  init8(b, "xz", {2}, {10, 20}, TP::UINT8);
  auto &dq = b.node("DequantizeLinear", {"w", "ws", "wz"}, {"wf"});
  ONNXBuilder::attrInt(dq, "axis", 0);
  b.node("QuantizeLinear", {"x", "ws", "xz"}, {"y"});
  b.output("wf");
  b.output("y", TP::UINT8);
  const Tensor *wf = run(b, one("x", floats({2, 2}, {1, 3, -0.25f, 5})), "wf");
  expectValues(wf, {2, 2}, {0.5, -1, 4, 6}, 0);
  const Tensor *y = bindings_.get(model_.getOutputPlaceholder("y"));
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->getElementType(), ElemKind::UInt8Q);
  expectValues(y, {2, 2}, {12, 22, 10, 22}, 0);
}

// com.microsoft QLinearAdd: A uint8 [10, 20] (0.5, 10) = [0, 5]; B int8 [4, -4] (0.25, 0) =
// [1, -1]; the sum [1, 4] at (0.5, 0) is [2, 8].
TEST_F(ImporterTest, MicrosoftQLinearAdd) {
  ONNXBuilder b(13);
  b.input("a", {2}, TP::UINT8);
  b.init("as", {}, {0.5f});
  init8(b, "az", {}, {10}, TP::UINT8);
  init8(b, "bb", {2}, {4, -4}, TP::INT8);
  b.init("bs", {}, {0.25f});
  init8(b, "bz", {}, {0}, TP::INT8);
  b.init("cs", {}, {0.5f});
  init8(b, "cz", {}, {0}, TP::UINT8);
  auto &n = b.node("QLinearAdd", {"a", "as", "az", "bb", "bs", "bz", "cs", "cz"}, {"y"});
  n.set_domain("com.microsoft");
  b.output("y", TP::UINT8);
  Tensor a(ElemKind::Int32I, {2});
  a.getHandle<int32_t>().raw(0) = 10;
  a.getHandle<int32_t>().raw(1) = 20;
  const Tensor *y = run(b, one("a", std::move(a)));
  expectValues(y, {2}, {2, 8}, 0);
}

} // namespace
} // namespace kiln::test
