// Checked shape arithmetic (see core/shape.h, Note [Checked shape arithmetic]).
#include "core/shape.h"

#include <cstdint>
#include <sstream>
#include <string>

#include "core/error.h"

namespace hg {

std::string shape_to_string(const Shape& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

int64_t checked_mul(int64_t a, int64_t b, const char* op, const char* what) {
  int64_t out = 0;
  HG_CHECK(!__builtin_mul_overflow(a, b, &out), op, ": ", what, " overflows 64 bits (", a, " x ", b,
           "); the sizes or strides are too large");
  return out;
}

int64_t checked_add(int64_t a, int64_t b, const char* op, const char* what) {
  int64_t out = 0;
  HG_CHECK(!__builtin_add_overflow(a, b, &out), op, ": ", what, " overflows 64 bits (", a, " + ", b,
           "); the sizes or strides are too large");
  return out;
}

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  bool zero = false;
  for (int64_t s : shape) {
    HG_CHECK(s >= 0, "negative size ", s, " in shape ", shape_to_string(shape), "; every size must be >= 0");
    if (s == 0) zero = true;
  }
  if (zero) return 0;  // [2^40, 2^40, 0] has no elements, however large the others
  for (int64_t s : shape) {
    HG_CHECK(!__builtin_mul_overflow(n, s, &n), "shape ", shape_to_string(shape),
             " has more than 2^63 elements");
  }
  return n;
}

uint64_t nbytes_of(const Shape& shape, DType dtype) {
  const int64_t n = numel_of(shape);
  int64_t bytes = 0;
  HG_CHECK(!__builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(dtype)), &bytes) &&
               static_cast<uint64_t>(bytes) <= SIZE_MAX,
           "shape ", shape_to_string(shape), " of ", dtype_name(dtype), " needs more than 2^63 bytes");
  return static_cast<uint64_t>(bytes);
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t running = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    HG_CHECK(shape[i] >= 0, "negative size ", shape[i], " in shape ", shape_to_string(shape),
             "; every size must be >= 0");
    strides[i] = running;
    HG_CHECK(!__builtin_mul_overflow(running, shape[i] > 0 ? shape[i] : 1, &running), "shape ",
             shape_to_string(shape),
             " has no row-major strides that fit 64 bits (its sizes, with 0 counted as 1, multiply past 2^63)");
  }
  return strides;
}

uint64_t contiguous_nbytes(const Shape& shape, DType dtype) {
  const uint64_t nbytes = nbytes_of(shape, dtype);
  contiguous_strides(shape);
  return nbytes;
}

int64_t view_extent(const Shape& sizes, const Shape& strides, int64_t offset, const char* op) {
  HG_CHECK(sizes.size() == strides.size(), op, ": ", sizes.size(), " sizes but ", strides.size(), " strides");
  HG_CHECK(offset >= 0, op, ": offset must be >= 0, got ", offset);
  for (int64_t stride : strides) {
    HG_CHECK(stride >= 0, op, ": negative strides are not supported, got ", shape_to_string(strides));
  }
  if (numel_of(sizes) == 0) return offset;
  int64_t last = offset;
  for (size_t i = 0; i < sizes.size(); ++i) {
    last = checked_add(last, checked_mul(sizes[i] - 1, strides[i], op, "(size - 1) x stride"), op,
                       "the last element's offset");
  }
  return checked_add(last, 1, op, "the view's extent");
}

}  // namespace hg
