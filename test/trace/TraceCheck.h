/// \file
/// Reading a Chrome trace event JSON file back (a small JSON reader of its own) and the
/// checks every Kiln trace must pass: well-formed events, one process per device, complete
/// events on one thread either nested or disjoint.
#ifndef KILN_TEST_TRACE_TRACECHECK_H
#define KILN_TEST_TRACE_TRACECHECK_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln::test {

/// A JSON value.
struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::vector<std::pair<std::string, Json>> object;
  /// The member \p key of an object, or null.
  const Json *get(const std::string &key) const;
};

/// Parses \p text; on malformed JSON returns false and says where in \p error.
bool parseJson(const std::string &text, Json &out, std::string &error);

/// One event of a parsed trace; times in nanoseconds (the file's microseconds x 1000).
struct ParsedEvent {
  std::string ph, name, cat;
  int64_t pid = 0, tid = 0;
  int64_t ts = 0, dur = 0;
  std::map<std::string, std::string> args; ///< numbers as their text
  size_t index = 0;                        ///< position in the file
  int64_t end() const { return ts + dur; }
  bool contains(const ParsedEvent &o) const { return ts <= o.ts && o.end() <= end(); }
};

struct ParsedTrace {
  std::vector<ParsedEvent> events;   ///< complete ('X') events, in file order
  std::map<int64_t, std::string> processes; ///< pid -> process_name
  /// Asynchronous spans ('b' and 'e' of one id joined), in the order they end.
  std::vector<ParsedEvent> spans;
  std::map<int64_t, ParsedEvent> asyncOpen; ///< while reading
  /// Complete events of category \p cat (named \p name when not empty).
  std::vector<const ParsedEvent *> select(const std::string &cat,
                                          const std::string &name = "") const;
  /// The pid of the process named \p name, or -1.
  int64_t pidOf(const std::string &name) const;
};

/// Parses a trace file's text and checks its structure: the top level has a traceEvents
/// array; every event has ph, name, pid and tid, complete events a category and ts/dur
/// >= 0, metadata events name their process or thread; each process name is given once
/// and names one process; complete events of one thread nest (one inside the other or
/// disjoint). Returns "" and fills \p out, or what is wrong.
std::string readTrace(const std::string &text, ParsedTrace &out);

} // namespace kiln::test

#endif // KILN_TEST_TRACE_TRACECHECK_H
