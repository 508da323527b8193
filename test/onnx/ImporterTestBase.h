// A fixture that loads a model built with ONNXBuilder, runs it on the Interpreter and
// returns its outputs.
#ifndef KILN_TEST_ONNX_IMPORTERTESTBASE_H
#define KILN_TEST_ONNX_IMPORTERTESTBASE_H

#include "ONNXTestUtils.h"
#include "kiln/Importer/ONNX.h"
#include "kiln/kiln.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>

namespace kiln::test {

class ImporterTest : public ::testing::Test {
protected:
  ExecutionEngine ee_{"Interpreter"};
  Function *F_ = ee_.getModule().createFunction("main");
  ONNXModel model_;
  PlaceholderBindings bindings_;

  Error load(const ONNXBuilder &b, const ONNXLoadOptions &o = {}) {
    std::string bytes = b.bytes();
    return keep(loadONNXFromBuffer(bytes.data(), bytes.size(), F_, o));
  }

  /// Writes \p b to \p fileName in the test's temporary folder and loads it from there (the
  /// importer's file path: the model mapped, initializers read from the file), then removes
  /// the file (the model holds nothing of it once loaded).
  Error loadFile(const ONNXBuilder &b, const std::string &fileName) {
    const std::string path = ::testing::TempDir() + "/" + fileName;
    {
      std::ofstream f(path, std::ios::binary);
      f << b.bytes();
    }
    Expected<ONNXModel> m = loadONNX(path, F_);
    std::remove(path.c_str());
    return keep(std::move(m));
  }

  /// The loaded model into model_, or the load's error.
  Error keep(Expected<ONNXModel> m) {
    if (!m)
      return m.takeError();
    model_ = std::move(m).get();
    return Error::success();
  }

  /// Loads, compiles, runs with \p inputs (by graph input name), and returns output
  /// \p out's tensor (null on failure, with a test failure recorded).
  const Tensor *run(const ONNXBuilder &b, std::map<std::string, Tensor> inputs,
                    const std::string &out = "y", const ONNXLoadOptions &o = {}) {
    if (Error e = load(b, o)) {
      ADD_FAILURE() << "load: " << e.toString();
      return nullptr;
    }
    return runLoaded(std::move(inputs), out);
  }
  const Tensor *runLoaded(std::map<std::string, Tensor> inputs, const std::string &out = "y") {
    if (Error e = ee_.compile()) {
      ADD_FAILURE() << "compile: " << e.toString() << "\n" << F_->toString();
      return nullptr;
    }
    for (auto &[name, t] : inputs) {
      Placeholder *ph = model_.getInput(name);
      if (!ph) {
        ADD_FAILURE() << "no input " << name;
        return nullptr;
      }
      bindings_.insert(ph, std::move(t));
    }
    for (auto &[name, save] : model_.outputs)
      bindings_.allocate(model_.getOutputPlaceholder(name));
    if (Error e = ee_.run(bindings_)) {
      ADD_FAILURE() << "run: " << e.toString();
      return nullptr;
    }
    return bindings_.get(model_.getOutputPlaceholder(out));
  }

  /// Number of nodes of kind \p k in the function.
  size_t count(NodeKind k) const {
    size_t c = 0;
    for (const auto &n : F_->getNodes())
      c += n->getKind() == k;
    return c;
  }
};

inline Tensor floats(Dims dims, const std::vector<float> &v) {
  Tensor t(ElemKind::Float, dims);
  for (size_t i = 0; i < v.size() && i < t.size(); i++)
    t.getHandle<float>().raw(i) = v[i];
  return t;
}

/// Values 0.1 * ((i * 7) % 13) - 0.6: deterministic, mixed signs.
inline std::vector<float> ramp(size_t n, float scale = 0.1f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; i++)
    v[i] = scale * float(int((i * 7) % 13) - 6);
  return v;
}

inline void expectValues(const Tensor *t, Dims dims, const std::vector<double> &e,
                         double tol = 1e-4) {
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->dims(), dims) << t->getType().toString();
  ASSERT_EQ(t->size(), e.size());
  for (size_t i = 0; i < e.size(); i++)
    EXPECT_NEAR(t->getAsDouble(i), e[i], tol * std::max(1.0, std::fabs(e[i]))) << "element " << i;
}

} // namespace kiln::test

#endif // KILN_TEST_ONNX_IMPORTERTESTBASE_H
