// CPU fused attention, forward and backward (kernels/attention/flash_attention.h has the
// formulas): the counterpart and numerical oracle of
// kernels/attention/flash_attention.cu, with the same algorithm and contract.
//
// Shapes     q, out, d_out, dq [BH, L, D]; k, v, dk, dv [BH, S, D]; lse [BH, L]
//
// Blocked kernels (f32, f16, bf16 on the vector math path; the tiles are
// kernels/attention/flash_attention_impl.h, compiled per ISA, chosen with the
// vector math's ISA): every product is a register-blocked tile GEMM on
// blocks of B = 64 rows (kFlashBlock), f32 operands and accumulators.
// Forward    one task per (bh, block of 64 query rows): Q^T packed once (D x
//            64), keys streamed in tiles of 64: S^T = scale K Q^T (64 x 64),
//            causal mask, online softmax per query lane (m' = max(m, max_j
//            s), alpha = e^(m - m'), P^T = e^(S^T - m'), l = alpha l + sum_j
//            P^T), O = diag(alpha) O + P V; out = O / l, lse = m + log l.
// Backward   recomputes P = exp(S - lse) from the saved lse. Pass 1, one
//            task per (bh, query block): D_i = dO_i . O_i, then keys
//            streamed: S^T, dP^T = V dO^T, dS^T = P^T (dP^T - D), dQ += dS K;
//            dq = scale dQ. Pass 2, one task per (bh, key block), K^T and
//            V^T packed once, query rows streamed (causal: from the block's
//            first key): S = scale Q K^T, dP = dO V^T, P, dS, dV += P^T dO,
//            dK += dS^T Q; dk = scale dK, dv = dV.
// Split      the tasks of a pass on the OpenMP pool (schedule dynamic, the
//            costliest causal blocks first), one plain loop below the grain;
//            each output row has one owner and each sum a fixed order inside
//            its task, so results are bit-identical from run to run and
//            for any thread count. No atomics.
// FLOPs      forward 4 L S D (causal: about half; the tiles on and below
//            the diagonal, and on a diagonal tile the score products whole
//            but the accumulating ones over the causal band), backward 14 L S D (S and dP
//            in both passes, the three products of dq, dk, dv: 7 tile GEMMs
//            against FlashAttention-2's 5 with atomics); exp: L S forward,
//            2 L S backward.
// Bytes      forward per task: Q block once, K and V once (L2-resident per
//            head); the working set per thread is the scratch of
//            flash_scratch_floats(D): 6 x 64 x D + 3 x 64 x 64 floats (241 KiB
//            at D = 128), O(1) in L and S. Backward: pass 1 reads K, V once
//            per query block, pass 2 reads Q, dO once per key block; delta
//            BH x L floats. 16-bit rows are widened per tile into the scratch
//            by the vector math's converters; outputs rounded once.
// Precision  f32 throughout (SLEEF's 1-ulp expf); inputs widened exactly,
//            outputs rounded once.
//
// Reference kernels (f64 always; every dtype on the scalar math path,
// HG_CPU_MATH=scalar, and in builds without SLEEF): one (bh, row) per task,
// matrix-vector products in acc_t (f64 for f64, else f32) with libm's exp,
// the same online softmax over key tiles of 64, the same two-pass backward
// (one key row per task for dk/dv, one query row per task for dq).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/half.h"
#include "kernels/attention/flash_attention_tiles.h"
#include "kernels/cpu/loops.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/attention/flash_attention.h"

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

// ---- the blocked kernels -----------------------------------------------------

// The tile kernels of the vector math's ISA, or null for the reference path.
const FlashTileKernels* tile_kernels() {
#if defined(HG_HAVE_SLEEF)
  if (vec_math() == nullptr) return nullptr;
  switch (vec_isa()) {
    case VecIsa::avx512:
      return &fa_avx512::flash_tiles();
    case VecIsa::avx2:
      return &fa_avx2::flash_tiles();
    case VecIsa::sse2:
      return &fa_sse2::flash_tiles();
  }
#endif
  return nullptr;
}

// The calling thread's scratch for the tile kernels, at least n floats,
// 64-byte aligned; kept between calls (one block's tiles: 241 KiB at D = 128).
float* thread_scratch(int64_t n) {
  thread_local std::vector<float> buf;
  const size_t need = static_cast<size_t>(n) + 16;
  if (buf.size() < need) buf.resize(need);
  const auto addr = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + ((64 - addr % 64) % 64) / sizeof(float);
}

// Below this many multiply-adds of the score product (BH L S D) the tasks
// run on the calling thread: one 64 x 64 x 64 tile product is about this
// much work, several times a parallel region's cost.
constexpr int64_t kTileGrain = int64_t{1} << 18;

// Task t of a pass with `blocks` blocks per head: the head and the block, the
// largest blocks first when `descending` (the causal forward and dq: later
// query blocks see more keys), so a dynamic schedule ends balanced.
struct HeadBlock {
  int64_t head, block;
};
HeadBlock task_of(int64_t t, int64_t bh, int64_t blocks, bool descending) {
  const int64_t b = t / bh;
  return {t % bh, descending ? blocks - 1 - b : b};
}

FlashHead head_view(const FlashHead& all, int64_t b, VecType t) {
  const int64_t eb = t == VecType::f32 ? 4 : 2;
  const int64_t q_rows = all.l * all.d * eb, k_rows = all.s * all.d * eb;
  const auto at = [](const void* p, int64_t off) -> const void* {
    return p == nullptr ? nullptr : static_cast<const char*>(p) + off;
  };
  const auto at_mut = [](void* p, int64_t off) -> void* {
    return p == nullptr ? nullptr : static_cast<char*>(p) + off;
  };
  FlashHead h = all;
  h.q = at(all.q, b * q_rows);
  h.k = at(all.k, b * k_rows);
  h.v = at(all.v, b * k_rows);
  h.d_out = at(all.d_out, b * q_rows);
  h.saved_out = at(all.saved_out, b * q_rows);
  h.out = at_mut(all.out, b * q_rows);
  h.dq = at_mut(all.dq, b * q_rows);
  h.dk = at_mut(all.dk, b * k_rows);
  h.dv = at_mut(all.dv, b * k_rows);
  h.lse = all.lse + b * all.l;
  h.delta = all.delta != nullptr ? all.delta + b * all.l : nullptr;
  return h;
}

void blocked_forward(const FlashTileKernels& tk, const FlashHead& all, int64_t bh) {
  const int64_t blocks = (all.l + kFlashBlock - 1) / kFlashBlock, n = bh * blocks;
  const int64_t scratch = flash_scratch_floats(all.d);
  const auto task = [&](int64_t t) {
    const HeadBlock hb = task_of(t, bh, blocks, all.causal);
    tk.forward_block(head_view(all, hb.head, all.t), hb.block * kFlashBlock, thread_scratch(scratch));
  };
  if (n < 2 || bh * all.l * all.s * all.d < kTileGrain) {
    for (int64_t t = 0; t < n; ++t) task(t);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t t = 0; t < n; ++t) task(t);
}

void blocked_backward(const FlashTileKernels& tk, const FlashHead& all, int64_t bh) {
  const int64_t q_blocks = (all.l + kFlashBlock - 1) / kFlashBlock;
  const int64_t k_blocks = (all.s + kFlashBlock - 1) / kFlashBlock;
  const int64_t scratch = flash_scratch_floats(all.d);
  const auto q_task = [&](int64_t t) {
    const HeadBlock hb = task_of(t, bh, q_blocks, all.causal);
    tk.backward_q_block(head_view(all, hb.head, all.t), hb.block * kFlashBlock, thread_scratch(scratch));
  };
  const auto kv_task = [&](int64_t t) {
    const HeadBlock hb = task_of(t, bh, k_blocks, false);  // causal: the first key blocks see the most queries
    tk.backward_kv_block(head_view(all, hb.head, all.t), hb.block * kFlashBlock, thread_scratch(scratch));
  };
  const int64_t nq = bh * q_blocks, nk = bh * k_blocks;
  if (std::max(nq, nk) < 2 || bh * all.l * all.s * all.d < kTileGrain) {
    for (int64_t t = 0; t < nq; ++t) q_task(t);
    for (int64_t t = 0; t < nk; ++t) kv_task(t);
    return;
  }
  // One parallel region, two passes: the barrier after the first loop
  // publishes every row's D_i before the dk/dv tasks read them.
#pragma omp parallel
  {
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < nq; ++t) q_task(t);
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < nk; ++t) kv_task(t);
  }
}

// The fields of a blocked call that forward and backward share: q, k, v
// ([BH, L, D] / [BH, S, D]), lse, the sizes, scale, mask and the converters
// of the vector math's ISA.
template <typename T>
FlashHead head_of(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lse, double scale, bool causal) {
  FlashHead h;
  h.t = vec_type_of<T>();
  h.q = q.data_ptr();
  h.k = k.data_ptr();
  h.v = v.data_ptr();
  h.lse = static_cast<float*>(lse.data_ptr());
  h.l = q.size(1);
  h.s = k.size(1);
  h.d = q.size(2);
  h.scale = static_cast<float>(scale);
  h.causal = causal;
  h.widen = vec_math()->widen;
  h.narrow = vec_math()->narrow;
  return h;
}

}  // namespace

const char* flash_attention_cpu_path() {
  const FlashTileKernels* tk = tile_kernels();
  return tk != nullptr ? tk->name : "reference";
}

void flash_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             double scale, bool causal) {
  HG_CHECK(q.dim() == 3 && q.is_contiguous() && k.is_contiguous() && v.is_contiguous() && out.is_contiguous() &&
               lse.is_contiguous() && k.sizes() == v.sizes() && out.sizes() == q.sizes(),
           "cpu::flash_attention_forward: wants contiguous [BH, L, D] / [BH, S, D] tensors, got q ", q.shape_str(),
           " k ", k.shape_str());
  const int64_t bh = q.size(0), l = q.size(1), s = k.size(1), d = q.size(2);
  dispatch_floating(q.dtype(), "flash_attention_forward", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, double>) {
      if (const FlashTileKernels* tk = tile_kernels()) {
        FlashHead all = head_of<T>(q, k, v, lse, scale, causal);
        all.out = out.data_ptr();
        blocked_forward(*tk, all, bh);
        return;
      }
    }
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
    if constexpr (!std::is_same_v<T, double>) {
      if (const FlashTileKernels* tk = tile_kernels()) {
        std::vector<float> delta(static_cast<size_t>(bh * l));
        FlashHead all = head_of<T>(q, k, v, lse, scale, causal);
        all.d_out = d_out.data_ptr();
        all.saved_out = out.data_ptr();
        all.delta = delta.data();
        all.dq = dq.data_ptr();
        all.dk = dk.data_ptr();
        all.dv = dv.data_ptr();
        blocked_backward(*tk, all, bh);
        return;
      }
    }
    backward_impl<T>(static_cast<T*>(dq.data_ptr()), static_cast<T*>(dk.data_ptr()), static_cast<T*>(dv.data_ptr()),
                     static_cast<const T*>(d_out.data_ptr()), static_cast<const T*>(q.data_ptr()),
                     static_cast<const T*>(k.data_ptr()), static_cast<const T*>(v.data_ptr()),
                     static_cast<const T*>(out.data_ptr()), static_cast<const acc_t<T>*>(lse.data_ptr()), bh, l, s, d,
                     scale, causal);
  });
}

}  // namespace hg::cpu
