// Malformed and unsupported models: each returns an Error with the right code and a message
// that names what is wrong; nothing crashes.

#include "ImporterTestBase.h"

#include <cstring>

namespace kiln::test {
namespace {

using TP = onnx::TensorProto;
using B = ONNXBuilder;

B reluModel() {
  B m(13);
  m.input("x", {2, 3}).init("w", {2, 3}, std::vector<float>(6, 1.0f)).output("y");
  m.node("Add", {"x", "w"}, {"s"}, "add");
  m.node("Relu", {"s"}, {"y"}, "relu");
  return m;
}

Error loadBytes(const std::string &bytes, Function *F) {
  Expected<ONNXModel> m = loadONNXFromBuffer(bytes.data(), bytes.size(), F);
  return m ? Error::success() : m.takeError();
}

void expectError(const Error &e, ErrorCode code, std::vector<std::string> parts) {
  ASSERT_TRUE(e) << "expected an error";
  EXPECT_EQ(e.code(), code) << e.toString();
  for (const auto &p : parts)
    EXPECT_NE(e.message().find(p), std::string::npos) << "'" << p << "' not in: " << e.message();
}

TEST_F(ImporterTest, ValidModelLoads) { ASSERT_FALSE(load(reluModel())); }

TEST_F(ImporterTest, TruncatedFileAtEveryLength) {
  std::string bytes = reluModel().bytes();
  // Every strict prefix either fails to parse (ModelParse) or parses into a smaller but
  // consistent model; none may crash.
  for (size_t len = 0; len < bytes.size(); len++) {
    Module mod;
    Function *f = mod.createFunction("f");
    Error e = loadBytes(bytes.substr(0, len), f);
    if (e) {
      EXPECT_TRUE(e.code() == ErrorCode::ModelParse || e.code() == ErrorCode::Unsupported)
          << "prefix " << len << ": " << e.toString();
    }
  }
  Module mod;
  Error e = loadBytes(bytes.substr(0, bytes.size() / 2), mod.createFunction("f"));
  expectError(e, ErrorCode::ModelParse, {});
}

TEST_F(ImporterTest, RandomByteMutationsNeverCrash) {
  // A deterministic smoke fuzz: flip, insert and delete bytes of a model with a Conv, a
  // shape subgraph and a Gemm; every outcome must be a model or an Error.
  B m(13);
  m.input("x", {1, 2, 4, 4}).init("w", {3, 2, 3, 3}, std::vector<float>(54, 0.1f), true)
      .initI64("shape", {2}, {1, -1}).init("fc", {3, 48}, std::vector<float>(144, 0.5f))
      .output("y");
  auto &c = m.node("Conv", {"x", "w"}, {"c"});
  B::attrInts(c, "pads", {1, 1, 1, 1});
  m.node("Shape", {"c"}, {"s"});
  m.node("Reshape", {"c", "shape"}, {"r"});
  auto &g = m.node("Gemm", {"r", "fc"}, {"y"});
  B::attrInt(g, "transB", 1);
  std::string bytes = m.bytes();
  PseudoRNG rng(7);
  unsigned ok = 0;
  for (int iter = 0; iter < 3000; iter++) {
    std::string b = bytes;
    int edits = int(rng.uniformInt(1, 4));
    for (int e = 0; e < edits && !b.empty(); e++) {
      size_t pos = size_t(rng.uniformInt(0, int64_t(b.size()) - 1));
      switch (rng.uniformInt(0, 2)) {
      case 0: b[pos] = char(rng.uniformInt(0, 255)); break;
      case 1: b.insert(pos, 1, char(rng.uniformInt(0, 255))); break;
      default: b.erase(pos, 1); break;
      }
    }
    Module mod;
    Error err = loadBytes(b, mod.createFunction("f"));
    ok += !err;
  }
  EXPECT_GT(ok, 0u); // some mutations still load
}

TEST_F(ImporterTest, GarbageBytes) {
  std::string junk = "this is not an onnx model \xff\xfe\x01\x02 at all";
  expectError(loadBytes(junk, F_), ErrorCode::ModelParse, {"cannot parse"});
}

TEST_F(ImporterTest, MissingFile) {
  Expected<ONNXModel> m = loadONNX("/nonexistent/model.onnx", F_);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.getError().code(), ErrorCode::NotFound);
}

// A model loaded from a file: its raw_data initializers are read from the file (pread at
// their offsets), its typed-field ones parsed; each value is the one written (a 280 KB
// float weight, a small one in float_data, an int64 shape). Checked through the outputs
// against sums and a reshape computed here.
TEST_F(ImporterTest, InitializersFromAFileKeepTheirValues) {
  const int64_t n = 70000;
  std::vector<float> w(static_cast<size_t>(n)), x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i++) {
    w[size_t(i)] = float(i % 977) * 0.25f - 100.0f;
    x[size_t(i)] = float(i % 13) - 6.0f;
  }
  B m(13);
  m.input("x", {n}).input("x2", {3}).input("x3", {2, 6});
  m.output("y").output("y2").output("y3");
  m.init("w", {n}, w, /*raw=*/true).init("v", {3}, {1.5f, -2.0f, 4.25f});
  onnx::TensorProto *shape = m.rawInit();
  shape->set_name("shape");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(2);
  const int64_t sd[2] = {3, 4};
  shape->set_raw_data(std::string(reinterpret_cast<const char *>(sd), sizeof(sd)));
  m.node("Add", {"x", "w"}, {"y"});
  m.node("Add", {"x2", "v"}, {"y2"});
  m.node("Reshape", {"x3", "shape"}, {"y3"});
  if (Error e = loadFile(m, "initializers_from_a_file.onnx"))
    FAIL() << e.toString();
  Tensor tx(ElemKind::Float, {dim_t(n)});
  std::memcpy(tx.getUnsafePtr(), x.data(), x.size() * 4);
  Tensor tx3(ElemKind::Float, {2, 6});
  for (dim_t i = 0; i < 12; i++)
    tx3.getHandle<float>().raw(i) = float(i);
  std::map<std::string, Tensor> in;
  in.emplace("x", std::move(tx));
  in.emplace("x2", Tensor(ElemKind::Float, {3}, {1, 2, 3}));
  in.emplace("x3", std::move(tx3));
  const Tensor *y = runLoaded(std::move(in));
  ASSERT_TRUE(y);
  for (int64_t i = 0; i < n; i++)
    ASSERT_EQ(y->getHandle<float>().raw(size_t(i)), x[size_t(i)] + w[size_t(i)]) << i;
  const Tensor *y2 = bindings_.get(model_.getOutputPlaceholder("y2"));
  ASSERT_TRUE(y2);
  EXPECT_EQ(y2->getHandle<float>().raw(0), 2.5f);
  EXPECT_EQ(y2->getHandle<float>().raw(1), 0.0f);
  EXPECT_EQ(y2->getHandle<float>().raw(2), 7.25f);
  const Tensor *y3 = bindings_.get(model_.getOutputPlaceholder("y3"));
  ASSERT_TRUE(y3);
  EXPECT_EQ(y3->dims(), Dims({3, 4}));
  for (dim_t i = 0; i < 12; i++)
    EXPECT_EQ(y3->getHandle<float>().raw(i), float(i));
}

TEST_F(ImporterTest, MissingInitializer) {
  B m(13);
  m.input("x", {2, 3}).output("y");
  m.node("Add", {"x", "weights_that_are_missing"}, {"y"}, "the_add");
  expectError(load(m), ErrorCode::ModelParse, {"weights_that_are_missing", "the_add", "Add"});
}

TEST_F(ImporterTest, InconsistentShapes) {
  B m(13);
  m.input("x", {2, 3}).init("w", {4}, {1, 2, 3, 4}).output("y");
  m.node("Add", {"x", "w"}, {"y"}, "bad_add");
  expectError(load(m), ErrorCode::ModelParse, {"bad_add", "2x3", "4"});
}

TEST_F(ImporterTest, InconsistentConvShapes) {
  B m(13);
  m.input("x", {1, 3, 8, 8}).init("w", {4, 5, 3, 3}, std::vector<float>(180, 0.f)).output("y");
  m.node("Conv", {"x", "w"}, {"y"}, "bad_conv");
  expectError(load(m), ErrorCode::ModelParse, {"bad_conv", "Conv"});
}

TEST_F(ImporterTest, RawDataSizeMismatch) {
  B m = reluModel();
  m.graph().mutable_initializer(0)->clear_float_data();
  m.graph().mutable_initializer(0)->set_raw_data(std::string(10, '\0'));
  expectError(load(m), ErrorCode::ModelParse, {"'w'", "10 bytes", "24"});
}

TEST_F(ImporterTest, TypedDataCountMismatch) {
  B m = reluModel();
  m.graph().mutable_initializer(0)->add_float_data(1.0f);
  expectError(load(m), ErrorCode::ModelParse, {"'w'", "7 values", "expected 6"});
}

TEST_F(ImporterTest, BadDataType) {
  B m = reluModel();
  m.graph().mutable_initializer(0)->set_data_type(99);
  expectError(load(m), ErrorCode::ModelParse, {"'w'", "element type 99"});
  B m2(13);
  m2.input("x", {2}, /*type=*/1234).output("y");
  m2.node("Relu", {"x"}, {"y"});
  Module mod;
  Error e = loadBytes(m2.bytes(), mod.createFunction("f"));
  expectError(e, ErrorCode::ModelParse, {"element type 1234"});
}

TEST_F(ImporterTest, StringTensorsAreUnsupported) {
  B m = reluModel();
  m.graph().mutable_initializer(0)->set_data_type(TP::STRING);
  expectError(load(m), ErrorCode::Unsupported, {"STRING"});
}

TEST_F(ImporterTest, AbsurdSizes) {
  B m = reluModel();
  auto *t = m.graph().mutable_initializer(0);
  t->clear_dims();
  t->add_dims(int64_t(1) << 40);
  t->add_dims(int64_t(1) << 40); // the product overflows 64 bits
  expectError(load(m), ErrorCode::ModelParse, {"'w'", "too large"});
  B m2 = reluModel();
  m2.graph().mutable_initializer(0)->set_dims(0, -2);
  Module mod;
  expectError(loadBytes(m2.bytes(), mod.createFunction("f")), ErrorCode::ModelParse,
              {"negative"});
  B m3(13);
  m3.input("x", {int64_t(1) << 31, int64_t(1) << 31}).output("y");
  m3.node("Relu", {"x"}, {"y"});
  Module mod3;
  expectError(loadBytes(m3.bytes(), mod3.createFunction("f")), ErrorCode::ModelParse,
              {"'x'", "too large"});
}

TEST_F(ImporterTest, TooManyDimensions) {
  B m(13);
  m.input("x", {1, 1, 1, 1, 1, 1, 1, 1, 1}).output("y");
  m.node("Relu", {"x"}, {"y"});
  expectError(load(m), ErrorCode::Unsupported, {"rank 9"});
}

TEST_F(ImporterTest, UnsupportedOperatorsReportedAtOnce) {
  B m(13);
  m.input("x", {2, 3}).output("y");
  m.node("FancyOp", {"x"}, {"a"}, "fancy1");
  m.node("Relu", {"a"}, {"b"}, "relu");
  m.node("FancyOp", {"b"}, {"c"}, "fancy2");
  m.node("OtherOp", {"c"}, {"y"}, "other");
  expectError(load(m), ErrorCode::Unsupported,
              {"opset 13", "FancyOp (2 nodes: 'fancy1', 'fancy2')", "OtherOp (1 node: 'other')"});
  EXPECT_EQ(F_->numNodes(), 0u); // nothing was converted
}

TEST_F(ImporterTest, CustomDomainIsUnsupported) {
  B m(13);
  m.input("x", {2}).output("y");
  m.node("Relu", {"x"}, {"y"}, "r").set_domain("com.example");
  expectError(load(m), ErrorCode::Unsupported, {"com.example.Relu"});
}

TEST_F(ImporterTest, UnsupportedAttributeNamesNode) {
  B m(13);
  m.input("x", {1, 1, 4, 4}).output("y");
  auto &p = m.node("Pad", {"x", "pads"}, {"y"}, "wrap_pad");
  B::attrString(p, "mode", "wrap");
  m.initI64("pads", {8}, {0, 0, 1, 1, 0, 0, 1, 1});
  expectError(load(m), ErrorCode::Unsupported, {"wrap_pad", "Pad", "wrap"});
}

TEST_F(ImporterTest, RunTimeShapeInputIsUnsupported) {
  B m(13);
  m.input("x", {2, 3}).input("shape", {2}, TP::INT64).output("y");
  m.node("Reshape", {"x", "shape"}, {"y"}, "dyn_reshape");
  expectError(load(m), ErrorCode::Unsupported, {"dyn_reshape", "shape", "load time"});
}

TEST_F(ImporterTest, BadReshape) {
  B m(13);
  m.input("x", {2, 3}).initI64("shape", {2}, {4, -1}).output("y");
  m.node("Reshape", {"x", "shape"}, {"y"}, "rs");
  expectError(load(m), ErrorCode::ModelParse, {"rs", "divisible"});
}

TEST_F(ImporterTest, UndefinedGraphOutput) {
  B m(13);
  m.input("x", {2}).output("nowhere");
  m.node("Relu", {"x"}, {"y"});
  expectError(load(m), ErrorCode::ModelParse, {"'nowhere'"});
}

TEST_F(ImporterTest, ValueDefinedTwice) {
  B m(13);
  m.input("x", {2}).output("y");
  m.node("Relu", {"x"}, {"y"});
  m.node("Relu", {"x"}, {"y"}, "again");
  expectError(load(m), ErrorCode::ModelParse, {"again", "defined twice"});
}

TEST_F(ImporterTest, NoGraphAndTooNewOpset) {
  onnx::ModelProto mp;
  mp.set_ir_version(7);
  mp.add_opset_import()->set_version(13);
  expectError(loadBytes(mp.SerializeAsString(), F_), ErrorCode::ModelParse, {"no graph"});
  B m(19);
  m.input("x", {2}).output("y");
  m.node("Relu", {"x"}, {"y"});
  Module mod;
  expectError(loadBytes(m.bytes(), mod.createFunction("f")), ErrorCode::Unsupported,
              {"opset 19"});
}

TEST_F(ImporterTest, OutOfRangeGatherIndex) {
  B m(13);
  m.input("x", {3, 2}).initI64("i", {1}, {3}).output("y");
  m.node("Gather", {"x", "i"}, {"y"}, "g");
  expectError(load(m), ErrorCode::ModelParse, {"'g'", "index 3"});
}

TEST_F(ImporterTest, TensorFileErrors) {
  std::string junk = "\x08\x01\x12";
  Expected<Tensor> t = loadONNXTensorFromBuffer(junk.data(), junk.size());
  ASSERT_FALSE(t);
  EXPECT_EQ(t.getError().code(), ErrorCode::ModelParse);
  Expected<Tensor> t2 = loadONNXTensor("/nonexistent/input_0.pb");
  ASSERT_FALSE(t2);
  EXPECT_EQ(t2.getError().code(), ErrorCode::NotFound);
}

} // namespace
} // namespace kiln::test
