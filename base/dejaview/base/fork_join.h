// Fork-join for the encoder's per-frame work: a few independent pieces, each milliseconds long.
#pragma once

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>
#include <vector>

namespace dv {

// Runs fn(0), ..., fn(n - 1) at once, fn(0) on the calling thread and each other on a thread of
// its own, and returns once every one has. The threads start per call, some tens of microseconds
// each against the milliseconds of work a caller splits; a pool would save that but hold threads
// between frames in every process that links the codec. Where a thread cannot be started, its
// piece runs on the calling thread: the same results, later.
template <typename Fn>
void ForkJoin(int n, Fn&& fn) {
  std::vector<std::thread> others;
  std::vector<int> inline_pieces;
  for (int c = 1; c < n; ++c) {
    try {
      others.emplace_back([&fn, c] { fn(c); });
    } catch (const std::system_error&) {
      inline_pieces.push_back(c);
    }
  }
  if (n > 0) fn(0);
  for (int c : inline_pieces) fn(c);
  for (std::thread& t : others) t.join();
}

// a() and b() at once (b on a thread of its own) where `parallel`, else a() then b().
template <typename A, typename B>
void RunBoth(bool parallel, A&& a, B&& b) {
  if (!parallel) {
    a();
    b();
    return;
  }
  ForkJoin(2, [&](int piece) {
    if (piece == 0) {
      a();
    } else {
      b();
    }
  });
}

// task(0), ..., task(n - 1) on up to `threads` threads: task(0) on the calling thread (put the
// longest first: its allocations then come from the heap the caller's other work reuses, where
// on a thread started for it they page-faulted anew each frame), the others each taken in index
// order by whichever thread is free first. Which thread runs a task is timing; what the tasks
// write must not depend on it.
template <typename Fn>
void RunTasks(int threads, int n, Fn&& task) {
  std::atomic<int> next{1};
  ForkJoin(std::max(1, std::min(threads, n)), [&](int piece) {
    if (piece == 0 && n > 0) task(0);
    for (int t; (t = next.fetch_add(1)) < n;) task(t);
  });
}

}  // namespace dv
