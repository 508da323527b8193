/// \file
/// The CPU backend's intra-op thread pool: N-1 workers that block on a condition variable
/// (they never spin for long: on a small machine a spinning pool steals cores from
/// everything else) plus the calling thread.
#ifndef KILN_BACKENDS_CPU_THREADPOOL_H
#define KILN_BACKENDS_CPU_THREADPOOL_H

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::cpu {

class ThreadPool {
public:
  /// A pool running tasks on \p threads threads in all (the caller included).
  explicit ThreadPool(unsigned threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  unsigned size() const { return threads_; }
  /// Runs fn(tid) for tid in [0, size()) and returns when all are done; tid 0 runs on the
  /// caller. One call at a time per pool (calls from several threads serialise).
  void run(const std::function<void(unsigned)> &fn);

  /// Number of hardware threads (at least 1).
  static unsigned hardwareThreads();

private:
  void workerLoop(unsigned tid);

  unsigned threads_;
  std::vector<std::thread> workers_;
  std::mutex runMutex_; // serialises run()
  std::mutex m_;
  std::condition_variable wake_, done_;
  const std::function<void(unsigned)> *task_ = nullptr;
  uint64_t generation_ = 0;
  unsigned pending_ = 0;
  bool stop_ = false;
};

} // namespace kiln::cpu

#endif // KILN_BACKENDS_CPU_THREADPOOL_H
