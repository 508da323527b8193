#include "ThreadPool.h"

#include <algorithm>
#include <chrono>

#include <sched.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KILN_CPU_RELAX() _mm_pause()
#else
#define KILN_CPU_RELAX() std::this_thread::yield()
#endif

namespace kiln::cpu {

namespace {
int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
} // namespace

unsigned ThreadPool::hardwareThreads() {
  unsigned n = std::thread::hardware_concurrency();
  return n ? n : 1;
}

ThreadPool::ThreadPool(unsigned threads, unsigned spinMicros, unsigned stageSpinMicros)
    : threads_(threads ? threads : 1), spinMicros_(spinMicros),
      stageSpinMicros_(std::max(spinMicros, stageSpinMicros)),
      claimed_(new std::atomic<uint64_t>[threads ? threads : 1]),
      shareStartNs_(new int64_t[threads ? threads : 1]()),
      shareCpu_(new int[threads ? threads : 1]()) {
  for (unsigned t = 0; t < threads_; t++)
    claimed_[t].store(0, std::memory_order_relaxed);
  for (unsigned t = 1; t < threads_; t++)
    workers_.emplace_back([this, t] { workerLoop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> l(m_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (auto &w : workers_)
    w.join();
}

template <class Pred> bool ThreadPool::spinFor(Pred pred) const {
  if (stageSpinMicros_ == 0 || (spinMicros_ == 0 && running_.load(std::memory_order_relaxed) == 0))
    return pred();
  auto start = std::chrono::steady_clock::now();
  auto yieldFrom = start + std::chrono::microseconds(kPureSpinMicros);
  auto shortBound = start + std::chrono::microseconds(spinMicros_);
  auto longBound = start + std::chrono::microseconds(stageSpinMicros_);
  for (;;) {
    // Check the clock only every 64 polls: reading it costs more than a poll.
    for (int i = 0; i < 64; i++) {
      if (pred())
        return true;
      KILN_CPU_RELAX();
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= longBound ||
        (now >= shortBound && running_.load(std::memory_order_relaxed) == 0))
      return pred();
    // Past the first microseconds, let a thread of this process that shares the core run:
    // on a loaded host the scheduler may put the caller and a worker on one core, and a
    // thread spinning there would hold up the very share it waits for.
    if (now >= yieldFrom)
      std::this_thread::yield();
  }
}

bool ThreadPool::claim(unsigned tid, uint64_t gen) {
  // Generations only grow: a thread still holding an older one (it read the task before
  // that run finished) must not claim a share a newer run has claimed.
  uint64_t seen = claimed_[tid].load(std::memory_order_relaxed);
  while (seen < gen)
    if (claimed_[tid].compare_exchange_weak(seen, gen, std::memory_order_acq_rel))
      return true;
  return false;
}

void ThreadPool::runShare(const std::function<void(unsigned)> &fn, unsigned t, bool caller) {
  if (!timing_) {
    fn(t);
    return;
  }
  shareStartNs_[t] = nowNs();
  fn(t);
  shareCpu_[t] = caller ? kRanOnCaller : sched_getcpu();
}

void ThreadPool::runUnclaimed(const std::function<void(unsigned)> *fn, uint64_t gen,
                              unsigned first, bool caller) {
  for (unsigned k = 0; k + 1 < threads_; k++) {
    unsigned t = 1 + (first - 1 + k) % (threads_ - 1);
    if (!claim(t, gen))
      continue;
    runShare(*fn, t, caller);
    // The last share wakes the caller only if it blocked: it sets callerWaiting_ before it
    // looks at pending_ again, this thread looks at callerWaiting_ after its decrement.
    if (pending_.fetch_sub(1) == 1 && callerWaiting_.load()) {
      std::lock_guard<std::mutex> l(m_);
      done_.notify_one();
    }
  }
}

void ThreadPool::workerLoop(unsigned tid) {
  uint64_t seen = 0;
  for (;;) {
    auto published = [&] { return generation_.load() != seen; };
    if (!spinFor(published)) {
      // Counted as a sleeper before the last look at the generation, under m_: a run
      // published after that look sees the count and wakes this thread through m_.
      std::unique_lock<std::mutex> l(m_);
      sleepers_.fetch_add(1);
      wake_.wait(l, [&] { return stop_.load() || published(); });
      sleepers_.fetch_sub(1);
      if (stop_.load())
        return;
    }
    // task_ was written before the generation bump. If that run is over already, every
    // share of it was claimed and the task (maybe a newer one) is never called.
    seen = generation_.load();
    const std::function<void(unsigned)> *task = task_.load();
    // Its own share first, then any other nobody has started.
    runUnclaimed(task, seen, tid, /*caller=*/false);
  }
}

void ThreadPool::waitForShares() {
  auto finished = [&] { return pending_.load() == 0; };
  if (!spinFor(finished)) {
    std::unique_lock<std::mutex> l(m_);
    callerWaiting_.store(true);
    done_.wait(l, finished);
    callerWaiting_.store(false);
  }
}

uint64_t ThreadPool::publish(const std::function<void(unsigned)> &fn) {
  task_.store(&fn, std::memory_order_relaxed);
  pending_.store(threads_ - 1, std::memory_order_relaxed);
  uint64_t gen = generation_.fetch_add(1) + 1; // publishes task_, pending_ and timing_
  if (sleepers_.load()) {
    // A sleeper is inside wake_.wait or about to check the generation under m_.
    { std::lock_guard<std::mutex> l(m_); }
    wake_.notify_all();
  }
  return gen;
}

ThreadPool::RunTimes ThreadPool::measured(int64_t published, int64_t ownDone,
                                          int callerCpu) const {
  RunTimes r;
  r.waitNs = nowNs() - ownDone;
  for (unsigned t = 1; t < threads_; t++) {
    r.lateNs = std::max(r.lateNs, shareStartNs_[t] - published);
    r.takenOver += shareCpu_[t] == kRanOnCaller;
    r.sameCpu += shareCpu_[t] >= 0 && shareCpu_[t] == callerCpu;
  }
  return r;
}

void ThreadPool::run(const std::function<void(unsigned)> &fn, RunTimes *times) {
  if (threads_ == 1) {
    fn(0);
    return;
  }
  std::lock_guard<std::mutex> serial(runMutex_);
  timing_ = times != nullptr;
  int64_t published = timing_ ? nowNs() : 0;
  uint64_t gen = publish(fn);
  fn(0);
  int callerCpu = timing_ ? sched_getcpu() : -1;
  runUnclaimed(&fn, gen, 1, /*caller=*/true);
  int64_t ownDone = timing_ ? nowNs() : 0;
  waitForShares();
  if (times)
    *times = measured(published, ownDone, callerCpu);
}

} // namespace kiln::cpu
