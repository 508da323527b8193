// Scale/offset choice per schema and range calibration from a histogram
// (kiln/Quantization/Quantize.h).

#include "kiln/Quantization/Quantize.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln {

Expected<QuantSchema> parseQuantSchema(const std::string &s) {
  if (s == "asymmetric")
    return QuantSchema::Asymmetric;
  if (s == "symmetric")
    return QuantSchema::Symmetric;
  if (s == "symmetric-uint8")
    return QuantSchema::SymmetricWithUInt8;
  if (s == "power2")
    return QuantSchema::SymmetricWithPower2Scale;
  return makeError(ErrorCode::InvalidArgument, "unknown quantization schema '", s,
                   "' (known: asymmetric, symmetric, symmetric-uint8, power2)");
}

const char *quantSchemaName(QuantSchema s) {
  switch (s) {
  case QuantSchema::Asymmetric: return "asymmetric";
  case QuantSchema::Symmetric: return "symmetric";
  case QuantSchema::SymmetricWithUInt8: return "symmetric-uint8";
  case QuantSchema::SymmetricWithPower2Scale: return "power2";
  }
  return "?";
}

Expected<Calibration> parseCalibration(const std::string &s) {
  if (s == "minmax")
    return Calibration::MinMax;
  if (s == "percentile")
    return Calibration::Percentile;
  if (s == "mse")
    return Calibration::MSE;
  return makeError(ErrorCode::InvalidArgument, "unknown calibration method '", s,
                   "' (known: minmax, percentile, mse)");
}

const char *calibrationName(Calibration c) {
  switch (c) {
  case Calibration::MinMax: return "minmax";
  case Calibration::Percentile: return "percentile";
  case Calibration::MSE: return "mse";
  }
  return "?";
}

QuantSchema effectiveWeightSchema(const QuantizationOptions &o) {
  if (o.weightSchema)
    return *o.weightSchema;
  return o.perChannel && o.schema == QuantSchema::Asymmetric ? QuantSchema::Symmetric : o.schema;
}

QuantParams chooseQuantParams(float min, float max, QuantSchema schema) {
  const bool nonNegative = min >= 0;
  double lo = std::min(double(min), 0.0), hi = std::max(double(max), 0.0);
  if (!(hi - lo > 0)) // always 0
    hi = 1e-3;
  QuantParams p;
  const double a = std::max(-lo, hi);
  switch (schema) {
  case QuantSchema::Asymmetric: {
    double scale = (hi - lo) / 255.0;
    p.scale = float(scale);
    double off = std::round(-128.0 - lo / double(p.scale));
    p.offset = int32_t(std::clamp(off, -128.0, 127.0));
    return p;
  }
  case QuantSchema::SymmetricWithUInt8:
    if (nonNegative) {
      p.scale = float(hi / 255.0);
      p.offset = -128;
      return p;
    }
    p.scale = float(a / 127.0);
    return p;
  case QuantSchema::Symmetric:
    p.scale = float(a / 127.0);
    return p;
  case QuantSchema::SymmetricWithPower2Scale:
    p.scale = float(std::exp2(std::ceil(std::log2(a / 127.0))));
    return p;
  }
  return p;
}

namespace {

/// Expected squared error of quantizing the histogram's contents to the grid of \p p:
/// step^2 / 12 per value inside the grid's range, the squared distance to the nearest end
/// for values outside (taken at bin centres).
double expectedError(const Histogram &h, const QuantParams &p) {
  const double lo = double(p.scale) * (-128.0 - p.offset), hi = double(p.scale) * (127.0 - p.offset);
  const double w = (double(h.hi()) - double(h.lo())) / h.numBins();
  const double rounding = double(p.scale) * double(p.scale) / 12.0;
  double err = 0;
  for (unsigned k = 0; k < h.numBins(); k++) {
    uint64_t n = h.counts()[k];
    if (!n)
      continue;
    double c = double(h.lo()) + (k + 0.5) * w;
    if (c < lo)
      err += double(n) * (lo - c) * (lo - c);
    else if (c > hi)
      err += double(n) * (c - hi) * (c - hi);
    else
      err += double(n) * rounding;
  }
  return err;
}

} // namespace

std::pair<float, float> calibrateRange(const Histogram &h, Calibration method,
                                       QuantSchema schema, float percentile) {
  const float mn = h.min(), mx = h.max();
  if (method == Calibration::MinMax || h.count() == 0)
    return {mn, mx};
  if (method == Calibration::Percentile) {
    // Cut (100 - percentile) / 2 per cent of the values off each end, at bin edges: the
    // lower end moves up past whole bins holding at most that many values, the upper end
    // down likewise.
    const double cut = double(h.count()) * (100.0 - double(percentile)) / 200.0;
    const double w = (double(h.hi()) - double(h.lo())) / h.numBins();
    unsigned first = 0, last = h.numBins() - 1;
    double acc = 0;
    while (first < last && acc + double(h.counts()[first]) <= cut)
      acc += double(h.counts()[first++]);
    acc = 0;
    while (last > first && acc + double(h.counts()[last]) <= cut)
      acc += double(h.counts()[last--]);
    float lo = float(double(h.lo()) + first * w), hi = float(double(h.lo()) + (last + 1) * w);
    return {std::max(lo, mn), std::min(hi, mx)};
  }
  // MSE: shrink [min, max] towards 0 by k = i / 100 and keep the best grid.
  double best = std::numeric_limits<double>::infinity();
  std::pair<float, float> range{mn, mx};
  for (int i = 100; i >= 1; i--) {
    float k = float(i) / 100.0f;
    float lo = mn * k, hi = mx * k;
    double e = expectedError(h, chooseQuantParams(lo, hi, schema));
    if (e < best) {
      best = e;
      range = {lo, hi};
    }
  }
  return range;
}

double sqnrDB(const std::vector<float> &ref, const std::vector<float> &test) {
  double s = 0, n = 0;
  for (size_t i = 0; i < ref.size() && i < test.size(); i++) {
    s += double(ref[i]) * ref[i];
    double d = double(ref[i]) - test[i];
    n += d * d;
  }
  if (n == 0)
    return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(s / n);
}

} // namespace kiln
