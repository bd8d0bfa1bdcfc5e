// CPU reference kernels for the gather/scatter ops (kernels/index/index.h): the
// numerical oracle for kernels/index/index.cu.
//
// index_select  rows of [outer, n, inner] copied, (outer, k) pairs in parallel
// index_add     the same order as the CUDA kernel: positions k stably sorted
//               by index, then each run of equal indices summed in increasing
//               k in acc_t (float for 16-bit) and added to out once, so every
//               output element is one rounding of a fixed-order sum
// gather        one loop over the index's elements
// scatter_add   each line (all coordinates but dim) serially in index order,
//               adding in the output dtype; lines in parallel (they are disjoint)
// trilu, arange elementwise
// An out-of-range index throws (the ops layer has already checked host
// indices with the user's shapes in the message).
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include "core/convert.h"
#include "core/copy.h"
#include "kernels/cpu/loops.h"
#include "kernels/index/index.h"

namespace hg::cpu {

namespace {

// The ops layer has checked every index with the user's shapes in the message
// (kernels/index/index_ops.cpp); this guards memory for direct backend callers.
[[noreturn]] void index_out_of_range(OpId op, int64_t value, int64_t position, int64_t size) {
  HG_FAIL(op_name(op), ": index ", value, " at position ", position, " is out of range [0, ", size,
          "); indices must be in [0, ", size, ")");
}

}  // namespace

void index_select(OpId op, const Tensor& out, const Tensor& x, const Tensor& index) {
  detail::check_index_select_buffers(out, x, index);
  const int64_t outer = x.size(0), n = x.size(1), inner = x.size(2), k_count = index.size(0);
  const int64_t* idx = static_cast<const int64_t*>(index.data_ptr());
  for (int64_t k = 0; k < k_count; ++k) {
    if (idx[k] < 0 || idx[k] >= n) index_out_of_range(op, idx[k], k, n);
  }
  const size_t row_bytes = static_cast<size_t>(inner) * x.element_size();
  const char* src = static_cast<const char*>(x.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  parallel_for(outer * k_count, outer * k_count * inner >= kParallelGrain, [&](int64_t ok) {
    const int64_t o = ok / k_count, k = ok % k_count;
    std::copy_n(src + static_cast<size_t>(o * n + idx[k]) * row_bytes, row_bytes,
                dst + static_cast<size_t>(o * k_count + k) * row_bytes);
  });
}

void index_add(OpId op, const Tensor& out, const Tensor& index, const Tensor& src, int64_t skip_index) {
  HG_CHECK(out.dim() == 3 && src.dim() == 3 && out.is_contiguous() && src.is_contiguous() && index.dim() == 1 &&
               index.is_contiguous() && index.dtype() == kI64 && src.size(0) == out.size(0) &&
               src.size(2) == out.size(2) && src.size(1) == index.size(0) && src.dtype() == out.dtype(),
           "cpu::index_add: wants contiguous out [outer, n, inner], src [outer, K, inner] and i64 index [K], got ",
           out.shape_str(), ", ", src.shape_str(), ", ", index.shape_str());
  const int64_t outer = out.size(0), n = out.size(1), inner = out.size(2), k_count = index.size(0);
  const int64_t* idx = static_cast<const int64_t*>(index.data_ptr());
  for (int64_t k = 0; k < k_count; ++k) {
    if (idx[k] < 0 || idx[k] >= n) index_out_of_range(op, idx[k], k, n);
  }
  // Positions in stable order of their index: each run of equal indices is
  // then summed in increasing k, as the CUDA kernel does after its radix sort.
  std::vector<int64_t> order(static_cast<size_t>(k_count));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return idx[a] < idx[b]; });
  std::vector<int64_t> run_starts;
  for (int64_t p = 0; p < k_count; ++p) {
    if (p == 0 || idx[order[p]] != idx[order[p - 1]]) run_starts.push_back(p);
  }
  run_starts.push_back(k_count);
  const int64_t runs = static_cast<int64_t>(run_starts.size()) - 1;
  dispatch_compute_dtype(out.dtype(), op_name(op), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      HG_FAIL(op_name(op), ": bool tensors cannot be added into");
    } else {
      using A = acc_t<T>;
      T* o_ptr = static_cast<T*>(out.data_ptr());
      const T* s_ptr = static_cast<const T*>(src.data_ptr());
      parallel_for(runs, outer * k_count * inner >= kParallelGrain, [&](int64_t r) {
        const int64_t target = idx[order[run_starts[r]]];
        if (target == skip_index) return;
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t i = 0; i < inner; ++i) {
            A acc = A(0);
            for (int64_t p = run_starts[r]; p < run_starts[r + 1]; ++p) {
              acc += static_cast<A>(s_ptr[(o * k_count + order[p]) * inner + i]);
            }
            T& slot = o_ptr[(o * n + target) * inner + i];
            slot = static_cast<T>(static_cast<A>(slot) + acc);
          }
        }
      });
    }
  });
}

void gather(const Tensor& out, const Tensor& x, const Tensor& index, const IndexGeometry& g) {
  detail::check_geometry(g, index);
  HG_CHECK(out.is_contiguous() && out.sizes() == index.sizes() && x.is_contiguous() && out.dtype() == x.dtype(),
           "cpu::gather: wants contiguous out shaped like index and a contiguous x");
  const int64_t n = x.size(g.dim);
  const int64_t* idx = static_cast<const int64_t*>(index.data_ptr());
  const int64_t total = index.numel();
  for (int64_t i = 0; i < total; ++i) {
    if (idx[i] < 0 || idx[i] >= n) index_out_of_range(OpId::gather, idx[i], i, n);
  }
  dispatch_compute_dtype(out.dtype(), "gather", [&](auto tag) {
    using T = decltype(tag);
    const T* xs = static_cast<const T*>(x.data_ptr());
    T* o = static_cast<T*>(out.data_ptr());
    parallel_for(total, total >= kParallelGrain, [&](int64_t i) {
      int64_t c[kIndexMaxDims];
      coords_of(g, i, c);
      int64_t off = 0;
      for (int d = 0; d < g.rank; ++d) off += (d == g.dim ? idx[i] : c[d]) * g.strides[0][d];
      o[i] = xs[off];
    });
  });
}

void scatter_add(const Tensor& out, const Tensor& index, const Tensor& src, const IndexGeometry& g) {
  detail::check_geometry(g, index);
  HG_CHECK(out.is_contiguous() && out.dim() == g.rank && src.dtype() == out.dtype(),
           "cpu::scatter_add: wants a contiguous out of the index's rank and src of out's dtype");
  const int64_t n = out.size(g.dim);
  const int64_t* idx = static_cast<const int64_t*>(index.data_ptr());
  const int64_t total = index.numel();
  for (int64_t i = 0; i < total; ++i) {
    if (idx[i] < 0 || idx[i] >= n) index_out_of_range(OpId::scatter_add, idx[i], i, n);
  }
  const int64_t k_count = g.sizes[g.dim];
  const int64_t lines = total / k_count;
  dispatch_compute_dtype(out.dtype(), "scatter_add", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      HG_FAIL("scatter_add: bool tensors cannot be added into");
    } else {
      T* o = static_cast<T*>(out.data_ptr());
      const T* s = static_cast<const T*>(src.data_ptr());
      parallel_for(lines, total >= kParallelGrain, [&](int64_t l) {  // k runs along the line inside
        const ScatterLine at = scatter_line(g, l);
        for (int64_t k = 0; k < k_count; ++k) {
          const int64_t j = idx[at.index + k * g.strides[2][g.dim]];
          T& slot = o[at.out + j * g.strides[0][g.dim]];
          slot = static_cast<T>(slot + s[at.src + k * g.strides[1][g.dim]]);
        }
      });
    }
  });
}

void trilu(const Tensor& out, const Tensor& x, int64_t diagonal, bool upper) {
  HG_CHECK(
      out.is_contiguous() && x.is_contiguous() && x.dim() >= 2 && out.sizes() == x.sizes() && out.dtype() == x.dtype(),
      "cpu::trilu: wants contiguous out and x of one shape and dtype, rank >= 2");
  const int64_t rows = x.size(-2), cols = x.size(-1), total = x.numel();
  dispatch_compute_dtype(out.dtype(), upper ? "triu" : "tril", [&](auto tag) {
    using T = decltype(tag);
    const T* xs = static_cast<const T*>(x.data_ptr());
    T* o = static_cast<T*>(out.data_ptr());
    parallel_for(total, total >= kParallelGrain, [&](int64_t i) {
      const int64_t c = i % cols, r = (i / cols) % rows;
      const bool keep = upper ? c - r >= diagonal : c - r <= diagonal;
      o[i] = keep ? xs[i] : T(0);
    });
  });
}

void arange(const Tensor& out, double start, double step) {
  HG_CHECK(out.dim() == 1 && out.is_contiguous() && out.is_cpu(), "cpu::arange: wants a contiguous 1-D host tensor");
  const int64_t n = out.numel();
  dispatch_compute_dtype(out.dtype(), "arange", [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.data_ptr());
    parallel_for(n, n >= kParallelGrain,
                 [&](int64_t i) { o[i] = convert_value<T>(start + static_cast<double>(i) * step); });
  });
}

namespace {
// core's hg::arange on the CPU runs this kernel (Note [Copy kernels] in core/copy.h).
const bool kRegistered = [] {
  register_arange_kernel(DeviceType::CPU, &arange);
  return true;
}();
}  // namespace

}  // namespace hg::cpu
