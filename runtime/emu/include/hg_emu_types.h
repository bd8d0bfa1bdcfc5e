// Types shared by the emulator's device side (fibers, built-ins, launch) and its
// host runtime shim (memory, streams, events, library stand-ins). Values follow
// the real CUDA runtime so code that prints or compares them behaves the same.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/cuda/device_limits.h"

enum cudaError_t : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorAssert = 710,
  cudaErrorLaunchFailure = 719,
  cudaErrorNotSupported = 801,
  cudaErrorUnknown = 999,
};
typedef cudaError_t cudaError;

struct dim3 {
  unsigned int x = 1, y = 1, z = 1;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};

struct CUstream_st;
typedef CUstream_st* cudaStream_t;  // nullptr is the default (legacy) stream
struct CUevent_st;
typedef CUevent_st* cudaEvent_t;

namespace hg::emu {

// Limits of the emulated device: a Hopper-class GPU (sm_90). A launch that a
// real H100/H200 would refuse is refused here with the same error.
// Warp size, block size and device limits: one definition, shared with the
// kernels (runtime/cuda/device_limits.h).
using ::hg::cuda::kMaxDevices;
using ::hg::cuda::kMaxThreadsPerBlock;
using ::hg::cuda::kWarpSize;
inline constexpr unsigned kMaxBlockDimX = 1024, kMaxBlockDimY = 1024, kMaxBlockDimZ = 64;
inline constexpr unsigned kMaxGridDimX = 2147483647u, kMaxGridDimY = 65535, kMaxGridDimZ = 65535;
inline constexpr size_t kSharedMemPerBlock = 48 * 1024;        // default dynamic+static limit
inline constexpr size_t kSharedMemPerBlockOptin = 227 * 1024;  // after cudaFuncSetAttribute
inline constexpr int kComputeMajor = 9, kComputeMinor = 0;
inline constexpr int kMultiProcessorCount = 132;

// Sets the error that the next cudaGetLastError()/cudaPeekAtLastError() reports
// (sticky until read, like the real runtime's launch errors).
void set_last_error(cudaError_t error);

}  // namespace hg::emu
