#include "kiln/Base/Trace.h"

#include <cstdio>
#include <sstream>

namespace kiln {

Tracer::Tracer(TraceOptions opts) : opts_(opts), epoch_(Clock::now()) {
  process("host");
}

uint32_t Tracer::process(const std::string &name) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = processes_.find(name);
  if (it != processes_.end())
    return it->second;
  uint32_t pid = uint32_t(processes_.size()) + kHostPid;
  processes_.emplace(name, pid);
  TraceEvent m;
  m.phase = 'M';
  m.name = "process_name";
  m.pid = pid;
  m.args.push_back({"name", name, false});
  meta_.push_back(std::move(m));
  // Keep the host first and the devices in the order they appeared.
  TraceEvent order;
  order.phase = 'M';
  order.name = "process_sort_index";
  order.pid = pid;
  order.args.push_back({"sort_index", std::to_string(pid), true});
  meta_.push_back(std::move(order));
  return pid;
}

uint32_t Tracer::threadLocked(uint32_t pid, const std::string &name) {
  auto it = threads_.find(std::this_thread::get_id());
  if (it == threads_.end())
    it = threads_.emplace(std::this_thread::get_id(), uint32_t(threads_.size()) + 1).first;
  uint32_t tid = it->second;
  if (namedIn_.insert({pid, tid}).second) {
    TraceEvent m;
    m.phase = 'M';
    m.name = "thread_name";
    m.pid = pid;
    m.tid = tid;
    m.args.push_back({"name", name.empty() ? "thread " + std::to_string(tid) : name, false});
    meta_.push_back(std::move(m));
  }
  return tid;
}

uint32_t Tracer::thread(uint32_t pid, const std::string &name) {
  std::lock_guard<std::mutex> l(mu_);
  return threadLocked(pid, name);
}

void Tracer::complete(uint32_t pid, const std::string &category, const std::string &name,
                      int64_t startNs, int64_t endNs, std::vector<TraceArg> args) {
  TraceEvent e;
  e.name = name;
  e.category = category;
  e.pid = pid;
  e.startNs = startNs;
  e.durNs = endNs > startNs ? endNs - startNs : 0;
  e.args = std::move(args);
  std::lock_guard<std::mutex> l(mu_);
  e.tid = threadLocked(pid, "");
  events_.push_back(std::move(e));
}

void Tracer::async(uint32_t pid, const std::string &category, const std::string &name,
                   int64_t startNs, int64_t endNs, std::vector<TraceArg> args) {
  TraceEvent b;
  b.phase = 'b';
  b.name = name;
  b.category = category;
  b.pid = pid;
  b.startNs = startNs;
  b.args = std::move(args);
  TraceEvent e = b;
  e.phase = 'e';
  e.startNs = endNs > startNs ? endNs : startNs;
  e.args.clear();
  std::lock_guard<std::mutex> l(mu_);
  b.tid = e.tid = threadLocked(pid, "");
  b.id = e.id = nextAsyncId_++;
  events_.push_back(std::move(b));
  events_.push_back(std::move(e));
}

void Tracer::append(std::vector<TraceEvent> events) {
  std::lock_guard<std::mutex> l(mu_);
  for (TraceEvent &e : events) {
    if (e.tid == 0)
      e.tid = threadLocked(e.pid, "");
    events_.push_back(std::move(e));
  }
}

std::vector<TraceEvent> Tracer::getEvents() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<TraceEvent> out = meta_;
  out.insert(out.end(), events_.begin(), events_.end());
  return out;
}

size_t Tracer::size() const {
  std::lock_guard<std::mutex> l(mu_);
  return meta_.size() + events_.size();
}

std::string jsonQuote(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += "\\u00";
      out += "0123456789abcdef"[(c >> 4) & 0xf];
      out += "0123456789abcdef"[c & 0xf];
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

namespace {

/// Nanoseconds as microseconds with three decimals, the format's unit.
void writeMicros(std::ostringstream &os, int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
  os << buf;
}

} // namespace

std::string Tracer::toJSON() const {
  std::vector<TraceEvent> events = getEvents();
  std::ostringstream os;
  os << "{\"traceEvents\": [\n";
  for (size_t i = 0; i < events.size(); i++) {
    const TraceEvent &e = events[i];
    os << "{\"ph\": \"" << e.phase << "\", \"name\": ";
    os << jsonQuote(e.name);
    if (!e.category.empty()) {
      os << ", \"cat\": ";
      os << jsonQuote(e.category);
    }
    os << ", \"pid\": " << e.pid << ", \"tid\": " << e.tid;
    if (e.phase != 'M') {
      os << ", \"ts\": ";
      writeMicros(os, e.startNs);
    }
    if (e.phase == 'X') {
      os << ", \"dur\": ";
      writeMicros(os, e.durNs);
    }
    if (e.phase == 'i')
      os << ", \"s\": \"t\"";
    if (e.phase == 'b' || e.phase == 'e')
      os << ", \"id\": " << e.id;
    if (!e.args.empty()) {
      os << ", \"args\": {";
      for (size_t a = 0; a < e.args.size(); a++) {
        os << (a ? ", " : "");
        os << jsonQuote(e.args[a].key);
        os << ": ";
        if (e.args[a].number)
          os << e.args[a].value;
        else
          os << jsonQuote(e.args[a].value);
      }
      os << "}";
    }
    os << "}" << (i + 1 < events.size() ? ",\n" : "\n");
  }
  os << "], \"displayTimeUnit\": \"ms\"}\n";
  return os.str();
}

Error Tracer::writeJSON(const std::string &path) const {
  std::string text = toJSON();
  FILE *f = std::fopen(path.c_str(), "w");
  if (!f)
    return makeError(ErrorCode::InvalidArgument, "cannot write the trace to '", path, "'");
  size_t n = std::fwrite(text.data(), 1, text.size(), f);
  bool ok = std::fclose(f) == 0 && n == text.size();
  if (!ok)
    return makeError(ErrorCode::Runtime, "writing the trace to '", path, "' failed");
  return Error::success();
}

std::vector<TraceSummary> summarizeTrace(const std::vector<TraceEvent> &events,
                                         const std::string &category, bool skipFirst) {
  std::vector<TraceSummary> out;
  std::map<std::string, size_t> index;
  for (const TraceEvent &e : events) {
    if (e.phase != 'X' || e.category != category)
      continue;
    auto it = index.find(e.name);
    if (it == index.end()) {
      it = index.emplace(e.name, out.size()).first;
      TraceSummary s;
      s.name = e.name;
      out.push_back(s);
      if (skipFirst)
        continue;
    }
    TraceSummary &s = out[it->second];
    s.minNs = s.count ? std::min(s.minNs, e.durNs) : e.durNs;
    s.count++;
    s.sumNs += e.durNs;
  }
  return out;
}

} // namespace kiln
