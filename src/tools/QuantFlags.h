// Quantization flags shared by kiln-run, image-classifier and quant_eval: profiling over
// calibration inputs (--quant-profile FILE --calibration DIR) and quantizing from a
// profile (--quantize FILE --schema S --calibrate M --keep-float K,...), and running in
// bfloat16 or float16 (--precision bf16|fp16 --keep-float K,...). See docs/Quantization.md.
#ifndef KILN_SRC_TOOLS_QUANTFLAGS_H
#define KILN_SRC_TOOLS_QUANTFLAGS_H

#include "Flags.h"
#include "kiln/Quantization/Quantize.h"
#include "kiln/Quantization/ReducedPrecision.h"
#include "kiln/kiln.h"

#include <ostream>
#include <string>
#include <vector>

namespace kiln::tools {

struct QuantFlags {
  std::string quantize;            ///< --quantize PROFILE
  std::string schema = "asymmetric";
  std::string calibrate = "minmax";
  unsigned percentile = 9999;      ///< --percentile in hundredths (9999 = 99.99%)
  std::vector<std::string> keepFloat;
  bool perChannel = false;         ///< --per-channel
  std::string weightSchema;        ///< --weight-schema (empty: quantOptions' default)
  std::string profileOut;          ///< --quant-profile FILE (kiln-run)
  std::string calibration;         ///< --calibration DIR (kiln-run)
  unsigned bins = 1024;            ///< --quant-bins N
  std::string precision;           ///< --precision bf16|fp16
};

/// Declares --quantize, --schema, --calibrate, --percentile, --precision, --keep-float; with
/// \p profiling also --quant-profile and --quant-bins, and with \p calibrationDir
/// --calibration (kiln-run; image-classifier profiles over its images).
void addQuantFlags(Flags &flags, QuantFlags &q, bool profiling, bool calibrationDir);

/// The QuantizationOptions the flags name; InvalidArgument for an unknown schema or method.
Expected<QuantizationOptions> quantOptions(const QuantFlags &q);

/// Reads the profile named by --quantize and quantizes \p f (after prepareForQuantization);
/// writes the report to \p log.
Error quantizeWithFlags(Function *f, const QuantFlags &q, std::ostream &log);

/// Runs \p f in --precision's 16-bit kind (after prepareForQuantization, so BatchNorm folds
/// in float32) but for --keep-float; writes the report to \p log. InvalidArgument for an
/// unknown precision, or with --quantize (one or the other).
Error convertPrecisionWithFlags(Function *f, const QuantFlags &q, std::ostream &log);

/// The calibration input sets in \p dir, in name order: each test_data_set_* folder is one
/// set (input_K.pb for graph input K); without such folders, every input_*.pb file of
/// \p dir is one set of a single-input model. NotFound when there is none.
Expected<std::vector<std::vector<Tensor>>> loadCalibrationSets(const std::string &dir);

} // namespace kiln::tools

#endif // KILN_SRC_TOOLS_QUANTFLAGS_H
