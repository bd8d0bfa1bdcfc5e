// CPU fused attention, forward and backward (kernels/flash_attention.h has the
// formulas): the counterpart and numerical oracle of
// kernels/cuda/flash_attention.cu, with the same algorithm and contract.
//
// Shapes     q, out, d_out, dq [BH, L, D]; k, v, dk, dv [BH, S, D]; lse [BH, L]
// Forward    one (bh, query row) per task (OpenMP over BH * L); keys streamed
//            in tiles of kTile = 64 with the online softmax: per tile the
//            tile max m~, then m' = max(m, m~), acc = acc * e^(m - m') +
//            sum_j e^(s_j - m') v_j, l = l e^(m - m') + sum_j e^(s_j - m');
//            out = acc / l, lse = m + log l. Memory per task: D + kTile values.
// Backward   recomputes P = exp(s - lse) from the saved lse, D_i = dO_i . O_i;
//            pass 1, one (bh, key row) per task: dv_j = sum_i P_ij dO_i,
//            dk_j = scale sum_i dS_ij q_i; pass 2, one (bh, query row) per
//            task: dq_i = scale sum_j dS_ij k_j. Each output has one owner
//            (no atomics, no races): bit-identical from run to run. Causal
//            rows and columns outside tril are skipped, not computed.
// Precision  acc_t (float; double for f64) for scores, statistics and sums;
//            inputs widened once, outputs rounded once.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/loops.h"
#include "kernels/flash_attention.h"

namespace hg::cpu {

namespace {

constexpr int64_t kTile = 64;

template <typename T, typename A>
A dot(const T* x, const T* y, int64_t d) {
  A acc = A(0);
  for (int64_t c = 0; c < d; ++c) acc += static_cast<A>(x[c]) * static_cast<A>(y[c]);
  return acc;
}

template <typename T>
void forward_impl(T* out, acc_t<T>* lse, const T* q, const T* k, const T* v, int64_t bh, int64_t l, int64_t s,
                  int64_t d, double scale_d, bool causal) {
  using A = acc_t<T>;
  const A scale = static_cast<A>(scale_d);
  const A neg_inf = -std::numeric_limits<A>::infinity();
  parallel_for(bh * l, bh * l * s * d >= kParallelGrain, [&](int64_t task) {
    const int64_t b = task / l, i = task % l;
    const T* qi = q + task * d;
    const T* kb = k + b * s * d;
    const T* vb = v + b * s * d;
    std::vector<A> acc(static_cast<size_t>(d), A(0));
    A sc[kTile];
    A m = neg_inf, sum = A(0);
    const int64_t s_end = causal ? std::min(s, i + 1) : s;
    for (int64_t j0 = 0; j0 < s_end; j0 += kTile) {
      const int64_t n = std::min(kTile, s_end - j0);
      A tile_max = neg_inf;
      for (int64_t j = 0; j < n; ++j) {
        sc[j] = scale * dot<T, A>(qi, kb + (j0 + j) * d, d);
        tile_max = std::max(tile_max, sc[j]);
      }
      const A m_new = std::max(m, tile_max);
      const A alpha = m == neg_inf ? A(0) : std::exp(m - m_new);
      sum *= alpha;
      for (int64_t c = 0; c < d; ++c) acc[static_cast<size_t>(c)] *= alpha;
      for (int64_t j = 0; j < n; ++j) {
        const A p = std::exp(sc[j] - m_new);
        sum += p;
        const T* vj = vb + (j0 + j) * d;
        for (int64_t c = 0; c < d; ++c) acc[static_cast<size_t>(c)] += p * static_cast<A>(vj[c]);
      }
      m = m_new;
    }
    T* oi = out + task * d;
    for (int64_t c = 0; c < d; ++c) oi[c] = static_cast<T>(acc[static_cast<size_t>(c)] / sum);
    lse[task] = m + std::log(sum);
  });
}

template <typename T>
void backward_impl(T* dq, T* dk, T* dv, const T* d_out, const T* q, const T* k, const T* v, const T* out,
                   const acc_t<T>* lse, int64_t bh, int64_t l, int64_t s, int64_t d, double scale_d, bool causal) {
  using A = acc_t<T>;
  const A scale = static_cast<A>(scale_d);
  const bool parallel = bh * l * s * d >= kParallelGrain;
  // D_i = dO_i . O_i, the row term of the softmax backward (O(BH * L)).
  std::vector<A> delta(static_cast<size_t>(bh * l));
  parallel_for(bh * l, parallel,
               [&](int64_t r) { delta[static_cast<size_t>(r)] = dot<T, A>(d_out + r * d, out + r * d, d); });

  // Pass 1: dk_j and dv_j, one key row per task, query rows in order.
  parallel_for(bh * s, parallel, [&](int64_t task) {
    const int64_t b = task / s, j = task % s;
    const T* kj = k + task * d;
    const T* vj = v + task * d;
    std::vector<A> acc_k(static_cast<size_t>(d), A(0)), acc_v(static_cast<size_t>(d), A(0));
    for (int64_t i = causal ? j : 0; i < l; ++i) {
      const int64_t r = b * l + i;
      const T* qi = q + r * d;
      const T* doi = d_out + r * d;
      const A p = std::exp(scale * dot<T, A>(qi, kj, d) - lse[r]);
      const A ds = p * (dot<T, A>(doi, vj, d) - delta[static_cast<size_t>(r)]);
      for (int64_t c = 0; c < d; ++c) {
        acc_v[static_cast<size_t>(c)] += p * static_cast<A>(doi[c]);
        acc_k[static_cast<size_t>(c)] += ds * static_cast<A>(qi[c]);
      }
    }
    for (int64_t c = 0; c < d; ++c) {
      dk[task * d + c] = static_cast<T>(scale * acc_k[static_cast<size_t>(c)]);
      dv[task * d + c] = static_cast<T>(acc_v[static_cast<size_t>(c)]);
    }
  });

  // Pass 2: dq_i, one query row per task, key rows in order.
  parallel_for(bh * l, parallel, [&](int64_t task) {
    const int64_t b = task / l, i = task % l;
    const T* qi = q + task * d;
    const T* doi = d_out + task * d;
    std::vector<A> acc(static_cast<size_t>(d), A(0));
    const int64_t s_end = causal ? std::min(s, i + 1) : s;
    for (int64_t j = 0; j < s_end; ++j) {
      const T* kj = k + (b * s + j) * d;
      const A p = std::exp(scale * dot<T, A>(qi, kj, d) - lse[task]);
      const A ds = p * (dot<T, A>(doi, v + (b * s + j) * d, d) - delta[static_cast<size_t>(task)]);
      for (int64_t c = 0; c < d; ++c) acc[static_cast<size_t>(c)] += ds * static_cast<A>(kj[c]);
    }
    for (int64_t c = 0; c < d; ++c) dq[task * d + c] = static_cast<T>(scale * acc[static_cast<size_t>(c)]);
  });
}

}  // namespace

void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             double scale, bool causal) {
  HG_CHECK(q.dim() == 3 && q.is_contiguous() && k.is_contiguous() && v.is_contiguous() && out.is_contiguous() &&
               lse.is_contiguous() && k.sizes() == v.sizes() && out.sizes() == q.sizes(),
           "cpu::flash_attention_forward: wants contiguous [BH, L, D] / [BH, S, D] tensors, got q ", q.shape_str(),
           " k ", k.shape_str());
  const int64_t bh = q.size(0), l = q.size(1), s = k.size(1), d = q.size(2);
  dispatch_floating(q.dtype(), "flash_attention_forward", [&](auto tag) {
    using T = decltype(tag);
    forward_impl<T>(static_cast<T*>(out.data_ptr()), static_cast<acc_t<T>*>(lse.data_ptr()),
                    static_cast<const T*>(q.data_ptr()), static_cast<const T*>(k.data_ptr()),
                    static_cast<const T*>(v.data_ptr()), bh, l, s, d, scale, causal);
  });
}

void flash_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& d_out,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                              double scale, bool causal) {
  HG_CHECK(q.dim() == 3 && q.is_contiguous() && k.is_contiguous() && v.is_contiguous() && out.is_contiguous() &&
               d_out.is_contiguous() && dq.is_contiguous() && dk.is_contiguous() && dv.is_contiguous() &&
               lse.is_contiguous() && k.sizes() == v.sizes() && out.sizes() == q.sizes(),
           "cpu::flash_attention_backward: wants contiguous [BH, L, D] / [BH, S, D] tensors, got q ", q.shape_str(),
           " k ", k.shape_str());
  const int64_t bh = q.size(0), l = q.size(1), s = k.size(1), d = q.size(2);
  dispatch_floating(q.dtype(), "flash_attention_backward", [&](auto tag) {
    using T = decltype(tag);
    backward_impl<T>(static_cast<T*>(dq.data_ptr()), static_cast<T*>(dk.data_ptr()), static_cast<T*>(dv.data_ptr()),
                     static_cast<const T*>(d_out.data_ptr()), static_cast<const T*>(q.data_ptr()),
                     static_cast<const T*>(k.data_ptr()), static_cast<const T*>(v.data_ptr()),
                     static_cast<const T*>(out.data_ptr()), static_cast<const acc_t<T>*>(lse.data_ptr()), bh, l, s, d,
                     scale, causal);
  });
}

}  // namespace hg::cpu
