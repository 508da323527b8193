#include "ThreadPool.h"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KILN_CPU_RELAX() _mm_pause()
#else
#define KILN_CPU_RELAX() std::this_thread::yield()
#endif

namespace kiln::cpu {

unsigned ThreadPool::hardwareThreads() {
  unsigned n = std::thread::hardware_concurrency();
  return n ? n : 1;
}

ThreadPool::ThreadPool(unsigned threads, unsigned spinMicros)
    : threads_(threads ? threads : 1), spinMicros_(spinMicros),
      claimed_(new std::atomic<uint64_t>[threads ? threads : 1]) {
  for (unsigned t = 0; t < threads_; t++)
    claimed_[t].store(0, std::memory_order_relaxed);
  for (unsigned t = 1; t < threads_; t++)
    workers_.emplace_back([this, t] { workerLoop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> l(m_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto &w : workers_)
    w.join();
}

template <class Pred> bool ThreadPool::spinFor(Pred pred) const {
  if (spinMicros_ == 0)
    return pred();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(spinMicros_);
  for (;;) {
    // Check the clock only every 64 polls: reading it costs more than a poll.
    for (int i = 0; i < 64; i++) {
      if (pred())
        return true;
      KILN_CPU_RELAX();
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return pred();
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

void ThreadPool::runUnclaimed(const std::function<void(unsigned)> *fn, uint64_t gen,
                              unsigned first) {
  for (unsigned k = 0; k + 1 < threads_; k++) {
    unsigned t = 1 + (first - 1 + k) % (threads_ - 1);
    if (!claim(t, gen))
      continue;
    (*fn)(t);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> l(m_);
      if (callerWaiting_)
        done_.notify_one();
    }
  }
}

void ThreadPool::workerLoop(unsigned tid) {
  uint64_t seen = 0;
  for (;;) {
    auto published = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    const std::function<void(unsigned)> *task;
    if (spinFor(published)) {
      // task_ was written before the generation bump (under m_); take it under m_ too, so
      // that a stop published at the same time is seen.
      std::lock_guard<std::mutex> l(m_);
      if (stop_)
        return;
      seen = generation_.load(std::memory_order_relaxed);
      task = task_;
    } else {
      std::unique_lock<std::mutex> l(m_);
      sleepers_++;
      wake_.wait(l, [&] { return stop_ || published(); });
      sleepers_--;
      if (stop_)
        return;
      seen = generation_.load(std::memory_order_relaxed);
      task = task_;
    }
    // Its own share first, then any other nobody has started. A share claimed by another
    // thread is left alone; so is the task, which may be gone already.
    runUnclaimed(task, seen, tid);
  }
}

void ThreadPool::run(const std::function<void(unsigned)> &fn) {
  if (threads_ == 1) {
    fn(0);
    return;
  }
  std::lock_guard<std::mutex> serial(runMutex_);
  uint64_t gen;
  {
    std::lock_guard<std::mutex> l(m_);
    task_ = &fn;
    pending_.store(threads_ - 1, std::memory_order_relaxed);
    gen = generation_.fetch_add(1, std::memory_order_release) + 1;
    if (sleepers_)
      wake_.notify_all();
  }
  fn(0);
  runUnclaimed(&fn, gen, 1);
  auto finished = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!spinFor(finished)) {
    std::unique_lock<std::mutex> l(m_);
    callerWaiting_ = true;
    done_.wait(l, finished);
    callerWaiting_ = false;
  }
}

} // namespace kiln::cpu
