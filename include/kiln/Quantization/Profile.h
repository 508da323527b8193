/// \file
/// Quantization profiles: what a float function's values look like over calibration
/// inputs. A Profiler instruments a Function (one Save per profiled value into a
/// placeholder of its own), the function is compiled and run over the calibration inputs
/// on any backend, and after each run record() folds the saved values into a min/max and a
/// histogram per value. The profile is written as JSON that a person can read and edit
/// (docs/Quantization.md):
///
/// \code
///   {"kiln_quantization_profile": 1, "bins": 1024, "values": [
///     {"name": "conv1", "kind": "Convolution", "count": 802816, "min": -3.1, "max": 7.9,
///      "histogram": {"lo": -4.0, "hi": 8.0, "counts": [0, 3, ...]}}, ...]}
/// \endcode
///
/// Values are named after their node ("name", or "name:K" for result K > 0 of a node with
/// several); graph inputs after their placeholder. Editing min/max changes what min/max
/// calibration picks; the histogram feeds the histogram methods.
#ifndef KILN_QUANTIZATION_PROFILE_H
#define KILN_QUANTIZATION_PROFILE_H

#include "kiln/Backend/ExecutionContext.h"
#include "kiln/Base/Error.h"
#include "kiln/Graph/Graph.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln {

/// A histogram of fixed bin count over a range that grows as values arrive. The first
/// values set the range to [their min, their max]; a later value outside it doubles the
/// range (keeping the far end, so the old bins merge pairwise into the half they cover)
/// until it fits. Non-finite values are not counted.
class Histogram {
public:
  /// \p bins must be even and at least 2 (an odd count is rounded up).
  explicit Histogram(unsigned bins = 1024);
  /// Adds \p n values.
  void add(const float *values, size_t n);
  unsigned numBins() const { return unsigned(counts_.size()); }
  float lo() const { return lo_; }
  float hi() const { return hi_; }
  /// Smallest and largest finite value seen (0 and 0 before any).
  float min() const { return min_; }
  float max() const { return max_; }
  uint64_t count() const { return total_; }
  const std::vector<uint64_t> &counts() const { return counts_; }
  /// A histogram with the given state, e.g. read from a profile file; \p counts.size()
  /// is the bin count.
  static Histogram fromParts(float lo, float hi, float min, float max,
                             std::vector<uint64_t> counts);

private:
  void growTo(float vmin, float vmax);
  std::vector<uint64_t> counts_;
  float lo_ = 0, hi_ = 0, min_ = 0, max_ = 0;
  uint64_t total_ = 0;
};

/// The profile of one value.
struct ValueProfile {
  std::string name;
  std::string kind; ///< the producing node's kind ("Placeholder" for an input)
  Histogram hist;
};

/// The profile of a function: one entry per profiled value, by name.
class QuantizationProfile {
public:
  /// The entry of \p name, or null.
  const ValueProfile *find(const std::string &name) const;
  ValueProfile &getOrAdd(const std::string &name, const std::string &kind, unsigned bins);
  const std::vector<ValueProfile> &values() const { return values_; }
  size_t size() const { return values_.size(); }

  /// The JSON text of the file comment.
  std::string toJSON() const;
  /// Parses toJSON()'s form. InvalidArgument naming the line and what was expected.
  static Expected<QuantizationProfile> fromJSON(const std::string &text);
  Error writeFile(const std::string &path) const;
  static Expected<QuantizationProfile> readFile(const std::string &path);

private:
  std::vector<ValueProfile> values_;
  std::map<std::string, size_t> index_;
};

/// The name under which a value is profiled: the node's name ("name:K" for result K > 0).
std::string profileValueName(const NodeValue &v);

/// Instruments a function for profiling and collects the profile over runs.
class Profiler {
public:
  explicit Profiler(unsigned bins = 1024) : bins_(bins) {}
  /// Adds a Save of every float32 value of \p f (graph inputs and node results, not
  /// constants and not values that are only saved) into a placeholder of its own. Call
  /// after prepareForQuantization (kiln/Quantization/Quantize.h) and before compiling.
  /// Returns the number of values instrumented.
  size_t instrument(Function *f);
  /// Allocates the profiling placeholders in \p b (call before each run, or once).
  void allocate(PlaceholderBindings &b) const;
  /// Folds the values the last run saved into the profile. InvalidArgument when a
  /// profiling placeholder is unbound.
  Error record(const PlaceholderBindings &b);
  const QuantizationProfile &profile() const { return profile_; }

private:
  struct Probe {
    std::string name, kind;
    Placeholder *ph;
  };
  unsigned bins_;
  std::vector<Probe> probes_;
  QuantizationProfile profile_;
};

} // namespace kiln

#endif // KILN_QUANTIZATION_PROFILE_H
