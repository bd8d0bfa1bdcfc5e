// Gathers, scatters and shape ops (floor 1): embedding, index_select and its
// deterministic backward index_add, gather, scatter_add, cat, stack,
// masked_fill, tril/triu. arange on a device is core's hg::arange, whose CUDA
// kernel lives with these (kernels/index/index.cu).
//
//   Tensor e = hg::ops::embedding(weight /*[V, C]*/, tokens /*[B, T] i64*/);   // [B, T, C]
//   Tensor d_w = hg::ops::embedding_backward(d_e, tokens, V, /*padding_idx=*/std::nullopt);
//   Tensor rows = hg::ops::index_select(x, 0, idx);                           // x[idx]
//   Tensor picked = hg::ops::gather(logp, 1, targets.unsqueeze(1));           // torch.gather
//   Tensor all = hg::ops::cat({a, b, c}, /*dim=*/1);
//
// Formulas, with x viewed as [outer, n, inner] around `dim`:
//   index_select  out[o, k, i] = x[o, index[k], i]                       index [K]
//   index_add     out = x;  out[o, index[k], i] += src[o, k, i]           src [outer, K, inner]
//   embedding     out[..., c] = weight[indices[...], c]  (index_select on dim 0)
//   embedding_backward  d_weight = index_add(zeros[V, C], 0, indices, d_out), rows
//                 at padding_idx left zero (as torch)
//   gather        out[p] = x[p with p[dim] replaced by index[p]]          out, index: one shape
//   scatter_add   out = x;  out[p with p[dim] replaced by index[p]] += src[p]  for p in index's shape
//   cat           the inputs one after another along dim; stack: cat of unsqueeze(dim)
//   masked_fill   out = mask ? value : x  (mask bool, broadcast to x)
//   tril / triu   out[..., r, c] = x[..., r, c] if c - r <= k (tril) / >= k (triu), else 0
//
// Indices are i64 or i32 (converted to i64 for the kernels); an index outside
// [0, n) is an hg::Error: the CPU backend throws at once naming the value, its
// position and the indexed shape; a CUDA kernel records it in the device
// error flag (kernels/cuda/device_error.h), reported at the next sync point
// (Tensor::item, a copy to the CPU, synchronize), and writes zero (gather,
// index_select) or skips the element (index_add, scatter_add) until then.
//
// Determinism: index_add (and so the embedding and index_select backward)
// sums each output element's contributions in increasing k, in acc_t (float
// for 16-bit, one rounding on store), on both backends: the CUDA backend sorts
// the (index, k) pairs with a stable radix sort and sums each run of equal
// indices (no float atomics), so results are bit-identical from run to run.
// scatter_add runs each line (all coordinates but dim) serially in index order,
// adding in the output dtype (like torch); also deterministic.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "core/macros.h"
#include "core/tensor.h"
#include "kernels/op_list.h"

namespace hg::ops {

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out = x with src[o, k, i] added at out[o, index[k], i]; index [K], src shaped
// like x except size K at dim. Entries whose index equals skip_index add nothing.
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                 std::optional<int64_t> skip_index = std::nullopt);

// weight [V, C], indices any shape (i64/i32) -> indices.shape + [C].
Tensor embedding(const Tensor& weight, const Tensor& indices);
// d_out indices.shape + [C] -> d_weight [num_weights, C] in d_out's dtype.
Tensor embedding_backward(const Tensor& d_out, const Tensor& indices, int64_t num_weights,
                          std::optional<int64_t> padding_idx = std::nullopt);

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

// Output dtype: the promotion of every input's dtype (like torch.cat).
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);

}  // namespace hg::ops

namespace hg {

// Strides and sizes of up to three tensors iterated over one shape, passed by
// value to the gather/scatter kernels (host and device).
inline constexpr int kIndexMaxDims = 8;
struct IndexGeometry {
  int rank = 0;
  int dim = 0;                             // the indexed dim
  int64_t sizes[kIndexMaxDims] = {};       // the iteration shape
  int64_t strides[3][kIndexMaxDims] = {};  // elements; per tensor (see each kernel)
};

// Coordinates of the linear index i over g.sizes (row-major).
HG_HOST_DEVICE inline void coords_of(const IndexGeometry& g, int64_t i, int64_t (&c)[kIndexMaxDims]) {
  for (int d = g.rank - 1; d >= 0; --d) {
    c[d] = i % g.sizes[d];
    i /= g.sizes[d];
  }
}

// Where scatter_add's line l starts in out, src and index (strides[0], [1],
// [2]): the lines run along g.dim, and l numbers the other dims' coordinates
// in row-major order.
struct ScatterLine {
  int64_t out = 0, src = 0, index = 0;
};
HG_HOST_DEVICE inline ScatterLine scatter_line(const IndexGeometry& g, int64_t l) {
  ScatterLine at;
  for (int d = g.rank - 1; d >= 0; --d) {
    if (d == g.dim) continue;  // the line starts at coordinate 0 of g.dim
    const int64_t c = l % g.sizes[d];
    l /= g.sizes[d];
    at.out += c * g.strides[0][d];
    at.src += c * g.strides[1][d];
    at.index += c * g.strides[2][d];
  }
  return at;
}

// "No index is skipped" for index_add's skip_index.
inline constexpr int64_t kNoSkipIndex = std::numeric_limits<int64_t>::min();

}  // namespace hg

// The backend kernels (hg::cpu:: in kernels/index/index_cpu.cpp, hg::cuda:: in
// kernels/index/index.cu). Preconditions, established by kernels/index/index_ops.cpp:
// one device; index tensors contiguous i64; `op` names the user-facing op in
// error messages.
//   index_select: x contiguous [outer, n, inner], out contiguous [outer, K, inner], index [K]
//   index_add:    out contiguous [outer, n, inner] holding x, src contiguous [outer, K, inner]
//                 of out's dtype, index [K]
//   gather:       out and index contiguous of one shape, x contiguous; geometry: sizes =
//                 index's, strides[0] = x's
//   scatter_add:  out contiguous holding x, index contiguous, src strided of out's dtype;
//                 geometry: sizes = index's, strides[0] = out's, [1] = src's, [2] = index's
//   trilu:        out and x contiguous, rank >= 2, one dtype
//   arange:       out contiguous rank 1
// clang-format off
#define HG_DECLARE_INDEX_KERNELS                                                                         \
  void index_select(OpId op, const Tensor& out, const Tensor& x, const Tensor& index);                    \
  void index_add(OpId op, const Tensor& out, const Tensor& index, const Tensor& src, int64_t skip_index); \
  void gather(const Tensor& out, const Tensor& x, const Tensor& index, const IndexGeometry& geometry);    \
  void scatter_add(const Tensor& out, const Tensor& index, const Tensor& src, const IndexGeometry& geometry); \
  void trilu(const Tensor& out, const Tensor& x, int64_t diagonal, bool upper);                          \
  void arange(const Tensor& out, double start, double step);
// clang-format on

namespace hg::detail {
// The buffer preconditions of the index backends that guard memory, checked
// by both backends with HG_CHECK (always on).
inline void check_index_select_buffers(const Tensor& out, const Tensor& x, const Tensor& index) {
  HG_CHECK(x.dim() == 3 && out.dim() == 3 && x.is_contiguous() && out.is_contiguous() && index.dim() == 1 &&
               index.is_contiguous() && index.dtype() == kI64 && out.size(0) == x.size(0) && out.size(2) == x.size(2) &&
               out.size(1) == index.size(0) && out.dtype() == x.dtype(),
           "index backend: wants contiguous x [outer, n, inner], out [outer, K, inner] and i64 index [K], got x ",
           x.shape_str(), ", out ", out.shape_str(), ", index ", index.dtype(), " ", index.shape_str());
}
inline void check_geometry(const IndexGeometry& g, const Tensor& index) {
  HG_CHECK(g.rank >= 1 && g.rank <= kIndexMaxDims && g.dim >= 0 && g.dim < g.rank && index.dim() == g.rank &&
               index.is_contiguous() && index.dtype() == kI64,
           "index backend: bad geometry (rank ", g.rank, ", dim ", g.dim, ") for index ", index.shape_str());
  for (int d = 0; d < g.rank; ++d) {
    HG_CHECK(g.sizes[d] == index.size(d), "index backend: geometry sizes differ from index ", index.shape_str());
  }
}
}  // namespace hg::detail

namespace hg::cpu {
HG_DECLARE_INDEX_KERNELS
}  // namespace hg::cpu

#if defined(HG_WITH_CUDA)
namespace hg::cuda {
HG_DECLARE_INDEX_KERNELS
}  // namespace hg::cuda
#endif
