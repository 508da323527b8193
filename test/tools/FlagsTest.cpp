// The tools' flags helper: both value forms, typed values and their errors, switches,
// lists, custom values, required flags, positional arguments and --help.

#include "src/tools/Flags.h"

#include <gtest/gtest.h>

#include <sstream>

using kiln::tools::Flags;

namespace {

/// One parse of \p args (after the program name) with the given flags.
struct Parse {
  std::optional<int> exitCode;
  std::string out, err;
};

Parse parse(const Flags &flags, std::vector<const char *> args) {
  args.insert(args.begin(), "tool");
  std::ostringstream out, err;
  Parse p;
  p.exitCode = flags.parse(int(args.size()), args.data(), out, err);
  p.out = out.str();
  p.err = err.str();
  return p;
}

struct Values {
  std::string name = "none";
  unsigned count = 3;
  uint64_t bytes = 0;
  bool verbose = false;
  std::vector<std::string> items;
  std::vector<std::string> rest;
  int parity = -1;
};

Flags declare(Values &v) {
  Flags f("tool", "usage: tool [options] FILE...", "Notes at the end.\n");
  f.add("--name", v.name, "NAME", "a name");
  f.add("--count", v.count, "N", "a count");
  f.add("--bytes", v.bytes, "B", "a size");
  f.add("--verbose", v.verbose, "say more");
  f.add("--items", v.items, "LIST", "some items");
  f.add("--parity", "even|odd", "a parity", "even or odd", "", [&](const std::string &s) {
    if (s != "even" && s != "odd")
      return false;
    v.parity = s == "odd";
    return true;
  });
  f.add("-o", v.name, "FILE", "a short flag");
  return f;
}

} // namespace

TEST(Flags, DefaultsStayWithoutArguments) {
  Values v;
  Flags f = declare(v);
  Parse p = parse(f, {});
  EXPECT_FALSE(p.exitCode.has_value());
  EXPECT_EQ(v.name, "none");
  EXPECT_EQ(v.count, 3u);
  EXPECT_FALSE(v.verbose);
  EXPECT_EQ(p.err, "");
}

TEST(Flags, BothValueFormsAndEveryType) {
  Values v;
  Flags f = declare(v);
  f.positional(v.rest);
  Parse p = parse(f, {"--name", "abc", "--count=42", "--bytes", "18446744073709551615", "--verbose",
                      "--items=a,,b", "--items", "c", "--parity=odd", "x.txt", "-", "y"});
  ASSERT_FALSE(p.exitCode.has_value()) << p.err;
  EXPECT_EQ(v.name, "abc");
  EXPECT_EQ(v.count, 42u);
  EXPECT_EQ(v.bytes, UINT64_MAX);
  EXPECT_TRUE(v.verbose);
  EXPECT_EQ(v.items, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(v.parity, 1);
  EXPECT_EQ(v.rest, (std::vector<std::string>{"x.txt", "-", "y"}));
}

TEST(Flags, ValuesAreTakenVerbatimAndLastWins) {
  Values v;
  Flags f = declare(v);
  // A value may start with dashes and contain '='; the last occurrence of a flag wins.
  Parse p = parse(f, {"--name", "--count", "--name=a=b", "-o", "out.txt", "--verbose=false"});
  ASSERT_FALSE(p.exitCode.has_value()) << p.err;
  EXPECT_EQ(v.name, "out.txt");
  EXPECT_EQ(v.count, 3u);
  EXPECT_FALSE(v.verbose);
  Values w;
  Flags g = declare(w);
  ASSERT_FALSE(parse(g, {"--name", "--count", "--verbose=1"}).exitCode.has_value());
  EXPECT_EQ(w.name, "--count");
  EXPECT_TRUE(w.verbose);
}

TEST(Flags, ErrorsExitWithTwoAndAMessage) {
  struct Case {
    std::vector<const char *> args;
    const char *message;
  };
  const std::vector<Case> cases = {
      {{"--bogus"}, "tool: unknown option '--bogus'\n"},
      {{"--bogus=1"}, "tool: unknown option '--bogus=1'\n"},
      {{"--name"}, "tool: --name needs a value\n"},
      {{"--name="}, "tool: --name needs a value\n"},
      {{"--count", "-1"}, "tool: --count needs a non-negative integer, got '-1'\n"},
      {{"--count=1.5"}, "tool: --count needs a non-negative integer, got '1.5'\n"},
      {{"--count=4294967296"}, "tool: --count needs a non-negative integer, got '4294967296'\n"},
      {{"--bytes=18446744073709551616"},
       "tool: --bytes needs a non-negative integer, got '18446744073709551616'\n"},
      {{"--verbose=yes"}, "tool: --verbose needs true or false, got 'yes'\n"},
      {{"--parity", "3"}, "tool: --parity needs even or odd, got '3'\n"},
      {{"stray"}, "tool: unexpected argument 'stray'\n"},
  };
  for (const Case &c : cases) {
    Values v;
    Flags f = declare(v);
    Parse p = parse(f, c.args);
    EXPECT_EQ(p.exitCode, 2) << c.message;
    EXPECT_EQ(p.err.substr(0, p.err.find('\n') + 1), c.message);
    // The help follows the message.
    EXPECT_NE(p.err.find("usage: tool [options] FILE..."), std::string::npos) << p.err;
    EXPECT_EQ(p.out, "");
  }
}

TEST(Flags, OnePositionalArgument) {
  Values v;
  Flags f = declare(v);
  std::string input = "-";
  f.positional(input, "input file");
  ASSERT_FALSE(parse(f, {}).exitCode.has_value());
  EXPECT_EQ(input, "-");
  ASSERT_FALSE(parse(f, {"--count", "2", "in.txt"}).exitCode.has_value());
  EXPECT_EQ(input, "in.txt");
  Parse p = parse(f, {"a.txt", "--verbose", "b.txt"});
  EXPECT_EQ(p.exitCode, 2);
  EXPECT_EQ(p.err.substr(0, p.err.find('\n')), "tool: more than one input file");
}

TEST(Flags, RequiredFlagsAndToolChecks) {
  Values v;
  Flags f = declare(v);
  f.add("--model", v.name, "M", "the model").required();
  Parse p = parse(f, {"--count", "1"});
  EXPECT_EQ(p.exitCode, 2);
  EXPECT_EQ(p.err.substr(0, p.err.find('\n')), "tool: --model is required");
  EXPECT_FALSE(parse(f, {"--model", "m"}).exitCode.has_value());

  std::ostringstream err;
  EXPECT_EQ(f.fail("--count must be even", err), 2);
  EXPECT_EQ(err.str().substr(0, err.str().find('\n')), "tool: --count must be even");
}

TEST(Flags, HelpListsEveryFlagWithItsDefault) {
  Values v;
  Flags f = declare(v);
  f.add("--model", v.name, "M", "the model").required();
  for (const char *h : {"--help", "-h"}) {
    // --help wins even over errors after it and a missing required flag.
    Parse p = parse(f, {h, "--bogus"});
    EXPECT_EQ(p.exitCode, 0);
    EXPECT_EQ(p.err, "");
    EXPECT_EQ(p.out, "usage: tool [options] FILE...\n"
                     "  --name NAME           a name (default none)\n"
                     "  --count N             a count (default 3)\n"
                     "  --bytes B             a size (default 0)\n"
                     "  --verbose             say more\n"
                     "  --items LIST          some items\n"
                     "  --parity even|odd     a parity\n"
                     "  -o FILE               a short flag (default none)\n"
                     "  --model M             the model (required)\n"
                     "Notes at the end.\n");
  }
}

TEST(Flags, LongHelpWrapsUnderItsColumn) {
  std::string path;
  Flags f("tool", "usage: tool");
  std::string help;
  for (int i = 0; i < 30; i++)
    help += "word" + std::to_string(i) + " ";
  f.add("--a-rather-long-flag-name", path, "PATH", help);
  std::istringstream lines(f.help());
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "usage: tool");
  // The widest `  --name VALUE` is 32 characters: the help starts at column 34.
  std::string first = "  --a-rather-long-flag-name PATH";
  first.resize(34, ' ');
  std::string all;
  int n = 0;
  while (std::getline(lines, line)) {
    EXPECT_LE(line.size(), 100u) << line;
    EXPECT_EQ(line.substr(0, 34), n == 0 ? first : std::string(34, ' ')) << line;
    EXPECT_NE(line[34], ' ') << line;
    all += line.substr(34) + " ";
    n++;
  }
  EXPECT_GE(n, 3);
  EXPECT_EQ(all, help);
}
