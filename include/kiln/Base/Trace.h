/// \file
/// Tracing: a record of what a compile and a run did and when, written as Chrome trace
/// event JSON (the `traceEvents` format that chrome://tracing and Perfetto open).
///
/// A Tracer collects complete events (a name, a category, a start and a duration) on
/// "processes" and "threads": process 1 is the host (compile phases, requests), and each
/// device that runs a partition gets a process of its own, named after it. Events are
/// recorded only where a Tracer is handed in (CompileOptions::tracer,
/// HostManager::startTrace, ExecutionEngine::startTrace); without one the code paths pay
/// one pointer test.
///
/// Categories: "compile" (driver phases: prepare, verify, partition, provision, schedule,
/// irgen, ir-passes, memory-plan, codegen, jit, load), "pass" (each graph or IR pass run),
/// "import", "runtime" (a request, from admission to its result), "queue" (a partition
/// waiting for its device), "partition" (a partition running on a device), "transfer"
/// (values handed from one partition to another, DMA on devices that have it) and, with
/// TraceOptions::kernels, "kernel" (one event per executed instruction on the
/// Interpreter and Sim, per compiled stage on the CPU).
#ifndef KILN_BASE_TRACE_H
#define KILN_BASE_TRACE_H

#include "kiln/Base/Error.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace kiln {

/// \p s as a JSON string literal (quotes, backslashes and control characters escaped), as
/// trace files write names; also what the tools use for their JSON output.
std::string jsonQuote(const std::string &s);

/// One argument of an event: written as a JSON number when \p number, else a string.
struct TraceArg {
  std::string key, value;
  bool number = false;
};

/// One event, in the terms of the Chrome trace event format.
struct TraceEvent {
  /// 'X' complete, 'b'/'e' the begin and end of an asynchronous span (intervals that may
  /// overlap, such as queue waits), 'M' metadata (process and thread names)
  char phase = 'X';
  std::string name;
  std::string category; ///< empty for metadata
  uint32_t pid = 0, tid = 0;
  int64_t startNs = 0;  ///< nanoseconds since the tracer was created
  int64_t durNs = 0;    ///< 'X' only
  uint64_t id = 0;      ///< 'b'/'e': pairs a begin with its end
  std::vector<TraceArg> args;
};

struct TraceOptions {
  /// One event per executed instruction (Interpreter, Sim) or compiled stage (CPU).
  bool kernels = false;
};

/// Collects events from any number of threads. Not copyable; share it by pointer.
class Tracer {
public:
  /// The host process: compile phases and requests.
  static constexpr uint32_t kHostPid = 1;

  explicit Tracer(TraceOptions opts = {});
  Tracer(const Tracer &) = delete;
  Tracer &operator=(const Tracer &) = delete;

  const TraceOptions &getOptions() const { return opts_; }
  bool kernels() const { return opts_.kernels; }

  /// Nanoseconds since this tracer was created.
  int64_t nowNs() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - epoch_).count();
  }
  /// The process named \p name ("host", a device name), created (with its process_name
  /// metadata event) on first use.
  uint32_t process(const std::string &name);
  /// The calling thread's id in this trace, created (with a thread_name event in process
  /// \p pid) on first use; \p name names it then (default "thread N").
  uint32_t thread(uint32_t pid = kHostPid, const std::string &name = "");

  /// Records a complete event on the calling thread.
  void complete(uint32_t pid, const std::string &category, const std::string &name,
                int64_t startNs, int64_t endNs, std::vector<TraceArg> args = {});
  /// Records an asynchronous span (a 'b' and an 'e' event of one id) on the calling
  /// thread: for intervals that may overlap others of the thread.
  void async(uint32_t pid, const std::string &category, const std::string &name,
             int64_t startNs, int64_t endNs, std::vector<TraceArg> args = {});
  /// Records events made elsewhere (e.g. one per kernel, gathered during a run).
  void append(std::vector<TraceEvent> events);

  /// A copy of the events, metadata first, the others in the order they were recorded.
  std::vector<TraceEvent> getEvents() const;
  size_t size() const;
  /// `{"traceEvents": [...], "displayTimeUnit": "ms"}` with ts and dur in microseconds.
  std::string toJSON() const;
  /// Writes toJSON() to \p path; an error naming the path when it cannot be written.
  Error writeJSON(const std::string &path) const;

private:
  using Clock = std::chrono::steady_clock;
  TraceOptions opts_;
  Clock::time_point epoch_;
  mutable std::mutex mu_;
  std::vector<TraceEvent> meta_, events_;
  std::map<std::string, uint32_t> processes_;
  /// (thread, pid) -> tid; a thread keeps one tid, named once per process it works in.
  std::map<std::thread::id, uint32_t> threads_;
  std::set<std::pair<uint32_t, uint32_t>> namedIn_;
  uint64_t nextAsyncId_ = 1;

  uint32_t threadLocked(uint32_t pid, const std::string &name);
};

/// Times a scope as one complete event of the calling thread on the host process (or
/// \p pid); does nothing when \p tracer is null.
class TraceScope {
public:
  TraceScope(Tracer *tracer, const char *category, std::string name,
             uint32_t pid = Tracer::kHostPid)
      : tracer_(tracer) {
    if (tracer_) {
      category_ = category;
      name_ = std::move(name);
      pid_ = pid;
      start_ = tracer_->nowNs();
    }
  }
  ~TraceScope() { end(); }
  TraceScope(const TraceScope &) = delete;
  TraceScope &operator=(const TraceScope &) = delete;
  void arg(const std::string &key, const std::string &value) {
    if (tracer_)
      args_.push_back({key, value, false});
  }
  void arg(const std::string &key, int64_t value) {
    if (tracer_)
      args_.push_back({key, std::to_string(value), true});
  }
  /// Ends the event now instead of at the end of the scope.
  void end() {
    if (tracer_)
      tracer_->complete(pid_, category_, name_, start_, tracer_->nowNs(), std::move(args_));
    tracer_ = nullptr;
  }

private:
  Tracer *tracer_;
  const char *category_ = "";
  std::string name_;
  uint32_t pid_ = Tracer::kHostPid;
  int64_t start_ = 0;
  std::vector<TraceArg> args_;
};

/// Complete events of \p category grouped by name, in order of first appearance: how
/// often each ran, and the sum and minimum of their durations (a profile is this view of
/// a trace). With \p skipFirst, the first event of each name is left out (a warm-up).
struct TraceSummary {
  std::string name;
  uint64_t count = 0;
  int64_t sumNs = 0, minNs = 0;
};
std::vector<TraceSummary> summarizeTrace(const std::vector<TraceEvent> &events,
                                         const std::string &category, bool skipFirst = false);

} // namespace kiln

#endif // KILN_BASE_TRACE_H
