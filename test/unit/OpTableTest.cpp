// The operator table's generated facts (src/ClassGen/OpTable.h): each backend's element
// kinds on hand-picked nodes (the expectations are the kernels each backend has, as
// docs/Operators.md states them), the lowering names, and Backend's default isOpSupported,
// which is the table's column for the backend's name.

#include "src/ClassGen/OpTable.h"
#include "kiln/Backend/Backend.h"
#include "kiln/Graph/Graph.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace kiln;
using optable::kindsSupported;
using optable::TableBackend;

namespace {

constexpr TableBackend kInterp = TableBackend::Interpreter;
constexpr TableBackend kCPU = TableBackend::CPU;
constexpr TableBackend kSim = TableBackend::Sim;

class OpTableTest : public ::testing::Test {
protected:
  Module m;
  Function *f = m.createFunction("main");
  Placeholder *ph(ElemKind k, const Dims &dims, float scale = 1, int32_t offset = 0) {
    TypeRef t = isQuantized(k) ? m.uniqueType(k, dims, scale, offset) : m.uniqueType(k, dims);
    return m.createPlaceholder(t, "p" + std::to_string(count_++));
  }
  ConvolutionNode *conv(ElemKind in, ElemKind w, ElemKind b, ElemKind out) {
    TypeRef outTy = isQuantized(out) ? m.uniqueType(out, {1, 2, 3, 3}, 0.5f, 0)
                                     : m.uniqueType(out, {1, 2, 3, 3});
    return f->createConvolution("conv", outTy, ph(in, {1, 1, 3, 3}), ph(w, {2, 1, 1, 1}),
                                ph(b, {2}), {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1);
  }
  unsigned count_ = 0;
};

TEST_F(OpTableTest, ConvolutionFloatAndInt8Paths) {
  using K = ElemKind;
  ConvolutionNode *f32 = conv(K::Float, K::Float, K::Float, K::Float);
  ConvolutionNode *bf16 = conv(K::BFloat16, K::BFloat16, K::BFloat16, K::BFloat16);
  ConvolutionNode *q = conv(K::Int8Q, K::Int8Q, K::Int32Q, K::Int8Q);
  ConvolutionNode *qBadBias = conv(K::Int8Q, K::Int8Q, K::Int8Q, K::Int8Q);
  ConvolutionNode *mixed = conv(K::Float, K::Float16, K::Float, K::Float);
  EXPECT_TRUE(kindsSupported(*f32, kInterp));
  EXPECT_TRUE(kindsSupported(*f32, kCPU));
  EXPECT_TRUE(kindsSupported(*f32, kSim));
  EXPECT_TRUE(kindsSupported(*bf16, kInterp));
  EXPECT_TRUE(kindsSupported(*bf16, kCPU)); // computed in float32 (widen-half-floats)
  EXPECT_FALSE(kindsSupported(*bf16, kSim)); // the chip has f32 and f16 only
  EXPECT_TRUE(kindsSupported(*q, kInterp));
  EXPECT_TRUE(kindsSupported(*q, kCPU)); // the int8 kernels (libjit_qconv.cpp)
  EXPECT_TRUE(kindsSupported(*q, kSim));
  EXPECT_FALSE(kindsSupported(*qBadBias, kInterp)); // the bias must be int32
  EXPECT_FALSE(kindsSupported(*qBadBias, kCPU));
  EXPECT_FALSE(kindsSupported(*mixed, kInterp));
}

TEST_F(OpTableTest, ElementwiseAndDataMovement) {
  using K = ElemKind;
  Placeholder *i32 = ph(K::Int32I, {4});
  Node *addI = f->createAdd("addi", i32, i32);
  EXPECT_TRUE(kindsSupported(*addI, kInterp));
  EXPECT_TRUE(kindsSupported(*addI, kCPU)); // the float kinds, int32, int64 arithmetic
  EXPECT_TRUE(
      kindsSupported(*f->createAdd("add16", ph(K::Float16, {4}), ph(K::Float16, {4})), kCPU));
  EXPECT_FALSE(kindsSupported(*f->createAdd("addb", ph(K::Bool, {4}), ph(K::Bool, {4})), kCPU));
  EXPECT_FALSE(kindsSupported(*addI, kSim));
  Placeholder *h = ph(K::Float16, {4});
  EXPECT_TRUE(kindsSupported(*f->createRelu("relu16", h), kSim));
  EXPECT_FALSE(kindsSupported(*f->createSigmoid("sig16", h), kSim)); // not on the chip
  EXPECT_FALSE(kindsSupported(*f->createNeg("negb", ph(K::Bool, {4})), kInterp));
  EXPECT_TRUE(kindsSupported(*f->createNeg("negi", ph(K::Int64I, {4})), kInterp));

  // CPU data movement: any kind; quantized inputs with other parameters requantize.
  Placeholder *qa = ph(K::Int8Q, {2}, 0.5f, 1), *qb = ph(K::Int8Q, {2}, 0.25f, 1);
  Node *sameQ = f->createConcat("cq", {qa, qa}, 0);
  Node *diffQ = f->createConcat("cd", {qa, qb}, 0);
  EXPECT_TRUE(kindsSupported(*sameQ, kCPU));
  EXPECT_TRUE(kindsSupported(*diffQ, kCPU));
  EXPECT_FALSE(kindsSupported(*f->createSave("sd", diffQ, ph(K::Int8Q, {4}, 0.3f, 0)), kCPU));
  EXPECT_TRUE(kindsSupported(*sameQ, kInterp));

  // Gather: any data kind, index-kind indices, on the CPU backend too.
  Node *g = f->createGather("g", ph(K::UInt8Q, {3, 2}), ph(K::Int64I, {2}), 0);
  EXPECT_TRUE(kindsSupported(*g, kInterp));
  EXPECT_TRUE(kindsSupported(*g, kCPU));
  EXPECT_FALSE(kindsSupported(*g, kSim));

  // ConvertTo: between unquantized kinds, the 16-bit floats included.
  Node *toF = f->createConvertTo("b2f", m.uniqueType(K::Float, {4}), ph(K::Bool, {4}));
  Node *fromQ = f->createConvertTo("q2f", m.uniqueType(K::Float, {4}), ph(K::Int8Q, {4}));
  EXPECT_TRUE(kindsSupported(*toF, kInterp));
  EXPECT_FALSE(kindsSupported(*fromQ, kInterp));
  EXPECT_TRUE(kindsSupported(*toF, kCPU));
  EXPECT_FALSE(kindsSupported(*fromQ, kCPU));
  EXPECT_TRUE(kindsSupported(
      *f->createConvertTo("h2f", m.uniqueType(K::Float, {4}), ph(K::Float16, {4})), kCPU));

  // Splat: the result kind decides.
  EXPECT_TRUE(kindsSupported(*f->createSplat("s64", m.uniqueType(K::Int64I, {2}), 1), kCPU));
  EXPECT_TRUE(kindsSupported(*f->createSplat("s16", m.uniqueType(K::Float16, {2}), 1), kCPU));
  EXPECT_FALSE(kindsSupported(*f->createSplat("s16s", m.uniqueType(K::Float16, {2}), 1), kSim));
  EXPECT_TRUE(kindsSupported(*f->createSplat("s16i", m.uniqueType(K::Float16, {2}), 1), kInterp));
}

TEST_F(OpTableTest, Quantization) {
  using K = ElemKind;
  Node *qz = f->createQuantize("q", m.uniqueType(K::UInt8Q, {4}, 0.1f, 3), ph(K::Float, {4}));
  EXPECT_TRUE(kindsSupported(*qz, kInterp));
  EXPECT_FALSE(kindsSupported(*qz, kSim)); // the chip quantizes to int8 only
  EXPECT_TRUE(kindsSupported(*qz, kCPU));
  Node *dq = f->createDequantize("d", m.uniqueType(K::Float, {4}), ph(K::Int8Q, {4}, 0.1f, 0));
  EXPECT_TRUE(kindsSupported(*dq, kInterp));
  EXPECT_TRUE(kindsSupported(*dq, kSim));
}

TEST_F(OpTableTest, PlaceholdersAndUnknownBackends) {
  Placeholder *p = ph(ElemKind::Int8Q, {1});
  for (TableBackend b : {kInterp, kCPU, kSim})
    EXPECT_TRUE(kindsSupported(*p, b));
  Node *relu = f->createRelu("r", ph(ElemKind::Float, {2}));
  EXPECT_TRUE(kindsSupported(*relu, "CPU"));
  EXPECT_FALSE(kindsSupported(*relu, "NoSuchBackend"));
}

TEST_F(OpTableTest, Lowerings) {
  EXPECT_STREQ(optable::loweringOf(NodeKind::Convolution), "lowerGroupedConvolution");
  EXPECT_STREQ(optable::loweringOf(NodeKind::FullyConnected), "lowerFullyConnected");
  EXPECT_STREQ(optable::loweringOf(NodeKind::ReduceMean), "lowerReduceMean");
  EXPECT_STREQ(optable::loweringOf(NodeKind::MatMul), "");
  EXPECT_STREQ(optable::loweringOf(NodeKind::Placeholder), "");
}

/// A backend that keeps Backend's default isOpSupported.
class NamedBackend : public Backend {
public:
  explicit NamedBackend(std::string name) : name_(std::move(name)) {}
  std::string getName() const override { return name_; }
  Expected<std::unique_ptr<CompiledFunction>> generateCode(Function *, PlannedIR &,
                                                           const CompileOptions &) const override {
    return Error(ErrorCode::Unsupported, "not a real backend");
  }

private:
  std::string name_;
};

TEST_F(OpTableTest, BackendDefaultIsTheTableColumnOfItsName) {
  Node *sig = f->createSigmoid("sig", ph(ElemKind::Float16, {2}));
  Node *qrelu = f->createRelu("qrelu", ph(ElemKind::Int8Q, {2}, 0.5f, 0));
  NamedBackend interp("Interpreter"), cpu("CPU"), other("Elsewhere");
  EXPECT_TRUE(interp.isOpSupported(*sig));
  EXPECT_TRUE(cpu.isOpSupported(*sig)); // the CPU column lists the float kinds
  Node *hfc = f->createFusedFullyConnected(
      "hfc", m.uniqueType(ElemKind::Float16, {2, 2}), ph(ElemKind::Float16, {2, 2}),
      ph(ElemKind::Float16, {2, 2}), ph(ElemKind::Float16, {2}), {}, "Relu", 0.0f, 0.0f);
  EXPECT_TRUE(interp.isOpSupported(*qrelu));
  EXPECT_TRUE(cpu.isOpSupported(*qrelu)); // the CPU's int8 Relu (a table pass)
  EXPECT_TRUE(interp.isOpSupported(*hfc));
  EXPECT_FALSE(cpu.isOpSupported(*hfc)); // f16 FusedFullyConnected: not in the CPU column
  EXPECT_FALSE(other.isOpSupported(*sig));
  Error e = other.checkAllNodesSupported(*f);
  ASSERT_TRUE(bool(e));
  EXPECT_NE(e.message().find("sig"), std::string::npos) << e.message();
}

} // namespace
