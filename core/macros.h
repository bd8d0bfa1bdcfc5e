// Portability macros shared by host code, nvcc device code and the cuda-emu build.
#pragma once

// HG_HOST_DEVICE marks functions usable from both host and device code.
// Under nvcc it expands to __host__ __device__; in the cpu and emu builds it is
// empty (the emulator runs "device" code as ordinary C++).
#if defined(__CUDACC__)
#define HG_HOST_DEVICE __host__ __device__
#else
#define HG_HOST_DEVICE
#endif

#if defined(__CUDA_ARCH__)
#define HG_ON_DEVICE 1
#else
#define HG_ON_DEVICE 0
#endif

#define HG_STRINGIFY_IMPL(x) #x
#define HG_STRINGIFY(x) HG_STRINGIFY_IMPL(x)
