// One thread policy for the whole process, and the denormal mode of the CPU
// kernels' threads (kernels/cpu/README.md, "CPU threads and denormals").
//
// halfgrad's CPU kernels parallelise with OpenMP, and the GEMM libraries are
// OpenBLAS's OpenMP build and oneDNN's (Debian's libdnnl, bf16 GEMM), which
// size their parallel regions from the same OpenMP setting: one pool, never
// more threads than asked for (oneDNN's primitives are cached per thread
// count, runtime/cpu/onednn.h). The count is
// HG_NUM_THREADS when set (read once, when the library loads), else OpenMP's
// default (OMP_NUM_THREADS, else the number of cores), and can be changed at
// run time, like torch.set_num_threads:
//
//   hg::set_num_threads(1);            // every later CPU kernel and GEMM
//   int n = hg::get_num_threads();
//
// Denormals: hg::set_flush_denormal(true) (or HG_FLUSH_DENORMAL=1) sets the
// x86 flush-to-zero and denormals-are-zero bits in the calling thread and in
// every thread of the pool, as torch.set_flush_denormal does. It is off by
// default, as in PyTorch: it changes results in the f32 subnormal range (which
// bf16 shares and f16 never reaches), and its speed-up on hg-train has not yet
// been measured on a quiet machine (docs/bench/history.md, "CPU backend notes").
//
// Contention (Note [The thread governor] in runtime/cpu/threads.cpp). The
// count is a cap: when other processes keep the cores busy, the kernels run
// on fewer threads, down to one, and return to the cap once cores are free
// again. libgomp's spinning teams otherwise lose whole scheduler slices to
// the other process (a 2-thread step 3x slower than 1 thread on a 2-core VM,
// docs/benchmarks.md, "The thread governor"). The governor
// is on by default; hg::set_thread_governor(false) or HG_THREAD_GOVERNOR=0
// keeps the team at the cap. halfgrad's own CPU kernels give the same bits on
// any team size; OpenBLAS's and oneDNN's kernels (convolutions, some GEMM
// shapes) may not, so a run that must repeat bit for bit on a busy machine
// turns the governor off.
#pragma once

#include <cstdint>

namespace hg {

// Threads for the CPU kernels and the BLAS; n >= 1, else hg::Error.
// get_num_threads() is that cap (what set_num_threads set), as in torch.
void set_num_threads(int n);
int get_num_threads();

// The governor (above). active_num_threads() is the team the next CPU kernel
// starts: get_num_threads() while the machine is quiet or the governor off.
void set_thread_governor(bool on);
bool thread_governor();
int active_num_threads();

namespace detail {
// Called where CPU work starts (each CPU backend call, HG_BACKEND_CALL, and
// the GEMM and CPU flash-attention calls that bypass it; a kernel called
// without it runs on the team the thread's last call set):
// samples contention at most every kGovernorWindowMs and sets the calling
// thread's OpenMP team size (an OpenMP setting is per thread).
void sync_cpu_threads();
// The calling thread's OpenMP team size setting (omp_get_max_threads()): what
// its parallel regions, OpenBLAS and oneDNN size their teams from.
int openmp_threads_of_this_thread();

inline constexpr int64_t kGovernorWindowMs = 50;

// One governor decision, a pure function (tested on its own). `waiting`: the
// process's threads' summed run-queue delay over the window, over the
// window's length (1.0 = one thread waited the whole window); `others`:
// runnable threads of other processes; `free_streak`: windows in a row that
// had a core free for one more thread (updated here).
struct GovernorState {
  int active;
  int free_streak;
};
GovernorState govern(GovernorState s, int cap, int cores, double waiting, int others);
}  // namespace detail

// Returns false (and changes nothing) where the CPU has no such mode.
bool set_flush_denormal(bool on);
bool flush_denormal();

}  // namespace hg
