// DLPack: handing a tensor to another library (PyTorch, NumPy, CuPy, JAX, ...)
// or taking one from it without copying the data (docs/interop.md).
//
//   DLManagedTensor* m = hg::to_dlpack(x);   // a view of x's memory; x may go away
//   hg::Tensor y = hg::from_dlpack(m);       // the same memory again (y.data_ptr() == x.data_ptr())
//
// Ownership (the DLPack contract). to_dlpack returns a DLManagedTensor that
// keeps the tensor's storage alive until its deleter is called; whoever
// consumes it calls the deleter exactly once, when done. from_dlpack consumes:
// the returned tensor (and every view of it) calls the producer's deleter when
// the last one goes away; if from_dlpack throws, it has called the deleter
// already, so the caller never calls it after passing the pointer in.
//
// Layout. shape and strides are in elements, as DLPack's; to_dlpack always
// fills strides (a view keeps them: transposes, slices, expands with stride
// 0) and points `data` at the first element (byte_offset 0, as PyTorch, NumPy
// and CuPy do); from_dlpack honours byte_offset and takes a null strides as
// row-major. Negative strides (NumPy's a[::-1]) are refused: halfgrad's views
// have none.
//
// Dtypes: f32, f64, f16 (kDLFloat), bf16 (kDLBfloat), i64, i32 (kDLInt), u8
// (kDLUInt), bool (kDLBool, code 6, one byte); anything else (int8, complex,
// vector lanes, ...) throws hg::Error naming it.
//
// Devices: kDLCPU (and kDLCUDAHost, pinned host memory, imported as CPU) and
// kDLCUDA with its device index; the cuda-emu build exchanges kDLCUDA tensors
// too. Stream contract for CUDA (DLPack's __dlpack__(stream=...)): the
// producer makes the data ready on the consumer's stream. to_dlpack takes
// that stream in DLPackOptions::stream (nullopt or 1: the legacy default
// stream, 2: the per-thread default stream, -1: no synchronisation, any other
// value: a cudaStream_t as an integer; 0 is refused, as the spec says) and,
// when it is not the stream halfgrad is working on, records an event on
// halfgrad's current stream and makes the consumer's stream wait for it (no
// host wait). As a consumer, from_dlpack assumes the producer did the same
// for the stream dlpack_stream(device) names: pass that value to the
// producer's __dlpack__.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <optional>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

// DLPack 1.x's versioned struct when the installed header predates it
// (Debian bookworm's libdlpack-dev is 0.6): the same ABI as dlpack.h 1.0/1.1
// declares, so code written against a newer header reads it unchanged.
#ifndef DLPACK_MAJOR_VERSION
extern "C" {
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;
}
#endif
#ifndef DLPACK_FLAG_BITMASK_READ_ONLY
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#endif
#ifndef DLPACK_FLAG_BITMASK_IS_COPIED
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#endif

namespace hg {

// kDLBool, DLPack's type code for one-byte booleans (dlpack.h 0.8 and later;
// absent from 0.6's enum).
inline constexpr uint8_t kDLPackBoolCode = 6;
// kDLFloat8_e4m3fn and kDLFloat8_e5m2, DLPack's codes for the two 8-bit float
// formats halfgrad has (dlpack.h 1.1 and later; absent from older enums).
inline constexpr uint8_t kDLPackFloat8E4M3FnCode = 10;
inline constexpr uint8_t kDLPackFloat8E5M2Code = 12;
// The DLManagedTensorVersioned ABI this code reads and writes: 1.0 (1.x
// changes no layout; a consumer refuses another major version).
inline constexpr uint32_t kDLPackMajorVersion = 1;
inline constexpr uint32_t kDLPackMinorVersion = 0;

struct DLPackOptions {
  // CUDA only: the consumer's stream, with the values of DLPack's
  // __dlpack__(stream=...) (see the top of this file). Must stay unset (or be
  // -1) for a CPU tensor.
  std::optional<int64_t> stream = std::nullopt;
  // Versioned export only: sets DLPACK_FLAG_BITMASK_READ_ONLY, a promise
  // that nobody writes through the exported tensor.
  bool read_only = false;
};

// Exports `t` without a copy (see the top of this file). Throws hg::Error for
// an undefined tensor, one that requires grad (export t.detach()), a stream
// value the device cannot take, or a stream the CUDA runtime refuses.
DLManagedTensor* to_dlpack(const Tensor& t, const DLPackOptions& options = {});
// The same as DLPack 1.x's DLManagedTensorVersioned (version 1.0, flags 0
// unless options.read_only).
DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& t, const DLPackOptions& options = {});

// Imports without a copy; always consumes `managed` (see the top of this
// file). Throws hg::Error for a null pointer, an unsupported dtype or
// device, a negative size or stride, a null or misaligned data pointer, and
// (versioned) a major version other than 1 or a read-only tensor (halfgrad
// tensors are writable: copy it on the producer's side first).
Tensor from_dlpack(DLManagedTensor* managed);
Tensor from_dlpack(DLManagedTensorVersioned* managed);

// The stream a consumer on `device` hands a producer's __dlpack__(stream=...)
// so that the data is ready for halfgrad's work: for CUDA the calling thread's
// current stream (1 for the legacy default stream); nullopt for the CPU.
std::optional<int64_t> dlpack_stream(Device device);

// The DLPack spellings of halfgrad's dtypes and devices, and back (both
// directions throw hg::Error for what has no counterpart).
DLDataType to_dlpack_dtype(DType dtype);
DType dtype_from_dlpack(DLDataType dtype);
DLDevice to_dlpack_device(Device device);
Device device_from_dlpack(DLDevice device);

}  // namespace hg
