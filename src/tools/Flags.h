/// \file
/// The command-line flags of the tools in src/tools, declared once each (name, value,
/// default, help) so that parsing, validation, error messages and `--help` are the same
/// in every tool:
///
///   Flags flags("kiln-run", "usage: kiln-run --model M.onnx [options]");
///   flags.add("--model", model, "FILE", "the ONNX model").required();
///   flags.add("--threads", threads, "N", "intra-op threads");
///   if (std::optional<int> exitCode = flags.parse(argc, argv))
///     return *exitCode;
///
/// A flag takes its value as `--name value` or `--name=value` (a switch takes none);
/// arguments that do not start with '-', and a lone "-", are positional. `--help` and
/// `-h` print the list of flags and exit 0; an unknown flag, a missing or invalid value, a
/// missing required flag or an unexpected positional argument prints `tool: message` and
/// the list to stderr and exits 2.
#ifndef KILN_TOOLS_FLAGS_H
#define KILN_TOOLS_FLAGS_H

#include <cstdint>
#include <functional>
#include <map>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace kiln::tools {

class Flags {
public:
  /// \p tool prefixes messages; \p synopsis heads the help ("usage: tool ..."); \p notes,
  /// if any, follows the list of flags.
  Flags(std::string tool, std::string synopsis, std::string notes = "");

  /// A flag with a string value; \p out holds the default and receives the value. An empty
  /// value is an error.
  Flags &add(const std::string &name, std::string &out, const std::string &valueName,
             const std::string &help);
  /// A flag with a non-negative integer value (decimal digits only, range-checked).
  Flags &add(const std::string &name, unsigned &out, const std::string &valueName,
             const std::string &help);
  Flags &add(const std::string &name, uint64_t &out, const std::string &valueName,
             const std::string &help);
  /// A comma-separated list; each occurrence appends its non-empty items to \p out.
  Flags &add(const std::string &name, std::vector<std::string> &out, const std::string &valueName,
             const std::string &help);
  /// A switch: `--name` sets \p out; `--name=true|false|1|0` sets it explicitly.
  Flags &add(const std::string &name, bool &out, const std::string &help);
  /// A flag whose value \p set checks and stores, returning false for an invalid one;
  /// \p expected says what a valid value is ("1 or 255"), \p defaultText the default.
  Flags &add(const std::string &name, const std::string &valueName, const std::string &help,
             const std::string &expected, const std::string &defaultText,
             std::function<bool(const std::string &)> set);
  /// Makes the flag declared last required.
  Flags &required();
  /// Collects positional arguments into \p out (without this they are errors).
  Flags &positional(std::vector<std::string> &out);
  /// Takes at most one positional argument into \p out; a second is an error "more than
  /// one <what>".
  Flags &positional(std::string &out, const std::string &what);

  /// Parses the arguments. Returns nothing when the tool should go on, or the status it
  /// should exit with: 0 after printing the help to \p out, 2 after an error (see fail).
  std::optional<int> parse(int argc, const char *const *argv, std::ostream &out = std::cout,
                           std::ostream &err = std::cerr) const;
  /// Prints `tool: msg` and the help to \p err and returns 2, for the tool's own checks
  /// of the values after parse.
  int fail(const std::string &msg, std::ostream &err = std::cerr) const;
  /// The help: the synopsis, one line per flag (help text and default), the notes.
  std::string help() const;

private:
  struct Flag {
    std::string name, valueName, help, expected, defaultText;
    bool isSwitch = false, required = false;
    /// Stores a value; false when it is not valid.
    std::function<bool(const std::string &)> set;
  };
  Flags &declare(Flag f);
  const Flag *find(const std::string &name) const;

  std::string tool_, synopsis_, notes_;
  std::vector<Flag> flags_;
  std::vector<std::string> *positional_ = nullptr;
  std::string *onePositional_ = nullptr;
  std::string onePositionalWhat_;
};

/// Parses a shape flag "NAME=8x3x224x224" into \p shapes (positive dims); false when it is
/// malformed or NAME was given before.
bool parseShapeFlag(const std::string &v, std::map<std::string, std::vector<uint64_t>> &shapes);

} // namespace kiln::tools

#endif // KILN_TOOLS_FLAGS_H
