// The token layer of both IRs' text parsers: characters, whitespace and comments,
// identifiers, names, string and numeric literals, and the range-checked conversions of
// numeric literals (see Lexer.h).

#include "src/Text/Lexer.h"

#include <cctype>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace kiln::text {

namespace {

bool isBareNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '$' || c == '-';
}

} // namespace

// ---- Numeric conversions.

Error parseError(Pos p, const std::string &msg) {
  return makeError(ErrorCode::ModelParse, p.line, ":", p.col, ": ", msg);
}

Error toInt64(const Number &n, int64_t &out) {
  if (!n.isInt)
    return parseError(n.pos, "expected an integer, found '" + n.text + "'");
  uint64_t lim = n.neg ? uint64_t(1) << 63 : (uint64_t(1) << 63) - 1;
  if (n.overflow || n.mag > lim)
    return parseError(n.pos, "integer '" + n.text + "' is out of range");
  out = n.neg ? int64_t(0 - n.mag) : int64_t(n.mag);
  return Error::success();
}

Error toDim(const Number &n, dim_t &out) {
  if (!n.isInt || (n.neg && n.mag != 0))
    return parseError(n.pos, "expected a non-negative integer, found '" + n.text + "'");
  if (n.overflow)
    return parseError(n.pos, "integer '" + n.text + "' is out of range");
  out = n.mag;
  return Error::success();
}

Error toInRange(const Number &n, int64_t lo, int64_t hi, int64_t &out) {
  KILN_RETURN_IF_ERR(toInt64(n, out));
  if (out < lo || out > hi)
    return parseError(n.pos, "value " + n.text + " is out of range [" + std::to_string(lo) + ", " +
                                 std::to_string(hi) + "]");
  return Error::success();
}

Error toFloat(const Number &n, float &out) {
  // Finite values from FLT_MAX + half an ulp on round to infinity.
  const double limit = double(FLT_MAX) + std::ldexp(1.0, 103);
  if (std::isfinite(n.value) && std::fabs(n.value) >= limit)
    return parseError(n.pos, "value " + n.text + " is out of range for float");
  out = float(n.value);
  return Error::success();
}

// ---- Characters.

void Lexer::advance() {
  if (atEnd())
    return;
  if (text_[pos_++] == '\n') {
    cur_.line++;
    cur_.col = 1;
  } else {
    cur_.col++;
  }
}

void Lexer::skipSpace() {
  while (!atEnd()) {
    char c = peek();
    if (c == ' ' || c == '\t' || c == '\r' || (c == '\n' && form_ == Free)) {
      advance();
    } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
      while (!atEnd() && peek() != '\n')
        advance();
    } else {
      break;
    }
  }
}

void Lexer::skipBlankLines() {
  for (skipSpace(); peek() == '\n'; skipSpace())
    advance();
}

bool Lexer::atLineEnd() {
  skipSpace();
  return atEnd() || peek() == '\n';
}

void Lexer::skipLine() {
  while (!atEnd() && peek() != '\n')
    advance();
  advance();
}

std::string Lexer::found() const {
  if (form_ == Lines && (atEnd() || peek() == '\n'))
    return "";
  return ", found " + describeHere();
}

std::string Lexer::describeHere() const {
  if (atEnd())
    return "end of input";
  unsigned char c = static_cast<unsigned char>(peek());
  if (c < 0x20 || c >= 0x7f)
    return "byte " + std::to_string(unsigned(c));
  return "'" + std::string(1, char(c)) + "'";
}

bool Lexer::consume(char c) {
  skipSpace();
  if (peek() != c || atEnd())
    return false;
  advance();
  return true;
}

Error Lexer::expect(char c, const char *context) {
  if (consume(c))
    return Error::success();
  return parseError(here(), std::string("expected '") + c + "' " + context + found());
}

// ---- Tokens.

std::string Lexer::ident() {
  size_t b = pos_;
  skipIdentChars();
  return text_.substr(b, pos_ - b);
}

void Lexer::skipIdentChars() {
  while (!atEnd() && isIdentChar(peek()))
    advance();
}

bool Lexer::startsWord(const char *w) const {
  size_t n = std::strlen(w);
  return text_.compare(pos_, n, w) == 0 &&
         (pos_ + n >= text_.size() || !isIdentChar(text_[pos_ + n]));
}

Expected<std::string> Lexer::expectIdent(const char *what) {
  skipSpace();
  if (!isIdentStart(peek()))
    return parseError(here(), std::string("expected ") + what + found());
  return ident();
}

Expected<std::string> Lexer::quoted() {
  Pos start = here();
  advance();
  std::string s;
  while (true) {
    if (atEnd() || peek() == '\n')
      return parseError(start, "unterminated string");
    char c = peek();
    advance();
    if (c == '"')
      return s;
    if (c != '\\') {
      s += c;
      continue;
    }
    Pos ep = here();
    char e = peek();
    advance();
    if (e == '"' || e == '\\')
      s += e;
    else if (e == 'n')
      s += '\n';
    else if (e == 't')
      s += '\t';
    else if (e == 'x' && pos_ + 1 < text_.size() && std::isxdigit(uint8_t(text_[pos_])) &&
             std::isxdigit(uint8_t(text_[pos_ + 1]))) {
      s += char(std::stoi(text_.substr(pos_, 2), nullptr, 16));
      advance();
      advance();
    } else {
      return parseError(ep, "invalid escape in string (use \\\" \\\\ \\n \\t \\xHH)");
    }
  }
}

Expected<std::string> Lexer::name(const char *what) {
  Pos p = here();
  std::string s;
  if (peek() == '"') {
    KILN_ASSIGN_OR_RETURN(s, quoted());
  } else {
    size_t b = pos_;
    while (!atEnd() && isBareNameChar(peek()))
      advance();
    s = text_.substr(b, pos_ - b);
    if (s.empty())
      return parseError(p, std::string("expected ") + what + found());
  }
  if (s.empty())
    return parseError(p, "a name must not be empty");
  return s;
}

Expected<Number> Lexer::number() {
  skipSpace();
  Number n;
  n.pos = here();
  size_t b = pos_;
  if (peek() == '-' || peek() == '+') {
    n.neg = peek() == '-';
    advance();
  }
  if (isIdentStart(peek())) {
    std::string w = ident();
    if (w != "inf" && w != "nan")
      return parseError(n.pos, "expected a number, found '" + text_.substr(b, pos_ - b) + "'");
    n.text = text_.substr(b, pos_ - b);
    n.value = w == "nan" ? std::numeric_limits<double>::quiet_NaN()
                         : (n.neg ? -1 : 1) * std::numeric_limits<double>::infinity();
    return n;
  }
  size_t digits = 0;
  n.isInt = true;
  while (isDigit(peek())) {
    uint64_t d = uint64_t(peek() - '0');
    if (n.mag > (std::numeric_limits<uint64_t>::max() - d) / 10)
      n.overflow = true;
    n.mag = n.mag * 10 + d;
    digits++;
    advance();
  }
  if (peek() == '.') {
    n.isInt = false;
    advance();
    for (; isDigit(peek()); advance())
      digits++;
  }
  if (digits && (peek() == 'e' || peek() == 'E')) {
    n.isInt = false;
    advance();
    if (peek() == '-' || peek() == '+')
      advance();
    if (!isDigit(peek()))
      return parseError(here(), "expected exponent digits" + found());
    while (isDigit(peek()))
      advance();
  }
  n.text = text_.substr(b, pos_ - b);
  if (!digits)
    return parseError(n.pos, "expected a number" +
                                 (n.text.empty() ? found() : ", found '" + n.text + "'"));
  n.value = std::strtod(n.text.c_str(), nullptr);
  return n;
}

} // namespace kiln::text
