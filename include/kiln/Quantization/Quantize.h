/// \file
/// Profile-guided quantization of a float function to int8 (docs/Quantization.md).
///
/// The flow: prepareForQuantization (the graph passes that fold BatchNorm and constants,
/// so that profiling and quantizing see the same nodes under the same names); a Profiler
/// (kiln/Quantization/Profile.h) over calibration inputs; then quantizeFunction, which
/// rewrites in place every node it can into its int8 form: activations Int8Q with the
/// scale and offset the schema picks from the calibrated range, weights Int8Q from their
/// own values, biases Int32Q with scale inputScale * weightScale and offset 0. Quantize
/// nodes appear only where a float value enters a quantized region and Dequantize only
/// where a quantized value leaves one; inside a region quantized nodes feed each other
/// directly, and a RescaleQuantized is added only where an operator needs equal types
/// (Concat inputs), then folded into its producer where that producer's output type is
/// free. A node whose only user is a Relu outputs on the Relu's grid.
#ifndef KILN_QUANTIZATION_QUANTIZE_H
#define KILN_QUANTIZATION_QUANTIZE_H

#include "kiln/Quantization/Profile.h"

#include <optional>
#include <set>
#include <string>

namespace kiln {

/// How a real range [min, max] becomes an int8 scale and offset (real = scale * (q -
/// offset)). Every schema first widens the range to contain 0, so that 0 is exact.
enum class QuantSchema {
  /// scale = (max - min) / 255, offset = round(-128 - min / scale): all 256 levels used.
  Asymmetric,
  /// a = max(|min|, |max|): scale = a / 127, offset 0.
  Symmetric,
  /// Symmetric, but a range with min >= 0 uses the unsigned grid: scale = max / 255,
  /// offset -128 (int8 q = -128 is 0.0), twice the resolution of Symmetric there.
  SymmetricWithUInt8,
  /// Symmetric with the scale rounded up to a power of two (shifts instead of multiplies).
  SymmetricWithPower2Scale,
};

/// How a value's range is chosen from its profile.
enum class Calibration {
  MinMax,     ///< the recorded min and max
  Percentile, ///< the histogram's central QuantizationOptions::percentile per cent
  /// The range [min * k, max * k], k in (0, 1] (100 candidates), that minimises the
  /// expected squared quantisation error over the histogram: clipping error for bins
  /// outside, step^2 / 12 for bins inside.
  MSE,
};

/// Parses "asymmetric", "symmetric", "symmetric-uint8", "power2"; InvalidArgument otherwise.
Expected<QuantSchema> parseQuantSchema(const std::string &s);
const char *quantSchemaName(QuantSchema s);
/// Parses "minmax", "percentile", "mse".
Expected<Calibration> parseCalibration(const std::string &s);
const char *calibrationName(Calibration c);

/// An int8 scale and offset.
struct QuantParams {
  float scale = 1.0f;
  int32_t offset = 0;
};

/// The int8 scale and offset \p schema picks for real range [\p min, \p max] (see
/// QuantSchema). A value that was always 0 is given the range [0, 1e-3].
QuantParams chooseQuantParams(float min, float max, QuantSchema schema);

/// The range \p method picks from \p hist for \p schema (the schema matters to MSE,
/// which measures the error of the grid the schema would use).
std::pair<float, float> calibrateRange(const Histogram &hist, Calibration method,
                                       QuantSchema schema, float percentile = 99.99f);

/// Options of quantizeFunction.
struct QuantizationOptions {
  QuantSchema schema = QuantSchema::Asymmetric;
  Calibration calibration = Calibration::MinMax;
  float percentile = 99.99f;
  /// Node kinds ("Convolution", "Add", ...) and node names kept in float.
  std::set<std::string> keepFloat;
  /// One weight scale and offset per output channel of a Convolution / FullyConnected:
  /// they become ChannelwiseQuantizedConvolution / ChannelwiseQuantizedFullyConnected
  /// (the Interpreter runs them; the CPU does not yet).
  bool perChannel = false;
  /// The schema of the weights of Convolution / FullyConnected (per tensor or per channel);
  /// unset: symmetric for per-channel weights with the asymmetric schema, else \p schema
  /// (effectiveWeightSchema). Symmetric weights (offset 0, as PyTorch's per-channel weights)
  /// spare the CPU's int8 kernels the per-pixel input sums and their multiply per output.
  std::optional<QuantSchema> weightSchema;
};

/// The schema \p o gives Convolution and FullyConnected weights: \p o.weightSchema if set;
/// otherwise Symmetric (offset 0) for per-channel weights with the Asymmetric schema (the
/// same accuracy as asymmetric ones on the corpus and digits, docs/Quantization.md,
/// seventh round), and \p o.schema in every other case.
QuantSchema effectiveWeightSchema(const QuantizationOptions &o);

/// What quantizeFunction did.
struct QuantizationReport {
  unsigned quantizedNodes = 0;
  unsigned quantizeNodes = 0;   ///< Quantize nodes added at region entries
  unsigned dequantizeNodes = 0; ///< Dequantize nodes added at region exits
  unsigned rescaleNodes = 0;    ///< RescaleQuantized nodes left after folding
  unsigned foldedRescales = 0;  ///< rescales folded into their producer's type
  /// Convolutions, FCs, ... whose only user is a Relu (or a Clip(0, Max) made a Relu)
  /// and that output on the Relu's grid instead of their own wider one
  unsigned foldedIntoRelu = 0;
  /// Relus whose operand is on their own grid and that grid has no negative values (offset
  /// -128: asymmetric and symmetric-uint8 Relu ranges), so they are the identity: dropped,
  /// their users read the operand
  unsigned identityRelus = 0;
  /// Nodes of a quantizable kind kept in float, with why ("keep-float", "no profile for
  /// 'x'", "weights are not constant", ...).
  std::vector<std::pair<std::string, std::string>> keptFloat;
  std::string toString() const;
};

/// Runs the passes that fold BatchNormalization, constants and no-ops (the default
/// pipeline without lowering), so that a profile and the quantizer see the same graph.
Error prepareForQuantization(Function *f);

/// Quantizes \p f in place from \p profile (see the file comment). Quantizable: Convolution,
/// FullyConnected, MatMul, BatchedAdd, Add, Sub, Mul, Max, Min, Relu, AvgPool,
/// AdaptiveAvgPool (output grids from their profiles), Clip with Min 0 (a Relu whose output
/// grid saturates at Max), MaxPool, Reshape, Transpose, Slice (the operand's grid) and Concat, in their Interpreter int8 forms. A node stays float when
/// its kind or name is in keepFloat, when a float operand has no profile, or when weights
/// are not constants.
Expected<QuantizationReport> quantizeFunction(Function *f, const QuantizationProfile &profile,
                                              const QuantizationOptions &options = {});

/// Signal-to-quantisation-noise ratio in dB of \p test against \p ref (same size):
/// 10 log10(sum ref^2 / sum (ref - test)^2); +inf when they are equal.
double sqnrDB(const std::vector<float> &ref, const std::vector<float> &test);

} // namespace kiln

#endif // KILN_QUANTIZATION_QUANTIZE_H
