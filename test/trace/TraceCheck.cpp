#include "TraceCheck.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

namespace kiln::test {

const Json *Json::get(const std::string &key) const {
  for (const auto &kv : object)
    if (kv.first == key)
      return &kv.second;
  return nullptr;
}

namespace {

class Reader {
public:
  explicit Reader(const std::string &t) : t_(t) {}

  bool parse(Json &out, std::string &error) {
    if (!value(out) || (skip(), pos_ != t_.size())) {
      if (error_.empty())
        error_ = "trailing text";
      error = error_ + " at offset " + std::to_string(pos_);
      return false;
    }
    return true;
  }

private:
  void skip() {
    while (pos_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[pos_])))
      pos_++;
  }
  bool fail(const std::string &why) {
    if (error_.empty())
      error_ = why;
    return false;
  }
  bool literal(const char *word) {
    size_t n = std::char_traits<char>::length(word);
    if (t_.compare(pos_, n, word) != 0)
      return fail(std::string("expected ") + word);
    pos_ += n;
    return true;
  }
  bool string(std::string &out) {
    if (pos_ >= t_.size() || t_[pos_] != '"')
      return fail("expected a string");
    pos_++;
    while (pos_ < t_.size() && t_[pos_] != '"') {
      char c = t_[pos_++];
      if (static_cast<unsigned char>(c) < 0x20)
        return fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= t_.size())
        return fail("unterminated escape");
      char e = t_[pos_++];
      switch (e) {
      case '"': case '\\': case '/': out += e; break;
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'u': {
        if (pos_ + 4 > t_.size())
          return fail("short \\u escape");
        unsigned v = unsigned(std::strtoul(t_.substr(pos_, 4).c_str(), nullptr, 16));
        pos_ += 4;
        out += v < 0x80 ? char(v) : '?';
        break;
      }
      default: return fail("bad escape");
      }
    }
    if (pos_ >= t_.size())
      return fail("unterminated string");
    pos_++;
    return true;
  }
  bool number(double &out) {
    size_t start = pos_;
    if (pos_ < t_.size() && t_[pos_] == '-')
      pos_++;
    if (pos_ >= t_.size() || !std::isdigit(static_cast<unsigned char>(t_[pos_])))
      return fail("expected a value");
    while (pos_ < t_.size() && (std::isdigit(static_cast<unsigned char>(t_[pos_])) ||
                                t_[pos_] == '.' || t_[pos_] == 'e' || t_[pos_] == 'E' ||
                                t_[pos_] == '+' || t_[pos_] == '-'))
      pos_++;
    char *end = nullptr;
    std::string s = t_.substr(start, pos_ - start);
    out = std::strtod(s.c_str(), &end);
    if (*end)
      return fail("malformed number '" + s + "'");
    return true;
  }
  bool value(Json &out) {
    skip();
    if (pos_ >= t_.size())
      return fail("unexpected end");
    char c = t_[pos_];
    if (c == '{') {
      out.kind = Json::Object;
      pos_++;
      skip();
      if (pos_ < t_.size() && t_[pos_] == '}')
        return pos_++, true;
      for (;;) {
        skip();
        std::string key;
        if (!string(key))
          return false;
        skip();
        if (pos_ >= t_.size() || t_[pos_] != ':')
          return fail("expected ':'");
        pos_++;
        Json v;
        if (!value(v))
          return false;
        out.object.emplace_back(std::move(key), std::move(v));
        skip();
        if (pos_ < t_.size() && t_[pos_] == ',') {
          pos_++;
          continue;
        }
        if (pos_ < t_.size() && t_[pos_] == '}')
          return pos_++, true;
        return fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      out.kind = Json::Array;
      pos_++;
      skip();
      if (pos_ < t_.size() && t_[pos_] == ']')
        return pos_++, true;
      for (;;) {
        Json v;
        if (!value(v))
          return false;
        out.array.push_back(std::move(v));
        skip();
        if (pos_ < t_.size() && t_[pos_] == ',') {
          pos_++;
          continue;
        }
        if (pos_ < t_.size() && t_[pos_] == ']')
          return pos_++, true;
        return fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      out.kind = Json::String;
      return string(out.string);
    }
    if (c == 't' || c == 'f') {
      out.kind = Json::Bool;
      out.boolean = c == 't';
      return literal(c == 't' ? "true" : "false");
    }
    if (c == 'n') {
      out.kind = Json::Null;
      return literal("null");
    }
    out.kind = Json::Number;
    return number(out.number);
  }

  const std::string &t_;
  size_t pos_ = 0;
  std::string error_;
};

int64_t nanos(double micros) { return int64_t(std::llround(micros * 1000.0)); }

std::string describe(const ParsedEvent &e) {
  return "'" + e.name + "' (" + e.cat + ", pid " + std::to_string(e.pid) + ", tid " +
         std::to_string(e.tid) + ", ts " + std::to_string(e.ts) + " ns, dur " +
         std::to_string(e.dur) + " ns, event " + std::to_string(e.index) + ")";
}

} // namespace

bool parseJson(const std::string &text, Json &out, std::string &error) {
  return Reader(text).parse(out, error);
}

std::vector<const ParsedEvent *> ParsedTrace::select(const std::string &cat,
                                                     const std::string &name) const {
  std::vector<const ParsedEvent *> r;
  for (const ParsedEvent &e : events)
    if (e.cat == cat && (name.empty() || e.name == name))
      r.push_back(&e);
  return r;
}

int64_t ParsedTrace::pidOf(const std::string &name) const {
  for (const auto &kv : processes)
    if (kv.second == name)
      return kv.first;
  return -1;
}

std::string readTrace(const std::string &text, ParsedTrace &out) {
  Json root;
  std::string error;
  if (!parseJson(text, root, error))
    return "not JSON: " + error;
  if (root.kind != Json::Object)
    return "the top level is not an object";
  const Json *events = root.get("traceEvents");
  if (!events || events->kind != Json::Array)
    return "no traceEvents array";
  std::set<std::pair<int64_t, int64_t>> namedThreads;
  for (size_t i = 0; i < events->array.size(); i++) {
    const Json &j = events->array[i];
    std::string at = "event " + std::to_string(i);
    if (j.kind != Json::Object)
      return at + " is not an object";
    const Json *ph = j.get("ph"), *name = j.get("name"), *pid = j.get("pid"), *tid = j.get("tid");
    if (!ph || ph->kind != Json::String || !name || name->kind != Json::String || !pid ||
        pid->kind != Json::Number || !tid || tid->kind != Json::Number)
      return at + " lacks ph, name, pid or tid";
    ParsedEvent e;
    e.ph = ph->string;
    e.name = name->string;
    e.pid = int64_t(pid->number);
    e.tid = int64_t(tid->number);
    e.index = i;
    if (const Json *args = j.get("args")) {
      if (args->kind != Json::Object)
        return at + ": args is not an object";
      for (const auto &kv : args->object)
        e.args[kv.first] = kv.second.kind == Json::String ? kv.second.string
                           : kv.second.kind == Json::Number
                               ? std::to_string(int64_t(kv.second.number))
                               : std::string("?");
    }
    if (e.ph == "M") {
      if (!e.args.count("name") && e.name != "process_sort_index")
        return at + ": metadata '" + e.name + "' names nothing";
      if (e.name == "process_name") {
        if (out.processes.count(e.pid))
          return "process " + std::to_string(e.pid) + " is named twice";
        if (out.pidOf(e.args["name"]) != -1)
          return "two processes are named '" + e.args["name"] + "'";
        out.processes[e.pid] = e.args["name"];
      } else if (e.name == "thread_name") {
        if (!namedThreads.insert({e.pid, e.tid}).second)
          return "thread " + std::to_string(e.tid) + " of process " + std::to_string(e.pid) +
                 " is named twice";
      }
      continue;
    }
    const Json *cat = j.get("cat"), *ts = j.get("ts");
    if (!cat || cat->kind != Json::String || cat->string.empty())
      return at + " ('" + e.name + "') has no category";
    if (!ts || ts->kind != Json::Number || ts->number < 0)
      return at + " ('" + e.name + "') has no valid ts";
    e.cat = cat->string;
    e.ts = nanos(ts->number);
    if (e.ph == "X") {
      const Json *dur = j.get("dur");
      if (!dur || dur->kind != Json::Number || dur->number < 0)
        return at + " ('" + e.name + "') is complete without a valid dur";
      e.dur = nanos(dur->number);
      out.events.push_back(std::move(e));
    } else if (e.ph == "b" || e.ph == "e") {
      const Json *id = j.get("id");
      if (!id || id->kind != Json::Number)
        return at + " ('" + e.name + "') is asynchronous without an id";
      auto &open = out.asyncOpen[int64_t(id->number)];
      if (e.ph == "b") {
        if (open.name.size())
          return at + ": asynchronous id " + std::to_string(int64_t(id->number)) + " begins twice";
        open = e;
      } else {
        if (open.name != e.name || open.ts > e.ts)
          return at + " ('" + e.name + "') ends a span that did not begin before it";
        e.dur = e.ts - open.ts;
        e.ts = open.ts;
        e.args = open.args;
        out.spans.push_back(e);
        out.asyncOpen.erase(int64_t(id->number));
      }
    } else if (e.ph != "i") {
      return at + ": unexpected phase '" + e.ph + "'";
    }
  }
  if (!out.asyncOpen.empty())
    return "asynchronous span '" + out.asyncOpen.begin()->second.name + "' never ends";
  // Every event's process is named.
  for (const ParsedEvent &e : out.events)
    if (!out.processes.count(e.pid))
      return "event " + describe(e) + " is in an unnamed process";
  // Nesting: on each thread, sorted by start (longer first on ties), every event lies
  // inside the innermost open one or starts after it ends.
  std::map<std::pair<int64_t, int64_t>, std::vector<const ParsedEvent *>> byThread;
  for (const ParsedEvent &e : out.events)
    byThread[{e.pid, e.tid}].push_back(&e);
  for (auto &[key, list] : byThread) {
    std::stable_sort(list.begin(), list.end(), [](const ParsedEvent *a, const ParsedEvent *b) {
      return a->ts != b->ts ? a->ts < b->ts : a->dur > b->dur;
    });
    std::vector<const ParsedEvent *> open;
    for (const ParsedEvent *e : list) {
      while (!open.empty() && open.back()->end() <= e->ts)
        open.pop_back();
      if (!open.empty() && !open.back()->contains(*e))
        return "events overlap without nesting: " + describe(*open.back()) + " and " +
               describe(*e);
      open.push_back(e);
    }
  }
  return "";
}

} // namespace kiln::test
