// Scaled-dot-product attention forward and backward through cuDNN 9's graph
// (backend) API: the "fused flash attention fprop" and "bprop" graphs of the
// cuDNN developer guide, built from cudnnBackend* descriptors (the operations
// cudnn-frontend's sdpa and sdpa_backward nodes emit). The cuda-emu build
// serves the same calls from the stand-in in runtime/emu/runtime_cudnn_graph.cpp,
// which recognises both graphs and computes them on the CPU, so this file is
// identical in both builds. Ops layer and support rules:
// kernels/attention/attention_cudnn.h.
//
// Formula, per (b, h), with s_ij = scale * q_i . k_j and, when causal,
// s_ij = lowest float for j > i (top-left aligned):
//   forward:  m_i = max_j s_ij,  z_i = sum_j exp(s_ij - m_i),  lse_i = m_i + log z_i,
//             out_i = sum_j P_ij v_j,  P_ij = exp(s_ij - lse_i)
//   backward: D_i = dO_i . O_i,  dP_ij = dO_i . v_j,  dS_ij = scale P_ij (dP_ij - D_i),
//             dV_j = sum_i P_ij dO_i,  dK_j = sum_i dS_ij q_i,  dQ_i = sum_j dS_ij k_j
//
// The forward graph (uids: Q 1, K 2, V 3, O 4, Stats 5, the by-value scalars
// scale 6 and the causal fill 7; the rest virtual, f32):
//   S0 = matmul(Q [B,H,L,D], K^T [B,H,D,S])   K^T: k's strides with the last two swapped
//   S1 = S0 * scale                            pointwise MUL, scale by value
//   causal: R = gen_index(S1, axis 2), C = gen_index(S1, axis 3) (int32),
//           G = R >= C (boolean), S = select(G ? S1 : fill)  BINARY_SELECT
//   M = reduce_max(S) [B,H,L,1],  E = exp(S - M),  Z = reduce_add(E) [B,H,L,1]
//   Stats = M + log Z  [B,H,L,1] f32 (the lse the backward needs)
//   P = E / Z,  O = matmul(P, V [B,H,S,D]) -> [B,H,L,D] in q's dtype
//
// The backward graph (uids as above, plus dO 8, dQ 9, dK 10, dV 11, the f32
// row sums D 12 (a buffer of ours, written by the graph), the by-value one
// 13 and, in the accumulating variant, the f32 dQ accumulator 14):
//   D   = reduce_add(dO * O) [B,H,L,1];  D' = D * one  -> uid 12 (non-virtual f32)
//   S1  = matmul(Q, K^T) * scale,  causal select as in the forward
//   P   = exp(S - Stats)                               recomputed from the saved lse
//   P^T = reshape(P) [B,H,S,L], strides (.., 1, S), q's dtype
//   dV  = matmul(P^T, dO)
//   dP  = matmul(dO, V^T [B,H,D,S])                    V^T: v's strides, last two swapped
//   dS  = (dP - D') * P * scale
//   dS^T = reshape(dS) [B,H,S,L], q's dtype;  dK = matmul(dS^T, Q)
//   K   = reshape(K^T) [B,H,S,D] (k's strides);  dQ = matmul(dS, K)
//   accumulating variant: dQacc = matmul(dS, K) [B,H,L,D] f32 (ours, zeroed
//   before each call), dQ = identity(dQacc)
// The direct-dQ graph is cuDNN's deterministic bprop (cudnn-frontend selects
// it for its deterministic algorithm): dQ is reduced over key tiles in a fixed
// order. The accumulating graph sums dQ with float atomics (not bit-
// reproducible); it is built only when cuDNN has no plan for the direct one,
// with a warning.
// cuDNN fuses each graph into one flash-attention kernel (S, P, dP and dS
// never reach global memory).
//
// Layouts: q, k, v, out, d_out, dq, dk, dv by strides (the [B, T, 3, H, D]
// fused-qkv view or [B, H, T, D]; the head dim contiguous, rows 16-byte
// aligned, no copies); Stats is the caller's lse [B, H, L] f32 viewed as
// [B, H, L, 1].
//
// Bytes and FLOPs per call (the kernels' ideal): the forward reads q, k, v
// once (2 bytes * D * (L + 2 S) * B * H), writes out and lse (2 D L + 4 L per
// (b, h)); 4 * D * pairs FLOPs (QK^T and PV), pairs = L * S, or the causal
// lower triangle. The backward reads q, k, v, out, d_out and lse and writes
// dq, dk, dv (2 D (4 L + 4 S) bytes per (b, h), plus 12 L for lse and D);
// 10 * D * pairs FLOPs (S recomputed, dV, dP, dK, dQ).
//
// Plans: building one (heuristics, then the first engine config whose plan
// finalizes) takes milliseconds to seconds on a GPU, so plans are cached by
// (graph, device, dtype, causal, the sizes and strides of every tensor); a
// plan is built with the calling thread's handle and executed with the handle
// of whichever thread calls (cudnn_handle(): one per thread and device). The
// workspace (cuDNN's, then the backward's row sums and dQ accumulator) comes
// from the caching allocator on the current stream per call.
//
// Precision contract: 16-bit in and out; the matmuls' compute type and every
// f32 virtual tensor fp32 (cuDNN rounds P to the input dtype before P V, as
// FlashAttention-2 does; the backward graph declares P^T and dS^T in the input
// dtype, so dV and dK use rounded P and dS); Stats, D and dQacc fp32.
#include <cudnn.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "kernels/attention/attention_cudnn.h"
#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/runtime.h"

namespace hg::cuda {

namespace {

enum Uid : int64_t {
  kQ = 1,
  kK = 2,
  kV = 3,
  kO = 4,
  kStats = 5,
  kScale = 6,
  kFill = 7,
  kDO = 8,
  kDQ = 9,
  kDK = 10,
  kDV = 11,
  kRowSum = 12,
  kOne = 13,
  kDQAccum = 14,
  kVirtual = 100
};

// One backend descriptor, destroyed with its owner.
class BackendDesc {
 public:
  explicit BackendDesc(cudnnBackendDescriptorType_t type) { HG_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d_)); }
  ~BackendDesc() {
    if (d_ != nullptr) (void)cudnnBackendDestroyDescriptor(d_);
  }
  BackendDesc(BackendDesc&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  BackendDesc& operator=(BackendDesc&&) = delete;
  BackendDesc(const BackendDesc&) = delete;
  BackendDesc& operator=(const BackendDesc&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const void* values) {
    HG_CUDNN_CHECK(cudnnBackendSetAttribute(d_, name, type, count, values));
  }
  void set_int(cudnnBackendAttributeName_t name, int64_t value) { set(name, CUDNN_TYPE_INT64, 1, &value); }
  void set_type(cudnnBackendAttributeName_t name, cudnnDataType_t value) { set(name, CUDNN_TYPE_DATA_TYPE, 1, &value); }
  void set_desc(cudnnBackendAttributeName_t name, const BackendDesc& value) {
    cudnnBackendDescriptor_t p = value.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p);
  }
  void finalize() { HG_CUDNN_CHECK(cudnnBackendFinalize(d_)); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// A built execution plan and every descriptor it was built from (kept alive
// with it).
struct Plan {
  std::deque<BackendDesc> keep;  // a deque: references to its elements stay valid as it grows
  std::unique_ptr<BackendDesc> plan;
  int64_t workspace = 0;
  bool dq_accumulate = false;  // backward: the accumulating graph (uid 14 needs a zeroed f32 buffer)
};

std::vector<int64_t> dims_of(const Tensor& t) { return {t.size(0), t.size(1), t.size(2), t.size(3)}; }
std::vector<int64_t> strides_of(const Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)}; }
// t as its transpose in the last two dims (a view by strides, no copy).
std::vector<int64_t> dims_t(const Tensor& t) { return {t.size(0), t.size(1), t.size(3), t.size(2)}; }
std::vector<int64_t> strides_t(const Tensor& t) { return {t.stride(0), t.stride(1), t.stride(3), t.stride(2)}; }

cudnnDataType_t cudnn_type(DType t) { return t == kBF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF; }

// Builds the graph of the file comment and its plan; throws hg::Error naming
// the step and the problem when cuDNN refuses.
class GraphBuilder {
 public:
  Plan plan;

  const BackendDesc& tensor(int64_t uid, std::vector<int64_t> dims, std::vector<int64_t> strides, cudnnDataType_t type,
                            bool is_virtual, bool by_value = false) {
    BackendDesc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    t.set_type(CUDNN_ATTR_TENSOR_DATA_TYPE, type);
    t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, static_cast<int64_t>(dims.size()), dims.data());
    t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, static_cast<int64_t>(strides.size()), strides.data());
    t.set_int(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid);
    t.set_int(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 16);
    t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    if (by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
    t.finalize();
    return keep(std::move(t));
  }
  // A virtual f32 (or `type`) tensor of `dims`, packed.
  const BackendDesc& scratch(std::vector<int64_t> dims, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    return tensor(next_virtual_++, dims, packed(dims), type, true);
  }
  // A virtual tensor with the given strides (a transposed view of a packed one).
  const BackendDesc& scratch_strided(std::vector<int64_t> dims, std::vector<int64_t> strides, cudnnDataType_t type) {
    return tensor(next_virtual_++, std::move(dims), std::move(strides), type, true);
  }
  static std::vector<int64_t> packed(const std::vector<int64_t>& dims) {
    std::vector<int64_t> strides(dims.size(), 1);
    for (size_t i = dims.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * dims[i + 1];
    return strides;
  }

  // y = x with other dims and strides (here: the transpose of the last two).
  void reshape(const BackendDesc& x, const BackendDesc& y) {
    BackendDesc op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
    op.set_desc(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
    op.finalize();
    ops_.push_back(keep(std::move(op)).get());
  }

  void matmul(const BackendDesc& a, const BackendDesc& b, const BackendDesc& c) {
    BackendDesc mm(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    mm.set_type(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT);
    mm.finalize();
    BackendDesc op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
    op.finalize();
    keep(std::move(mm));
    ops_.push_back(keep(std::move(op)).get());
  }

  // y = mode(x[, b[, t]]); axis >= 0 for GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, const BackendDesc& x, const BackendDesc* b, const BackendDesc* t,
                 const BackendDesc& y, cudnnDataType_t precision = CUDNN_DATA_FLOAT, int64_t axis = -1) {
    BackendDesc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    pw.set_type(CUDNN_ATTR_POINTWISE_MATH_PREC, precision);
    if (axis >= 0) pw.set_int(CUDNN_ATTR_POINTWISE_AXIS, axis);
    pw.finalize();
    BackendDesc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b != nullptr) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    if (t != nullptr) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    op.finalize();
    keep(std::move(pw));
    ops_.push_back(keep(std::move(op)).get());
  }

  void reduction(cudnnReduceTensorOp_t what, const BackendDesc& x, const BackendDesc& y) {
    BackendDesc r(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    r.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &what);
    r.set_type(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_DATA_FLOAT);
    r.finalize();
    BackendDesc op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
    op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
    op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, r);
    op.finalize();
    keep(std::move(r));
    ops_.push_back(keep(std::move(op)).get());
  }

  // The operation graph, the heuristics' engine configs, and the first one
  // whose plan finalizes. Returns the cuDNN status of the last refusal (or
  // success).
  cudnnStatus_t build(cudnnHandle_t handle) {
    // The graph and plan HANDLE attributes are deprecated in cuDNN 9 (execute
    // takes the handle) but still read for the device; set, as every backend
    // API user does.
    BackendDesc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(ops_.size()),
              ops_.data());
    if (const cudnnStatus_t s = cudnnBackendFinalize(graph.get()); s != CUDNN_STATUS_SUCCESS) return s;
    const BackendDesc& g = keep(std::move(graph));
    BackendDesc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, g);
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (const cudnnStatus_t s = cudnnBackendFinalize(heur.get()); s != CUDNN_STATUS_SUCCESS) return s;
    int64_t count = 0;
    if (const cudnnStatus_t s = cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr);
        s != CUDNN_STATUS_SUCCESS)
      return s;
    count = std::min<int64_t>(count, 8);
    if (count == 0) return CUDNN_STATUS_NOT_SUPPORTED;
    std::vector<BackendDesc> configs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
      configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      raw.push_back(configs.back().get());
    }
    int64_t returned = 0;
    if (const cudnnStatus_t s = cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                         CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned, raw.data());
        s != CUDNN_STATUS_SUCCESS)
      return s;
    cudnnStatus_t last = CUDNN_STATUS_NOT_SUPPORTED;
    for (int64_t i = 0; i < std::min(returned, count); ++i) {
      auto p = std::make_unique<BackendDesc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      p->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
      p->set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[static_cast<size_t>(i)]);
      last = cudnnBackendFinalize(p->get());
      if (last != CUDNN_STATUS_SUCCESS) continue;
      int64_t n = 0;
      HG_CUDNN_CHECK(cudnnBackendGetAttribute(p->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                              &n, &plan.workspace));
      plan.plan = std::move(p);
      keep(std::move(configs[static_cast<size_t>(i)]));
      keep(std::move(heur));
      return CUDNN_STATUS_SUCCESS;
    }
    return last;
  }

 private:
  const BackendDesc& keep(BackendDesc d) {
    plan.keep.push_back(std::move(d));
    return plan.keep.back();
  }
  std::vector<cudnnBackendDescriptor_t> ops_;
  int64_t next_virtual_ = kVirtual;
};

std::string problem_text(const Tensor& q, const Tensor& k, bool causal) {
  return "q " + q.shape_str() + ", k " + k.shape_str() + ", " + std::string(dtype_name(q.dtype())) +
         (causal ? ", causal" : "");
}

// S = scale * Q K^T, causal-masked when asked (the forward's and the
// backward's first nodes); returns the scores' descriptor.
const BackendDesc& masked_scores(GraphBuilder& gb, const BackendDesc& tq, const BackendDesc& tkt,
                                 const BackendDesc& tscale, std::vector<int64_t> dims, bool causal) {
  const BackendDesc& s0 = gb.scratch(dims);
  gb.matmul(tq, tkt, s0);
  const BackendDesc& s1 = gb.scratch(dims);
  gb.pointwise(CUDNN_POINTWISE_MUL, s0, &tscale, nullptr, s1);
  if (!causal) return s1;
  const BackendDesc& tfill = gb.tensor(kFill, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, false, true);
  const BackendDesc& row = gb.scratch(dims, CUDNN_DATA_INT32);
  gb.pointwise(CUDNN_POINTWISE_GEN_INDEX, s1, nullptr, nullptr, row, CUDNN_DATA_FLOAT, 2);
  const BackendDesc& col = gb.scratch(dims, CUDNN_DATA_INT32);
  gb.pointwise(CUDNN_POINTWISE_GEN_INDEX, s1, nullptr, nullptr, col, CUDNN_DATA_FLOAT, 3);
  const BackendDesc& keep_mask = gb.scratch(dims, CUDNN_DATA_BOOLEAN);
  gb.pointwise(CUDNN_POINTWISE_CMP_GE, row, &col, nullptr, keep_mask, CUDNN_DATA_BOOLEAN);
  const BackendDesc& masked = gb.scratch(dims);
  gb.pointwise(CUDNN_POINTWISE_BINARY_SELECT, s1, &tfill, &keep_mask, masked);
  return masked;
}

Plan build_forward_plan(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  const int64_t b = q.size(0), h = q.size(1), l = q.size(2), s = k.size(2);
  const cudnnDataType_t type = cudnn_type(q.dtype());
  GraphBuilder gb;
  const BackendDesc& tq = gb.tensor(kQ, dims_of(q), strides_of(q), type, false);
  const BackendDesc& tkt = gb.tensor(kK, dims_t(k), strides_t(k), type, false);
  const BackendDesc& tv = gb.tensor(kV, dims_of(v), strides_of(v), type, false);
  const BackendDesc& to = gb.tensor(kO, dims_of(out), strides_of(out), type, false);
  const BackendDesc& tstats = gb.tensor(kStats, {b, h, l, 1}, {h * l, l, 1, 1}, CUDNN_DATA_FLOAT, false);
  const BackendDesc& tscale = gb.tensor(kScale, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, false, true);

  const BackendDesc& scores = masked_scores(gb, tq, tkt, tscale, {b, h, l, s}, causal);
  const BackendDesc& m = gb.scratch({b, h, l, 1});
  gb.reduction(CUDNN_REDUCE_TENSOR_MAX, scores, m);
  const BackendDesc& centred = gb.scratch({b, h, l, s});
  gb.pointwise(CUDNN_POINTWISE_SUB, scores, &m, nullptr, centred);
  const BackendDesc& e = gb.scratch({b, h, l, s});
  gb.pointwise(CUDNN_POINTWISE_EXP, centred, nullptr, nullptr, e);
  const BackendDesc& z = gb.scratch({b, h, l, 1});
  gb.reduction(CUDNN_REDUCE_TENSOR_ADD, e, z);
  const BackendDesc& log_z = gb.scratch({b, h, l, 1});
  gb.pointwise(CUDNN_POINTWISE_LOG, z, nullptr, nullptr, log_z);
  gb.pointwise(CUDNN_POINTWISE_ADD, m, &log_z, nullptr, tstats);
  const BackendDesc& p = gb.scratch({b, h, l, s});
  gb.pointwise(CUDNN_POINTWISE_DIV, e, &z, nullptr, p);
  gb.matmul(p, tv, to);

  const cudnnStatus_t status = gb.build(cudnn_handle());
  HG_CHECK(status == CUDNN_STATUS_SUCCESS, "scaled_dot_product_attention (cudnn path): cuDNN ", cudnnGetVersion(),
           " builds no execution plan for the fused attention graph (", problem_text(q, k, causal),
           "): ", cudnnGetErrorString(status), "; use the flash or math path (HG_ATTENTION=flash)");
  return std::move(gb.plan);
}

// The operands of one backward call.
struct BackwardArgs {
  const Tensor &dq, &dk, &dv, &d_out, &q, &k, &v, &out;
  bool causal;
};

// The backward graph of the file comment; the accumulating variant when
// `accumulate`. Returns cuDNN's status (the plan in `plan` on success).
cudnnStatus_t build_backward_graph(const BackwardArgs& a, bool accumulate, Plan* plan) {
  const int64_t b = a.q.size(0), h = a.q.size(1), l = a.q.size(2), s = a.k.size(2), d = a.q.size(3);
  const cudnnDataType_t type = cudnn_type(a.q.dtype());
  GraphBuilder gb;
  const BackendDesc& tq = gb.tensor(kQ, dims_of(a.q), strides_of(a.q), type, false);
  const BackendDesc& tkt = gb.tensor(kK, dims_t(a.k), strides_t(a.k), type, false);
  const BackendDesc& tvt = gb.tensor(kV, dims_t(a.v), strides_t(a.v), type, false);
  const BackendDesc& to = gb.tensor(kO, dims_of(a.out), strides_of(a.out), type, false);
  const BackendDesc& tdo = gb.tensor(kDO, dims_of(a.d_out), strides_of(a.d_out), type, false);
  const BackendDesc& tstats = gb.tensor(kStats, {b, h, l, 1}, {h * l, l, 1, 1}, CUDNN_DATA_FLOAT, false);
  const BackendDesc& tscale = gb.tensor(kScale, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, false, true);
  const BackendDesc& tone = gb.tensor(kOne, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, false, true);
  const BackendDesc& tdq = gb.tensor(kDQ, dims_of(a.dq), strides_of(a.dq), type, false);
  const BackendDesc& tdk = gb.tensor(kDK, dims_of(a.dk), strides_of(a.dk), type, false);
  const BackendDesc& tdv = gb.tensor(kDV, dims_of(a.dv), strides_of(a.dv), type, false);

  // D = rowsum(dO * O), stored (uid 12) for the dS nodes
  const BackendDesc& do_o = gb.scratch({b, h, l, d});
  gb.pointwise(CUDNN_POINTWISE_MUL, tdo, &to, nullptr, do_o);
  const BackendDesc& row_sum = gb.scratch({b, h, l, 1});
  gb.reduction(CUDNN_REDUCE_TENSOR_ADD, do_o, row_sum);
  const BackendDesc& trow = gb.tensor(kRowSum, {b, h, l, 1}, {h * l, l, 1, 1}, CUDNN_DATA_FLOAT, false);
  gb.pointwise(CUDNN_POINTWISE_MUL, row_sum, &tone, nullptr, trow);

  // P = exp(S - Stats), and dV = P^T dO
  const BackendDesc& scores = masked_scores(gb, tq, tkt, tscale, {b, h, l, s}, a.causal);
  const BackendDesc& centred = gb.scratch({b, h, l, s});
  gb.pointwise(CUDNN_POINTWISE_SUB, scores, &tstats, nullptr, centred);
  const BackendDesc& p = gb.scratch({b, h, l, s});
  gb.pointwise(CUDNN_POINTWISE_EXP, centred, nullptr, nullptr, p);
  const std::vector<int64_t> t_dims{b, h, s, l}, t_strides{h * l * s, l * s, 1, s};  // [B,H,L,S] packed, transposed
  const BackendDesc& pt = gb.scratch_strided(t_dims, t_strides, type);
  gb.reshape(p, pt);
  gb.matmul(pt, tdo, tdv);

  // dS = (dO V^T - D) * P * scale, and dK = dS^T Q
  const BackendDesc& dp = gb.scratch({b, h, l, s});
  gb.matmul(tdo, tvt, dp);
  const BackendDesc& dp_centred = gb.scratch({b, h, l, s});
  gb.pointwise(CUDNN_POINTWISE_SUB, dp, &trow, nullptr, dp_centred);
  const BackendDesc& ds_unscaled = gb.scratch({b, h, l, s});
  gb.pointwise(CUDNN_POINTWISE_MUL, dp_centred, &p, nullptr, ds_unscaled);
  const BackendDesc& ds = gb.scratch({b, h, l, s});
  gb.pointwise(CUDNN_POINTWISE_MUL, ds_unscaled, &tscale, nullptr, ds);
  const BackendDesc& dst = gb.scratch_strided(t_dims, t_strides, type);
  gb.reshape(ds, dst);
  gb.matmul(dst, tq, tdk);

  // dQ = dS K (K: K^T reshaped back, k's own strides)
  const BackendDesc& tk = gb.scratch_strided(dims_of(a.k), strides_of(a.k), type);
  gb.reshape(tkt, tk);
  if (accumulate) {
    const BackendDesc& acc =
        gb.tensor(kDQAccum, {b, h, l, d}, GraphBuilder::packed({b, h, l, d}), CUDNN_DATA_FLOAT, false);
    gb.matmul(ds, tk, acc);
    gb.pointwise(CUDNN_POINTWISE_IDENTITY, acc, nullptr, nullptr, tdq);
  } else {
    gb.matmul(ds, tk, tdq);
  }
  const cudnnStatus_t status = gb.build(cudnn_handle());
  if (status == CUDNN_STATUS_SUCCESS) {
    *plan = std::move(gb.plan);
    plan->dq_accumulate = accumulate;
  }
  return status;
}

Plan build_backward_plan(const BackwardArgs& a, CudnnSdpaBackwardGraph graph) {
  Plan plan;
  cudnnStatus_t status = CUDNN_STATUS_NOT_SUPPORTED;
  if (graph != CudnnSdpaBackwardGraph::accumulate_dq) {
    status = build_backward_graph(a, false, &plan);
    if (status == CUDNN_STATUS_SUCCESS) return plan;
  }
  if (graph != CudnnSdpaBackwardGraph::direct_dq) {
    if (graph == CudnnSdpaBackwardGraph::automatic) {
      HG_LOG_WARN(
          "scaled_dot_product_attention (cudnn path): cuDNN {} has no plan for the deterministic backward graph ({}: "
          "{}); using the dQ-accumulating graph, whose dq is not bit-reproducible",
          cudnnGetVersion(), problem_text(a.q, a.k, a.causal), cudnnGetErrorString(status));
    }
    status = build_backward_graph(a, true, &plan);
    if (status == CUDNN_STATUS_SUCCESS) return plan;
  }
  HG_FAIL("scaled_dot_product_attention (cudnn path): cuDNN ", cudnnGetVersion(),
          " builds no execution plan for the fused attention backward graph (", problem_text(a.q, a.k, a.causal),
          "): ", cudnnGetErrorString(status), "; use the flash or math path (HG_ATTENTION=flash)");
}

// The plan cache, never destroyed: its plans hold cuDNN descriptors, and at
// exit cuDNN (or the emulator's stand-in) may already be gone when a static
// of this file would be destroyed. Forward and backward plans share it (the
// key's first element says which graph).
struct PlanCache {
  std::mutex mutex;
  std::map<std::vector<int64_t>, std::shared_ptr<const Plan>> plans;
};
PlanCache& plan_cache() {
  static auto* cache = new PlanCache;
  return *cache;
}

enum class GraphKind : int64_t { forward = 0, backward_auto = 1, backward_direct = 2, backward_accumulate = 3 };

std::vector<int64_t> plan_key(GraphKind kind, const Tensor& q, bool causal, std::initializer_list<const Tensor*> ts) {
  std::vector<int64_t> key{static_cast<int64_t>(kind), current_device(), static_cast<int64_t>(q.dtype()),
                           causal ? 1 : 0};
  for (const Tensor* t : ts) {
    for (int64_t i = 0; i < 4; ++i) key.push_back(t->size(i));
    for (int64_t i = 0; i < 4; ++i) key.push_back(t->stride(i));
  }
  return key;
}

template <typename Build>
std::shared_ptr<const Plan> cached_plan(std::vector<int64_t> key, Build&& build) {
  {
    const std::lock_guard<std::mutex> lock(plan_cache().mutex);
    auto it = plan_cache().plans.find(key);
    if (it != plan_cache().plans.end()) return it->second;
  }
  auto plan = std::make_shared<const Plan>(build());
  const std::lock_guard<std::mutex> lock(plan_cache().mutex);
  return plan_cache().plans.emplace(std::move(key), std::move(plan)).first->second;
}

// A workspace from the caching allocator on the current stream; freed after
// the call was enqueued (stream-ordered reuse is safe).
struct Workspace {
  void* ptr = nullptr;
  explicit Workspace(int64_t bytes) {
    if (bytes > 0) ptr = caching_allocator().allocate(static_cast<size_t>(bytes));
  }
  ~Workspace() { caching_allocator().free(ptr); }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
};

int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

void execute(const Plan& plan, const std::vector<int64_t>& uids, const std::vector<void*>& ptrs, void* workspace) {
  BackendDesc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()), uids.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(ptrs.size()), ptrs.data());
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
  pack.finalize();
  HG_CUDNN_CHECK(cudnnBackendExecute(cudnn_handle(), plan.plan->get(), pack.get()));
}

}  // namespace

std::string cudnn_attention_device_reason() {
  const cudaDeviceProp& prop = device_properties();
  if (prop.major < 8) {
    return "the cuDNN fused attention needs compute capability 8.0 or newer, the device is sm_" +
           std::to_string(prop.major) + std::to_string(prop.minor);
  }
  if (cudnnGetVersion() < 90000) {
    return "the cuDNN path needs cuDNN 9 or newer, loaded: " + std::to_string(cudnnGetVersion());
  }
  return {};
}

size_t cudnn_attention_plan_count() {
  const std::lock_guard<std::mutex> lock(plan_cache().mutex);
  return plan_cache().plans.size();
}

void cudnn_attention_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             double scale, bool causal) {
  const std::shared_ptr<const Plan> plan = cached_plan(plan_key(GraphKind::forward, q, causal, {&q, &k, &v, &out}),
                                                       [&] { return build_forward_plan(out, q, k, v, causal); });
  const float scale_value = static_cast<float>(scale);
  const float fill = std::numeric_limits<float>::lowest();
  std::vector<int64_t> uids{kQ, kK, kV, kO, kStats, kScale};
  std::vector<void*> ptrs{q.data_ptr(),   k.data_ptr(),   v.data_ptr(),
                          out.data_ptr(), lse.data_ptr(), const_cast<float*>(&scale_value)};
  if (causal) {
    uids.push_back(kFill);
    ptrs.push_back(const_cast<float*>(&fill));
  }
  const Workspace ws(plan->workspace);
  execute(*plan, uids, ptrs, ws.ptr);
}

CudnnSdpaBackwardGraph cudnn_attention_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv,
                                                const Tensor& d_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                                const Tensor& out, const Tensor& lse, double scale, bool causal,
                                                CudnnSdpaBackwardGraph graph) {
  const GraphKind kind = graph == CudnnSdpaBackwardGraph::automatic   ? GraphKind::backward_auto
                         : graph == CudnnSdpaBackwardGraph::direct_dq ? GraphKind::backward_direct
                                                                      : GraphKind::backward_accumulate;
  const BackwardArgs args{dq, dk, dv, d_out, q, k, v, out, causal};
  const std::shared_ptr<const Plan> plan =
      cached_plan(plan_key(kind, q, causal, {&q, &k, &v, &out, &d_out, &dq, &dk, &dv}),
                  [&] { return build_backward_plan(args, graph); });
  const int64_t b = q.size(0), h = q.size(1), l = q.size(2), d = q.size(3);
  // one buffer: cuDNN's workspace | the row sums D (b h l f32) | the dQ accumulator (b h l d f32)
  const int64_t rows_at = round_up(plan->workspace, 256);
  const int64_t acc_at = rows_at + round_up(b * h * l * static_cast<int64_t>(sizeof(float)), 256);
  const int64_t total = acc_at + (plan->dq_accumulate ? b * h * l * d * static_cast<int64_t>(sizeof(float)) : 0);
  const Workspace ws(total);
  char* base = static_cast<char*>(ws.ptr);
  const float scale_value = static_cast<float>(scale), one = 1.0f;
  const float fill = std::numeric_limits<float>::lowest();
  std::vector<int64_t> uids{kQ, kK, kV, kO, kDO, kStats, kDQ, kDK, kDV, kScale, kOne, kRowSum};
  std::vector<void*> ptrs{q.data_ptr(),
                          k.data_ptr(),
                          v.data_ptr(),
                          out.data_ptr(),
                          d_out.data_ptr(),
                          lse.data_ptr(),
                          dq.data_ptr(),
                          dk.data_ptr(),
                          dv.data_ptr(),
                          const_cast<float*>(&scale_value),
                          const_cast<float*>(&one),
                          base + rows_at};
  if (causal) {
    uids.push_back(kFill);
    ptrs.push_back(const_cast<float*>(&fill));
  }
  if (plan->dq_accumulate) {
    // the graph adds into the accumulator: zero it first, on the stream the handle runs on
    HG_CUDA_CHECK(cudaMemsetAsync(base + acc_at, 0, static_cast<size_t>(total - acc_at), current_stream().handle()));
    uids.push_back(kDQAccum);
    ptrs.push_back(base + acc_at);
  }
  execute(*plan, uids, ptrs, ws.ptr);
  return plan->dq_accumulate ? CudnnSdpaBackwardGraph::accumulate_dq : CudnnSdpaBackwardGraph::direct_dq;
}

}  // namespace hg::cuda
