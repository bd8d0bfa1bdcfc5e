// One thread policy for the whole process, and the denormal mode of the CPU
// kernels' threads (docs/kernels.md, "CPU threads and denormals").
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
// been measured on a quiet machine (docs/benchmarks.md, "CPU backend notes").
#pragma once

namespace hg {

// Threads for the CPU kernels and the BLAS; n >= 1, else hg::Error.
void set_num_threads(int n);
int get_num_threads();

// Returns false (and changes nothing) where the CPU has no such mode.
bool set_flush_denormal(bool on);
bool flush_denormal();

}  // namespace hg
