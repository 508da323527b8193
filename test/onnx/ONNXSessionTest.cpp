// ONNXSession: one loaded model run with inputs of any shape the model allows; a
// specialization is compiled per shape tuple and cached (LRU). Expectations are computed
// in the test from the models' formulas.

#include "ONNXTestUtils.h"

#include "kiln/kiln.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>

namespace kiln::test {
namespace {

using B = ONNXBuilder;

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

const float kW[] = {1, 0, -1, 0.5f, 0.5f, 0.5f}; // [2, 3]
const float kB[] = {0.25f, -1};

/// y = Relu(x W^T + b) * z, x [N, 3], z [N, 2]: two inputs sharing the symbol N.
std::string batchModel(bool staticBatch = false) {
  B m(13);
  m.input("x", {staticBatch ? 4 : -1, 3})
      .input("z", {staticBatch ? 4 : -1, 2})
      .init("w", {2, 3}, {std::begin(kW), std::end(kW)})
      .init("b", {2}, {std::begin(kB), std::end(kB)})
      .output("y");
  auto &g = m.node("Gemm", {"x", "w", "b"}, {"g"});
  B::attrInt(g, "transB", 1);
  m.node("Relu", {"g"}, {"r"});
  m.node("Mul", {"r", "z"}, {"y"});
  return m.bytes();
}

Tensor floats(Dims dims, float start, float step) {
  Tensor t(ElemKind::Float, dims);
  for (size_t i = 0; i < t.size(); i++)
    t.getHandle<float>().raw(i) = start + step * float(i % 17) - 0.37f * float(i % 5);
  return t;
}

/// Checks y against the formula for inputs x, z of batch n.
void expectBatchModel(const Tensor &y, const Tensor &x, const Tensor &z, dim_t n) {
  ASSERT_EQ(y.dims().vec(), (std::vector<dim_t>{n, 2}));
  for (dim_t r = 0; r < n; r++)
    for (dim_t j = 0; j < 2; j++) {
      double s = kB[j];
      for (dim_t k = 0; k < 3; k++)
        s += double(x.getHandle<float>().raw(r * 3 + k)) * kW[j * 3 + k];
      double want = std::max(s, 0.0) * z.getHandle<float>().raw(r * 2 + j);
      EXPECT_NEAR(y.getHandle<float>().raw(r * 2 + j), want, 1e-5) << "row " << r << " col " << j;
    }
}

ONNXSessionOptions quiet(const std::string &backend = "Interpreter") {
  ONNXSessionOptions o;
  o.backend = backend;
  return o;
}

TEST(ONNXSession, BatchOneFourEightAndOneAgainCompilesThreeTimes) {
  std::string bytes = batchModel();
  auto s = exitOnError(ONNXSession::loadFromBuffer(bytes.data(), bytes.size(), quiet()));
  EXPECT_FALSE(s->isStatic());
  ASSERT_EQ(s->getSignature().inputs.size(), 2u);
  EXPECT_EQ(s->getSignature().inputs[0].shapeString(), "[N, 3]");
  EXPECT_EQ(s->getSignature().outputNames, std::vector<std::string>{"y"});
  EXPECT_EQ(s->getNumCompiles(), 0u); // symbolic: nothing compiled at load
  const dim_t batches[] = {1, 4, 8, 1};
  const uint64_t compiles[] = {1, 2, 3, 3};
  for (int k = 0; k < 4; k++) {
    dim_t n = batches[k];
    SCOPED_TRACE("batch " + std::to_string(n));
    Tensor x = floats({n, 3}, 0.5f * k - 1, 0.25f), z = floats({n, 2}, 1, -0.125f);
    Expected<std::vector<Tensor>> y = s->run({&x, &z});
    ASSERT_TRUE(bool(y)) << y.getError().message();
    ASSERT_EQ(y->size(), 1u);
    expectBatchModel((*y)[0], x, z, n);
    EXPECT_EQ(s->getNumCompiles(), compiles[k]);
  }
  EXPECT_EQ(s->getNumCacheHits(), 1u); // the fourth run
  EXPECT_EQ(s->getNumCached(), 3u);
}

TEST(ONNXSession, TheCacheIsBoundedLeastRecentlyUsedFirst) {
  std::string bytes = batchModel();
  ONNXSessionOptions o = quiet();
  o.cacheSize = 2;
  auto s = exitOnError(ONNXSession::loadFromBuffer(bytes.data(), bytes.size(), o));
  auto runAt = [&](dim_t n) {
    Tensor x = floats({n, 3}, 1, 0.5f), z = floats({n, 2}, -1, 0.25f);
    std::map<std::string, const Tensor *> in = {{"x", &x}, {"z", &z}};
    Expected<std::map<std::string, Tensor>> y = s->runNamed(in);
    ASSERT_TRUE(bool(y)) << y.getError().message();
    expectBatchModel(y->at("y"), x, z, n);
  };
  runAt(1);
  runAt(2);
  runAt(1); // hit; 2 is now the least recently used
  runAt(3); // evicts 2
  EXPECT_EQ(s->getNumCompiles(), 3u);
  EXPECT_EQ(s->getNumCached(), 2u);
  runAt(1); // still cached
  EXPECT_EQ(s->getNumCompiles(), 3u);
  runAt(2); // compiled again
  EXPECT_EQ(s->getNumCompiles(), 4u);
  EXPECT_EQ(s->getNumCacheHits(), 2u);
}

TEST(ONNXSession, TwoSymbolicDimensionsOnTheCPUBackend) {
  // y = x W, x [batch, seq, 4], W [4, 2]; then Softmax over the last axis.
  B m(13);
  auto *vi = m.graph().add_input();
  vi->set_name("x");
  auto *tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_param("batch");
  tt->mutable_shape()->add_dim()->set_dim_param("seq");
  tt->mutable_shape()->add_dim()->set_dim_value(4);
  const float w[] = {1, -1, 0.5f, 0, -0.5f, 2, 0.25f, 1};
  m.init("w", {4, 2}, {std::begin(w), std::end(w)}).output("y");
  m.node("MatMul", {"x", "w"}, {"mm"});
  auto &sm = m.node("Softmax", {"mm"}, {"y"});
  B::attrInt(sm, "axis", -1);
  std::string bytes = m.bytes();
  auto s = exitOnError(ONNXSession::loadFromBuffer(bytes.data(), bytes.size(), {"CPU"}));
  EXPECT_EQ(s->getSignature().inputs[0].shapeString(), "[batch, seq, 4]");
  for (auto [b, q] : {std::pair<dim_t, dim_t>{1, 3}, {2, 5}, {1, 3}}) {
    Tensor x = floats({b, q, 4}, -0.5f, 0.2f);
    auto y = exitOnError(s->run({&x}));
    ASSERT_EQ(y[0].dims().vec(), (std::vector<dim_t>{b, q, 2}));
    for (dim_t r = 0; r < b * q; r++) {
      double v[2];
      for (int j = 0; j < 2; j++) {
        v[j] = 0;
        for (int k = 0; k < 4; k++)
          v[j] += double(x.getHandle<float>().raw(r * 4 + k)) * w[k * 2 + j];
      }
      double m0 = std::max(v[0], v[1]), e0 = std::exp(v[0] - m0), e1 = std::exp(v[1] - m0);
      EXPECT_NEAR(y[0].getHandle<float>().raw(r * 2), e0 / (e0 + e1), 1e-5);
      EXPECT_NEAR(y[0].getHandle<float>().raw(r * 2 + 1), e1 / (e0 + e1), 1e-5);
    }
  }
  EXPECT_EQ(s->getNumCompiles(), 2u);
}

TEST(ONNXSession, AStaticModelCompilesAtLoadAndRefusesOtherShapes) {
  std::string bytes = batchModel(/*staticBatch=*/true);
  auto s = exitOnError(ONNXSession::loadFromBuffer(bytes.data(), bytes.size(), quiet()));
  EXPECT_TRUE(s->isStatic());
  EXPECT_EQ(s->getNumCompiles(), 1u);
  Tensor x = floats({4, 3}, 0, 0.5f), z = floats({4, 2}, 2, -0.5f);
  expectBatchModel(exitOnError(s->run({&x, &z}))[0], x, z, 4);
  EXPECT_EQ(s->getNumCompiles(), 1u);
  EXPECT_EQ(s->getNumCacheHits(), 1u);
  Tensor x8 = floats({8, 3}, 0, 0.5f), z8 = floats({8, 2}, 2, -0.5f);
  Expected<std::vector<Tensor>> y = s->run({&x8, &z8});
  ASSERT_FALSE(bool(y));
  EXPECT_EQ(y.getError().code(), ErrorCode::InvalidArgument);
  EXPECT_TRUE(contains(y.getError().message(),
                       "input 'x': the model expects shape [4, 3], given [8, 3] (dimension 0 is "
                       "fixed at 4)"))
      << y.getError().message();
  EXPECT_EQ(s->getNumCompiles(), 1u);
}

TEST(ONNXSession, ShapeAndKindErrorsNameTheInput) {
  std::string bytes = batchModel();
  auto s = exitOnError(ONNXSession::loadFromBuffer(bytes.data(), bytes.size(), quiet()));
  auto error = [&](const Tensor &x, const Tensor &z) {
    Expected<std::vector<Tensor>> y = s->run({&x, &z});
    EXPECT_FALSE(bool(y));
    return y ? std::string() : y.getError().message();
  };
  // A fixed dimension.
  std::string e = error(floats({2, 4}, 0, 1), floats({2, 2}, 0, 1));
  EXPECT_TRUE(contains(e, "input 'x': the model expects shape [N, 3], given [2, 4] (dimension 1 "
                          "is fixed at 3)"))
      << e;
  // The rank.
  e = error(floats({6}, 0, 1), floats({2, 2}, 0, 1));
  EXPECT_TRUE(contains(e, "input 'x': the model expects shape [N, 3], given [6] (rank 1 instead "
                          "of 2)"))
      << e;
  // One symbol, two values.
  e = error(floats({4, 3}, 0, 1), floats({8, 2}, 0, 1));
  EXPECT_TRUE(contains(e, "input 'z': the model expects shape [N, 2], given [8, 2] (dimension 0 "
                          "is 'N', which is 4 in input 'x')"))
      << e;
  // The element kind, reported before compiling.
  Tensor xi(ElemKind::Int32I, {2, 3});
  e = error(xi, floats({2, 2}, 0, 1));
  EXPECT_TRUE(contains(e, "input 'x' is i32<2x3>; the model's input is float<2x3>")) << e;
  // The number of inputs, and names.
  Tensor x = floats({2, 3}, 0, 1);
  Expected<std::vector<Tensor>> one = s->run({&x});
  ASSERT_FALSE(bool(one));
  EXPECT_TRUE(contains(one.getError().message(), "the model has 2 inputs, 1 were given"));
  std::map<std::string, const Tensor *> named = {{"x", &x}, {"q", &x}};
  Expected<std::map<std::string, Tensor>> byName = s->runNamed(named);
  ASSERT_FALSE(bool(byName));
  EXPECT_TRUE(contains(byName.getError().message(), "'z'")) << byName.getError().message();
  EXPECT_EQ(s->getNumCompiles(), 0u);
}

TEST(ONNXSession, RunsFromSeveralThreadsAtSeveralShapes) {
  std::string bytes = batchModel();
  auto s = exitOnError(ONNXSession::loadFromBuffer(bytes.data(), bytes.size(), quiet()));
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; t++)
    ts.emplace_back([&, t] {
      for (int k = 0; k < 6; k++) {
        dim_t n = dim_t(1 + (t + k) % 3);
        Tensor x = floats({n, 3}, float(t), 0.5f), z = floats({n, 2}, 1, 0.25f);
        Expected<std::vector<Tensor>> y = s->run({&x, &z});
        ASSERT_TRUE(bool(y)) << y.getError().message();
        expectBatchModel((*y)[0], x, z, n);
      }
    });
  for (auto &t : ts)
    t.join();
  EXPECT_EQ(s->getNumCompiles(), 3u);
  EXPECT_EQ(s->getNumCacheHits(), 24u - 3u);
}

TEST(ONNXSession, ALoadErrorIsAnError) {
  std::string junk = "not a model";
  Expected<std::unique_ptr<ONNXSession>> s = ONNXSession::loadFromBuffer(junk.data(), junk.size());
  ASSERT_FALSE(bool(s));
  EXPECT_EQ(s.getError().code(), ErrorCode::ModelParse);
  EXPECT_FALSE(bool(ONNXSession::load("/nonexistent/model.onnx")));
}

} // namespace
} // namespace kiln::test
