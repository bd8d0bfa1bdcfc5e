// IDX reader: the file format of MNIST and Fashion-MNIST.
//
// Layout (big-endian throughout):
//   bytes 0-1  0x00 0x00
//   byte  2    element type: 0x08 u8 (the only one we read; 0x09 i8, 0x0B i16,
//              0x0C i32, 0x0D f32, 0x0E f64 are rejected with a clear error)
//   byte  3    number of dimensions (we accept 1..4)
//   then       one u32 per dimension, then the raw elements, row-major.
//
// Files may be gzip-compressed (`*.gz`, as distributed) or plain; the reader
// looks at the first two bytes (1f 8b: gzip), not at the name. A gzip file
// may hold several members (concatenated .gz files); any other bytes after
// the gzip stream are an error (zlib's gzread would silently ignore them).
//
// Validation: everything in the header is checked before any large
// allocation. The payload size implied by the dims must stay under
// `max_bytes` (1 GiB by default; MNIST's largest file is 47 MB), and the
// payload is read in chunks into a buffer that grows only as real bytes
// arrive, so a corrupt header claiming 2^40 elements in a 100-byte file fails
// with "truncated" after reading 100 bytes instead of allocating 1 TB. A
// payload shorter than the dims (truncated) or longer (trailing bytes), and a
// damaged gzip stream (bad CRC, cut-off stream, trailing garbage), and dims
// whose element count or strides overflow 64 bits (core/shape.h) are hg::Errors naming the
// file, what was expected and what was found.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace hg::data {

inline constexpr uint64_t kIdxMaxBytes = uint64_t{1} << 30;  // 1 GiB payload cap

// Reads an IDX file (gzip or plain). Returns a contiguous CPU u8 tensor whose
// shape is the file's dims, e.g. [60000, 28, 28] for train-images-idx3-ubyte.gz.
// Throws hg::Error for a missing/unreadable file or any format violation.
Tensor read_idx(const std::string& path, uint64_t max_bytes = kIdxMaxBytes);

}  // namespace hg::data
