/// \file
/// The token layer shared by the text parsers of both IRs (src/Graph/Parser.cpp and
/// src/IR/IRParser.cpp): a cursor over the raw text that tracks line and column and reads
/// identifiers, names, strings and numbers, and the conversions of a numeric literal to the
/// C++ types that attributes and data use, each rejecting a value that does not fit.
///
/// The error model: every failure is an Error with ErrorCode::ModelParse whose message
/// starts with `line:column:` (parseError). Nothing throws and nothing recurses, so deep or
/// huge inputs are safe.
#ifndef KILN_TEXT_LEXER_H
#define KILN_TEXT_LEXER_H

#include "kiln/Base/Error.h"
#include "kiln/Base/Type.h"

#include <cstdint>
#include <string>

namespace kiln::text {

inline bool isIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
inline bool isDigit(char c) { return c >= '0' && c <= '9'; }
inline bool isIdentChar(char c) { return isIdentStart(c) || isDigit(c); }

/// A source position, 1-based.
struct Pos {
  unsigned line = 1, col = 1;
};

/// A numeric literal: its text, and its value as an integer (when it is one) and a double.
struct Number {
  Pos pos;
  std::string text;
  bool isInt = false;
  bool neg = false;
  bool overflow = false; ///< The integer magnitude does not fit in 64 bits.
  uint64_t mag = 0;
  double value = 0;
};

/// A ModelParse error at \p p: "line:col: msg".
Error parseError(Pos p, const std::string &msg);

/// \p n as a signed 64-bit integer.
Error toInt64(const Number &n, int64_t &out);
/// \p n as a dimension (a non-negative integer).
Error toDim(const Number &n, dim_t &out);
/// \p n as an integer in [\p lo, \p hi].
Error toInRange(const Number &n, int64_t lo, int64_t hi, int64_t &out);
/// \p n as a float; finite values that would round to infinity are rejected.
Error toFloat(const Number &n, float &out);

/// A cursor over the text: characters, whitespace and comments, and tokens.
///
/// In free form (the graph IR) newlines are whitespace. In line form (the low-level IR,
/// one item per line) skipSpace stops at a newline, which the parser steps over with
/// skipBlankLines; the end of a line is then not described in messages ("expected '>'"
/// rather than "..., found end of line"), as the column already points at it.
class Lexer {
public:
  enum Form { Free, Lines };
  explicit Lexer(const std::string &text, Form form = Free) : text_(text), form_(form) {}

  bool atEnd() const { return pos_ >= text_.size(); }
  char peek() const { return atEnd() ? '\0' : text_[pos_]; }
  Pos here() const { return cur_; }
  void advance();
  /// Skips whitespace and `//` comments (in line form, not the newline ending a line).
  void skipSpace();
  /// Skips whitespace, comments and newlines, whatever the form.
  void skipBlankLines();
  /// Skips space; true at the end of the line (or of the text).
  bool atLineEnd();
  /// Skips the rest of the current line and its newline.
  void skipLine();
  /// The next character for messages: "'x'", "byte 7" or "end of input".
  std::string describeHere() const;
  /// ", found <describeHere()>", or "" at the end of a line in line form.
  std::string found() const;
  /// Skips space; consumes \p c if it is next.
  bool consume(char c);
  /// Like consume, but a missing \p c is an error "expected 'c' <context>, found ...".
  Error expect(char c, const char *context);
  /// Parses `item (',' item)*` up to \p close (the opener is consumed); may be empty.
  template <typename F> Error commaList(char close, const char *what, F item) {
    if (consume(close))
      return Error::success();
    while (true) {
      KILN_RETURN_IF_ERR(item());
      if (consume(close))
        return Error::success();
      KILN_RETURN_IF_ERR(expect(',', what));
    }
  }
  /// An identifier at the current position (which must start one).
  std::string ident();
  /// Skips identifier characters, whatever starts them (the hash of `elided(...)`).
  void skipIdentChars();
  /// True when the identifier at the current position is \p w.
  bool startsWord(const char *w) const;
  /// Skips space and reads an identifier, or returns an error naming \p what.
  Expected<std::string> expectIdent(const char *what);
  /// A string literal with C escapes (the current character is the opening quote).
  Expected<std::string> quoted();
  /// A name after a sigil: bare characters [A-Za-z0-9_.$-], or a quoted string. No space
  /// is skipped before it.
  Expected<std::string> name(const char *what);
  /// A decimal integer or float literal; `inf`, `nan` with an optional sign.
  Expected<Number> number();

private:
  const std::string &text_;
  Form form_;
  size_t pos_ = 0;
  Pos cur_;
};

} // namespace kiln::text

#endif // KILN_TEXT_LEXER_H
