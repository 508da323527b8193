// Histograms, the profile's JSON form, and the Profiler (kiln/Quantization/Profile.h).

#include "kiln/Quantization/Profile.h"
#include "kiln/Base/Trace.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

namespace kiln {

// ------------------------------------------------------------------ Histogram

Histogram::Histogram(unsigned bins) : counts_(std::max(2u, bins + (bins & 1u)), 0) {}

Histogram Histogram::fromParts(float lo, float hi, float min, float max,
                               std::vector<uint64_t> counts) {
  Histogram h(unsigned(counts.size()));
  h.lo_ = lo;
  h.hi_ = hi;
  h.min_ = min;
  h.max_ = max;
  h.total_ = 0;
  for (uint64_t c : counts)
    h.total_ += c;
  h.counts_ = std::move(counts);
  return h;
}

void Histogram::growTo(float vmin, float vmax) {
  const size_t n = counts_.size(), half = n / 2;
  // Doubling keeps bin edges aligned: the old bins merge pairwise into one half.
  while (vmin < lo_ || vmax > hi_) {
    float width = hi_ - lo_;
    std::vector<uint64_t> merged(n, 0);
    if (vmin < lo_) { // grow downwards: the old range becomes the upper half
      for (size_t k = 0; k < half; k++)
        merged[half + k] = counts_[2 * k] + counts_[2 * k + 1];
      lo_ = hi_ - 2 * width;
    } else { // grow upwards: the old range becomes the lower half
      for (size_t k = 0; k < half; k++)
        merged[k] = counts_[2 * k] + counts_[2 * k + 1];
      hi_ = lo_ + 2 * width;
    }
    counts_ = std::move(merged);
  }
}

void Histogram::add(const float *values, size_t n) {
  float vmin = INFINITY, vmax = -INFINITY;
  size_t finite = 0;
  for (size_t i = 0; i < n; i++)
    if (std::isfinite(values[i])) {
      vmin = std::min(vmin, values[i]);
      vmax = std::max(vmax, values[i]);
      finite++;
    }
  if (!finite)
    return;
  if (total_ == 0) {
    lo_ = vmin;
    hi_ = vmax;
    if (!(hi_ > lo_)) // one distinct value: a small range around it
      hi_ = lo_ + std::max(1e-6f, std::fabs(lo_) * 1e-3f);
    min_ = vmin;
    max_ = vmax;
  } else {
    growTo(vmin, vmax);
    min_ = std::min(min_, vmin);
    max_ = std::max(max_, vmax);
  }
  const size_t bins = counts_.size();
  const double inv = double(bins) / (double(hi_) - double(lo_));
  for (size_t i = 0; i < n; i++) {
    if (!std::isfinite(values[i]))
      continue;
    double b = std::floor((double(values[i]) - double(lo_)) * inv);
    size_t k = b < 0 ? 0 : std::min(bins - 1, size_t(b));
    counts_[k]++;
  }
  total_ += finite;
}

// ------------------------------------------------------------------ profile

const ValueProfile *QuantizationProfile::find(const std::string &name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &values_[it->second];
}

ValueProfile &QuantizationProfile::getOrAdd(const std::string &name, const std::string &kind,
                                            unsigned bins) {
  auto it = index_.find(name);
  if (it != index_.end())
    return values_[it->second];
  index_[name] = values_.size();
  values_.push_back({name, kind, Histogram(bins)});
  return values_.back();
}

namespace {

std::string number(double v) {
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

/// A small JSON reader for the profile's form: objects, arrays, strings, numbers, true,
/// false, null. Errors name the line.
class JsonReader {
public:
  struct Value {
    enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
    double num = 0;
    bool b = false;
    std::string str;
    std::vector<Value> items;
    std::vector<std::pair<std::string, Value>> fields;
    const Value *get(const std::string &k) const {
      for (const auto &f : fields)
        if (f.first == k)
          return &f.second;
      return nullptr;
    }
  };

  explicit JsonReader(const std::string &t) : t_(t) {}

  Expected<Value> parse() {
    Value v;
    KILN_RETURN_IF_ERR(value(v, 0));
    skip();
    if (p_ != t_.size())
      return err("end of input");
    return v;
  }

private:
  Error err(const char *what) {
    size_t line = 1 + std::count(t_.begin(), t_.begin() + std::min(p_, t_.size()), '\n');
    return makeError(ErrorCode::InvalidArgument, "quantization profile: line ", line,
                     ": expected ", what);
  }
  void skip() {
    while (p_ < t_.size() && std::isspace((unsigned char)t_[p_]))
      p_++;
  }
  bool eat(char c) {
    skip();
    if (p_ < t_.size() && t_[p_] == c) {
      p_++;
      return true;
    }
    return false;
  }
  Error string(std::string &out) {
    if (!eat('"'))
      return err("a string");
    out.clear();
    while (p_ < t_.size() && t_[p_] != '"') {
      char c = t_[p_++];
      if (c == '\\' && p_ < t_.size()) {
        char e = t_[p_++];
        switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (p_ + 4 > t_.size())
            return err("four hex digits");
          unsigned cp = unsigned(std::strtoul(t_.substr(p_, 4).c_str(), nullptr, 16));
          p_ += 4;
          if (cp < 0x80) {
            out += char(cp);
          } else if (cp < 0x800) {
            out += char(0xC0 | (cp >> 6));
            out += char(0x80 | (cp & 0x3F));
          } else {
            out += char(0xE0 | (cp >> 12));
            out += char(0x80 | ((cp >> 6) & 0x3F));
            out += char(0x80 | (cp & 0x3F));
          }
          break;
        }
        default: out += e;
        }
      } else {
        out += c;
      }
    }
    if (p_ >= t_.size())
      return err("a closing quote");
    p_++;
    return Error::success();
  }
  Error value(Value &v, unsigned depth) {
    if (depth > 64)
      return err("less nesting");
    skip();
    if (p_ >= t_.size())
      return err("a value");
    char c = t_[p_];
    if (c == '{') {
      p_++;
      v.kind = Value::Object;
      if (eat('}'))
        return Error::success();
      do {
        std::string k;
        KILN_RETURN_IF_ERR(string(k));
        if (!eat(':'))
          return err("':'");
        Value f;
        KILN_RETURN_IF_ERR(value(f, depth + 1));
        v.fields.emplace_back(std::move(k), std::move(f));
      } while (eat(','));
      if (!eat('}'))
        return err("',' or '}'");
      return Error::success();
    }
    if (c == '[') {
      p_++;
      v.kind = Value::Array;
      if (eat(']'))
        return Error::success();
      do {
        Value item;
        KILN_RETURN_IF_ERR(value(item, depth + 1));
        v.items.push_back(std::move(item));
      } while (eat(','));
      if (!eat(']'))
        return err("',' or ']'");
      return Error::success();
    }
    if (c == '"') {
      v.kind = Value::String;
      return string(v.str);
    }
    for (const char *word : {"true", "false", "null"}) {
      size_t n = std::char_traits<char>::length(word);
      if (t_.compare(p_, n, word) == 0) {
        p_ += n;
        v.kind = word[0] == 'n' ? Value::Null : Value::Bool;
        v.b = word[0] == 't';
        return Error::success();
      }
    }
    const char *start = t_.c_str() + p_;
    char *end = nullptr;
    v.num = std::strtod(start, &end);
    if (end == start)
      return err("a value");
    v.kind = Value::Number;
    p_ += size_t(end - start);
    return Error::success();
  }

  const std::string &t_;
  size_t p_ = 0;
};

} // namespace

std::string QuantizationProfile::toJSON() const {
  std::ostringstream os;
  unsigned bins = values_.empty() ? 0 : values_.front().hist.numBins();
  os << "{\"kiln_quantization_profile\": 1, \"bins\": " << bins << ", \"values\": [";
  for (size_t i = 0; i < values_.size(); i++) {
    const ValueProfile &v = values_[i];
    const Histogram &h = v.hist;
    os << (i ? ",\n" : "\n") << "  {\"name\": " << jsonQuote(v.name)
       << ", \"kind\": " << jsonQuote(v.kind) << ", \"count\": " << h.count()
       << ", \"min\": " << number(h.min()) << ", \"max\": " << number(h.max())
       << ",\n   \"histogram\": {\"lo\": " << number(h.lo()) << ", \"hi\": " << number(h.hi())
       << ", \"counts\": [";
    for (size_t k = 0; k < h.counts().size(); k++)
      os << (k ? "," : "") << h.counts()[k];
    os << "]}}";
  }
  os << "\n]}\n";
  return os.str();
}

Expected<QuantizationProfile> QuantizationProfile::fromJSON(const std::string &text) {
  JsonReader r(text);
  KILN_ASSIGN_OR_RETURN(JsonReader::Value root, r.parse());
  using V = JsonReader::Value;
  auto bad = [](const std::string &where, const char *what) {
    return makeError(ErrorCode::InvalidArgument, "quantization profile: ", where, ": ", what);
  };
  if (root.kind != V::Object || !root.get("kiln_quantization_profile"))
    return bad("top level", "not an object with \"kiln_quantization_profile\"");
  const V *vals = root.get("values");
  if (!vals || vals->kind != V::Array)
    return bad("top level", "no \"values\" array");
  QuantizationProfile p;
  for (size_t i = 0; i < vals->items.size(); i++) {
    const V &e = vals->items[i];
    std::string where = "value " + std::to_string(i);
    const V *name = e.get("name"), *mn = e.get("min"), *mx = e.get("max");
    if (e.kind != V::Object || !name || name->kind != V::String)
      return bad(where, "no \"name\" string");
    where += " ('" + name->str + "')";
    if (!mn || !mx || mn->kind != V::Number || mx->kind != V::Number)
      return bad(where, "\"min\" and \"max\" must be numbers");
    if (!(mn->num <= mx->num))
      return bad(where, "\"min\" is above \"max\"");
    if (p.find(name->str))
      return bad(where, "the name appears twice");
    const V *kind = e.get("kind");
    std::string k = kind && kind->kind == V::String ? kind->str : "";
    float lo = float(mn->num), hi = float(mx->num);
    std::vector<uint64_t> counts;
    if (const V *h = e.get("histogram")) {
      const V *hl = h->get("lo"), *hh = h->get("hi"), *hc = h->get("counts");
      if (h->kind != V::Object || !hl || !hh || !hc || hl->kind != V::Number ||
          hh->kind != V::Number || hc->kind != V::Array)
        return bad(where, "\"histogram\" needs numbers \"lo\", \"hi\" and a \"counts\" array");
      if (!(hl->num < hh->num))
        return bad(where, "histogram \"lo\" must be below \"hi\"");
      if (hc->items.size() < 2 || hc->items.size() % 2)
        return bad(where, "histogram \"counts\" must have an even number (>= 2) of entries");
      lo = float(hl->num);
      hi = float(hh->num);
      for (const V &c : hc->items) {
        if (c.kind != V::Number || c.num < 0 || c.num != std::floor(c.num))
          return bad(where, "histogram counts must be non-negative integers");
        counts.push_back(uint64_t(c.num));
      }
    } else {
      // No histogram: one bin pair over [min, max] (min/max calibration only).
      counts = {0, 0};
      if (!(hi > lo))
        hi = lo + 1e-6f;
    }
    ValueProfile &v = p.getOrAdd(name->str, k, unsigned(counts.size()));
    v.hist = Histogram::fromParts(lo, hi, float(mn->num), float(mx->num), std::move(counts));
  }
  return p;
}

Error QuantizationProfile::writeFile(const std::string &path) const {
  std::ofstream out(path);
  out << toJSON();
  out.close();
  if (!out)
    return makeError(ErrorCode::InvalidArgument, "cannot write the quantization profile '", path,
                     "'");
  return Error::success();
}

Expected<QuantizationProfile> QuantizationProfile::readFile(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    return makeError(ErrorCode::NotFound, "cannot read the quantization profile '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  Expected<QuantizationProfile> p = fromJSON(ss.str());
  if (!p)
    return makeError(ErrorCode::InvalidArgument, path, ": ", p.getError().message());
  return p;
}

// ------------------------------------------------------------------ Profiler

std::string profileValueName(const NodeValue &v) {
  std::string n = v.node->getName();
  if (v.resNo > 0)
    n += ":" + std::to_string(v.resNo);
  return n;
}

size_t Profiler::instrument(Function *f) {
  Module *m = f->getParent();
  std::vector<NodeValue> values;
  std::set<const Node *> seenInputs;
  // Snapshot first: the Saves added below must not be visited.
  std::vector<Node *> nodes;
  for (const auto &n : f->getNodes())
    nodes.push_back(n.get());
  for (Node *n : nodes) {
    if (isa<SaveNode>(n))
      continue;
    for (unsigned i = 0; i < n->getNumInputs(); i++) {
      NodeValue in = n->getNthInput(i);
      if (isa<Placeholder>(in.node) && in.getElementType() == ElemKind::Float &&
          seenInputs.insert(in.node).second)
        values.push_back(in);
    }
    for (unsigned r = 0; r < n->getNumResults(); r++)
      if (n->getType(r)->kind == ElemKind::Float)
        values.push_back(NodeValue(n, r));
  }
  for (const NodeValue &v : values) {
    std::string name = profileValueName(v);
    Placeholder *ph = m->createPlaceholder(v.getType(), "__qprofile_" + name);
    f->createSave("__qprofile_save_" + name, v, NodeValue(ph));
    probes_.push_back({name, v.node->getKindName(), ph});
  }
  return values.size();
}

void Profiler::allocate(PlaceholderBindings &b) const {
  for (const Probe &p : probes_)
    if (!b.get(p.ph))
      b.allocate(p.ph);
}

Error Profiler::record(const PlaceholderBindings &b) {
  for (const Probe &p : probes_) {
    Tensor *t = b.get(p.ph);
    if (!t)
      return makeError(ErrorCode::InvalidArgument, "profiling placeholder for '", p.name,
                       "' is not bound (call Profiler::allocate before running)");
    auto h = t->getHandle<float>();
    profile_.getOrAdd(p.name, p.kind, bins_).hist.add(h.begin(), h.size());
  }
  return Error::success();
}

} // namespace kiln
