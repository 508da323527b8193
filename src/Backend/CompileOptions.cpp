#include "kiln/Backend/CompileOptions.h"

#include <climits>

namespace kiln {

namespace {

/// The decimal number \p s (digits only, at most UINT_MAX), or false.
bool parseDecimal(const std::string &s, unsigned &out) {
  if (s.empty() || s.size() > 10)
    return false;
  unsigned long long v = 0;
  for (char c : s) {
    if (c < '0' || c > '9')
      return false;
    v = v * 10 + unsigned(c - '0');
  }
  if (v > UINT_MAX)
    return false;
  out = unsigned(v);
  return true;
}

} // namespace

Error CompileOptions::setBackendOption(const std::string &item) {
  size_t eq = item.find('=');
  if (eq == std::string::npos || eq == 0)
    return makeError(ErrorCode::InvalidArgument, "backend option '", item,
                     "': expected name=value");
  std::string name = item.substr(0, eq), value = item.substr(eq + 1);
  size_t colon = name.find(':');
  if (colon == 0 || colon + 1 == name.size())
    return makeError(ErrorCode::InvalidArgument, "backend option '", item,
                     "': expected BACKEND:name=value or name=value");
  if (name == "threads") {
    KILN_ASSIGN_OR_RETURN(threads, parseUnsignedParameter(name, value));
    return Error::success();
  }
  backendOptions[name] = value;
  return Error::success();
}

bool CompileOptions::sameSettings(const CompileOptions &other) const {
  return threads == other.threads && optimizeIR == other.optimizeIR &&
         staticMemoryPlan == other.staticMemoryPlan && backendOptions == other.backendOptions;
}

CompileOptions CompileOptions::forBackend(const std::string &backend, bool unqualified) const {
  CompileOptions o = *this;
  o.backendOptions.clear();
  for (const auto &[name, value] : backendOptions) {
    size_t colon = name.find(':');
    if (colon == std::string::npos) {
      if (unqualified)
        o.backendOptions[name] = value;
      continue;
    }
    if (name.compare(0, colon, backend) != 0 || colon != backend.size())
      continue;
    std::string plain = name.substr(colon + 1);
    unsigned n = 0;
    if (plain == "threads" && parseDecimal(value, n))
      o.threads = n;
    else // a bad thread count stays, and the backend names it
      o.backendOptions[plain] = value;
  }
  return o;
}

Error checkBackendOptions(const std::string &backend, const CompileOptions &opts,
                          const std::vector<BackendParameter> &params) {
  for (const auto &kv : opts.backendOptions) {
    bool known = false;
    for (const BackendParameter &p : params)
      known = known || p.name == kv.first;
    if (known)
      continue;
    std::string list;
    for (const BackendParameter &p : params)
      list += (list.empty() ? "" : ", ") + p.name + "=" + p.value;
    return makeError(ErrorCode::InvalidArgument, "backend ", backend, ": unknown option '",
                     kv.first, "'; known: threads=N",
                     list.empty() ? std::string() : ", " + list);
  }
  return Error::success();
}

Expected<bool> parseBoolParameter(const std::string &name, const std::string &value) {
  if (value == "1" || value == "true" || value == "on")
    return true;
  if (value == "0" || value == "false" || value == "off")
    return false;
  return makeError(ErrorCode::InvalidArgument, "backend option '", name, "': bad value '", value,
                   "' (expected 0, 1, true, false, on or off)");
}

Expected<unsigned> parseUnsignedParameter(const std::string &name, const std::string &value) {
  unsigned v = 0;
  if (!parseDecimal(value, v))
    return makeError(ErrorCode::InvalidArgument, "backend option '", name, "': bad value '",
                     value, "' (expected a non-negative decimal number)");
  return v;
}

} // namespace kiln
