// Limits and launch-shape constants shared by the CUDA kernels, the CUDA
// runtime layer and the emulator (runtime/emu): one definition each. Plain
// C++ (no CUDA headers), so host files and the emulator's own headers can
// include it.
#pragma once

namespace hg::cuda {

// Threads per warp: 32 on every NVIDIA GPU so far, and in the emulator.
inline constexpr int kWarpSize = 32;
// The most threads one block may have (sm_50 .. sm_90).
inline constexpr int kMaxThreadsPerBlock = 1024;
inline constexpr int kMaxWarpsPerBlock = kMaxThreadsPerBlock / kWarpSize;
// halfgrad's block size for 1-D kernels (element-wise, multi-tensor apply,
// reductions): 8 warps, enough to hide latency without limiting occupancy.
// Kernels launched with more than this declare __launch_bounds__.
inline constexpr int kBlockThreads = 256;
// Device slots of per-device tables (caching allocator, error flags), and the
// most devices the emulator can emulate.
inline constexpr int kMaxDevices = 64;

}  // namespace hg::cuda
