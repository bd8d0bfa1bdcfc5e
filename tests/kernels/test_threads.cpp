// The thread governor (Note [The thread governor] in runtime/cpu/threads.cpp):
// its decision rule on its own, and under real contention (busy child
// processes on every core) the team shrinking to one thread, every kernel's
// OpenMP team following. Test binaries start with the governor off
// (tests/main.cpp); these cases turn it on and restore it.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "core/tensor.h"
#include "kernels/ops.h"
#include "runtime/cpu/threads.h"

namespace hg {
namespace {

using detail::govern;
using detail::GovernorState;

bool same(GovernorState a, GovernorState b) { return a.active == b.active && a.free_streak == b.free_streak; }

// Restores the thread count and the governor switch at the end of a case.
struct ThreadsRestore {
  int threads = get_num_threads();
  bool on = thread_governor();
  ~ThreadsRestore() {
    set_thread_governor(on);
    set_num_threads(threads);
  }
};

}  // namespace

TEST_CASE("thread governor: the decision rule", "[threads]") {
  // cap 2 on 2 cores. Waiting more than a fifth of the window drops a thread.
  CHECK(same(govern({2, 0}, 2, 2, 0.5, 0), {1, 0}));
  CHECK(same(govern({2, 0}, 2, 2, 0.19, 1), {2, 0}));  // at the cap: nothing to add, waits small
  CHECK(same(govern({1, 0}, 2, 2, 0.9, 0), {1, 1}));   // never below one thread
  // Below the cap: one more thread after two windows in a row with a core
  // free beside the other processes' runnable tasks and our team.
  CHECK(same(govern({1, 0}, 2, 2, 0.0, 0), {1, 1}));
  CHECK(same(govern({1, 1}, 2, 2, 0.0, 0), {2, 0}));
  CHECK(same(govern({1, 1}, 2, 2, 0.0, 1), {1, 0}));  // a busy process took the core: the streak restarts
  // 8 cores, 3 busy elsewhere: up to 5, one thread each second window.
  GovernorState s{1, 0};
  for (int w = 0; w < 20; ++w) s = govern(s, 8, 8, 0.0, 3);
  CHECK(s.active == 5);
  // A cap lowered under the state clamps it; cap 1 is never governed up.
  CHECK(same(govern({6, 0}, 4, 8, 0.0, 0), {4, 0}));
  CHECK(same(govern({1, 1}, 1, 8, 0.0, 0), {1, 0}));
}

TEST_CASE("thread governor: off, on, and set_num_threads", "[threads]") {
  const ThreadsRestore restore;
  set_num_threads(2);
  CHECK(get_num_threads() == 2);
  CHECK(active_num_threads() == 2);
  set_thread_governor(false);
  CHECK_FALSE(thread_governor());
  set_thread_governor(true);
  CHECK(thread_governor());
  CHECK_THROWS_WITH(set_num_threads(0), Catch::Contains(">= 1"));
}

// Run as its own CTest test (test_thread_governor, HG_TEST_REQUIRES=cpu-contention:
// two cores or more and /proc/self/task/*/schedstat), excluded from the plain
// test_kernels run.
TEST_CASE("thread governor: busy processes on every core shrink the team, and kernels follow it",
          "[threads-contention]") {
  const ThreadsRestore restore;
  set_num_threads(2);
  set_thread_governor(true);
  const Tensor a = ones({1 << 20}), b = ones({1 << 20});
  // Quiet start is not assumed (other tests may run beside this one); the
  // busy children make the contention certain.
  std::vector<pid_t> children;
  const unsigned cores = std::max(2u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < cores; ++i) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      volatile unsigned long spin = 0;
      for (;;) spin = spin + 1;  // killed by the parent
    }
    children.push_back(pid);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (active_num_threads() > 1 && std::chrono::steady_clock::now() < deadline) {
    (void)ops::binary(OpId::add, a, b);  // CPU work: each call lets the governor sample
  }
  const int under_contention = active_num_threads();
  // After a kernel call, this thread's OpenMP setting (what its parallel
  // regions, OpenBLAS and oneDNN size their teams from) is that team.
  (void)ops::binary(OpId::add, a, b);
  const int team = detail::openmp_threads_of_this_thread();
  for (pid_t pid : children) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  CHECK(under_contention == 1);
  CHECK(team == 1);
  CHECK(get_num_threads() == 2);  // the cap the user set is unchanged
  // Off: the team is the cap again at once.
  set_thread_governor(false);
  CHECK(active_num_threads() == 2);
  (void)ops::binary(OpId::add, a, b);
  CHECK(detail::openmp_threads_of_this_thread() == 2);
}

}  // namespace hg
