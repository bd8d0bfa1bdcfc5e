// Random fills from the Philox generator: uniform, normal, bernoulli.
//
// Note [Random element mapping]
// A fill draws one generator offset; element i (row-major over the logical
// shape) takes lane i % 4 of Philox block i / 4 (core/philox.h). The value of
// an element is a pure function of (seed, offset, i) computed with correctly
// rounded float operations only (random_values_of_block below), so the CPU and
// CUDA kernels produce bit-identical tensors for the same seed, and uniform_
// of a fresh f32 tensor equals hg::rand with the same generator state.
#pragma once

#include <cstdint>

#include "core/macros.h"
#include "core/philox.h"
#include "core/tensor.h"

namespace hg {

class Generator;

enum class RandomKind : uint8_t { kUniform, kNormal, kBernoulli };

struct RandomParams {
  RandomKind kind = RandomKind::kUniform;
  uint64_t seed = 0;
  uint64_t offset = 0;
  float a = 0.0f;  // uniform: low;  normal: mean;  bernoulli: p
  float b = 1.0f;  // uniform: high; normal: std
};

// The four values of Philox block `block` under `p`, as floats.
HG_HOST_DEVICE inline void random_values_of_block(const RandomParams& p, uint64_t block,
                                                  float (&out)[4]) {
  const Philox4x32Out r = philox_block(p.seed, p.offset, block);
  switch (p.kind) {
    case RandomKind::kUniform: {
      const float width = detail::add_rn(p.b, -p.a);
      for (int j = 0; j < 4; ++j) out[j] = detail::fma_rn(uniform_from_bits(r.x[j]), width, p.a);
      break;
    }
    case RandomKind::kNormal: {
      float z[4];
      normal_pair_from_bits(r.x[0], r.x[1], &z[0], &z[1]);
      normal_pair_from_bits(r.x[2], r.x[3], &z[2], &z[3]);
      for (int j = 0; j < 4; ++j) out[j] = detail::fma_rn(z[j], p.b, p.a);
      break;
    }
    case RandomKind::kBernoulli:
      for (int j = 0; j < 4; ++j) out[j] = uniform_from_bits(r.x[j]) < p.a ? 1.0f : 0.0f;
      break;
  }
}

namespace ops {
// In place; each call consumes one offset of `generator` (default generator
// when null). Floating tensors (and bool for bernoulli_); values are computed
// in float and rounded once to the tensor's dtype.
void uniform_(const Tensor& t, double low = 0.0, double high = 1.0, Generator* generator = nullptr);
void normal_(const Tensor& t, double mean = 0.0, double std = 1.0, Generator* generator = nullptr);
void bernoulli_(const Tensor& t, double p, Generator* generator = nullptr);
}  // namespace ops

// Backend kernels: `out` is contiguous.
namespace cpu {
void random_fill(const Tensor& out, const RandomParams& params);
}
#if defined(HG_WITH_CUDA)
namespace cuda {
void random_fill(const Tensor& out, const RandomParams& params);
}
#endif

}  // namespace hg
