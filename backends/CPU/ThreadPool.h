/// \file
/// The CPU backend's intra-op thread pool: N-1 workers plus the calling thread.
///
/// A compiled network is a sequence of stages, most of them parallel, separated by a few
/// microseconds. Waking a blocked worker costs tens of microseconds on a virtual machine,
/// paid twice per stage, so workers first spin for a short, bounded time (spinMicros) on
/// an atomic generation counter and only then block on a condition variable; the caller
/// does the same while it waits for the workers. Between inferences everybody blocks, so
/// an idle pool never steals a core from other work for longer than the spin bound.
///
/// Every share (thread id) of a task is claimed before it runs, and a thread that has
/// finished its own share runs the shares nobody has started yet: on a shared host, a
/// worker whose core is taken by another process when a stage is published no longer holds
/// the stage up until it gets the core back.
///
/// Publishing a task and reporting a finished share take no lock while nobody is blocked:
/// the mutex is only touched to put a thread to sleep or to wake one (a worker that counts
/// itself in sleepers_, a caller that sets callerWaiting_; each side checks the other's
/// flag after its own sequentially consistent write, so no wake-up is lost).
#ifndef KILN_BACKENDS_CPU_THREADPOOL_H
#define KILN_BACKENDS_CPU_THREADPOOL_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::cpu {

class ThreadPool {
public:
  /// Default bound on spin-waiting, in microseconds.
  static constexpr unsigned kDefaultSpinMicros = 100;
  /// Default bound on spin-waiting between the stages of a run (see beginRun).
  static constexpr unsigned kDefaultStageSpinMicros = 1000;
  /// Spinning threads poll without yielding the core for this long, then yield it
  /// between polls (every few microseconds) until their bound.
  static constexpr unsigned kPureSpinMicros = 20;

  /// A pool running tasks on \p threads threads in all (the caller included); waiting
  /// threads spin for at most \p spinMicros before blocking (0: block at once), and for
  /// at most \p stageSpinMicros while some caller is between beginRun and endRun.
  explicit ThreadPool(unsigned threads, unsigned spinMicros = kDefaultSpinMicros,
                      unsigned stageSpinMicros = kDefaultStageSpinMicros);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  unsigned size() const { return threads_; }

  /// Where one run()'s time went, measured when a profile asks for it (steady clock).
  struct RunTimes {
    /// From publishing the task to the start of the share that started last.
    int64_t lateNs = 0;
    /// From the end of the caller's own share (and of those it took over) to the end of
    /// the last share: what the caller waited for the others.
    int64_t waitNs = 0;
    /// Shares other than 0 that the caller ran itself (their worker had not started).
    unsigned takenOver = 0;
    /// Shares that a worker ran on the CPU the caller was on as it ended its own share
    /// (sched_getcpu): the scheduler had the two share one core.
    unsigned sameCpu = 0;
  };

  /// Runs fn(tid) for tid in [0, size()) and returns when all are done, each share once;
  /// tid 0 runs on the caller, the others on their worker unless the caller (or another
  /// worker) finishes first and takes them over, so fn(tid) may run on any thread. One call
  /// at a time per pool (calls from several threads serialise). With \p times, also
  /// measures where the time went (a few clock reads per share).
  void run(const std::function<void(unsigned)> &fn, RunTimes *times = nullptr);

  /// Brackets a sequence of run() calls close together (the stages of one inference):
  /// in between, waiting threads spin for the longer stage bound, so a short serial stage
  /// between two parallel ones does not put the workers to sleep; after endRun they block
  /// once the plain bound has passed. Calls nest and may come from several threads.
  void beginRun() { running_.fetch_add(1, std::memory_order_relaxed); }
  void endRun() { running_.fetch_sub(1, std::memory_order_relaxed); }
  /// beginRun for the scope's lifetime.
  class RunScope {
  public:
    explicit RunScope(ThreadPool &p) : p_(p) { p_.beginRun(); }
    ~RunScope() { p_.endRun(); }
    RunScope(const RunScope &) = delete;
    RunScope &operator=(const RunScope &) = delete;

  private:
    ThreadPool &p_;
  };

  /// Number of hardware threads (at least 1).
  static unsigned hardwareThreads();

private:
  void workerLoop(unsigned tid);
  /// Claims share \p tid of generation \p gen; false if some thread already has, or a
  /// later generation's share was claimed (then \p gen is over).
  bool claim(unsigned tid, uint64_t gen);
  /// Runs every share (but 0) of generation \p gen, from \p first on, that nobody has
  /// claimed yet; \p fn is only touched for a share this thread claims. \p caller: this
  /// thread is run()'s caller.
  void runUnclaimed(const std::function<void(unsigned)> *fn, uint64_t gen, unsigned first,
                    bool caller);
  /// fn(t), noting when it started and where it ran when the run is timed.
  void runShare(const std::function<void(unsigned)> &fn, unsigned t, bool caller);
  /// Publishes task \p fn to the workers (waking those asleep); returns its generation.
  uint64_t publish(const std::function<void(unsigned)> &fn);
  /// The caller's wait for the other shares (spinning, then blocking).
  void waitForShares();
  /// The RunTimes of a timed run whose shares are all done.
  RunTimes measured(int64_t published, int64_t ownDone, int callerCpu) const;
  /// shareCpu_ of a share the caller ran.
  static constexpr int kRanOnCaller = -2;
  /// Spins until pred() holds or the spin bound passes; returns pred().
  template <class Pred> bool spinFor(Pred pred) const;

  unsigned threads_;
  unsigned spinMicros_, stageSpinMicros_;
  std::atomic<unsigned> running_{0}; // callers between beginRun and endRun
  std::vector<std::thread> workers_;
  std::mutex runMutex_; // serialises run()

  // Published task: task_ and pending_ are written, then generation_ is bumped.
  std::mutex m_; // only to block and to wake (wake_, done_)
  std::condition_variable wake_, done_;
  std::atomic<const std::function<void(unsigned)> *> task_{nullptr};
  std::atomic<uint64_t> generation_{0};
  std::atomic<unsigned> pending_{0};                 // shares 1.. not yet finished
  std::unique_ptr<std::atomic<uint64_t>[]> claimed_; // per share: generation last claimed
  std::atomic<unsigned> sleepers_{0};    // workers blocked (or about to block) on wake_
  std::atomic<bool> callerWaiting_{false}; // the caller is blocked (or about to) on done_
  std::atomic<bool> stop_{false};          // written under m_
  // Profiles only (run() with RunTimes): whether this run records when each share starts;
  // read by a thread only after it claimed a share of the run, so the run is not over.
  bool timing_ = false;
  std::unique_ptr<int64_t[]> shareStartNs_; // per share, written by the thread claiming it
  std::unique_ptr<int[]> shareCpu_; // per share, the CPU it ended on (or kRanOnCaller)
};

} // namespace kiln::cpu

#endif // KILN_BACKENDS_CPU_THREADPOOL_H
