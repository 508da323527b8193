// The error of the CPU backend's convolution kernels against a float64 reference, one
// 3x3 stride-1 layer at a time with every algorithm forced in turn (CodegenOptions::
// forceConv). Shared by the conv_accuracy tool (the table in backends/CPU/README.md) and
// conv_accuracy_test (the error budget of ConvPlan's Winograd rule).
#ifndef KILN_TEST_CPU_CONVACCURACY_H
#define KILN_TEST_CPU_CONVACCURACY_H

#include "backends/CPU/codegen/Codegen.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace kiln::cpu::accuracy {

/// A 3x3 stride-1 "same" convolution of one C x H x H image to O channels.
struct Layer {
  int64_t C, O, H;
};

/// Inputs distributed as in a trained network with batch normalisation: activations
/// max(0, z), z ~ N(0, 1) (a ReLU after normalisation), weights He-initialised, N(0, 2 /
/// (9 C)), no bias (it would only shift the reference). Seeded.
struct Data {
  std::vector<float> x, w;
  std::vector<double> ref; ///< the convolution in double (a plain loop)
};
Data makeData(const Layer &l, uint64_t seed);

/// Error of a result against Data::ref: max |y - ref| / max |ref| and
/// rms(y - ref) / rms(ref).
struct ErrorStats {
  double maxRel = 0, rmsRel = 0;
};
ErrorStats measure(const std::vector<float> &y, const std::vector<double> &ref);

/// The convolution in float with a plain loop (channels, then taps, in order): what a
/// naive kernel (or the Interpreter) computes.
std::vector<float> naiveFloat(const Layer &l, const Data &d);

/// The CPU backend's result with \p a forced (nullopt: the planner's own choice, written
/// to \p chosen when given), compiled for \p threads threads; AVX2 kernels when
/// \p noAvx512.
std::vector<float> runCPU(const Layer &l, const Data &d, std::optional<ConvAlgorithm> a,
                          unsigned threads, bool noAvx512, std::string *chosen = nullptr);

} // namespace kiln::cpu::accuracy

#endif // KILN_TEST_CPU_CONVACCURACY_H
