// image-classifier: classifies PNG images with an ONNX model on a chosen backend and prints
// the top-k classes of each image with their probabilities.
//
//   image-classifier --model M.onnx [--backend Interpreter] [--top-k 5] [--labels FILE]
//                    [--mean 0.485,0.456,0.406] [--std 0.229,0.224,0.225] [--scale 1|255]
//                    [--layout NCHW|NHWC] [--channels 1|3] [--threads N]
//                    [--backend-opt NAME=VALUE]... [--quantize PROFILE [--schema S]
//                    [--calibrate M] [--keep-float K,...]] [--quant-profile FILE] IMAGE.png...
//
// Images are read with libpng (any colour type and bit depth), resized (bilinear) to the
// model's input size, normalised as (p * scale - mean) / std per channel with p in [0, 1],
// and run together as one batch (a model with a fixed batch size runs them in chunks of
// it). A softmax is applied when the model's output is not already a probability
// distribution. Exit 0 on success, 2 on any error (message on stderr), never a crash.

#include "Flags.h"
#include "Image.h"
#include "QuantFlags.h"

#include "kiln/Backend/Backend.h"
#include "kiln/Importer/ONNX.h"
#include "kiln/kiln.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

namespace {

using namespace kiln;
using tools::Image;

struct Options {
  std::string model, backend = "Interpreter", labels, layout = "NCHW";
  unsigned topK = 5, channels = 0, threads = 1;
  bool haveMean = false, haveStd = false;
  std::vector<float> mean, std;
  float scale = 1.0f;
  std::vector<std::string> images;
  /// --backend-opt items (threads=N sets compile.threads, overriding --threads).
  CompileOptions compile;
  /// --quantize PROFILE and its schema, calibration and keep-float flags.
  tools::QuantFlags quant;
};

bool parseFloats(const std::string &s, std::vector<float> &out) {
  out.clear();
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char *end = nullptr;
    float v = std::strtof(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !std::isfinite(v))
      return false;
    out.push_back(v);
  }
  return !out.empty() && out.size() <= 3 && out.size() != 2;
}

/// Parses the flags into \p f; returns the exit status when the tool should stop.
std::optional<int> parseOptions(int argc, char **argv, Options &f) {
  tools::Flags flags("image-classifier",
                     "usage: image-classifier --model M.onnx [options] IMAGE.png...",
                     "Each image is resized to the model's input size and normalised as\n"
                     "(pixel * scale - mean) / std; all images run as one batch. Exit 0 ok, "
                     "2 on error.\n");
  flags.add("--model", f.model, "M.onnx", "the ONNX model").required();
  flags.add("--backend", f.backend, "NAME", "Interpreter, CPU, ...");
  flags.add("--top-k", f.topK, "K", "classes printed per image");
  flags.add("--labels", f.labels, "FILE", "class names, one per line (default: class indices)");
  flags.add("--mean", "A[,B,C]", "per-channel mean", "1 or 3 comma-separated numbers",
            "ImageNet's: 0.485,0.456,0.406",
            [&](const std::string &v) { return f.haveMean = parseFloats(v, f.mean); });
  flags.add("--std", "A[,B,C]", "per-channel standard deviation", "1 or 3 comma-separated numbers",
            "ImageNet's: 0.229,0.224,0.225",
            [&](const std::string &v) { return f.haveStd = parseFloats(v, f.std); });
  flags.add("--scale", "1|255", "pixel values in [0, 1] or [0, 255] before mean and std",
            "1 or 255", "1", [&](const std::string &v) {
              if (v != "1" && v != "255")
                return false;
              f.scale = v == "1" ? 1.0f : 255.0f;
              return true;
            });
  flags.add("--layout", "NCHW|NHWC", "input layout of the model", "NCHW or NHWC", f.layout,
            [&](const std::string &v) {
              if (v != "NCHW" && v != "NHWC")
                return false;
              f.layout = v;
              return true;
            });
  flags.add("--channels", "1|3", "colour channels", "1 or 3", "from the model's input shape",
            [&](const std::string &v) {
              if (v != "1" && v != "3")
                return false;
              f.channels = v == "1" ? 1 : 3;
              return true;
            });
  flags.add("--threads", f.threads, "N", "intra-op threads of backends that use them");
  f.compile.threads = 0;
  flags.add("--backend-opt", "NAME=VALUE",
            "a backend parameter, repeatable (e.g. CPU spin-us=N; an unknown name lists the "
            "known ones)",
            "NAME=VALUE", "none",
            [&f](const std::string &v) { return !bool(f.compile.setBackendOption(v)); });
  tools::addQuantFlags(flags, f.quant, /*profiling=*/true, /*calibrationDir=*/false);
  flags.positional(f.images);
  if (std::optional<int> exitCode = flags.parse(argc, argv))
    return exitCode;
  if (f.compile.threads) // threads=N among the backend options
    f.threads = f.compile.threads;
  if (f.images.empty())
    return flags.fail("no images given");
  if (f.topK == 0)
    return flags.fail("--top-k must be at least 1");
  if (!f.quant.profileOut.empty() && !f.quant.quantize.empty())
    return flags.fail("--quant-profile and --quantize are separate steps");
  return std::nullopt;
}

/// The model's image input: layout-independent sizes read from its declared shape.
struct InputShape {
  std::string name;
  dim_t batch = 1, channels = 0, height = 0, width = 0;
};

Dims imageDims(const Options &f, const InputShape &s, dim_t batch) {
  if (f.layout == "NCHW")
    return {batch, s.channels, s.height, s.width};
  return {batch, s.height, s.width, s.channels};
}

/// Loads the model once into a scratch module to learn its image input's shape.
Expected<InputShape> probeInput(const Options &f) {
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> names, getONNXInputNames(f.model));
  if (names.size() != 1)
    return makeError(ErrorCode::InvalidArgument, "the model has ", names.size(),
                     " inputs; an image classifier needs exactly one (an image batch)");
  Module mod;
  Function *fn = mod.createFunction("probe");
  KILN_ASSIGN_OR_RETURN(ONNXModel m, loadONNX(f.model, fn));
  Placeholder *ph = m.getInput(names[0]);
  if (!ph)
    return makeError(ErrorCode::InvalidArgument, "the model's input '", names[0],
                     "' is not a placeholder");
  const Type &ty = *ph->getType();
  if (ty.kind != ElemKind::Float)
    return makeError(ErrorCode::InvalidArgument, "the model's input '", names[0], "' is ",
                     ty.toString(), "; images need a float input");
  if (ty.dims.size() != 4)
    return makeError(ErrorCode::InvalidArgument, "the model's input '", names[0], "' is ",
                     ty.toString(), "; images need a 4-d ", f.layout, " input");
  InputShape s;
  s.name = names[0];
  s.batch = ty.dims[0];
  bool nchw = f.layout == "NCHW";
  s.channels = nchw ? ty.dims[1] : ty.dims[3];
  s.height = nchw ? ty.dims[2] : ty.dims[1];
  s.width = nchw ? ty.dims[3] : ty.dims[2];
  if (s.channels != 1 && s.channels != 3)
    return makeError(ErrorCode::InvalidArgument, "the model's input '", names[0], "' is ",
                     ty.toString(), ": ", s.channels, " channels in layout ", f.layout,
                     "; images have 1 or 3 (wrong --layout?)");
  if (f.channels != 0 && f.channels != s.channels)
    return makeError(ErrorCode::InvalidArgument, "--channels ", f.channels,
                     " does not match the model's input ", ty.toString(), " (", f.layout, ")");
  if (s.height == 0 || s.width == 0 || s.height > tools::kMaxImageSide ||
      s.width > tools::kMaxImageSide)
    return makeError(ErrorCode::InvalidArgument, "the model's input ", ty.toString(),
                     " has no usable image size");
  return s;
}

/// One compiled instance of the model at a given batch size.
struct Compiled {
  std::unique_ptr<ExecutionEngine> ee;
  Placeholder *input = nullptr, *output = nullptr;
  dim_t batch = 0;
  /// With --quant-profile: the instrumented function's profiler.
  std::unique_ptr<Profiler> profiler;
};

Expected<Compiled> compileAt(const Options &f, const InputShape &s, dim_t batch) {
  Compiled c;
  c.batch = batch;
  c.ee = std::make_unique<ExecutionEngine>(f.backend);
  if (!c.ee->getBackend()) {
    std::string known;
    for (const std::string &b : getRegisteredBackends())
      known += (known.empty() ? "" : ", ") + b;
    return makeError(ErrorCode::NotFound, "unknown backend '", f.backend,
                     "' (this build has: ", known, ")");
  }
  Function *fn = c.ee->getModule().createFunction("main");
  ONNXLoadOptions opts;
  opts.inputShapes[s.name] = imageDims(f, s, batch).vec();
  KILN_ASSIGN_OR_RETURN(ONNXModel m, loadONNX(f.model, fn, opts));
  if (m.outputNames.empty())
    return makeError(ErrorCode::InvalidArgument, "the model has no outputs");
  c.input = m.getInput(s.name);
  c.output = m.getOutputPlaceholder(m.outputNames[0]);
  const Type &oty = *c.output->getType();
  if (oty.dims.empty() || oty.dims[0] != batch)
    return makeError(ErrorCode::InvalidArgument, "the model's output '", m.outputNames[0],
                     "' is ", oty.toString(), " for a batch of ", batch,
                     "; expected [batch, classes]");
  if (!f.quant.quantize.empty())
    KILN_RETURN_IF_ERR(tools::quantizeWithFlags(fn, f.quant, std::cerr));
  if (!f.quant.precision.empty())
    KILN_RETURN_IF_ERR(tools::convertPrecisionWithFlags(fn, f.quant, std::cerr));
  if (!f.quant.profileOut.empty()) {
    KILN_RETURN_IF_ERR(prepareForQuantization(fn));
    c.profiler = std::make_unique<Profiler>(f.quant.bins);
    c.profiler->instrument(fn);
  }
  CompileOptions copts = f.compile;
  copts.threads = f.threads;
  KILN_RETURN_IF_ERR(c.ee->compile(copts));
  return c;
}

Expected<std::vector<std::string>> readLabels(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    return makeError(ErrorCode::NotFound, "cannot open labels file '", path, "'");
  std::vector<std::string> labels;
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
      line.pop_back();
    labels.push_back(line);
  }
  while (!labels.empty() && labels.back().empty())
    labels.pop_back();
  return labels;
}

/// True when every row of \p v (rows x k) is already a probability distribution.
bool isNormalised(const std::vector<double> &v, size_t rows, size_t k) {
  for (size_t r = 0; r < rows; r++) {
    double sum = 0;
    for (size_t j = 0; j < k; j++) {
      double p = v[r * k + j];
      if (!(p >= -1e-6 && p <= 1 + 1e-6))
        return false;
      sum += p;
    }
    if (std::fabs(sum - 1) > 1e-3)
      return false;
  }
  return true;
}

void softmaxRows(std::vector<double> &v, size_t rows, size_t k) {
  for (size_t r = 0; r < rows; r++) {
    double *row = v.data() + r * k;
    double mx = -INFINITY;
    for (size_t j = 0; j < k; j++)
      if (std::isfinite(row[j]))
        mx = std::max(mx, row[j]);
    double sum = 0;
    for (size_t j = 0; j < k; j++) {
      row[j] = std::isnan(row[j]) ? 0 : std::exp(row[j] - (std::isfinite(mx) ? mx : 0));
      sum += row[j];
    }
    for (size_t j = 0; j < k; j++)
      row[j] = sum > 0 && std::isfinite(sum) ? row[j] / sum : 1.0 / double(k);
  }
}

int fail(const std::string &what, const Error &e) {
  std::cerr << "image-classifier: " << what << ": " << e.message() << "\n";
  return 2;
}

/// Every image read, resized and normalised into one batch of the model's input layout:
/// a bad file fails before compiling.
Expected<std::vector<float>> loadImages(const Options &f, const InputShape &shape,
                                        const tools::Normalization &norm) {
  const size_t n = f.images.size();
  const size_t perImage = size_t(shape.channels * shape.height * shape.width);
  std::vector<float> batchData(n * perImage);
  std::vector<float> chw(f.layout == "NCHW" ? 0 : perImage);
  for (size_t i = 0; i < n; i++) {
    KILN_ASSIGN_OR_RETURN(Image img, tools::readPNG(f.images[i], unsigned(shape.channels)));
    Image r = tools::resizeBilinear(img, unsigned(shape.width), unsigned(shape.height));
    float *dst = batchData.data() + i * perImage;
    if (Error e = tools::writeCHW(r, norm, f.layout == "NCHW" ? dst : chw.data()))
      return std::move(e).addContext("normalising '" + f.images[i] + "'");
    if (f.layout == "NCHW")
      continue;
    for (dim_t c = 0; c < shape.channels; c++)
      for (dim_t y = 0; y < shape.height; y++)
        for (dim_t x = 0; x < shape.width; x++)
          dst[(y * shape.width + x) * shape.channels + c] =
              chw[(c * shape.height + y) * shape.width + x];
  }
  return batchData;
}

/// The scores of all \p n images ([n, classes]), run in chunks of the compiled batch; with
/// a profiler, each run is recorded and the profile written at the end.
Expected<std::vector<double>> scoreImages(const Options &f, Compiled &c,
                                          const std::vector<float> &batchData, size_t n,
                                          size_t classes) {
  const size_t perImage = batchData.size() / n;
  std::vector<double> scores(n * classes);
  PlaceholderBindings b;
  for (size_t start = 0; start < n; start += c.batch) {
    Tensor in(*c.input->getType());
    size_t count = std::min(size_t(c.batch), n - start);
    float *dst = reinterpret_cast<float *>(in.getUnsafePtr());
    std::copy(batchData.begin() + start * perImage,
              batchData.begin() + (start + count) * perImage, dst);
    b.clear();
    b.insert(c.input, std::move(in));
    b.allocate(c.output);
    if (c.profiler)
      c.profiler->allocate(b);
    KILN_RETURN_IF_ERR(c.ee->run(b));
    if (c.profiler)
      if (Error e = c.profiler->record(b))
        return std::move(e).addContext("profiling");
    const Tensor *out = b.get(c.output);
    for (size_t i = 0; i < count * classes; i++)
      scores[start * classes + i] = out->getAsDouble(i);
  }
  if (c.profiler) {
    if (Error e = c.profiler->profile().writeFile(f.quant.profileOut))
      return std::move(e).addContext("writing the profile");
    std::cerr << "image-classifier: profiled " << c.profiler->profile().size() << " values over "
              << n << " images; wrote " << f.quant.profileOut << "\n";
  }
  return scores;
}

/// Each image's top class, then its top k with their scores.
void printTopK(const Options &f, const std::vector<double> &scores, size_t classes,
               const std::vector<std::string> &labels) {
  const unsigned k = unsigned(std::min<size_t>(f.topK, classes));
  for (size_t i = 0; i < f.images.size(); i++) {
    const double *row = scores.data() + i * classes;
    std::vector<size_t> order(classes);
    for (size_t j = 0; j < classes; j++)
      order[j] = j;
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](size_t a, size_t b2) {
                        return row[a] > row[b2] || (row[a] == row[b2] && a < b2);
                      });
    auto name = [&](size_t j) { return labels.empty() ? std::to_string(j) : labels[j]; };
    std::cout << f.images[i] << ": " << name(order[0]) << "\n";
    for (unsigned r = 0; r < k; r++)
      std::cout << "  " << std::fixed << std::setprecision(4) << row[order[r]] << "  "
                << name(order[r]) << (labels.empty() ? "" : " (" + std::to_string(order[r]) + ")")
                << "\n";
    std::cout.unsetf(std::ios::fixed);
  }
}

int classify(const Options &f) {
  Expected<InputShape> shapeOr = probeInput(f);
  if (!shapeOr)
    return fail("model '" + f.model + "'", shapeOr.takeError());
  InputShape shape = std::move(shapeOr).get();

  tools::Normalization norm = tools::imageNetNormalization(unsigned(shape.channels));
  norm.scale = f.scale;
  if (f.haveMean)
    norm.mean = f.mean;
  if (f.haveStd)
    norm.std = f.std;

  std::vector<std::string> labels;
  if (!f.labels.empty()) {
    Expected<std::vector<std::string>> l = readLabels(f.labels);
    if (!l)
      return fail("labels", l.takeError());
    labels = std::move(l).get();
  }
  Expected<std::vector<float>> batchData = loadImages(f, shape, norm);
  if (!batchData)
    return fail("image", batchData.takeError());

  // The whole set as one batch; a model whose batch size is baked in (a constant Reshape
  // after the features, say) runs in chunks of its declared batch instead.
  const size_t n = f.images.size();
  Expected<Compiled> compiled = compileAt(f, shape, dim_t(n));
  if (!compiled && dim_t(n) != shape.batch && shape.batch >= 1) {
    Error first = compiled.takeError();
    compiled = compileAt(f, shape, shape.batch);
    if (!compiled)
      return fail("compiling for a batch of " + std::to_string(n), first);
  }
  if (!compiled)
    return fail("compiling", compiled.takeError());
  Compiled &c = *compiled;

  const Type &oty = *c.output->getType();
  const size_t classes = size_t(oty.numElements() / c.batch);
  if (!labels.empty() && labels.size() < classes)
    return fail("labels", makeError(ErrorCode::InvalidArgument, "'", f.labels, "' has ",
                                    labels.size(), " labels; the model has ", classes,
                                    " classes"));
  if (!labels.empty() && labels.size() > classes)
    std::cerr << "image-classifier: warning: '" << f.labels << "' has " << labels.size()
              << " labels, the model " << classes << " classes\n";

  Expected<std::vector<double>> scoresOr = scoreImages(f, c, *batchData, n, classes);
  if (!scoresOr)
    return fail("running", scoresOr.takeError());
  std::vector<double> scores = std::move(scoresOr).get();
  bool normalised = isNormalised(scores, n, classes);
  if (!normalised)
    softmaxRows(scores, n, classes);

  std::cout << "model " << f.model << " on " << f.backend << ": " << n << " image"
            << (n == 1 ? "" : "s") << ", input " << c.input->getType()->toString() << ", "
            << classes << " classes" << (normalised ? "" : " (softmax applied)") << "\n";
  printTopK(f, scores, classes, labels);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options f;
  if (std::optional<int> exitCode = parseOptions(argc, argv, f))
    return *exitCode;
  try {
    return classify(f);
  } catch (const std::exception &e) {
    std::cerr << "image-classifier: " << e.what() << "\n";
    return 2;
  }
}
