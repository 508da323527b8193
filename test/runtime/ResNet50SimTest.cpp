// ResNet-50 from the model corpus (BENCH.md; $KILN_MODELS or /tmp/kiln-models) split over
// four Sim devices too small for it, with the Interpreter as the host fallback. The
// outputs must equal the Interpreter's on the same (optimised) function exactly, and the
// PyTorch reference within BENCH.md's tolerance. Manual: it needs the corpus and takes a
// while on the Interpreter.

#include "RuntimeTestUtils.h"

#include "kiln/Importer/ONNX.h"
#include "kiln/Passes/Pipeline.h"
#include "kiln/Runtime/MultiDevice.h"
#include "kiln/Runtime/Partitioner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>

using namespace kiln;
using namespace kiln::test;

TEST(ResNet50OnSim, SplitOverFourDevicesMatchesTheReference) {
  const char *env = std::getenv("KILN_MODELS");
  std::string dir = std::string(env ? env : "/tmp/kiln-models") + "/resnet50";
  if (!std::ifstream(dir + "/model.onnx"))
    GTEST_SKIP() << "no model corpus at " << dir;
  Module m;
  Function *f = m.createFunction("resnet50");
  ONNXModel model = exitOnError(loadONNX(dir + "/model.onnx", f));
  Tensor input = exitOnError(loadONNXTensor(dir + "/test_data_set_0/input_0.pb"));
  Tensor expected = exitOnError(loadONNXTensor(dir + "/test_data_set_0/output_0.pb"));
  Net n;
  n.f = f;
  n.input = model.getInput(model.inputNames.at(0));
  n.outputs.push_back(model.getOutputPlaceholder(model.outputNames.at(0)));

  // A device memory that forces several partitions: a third of the optimised function.
  auto sim = exitOnError(createBackend("Sim"));
  exitOnError(optimizeFunction(f, *sim));
  MultiDeviceOptions o;
  o.devices = 4;
  o.deviceMemory = estimateMemory(*f) / 3;
  o.fallbacks = {"Interpreter"};
  auto created = createMultiDeviceNetwork(f, o);
  ASSERT_TRUE(created) << created.getError().message();
  MultiDeviceNetwork &md = created.get();
  std::cout << "device memory " << o.deviceMemory << " bytes\n" << md.planText;
  EXPECT_GE(md.numPartitions, 3u);

  auto b = makeBindings(n, input);
  RunReport report;
  Error e = md.host->runNetworkBlocking(md.network, *b, {}, &report);
  ASSERT_FALSE(e) << e.message();
  std::cout << report.toString();
  EXPECT_GT(report.totalCycles(), 0u);

  std::string why;
  EXPECT_TRUE(sameOutputs(n, *b, reference(n, input), &why)) << why;
  const Tensor &y = *b->get(n.outputs[0]);
  ASSERT_EQ(y.size(), expected.size());
  double maxRef = 0;
  for (size_t i = 0; i < expected.size(); i++)
    maxRef = std::max(maxRef, std::fabs(expected.getAsDouble(i)));
  for (size_t i = 0; i < expected.size(); i++) {
    double r = expected.getAsDouble(i);
    ASSERT_LE(std::fabs(y.getAsDouble(i) - r), 1e-4 * maxRef + 1e-3 * std::fabs(r)) << i;
  }
}
