// The device-side error flag: how a CUDA kernel reports bad input (e.g. a
// cross-entropy target outside [0, C)) without a device assert, which would
// poison the CUDA context for the rest of the process.
//
//   // kernel: report and carry on (write NaN or skip; never trap)
//   if (t < 0 || t >= classes) report_device_error(error_slot, DeviceErrorCode::kTargetOutOfRange,
//                                                  OpId::cross_entropy, t, row, classes, ignore_index);
//   // launcher: DeviceError* error_slot = device_error_slot(stream);  // the launch's stream
//   // host, at a sync point (Tensor::item, a copy to the CPU, synchronize):
//   hg::cuda::check_device_errors();  // throws hg::Error naming the op, value and row
//
// Note [Device error flag]
// Each device has one DeviceError record in device memory, allocated on first
// use (cudaMalloc) and zeroed. A kernel that finds bad input claims the record
// with atomicCAS on `code` (0 -> its code); only the winner writes the details,
// so the first error reported wins and later ones are dropped until the record
// is read. A launcher fetches the record with device_error_slot(stream), which
// also notes `stream` as one that may raise. check_device_errors waits for
// every stream noted since the last check (whichever stream is current: a
// kernel on a side stream is seen even when the check runs on another one),
// copies the record back on one of them, clears it, and throws. With no stream
// noted since the last check it returns at once: no copy and no sync, so
// Tensor::item() and copies to the CPU pay for the flag only after a kernel
// that can report ran. The noted streams are kept alive until that check.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/cuda/runtime.h"
#include "kernels/op_list.h"

namespace hg::cuda {

enum class DeviceErrorCode : int {
  kNone = 0,
  kTargetOutOfRange = 1,  // value = target, index = row, limit = classes, aux = ignore_index
  kIndexOutOfRange = 2,   // value = index, index = its position, limit = size of the indexed dim
};

// Lives in device memory; one per device.
struct DeviceError {
  int code;        // DeviceErrorCode; 0 = no error. Claimed with atomicCAS.
  int op;          // OpId of the reporting kernel
  long long value;  // the offending value
  long long index;  // where it was found (row, element)
  long long limit;  // the bound it broke
  long long aux;    // code-specific detail (see DeviceErrorCode)
};

#if defined(__CUDACC__) || defined(HG_CUDA_EMU)  // device code; host-only .cpp files skip it
// Records an error unless one is already recorded (first error wins).
__device__ __forceinline__ void report_device_error(DeviceError* slot, DeviceErrorCode code, OpId op,
                                                   long long value, long long index, long long limit,
                                                   long long aux = 0) {
  if (atomicCAS(&slot->code, 0, static_cast<int>(code)) == 0) {
    slot->op = static_cast<int>(op);
    slot->value = value;
    slot->index = index;
    slot->limit = limit;
    slot->aux = aux;
  }
}
#endif

// The record of stream.device(), allocated and zeroed on first use, for a
// kernel about to be launched on `stream`; notes `stream` for the next
// check_device_errors of that device. Thread-safe.
DeviceError* device_error_slot(const Stream& stream);

// Waits for the streams noted on `device` (current when negative) since the
// last check and copies the record back; when a kernel reported an error,
// clears the record and throws hg::Error with its message, e.g.
// "cross_entropy: target 12 at row 3 is out of range [0, 10); targets must be
// class indices or ignore_index (-100)". No-op (no copy, no sync) when no
// stream was noted since the last check.
void check_device_errors(int device = -1);

// The number of streams check_device_errors(device) would wait for (tests).
int device_error_streams_pending(int device = -1);

}  // namespace hg::cuda
