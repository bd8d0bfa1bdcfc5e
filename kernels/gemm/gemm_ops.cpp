// matmul: shape checks, operand layout (transposed views need no copy), the
// fold of batch dims into rows, the bias (a cuBLASLt epilogue on CUDA, else a
// pre-fill), and dispatch to the backend GEMM.
//
// Note [Bias epilogue]
// On CUDA a 2-D product (after Note [Folded GEMM rows]) with a bias of one
// value per output column, in the operands' dtype and packed, runs as one
// cublasLtMatmul with CUBLASLT_EPILOGUE_BIAS: the bias is added to the fp32
// accumulator before the single rounding, with no pre-filled output and no
// extra read of it. When cuBLASLt has no algorithm for the problem (e.g. a
// misaligned pointer), or the bias broadcasts otherwise, the bias is copied
// into the output (a broadcast copy) and the GEMM accumulates onto it with
// beta = 1: the same single rounding. On the CPU the same product takes
// oneDNN's matmul with its bias argument where the dtype's GEMM is oneDNN's
// (f32 on AVX-512 CPUs, bf16 with AVX512_BF16 / AMX): the bias added to the
// fp32 accumulator before the rounding, as the sum post-op adds the
// pre-filled C, without the broadcast copy (one pass over the output, 3 % of
// a char-GPT f32 step); elsewhere the copy and beta = 1.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/copy.h"
#include "kernels/gemm/gemm.h"
#include "runtime/cpu/threads.h"

namespace hg::ops {

namespace {

std::atomic<bool> g_allow_tf32{false};

// A matrix operand as the backend sees it: data, row stride, batch stride, and
// whether it must be read transposed. A view whose last dim is not unit-stride
// but whose second-to-last is (a transposed view) is used as-is by flipping
// the transpose flag; anything else is made contiguous first.
struct Operand {
  Tensor storage_owner;  // keeps a contiguous copy alive
  const void* data = nullptr;
  int64_t ld = 0;
  int64_t batch_stride = 0;
  bool trans = false;
};

Operand layout(const Tensor& t, bool trans) {
  const int64_t r = t.dim();
  const int64_t rows = t.size(r - 2), cols = t.size(r - 1);
  const int64_t s_row = t.stride(r - 2), s_col = t.stride(r - 1);
  Operand op;
  op.storage_owner = t;
  op.trans = trans;
  // Size-1 dims may have any stride; BLAS needs ld >= the stored row length.
  const bool row_major = (cols == 1 || s_col == 1) && (rows == 1 || s_row >= cols);
  const bool col_major = (rows == 1 || s_row == 1) && (cols == 1 || s_col >= rows);
  if (row_major) {
    op.ld = rows == 1 ? std::max<int64_t>(cols, 1) : s_row;
  } else if (col_major) {
    op.ld = cols == 1 ? std::max<int64_t>(rows, 1) : s_col;  // stored transposed
    op.trans = !trans;
  } else {
    // The only copy: a matrix whose last two dims are neither row- nor
    // column-major (e.g. a slice with a step in both) is made contiguous.
    op.storage_owner = t.contiguous();
    op.ld = std::max<int64_t>(cols, 1);
  }
  op.data = op.storage_owner.data_ptr();
  return op;
}

// The GemmArgs every call fills the same way: a's dtype and device, the two
// operands' layouts, out = [m, n] row-major (ldc = n, one matrix m * n apart),
// the process's TF32 setting. Batch, strides, beta and pointers are the
// caller's.
GemmArgs gemm_args(const Tensor& a, const Operand& A, const Operand& B, int64_t m, int64_t n, int64_t k) {
  GemmArgs args;
  args.dtype = a.dtype();
  args.trans_a = A.trans;
  args.trans_b = B.trans;
  args.m = m;
  args.n = n;
  args.k = k;
  args.lda = A.ld;
  args.ldb = B.ld;
  args.ldc = n;
  args.stride_c = m * n;
  args.allow_tf32 = allow_tf32();
  args.device_index = a.device().index;
  return args;
}

// Note [Batched GEMM strides]
// The batch dims of a, b and out are broadcast against each other (torch.matmul
// rules). Each operand's batch dims are read with their own strides (0 where
// broadcast), so no operand is ever expanded or copied for broadcasting. Size-1
// batch dims are dropped; then the innermost run of batch dims that every
// operand can walk with one stride (stride[i] == stride[i+1] * size[i+1], which
// also holds for two broadcast dims, 0 == 0 * size) becomes the GEMM's batch;
// the remaining outer dims (if any) are looped over, one strided-batched GEMM
// each. [B,H,T,D] @ [B,H,D,T] (any transposed view included) is one GEMM;
// [B,1,T,D] @ [H,D,T] is B GEMMs of batch H. On the CPU, two batch levels
// that do not collapse (that product, or attention's heads read in place from
// the fused qkv projection, whose B stride is 3 H D T rather than H T D) are
// one oneDNN call with an outer batch level (GemmArgs::outer_batch) wherever
// oneDNN takes the product: hg-train's char-GPT made 288 attention GEMM calls
// a step, each a 4-head product of ~1 MFLOP costing mostly oneDNN's per-call
// work; now 24.
struct BatchPlan {
  Shape sizes;                      // batch dims after dropping size-1 dims
  std::vector<int64_t> sa, sb, sc;  // their strides in a, b, out (elements)
  int64_t inner_begin = 0;          // dims [inner_begin, n) form the GEMM batch
};

std::vector<int64_t> batch_strides(const Tensor& t, const Shape& batch_shape) {
  // The strides t's batch dims have when broadcast (right-aligned) to batch_shape.
  const int64_t nb = static_cast<int64_t>(batch_shape.size());
  const int64_t tb = t.dim() - 2;
  std::vector<int64_t> out(static_cast<size_t>(nb), 0);
  for (int64_t i = 0; i < tb; ++i) {
    const int64_t d = nb - tb + i;
    out[static_cast<size_t>(d)] = t.size(i) == 1 ? 0 : t.stride(i);
  }
  return out;
}

// Note [Folded GEMM rows]
// a [..., M, K] (not transposed) against a 2-D b is one [prod(...) * M, K]
// matrix when a's leading dims and its row dim merge into one stride: a 2-D
// GEMM instead of a strided-batched one (cuBLAS picks its kernels for the
// real M, and a bias epilogue needs batch 1). The [rows, K] view of a, or an
// undefined tensor when the layout (or a bias that varies over the leading
// dims) does not allow the fold.
Tensor fold_rows(const Tensor& a, const Tensor& b, bool trans_a, const Tensor& bias) {
  if (trans_a || b.dim() != 2 || a.dim() <= 2) return Tensor();
  if (bias.defined()) {
    for (int64_t d = 0; d + 1 < bias.dim(); ++d) {
      if (bias.size(d) != 1) return Tensor();
    }
  }
  int64_t row_stride = -1, expected = 0, rows = 1;
  for (int64_t d = a.dim() - 2; d >= 0; --d) {
    rows *= a.size(d);
    if (a.size(d) == 1) continue;
    if (row_stride < 0) {
      row_stride = a.stride(d);
    } else if (a.stride(d) != expected) {
      return Tensor();
    }
    expected = a.stride(d) * a.size(d);
  }
  if (row_stride < 0) row_stride = std::max<int64_t>(a.size(-1), 1);
  return a.detach().as_strided({rows, a.size(-1)}, {row_stride, a.stride(-1)}, a.offset());
}

}  // namespace

// Broadcast batch shape of two operands of rank >= 2 (their dims before the
// last two), or an hg::Error naming both shapes.
Shape matmul_batch_shape(const Tensor& a, const Tensor& b) {
  const int64_t na = a.dim() - 2, nb = b.dim() - 2;
  const int64_t n = std::max(na, nb);
  Shape out(static_cast<size_t>(n), 1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t ia = i - (n - na), ib = i - (n - nb);
    const int64_t da = ia >= 0 ? a.size(ia) : 1, db = ib >= 0 ? b.size(ib) : 1;
    HG_CHECK(da == db || da == 1 || db == 1, "matmul: batch sizes differ: ", a.shape_str(), " @ ", b.shape_str(),
             ": batch dims ", da, " and ", db, " do not broadcast (each pair must be equal or 1)");
    out[static_cast<size_t>(i)] = da == 1 ? db : da;
  }
  return out;
}

void set_allow_tf32(bool allow) { g_allow_tf32.store(allow); }
bool allow_tf32() { return g_allow_tf32.load(); }

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b, const Tensor& bias) {
  HG_CHECK(a.defined() && b.defined(), "matmul: both operands must be defined tensors");
  HG_CHECK(a.dim() >= 2 && b.dim() >= 2, "matmul: operands must be 2-D or batched (rank >= 2), got ", a.shape_str(),
           " and ", b.shape_str(), "; hg::matmul (autograd) takes 1-D vectors as torch.matmul does");
  HG_CHECK(a.device() == b.device(), "matmul: operands are on different devices (", a.device(),
           " and ", b.device(), "); move one with .to(device)");
  HG_CHECK(a.dtype() == b.dtype(), "matmul: operand dtypes differ (", a.dtype(), " and ",
           b.dtype(), "); convert one with .to(dtype) (autocast does this for you)");
  HG_CHECK(is_floating(a.dtype()) && !is_fp8(a.dtype()), "matmul: needs floating operands (f32, f16, bf16, f64), got ",
           a.dtype(), is_fp8(a.dtype()) ? " (fp8 is a storage format: scaled fp8 products are ops::fp8_linear)" : "");
  const int64_t m = trans_a ? a.size(-1) : a.size(-2);
  const int64_t ka = trans_a ? a.size(-2) : a.size(-1);
  const int64_t kb = trans_b ? b.size(-1) : b.size(-2);
  const int64_t n = trans_b ? b.size(-2) : b.size(-1);
  HG_CHECK(ka == kb, "shape mismatch in matmul: ", a.shape_str(), trans_a ? "^T" : "", " @ ",
           b.shape_str(), trans_b ? "^T" : "", ": inner dims ", ka, " != ", kb);
  const Shape batch_shape = matmul_batch_shape(a, b);
  Shape out_shape = batch_shape;
  out_shape.push_back(m);
  out_shape.push_back(n);
  if (const Tensor rows = fold_rows(a, b, trans_a, bias); rows.defined()) {
    return matmul(rows, b, false, trans_b, bias).view(out_shape);
  }
  Tensor out = empty(out_shape, {.dtype = a.dtype(), .device = a.device()});
  if (a.is_cpu()) ::hg::detail::sync_cpu_threads();  // the BLAS team the thread governor allows
  if (bias.defined()) {
    HG_CHECK(bias.device() == a.device(), "matmul: bias is on ", bias.device(), " but operands are on ",
             a.device());
  }
  // A 2-D GEMM with a per-column bias in the operands' dtype, packed: the
  // bias added in fp32 before the one rounding by the library, nothing
  // pre-filled (Note [Bias epilogue]): cuBLASLt's BIAS epilogue on CUDA,
  // oneDNN's bias argument on the CPU (f32, bf16).
  if (bias.defined() && batch_shape.empty() && out.numel() > 0 && ka > 0 && bias.dtype() == a.dtype() &&
      bias.numel() == n && (n == 1 || bias.stride(-1) == 1) &&
      (a.is_cuda() ||
       ((a.dtype() == kF32 || a.dtype() == kBF16) && std::strncmp(cpu::gemm_path(a.dtype()), "onednn", 6) == 0))) {
    const Operand A = layout(a, trans_a);
    const Operand B = layout(b, trans_b);
    GemmArgs args = gemm_args(a, A, B, m, n, ka);
    args.a = A.data;
    args.b = B.data;
    args.c = out.data_ptr();
    args.epilogue = GemmEpilogue::bias;
    args.bias = const_cast<void*>(bias.data_ptr());
    const profiler::WorkScope profiled = detail::profile_gemm(args, a.is_cuda());  // Note [Profiler]
    bool done = profiled.skip();  // count-only profiling: recorded, not run
#if defined(HG_WITH_CUDA)
    if (!done && a.is_cuda()) done = cuda::gemm_lt(args);
#endif
    if (!done && a.is_cpu()) done = cpu::gemm_native(args);
    if (done) {
      detail::note_gemm_call(args);
      return out;
    }
  }
  float beta = 0.0f;
  if (bias.defined()) {
    // The bias is written into out and the GEMM accumulates onto it (beta = 1):
    // one rounding, bias added in fp32.
    copy_into(out, bias.expand(out_shape));
    beta = 1.0f;
  }
  if (out.numel() == 0) return out;
  if (ka == 0) {  // empty inner dim: the product is zero (plus bias)
    if (!bias.defined()) out.zero_();
    return out;
  }
  const Operand A = layout(a, trans_a);
  const Operand B = layout(b, trans_b);
  // Batch strides (Note [Batched GEMM strides]).
  const std::vector<int64_t> sa_all = batch_strides(A.storage_owner, batch_shape);
  const std::vector<int64_t> sb_all = batch_strides(B.storage_owner, batch_shape);
  BatchPlan plan;
  for (size_t i = 0; i < batch_shape.size(); ++i) {
    if (batch_shape[i] == 1) continue;
    plan.sizes.push_back(batch_shape[i]);
    plan.sa.push_back(sa_all[i]);
    plan.sb.push_back(sb_all[i]);
    plan.sc.push_back(out.stride(static_cast<int64_t>(i)));
  }
  const int64_t nbd = static_cast<int64_t>(plan.sizes.size());
  plan.inner_begin = nbd == 0 ? 0 : nbd - 1;
  auto collapses = [&](const std::vector<int64_t>& s, int64_t i) {
    return s[static_cast<size_t>(i)] == s[static_cast<size_t>(i + 1)] * plan.sizes[static_cast<size_t>(i + 1)];
  };
  while (plan.inner_begin > 0 && collapses(plan.sa, plan.inner_begin - 1) && collapses(plan.sb, plan.inner_begin - 1) &&
         collapses(plan.sc, plan.inner_begin - 1)) {
    --plan.inner_begin;
  }
  int64_t inner_batch = 1, outer_batch = 1;
  for (int64_t i = 0; i < nbd; ++i) {
    (i >= plan.inner_begin ? inner_batch : outer_batch) *= plan.sizes[static_cast<size_t>(i)];
  }
  GemmArgs args = gemm_args(a, A, B, m, n, ka);
  args.batch = inner_batch;
  args.stride_a = nbd == 0 ? 0 : plan.sa.back();
  args.stride_b = nbd == 0 ? 0 : plan.sb.back();
  args.stride_c = nbd == 0 ? m * n : plan.sc.back();
  args.beta = beta;
  // Two levels of batch whose strides do not collapse (attention's [B, H]
  // over the fused qkv projection): one oneDNN call with an outer batch level
  // on the CPU where oneDNN takes it, not one call per outer entry (each a
  // few microseconds of oneDNN's per-call cost on products of ~1 MFLOP).
  if (a.is_cpu() && nbd == 2 && plan.inner_begin == 1) {
    GemmArgs all = args;
    all.a = A.data;
    all.b = B.data;
    all.c = out.data_ptr();
    all.outer_batch = plan.sizes[0];
    all.outer_stride_a = plan.sa[0];
    all.outer_stride_b = plan.sb[0];
    all.outer_stride_c = plan.sc[0];
    if (cpu::gemm_native_takes(all)) {
      detail::note_gemm_call(all);
      const profiler::WorkScope profiled = detail::profile_gemm(all, false);  // Note [Profiler]
      if (!profiled.skip()) cpu::gemm_native(all);
      return out;
    }
  }
  const auto esize = static_cast<int64_t>(a.element_size());
  for (int64_t o = 0; o < outer_batch; ++o) {
    // Element offsets of this outer batch index in a, b and out.
    int64_t off_a = 0, off_b = 0, off_c = 0, rest = o;
    for (int64_t i = plan.inner_begin - 1; i >= 0; --i) {
      const auto ui = static_cast<size_t>(i);
      const int64_t idx = rest % plan.sizes[ui];
      rest /= plan.sizes[ui];
      off_a += idx * plan.sa[ui];
      off_b += idx * plan.sb[ui];
      off_c += idx * plan.sc[ui];
    }
    args.a = static_cast<const char*>(A.data) + off_a * esize;
    args.b = static_cast<const char*>(B.data) + off_b * esize;
    args.c = static_cast<char*>(out.data_ptr()) + off_c * esize;
    detail::note_gemm_call(args);
    const profiler::WorkScope profiled = detail::profile_gemm(args, a.is_cuda());  // Note [Profiler]
    if (profiled.skip()) continue;  // count-only profiling: recorded, not run
#if defined(HG_WITH_CUDA)
    if (a.is_cuda()) {
      cuda::gemm(args);
      continue;
    }
#endif
    cpu::gemm(args);
  }
  return out;
}

namespace detail {
namespace {
std::atomic<int64_t> g_gemm_calls{0};
std::atomic<bool> g_last_trans_a{false}, g_last_trans_b{false};
std::atomic<int64_t> g_last_batch{0};
}  // namespace
void note_gemm_call(const GemmArgs& args) {
  g_gemm_calls.fetch_add(1, std::memory_order_relaxed);
  g_last_trans_a.store(args.trans_a, std::memory_order_relaxed);
  g_last_trans_b.store(args.trans_b, std::memory_order_relaxed);
  g_last_batch.store(args.batch, std::memory_order_relaxed);
}
profiler::WorkScope profile_gemm(const GemmArgs& args, bool cuda) {
  if (!profiler::active()) return profiler::WorkScope(profiler::Kind::library, nullptr);
  // Work a GEMM needs: A and B read once, C written (and read with beta != 0).
  const double esize = static_cast<double>(dtype_size(args.dtype));
  const double batch = static_cast<double>(args.batch * args.outer_batch), m = static_cast<double>(args.m),
               n = static_cast<double>(args.n), k = static_cast<double>(args.k);
  const double a_elems = (args.stride_a == 0 ? 1 : batch) * m * k, b_elems = (args.stride_b == 0 ? 1 : batch) * k * n;
  const double c_elems = batch * m * n * (args.beta != 0.0f ? 2 : 1);
  profiler::declare_work((a_elems + b_elems + c_elems) * esize, 2.0 * batch * m * n * k);
  static const char* const kCudaNames[] = {"cublas gemm f32", "cublas gemm f16", "cublas gemm bf16", "cublas gemm f64"};
  const int t = args.dtype == DType::F16 ? 1 : args.dtype == DType::BF16 ? 2 : args.dtype == DType::F64 ? 3 : 0;
  return profiler::WorkScope(cuda ? profiler::Kind::library : profiler::Kind::cpu_kernel,
                             cuda ? kCudaNames[t] : cpu::gemm_path(args.dtype));
}

GemmCallStats gemm_call_stats() {
  return {g_gemm_calls.load(), g_last_trans_a.load(), g_last_trans_b.load(), g_last_batch.load()};
}
}  // namespace detail

}  // namespace hg::ops
