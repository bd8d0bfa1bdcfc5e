// Factories: empty, zeros, ones, full, arange, rand, randn, from_vector.
//
// Values are produced on the host and moved to the target device in one copy
// when the target is not the CPU (arange runs on the device when the backend
// registered a kernel) (the random fills use the counter-based
// Philox generator, so where the numbers are computed does not change them).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "core/convert.h"
#include "core/copy.h"
#include "core/generator.h"
#include "core/philox.h"
#include "core/tensor.h"

namespace hg {

Tensor empty(Shape shape, TensorOptions options) {
  // Checked before allocating (Note [Checked shape arithmetic]).
  const uint64_t nbytes = contiguous_nbytes(shape, options.dtype);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = make_storage(static_cast<size_t>(nbytes), options.device);
  impl->strides = contiguous_strides(shape);
  impl->sizes = std::move(shape);
  impl->dtype = options.dtype;
  Tensor t(std::move(impl));
  if (options.requires_grad) t.requires_grad_(true);
  return t;
}

Tensor full(Shape shape, double value, TensorOptions options) {
  Tensor t = empty(std::move(shape), options);
  fill(t, value);
  return t;
}

Tensor zeros(Shape shape, TensorOptions options) { return full(std::move(shape), 0.0, options); }
Tensor ones(Shape shape, TensorOptions options) { return full(std::move(shape), 1.0, options); }

Tensor empty_like(const Tensor& t) { return empty(t.sizes(), {.dtype = t.dtype(), .device = t.device()}); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), {.dtype = t.dtype(), .device = t.device()}); }

Tensor scalar_tensor(double value, TensorOptions options) { return full({}, value, options); }

namespace {

// Builds a host tensor of options.dtype from per-element values, then moves it.
template <typename Fn>
Tensor generate(Shape shape, TensorOptions options, Fn&& value_at) {
  const bool grad = options.requires_grad;
  options.requires_grad = false;
  Tensor host = empty(std::move(shape), {.dtype = options.dtype});
  dispatch_dtype(options.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(host.data_ptr());
    const int64_t n = host.numel();
    for (int64_t i = 0; i < n; ++i) out[i] = convert_value<T>(value_at(i));
  });
  Tensor t = host.to(options.device);
  if (grad) t.requires_grad_(true);
  return t;
}

// Note [Random fills by block]
// Element i of rand/randn is a function of (seed, offset, i) alone
// (core/philox.h), and one Philox block of 10 rounds gives four elements'
// bits (randn: two Box-Muller pairs). So the fill computes each block once
// for its four elements, instead of once per element, and runs the blocks
// in parallel (OpenMP, static) above kRandomGrain blocks: every element is
// the same bits as philox_*_at(seed, offset, i), for any thread count. On
// x86-64 the block function is cloned for x86-64-v3 (GCC target_clones), where
// Box-Muller's std::fma is one instruction instead of a call into libm
// (the same correctly rounded result). 16-bit and f64 tensors take the f32
// values and round them as before (through double, exact for a float).
constexpr int64_t kRandomGrain = int64_t{1} << 14;  // blocks (4 values each)

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define HG_RANDOM_CLONES __attribute__((target_clones("arch=x86-64-v3", "default"), flatten))
#else
#define HG_RANDOM_CLONES __attribute__((flatten))
#endif

// The values of blocks [b0, b1) of the fill into out (n values in all).
HG_RANDOM_CLONES void random_blocks(float* out, int64_t n, int64_t b0, int64_t b1, uint64_t seed, uint64_t offset,
                                    bool normal) {
  for (int64_t b = b0; b < b1; ++b) {
    const Philox4x32Out block = philox_block(seed, offset, static_cast<uint64_t>(b));
    float v[4];
    if (normal) {
      normal_pair_from_bits(block.x[0], block.x[1], &v[0], &v[1]);
      normal_pair_from_bits(block.x[2], block.x[3], &v[2], &v[3]);
    } else {
      for (int j = 0; j < 4; ++j) v[j] = uniform_from_bits(block.x[j]);
    }
    const int64_t i0 = b * 4;
    for (int64_t j = 0; j < 4 && i0 + j < n; ++j) out[i0 + j] = v[j];
  }
}

// rand (normal false) or randn of shape: values on the host, then moved.
Tensor random_fill(Shape shape, TensorOptions options, Generator* generator, bool normal) {
  Generator& gen = generator != nullptr ? *generator : default_generator();
  const uint64_t seed = gen.seed();
  const uint64_t offset = gen.next_offset();
  Tensor f32 = empty(std::move(shape), {.dtype = kF32});
  float* out = f32.data<float>();
  const int64_t n = f32.numel(), blocks = (n + 3) / 4;
  if (blocks >= kRandomGrain) {
#pragma omp parallel
    {
      // One contiguous run of blocks per thread.
      const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t per = (blocks + threads - 1) / threads;
      random_blocks(out, n, std::min(blocks, t * per), std::min(blocks, (t + 1) * per), seed, offset, normal);
    }
  } else {
    random_blocks(out, n, 0, blocks, seed, offset, normal);
  }
  // Other dtypes: the f32 values rounded through generate, as before.
  if (options.dtype != kF32) {
    return generate(f32.sizes(), options, [&](int64_t i) { return static_cast<double>(out[i]); });
  }
  Tensor t = f32.to(options.device);
  if (options.requires_grad) t.requires_grad_(true);
  return t;
}

}  // namespace

Tensor arange(double end, TensorOptions options) { return arange(0.0, end, 1.0, options); }

Tensor arange(double start, double end, double step, TensorOptions options) {
  HG_CHECK(std::isfinite(start) && std::isfinite(end) && std::isfinite(step),
           "arange: start, end and step must be finite, got ", start, ", ", end, ", ", step);
  HG_CHECK(step != 0.0, "arange: step must be non-zero");
  HG_CHECK((end - start) / step >= 0.0, "arange: step ", step, " moves away from end (start ",
           start, ", end ", end, "); flip the sign of step");
  const double count = std::ceil((end - start) / step);
  HG_CHECK(count < 9.0e18, "arange: ", count, " elements is too many");
  // On the target device when its backend registered a kernel (Note [Copy kernels]).
  if (ArangeKernel kernel = arange_kernel(options.device.type)) {
    const bool grad = options.requires_grad;
    options.requires_grad = false;
    Tensor t = empty({static_cast<int64_t>(count)}, options);
    if (t.numel() > 0) kernel(t, start, step);
    if (grad) t.requires_grad_(true);
    return t;
  }
  return generate({static_cast<int64_t>(count)}, options,
                  [&](int64_t i) { return start + static_cast<double>(i) * step; });
}

Tensor rand(Shape shape, TensorOptions options, Generator* generator) {
  HG_CHECK(is_floating(options.dtype), "rand needs a floating dtype, got ",
           dtype_name(options.dtype));
  return random_fill(std::move(shape), options, generator, false);
}

Tensor randn(Shape shape, TensorOptions options, Generator* generator) {
  HG_CHECK(is_floating(options.dtype), "randn needs a floating dtype, got ",
           dtype_name(options.dtype));
  return random_fill(std::move(shape), options, generator, true);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, Shape shape, TensorOptions options) {
  const int64_t n = numel_of(shape);
  HG_CHECK(n == static_cast<int64_t>(values.size()), "from_vector: ", values.size(),
           " values do not fill shape ", shape_to_string(shape), " (", n,
           " elements); pass a shape whose sizes multiply to the number of values");
  return generate(std::move(shape), options, [&](int64_t i) { return values[static_cast<size_t>(i)]; });
}

#define HG_INSTANTIATE_FROM_VECTOR(name, type, str, fp) \
  template Tensor from_vector<type>(const std::vector<type>&, Shape, TensorOptions);
HG_FORALL_DTYPES(HG_INSTANTIATE_FROM_VECTOR)
#undef HG_INSTANTIATE_FROM_VECTOR

}  // namespace hg
