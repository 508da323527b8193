// ResNet-50 and MobileNetV2 from the model corpus (/tmp/kiln-models, or KILN_MODELS) on
// the Sim with scratchpads of 256 KiB, 1 MiB and 4 MiB: every output equal to the
// Interpreter's bit for bit. With KILN_SIM_REPORT=1 each compile prints the program's
// per-layer cycles and DMA bytes to stderr. Skips the models that are not there.

#include "src/tools/ModelRunner.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

using namespace kiln;

namespace {

std::string corpus() {
  const char *d = std::getenv("KILN_MODELS");
  return d ? d : "/tmp/kiln-models";
}

std::vector<Tensor> runModel(const std::string &backend, const std::string &dir,
                             const tools::TestDataSet &data, const CompileOptions &opts) {
  tools::ModelRunner r(backend);
  if (backend == "Sim")
    r.setMultiDevice(1, uint64_t(256) << 20); // one Sim device that holds the whole model
  exitOnError(r.load(dir + "/model.onnx", &data), "loading");
  exitOnError(r.compile(opts), "compiling");
  exitOnError(r.bindInputs(data.inputs), "binding");
  exitOnError(r.run(), "running");
  std::vector<Tensor> out;
  for (const Tensor *t : r.outputs())
    out.push_back(t->clone());
  return out;
}

void checkModel(const std::string &name) {
  std::string dir = corpus() + "/" + name;
  if (!std::filesystem::exists(dir + "/model.onnx"))
    GTEST_SKIP() << "no " << dir;
  tools::TestDataSet data = exitOnError(tools::loadTestDataSet(dir + "/test_data_set_0"));
  std::vector<Tensor> ref = runModel("Interpreter", dir, data, {});
  for (uint64_t kib : {256, 1024, 4096}) {
    CompileOptions o;
    o.backendOptions["scratchpad"] = std::to_string(kib << 10);
    const char *rep = std::getenv("KILN_SIM_REPORT");
    if (rep && std::string(rep) == "1")
      o.backendOptions["report"] = "1";
    std::vector<Tensor> got = runModel("Sim", dir, data, o);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); i++) {
      ASSERT_EQ(got[i].getSizeInBytes(), ref[i].getSizeInBytes());
      EXPECT_EQ(std::memcmp(got[i].getUnsafePtr(), ref[i].getUnsafePtr(), ref[i].getSizeInBytes()),
                0)
          << name << " output " << i << " differs from the Interpreter's with a " << kib
          << " KiB scratchpad";
    }
    std::printf("%s, scratchpad %llu KiB: %zu outputs equal to the Interpreter's bit for bit\n",
                name.c_str(), (unsigned long long)kib, ref.size());
  }
}

} // namespace

TEST(SimModels, ResNet50IsBitExactOnEveryScratchpad) { checkModel("resnet50"); }
TEST(SimModels, MobileNetV2IsBitExactOnEveryScratchpad) { checkModel("mobilenet_v2"); }
