// Quantization flags shared by the tools (QuantFlags.h).

#include "QuantFlags.h"

#include "kiln/Importer/ONNX.h"

#include <algorithm>
#include <filesystem>

namespace kiln::tools {

void addQuantFlags(Flags &flags, QuantFlags &q, bool profiling, bool calibrationDir) {
  if (profiling) {
    flags.add("--quant-profile", q.profileOut, "FILE",
              calibrationDir
                  ? "profile the model for quantization over --calibration's inputs and write "
                    "the profile (JSON: min, max, histogram per value) to FILE, then stop"
                  : "profile the float model over the images for quantization and write the "
                    "profile (JSON: min, max, histogram per value) to FILE");
    if (calibrationDir)
      flags.add("--calibration", q.calibration, "DIR",
                "calibration inputs for --quant-profile: test_data_set_* folders, or "
                "input_*.pb files of a single-input model");
    flags.add("--quant-bins", q.bins, "N", "histogram bins per value in --quant-profile");
  }
  flags.add("--quantize", q.quantize, "PROFILE",
            "quantize to int8 from a profile written by kiln-run --quant-profile");
  flags.add("--schema", q.schema, "S",
            "with --quantize: asymmetric, symmetric, symmetric-uint8 or power2");
  flags.add("--calibrate", q.calibrate, "M",
            "with --quantize: how ranges come from the profile: minmax, percentile or mse");
  flags.add("--percentile", q.percentile, "P",
            "with --calibrate percentile: the central share kept, in hundredths of a per cent "
            "(9999 = 99.99%)");
  flags.add("--per-channel", q.perChannel,
            "with --quantize: one weight scale per output channel of Convolution and "
            "FullyConnected (ChannelwiseQuantized* nodes); with the asymmetric schema the "
            "weights are symmetric (offset 0) unless --weight-schema says otherwise");
  flags.add("--weight-schema", q.weightSchema, "S",
            "with --quantize: the schema of Convolution and FullyConnected weights (default: "
            "--schema's, symmetric for --per-channel with the asymmetric schema); symmetric "
            "gives offset-0 weights");
  flags.add("--precision", q.precision, "P",
            "run the float32 model in bf16 or fp16 (16-bit operands and results, float32 "
            "arithmetic rounded once per operator; inputs and outputs stay float32)");
  flags.add("--keep-float", q.keepFloat, "K,...",
            "with --quantize or --precision: node kinds (Convolution, Add, ...) or node names "
            "kept in float32");
}

Expected<QuantizationOptions> quantOptions(const QuantFlags &q) {
  QuantizationOptions o;
  KILN_ASSIGN_OR_RETURN(o.schema, parseQuantSchema(q.schema));
  KILN_ASSIGN_OR_RETURN(o.calibration, parseCalibration(q.calibrate));
  if (q.percentile == 0 || q.percentile > 10000)
    return makeError(ErrorCode::InvalidArgument, "--percentile must be in 1..10000, not ",
                     q.percentile);
  o.percentile = float(q.percentile) / 100.0f;
  o.keepFloat.insert(q.keepFloat.begin(), q.keepFloat.end());
  o.perChannel = q.perChannel;
  if (!q.weightSchema.empty()) {
    KILN_ASSIGN_OR_RETURN(QuantSchema ws, parseQuantSchema(q.weightSchema));
    o.weightSchema = ws;
  } // unset: the library's default (effectiveWeightSchema)
  return o;
}

Error quantizeWithFlags(Function *f, const QuantFlags &q, std::ostream &log) {
  KILN_ASSIGN_OR_RETURN(QuantizationOptions o, quantOptions(q));
  KILN_ASSIGN_OR_RETURN(QuantizationProfile p, QuantizationProfile::readFile(q.quantize));
  KILN_RETURN_IF_ERR(prepareForQuantization(f));
  KILN_ASSIGN_OR_RETURN(QuantizationReport r, quantizeFunction(f, p, o));
  log << "quantized (" << quantSchemaName(o.schema) << ", " << calibrationName(o.calibration)
      << (o.perChannel ? ", per-channel weights" : "")
      << (o.weightSchema || o.perChannel
              ? std::string(", ") + quantSchemaName(effectiveWeightSchema(o)) + " weights"
              : "")
      << "): " << r.toString() << "\n";
  return Error::success();
}

Error convertPrecisionWithFlags(Function *f, const QuantFlags &q, std::ostream &log) {
  if (!q.quantize.empty())
    return makeError(ErrorCode::InvalidArgument, "--precision and --quantize exclude each other");
  PrecisionOptions o;
  KILN_ASSIGN_OR_RETURN(o.kind, parsePrecision(q.precision));
  o.keepFloat.insert(q.keepFloat.begin(), q.keepFloat.end());
  KILN_RETURN_IF_ERR(prepareForQuantization(f));
  KILN_ASSIGN_OR_RETURN(PrecisionReport r, convertPrecision(f, o));
  log << "precision " << elemKindName(o.kind) << ": " << r.toString() << "\n";
  return Error::success();
}

Expected<std::vector<std::vector<Tensor>>> loadCalibrationSets(const std::string &dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return makeError(ErrorCode::NotFound, "calibration folder '", dir, "' does not exist");
  std::vector<std::string> sets, files;
  for (const auto &e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (e.is_directory() && name.rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path().string());
    else if (e.is_regular_file() && name.rfind("input_", 0) == 0 && name.size() > 9 &&
             name.substr(name.size() - 3) == ".pb")
      files.push_back(e.path().string());
  }
  // Name order, numbers compared as numbers (test_data_set_10 after _9).
  auto numeric = [](const std::string &a, const std::string &b) {
    if (a.size() != b.size())
      return a.size() < b.size();
    return a < b;
  };
  std::sort(sets.begin(), sets.end(), numeric);
  std::sort(files.begin(), files.end(), numeric);
  std::vector<std::vector<Tensor>> out;
  if (!sets.empty()) {
    for (const std::string &s : sets) {
      std::vector<Tensor> ins;
      for (int k = 0;; k++) {
        std::string p = s + "/input_" + std::to_string(k) + ".pb";
        if (!fs::exists(p, ec))
          break;
        KILN_ASSIGN_OR_RETURN(Tensor t, loadONNXTensor(p));
        ins.push_back(std::move(t));
      }
      if (ins.empty())
        return makeError(ErrorCode::NotFound, "no input_0.pb in '", s, "'");
      out.push_back(std::move(ins));
    }
    return out;
  }
  for (const std::string &p : files) {
    KILN_ASSIGN_OR_RETURN(Tensor t, loadONNXTensor(p));
    std::vector<Tensor> one;
    one.push_back(std::move(t));
    out.push_back(std::move(one));
  }
  if (out.empty())
    return makeError(ErrorCode::NotFound, "no test_data_set_* folders or input_*.pb files in '",
                     dir, "'");
  return out;
}

} // namespace kiln::tools
