#include "ThreadPool.h"

namespace kiln::cpu {

unsigned ThreadPool::hardwareThreads() {
  unsigned n = std::thread::hardware_concurrency();
  return n ? n : 1;
}

ThreadPool::ThreadPool(unsigned threads) : threads_(threads ? threads : 1) {
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

void ThreadPool::workerLoop(unsigned tid) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(unsigned)> *task;
    {
      std::unique_lock<std::mutex> l(m_);
      wake_.wait(l, [&] { return stop_ || generation_ != seen; });
      if (stop_)
        return;
      seen = generation_;
      task = task_;
    }
    (*task)(tid);
    std::lock_guard<std::mutex> l(m_);
    if (--pending_ == 0)
      done_.notify_one();
  }
}

void ThreadPool::run(const std::function<void(unsigned)> &fn) {
  if (threads_ == 1) {
    fn(0);
    return;
  }
  std::lock_guard<std::mutex> serial(runMutex_);
  {
    std::lock_guard<std::mutex> l(m_);
    task_ = &fn;
    pending_ = threads_ - 1;
    generation_++;
  }
  wake_.notify_all();
  fn(0);
  std::unique_lock<std::mutex> l(m_);
  done_.wait(l, [&] { return pending_ == 0; });
  task_ = nullptr;
}

} // namespace kiln::cpu
