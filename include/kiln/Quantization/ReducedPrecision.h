/// \file
/// Reduced float precision: runs a float32 function (or all of it but listed node kinds
/// and names) in bfloat16 or float16 (docs/Quantization.md, "Reduced precision").
///
/// convertPrecision rewrites, in place, every node whose float32 operands and results can
/// all be made 16-bit and that the operator table's Interpreter column accepts so (the
/// Interpreter is the reference of the converted function): its Float operands and results
/// become the 16-bit kind. The operator table's rule for 16-bit floats is float32
/// arithmetic (products and sums in float32) rounded once per operator, so a converted
/// Convolution or FullyConnected accumulates in float32 and rounds its result (bias added)
/// once. Constants read by converted nodes are converted at compile time (a 16-bit copy,
/// round to nearest even; a constant with float32 users too keeps its float copy for them).
/// ConvertTo nodes appear only at the edges of converted regions: one ConvertTo(16-bit)
/// per float32 value entering a region, one ConvertTo(float) per 16-bit value leaving one
/// (a Save, a kept-float node); a float32 operand that is itself a ConvertTo(float) of a
/// value of the target kind is read at its source (the round trip is exact). Placeholders
/// and Saves, and so the function's inputs and outputs, keep their types.
#ifndef KILN_QUANTIZATION_REDUCEDPRECISION_H
#define KILN_QUANTIZATION_REDUCEDPRECISION_H

#include "kiln/Graph/Graph.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

/// Options of convertPrecision.
struct PrecisionOptions {
  /// ElemKind::BFloat16 or ElemKind::Float16.
  ElemKind kind = ElemKind::BFloat16;
  /// Node kinds ("Convolution", "SoftMax", ...) and node names kept in float32.
  std::set<std::string> keepFloat;
};

/// What convertPrecision did.
struct PrecisionReport {
  unsigned convertedNodes = 0;
  unsigned convertedConstants = 0;
  unsigned entryConverts = 0; ///< ConvertTo(16-bit) at region entries
  unsigned exitConverts = 0;  ///< ConvertTo(float) at region exits
  /// Nodes with float32 values left in float32, with why ("keep-float", "the Interpreter
  /// has no bfloat16 form").
  std::vector<std::pair<std::string, std::string>> keptFloat;
  std::string toString() const;
};

/// Parses "bf16" / "bfloat16" and "fp16" / "float16"; InvalidArgument otherwise.
Expected<ElemKind> parsePrecision(const std::string &s);

/// Converts \p f in place (see the file comment). Best run after prepareForQuantization
/// (kiln/Quantization/Quantize.h), so that BatchNormalization is folded into the weights in
/// float32 before they are rounded. InvalidArgument when options.kind is not a 16-bit float.
Expected<PrecisionReport> convertPrecision(Function *f, const PrecisionOptions &options);

} // namespace kiln

#endif // KILN_QUANTIZATION_REDUCEDPRECISION_H
