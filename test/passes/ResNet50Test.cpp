// The default pipeline on a ResNet-50-shaped graph: every BatchNormalization is folded
// away, and the output matches the unoptimised graph on the Interpreter within 1e-5
// relative (to the output's largest magnitude).

#include "ResNet50.h"
#include "PassTestUtils.h"

#include <chrono>
#include <cmath>

namespace kiln::test {

namespace {

/// Largest |a - b| over the largest |b|.
double relativeError(const Tensor &a, const Tensor &b) {
  double maxRef = 0;
  for (size_t i = 0; i < b.size(); i++)
    maxRef = std::max(maxRef, std::fabs(b.getAsDouble(i)));
  return a.maxAbsDiff(b) / std::max(maxRef, 1e-30);
}

TEST(ResNet50, DefaultPipelineFoldsEveryBatchNormAndKeepsTheNumbers) {
  Module m;
  Function *f = buildResNet50(m, "resnet50", 1, 224);
  ASSERT_FALSE(bool(f->verify()));
  EXPECT_EQ(countKind(f, NodeKind::BatchNormalization), 53u);
  std::unique_ptr<Backend> interp = exitOnError(createBackend("Interpreter"));

  Function *g = f->clone("resnet50_opt");
  auto t0 = std::chrono::steady_clock::now();
  Expected<PipelineReport> r = runPipeline(g, getPipelineForBackend(interp.get()), interp.get());
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(bool(r)) << r.getError().message();
  std::cout << "default pipeline on ResNet-50 (weights copied, as they are shared with the "
               "reference): "
            << ms << " ms\n"
            << r->timingTable();
  EXPECT_EQ(countKind(g, NodeKind::BatchNormalization), 0u);
  EXPECT_EQ(countKind(g, NodeKind::Convolution), 53u);

  auto cb = interp->compile(f, CompileOptions());
  auto ca = interp->compile(g, CompileOptions());
  ASSERT_TRUE(cb && ca);
  PlaceholderBindings b;
  b.allocate(m.getPlaceholders());
  PseudoRNG rng(5);
  b.getByName("data")->randomize(-1, 1, rng);
  ExecutionContext ctx(&b);
  ASSERT_FALSE(bool((*cb)->execute(ctx)));
  Tensor logits = b.getByName("logits")->clone(), prob = b.getByName("prob")->clone();
  b.getByName("logits")->zero();
  b.getByName("prob")->zero();
  ASSERT_FALSE(bool((*ca)->execute(ctx)));
  double errLogits = relativeError(*b.getByName("logits"), logits);
  double errProb = relativeError(*b.getByName("prob"), prob);
  std::cout << "relative error after the pipeline: logits " << errLogits << ", prob " << errProb
            << "\n";
  EXPECT_LT(errLogits, 1e-5);
  EXPECT_LT(errProb, 1e-5);
}

} // namespace

} // namespace kiln::test
