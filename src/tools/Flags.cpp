// The tools' command-line flags (see Flags.h).

#include "Flags.h"

#include <algorithm>
#include <limits>
#include <set>
#include <sstream>

namespace kiln::tools {

namespace {

/// Decimal digits only (no sign, no spaces), at most \p max.
bool parseInteger(const std::string &s, uint64_t max, uint64_t &out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
    return false;
  uint64_t v = 0;
  for (char c : s) {
    uint64_t d = uint64_t(c - '0');
    if (v > (max - d) / 10)
      return false;
    v = v * 10 + d;
  }
  out = v;
  return true;
}

} // namespace

Flags::Flags(std::string tool, std::string synopsis, std::string notes)
    : tool_(std::move(tool)), synopsis_(std::move(synopsis)), notes_(std::move(notes)) {}

Flags &Flags::declare(Flag f) {
  flags_.push_back(std::move(f));
  return *this;
}

Flags &Flags::add(const std::string &name, std::string &out, const std::string &valueName,
                  const std::string &help) {
  return declare(
      {name, valueName, help, "a value", out, false, false, [&out](const std::string &v) {
         out = v;
         return true;
       }});
}

Flags &Flags::add(const std::string &name, unsigned &out, const std::string &valueName,
                  const std::string &help) {
  return declare({name, valueName, help, "a non-negative integer", std::to_string(out), false,
                  false, [&out](const std::string &v) {
                    uint64_t n;
                    if (!parseInteger(v, std::numeric_limits<unsigned>::max(), n))
                      return false;
                    out = unsigned(n);
                    return true;
                  }});
}

Flags &Flags::add(const std::string &name, uint64_t &out, const std::string &valueName,
                  const std::string &help) {
  return declare({name, valueName, help, "a non-negative integer", std::to_string(out), false,
                  false, [&out](const std::string &v) {
                    return parseInteger(v, std::numeric_limits<uint64_t>::max(), out);
                  }});
}

Flags &Flags::add(const std::string &name, std::vector<std::string> &out,
                  const std::string &valueName, const std::string &help) {
  std::string def;
  for (const std::string &s : out)
    def += (def.empty() ? "" : ",") + s;
  return declare({name, valueName, help, "a comma-separated list", def, false, false,
                  [&out](const std::string &v) {
                    std::stringstream ss(v);
                    for (std::string item; std::getline(ss, item, ',');)
                      if (!item.empty())
                        out.push_back(item);
                    return true;
                  }});
}

Flags &Flags::add(const std::string &name, bool &out, const std::string &help) {
  return declare({name, "", help, "true or false", "", true, false, [&out](const std::string &v) {
                    if (v != "true" && v != "1" && v != "false" && v != "0")
                      return false;
                    out = v == "true" || v == "1";
                    return true;
                  }});
}

Flags &Flags::add(const std::string &name, const std::string &valueName, const std::string &help,
                  const std::string &expected, const std::string &defaultText,
                  std::function<bool(const std::string &)> set) {
  return declare({name, valueName, help, expected, defaultText, false, false, std::move(set)});
}

Flags &Flags::required() {
  if (!flags_.empty())
    flags_.back().required = true;
  return *this;
}

Flags &Flags::positional(std::vector<std::string> &out) {
  positional_ = &out;
  return *this;
}

Flags &Flags::positional(std::string &out, const std::string &what) {
  onePositional_ = &out;
  onePositionalWhat_ = what;
  return *this;
}

const Flags::Flag *Flags::find(const std::string &name) const {
  for (const Flag &f : flags_)
    if (f.name == name)
      return &f;
  return nullptr;
}

std::optional<int> Flags::parse(int argc, const char *const *argv, std::ostream &out,
                                std::ostream &err) const {
  std::set<std::string> seen;
  bool sawPositional = false;
  for (int i = 1; i < argc; i++) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      out << help();
      return 0;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      if (positional_) {
        positional_->push_back(arg);
      } else if (onePositional_ && !sawPositional) {
        *onePositional_ = arg;
        sawPositional = true;
      } else if (onePositional_) {
        return fail("more than one " + onePositionalWhat_, err);
      } else {
        return fail("unexpected argument '" + arg + "'", err);
      }
      continue;
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const Flag *f = find(name);
    if (!f)
      return fail("unknown option '" + arg + "'", err);
    std::string value;
    if (eq != std::string::npos)
      value = arg.substr(eq + 1);
    else if (f->isSwitch)
      value = "true";
    else if (i + 1 < argc)
      value = argv[++i];
    if (value.empty())
      return fail(name + " needs a value", err);
    if (!f->set(value))
      return fail(name + " needs " + f->expected + ", got '" + value + "'", err);
    seen.insert(name);
  }
  for (const Flag &f : flags_)
    if (f.required && !seen.count(f.name))
      return fail(f.name + " is required", err);
  return std::nullopt;
}

int Flags::fail(const std::string &msg, std::ostream &err) const {
  err << tool_ << ": " << msg << "\n" << help();
  return 2;
}

std::string Flags::help() const {
  // Help texts start in one column, after the widest `--name VALUE`, and wrap at 100.
  auto left = [](const Flag &f) {
    return "  " + f.name + (f.valueName.empty() ? "" : " " + f.valueName);
  };
  size_t col = 24;
  for (const Flag &f : flags_)
    col = std::max(col, left(f).size() + 2);
  const size_t width = std::max<size_t>(100 - col, 30);
  std::ostringstream os;
  os << synopsis_ << "\n";
  for (const Flag &f : flags_) {
    std::string text = f.help + (f.required              ? " (required)"
                                 : f.defaultText.empty() ? ""
                                                         : " (default " + f.defaultText + ")");
    std::string line = left(f);
    line.resize(col, ' ');
    size_t used = 0;
    std::istringstream words(text);
    for (std::string w; words >> w;) {
      if (used && used + 1 + w.size() > width) {
        os << line << "\n";
        line = std::string(col, ' ');
        used = 0;
      }
      line += (used ? " " : "") + w;
      used += (used ? 1 : 0) + w.size();
    }
    os << line << "\n";
  }
  os << notes_;
  return os.str();
}

bool parseShapeFlag(const std::string &v, std::map<std::string, std::vector<uint64_t>> &shapes) {
  size_t eq = v.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == v.size() || v.back() == 'x')
    return false;
  std::vector<uint64_t> dims;
  std::stringstream ss(v.substr(eq + 1));
  std::string d;
  while (std::getline(ss, d, 'x')) {
    if (d.empty() || d.size() > 12 || d.find_first_not_of("0123456789") != std::string::npos)
      return false;
    dims.push_back(std::stoull(d));
    if (dims.back() == 0)
      return false;
  }
  return shapes.emplace(v.substr(0, eq), std::move(dims)).second;
}

} // namespace kiln::tools
