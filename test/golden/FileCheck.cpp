#include "FileCheck.h"

#include <regex>
#include <sstream>

namespace kiln::test {

namespace {

std::string collapseSpaces(const std::string &s) {
  std::string r;
  bool space = false;
  for (char c : s) {
    bool isSpace = c == ' ' || c == '\t';
    if (isSpace && space)
      continue;
    r += isSpace ? ' ' : c;
    space = isSpace;
  }
  return r;
}

std::string escapeRegex(const std::string &s) {
  static const std::string special = R"(\^$.|?*+()[]{})";
  std::string r;
  for (char c : s) {
    if (special.find(c) != std::string::npos)
      r += '\\';
    r += c;
  }
  return r;
}

/// A matcher for one pattern: a substring test, or a regex when it has {{...}}.
class Pattern {
public:
  explicit Pattern(const std::string &p) : text_(collapseSpaces(p)) {
    size_t open = text_.find("{{");
    if (open == std::string::npos)
      return;
    std::string re;
    size_t i = 0;
    while (i < text_.size()) {
      size_t o = text_.find("{{", i);
      if (o == std::string::npos) {
        re += escapeRegex(text_.substr(i));
        break;
      }
      size_t c = text_.find("}}", o + 2);
      if (c == std::string::npos) {
        re += escapeRegex(text_.substr(i));
        break;
      }
      re += escapeRegex(text_.substr(i, o - i)) + "(?:" + text_.substr(o + 2, c - o - 2) + ")";
      i = c + 2;
    }
    regex_ = std::regex(re);
    isRegex_ = true;
  }
  bool matches(const std::string &line) const {
    std::string l = collapseSpaces(line);
    return isRegex_ ? std::regex_search(l, regex_) : l.find(text_) != std::string::npos;
  }

private:
  std::string text_;
  std::regex regex_;
  bool isRegex_ = false;
};

std::string failure(const CheckDirective &d, const std::string &what, const std::string &out) {
  static const char *names[] = {"CHECK", "CHECK-NEXT", "CHECK-NOT"};
  std::ostringstream os;
  os << "line " << d.line << ": " << names[d.kind] << ": " << d.pattern << "\n  " << what
     << "\n--- output ---\n"
     << out << "--------------";
  return os.str();
}

} // namespace

std::vector<CheckDirective> parseCheckDirectives(const std::string &source, unsigned firstLine) {
  std::vector<CheckDirective> r;
  std::istringstream in(source);
  std::string line;
  unsigned no = firstLine;
  static const std::pair<const char *, CheckDirective::Kind> tags[] = {
      {"CHECK-NEXT:", CheckDirective::Next},
      {"CHECK-NOT:", CheckDirective::Not},
      {"CHECK-LABEL:", CheckDirective::Check},
      {"CHECK:", CheckDirective::Check},
  };
  for (; std::getline(in, line); no++) {
    size_t c = line.find("//");
    if (c == std::string::npos)
      continue;
    for (const auto &[tag, kind] : tags) {
      size_t t = line.find(tag, c);
      if (t == std::string::npos)
        continue;
      std::string pat = line.substr(t + std::string(tag).size());
      size_t b = pat.find_first_not_of(" \t");
      size_t e = pat.find_last_not_of(" \t\r");
      pat = b == std::string::npos ? "" : pat.substr(b, e - b + 1);
      r.push_back({kind, pat, no});
      break;
    }
  }
  return r;
}

std::string runFileCheck(const std::vector<CheckDirective> &checks, const std::string &output) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string l; std::getline(in, l);)
    lines.push_back(l);
  size_t pos = 0; // first line not yet consumed
  bool matched = false;
  std::vector<const CheckDirective *> nots;
  auto checkNots = [&](size_t from, size_t to) -> std::string {
    for (const CheckDirective *d : nots) {
      Pattern p(d->pattern);
      for (size_t i = from; i < to && i < lines.size(); i++)
        if (p.matches(lines[i]))
          return failure(
              *d, "excluded string found on output line " + std::to_string(i + 1) + ": " + lines[i],
              output);
    }
    nots.clear();
    return "";
  };
  for (const CheckDirective &d : checks) {
    if (d.kind == CheckDirective::Not) {
      nots.push_back(&d);
      continue;
    }
    Pattern p(d.pattern);
    if (d.kind == CheckDirective::Next) {
      if (!matched)
        return failure(d, "CHECK-NEXT without a previous match", output);
      if (pos >= lines.size() || !p.matches(lines[pos]))
        return failure(d, "not found on the line after the previous match", output);
      std::string e = checkNots(pos, pos);
      if (!e.empty())
        return e;
      pos++;
      continue;
    }
    size_t i = pos;
    while (i < lines.size() && !p.matches(lines[i]))
      i++;
    if (i == lines.size())
      return failure(d, "expected string not found after output line " + std::to_string(pos),
                     output);
    std::string e = checkNots(pos, i);
    if (!e.empty())
      return e;
    pos = i + 1;
    matched = true;
  }
  return checkNots(pos, lines.size());
}

} // namespace kiln::test
