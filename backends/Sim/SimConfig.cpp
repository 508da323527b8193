#include "SimConfig.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace kiln {

namespace {

/// The integer fields, by key; clockMHz is the one real-valued field.
std::map<std::string, uint64_t SimConfig::*> integerFields() {
  return {{"memory_bytes", &SimConfig::memoryBytes},
          {"macs_per_cycle_f32", &SimConfig::macsPerCycleF32},
          {"macs_per_cycle_f16", &SimConfig::macsPerCycleF16},
          {"macs_per_cycle_i8", &SimConfig::macsPerCycleI8},
          {"vector_lanes", &SimConfig::vectorLanes},
          {"dma_bytes_per_cycle", &SimConfig::dmaBytesPerCycle},
          {"launch_cycles", &SimConfig::launchCycles},
          {"scratchpad_bytes", &SimConfig::scratchpadBytes},
          {"mac_rows", &SimConfig::macRows},
          {"mac_cols", &SimConfig::macCols},
          {"dma_setup_cycles", &SimConfig::dmaSetupCycles},
          {"realtime", &SimConfig::realtime}};
}

/// A parser for the one JSON shape we accept: a flat object of numbers.
class FlatJSON {
public:
  explicit FlatJSON(const std::string &s) : s_(s) {}

  Expected<std::map<std::string, double>> parse() {
    std::map<std::string, double> out;
    skipSpace();
    if (!eat('{'))
      return fail("expected '{'");
    skipSpace();
    if (eat('}'))
      return finish(out);
    for (;;) {
      skipSpace();
      KILN_ASSIGN_OR_RETURN(std::string key, parseString());
      skipSpace();
      if (!eat(':'))
        return fail("expected ':' after \"" + key + "\"");
      skipSpace();
      KILN_ASSIGN_OR_RETURN(double v, parseNumber(key));
      if (!out.emplace(key, v).second)
        return fail("key \"" + key + "\" appears twice");
      skipSpace();
      if (eat(','))
        continue;
      if (eat('}'))
        return finish(out);
      return fail("expected ',' or '}'");
    }
  }

private:
  Expected<std::map<std::string, double>> finish(std::map<std::string, double> &out) {
    skipSpace();
    if (pos_ != s_.size())
      return fail("trailing text after the object");
    return out;
  }
  Error fail(const std::string &what) const {
    return makeError(ErrorCode::InvalidArgument, "Sim config JSON, offset ", pos_, ": ", what);
  }
  void skipSpace() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_])))
      pos_++;
  }
  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      pos_++;
      return true;
    }
    return false;
  }
  Expected<std::string> parseString() {
    if (!eat('"'))
      return fail("expected a quoted key");
    size_t end = s_.find('"', pos_);
    if (end == std::string::npos)
      return fail("unterminated string");
    std::string r = s_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return r;
  }
  Expected<double> parseNumber(const std::string &key) {
    const char *begin = s_.c_str() + pos_;
    char *end = nullptr;
    double v = std::strtod(begin, &end);
    if (end == begin)
      return fail("the value of \"" + key +
                  "\" is not a number (the config is a flat object "
                  "of numbers)");
    pos_ += size_t(end - begin);
    return v;
  }

  const std::string &s_;
  size_t pos_ = 0;
};

} // namespace

Error SimConfig::set(const std::string &key, double value) {
  if (key == "clock_mhz") {
    if (!(value > 0) || !std::isfinite(value))
      return makeError(ErrorCode::InvalidArgument, "Sim config: clock_mhz must be positive, got ",
                       value);
    clockMHz = value;
    return Error::success();
  }
  auto fields = integerFields();
  auto it = fields.find(key);
  if (it == fields.end()) {
    std::string known = "clock_mhz";
    for (const auto &f : fields)
      known += ", " + f.first;
    return makeError(ErrorCode::InvalidArgument, "Sim config: unknown key '", key,
                     "'; known: ", known);
  }
  if (key == "realtime" && value != 0 && value != 1)
    return makeError(ErrorCode::InvalidArgument, "Sim config: realtime must be 0 or 1, got ",
                     value);
  bool mayBeZero = key == "launch_cycles" || key == "realtime" || key == "dma_setup_cycles";
  if (!std::isfinite(value) || value < (mayBeZero ? 0 : 1) || value != std::floor(value) ||
      value > 1e18)
    return makeError(ErrorCode::InvalidArgument, "Sim config: ", key, " must be a ",
                     mayBeZero ? "non-negative" : "positive", " integer, got ", value);
  this->*(it->second) = uint64_t(value);
  return Error::success();
}

Expected<SimConfig> SimConfig::fromJSON(const std::string &text, const SimConfig &base) {
  KILN_ASSIGN_OR_RETURN(auto kv, FlatJSON(text).parse());
  SimConfig c = base;
  for (const auto &p : kv)
    KILN_RETURN_IF_ERR(c.set(p.first, p.second));
  return c;
}

Expected<SimConfig> SimConfig::fromFile(const std::string &path, const SimConfig &base) {
  std::ifstream in(path);
  if (!in)
    return makeError(ErrorCode::NotFound, "Sim config: cannot open '", path, "'");
  std::stringstream ss;
  ss << in.rdbuf();
  Expected<SimConfig> c = fromJSON(ss.str(), base);
  if (!c)
    return c.takeError().addContext("reading '" + path + "'");
  return c;
}

Expected<SimConfig> SimConfig::fromParameters(const std::map<std::string, std::string> &params,
                                              const SimConfig &base) {
  SimConfig c = base;
  auto file = params.find("config_file");
  if (file != params.end()) {
    KILN_ASSIGN_OR_RETURN(c, fromFile(file->second, c));
  }
  for (const auto &p : params) {
    if (p.first == "config_file")
      continue;
    char *end = nullptr;
    double v = std::strtod(p.second.c_str(), &end);
    if (p.second.empty() || *end != '\0')
      return makeError(ErrorCode::InvalidArgument, "Sim config: parameter ", p.first, " = '",
                       p.second, "' is not a number");
    KILN_RETURN_IF_ERR(c.set(p.first, v));
  }
  return c;
}

Expected<SimConfig> SimConfig::fromJSON(const std::string &text) {
  return fromJSON(text, SimConfig());
}
Expected<SimConfig> SimConfig::fromFile(const std::string &path) {
  return fromFile(path, SimConfig());
}
Expected<SimConfig> SimConfig::fromParameters(const std::map<std::string, std::string> &params) {
  return fromParameters(params, SimConfig());
}

std::string SimConfig::toJSON() const {
  std::ostringstream os;
  os << "{\"clock_mhz\": " << clockMHz;
  for (const auto &f : integerFields())
    os << ", \"" << f.first << "\": " << this->*(f.second);
  os << "}";
  return os.str();
}

} // namespace kiln
