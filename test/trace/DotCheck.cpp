#include "DotCheck.h"

#include <cctype>
#include <map>
#include <set>

namespace kiln::test {

namespace {

/// Tokens of DOT: identifiers, quoted strings (unescaped), and punctuation ({ } [ ] = ; , ->).
struct Token {
  enum Kind { Id, String, Punct } kind;
  std::string text;
  unsigned line;
};

std::string tokenize(const std::string &t, std::vector<Token> &out) {
  unsigned line = 1;
  for (size_t i = 0; i < t.size();) {
    char c = t[i];
    if (c == '\n')
      line++;
    if (std::isspace(static_cast<unsigned char>(c))) {
      i++;
      continue;
    }
    if (c == '"') {
      std::string s;
      unsigned start = line;
      for (i++; i < t.size() && t[i] != '"'; i++) {
        if (t[i] == '\n')
          line++;
        if (t[i] == '\\' && i + 1 < t.size())
          s += t[i++];
        s += t[i];
      }
      if (i >= t.size())
        return "line " + std::to_string(start) + ": unterminated string";
      i++;
      out.push_back({Token::String, s, start});
      continue;
    }
    if (c == '-' && i + 1 < t.size() && t[i + 1] == '>') {
      out.push_back({Token::Punct, "->", line});
      i += 2;
      continue;
    }
    if (std::string("{}[]=;,").find(c) != std::string::npos) {
      out.push_back({Token::Punct, std::string(1, c), line});
      i++;
      continue;
    }
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '#') {
      std::string s;
      while (i < t.size() && (std::isalnum(static_cast<unsigned char>(t[i])) || t[i] == '_' ||
                              t[i] == '.' || t[i] == '#'))
        s += t[i++];
      out.push_back({Token::Id, s, line});
      continue;
    }
    return "line " + std::to_string(line) + ": unexpected character '" + std::string(1, c) + "'";
  }
  return "";
}

} // namespace

std::string checkDot(const std::string &text, std::vector<DotGraph> &out) {
  std::vector<Token> tk;
  if (std::string e = tokenize(text, tk); !e.empty())
    return e;
  size_t i = 0;
  auto at = [&](size_t k) { return "line " + std::to_string(k < tk.size() ? tk[k].line : 0); };
  auto is = [&](size_t k, const char *p) {
    return k < tk.size() && tk[k].kind == Token::Punct && tk[k].text == p;
  };
  if (tk.empty())
    return "no graph";
  while (i < tk.size()) {
    if (tk[i].kind != Token::Id || tk[i].text != "digraph")
      return at(i) + ": expected 'digraph'";
    DotGraph g;
    i++;
    if (i < tk.size() && tk[i].kind != Token::Punct)
      g.name = tk[i++].text;
    if (!is(i, "{"))
      return at(i) + ": expected '{'";
    i++;
    std::set<std::string> declared;
    std::vector<std::pair<std::string, std::string>> edges;
    // Statements: `ID [attrs];`, `ID -> ID [attrs];`, `node|edge|graph [attrs];`, `ID=V;`.
    while (i < tk.size() && !is(i, "}")) {
      if (tk[i].kind == Token::Punct)
        return at(i) + ": unexpected '" + tk[i].text + "'";
      std::string a = tk[i++].text;
      std::string label;
      bool edge = false;
      std::string b;
      if (is(i, "->")) {
        i++;
        if (i >= tk.size() || tk[i].kind == Token::Punct)
          return at(i) + ": an edge without a target";
        b = tk[i++].text;
        edge = true;
      } else if (is(i, "=")) { // graph attribute
        i++;
        if (i >= tk.size() || tk[i].kind == Token::Punct)
          return at(i) + ": '=' without a value";
        i++;
        if (!is(i, ";"))
          return at(i) + ": expected ';'";
        i++;
        continue;
      }
      if (is(i, "[")) {
        i++;
        while (i < tk.size() && !is(i, "]")) {
          if (tk[i].kind == Token::Punct && tk[i].text != "," && tk[i].text != ";")
            return at(i) + ": unexpected '" + tk[i].text + "' in attributes";
          if (tk[i].kind == Token::Punct) {
            i++;
            continue;
          }
          std::string key = tk[i++].text;
          if (!is(i, "="))
            return at(i) + ": attribute '" + key + "' without '='";
          i++;
          if (i >= tk.size() || tk[i].kind == Token::Punct)
            return at(i) + ": attribute '" + key + "' without a value";
          if (key == "label")
            label = tk[i].text;
          i++;
        }
        if (!is(i, "]"))
          return at(i) + ": unterminated attribute list";
        i++;
      }
      if (!is(i, ";"))
        return at(i) + ": expected ';'";
      i++;
      if (edge) {
        edges.push_back({a, b});
        g.edges++;
      } else if (a != "node" && a != "edge" && a != "graph") {
        if (!declared.insert(a).second)
          return "node '" + a + "' declared twice in graph '" + g.name + "'";
        g.nodeLabels.push_back(label);
      }
    }
    if (!is(i, "}"))
      return "graph '" + g.name + "' is not closed";
    i++;
    for (const auto &[a, b] : edges)
      for (const std::string &end : {a, b})
        if (!declared.count(end))
          return "graph '" + g.name + "': edge " + a + " -> " + b + " names undeclared node '" +
                 end + "'";
    out.push_back(std::move(g));
  }
  return "";
}

} // namespace kiln::test
