// The ONNX column of the operator table (src/ClassGen/NodeTable.cpp, docs/Operators.md)
// against the importer: every ONNX op type the table lists must have a converter. The
// importer names every op type it has no converter for in one Unsupported error ("unsupported
// ONNX operators at opset N: ...") before it converts anything, so a one-node model of each
// listed type must load without that error (other errors, about the dummy operands, are
// fine: they come from a converter).

#include "ONNXTestUtils.h"
#include "kiln/Importer/ONNX.h"
#include "kiln/kiln.h"
#include "src/ClassGen/OpTable.h"

#include <gtest/gtest.h>

#include <set>

namespace kiln::test {
namespace {

const NodeKind kAllKinds[] = {
#define DEF_NODE(NAME) NodeKind::NAME,
#include "kiln/Graph/AutoGenNodes.def"
};

/// The error of loading a model with one node of \p op (inputs: two float [2,3] tensors).
std::string loadOneNode(const std::string &op) {
  ONNXBuilder b(13);
  b.input("a", {2, 3}).input("b", {2, 3});
  b.node(op, {"a", "b"}, {"y"});
  b.output("y");
  Module m;
  Function *f = m.createFunction("main");
  std::string bytes = b.bytes();
  Expected<ONNXModel> r = loadONNXFromBuffer(bytes.data(), bytes.size(), f);
  if (r)
    return "";
  return r.takeError().message();
}

TEST(ONNXNamesTest, TheCheckSeesAnUnknownOperator) {
  EXPECT_NE(loadOneNode("NoSuchOperator").find("unsupported ONNX operators"), std::string::npos);
}

TEST(ONNXNamesTest, EveryONNXNameInTheTableHasAConverter) {
  std::set<std::string> names;
  for (NodeKind k : kAllKinds)
    for (const std::string &op : optable::onnxOpsOf(k)) {
      names.insert(op);
      std::string err = loadOneNode(op);
      EXPECT_EQ(err.find("unsupported ONNX operators"), std::string::npos)
          << getNodeKindName(k) << " lists ONNX op " << op
          << ", which the importer does not convert: " << err;
    }
  // The main mappings are there (hand-picked from the converters in src/Importer).
  for (const char *op : {"Conv", "Gemm", "MatMul", "Relu", "Softmax", "Cast", "Where", "Expand"})
    EXPECT_TRUE(names.count(op)) << op;
  EXPECT_EQ(optable::onnxOpsOf(NodeKind::Convolution), std::vector<std::string>{"Conv"});
  EXPECT_EQ(optable::onnxOpsOf(NodeKind::CmpLT),
            (std::vector<std::string>{"Less", "Greater"}));
  EXPECT_TRUE(optable::onnxOpsOf(NodeKind::InsertTensor).empty());
}

} // namespace
} // namespace kiln::test
