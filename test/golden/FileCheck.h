/// \file
/// A small FileCheck: matches the output of a tool against directives written as comments
/// in the test input.
///
///   // CHECK: text        the next line (at or after the previous match) containing text
///   // CHECK-NEXT: text   the line right after the previous match contains text
///   // CHECK-NOT: text    no line between the previous and the next match contains text
///                         (up to the end of the output when no positive check follows)
///   // CHECK-LABEL: text  like CHECK
///
/// Runs of spaces compare equal to one space; `{{regex}}` inside a pattern is an ECMAScript
/// regular expression, the rest is literal.
#ifndef KILN_TEST_GOLDEN_FILECHECK_H
#define KILN_TEST_GOLDEN_FILECHECK_H

#include <string>
#include <vector>

namespace kiln::test {

struct CheckDirective {
  enum Kind { Check, Next, Not } kind;
  std::string pattern;
  unsigned line; ///< 1-based line of the directive in its source.
};

/// The directives in \p source, in order (\p firstLine numbers its first line).
std::vector<CheckDirective> parseCheckDirectives(const std::string &source, unsigned firstLine = 1);

/// Matches \p output against \p checks. Returns an empty string on success, otherwise a
/// message naming the failed directive, its line and the output.
std::string runFileCheck(const std::vector<CheckDirective> &checks, const std::string &output);

} // namespace kiln::test

#endif // KILN_TEST_GOLDEN_FILECHECK_H
