// Shape arithmetic, checked: the one place that multiplies and adds sizes,
// strides and offsets.
//
// Note [Checked shape arithmetic]
// Sizes, strides and offsets are int64 element counts that come from users
// and from files (safetensors, IDX, .npy headers). A product such as
// (size - 1) * stride or a running numel can overflow int64 — undefined
// behaviour in C++, and in practice a wrapped bound check that lets a view
// reach outside its storage. Every such computation in core/ (views,
// factories) and in the readers goes through the helpers below, which use
// __builtin_mul_overflow / __builtin_add_overflow and throw hg::Error naming
// the operation and the shape on overflow. Tensor::make_view re-checks the
// invariant every view must keep: sizes >= 0, numel fits int64, and (when the
// view has elements) offset + sum((size - 1) * stride) < the storage's
// element count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace hg {

using Shape = std::vector<int64_t>;

std::string shape_to_string(const Shape& shape);

// a * b and a + b, or hg::Error "<op>: <what> overflows 64 bits".
int64_t checked_mul(int64_t a, int64_t b, const char* op, const char* what);
int64_t checked_add(int64_t a, int64_t b, const char* op, const char* what);

// The number of elements; every size must be >= 0 and the product fit int64.
int64_t numel_of(const Shape& shape);
// numel x dtype size in bytes, checked to fit both int64 and size_t.
uint64_t nbytes_of(const Shape& shape, DType dtype);
// Row-major strides. A shape whose sizes (with 0 counted as 1) multiply past
// int64 — [0, 2^62, 4] — has no representable strides: hg::Error.
Shape contiguous_strides(const Shape& shape);
// What a contiguous tensor of `shape` and `dtype` needs: checks everything
// empty() checks (sizes >= 0, numel, bytes, strides all fit) and returns the
// byte count. The readers call it on a file's shape before allocating.
uint64_t contiguous_nbytes(const Shape& shape, DType dtype);
// The element index one past the last one a view reaches (offset + sum of
// (size - 1) * stride, + 1), or `offset` for a view without elements. Strides
// must be >= 0. hg::Error on overflow, naming `op`.
int64_t view_extent(const Shape& sizes, const Shape& strides, int64_t offset, const char* op);

}  // namespace hg
