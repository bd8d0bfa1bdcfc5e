// The blocked CPU flash attention kernels of kernels/attention/flash_attention_tiles.h,
// written once over a GCC vector type and compiled once per ISA. Included
// only by flash_attention_sse2.cpp, flash_attention_avx2.cpp and
// flash_attention_avx512.cpp, each of which first defines
//   HG_FA_NS, HG_FA_NAME  the namespace of its table and the table's name
//   VR, kW                the vector type and its float lanes
//   kRB, kCB              the register block of the tile product: kRB rows
//                         by kCB vectors (kRB * kCB accumulators)
//   fa_exp                SLEEF's u10 expf of that width
//   fa_splat(c)           c in every lane (the ISA's broadcast)
//   fa_fma(a, b, c)       a * b + c, fused where the ISA has FMA
//   fa_leave()            what to run before returning to baseline code
//
// The formulas, the task split and the costs are at the top of
// kernels/attention/flash_attention_cpu.cpp. Every product is one routine, tile_gemm:
// C[M x N] = scale * A B or C = diag(alpha) C + A B, with A read through two
// strides (so A, or A transposed, is a row-major tile already in memory) and
// B a row-major panel whose N is a multiple of the register block's kCB * kW
// columns; on a causal diagonal tile the accumulating products skip the
// masked (exactly zero) terms (Band). The sums over the inner index run in
// index order inside one accumulator lane, so every result has one fixed
// summation order (independent of the thread count and the schedule).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

#include "kernels/attention/flash_attention_tiles.h"

namespace hg::cpu::HG_FA_NS {

namespace {

using V = VR;
constexpr int64_t kB = kFlashBlock;
constexpr int64_t kNB = kCB * kW;  // columns per pass of the register block
static_assert(kB % kNB == 0 && kB % kW == 0, "the tiles are whole register blocks wide");

// c in every lane: the ISA's broadcast (V{} + c would add +0 first, an
// extra instruction per broadcast in the tile loop, and turn -0 into +0).
inline V splat(float c) { return fa_splat(c); }
inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, V v) { std::memcpy(p, &v, sizeof v); }
inline V vmax(V a, V b) { return a > b ? a : b; }
inline float hsum(V v) {
  float s = 0;
  for (int k = 0; k < kW; ++k) s += v[k];
  return s;
}

// Runs fa_leave() when the entry point returns.
struct Leave {
  Leave() = default;
  Leave(const Leave&) = delete;
  Leave& operator=(const Leave&) = delete;
  ~Leave() { fa_leave(); }
};

// One register block of tile_gemm: rows [0, RB) and columns [0, kNB) of C,
// the inner index over [k0, k1).
template <int RB>
inline void gemm_block(int64_t k0, int64_t k1, const float* a, int64_t a_rs, int64_t a_ks, const float* b, int64_t ldb,
                       float* c, int64_t ldc, bool add, const float* alpha, float scale) {
  V acc[RB][kCB];
  if (add) {
#pragma GCC unroll 8
    for (int r = 0; r < RB; ++r) {
#pragma GCC unroll 8
      for (int cb = 0; cb < kCB; ++cb) acc[r][cb] = load(c + r * ldc + cb * kW);
      if (alpha != nullptr) {
        const V al = splat(alpha[r]);
#pragma GCC unroll 8
        for (int cb = 0; cb < kCB; ++cb) acc[r][cb] *= al;
      }
    }
  } else {
#pragma GCC unroll 8
    for (int r = 0; r < RB; ++r) {
#pragma GCC unroll 8
      for (int cb = 0; cb < kCB; ++cb) acc[r][cb] = V{};
    }
  }
  for (int64_t k = k0; k < k1; ++k) {
    V bv[kCB];
#pragma GCC unroll 8
    for (int cb = 0; cb < kCB; ++cb) bv[cb] = load(b + k * ldb + cb * kW);
    const float* ak = a + k * a_ks;
#pragma GCC unroll 8
    for (int r = 0; r < RB; ++r) {
      const V av = splat(ak[r * a_rs]);
#pragma GCC unroll 8
      for (int cb = 0; cb < kCB; ++cb) acc[r][cb] = fa_fma(av, bv[cb], acc[r][cb]);
    }
  }
  const V sc = splat(scale);
#pragma GCC unroll 8
  for (int r = 0; r < RB; ++r) {
#pragma GCC unroll 8
    for (int cb = 0; cb < kCB; ++cb) store(c + r * ldc + cb * kW, add ? acc[r][cb] : acc[r][cb] * sc);
  }
}

// The last m (< kRB) rows: the block of that height.
template <int RB>
inline void gemm_rest(int64_t m, int64_t k0, int64_t k1, const float* a, int64_t a_rs, int64_t a_ks, const float* b,
                      int64_t ldb, float* c, int64_t ldc, bool add, const float* alpha, float scale) {
  if constexpr (RB > 0) {
    if (m == RB) {
      gemm_block<RB>(k0, k1, a, a_rs, a_ks, b, ldb, c, ldc, add, alpha, scale);
    } else {
      gemm_rest<RB - 1>(m, k0, k1, a, a_rs, a_ks, b, ldb, c, ldc, add, alpha, scale);
    }
  }
}

// The causal band of an accumulating product on a diagonal tile: A(r, k) is
// exactly 0 (a masked probability or its dS) outside it, so a row block
// [r, r + rb) skips those k. Adding 0 * B changes no accumulator (for
// finite B), so the results are those of the full loop.
//   all       every k
//   upto_row  k <= r + diag   (rows are queries, k are keys: P V, dS K)
//   from_row  k >= r + diag   (rows are keys, k are queries: P^T dO, dS^T Q)
struct Band {
  enum Kind { all, upto_row, from_row } kind = all;
  int64_t diag = 0;
};

// C[r][n] for r < m, n < n_cols (a multiple of kNB), with A(r, k) =
// a[r * a_rs + k * a_ks] and B(k, n) = b[k * ldb + n]:
//   add false: C = scale * sum_k A(r, k) B(k, n)
//   add true:  C = alpha[r] C + sum_k A(r, k) B(k, n)  (alpha null: 1)
// Columns outer, rows inner, so one kk x kNB panel of B serves every row.
void tile_gemm(int64_t m, int64_t n_cols, int64_t kk, const float* a, int64_t a_rs, int64_t a_ks, const float* b,
               int64_t ldb, float* c, int64_t ldc, bool add, const float* alpha, float scale, Band band = {}) {
  // The k range of the row block [r, r + rb).
  const auto k_range = [&](int64_t r, int64_t rb) -> std::pair<int64_t, int64_t> {
    switch (band.kind) {
      case Band::upto_row:
        return {0, std::clamp<int64_t>(r + rb + band.diag, 0, kk)};
      case Band::from_row:
        return {std::clamp<int64_t>(r + band.diag, 0, kk), kk};
      case Band::all:
        break;
    }
    return {0, kk};
  };
  for (int64_t n0 = 0; n0 < n_cols; n0 += kNB) {
    int64_t r = 0;
    for (; r + kRB <= m; r += kRB) {
      const auto [k0, k1] = k_range(r, kRB);
      gemm_block<kRB>(k0, k1, a + r * a_rs, a_rs, a_ks, b + n0, ldb, c + r * ldc + n0, ldc, add,
                      alpha != nullptr ? alpha + r : nullptr, scale);
    }
    if (r < m) {
      const auto [k0, k1] = k_range(r, m - r);
      gemm_rest<kRB - 1>(m - r, k0, k1, a + r * a_rs, a_rs, a_ks, b + n0, ldb, c + r * ldc + n0, ldc, add,
                         alpha != nullptr ? alpha + r : nullptr, scale);
    }
  }
}

Band causal_band(const FlashHead& h, Band::Kind kind, int64_t diag) { return h.causal ? Band{kind, diag} : Band{}; }

int64_t elem_bytes(VecType t) { return t == VecType::f32 ? 4 : 2; }

// Rows [r0, r0 + n) of the [*, d] array x as f32: x itself for f32, else
// widened into buf (n * d floats).
const float* rows_f32(const FlashHead& h, const void* x, int64_t r0, int64_t n, float* buf) {
  if (h.t == VecType::f32) return static_cast<const float*>(x) + r0 * h.d;
  h.widen(h.t, static_cast<const char*>(x) + r0 * h.d * elem_bytes(h.t), buf, n * h.d);
  return buf;
}

// f32 rows src [n x d] to rows [r0, r0 + n) of the [*, d] array y, each
// value times mul: stored for f32, rounded once through h.narrow otherwise
// (src is then scaled in place).
void store_rows(const FlashHead& h, float* src, int64_t n, float mul, void* y, int64_t r0) {
  const int64_t count = n * h.d;
  const V mv = splat(mul);
  float* dst = h.t == VecType::f32 ? static_cast<float*>(y) + r0 * h.d : src;
  int64_t i = 0;
  for (; i + kW <= count; i += kW) store(dst + i, load(src + i) * mv);
  for (; i < count; ++i) dst[i] = src[i] * mul;
  if (h.t != VecType::f32) h.narrow(h.t, src, static_cast<char*>(y) + r0 * h.d * elem_bytes(h.t), count);
}

// dst [d x kB] = src [n x d] transposed, columns n..kB zero.
void pack_transposed(const float* src, int64_t n, int64_t d, float* dst) {
  for (int64_t c = 0; c < d; ++c) {
    float* row = dst + c * kB;
    for (int64_t i = 0; i < n; ++i) row[i] = src[i * d + c];
    for (int64_t i = n; i < kB; ++i) row[i] = 0.0f;
  }
}

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// st [kB x kB] = S^T of keys j0.. (rows) and queries i0.. (columns): -inf
// where the key is after the query (the causal mask), for the first nk rows.
void mask_keys_by_queries(float* st, int64_t nk, int64_t j0, int64_t i0) {
  for (int64_t j = 0; j < nk; ++j) {
    const int64_t first_kept = std::clamp<int64_t>(j0 + j - i0, 0, kB);  // query i kept when i0 + i >= j0 + j
    float* row = st + j * kB;
    for (int64_t i = 0; i < first_kept; ++i) row[i] = kNegInf;
  }
}

// ---- forward ---------------------------------------------------------------
// One block of nq query rows: Q^T packed once, keys streamed in tiles of kB.
// Per tile: S^T = scale K Q^T (keys x queries, so each query's statistics
// are one lane: the online softmax runs on whole vectors), the causal mask,
// m' = max(m, max_j s), alpha = e^(m - m'), P^T = e^(S^T - m'),
// l = alpha l + sum_j P^T, O = diag(alpha) O + (P^T)^T V.
void forward_block(const FlashHead& h, int64_t i0, float* scratch) {
  const Leave leave;
  const int64_t d = h.d, nq = std::min(kB, h.l - i0);
  float* qt = scratch;       // [d x kB]  Q^T
  float* st = qt + d * kB;   // [kB x kB] S^T, then P^T
  float* o = st + kB * kB;   // [kB x d]  the output accumulator
  float* kbuf = o + kB * d;  // [kB x d]  16-bit rows widened
  float* vbuf = kbuf + kB * d;
  float* m = vbuf + kB * d;  // [kB] running max, sum, rescale factor
  float* l = m + kB;
  float* alpha = l + kB;
  pack_transposed(rows_f32(h, h.q, i0, nq, kbuf), nq, d, qt);
  std::fill(m, m + kB, kNegInf);
  std::fill(l, l + kB, 0.0f);
  std::fill(o, o + kB * d, 0.0f);
  const int64_t s_end = h.causal ? std::min(h.s, i0 + nq) : h.s;
  for (int64_t j0 = 0; j0 < s_end; j0 += kB) {
    const int64_t nk = std::min(kB, s_end - j0);
    const float* kr = rows_f32(h, h.k, j0, nk, kbuf);
    const float* vr = rows_f32(h, h.v, j0, nk, vbuf);
    tile_gemm(nk, kB, d, kr, d, 1, qt, kB, st, kB, false, nullptr, h.scale);
    if (h.causal && j0 + nk - 1 > i0) mask_keys_by_queries(st, nk, j0, i0);
    for (int64_t iv = 0; iv < kB; iv += kW) {
      V tile_max = splat(kNegInf);
      for (int64_t j = 0; j < nk; ++j) tile_max = vmax(tile_max, load(st + j * kB + iv));
      const V m_old = load(m + iv);
      const V m_new = vmax(m_old, tile_max);
      // A lane with no key yet (all -inf) shifts by 0, so -inf - -inf never occurs.
      const V shift = m_new == splat(kNegInf) ? V{} : m_new;
      const V al = fa_exp(m_old - shift);
      V sum = V{};
      for (int64_t j = 0; j < nk; ++j) {
        const V p = fa_exp(load(st + j * kB + iv) - shift);
        store(st + j * kB + iv, p);
        sum += p;
      }
      store(l + iv, load(l + iv) * al + sum);
      store(m + iv, m_new);
      store(alpha + iv, al);
    }
    tile_gemm(nq, d, nk, st, 1, kB, vr, d, o, d, true, alpha, 1.0f, causal_band(h, Band::upto_row, i0 - j0));
  }
  for (int64_t i = 0; i < nq; ++i) {
    const V lv = splat(l[i]);
    float* oi = o + i * d;
    for (int64_t c = 0; c < d; c += kW) store(oi + c, load(oi + c) / lv);
    h.lse[i0 + i] = m[i] + std::log(l[i]);
  }
  store_rows(h, o, nq, 1.0f, h.out, i0);
}

// ---- backward --------------------------------------------------------------
// dq of one block of nq query rows (and their D_i = dO_i . O_i first): Q^T
// and dO^T packed once, keys streamed in tiles of kB. Per tile: S^T = scale
// K Q^T, dP^T = V dO^T, the causal mask, P^T = e^(S^T - lse),
// dS^T = P^T (dP^T - D), dQ += (dS^T)^T K; dq = scale dQ.
void backward_q_block(const FlashHead& h, int64_t i0, float* scratch) {
  const Leave leave;
  const int64_t d = h.d, nq = std::min(kB, h.l - i0);
  float* qt = scratch;            // [d x kB] Q^T
  float* dot = qt + d * kB;       // [d x kB] dO^T
  float* st = dot + d * kB;       // [kB x kB] S^T, then dS^T
  float* dpt = st + kB * kB;      // [kB x kB] dP^T
  float* dq_acc = dpt + kB * kB;  // [kB x d]
  float* kbuf = dq_acc + kB * d;  // [kB x d] 16-bit rows widened
  float* vbuf = kbuf + kB * d;
  float* lse = vbuf + kB * d;  // [kB] this block's lse and D, 0 past nq
  float* delta = lse + kB;
  const float* dor = rows_f32(h, h.d_out, i0, nq, vbuf);
  const float* orow = rows_f32(h, h.saved_out, i0, nq, kbuf);
  std::fill(lse, lse + kB, 0.0f);
  std::fill(delta, delta + kB, 0.0f);
  for (int64_t i = 0; i < nq; ++i) {
    V acc = V{};
    for (int64_t c = 0; c < d; c += kW) acc = fa_fma(load(dor + i * d + c), load(orow + i * d + c), acc);
    delta[i] = hsum(acc);
    h.delta[i0 + i] = delta[i];
    lse[i] = h.lse[i0 + i];
  }
  pack_transposed(dor, nq, d, dot);
  pack_transposed(rows_f32(h, h.q, i0, nq, kbuf), nq, d, qt);
  std::fill(dq_acc, dq_acc + kB * d, 0.0f);
  const int64_t s_end = h.causal ? std::min(h.s, i0 + nq) : h.s;
  for (int64_t j0 = 0; j0 < s_end; j0 += kB) {
    const int64_t nk = std::min(kB, s_end - j0);
    const float* kr = rows_f32(h, h.k, j0, nk, kbuf);
    const float* vr = rows_f32(h, h.v, j0, nk, vbuf);
    tile_gemm(nk, kB, d, kr, d, 1, qt, kB, st, kB, false, nullptr, h.scale);
    tile_gemm(nk, kB, d, vr, d, 1, dot, kB, dpt, kB, false, nullptr, 1.0f);
    if (h.causal && j0 + nk - 1 > i0) mask_keys_by_queries(st, nk, j0, i0);
    for (int64_t j = 0; j < nk; ++j) {
      for (int64_t iv = 0; iv < kB; iv += kW) {
        const V p = fa_exp(load(st + j * kB + iv) - load(lse + iv));
        store(st + j * kB + iv, p * (load(dpt + j * kB + iv) - load(delta + iv)));
      }
    }
    tile_gemm(nq, d, nk, st, 1, kB, kr, d, dq_acc, d, true, nullptr, 1.0f, causal_band(h, Band::upto_row, i0 - j0));
  }
  store_rows(h, dq_acc, nq, h.scale, h.dq, i0);
}

// dk and dv of one block of nk key rows: K^T and V^T packed once, query rows
// streamed in tiles of kB (causal: from row j0, the first that sees a key of
// the block). Per tile: S = scale Q K^T, dP = dO V^T, the causal mask,
// P = e^(S - lse), dS = P (dP - D), dV += P^T dO, dK += dS^T Q;
// dk = scale dK, dv = dV.
void backward_kv_block(const FlashHead& h, int64_t j0, float* scratch) {
  const Leave leave;
  const int64_t d = h.d, nk = std::min(kB, h.s - j0);
  float* kt = scratch;              // [d x kB] K^T
  float* vt = kt + d * kB;          // [d x kB] V^T
  float* dk_acc = vt + d * kB;      // [kB x d]
  float* dv_acc = dk_acc + kB * d;  // [kB x d]
  float* qbuf = dv_acc + kB * d;    // [kB x d] 16-bit rows widened
  float* dobuf = qbuf + kB * d;
  float* s = dobuf + kB * d;  // [kB x kB] S, then P
  float* dp = s + kB * kB;    // [kB x kB] dP, then dS
  pack_transposed(rows_f32(h, h.k, j0, nk, qbuf), nk, d, kt);
  pack_transposed(rows_f32(h, h.v, j0, nk, dobuf), nk, d, vt);
  std::fill(dk_acc, dk_acc + kB * d, 0.0f);
  std::fill(dv_acc, dv_acc + kB * d, 0.0f);
  for (int64_t i0 = h.causal ? j0 : 0; i0 < h.l; i0 += kB) {
    const int64_t nq = std::min(kB, h.l - i0);
    const float* qr = rows_f32(h, h.q, i0, nq, qbuf);
    const float* dor = rows_f32(h, h.d_out, i0, nq, dobuf);
    tile_gemm(nq, kB, d, qr, d, 1, kt, kB, s, kB, false, nullptr, h.scale);
    tile_gemm(nq, kB, d, dor, d, 1, vt, kB, dp, kB, false, nullptr, 1.0f);
    const bool masked = h.causal && j0 + nk - 1 > i0;
    for (int64_t i = 0; i < nq; ++i) {
      float* si = s + i * kB;
      if (masked) {
        for (int64_t j = std::max<int64_t>(i0 + i + 1 - j0, 0); j < kB; ++j) si[j] = kNegInf;  // key after query
      }
      const V lse = splat(h.lse[i0 + i]), delta = splat(h.delta[i0 + i]);
      float* dpi = dp + i * kB;
      for (int64_t jv = 0; jv < kB; jv += kW) {
        const V p = fa_exp(load(si + jv) - lse);
        store(si + jv, p);
        store(dpi + jv, p * (load(dpi + jv) - delta));
      }
    }
    const Band band = causal_band(h, Band::from_row, j0 - i0);
    tile_gemm(nk, d, nq, s, 1, kB, dor, d, dv_acc, d, true, nullptr, 1.0f, band);
    tile_gemm(nk, d, nq, dp, 1, kB, qr, d, dk_acc, d, true, nullptr, 1.0f, band);
  }
  store_rows(h, dk_acc, nk, h.scale, h.dk, j0);
  store_rows(h, dv_acc, nk, 1.0f, h.dv, j0);
}

}  // namespace

const FlashTileKernels& flash_tiles() {
  static const FlashTileKernels t{HG_FA_NAME, forward_block, backward_q_block, backward_kv_block};
  return t;
}

}  // namespace hg::cpu::HG_FA_NS
