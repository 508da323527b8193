// The CPU backend's thread pool: every thread id runs exactly once per run(), run() returns
// only after all of them finished, on both the spinning and the blocking paths, concurrent
// callers serialise, and shares whose worker has not started are taken over.
#include "backends/CPU/ThreadPool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using kiln::cpu::ThreadPool;

namespace {

/// Runs \p runs tasks on \p pool, each recording which thread ids ran, sleeping
/// \p idleMicros between runs (long idles force the workers onto the blocking path).
void checkRuns(ThreadPool &pool, int runs, int idleMicros) {
  unsigned n = pool.size();
  for (int r = 0; r < runs; r++) {
    std::vector<std::atomic<int>> hits(n);
    for (auto &h : hits)
      h = 0;
    std::atomic<int> finished{0};
    pool.run([&](unsigned tid) {
      ASSERT_LT(tid, n);
      hits[tid]++;
      // Uneven work, so that the caller often finishes before the workers.
      if (tid % 2 == 1)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      finished++;
    });
    // run() returned: every task must have completed, each id exactly once.
    ASSERT_EQ(finished.load(), int(n)) << "run " << r;
    for (unsigned t = 0; t < n; t++)
      ASSERT_EQ(hits[t].load(), 1) << "run " << r << " tid " << t;
    if (idleMicros)
      std::this_thread::sleep_for(std::chrono::microseconds(idleMicros));
  }
}

} // namespace

TEST(ThreadPoolTest, SingleThreadRunsOnCaller) {
  ThreadPool pool(1);
  std::thread::id caller = std::this_thread::get_id(), ran;
  pool.run([&](unsigned tid) {
    EXPECT_EQ(tid, 0u);
    ran = std::this_thread::get_id();
  });
  EXPECT_EQ(ran, caller);
}

TEST(ThreadPoolTest, BackToBackRunsSpin) { // consecutive stages of an inference
  ThreadPool pool(4);
  checkRuns(pool, 2000, 0);
}

TEST(ThreadPoolTest, IdleRunsBlock) { // idle longer than the spin bound between runs
  ThreadPool pool(3, /*spinMicros=*/20);
  checkRuns(pool, 50, 2000);
}

TEST(ThreadPoolTest, NoSpinning) {
  ThreadPool pool(2, /*spinMicros=*/0);
  checkRuns(pool, 500, 0);
  checkRuns(pool, 20, 500);
}

// Inside a RunScope waiting threads spin for the stage bound (here 300 us): gaps shorter
// than it keep them spinning, longer ones put them to sleep; after the scope they block
// after the plain bound (0 here: at once). Every path must still run each id once.
TEST(ThreadPoolTest, RunScopeSpinsBetweenStages) {
  ThreadPool pool(3, /*spinMicros=*/0, /*stageSpinMicros=*/300);
  for (int round = 0; round < 3; round++) {
    {
      ThreadPool::RunScope running(pool);
      checkRuns(pool, 200, 0);
      checkRuns(pool, 20, 100);  // within the stage bound
      checkRuns(pool, 10, 1000); // past it
    }
    checkRuns(pool, 20, 200); // blocking at once again
  }
}

TEST(ThreadPoolTest, RunScopesNestAcrossCallers) {
  ThreadPool pool(2, 10, 200);
  std::atomic<int> total{0};
  auto caller = [&] {
    for (int i = 0; i < 100; i++) {
      ThreadPool::RunScope running(pool);
      for (int s = 0; s < 3; s++)
        pool.run([&](unsigned) { total++; });
    }
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2 * 100 * 3 * 2);
}

TEST(ThreadPoolTest, ConcurrentCallersSerialise) {
  ThreadPool pool(2);
  std::atomic<int> inside{0}, maxInside{0}, total{0};
  auto caller = [&] {
    for (int i = 0; i < 300; i++)
      pool.run([&](unsigned) {
        int now = ++inside;
        int m = maxInside.load();
        while (now > m && !maxInside.compare_exchange_weak(m, now)) {
        }
        total++;
        --inside;
      });
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2 * 300 * 2);
  // Two tasks of one run may overlap, never tasks of two runs.
  EXPECT_LE(maxInside.load(), 2);
}

TEST(ThreadPoolTest, DestroyWhileWorkersSleepOrSpin) {
  for (int i = 0; i < 20; i++) {
    ThreadPool pool(3, 50);
    checkRuns(pool, 3, i % 2 ? 200 : 0);
  } // destructor must join promptly in both states
}

// Workers that block (no spinning) take microseconds to wake; the caller, done with its own
// empty share at once, takes theirs over: ids other than 0 then run on the caller's thread,
// still exactly once each.
TEST(ThreadPoolTest, LateWorkersSharesRunElsewhere) {
  ThreadPool pool(3, 0);
  std::thread::id caller = std::this_thread::get_id();
  int onCaller = 0;
  for (int r = 0; r < 200; r++) {
    std::vector<std::atomic<int>> hits(3);
    std::vector<std::thread::id> ranOn(3);
    for (auto &h : hits)
      h = 0;
    pool.run([&](unsigned tid) {
      hits[tid]++;
      ranOn[tid] = std::this_thread::get_id();
    });
    for (unsigned t = 0; t < 3; t++)
      ASSERT_EQ(hits[t].load(), 1) << "run " << r << " tid " << t;
    EXPECT_EQ(ranOn[0], caller);
    onCaller += (ranOn[1] == caller) + (ranOn[2] == caller);
    // Let the workers block again before the next run.
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  EXPECT_GT(onCaller, 0);
}

// With RunTimes, run() says how many shares the caller ran besides its own: exactly those
// that ran on the caller's thread. Workers that block (no spinning) wake late, so some runs
// have shares taken over and some not; the times measured are never negative, and a share
// counts as run on the caller's CPU only if a worker ran it (never one taken over).
TEST(ThreadPoolTest, RunTimesCountSharesTakenOver) {
  ThreadPool pool(3, 0);
  std::thread::id caller = std::this_thread::get_id();
  unsigned takenTotal = 0;
  for (int r = 0; r < 200; r++) {
    std::vector<std::thread::id> ranOn(3);
    std::vector<std::atomic<int>> hits(3);
    for (auto &h : hits)
      h = 0;
    ThreadPool::RunTimes times;
    pool.run(
        [&](unsigned tid) {
          hits[tid]++;
          ranOn[tid] = std::this_thread::get_id();
        },
        &times);
    unsigned onCaller = 0;
    for (unsigned t = 0; t < 3; t++) {
      ASSERT_EQ(hits[t].load(), 1) << "run " << r << " tid " << t;
      onCaller += t > 0 && ranOn[t] == caller;
    }
    EXPECT_EQ(times.takenOver, onCaller) << "run " << r;
    EXPECT_LE(times.sameCpu, 2u - onCaller) << "run " << r;
    EXPECT_GE(times.lateNs, 0);
    EXPECT_GE(times.waitNs, 0);
    takenTotal += times.takenOver;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  EXPECT_GT(takenTotal, 0u);
}
