// The process's CPU thread policy and denormal mode (runtime/cpu/threads.h).
#include "runtime/cpu/threads.h"

#include <cblas.h>
#include <omp.h>

#include <dirent.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define HG_HAVE_MXCSR 1
#endif

#include "core/error.h"
#include "core/log.h"

namespace hg {

namespace {

std::atomic<bool> g_flush{false};

#if defined(HG_HAVE_MXCSR)
constexpr unsigned kFtzDaz = 0x8040;  // MXCSR bit 15 (FTZ) and bit 6 (DAZ)
void set_mxcsr(bool on) { _mm_setcsr(on ? (_mm_getcsr() | kFtzDaz) : (_mm_getcsr() & ~kFtzDaz)); }
#endif

// Applies the denormal mode to the calling thread and every pool thread.
// Threads the pool starts later inherit the creating thread's mode (POSIX).
void apply_flush(bool on) {
#if defined(HG_HAVE_MXCSR)
  set_mxcsr(on);
#pragma omp parallel num_threads(omp_get_max_threads())
  set_mxcsr(on);
#else
  (void)on;
#endif
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v, &end, 10);
  if (errno != 0 || *end != '\0' || n < 0 || n > 4096) {
    std::fprintf(stderr, "halfgrad: ignoring %s=%s (expected an integer from 0 to 4096)\n", name, v);
    return fallback;
  }
  return static_cast<int>(n);
}

// Note [The thread governor]
// libgomp's default wait policy spins: a thread that reaches a barrier or the
// end of a region burns its core for a while before it sleeps, and a region's
// static split waits for its slowest thread. When another process keeps a
// core busy, the scheduler shares that core between it and one of ours, and
// every region waits for whole scheduler slices: a 4-layer char-GPT training
// step took 200.6 ms on 2 threads against 66.7 ms on 1 (the 2-core EPYC,
// 2026-12-07). OMP_WAIT_POLICY=passive gave 79.0 ms there but cost 13% on a
// quiet machine (46.6 ms against 41.2), and libgomp reads its policy once,
// before any of our code runs. So the team size adapts instead:
//   - every kGovernorWindowMs, the thread that starts CPU work reads how long
//     the process's threads waited for a CPU (the run-queue delay, field 2 of
//     /proc/self/task/*/schedstat) and how many tasks the machine has
//     runnable (/proc/loadavg), less our own runnable ones;
//   - if our threads waited, summed, more than a fifth of the window, the team
//     loses one thread (down to 1);
//   - below the cap, it gains one back when two windows in a row leave a core
//     free beside the other processes' runnable tasks and our team.
// The caller's OpenMP team size (a per-thread setting) follows the active
// count at the next CPU call on that thread (detail::sync_cpu_threads).
// Where /proc gives no schedstat (a kernel without CONFIG_SCHED_INFO), the
// team stays at the cap. The measurement is in docs/benchmarks.md, "The thread
// governor" (kernels/cpu/README.md, "CPU threads and denormals").

constexpr double kContended = 0.2;  // waited fraction of a window that drops a thread
constexpr int kFreeWindows = 2;     // free windows in a row that add one back

std::atomic<int> g_cap{0};     // 0: not yet read (omp_get_max_threads() at first use)
std::atomic<int> g_active{0};  // the team size the governor allows
std::atomic<bool> g_governor{true};
thread_local int t_applied = 0;  // the team size this thread last gave OpenMP

int cap_now() {
  int c = g_cap.load(std::memory_order_relaxed);
  if (c == 0) {
    int expected = 0;
    const int initial = omp_get_max_threads();
    g_cap.compare_exchange_strong(expected, initial);
    expected = 0;
    g_active.compare_exchange_strong(expected, initial);
    c = g_cap.load();
  }
  return c;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The cores this process may run on.
int affinity_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return omp_get_num_procs();
  return std::max(1, CPU_COUNT(&set));
}

bool read_file(const char* path, char* buf, size_t size) {
  std::FILE* f = std::fopen(path, "re");
  if (f == nullptr) return false;
  const size_t n = std::fread(buf, 1, size - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  return n > 0;
}

// One look at /proc: our threads' run-queue delay so far (by thread id), how
// many of them are runnable, and the machine's runnable task count. The delay
// is read for at most kMaxSampledThreads threads (the first by id: the main
// thread and the pool's first workers), so that a sample at the cap costs the
// same few dozen reads on a 128-core machine as on a 2-core one (fewer threads
// read only make the team shrink later). Our runnable threads are counted over
// every thread, and only when `count_running` (a team below the cap, where
// the governor asks whether a core is free).
constexpr int kMaxSampledThreads = 16;
struct Sample {
  bool ok = false;
  std::unordered_map<long, uint64_t> wait_ns;
  int ours_running = 0;
  int machine_running = 0;
};

Sample read_sample(bool count_running) {
  Sample s;
  char buf[512];
  // /proc/loadavg: "0.50 0.40 0.30 R/T last_pid": R is runnable right now.
  if (!read_file("/proc/loadavg", buf, sizeof(buf))) return s;
  double l1, l5, l15;
  if (std::sscanf(buf, "%lf %lf %lf %d/", &l1, &l5, &l15, &s.machine_running) != 4) return s;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return s;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const bool sample_wait = static_cast<int>(s.wait_ns.size()) < kMaxSampledThreads;
    if (!sample_wait && !count_running) break;
    const long tid = std::strtol(e->d_name, nullptr, 10);
    char path[96];
    if (sample_wait) {
      std::snprintf(path, sizeof(path), "/proc/self/task/%ld/schedstat", tid);
      unsigned long long on_cpu = 0, waited = 0;
      if (read_file(path, buf, sizeof(buf)) && std::sscanf(buf, "%llu %llu", &on_cpu, &waited) == 2) {
        s.wait_ns[tid] = waited;
      }
    }
    if (!count_running) continue;
    std::snprintf(path, sizeof(path), "/proc/self/task/%ld/stat", tid);
    if (read_file(path, buf, sizeof(buf))) {
      const char* close = std::strrchr(buf, ')');  // the name may hold spaces and parentheses
      if (close != nullptr && close[1] == ' ' && close[2] == 'R') ++s.ours_running;
    }
  }
  closedir(dir);
  s.ok = !s.wait_ns.empty();
  return s;
}

struct Governor {
  std::mutex mu;
  std::atomic<int64_t> next_ns{0};
  int64_t last_ns = 0;
  std::unordered_map<long, uint64_t> last_wait;
  int free_streak = 0;  // the team size itself is g_active
  int cores = affinity_cores();
};

Governor& governor() {
  static Governor* g = new Governor();  // never destroyed: sampled until exit
  return *g;
}

void maybe_govern(int cap) {
  Governor& g = governor();
  const int64_t now = now_ns();
  if (now < g.next_ns.load(std::memory_order_relaxed)) return;
  const std::unique_lock<std::mutex> lock(g.mu, std::try_to_lock);
  if (!lock.owns_lock() || now < g.next_ns.load()) return;
  g.next_ns.store(now + detail::kGovernorWindowMs * 1000000);
  Sample s = read_sample(g_active.load() < cap);
  if (!s.ok) return;
  uint64_t waited = 0;  // threads seen in the last window only: a new one's past is not this window's
  for (const auto& [tid, ns] : s.wait_ns) {
    const auto it = g.last_wait.find(tid);
    if (it != g.last_wait.end() && ns >= it->second) waited += ns - it->second;
  }
  const int64_t window = now - g.last_ns;
  const bool first = g.last_ns == 0;
  g.last_wait = std::move(s.wait_ns);
  g.last_ns = now;
  if (first || window <= 0) return;
  const int others = std::max(0, s.machine_running - s.ours_running);
  const detail::GovernorState next = detail::govern({g_active.load(), g.free_streak}, cap, g.cores,
                                                    static_cast<double>(waited) / static_cast<double>(window), others);
  g.free_streak = next.free_streak;
  g_active.store(next.active);
}

// Read once when the library loads.
const bool g_env_applied = [] {
  if (const int n = env_int("HG_NUM_THREADS", 0); n > 0) set_num_threads(n);
  if (env_int("HG_FLUSH_DENORMAL", 0) != 0) set_flush_denormal(true);
  if (const char* v = std::getenv("HG_THREAD_GOVERNOR"); v != nullptr && std::strcmp(v, "0") == 0) {
    g_governor.store(false);
  }
  return true;
}();

}  // namespace

namespace detail {

GovernorState govern(GovernorState s, int cap, int cores, double waiting, int others) {
  s.active = std::clamp(s.active, 1, std::max(1, cap));
  if (s.active > 1 && waiting > kContended) return {s.active - 1, 0};
  if (s.active >= cap) return {s.active, 0};
  if (cores - others - s.active < 1) return {s.active, 0};
  if (s.free_streak + 1 < kFreeWindows) return {s.active, s.free_streak + 1};
  return {s.active + 1, 0};
}

void sync_cpu_threads() {
  const int cap = cap_now();
  if (cap > 1 && g_governor.load(std::memory_order_relaxed)) maybe_govern(cap);
  const int active = g_active.load(std::memory_order_relaxed);
  if (t_applied != active) {
    omp_set_num_threads(active);
    // OpenBLAS's count is one for the process; it changes with the governor.
    if (openblas_get_num_threads() != active) openblas_set_num_threads(active);
    t_applied = active;
  }
}

int openmp_threads_of_this_thread() { return omp_get_max_threads(); }

}  // namespace detail

void set_num_threads(int n) {
  HG_CHECK(n >= 1, "set_num_threads: the thread count must be >= 1, got ", n);
  g_cap.store(n);
  g_active.store(n);
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
  t_applied = n;
  if (g_flush.load()) apply_flush(true);  // threads the pool may have added
}

int get_num_threads() { return cap_now(); }

void set_thread_governor(bool on) {
  g_governor.store(on);
  if (!on) g_active.store(cap_now());
}

bool thread_governor() { return g_governor.load(); }

int active_num_threads() {
  cap_now();
  return g_active.load();
}

bool set_flush_denormal(bool on) {
#if defined(HG_HAVE_MXCSR)
  g_flush.store(on);
  apply_flush(on);
  return true;
#else
  return !on;
#endif
}

bool flush_denormal() { return g_flush.load(); }

}  // namespace hg
