// The process's CPU thread policy and denormal mode (runtime/cpu/threads.h).
#include "runtime/cpu/threads.h"

#include <cblas.h>
#include <omp.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

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

// Read once when the library loads.
const bool g_env_applied = [] {
  if (const int n = env_int("HG_NUM_THREADS", 0); n > 0) set_num_threads(n);
  if (env_int("HG_FLUSH_DENORMAL", 0) != 0) set_flush_denormal(true);
  return true;
}();

}  // namespace

void set_num_threads(int n) {
  HG_CHECK(n >= 1, "set_num_threads: the thread count must be >= 1, got ", n);
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
  if (g_flush.load()) apply_flush(true);  // threads the pool may have added
}

int get_num_threads() { return omp_get_max_threads(); }

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
