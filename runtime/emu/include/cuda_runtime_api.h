// cuda-emu stand-in for CUDA's cuda_runtime_api.h: the host-side runtime API
// subset halfgrad uses, with the real signatures (and the real default
// arguments), implemented in runtime/emu/runtime*.cpp on the CPU:
//   - device memory is ordinary heap memory (exact size, 256-byte aligned,
//     filled with 0xFF so uninitialised reads are NaN), so AddressSanitizer
//     sees kernel out-of-bounds accesses;
//   - streams are synchronous: work runs when it is enqueued, so every stream
//     is always idle and events record the host clock;
//   - errors follow the real runtime: every failing call also sets the
//     thread's last error, read and cleared by cudaGetLastError.
// Device-side pieces (launches, cudaFuncSetAttribute) live in cuda_runtime.h.
#pragma once

#include <cstddef>

#include "driver_types.h"
#include "hg_emu_types.h"

// ---- errors -------------------------------------------------------------------
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char* cudaGetErrorName(cudaError_t error);
const char* cudaGetErrorString(cudaError_t error);

// ---- devices ------------------------------------------------------------------
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaDeviceGetStreamPriorityRange(int* leastPriority, int* greatestPriority);
cudaError_t cudaRuntimeGetVersion(int* runtimeVersion);
cudaError_t cudaDriverGetVersion(int* driverVersion);

// ---- memory -------------------------------------------------------------------
cudaError_t cudaMalloc(void** devPtr, size_t size);
cudaError_t cudaFree(void* devPtr);
cudaError_t cudaMallocHost(void** ptr, size_t size);
cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaMemGetInfo(size_t* free, size_t* total);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream = 0);
cudaError_t cudaMemset(void* devPtr, int value, size_t count);
cudaError_t cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream = 0);

// ---- streams ------------------------------------------------------------------
cudaError_t cudaStreamCreate(cudaStream_t* pStream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags);
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* pStream, unsigned int flags, int priority);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags = 0);
cudaError_t cudaStreamGetPriority(cudaStream_t hStream, int* priority);
cudaError_t cudaStreamGetFlags(cudaStream_t hStream, unsigned int* flags);

// ---- events -------------------------------------------------------------------
cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaEventDestroy(cudaEvent_t event);

namespace hg::emu {
// The device (0-based) that owns the device allocation containing `ptr`, or -1
// when `ptr` is not inside a live cudaMalloc allocation. Used by the launch
// helper and the library stand-ins to validate pointers.
int device_of_pointer(const void* ptr);
// True when [ptr, ptr + nbytes) lies inside one live device allocation.
bool is_device_range(const void* ptr, size_t nbytes);
// True for the default-stream handles (0, cudaStreamLegacy,
// cudaStreamPerThread) and for created streams not yet destroyed; a launch on
// anything else is cudaErrorInvalidResourceHandle on a real GPU.
bool is_valid_stream(cudaStream_t stream);
}  // namespace hg::emu
