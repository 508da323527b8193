// Builds small ONNX models in C++ with the protobuf API, for the importer's tests.
#ifndef KILN_TEST_ONNX_ONNXTESTUTILS_H
#define KILN_TEST_ONNX_ONNXTESTUTILS_H

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::test {

/// A model under construction: inputs, outputs, initializers and nodes of one graph.
class ONNXBuilder {
public:
  explicit ONNXBuilder(int64_t opset = 13) {
    model_.set_ir_version(7);
    model_.set_producer_name("kiln-test");
    auto *os = model_.add_opset_import();
    os->set_domain("");
    os->set_version(opset);
    g_ = model_.mutable_graph();
    g_->set_name("test");
  }

  /// A graph input; a negative dim becomes the symbolic dimension "N".
  ONNXBuilder &input(const std::string &name, std::vector<int64_t> dims,
                     int32_t type = onnx::TensorProto::FLOAT) {
    setValueInfo(g_->add_input(), name, dims, type);
    return *this;
  }
  ONNXBuilder &output(const std::string &name, int32_t type = onnx::TensorProto::FLOAT) {
    auto *vi = g_->add_output();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(type);
    return *this;
  }
  static onnx::TensorProto floatTensor(const std::string &name, std::vector<int64_t> dims,
                                       const std::vector<float> &v, bool raw = false) {
    onnx::TensorProto t;
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims)
      t.add_dims(d);
    if (raw)
      t.set_raw_data(std::string(reinterpret_cast<const char *>(v.data()), v.size() * 4));
    else
      for (float x : v)
        t.add_float_data(x);
    return t;
  }
  static onnx::TensorProto int64Tensor(const std::string &name, std::vector<int64_t> dims,
                                       const std::vector<int64_t> &v) {
    onnx::TensorProto t;
    t.set_name(name);
    t.set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims)
      t.add_dims(d);
    for (int64_t x : v)
      t.add_int64_data(x);
    return t;
  }
  ONNXBuilder &init(const std::string &name, std::vector<int64_t> dims,
                    const std::vector<float> &v, bool raw = false) {
    *g_->add_initializer() = floatTensor(name, dims, v, raw);
    return *this;
  }
  ONNXBuilder &initI64(const std::string &name, std::vector<int64_t> dims,
                       const std::vector<int64_t> &v) {
    *g_->add_initializer() = int64Tensor(name, dims, v);
    return *this;
  }
  onnx::TensorProto *rawInit() { return g_->add_initializer(); }

  /// A node; attributes are added with the attr* helpers on the returned reference.
  onnx::NodeProto &node(const std::string &op, std::vector<std::string> ins,
                        std::vector<std::string> outs, const std::string &name = "") {
    auto *n = g_->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_" + std::to_string(g_->node_size()) : name);
    for (auto &i : ins)
      n->add_input(i);
    for (auto &o : outs)
      n->add_output(o);
    return *n;
  }
  static void attrInt(onnx::NodeProto &n, const std::string &name, int64_t v) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attrFloat(onnx::NodeProto &n, const std::string &name, float v) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attrInts(onnx::NodeProto &n, const std::string &name, std::vector<int64_t> v) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v)
      a->add_ints(x);
  }
  static void attrString(onnx::NodeProto &n, const std::string &name, const std::string &v) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void attrTensor(onnx::NodeProto &n, const std::string &name, onnx::TensorProto t) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::TENSOR);
    *a->mutable_t() = std::move(t);
  }

  onnx::ModelProto &model() { return model_; }
  onnx::GraphProto &graph() { return *g_; }
  std::string bytes() const { return model_.SerializeAsString(); }

private:
  static void setValueInfo(onnx::ValueInfoProto *vi, const std::string &name,
                           const std::vector<int64_t> &dims, int32_t type) {
    vi->set_name(name);
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    auto *shape = tt->mutable_shape();
    for (int64_t d : dims) {
      auto *dim = shape->add_dim();
      if (d < 0)
        dim->set_dim_param("N");
      else
        dim->set_dim_value(d);
    }
  }

  onnx::ModelProto model_;
  onnx::GraphProto *g_;
};

} // namespace kiln::test

#endif // KILN_TEST_ONNX_ONNXTESTUTILS_H
