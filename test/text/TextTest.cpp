// The shared text front end (src/Text): the lexer in free and line form, numeric literals
// and their range-checked conversions, the type parser, attribute lists and their
// assignment by name. Expected values are written by hand from the grammar.

#include "src/Text/Values.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kiln::text {
namespace {

/// The message of \p e, which must be a ModelParse failure.
std::string messageOf(const Error &e) {
  EXPECT_TRUE(bool(e));
  EXPECT_EQ(e.code(), ErrorCode::ModelParse);
  return e.message();
}

TEST(TextLexer, TracksLinesAndColumnsAcrossCommentsInFreeForm) {
  std::string s = "  a // note\n\tbc_1 ,";
  Lexer lx(s);
  lx.skipSpace();
  EXPECT_EQ(lx.here().line, 1u);
  EXPECT_EQ(lx.here().col, 3u);
  EXPECT_EQ(lx.ident(), "a");
  auto b = lx.expectIdent("a word");
  ASSERT_TRUE(bool(b));
  EXPECT_EQ(*b, "bc_1");
  EXPECT_EQ(lx.here().line, 2u);
  EXPECT_EQ(lx.here().col, 6u); // tab counts as one column
  EXPECT_TRUE(lx.consume(','));
  EXPECT_TRUE(lx.atEnd());
  EXPECT_EQ(messageOf(lx.expect(')', "to close")), "2:8: expected ')' to close, found end of input");
}

TEST(TextLexer, LineFormStopsAtNewlinesAndDoesNotDescribeTheLineEnd) {
  std::string s = "x y // c\n\n  z\n";
  Lexer lx(s, Lexer::Lines);
  EXPECT_EQ(lx.ident(), "x");
  EXPECT_FALSE(lx.atLineEnd());
  EXPECT_EQ(lx.ident(), "y");
  EXPECT_TRUE(lx.atLineEnd());
  EXPECT_EQ(messageOf(lx.expect('>', "to close the type")), "1:9: expected '>' to close the type");
  lx.skipBlankLines();
  EXPECT_EQ(lx.here().line, 3u);
  EXPECT_EQ(lx.here().col, 3u);
  EXPECT_EQ(messageOf(lx.expect('(', "here")), "3:3: expected '(' here, found 'z'");
  lx.skipLine();
  EXPECT_TRUE(lx.atEnd());
  // Free form describes the same place as the next line's first character.
  Lexer free(s);
  ASSERT_TRUE(free.expectIdent("x") && free.expectIdent("y"));
  EXPECT_EQ(messageOf(free.expect('>', "to close the type")),
            "3:3: expected '>' to close the type, found 'z'");
}

TEST(TextLexer, NamesAndStrings) {
  std::string s = R"(a.b-c$9 "q \"x\"\\\n\t\x41" "" "open)";
  Lexer lx(s);
  auto bare = lx.name("a name");
  ASSERT_TRUE(bool(bare));
  EXPECT_EQ(*bare, "a.b-c$9");
  lx.skipSpace();
  auto q = lx.name("a name");
  ASSERT_TRUE(bool(q));
  EXPECT_EQ(*q, "q \"x\"\\\n\tA");
  lx.skipSpace();
  EXPECT_NE(messageOf(lx.name("a name").takeError()).find("must not be empty"), std::string::npos);
  lx.skipSpace();
  EXPECT_EQ(messageOf(lx.name("a name").takeError()), "1:32: unterminated string");

  std::string bad = "\"\\q\"";
  Lexer lb(bad);
  EXPECT_EQ(messageOf(lb.quoted().takeError()),
            "1:3: invalid escape in string (use \\\" \\\\ \\n \\t \\xHH)");
  std::string none = "?";
  Lexer ln(none);
  EXPECT_EQ(messageOf(ln.name("a weight name").takeError()),
            "1:1: expected a weight name, found '?'");
}

TEST(TextLexer, NumbersAndTheirConversions) {
  std::string s = "12 -7 2.5e3 -inf nan 18446744073709551616 1e 9223372036854775808 3.4e39";
  Lexer lx(s);
  auto n = lx.number();
  ASSERT_TRUE(bool(n));
  EXPECT_TRUE(n->isInt);
  int64_t i = 0;
  dim_t d = 0;
  float f = 0;
  EXPECT_FALSE(bool(toDim(*n, d)));
  EXPECT_EQ(d, 12u);
  EXPECT_FALSE(bool(toInRange(*n, 0, 12, i)));
  EXPECT_EQ(messageOf(toInRange(*n, 0, 11, i)), "1:1: value 12 is out of range [0, 11]");

  n = lx.number();
  ASSERT_TRUE(bool(n));
  EXPECT_FALSE(bool(toInt64(*n, i)));
  EXPECT_EQ(i, -7);
  EXPECT_EQ(messageOf(toDim(*n, d)), "1:4: expected a non-negative integer, found '-7'");

  n = lx.number();
  ASSERT_TRUE(bool(n));
  EXPECT_FALSE(n->isInt);
  EXPECT_FALSE(bool(toFloat(*n, f)));
  EXPECT_EQ(f, 2500.0f);
  EXPECT_EQ(messageOf(toInt64(*n, i)), "1:7: expected an integer, found '2.5e3'");

  n = lx.number();
  ASSERT_TRUE(bool(n));
  EXPECT_FALSE(bool(toFloat(*n, f)));
  EXPECT_TRUE(std::isinf(f) && f < 0);
  n = lx.number();
  ASSERT_TRUE(bool(n));
  EXPECT_FALSE(bool(toFloat(*n, f)));
  EXPECT_TRUE(std::isnan(f));

  n = lx.number(); // 2^64
  ASSERT_TRUE(bool(n));
  EXPECT_TRUE(n->overflow);
  EXPECT_NE(messageOf(toDim(*n, d)).find("out of range"), std::string::npos);

  EXPECT_EQ(messageOf(lx.number().takeError()), "1:45: expected exponent digits, found ' '");
  n = lx.number(); // 2^63 does not fit int64
  ASSERT_TRUE(bool(n));
  EXPECT_NE(messageOf(toInt64(*n, i)).find("is out of range"), std::string::npos);
  n = lx.number();
  ASSERT_TRUE(bool(n));
  EXPECT_EQ(messageOf(toFloat(*n, f)), "1:66: value 3.4e39 is out of range for float");
  EXPECT_EQ(messageOf(lx.number().takeError()), "1:72: expected a number, found end of input");
}

/// parseType on \p s: the type's text, or the error message.
std::string typeOf(const std::string &s, Lexer::Form form = Lexer::Free) {
  Lexer lx(s, form);
  auto t = parseType(lx);
  return t ? t->toString() : t.getError().message();
}

TEST(TextTypes, ParsesAndRejects) {
  EXPECT_EQ(typeOf("float<1x3x8x8>"), "float<1x3x8x8>");
  EXPECT_EQ(typeOf(" i8q< 4 : 0.5 : -3 >"), "i8q<4:0.5:-3>");
  EXPECT_EQ(typeOf("i64<>"), "i64<>");
  EXPECT_EQ(typeOf("floaty<4>"), "1:1: unknown element kind 'floaty'");
  EXPECT_EQ(typeOf("float<2x>"), "1:9: expected a dimension, found '>'");
  EXPECT_EQ(typeOf("float<1x2x3x4x5x6x7x8x9>"), "1:23: a type has at most 8 dimensions");
  EXPECT_EQ(typeOf("float<2:1:0>"), "1:1: only quantized element kinds have a scale and an offset");
  EXPECT_EQ(typeOf("i8q<2>"), "1:6: expected ':' before the scale of a quantized type, found '>'");
  EXPECT_EQ(typeOf("i8q<2:inf:0>"), "1:7: the scale of a quantized type must be finite");
  EXPECT_EQ(typeOf("i8q<2:1:2147483648>"), "1:9: value 2147483648 is out of range [-2147483648, "
                                           "2147483647]");
  EXPECT_EQ(typeOf("float<4294967296x4294967296>"), "1:1: type is too large");
  EXPECT_EQ(typeOf("float<4"), "1:8: expected '>' to close the type, found end of input");
  EXPECT_EQ(typeOf("float<4\n>", Lexer::Lines), "1:8: expected '>' to close the type");
}

/// An object with one attribute of every C++ type, visited as a node's would be.
struct Attrs {
  dim_t axis = 0;
  int64_t delta = 0;
  float alpha = 0;
  bool flag = false;
  std::vector<dim_t> kernels;
  std::vector<int64_t> pads;
  std::string mode;
  void visitAttrs(AttrVisitor &v) {
    v.visit("Axis", axis);
    v.visit("Delta", delta);
    v.visit("Alpha", alpha);
    v.visit("Flag", flag);
    v.visit("Kernels", kernels);
    v.visit("Pads", pads);
    v.visit("Mode", mode);
  }
};

/// Parses \p s as an attribute list and assigns it to \p a; "" or the error message.
std::string assign(const std::string &s, Attrs &a) {
  Lexer lx(s);
  auto list = parseAttrList(lx);
  if (!list)
    return list.getError().message();
  Error e = assignAttrs(*list, "Op", Pos{7, 5}, [&](AttrVisitor &v) { a.visitAttrs(v); });
  return e ? e.message() : "";
}

TEST(TextAttrs, AssignsEveryKindByName) {
  Attrs a;
  EXPECT_EQ(assign("{Mode=\"x y\", Pads=[-1, 2], Kernels=[3,3], Flag=true, Alpha=-0.25, "
                   "Delta=-9, Axis=2}",
                   a),
            "");
  EXPECT_EQ(a.axis, 2u);
  EXPECT_EQ(a.delta, -9);
  EXPECT_EQ(a.alpha, -0.25f);
  EXPECT_TRUE(a.flag);
  EXPECT_EQ(a.kernels, (std::vector<dim_t>{3, 3}));
  EXPECT_EQ(a.pads, (std::vector<int64_t>{-1, 2}));
  EXPECT_EQ(a.mode, "x y");
  // No list at all is an empty list.
  std::string typeOnly = ": float<1>";
  Lexer lx(typeOnly);
  auto none = parseAttrList(lx);
  ASSERT_TRUE(bool(none));
  EXPECT_TRUE(none->empty());
}

TEST(TextAttrs, ReportsMissingMistypedUnknownAndDuplicateAttributes) {
  const std::string all = "Axis=1, Delta=0, Alpha=1, Flag=false, Kernels=[], Pads=[], Mode=\"\"";
  Attrs a;
  EXPECT_EQ(assign("{Delta=0}", a),
            "7:5: missing attribute 'Axis': Op requires attribute 'Axis' (an integer)");
  // An unknown attribute is reported at its value: '{', the list, ", Beta=", then '2'.
  EXPECT_EQ(assign("{" + all + ", Beta=2}", a),
            "1:" + std::to_string(1 + all.size() + 7 + 1) +
                ": Op has no attribute 'Beta' (attributes: Axis, Delta, Alpha, Flag, Kernels, "
                "Pads, Mode)");
  EXPECT_EQ(assign("{Axis=[1], Delta=0}", a), "1:7: attribute 'Axis' of Op expects an integer");
  EXPECT_EQ(assign("{Axis=-1}", a), "1:7: expected a non-negative integer, found '-1'");
  EXPECT_EQ(assign("{Flag=maybe}", a), "1:7: expected an attribute value, found 'maybe'");
  EXPECT_EQ(assign("{Axis=1, Axis=2}", a), "1:10: duplicate attribute 'Axis'");
  EXPECT_EQ(assign("{Axis=1 Delta=2}", a), "1:9: expected ',' between attributes, found 'D'");
  EXPECT_EQ(assign("{Kernels=[1 2]}", a), "1:13: expected ',' between list elements, found '2'");
}

} // namespace
} // namespace kiln::text
