// quant_eval: the accuracy measurement of docs/Quantization.md. Profiles a model over
// calibration inputs (float32, on --float-backend), quantizes it for each schema and
// calibration method, runs float32 and int8 (on --quant-backend) over the test inputs and
// prints one line per configuration: output SQNR in dB (all test outputs together), top-1
// agreement with float32 and, with --labels, top-1 accuracy of both.
//
//   quant_eval --model M.onnx --calibration DIR --test DIR [--labels FILE]
//              [--schemas asymmetric,symmetric,...] [--calibrates minmax,mse,...]
//              [--float-backend CPU] [--quant-backend Interpreter] [--profile-out FILE]
//              [--keep-float K,...] [--precisions bf16,fp16]
//
// --precisions adds one line per 16-bit kind: the model converted by convertPrecision
// (after prepareForQuantization) and run on --quant-backend; with --schemas none only
// those (no profile).
//
// DIRs hold test_data_set_* folders (or input_*.pb files); the first output of the model
// is [batch, classes]; labels are one integer class per line, in the order of the test
// sets' rows.

#include "../../src/tools/Flags.h"
#include "../../src/tools/ModelRunner.h"
#include "../../src/tools/QuantFlags.h"

#include <chrono>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

using namespace kiln;

namespace {

int fail(const Error &e, const std::string &what) {
  std::cerr << "quant_eval: " << what << ": " << e.toString() << "\n";
  return 2;
}

/// Runs \p runner over every set and appends the first output's values and per-row argmax.
Error runAll(tools::ModelRunner &runner, const std::vector<std::vector<Tensor>> &sets,
             std::vector<float> &values, std::vector<size_t> &top1) {
  for (const auto &set : sets) {
    KILN_RETURN_IF_ERR(runner.bindInputs(set));
    KILN_RETURN_IF_ERR(runner.run());
    const Tensor *y = runner.outputs().front();
    if (!y || y->getElementType() != ElemKind::Float || y->dims().size() < 2)
      return makeError(ErrorCode::InvalidArgument, "the first output is not a float [batch, classes]");
    size_t rows = y->dims()[0], cols = y->size() / rows;
    auto h = y->getHandle<float>();
    for (size_t r = 0; r < rows; r++) {
      size_t best = 0;
      for (size_t c = 0; c < cols; c++) {
        values.push_back(h.raw(r * cols + c));
        if (h.raw(r * cols + c) > h.raw(r * cols + best))
          best = c;
      }
      top1.push_back(best);
    }
  }
  return Error::success();
}

tools::TestDataSet firstSet(const std::vector<std::vector<Tensor>> &sets) {
  tools::TestDataSet d;
  for (const Tensor &t : sets.front())
    d.inputs.push_back(t.clone());
  return d;
}

} // namespace

int main(int argc, char **argv) {
  std::string model, calibration, test, labels, floatBackend = "CPU", quantBackend = "Interpreter",
                                                profileOut, name;
  std::vector<std::string> schemas, calibrates, keepFloat, weights, precisions;
  unsigned percentile = 9999;
  tools::Flags flags("quant_eval", "usage: quant_eval --model M.onnx --calibration DIR --test DIR");
  flags.add("--model", model, "M.onnx", "the float ONNX model").required();
  flags.add("--name", name, "NAME", "the model's name in the output (default: the path)");
  flags.add("--calibration", calibration, "DIR", "calibration inputs").required();
  flags.add("--test", test, "DIR", "test inputs").required();
  flags.add("--labels", labels, "FILE", "true classes of the test rows, one per line");
  flags.add("--schemas", schemas, "S,...", "schemas to measure (default: all four)");
  flags.add("--calibrates", calibrates, "M,...", "calibration methods (default: minmax)");
  flags.add("--weights", weights, "W,...",
            "per-tensor, per-channel and/or per-channel-symmetric (symmetric weights with the "
            "schema's activations; default per-tensor)");
  flags.add("--keep-float", keepFloat, "K,...", "node kinds or names kept in float");
  flags.add("--precisions", precisions, "P,...",
            "also run the model converted to bf16 and/or fp16 (convertPrecision)");
  flags.add("--percentile", percentile, "P", "for percentile: hundredths of a per cent kept");
  flags.add("--float-backend", floatBackend, "NAME", "backend of the float32 reference and profile");
  flags.add("--quant-backend", quantBackend, "NAME", "backend of the int8 runs");
  flags.add("--profile-out", profileOut, "FILE", "also write the profile to FILE");
  if (std::optional<int> exitCode = flags.parse(argc, argv))
    return *exitCode;
  if (schemas.empty())
    schemas = {"asymmetric", "symmetric", "symmetric-uint8", "power2"};
  const bool int8 = !(schemas.size() == 1 && schemas[0] == "none");
  if (calibrates.empty())
    calibrates = {"minmax"};
  if (weights.empty())
    weights = {"per-tensor"};
  if (name.empty())
    name = model;

  auto calib = tools::loadCalibrationSets(calibration);
  if (!calib)
    return fail(calib.getError(), "reading the calibration inputs");
  auto tests = tools::loadCalibrationSets(test);
  if (!tests)
    return fail(tests.getError(), "reading the test inputs");
  std::vector<size_t> truth;
  if (!labels.empty()) {
    std::ifstream in(labels);
    size_t v;
    while (in >> v)
      truth.push_back(v);
  }
  tools::TestDataSet shapeCalib = firstSet(*calib), shapeTest = firstSet(*tests);

  // Profile over the calibration inputs.
  tools::ModelRunner prof(floatBackend);
  prof.setStrictBackend(false);
  if (Error e = prof.load(model, &shapeCalib))
    return fail(e, "loading the model");
  if (Error e = prepareForQuantization(prof.function()))
    return fail(e, "preparing");
  Profiler profiler;
  profiler.instrument(prof.function());
  if (Error e = prof.compile())
    return fail(e, "compiling the profiling model");
  auto t0 = std::chrono::steady_clock::now();
  for (const auto &set : *calib) {
    if (!int8)
      break;
    if (Error e = prof.bindInputs(set))
      return fail(e, "binding calibration inputs");
    profiler.allocate(prof.bindings());
    if (Error e = prof.run())
      return fail(e, "profiling");
    if (Error e = profiler.record(prof.bindings()))
      return fail(e, "recording");
  }
  double profileS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!profileOut.empty())
    if (Error e = profiler.profile().writeFile(profileOut))
      return fail(e, "writing the profile");

  // Float32 reference.
  tools::ModelRunner ref(floatBackend);
  ref.setStrictBackend(false);
  std::vector<float> refValues;
  std::vector<size_t> refTop1;
  if (Error e = ref.load(model, &shapeTest))
    return fail(e, "loading the model");
  if (Error e = ref.compile())
    return fail(e, "compiling float32");
  if (Error e = runAll(ref, *tests, refValues, refTop1))
    return fail(e, "running float32");
  auto accuracy = [&](const std::vector<size_t> &top1) {
    size_t ok = 0;
    for (size_t i = 0; i < top1.size() && i < truth.size(); i++)
      ok += top1[i] == truth[i];
    return 100.0 * double(ok) / double(std::max<size_t>(1, std::min(top1.size(), truth.size())));
  };
  std::cout << "model " << name << ": " << calib->size() << " calibration sets (profiled in "
            << std::fixed << std::setprecision(1) << profileS << " s on " << floatBackend << "), "
            << refTop1.size() << " test rows";
  if (!truth.empty())
    std::cout << ", float32 top-1 accuracy " << std::setprecision(2) << accuracy(refTop1) << "% ("
              << truth.size() << " labels)";
  std::cout << "\n";
  std::cout << "| model | schema | calibration | weights | SQNR dB | top-1 = float32 |"
            << (truth.empty() ? "" : " top-1 accuracy |") << " quantized nodes | s/row |\n";

  for (const std::string &precision : precisions) {
    tools::QuantFlags qf;
    qf.precision = precision;
    qf.keepFloat = keepFloat;
    tools::ModelRunner q(quantBackend);
    q.setStrictBackend(false);
    if (Error e = q.load(model, &shapeTest))
      return fail(e, "loading the model");
    std::ostringstream log;
    if (Error e = tools::convertPrecisionWithFlags(q.function(), qf, log))
      return fail(e, "converting precision");
    if (Error e = q.compile())
      return fail(e, "compiling " + precision);
    std::vector<float> values;
    std::vector<size_t> top1;
    auto t1 = std::chrono::steady_clock::now();
    if (Error e = runAll(q, *tests, values, top1))
      return fail(e, "running " + precision);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    size_t agree = 0;
    for (size_t i = 0; i < top1.size(); i++)
      agree += top1[i] == refTop1[i];
    std::cout << "| " << name << " | " << precision << " on " << quantBackend << " | - | - | "
              << std::setprecision(2) << sqnrDB(refValues, values) << " | " << agree << "/"
              << top1.size() << " |";
    if (!truth.empty())
      std::cout << " " << accuracy(top1) << "% |";
    std::cout << " " << log.str().substr(0, log.str().find(',')) << " | " << std::setprecision(3)
              << s / double(std::max<size_t>(1, top1.size())) << " |" << std::endl;
  }

  for (const std::string &weightMode : weights)
  for (const std::string &calibName : calibrates) {
    if (!int8)
      break;
    for (const std::string &schema : schemas) {
      tools::QuantFlags qf;
      qf.schema = schema;
      qf.calibrate = calibName;
      qf.percentile = percentile;
      qf.keepFloat = keepFloat;
      if (weightMode != "per-tensor" && weightMode != "per-channel" &&
          weightMode != "per-channel-symmetric")
        return fail(makeError(ErrorCode::InvalidArgument,
                              "--weights: per-tensor, per-channel or per-channel-symmetric, not '",
                              weightMode, "'"), "options");
      qf.perChannel = weightMode != "per-tensor";
      // per-channel: the schema's own weights (kiln-run's --per-channel alone gives
      // symmetric ones with the asymmetric schema: per-channel-symmetric here).
      qf.weightSchema = weightMode == "per-channel-symmetric" ? "symmetric"
                        : weightMode == "per-channel"         ? schema
                                                              : "";
      auto opts = tools::quantOptions(qf);
      if (!opts)
        return fail(opts.getError(), "options");
      tools::ModelRunner q(quantBackend);
      q.setStrictBackend(false);
      if (Error e = q.load(model, &shapeTest))
        return fail(e, "loading the model");
      if (Error e = prepareForQuantization(q.function()))
        return fail(e, "preparing");
      auto rep = quantizeFunction(q.function(), profiler.profile(), *opts);
      if (!rep)
        return fail(rep.getError(), "quantizing");
      if (Error e = q.compile())
        return fail(e, "compiling int8");
      std::vector<float> values;
      std::vector<size_t> top1;
      auto t1 = std::chrono::steady_clock::now();
      if (Error e = runAll(q, *tests, values, top1))
        return fail(e, "running int8");
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
      size_t agree = 0;
      for (size_t i = 0; i < top1.size(); i++)
        agree += top1[i] == refTop1[i];
      std::cout << "| " << name << " | " << schema << " | " << calibName << " | " << weightMode
                << " | "
                << std::setprecision(2) << sqnrDB(refValues, values) << " | " << agree << "/"
                << top1.size() << " |";
      if (!truth.empty())
        std::cout << " " << accuracy(top1) << "% |";
      std::cout << " " << rep->quantizedNodes << " (" << rep->quantizeNodes << " Q, "
                << rep->dequantizeNodes << " DQ, " << rep->rescaleNodes << " rescale, "
                << rep->keptFloat.size() << " kept float) | " << std::setprecision(3)
                << s / double(std::max<size_t>(1, top1.size())) << " |" << std::endl;
    }
  }
  return 0;
}
