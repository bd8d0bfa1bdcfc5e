// NumPy .npy files: read and write single arrays, for user data and for
// exchanging tensors with Python (np.load / np.save).
//
// Format (https://numpy.org/neps/nep-0001-npy-format.html):
//   "\x93NUMPY" major minor   magic + version (1.0: u16 header length,
//                             2.0/3.0: u32 header length, little-endian)
//   header                    a Python dict literal, e.g.
//                             {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
//                             padded with spaces and a '\n'
//   data                      the raw elements, C order
//
// dtypes: '<f4' f32, '<f2' f16, '<f8' f64, '<i8' i64, '<i4' i32, '|u1' u8,
// '|b1' bool. bf16 has no NumPy dtype: write_npy refuses it (convert with
// .to(hg::kF32), which is exact). Big-endian files and fortran_order True are
// rejected with the fix to apply in NumPy.
//
// Reading validates strictly: magic, version, header length (<= 64 KiB and
// inside the file), the dict's syntax and keys (exactly descr, fortran_order,
// shape), shape entries (non-negative, no overflow), and
// shape x itemsize == the bytes after the header, checked before allocating.
// Bool payload bytes must be 0 or 1.
//
// Writing is atomic: the bytes go to a temp file in the same folder, are
// fsync'ed, and the temp file is renamed over `path` (then the folder is
// fsync'ed), so a crash leaves either the old file or the new one.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace hg::data {

inline constexpr uint32_t kNpyMaxHeaderBytes = 64 * 1024;

// Writes `t` (any device; copied to the host) as a version 1.0 .npy file.
void write_npy(const std::string& path, const Tensor& t);

// Reads a .npy file into a contiguous CPU tensor.
Tensor read_npy(const std::string& path);

}  // namespace hg::data
