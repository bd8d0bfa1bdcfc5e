// cuda-emu stand-in for CUDA's <mma.h>: the warp matrix API nvcuda::wmma for
// the shape halfgrad's kernels use, m16n16k16 with half or __nv_bfloat16
// inputs (matrix_a/matrix_b, row_major or col_major) and float accumulators.
// The gpu build includes the real header (this directory is on the include
// path of the emu configuration only, see cmake/cuda_mode.cmake).
//
// Note [Emulated WMMA fragments]
// CUDA leaves the element-to-lane mapping of a fragment unspecified, so a
// kernel may only (1) load, store, fill and mma whole fragments, (2) apply
// the same element-wise operation to every x[i] of every lane. The emulator
// chooses this mapping, with lane = linear thread id % 32, h = lane / 16,
// c = lane % 16, and i in [0, 8):
//   accumulator  x[i]          = C[h + 2i][c]            8 elements
//   matrix_a     x[16 i + k]   = A[h + 2i][k]            128 elements (the rows of A its C rows need)
//   matrix_b     x[k]          = B[k][c]                 16 elements (the column of B its C column needs)
// so each lane computes its 8 outputs of D = A B + C alone (16 fp32 FMAs each,
// in k order) without talking to other lanes, and a warp does 16*16*16 FMAs
// per mma_sync, no redundant work. A kernel that reads a stored tile before
// the other lanes stored their part (a missing __syncwarp/__syncthreads) sees
// the poisoned shared memory of Note [Emulated shared memory] (NaN), because a
// fiber runs until it reaches a synchronising call. Every load/store/mma is a
// warp-collective operation: it starts with a rendezvous of the whole warp
// (__syncwarp), so calling one from divergent code is reported as it is
// undefined in CUDA.
#pragma once

#include <cstddef>
#include <type_traits>

#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "hg_emu_device.h"

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

namespace detail {
inline unsigned lane_id() { return ::hg::emu::detail::g_thread->linear_id % 32u; }
inline void warp_rendezvous(const std::source_location& where) { __syncwarp(0xffffffffu, where); }
inline float to_float(float v) { return v; }
inline float to_float(__half v) { return __half2float(v); }
inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T>
T from_float(float v);
template <>
inline float from_float<float>(float v) {
  return v;
}
template <>
inline __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <typename Use>
constexpr int elements_per_lane() {
  if constexpr (std::is_same_v<Use, matrix_a>) {
    return 128;
  } else if constexpr (std::is_same_v<Use, matrix_b>) {
    return 16;
  } else {
    return 8;
  }
}
}  // namespace detail

template <typename Use, int m, int n, int k, typename T, typename Layout = void>
class fragment {
  static_assert(m == 16 && n == 16 && k == 16, "cuda-emu wmma: only the m16n16k16 shape is emulated");
  static_assert(std::is_same_v<Use, accumulator> ? std::is_same_v<T, float>
                                                 : (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>),
                "cuda-emu wmma: matrix_a/matrix_b hold half or __nv_bfloat16, accumulators float");
  static_assert(std::is_same_v<Use, accumulator> == std::is_same_v<Layout, void>,
                "cuda-emu wmma: matrix_a/matrix_b need row_major or col_major; accumulators take no layout");

 public:
  using element_type = T;
  using storage_element_type = T;
  static constexpr int num_elements = detail::elements_per_lane<Use>();
  T x[num_elements];
};

template <typename Use, int m, int n, int k, typename T, typename Layout>
void fill_fragment(fragment<Use, m, n, k, T, Layout>& a, const T& v) {
  for (int i = 0; i < a.num_elements; ++i) a.x[i] = v;
}

// matrix_a / matrix_b: the layout is the fragment's; ldm in elements.
template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& a, const T* p, unsigned ldm,
                      const std::source_location& where = std::source_location::current()) {
  detail::warp_rendezvous(where);
  const unsigned lane = detail::lane_id(), h = lane / 16, c = lane % 16;
  constexpr bool kRow = std::is_same_v<Layout, row_major>;
  if constexpr (std::is_same_v<Use, matrix_a>) {
    for (unsigned i = 0; i < 8; ++i) {
      const unsigned r = h + 2 * i;
      for (unsigned kk = 0; kk < 16; ++kk) a.x[16 * i + kk] = kRow ? p[r * ldm + kk] : p[kk * ldm + r];
    }
  } else {
    static_assert(std::is_same_v<Use, matrix_b>, "load_matrix_sync without a layout is for accumulators");
    for (unsigned kk = 0; kk < 16; ++kk) a.x[kk] = kRow ? p[kk * ldm + c] : p[c * ldm + kk];
  }
}

template <typename T>
void load_matrix_sync(fragment<accumulator, 16, 16, 16, T, void>& a, const T* p, unsigned ldm, layout_t layout,
                      const std::source_location& where = std::source_location::current()) {
  detail::warp_rendezvous(where);
  const unsigned lane = detail::lane_id(), h = lane / 16, c = lane % 16;
  for (unsigned i = 0; i < 8; ++i) {
    const unsigned r = h + 2 * i;
    a.x[i] = layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
  }
}

template <typename T>
void store_matrix_sync(T* p, const fragment<accumulator, 16, 16, 16, T, void>& a, unsigned ldm, layout_t layout,
                       const std::source_location& where = std::source_location::current()) {
  detail::warp_rendezvous(where);
  const unsigned lane = detail::lane_id(), h = lane / 16, c = lane % 16;
  for (unsigned i = 0; i < 8; ++i) {
    const unsigned r = h + 2 * i;
    (layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = a.x[i];
  }
}

// d = a b + c, products and sums in fp32 (k in order), as the tensor cores
// accumulate into an fp32 fragment.
template <typename T, typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float, void>& d, const fragment<matrix_a, 16, 16, 16, T, LayoutA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LayoutB>& b,
              const fragment<accumulator, 16, 16, 16, float, void>& c,
              const std::source_location& where = std::source_location::current()) {
  detail::warp_rendezvous(where);
  float bcol[16];
  for (int kk = 0; kk < 16; ++kk) bcol[kk] = detail::to_float(b.x[kk]);
  for (int i = 0; i < 8; ++i) {
    float acc = c.x[i];
    for (int kk = 0; kk < 16; ++kk) acc += detail::to_float(a.x[16 * i + kk]) * bcol[kk];
    d.x[i] = acc;
  }
}

}  // namespace nvcuda::wmma
