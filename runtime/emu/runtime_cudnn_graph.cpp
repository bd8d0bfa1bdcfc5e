// cuda-emu stand-in for cuDNN's graph (backend) API: the descriptor calls
// (create, set/get attribute, finalize, destroy), engine heuristics, execution
// plans, variant packs and execute, as kernels/attention/attention_cudnn.cpp uses
// them for fused scaled-dot-product attention, forward and backward.
//
// Semantics (cuDNN 9 backend API reference):
//  - Attributes are typed arrays: set stores (type, count, elements) and get
//    returns them (elementCount = stored count, at most requestedElementCount
//    copied). Descriptor-valued attributes store the descriptor; get copies
//    the stored descriptor's state into the caller's descriptor of the same
//    kind. A type that does not match the attribute, an attribute the
//    descriptor kind does not have, or setting a finalized descriptor:
//    CUDNN_STATUS_BAD_PARAM. Unknown descriptor kinds: CUDNN_STATUS_NOT_SUPPORTED.
//  - finalize checks what each kind needs (a tensor's type, dims, strides and
//    unique id; an operation's finalized tensors and op descriptor; a graph's
//    finalized operations with unique tensor ids) and answers BAD_PARAM.
//  - The engine heuristics recognise two graphs, structurally, by their data
//    flow, after checking that every operation's operands agree in shape
//    (matmul, pointwise broadcast, reduction, reshape element count):
//    the fused flash-attention forward ("Fused Flash Attention fprop" of the
//    cuDNN developer guide, the graph cudnn-frontend's sdpa node builds):
//        S = matmul(Q, K^T) * scale            (scale: a by-value scalar)
//        [causal] S = select(S, neg, gen_index(S, 2) >= gen_index(S, 3))
//        M = max_j S, E = exp(S - M), Z = sum_j E, P = E / Z
//        O = matmul(P, V),  [Stats = M + log Z]
//    Q [B,H,L,D], K^T [B,H,D,S], V [B,H,S,Dv], O [B,H,L,Dv] (f16 or bf16,
//    one dtype, any strides), Stats [B,H,L,1] f32; and the backward ("fused
//    flash attention bprop", cudnn-frontend's sdpa_backward node):
//        D = reduce_add(dO * O) * one          (D: a real f32 [B,H,L,1] tensor)
//        S as above, P = exp(S - Stats)
//        dV = matmul(reshape(P), dO),  dP = matmul(dO, V^T)
//        dS = (dP - D) * P * scale,  dK = matmul(reshape(dS), Q)
//        dQ = matmul(dS, reshape(K^T))  or  dQacc = ..., dQ = identity(dQacc)
//    where each reshape is a transpose of the last two dims (dims and
//    strides swapped; P^T and dS^T 16-bit), V^T [B,H,D,S], dO, O, dQ
//    [B,H,L,D], dK, dV [B,H,S,D] in Q's dtype, Stats and dQacc f32, and
//    the roles distinct tensors. Every operation of the graph must belong
//    to its pattern. Any other graph finalizes, but its heuristics (and a
//    plan built from it) answer CUDNN_STATUS_NOT_SUPPORTED, as real cuDNN
//    answers for a graph no engine supports.
//  - execute computes the recognised graph with the CPU reference: inputs
//    widened to f32, f32 dot products and softmax, outputs rounded once to
//    their dtype. Forward: P stays f32 (real cuDNN rounds P to the input
//    dtype before the P V product); Stats = M + log Z in f32. Backward: P
//    and dS rounded to the dtypes of P^T and dS^T for dV and dK, dS f32 for
//    dQ; D written to its tensor; dQ added into dQacc (which the caller
//    zeroes, as real cuDNN before 9.6 requires) and dQ = dQacc. It writes a
//    pattern over the plan's workspace (L * 4 bytes per (b, h): a row
//    scratch) so a short workspace shows up under ASan, and needs every
//    non-virtual tensor's pointer in the variant pack (BAD_PARAM otherwise).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include <cudnn.h>

#include "core/half.h"

namespace {

struct Desc;

struct Attr {
  cudnnBackendAttributeType_t type{};
  int64_t count = 0;
  std::vector<unsigned char> bytes;
};

// ---- tensors ----------------------------------------------------------------------------------
struct TensorInfo {
  int64_t uid = -1;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  std::vector<int64_t> dims, strides;
  bool is_virtual = false, by_value = false;
};

// The recognised attention graph: tensor unique ids and what execute needs
// (a snapshot: the caller may destroy the graph's descriptors once the plan is
// built, as real cuDNN allows).
struct SdpaProblem {
  int64_t q = 0, kt = 0, v = 0, o = 0, stats = -1, scale = 0, neg = -1;
  bool causal = false;
  // the backward graph: v is then V^T [B,H,D,S]; stats is read, not written
  bool backward = false;
  int64_t d_o = -1, dq = -1, dk = -1, dv = -1, row_sum = -1, one = -1, dq_accum = -1;
  cudnnDataType_t pt_type = CUDNN_DATA_FLOAT, dst_type = CUDNN_DATA_FLOAT;  // the reshaped P^T and dS^T
  std::map<int64_t, TensorInfo> tensors;
};

struct Desc {
  cudnnBackendDescriptorType_t kind{};
  bool finalized = false;
  std::map<int, Attr> attrs;
  // heuristics, engines, engine configs and plans: what was recognised
  bool recognised = false;
  SdpaProblem problem;
  int64_t workspace = 0;
};

std::mutex g_mutex;
std::set<Desc*> g_live;  // every descriptor create handed out and destroy has not taken back

Desc* lookup(cudnnBackendDescriptor_t d) {
  auto* p = static_cast<Desc*>(d);
  return g_live.count(p) != 0 ? p : nullptr;
}

size_t element_size(cudnnBackendAttributeType_t t) {
  switch (t) {
    case CUDNN_TYPE_HANDLE:
      return sizeof(cudnnHandle_t);
    case CUDNN_TYPE_DATA_TYPE:
      return sizeof(cudnnDataType_t);
    case CUDNN_TYPE_BOOLEAN:
      return sizeof(bool);
    case CUDNN_TYPE_INT64:
      return sizeof(int64_t);
    case CUDNN_TYPE_FLOAT:
      return sizeof(float);
    case CUDNN_TYPE_DOUBLE:
      return sizeof(double);
    case CUDNN_TYPE_VOID_PTR:
      return sizeof(void*);
    case CUDNN_TYPE_HEUR_MODE:
      return sizeof(cudnnBackendHeurMode_t);
    case CUDNN_TYPE_POINTWISE_MODE:
      return sizeof(cudnnPointwiseMode_t);
    case CUDNN_TYPE_BACKEND_DESCRIPTOR:
      return sizeof(cudnnBackendDescriptor_t);
    case CUDNN_TYPE_REDUCTION_OPERATOR_TYPE:
      return sizeof(cudnnReduceTensorOp_t);
  }
  return 0;
}

// The attributes each descriptor kind has, with their element type.
bool attribute_type(cudnnBackendDescriptorType_t kind, int name, cudnnBackendAttributeType_t* type) {
  struct Row {
    cudnnBackendDescriptorType_t kind;
    int name;
    cudnnBackendAttributeType_t type;
  };
  static const Row kRows[] = {
      {CUDNN_BACKEND_TENSOR_DESCRIPTOR, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE},
      {CUDNN_BACKEND_TENSOR_DESCRIPTOR, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64},
      {CUDNN_BACKEND_TENSOR_DESCRIPTOR, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64},
      {CUDNN_BACKEND_TENSOR_DESCRIPTOR, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64},
      {CUDNN_BACKEND_TENSOR_DESCRIPTOR, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64},
      {CUDNN_BACKEND_TENSOR_DESCRIPTOR, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN},
      {CUDNN_BACKEND_TENSOR_DESCRIPTOR, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN},
      {CUDNN_BACKEND_POINTWISE_DESCRIPTOR, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE},
      {CUDNN_BACKEND_POINTWISE_DESCRIPTOR, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE},
      {CUDNN_BACKEND_POINTWISE_DESCRIPTOR, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64},
      {CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
       CUDNN_TYPE_BACKEND_DESCRIPTOR},
      {CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, CUDNN_ATTR_OPERATION_POINTWISE_XDESC,
       CUDNN_TYPE_BACKEND_DESCRIPTOR},
      {CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
       CUDNN_TYPE_BACKEND_DESCRIPTOR},
      {CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, CUDNN_ATTR_OPERATION_POINTWISE_YDESC,
       CUDNN_TYPE_BACKEND_DESCRIPTOR},
      {CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, CUDNN_ATTR_OPERATION_POINTWISE_TDESC,
       CUDNN_TYPE_BACKEND_DESCRIPTOR},
      {CUDNN_BACKEND_MATMUL_DESCRIPTOR, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE},
      {CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR},
      {CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR},
      {CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR},
      {CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR},
      {CUDNN_BACKEND_REDUCTION_DESCRIPTOR, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE},
      {CUDNN_BACKEND_REDUCTION_DESCRIPTOR, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE},
      {CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, CUDNN_ATTR_OPERATION_REDUCTION_XDESC,
       CUDNN_TYPE_BACKEND_DESCRIPTOR},
      {CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, CUDNN_ATTR_OPERATION_REDUCTION_YDESC,
       CUDNN_TYPE_BACKEND_DESCRIPTOR},
      {CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, CUDNN_ATTR_OPERATION_REDUCTION_DESC,
       CUDNN_TYPE_BACKEND_DESCRIPTOR},
      {CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR},
      {CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR},
      {CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR},
      {CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE},
      {CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR},
      {CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE},
      {CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR},
      {CUDNN_BACKEND_ENGINE_DESCRIPTOR, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR},
      {CUDNN_BACKEND_ENGINE_DESCRIPTOR, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64},
      {CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR},
      {CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE},
      {CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR},
      {CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64},
      {CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64},
      {CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR},
      {CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR},
  };
  for (const Row& r : kRows) {
    if (r.kind == kind && r.name == name) {
      *type = r.type;
      return true;
    }
  }
  return false;
}

bool known_kind(cudnnBackendDescriptorType_t k) {
  switch (k) {
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR:
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR:
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR:
      return true;
  }
  return false;
}

// ---- typed reads of stored attributes ----------------------------------------------------------
const Attr* find(const Desc* d, int name) {
  auto it = d->attrs.find(name);
  return it == d->attrs.end() ? nullptr : &it->second;
}

template <typename T>
std::vector<T> values(const Desc* d, int name) {
  const Attr* a = find(d, name);
  std::vector<T> out;
  if (a == nullptr) return out;
  out.resize(static_cast<size_t>(a->count));
  if (!out.empty()) std::memcpy(out.data(), a->bytes.data(), out.size() * sizeof(T));
  return out;
}

template <typename T>
bool value(const Desc* d, int name, T* out) {
  const Attr* a = find(d, name);
  if (a == nullptr || a->count != 1 || a->bytes.size() != sizeof(T)) return false;
  std::memcpy(out, a->bytes.data(), sizeof(T));
  return true;
}

Desc* desc_attr(const Desc* d, int name) {
  void* p = nullptr;
  if (!value<void*>(d, name, &p)) return nullptr;
  return lookup(p);
}

TensorInfo tensor_info(const Desc* t) {
  TensorInfo i;
  (void)value<int64_t>(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, &i.uid);
  (void)value<cudnnDataType_t>(t, CUDNN_ATTR_TENSOR_DATA_TYPE, &i.type);
  i.dims = values<int64_t>(t, CUDNN_ATTR_TENSOR_DIMENSIONS);
  i.strides = values<int64_t>(t, CUDNN_ATTR_TENSOR_STRIDES);
  (void)value<bool>(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, &i.is_virtual);
  (void)value<bool>(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, &i.by_value);
  return i;
}

bool is_finalized_tensor(const Desc* t) {
  return t != nullptr && t->kind == CUDNN_BACKEND_TENSOR_DESCRIPTOR && t->finalized;
}

// The tensor attributes each operation kind must have, and may have.
struct OpSlots {
  std::vector<int> required, optional;
  int op_desc = -1;  // the attribute holding the pointwise/matmul/reduction descriptor (reshape: none)
  cudnnBackendDescriptorType_t op_kind{};
};

bool op_slots(cudnnBackendDescriptorType_t kind, OpSlots* s) {
  switch (kind) {
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
      *s = {{CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_ATTR_OPERATION_POINTWISE_YDESC},
            {CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_ATTR_OPERATION_POINTWISE_TDESC},
            CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
            CUDNN_BACKEND_POINTWISE_DESCRIPTOR};
      return true;
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
      *s = {{CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_ATTR_OPERATION_MATMUL_CDESC},
            {},
            CUDNN_ATTR_OPERATION_MATMUL_DESC,
            CUDNN_BACKEND_MATMUL_DESCRIPTOR};
      return true;
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
      *s = {{CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_ATTR_OPERATION_REDUCTION_YDESC},
            {},
            CUDNN_ATTR_OPERATION_REDUCTION_DESC,
            CUDNN_BACKEND_REDUCTION_DESCRIPTOR};
      return true;
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR:
      *s = {{CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_ATTR_OPERATION_RESHAPE_YDESC}, {}, -1, {}};
      return true;
    default:
      return false;
  }
}

cudnnStatus_t finalize_checks(const Desc* d) {
  switch (d->kind) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: {
      const TensorInfo t = tensor_info(d);
      if (find(d, CUDNN_ATTR_TENSOR_UNIQUE_ID) == nullptr || find(d, CUDNN_ATTR_TENSOR_DATA_TYPE) == nullptr)
        return CUDNN_STATUS_BAD_PARAM;
      if (t.dims.empty() || t.dims.size() != t.strides.size() || t.dims.size() > 8) return CUDNN_STATUS_BAD_PARAM;
      for (size_t i = 0; i < t.dims.size(); ++i) {
        if (t.dims[i] <= 0 || t.strides[i] <= 0) return CUDNN_STATUS_BAD_PARAM;
      }
      return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR:
      return find(d, CUDNN_ATTR_POINTWISE_MODE) != nullptr ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR:
      return find(d, CUDNN_ATTR_MATMUL_COMP_TYPE) != nullptr ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR:
      return find(d, CUDNN_ATTR_REDUCTION_OPERATOR) != nullptr ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR:
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR: {
      OpSlots s;
      (void)op_slots(d->kind, &s);
      for (int name : s.required) {
        if (!is_finalized_tensor(desc_attr(d, name))) return CUDNN_STATUS_BAD_PARAM;
      }
      for (int name : s.optional) {
        if (find(d, name) != nullptr && !is_finalized_tensor(desc_attr(d, name))) return CUDNN_STATUS_BAD_PARAM;
      }
      if (s.op_desc < 0) return CUDNN_STATUS_SUCCESS;
      const Desc* op = desc_attr(d, s.op_desc);
      if (op == nullptr || op->kind != s.op_kind || !op->finalized) return CUDNN_STATUS_BAD_PARAM;
      return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: {
      const std::vector<void*> ops = values<void*>(d, CUDNN_ATTR_OPERATIONGRAPH_OPS);
      if (ops.empty()) return CUDNN_STATUS_BAD_PARAM;
      std::map<int64_t, const Desc*> by_uid;
      for (void* p : ops) {
        const Desc* op = lookup(p);
        OpSlots s;
        if (op == nullptr || !op->finalized || !op_slots(op->kind, &s)) return CUDNN_STATUS_BAD_PARAM;
        std::vector<int> names = s.required;
        names.insert(names.end(), s.optional.begin(), s.optional.end());
        for (int name : names) {
          const Desc* t = desc_attr(op, name);
          if (t == nullptr) continue;
          const TensorInfo ti = tensor_info(t);
          auto [it, fresh] = by_uid.emplace(ti.uid, t);
          // one uid, one tensor: a second descriptor must describe the same tensor
          if (!fresh && it->second != t) {
            const TensorInfo other = tensor_info(it->second);
            if (other.dims != ti.dims || other.strides != ti.strides || other.type != ti.type)
              return CUDNN_STATUS_BAD_PARAM;
          }
        }
      }
      return CUDNN_STATUS_SUCCESS;
    }
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: {
      const Attr* ids = find(d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
      const Attr* ptrs = find(d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
      if (ids == nullptr || ptrs == nullptr || ids->count != ptrs->count) return CUDNN_STATUS_BAD_PARAM;
      return CUDNN_STATUS_SUCCESS;
    }
    default:
      return CUDNN_STATUS_SUCCESS;
  }
}

// ---- recognising the attention graph ------------------------------------------------------------
struct Graph {
  std::vector<const Desc*> ops;
  std::map<int64_t, const Desc*> producer;  // output uid -> op
  std::map<int64_t, TensorInfo> tensors;
  std::set<const Desc*> used;
};

int64_t uid_of(const Desc* op, int name) {
  const Desc* t = desc_attr(op, name);
  return t == nullptr ? -1 : tensor_info(t).uid;
}

int64_t output_uid(const Desc* op) {
  switch (op->kind) {
    case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR:
      return uid_of(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC);
    case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR:
      return uid_of(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC);
    case CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR:
      return uid_of(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC);
    default:
      return uid_of(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC);
  }
}

// The op producing uid when it is a pointwise op of `mode` (marked used), else null.
const Desc* pointwise(Graph& g, int64_t uid, cudnnPointwiseMode_t mode) {
  auto it = g.producer.find(uid);
  if (it == g.producer.end() || it->second->kind != CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR) return nullptr;
  const Desc* pw = desc_attr(it->second, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR);
  cudnnPointwiseMode_t m{};
  if (pw == nullptr || !value(pw, CUDNN_ATTR_POINTWISE_MODE, &m) || m != mode) return nullptr;
  g.used.insert(it->second);
  return it->second;
}

const Desc* reduction(Graph& g, int64_t uid, cudnnReduceTensorOp_t op) {
  auto it = g.producer.find(uid);
  if (it == g.producer.end() || it->second->kind != CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR) return nullptr;
  const Desc* r = desc_attr(it->second, CUDNN_ATTR_OPERATION_REDUCTION_DESC);
  cudnnReduceTensorOp_t o{};
  if (r == nullptr || !value(r, CUDNN_ATTR_REDUCTION_OPERATOR, &o) || o != op) return nullptr;
  g.used.insert(it->second);
  return it->second;
}

const Desc* matmul(Graph& g, int64_t uid) {
  auto it = g.producer.find(uid);
  if (it == g.producer.end() || it->second->kind != CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR) return nullptr;
  g.used.insert(it->second);
  return it->second;
}

bool is_16bit(cudnnDataType_t t) { return t == CUDNN_DATA_HALF || t == CUDNN_DATA_BFLOAT16; }

// The graph's operations, who produces each tensor, and every tensor's
// description; false when two operations write one tensor.
bool load(const Desc* graph_desc, Graph* g) {
  for (void* ptr : values<void*>(graph_desc, CUDNN_ATTR_OPERATIONGRAPH_OPS)) {
    const Desc* op = lookup(ptr);
    if (op == nullptr) return false;
    g->ops.push_back(op);
    const int64_t out = output_uid(op);
    if (g->producer.count(out) != 0) return false;  // two ops writing one tensor
    g->producer[out] = op;
    OpSlots s;
    (void)op_slots(op->kind, &s);
    std::vector<int> names = s.required;
    names.insert(names.end(), s.optional.begin(), s.optional.end());
    for (int name : names) {
      if (const Desc* t = desc_attr(op, name)) g->tensors[tensor_info(t).uid] = tensor_info(t);
    }
  }
  return true;
}

// The reshape op producing uid (marked used), else null.
const Desc* reshape(Graph& g, int64_t uid) {
  auto it = g.producer.find(uid);
  if (it == g.producer.end() || it->second->kind != CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR) return nullptr;
  g.used.insert(it->second);
  return it->second;
}

// y is x transposed in its last two dims: dims and strides swapped.
bool is_transpose(const TensorInfo& x, const TensorInfo& y) {
  if (x.dims.size() != 4 || y.dims.size() != 4) return false;
  return y.dims == std::vector<int64_t>{x.dims[0], x.dims[1], x.dims[3], x.dims[2]} &&
         y.strides == std::vector<int64_t>{x.strides[0], x.strides[1], x.strides[3], x.strides[2]};
}

// The scores `s`: scale * matmul(Q, K^T), causal-masked or not (the first
// nodes of both graphs). Fills q, kt, scale, neg, causal.
bool match_scores(Graph& g, int64_t s, SdpaProblem* p) {
  int64_t scaled = s;
  p->causal = false;
  if (const Desc* sel = pointwise(g, s, CUDNN_POINTWISE_BINARY_SELECT)) {
    scaled = uid_of(sel, CUDNN_ATTR_OPERATION_POINTWISE_XDESC);
    p->neg = uid_of(sel, CUDNN_ATTR_OPERATION_POINTWISE_BDESC);
    const Desc* ge = pointwise(g, uid_of(sel, CUDNN_ATTR_OPERATION_POINTWISE_TDESC), CUDNN_POINTWISE_CMP_GE);
    if (ge == nullptr) return false;
    const Desc* row = pointwise(g, uid_of(ge, CUDNN_ATTR_OPERATION_POINTWISE_XDESC), CUDNN_POINTWISE_GEN_INDEX);
    const Desc* col = pointwise(g, uid_of(ge, CUDNN_ATTR_OPERATION_POINTWISE_BDESC), CUDNN_POINTWISE_GEN_INDEX);
    if (row == nullptr || col == nullptr) return false;
    int64_t row_axis = -1, col_axis = -1;
    (void)value(desc_attr(row, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR), CUDNN_ATTR_POINTWISE_AXIS, &row_axis);
    (void)value(desc_attr(col, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR), CUDNN_ATTR_POINTWISE_AXIS, &col_axis);
    if (row_axis != 2 || col_axis != 3) return false;
    if (uid_of(row, CUDNN_ATTR_OPERATION_POINTWISE_XDESC) != scaled ||
        uid_of(col, CUDNN_ATTR_OPERATION_POINTWISE_XDESC) != scaled)
      return false;
    if (!g.tensors[p->neg].by_value || g.tensors[p->neg].type != CUDNN_DATA_FLOAT) return false;
    p->causal = true;
  }
  const Desc* mul = pointwise(g, scaled, CUDNN_POINTWISE_MUL);
  if (mul == nullptr) return false;
  p->scale = uid_of(mul, CUDNN_ATTR_OPERATION_POINTWISE_BDESC);
  const Desc* bmm1 = matmul(g, uid_of(mul, CUDNN_ATTR_OPERATION_POINTWISE_XDESC));
  if (bmm1 == nullptr) return false;
  p->q = uid_of(bmm1, CUDNN_ATTR_OPERATION_MATMUL_ADESC);
  p->kt = uid_of(bmm1, CUDNN_ATTR_OPERATION_MATMUL_BDESC);
  const TensorInfo& sc = g.tensors[p->scale];
  return sc.by_value && sc.type == CUDNN_DATA_FLOAT;
}

// The forward pattern of the file comment; true with `p` filled in.
bool recognise_forward(Graph g, SdpaProblem* p) {
  // O = matmul(P, V): the one matmul whose output is a real tensor
  const Desc* bmm2 = nullptr;
  for (const Desc* op : g.ops) {
    if (op->kind == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR && !g.tensors[output_uid(op)].is_virtual) {
      if (bmm2 != nullptr) return false;
      bmm2 = op;
    }
  }
  if (bmm2 == nullptr) return false;
  g.used.insert(bmm2);
  p->o = output_uid(bmm2);
  p->v = uid_of(bmm2, CUDNN_ATTR_OPERATION_MATMUL_BDESC);
  const int64_t prob = uid_of(bmm2, CUDNN_ATTR_OPERATION_MATMUL_ADESC);
  const Desc* div = pointwise(g, prob, CUDNN_POINTWISE_DIV);
  if (div == nullptr) return false;
  const int64_t e = uid_of(div, CUDNN_ATTR_OPERATION_POINTWISE_XDESC);
  const int64_t z = uid_of(div, CUDNN_ATTR_OPERATION_POINTWISE_BDESC);
  const Desc* exp = pointwise(g, e, CUDNN_POINTWISE_EXP);
  const Desc* sum = reduction(g, z, CUDNN_REDUCE_TENSOR_ADD);
  if (exp == nullptr || sum == nullptr || uid_of(sum, CUDNN_ATTR_OPERATION_REDUCTION_XDESC) != e) return false;
  const Desc* sub = pointwise(g, uid_of(exp, CUDNN_ATTR_OPERATION_POINTWISE_XDESC), CUDNN_POINTWISE_SUB);
  if (sub == nullptr) return false;
  const int64_t s = uid_of(sub, CUDNN_ATTR_OPERATION_POINTWISE_XDESC);
  const int64_t m = uid_of(sub, CUDNN_ATTR_OPERATION_POINTWISE_BDESC);
  const Desc* max = reduction(g, m, CUDNN_REDUCE_TENSOR_MAX);
  if (max == nullptr || uid_of(max, CUDNN_ATTR_OPERATION_REDUCTION_XDESC) != s) return false;
  // optional Stats = M + log Z
  for (const Desc* op : g.ops) {
    if (g.used.count(op) != 0 || op->kind != CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR) continue;
    const int64_t out = output_uid(op);
    if (g.tensors[out].is_virtual) continue;
    const Desc* add = pointwise(g, out, CUDNN_POINTWISE_ADD);
    if (add == nullptr || uid_of(add, CUDNN_ATTR_OPERATION_POINTWISE_XDESC) != m) return false;
    const Desc* log = pointwise(g, uid_of(add, CUDNN_ATTR_OPERATION_POINTWISE_BDESC), CUDNN_POINTWISE_LOG);
    if (log == nullptr || uid_of(log, CUDNN_ATTR_OPERATION_POINTWISE_XDESC) != z) return false;
    p->stats = out;
  }
  if (!match_scores(g, s, p)) return false;
  if (g.used.size() != g.ops.size()) return false;  // an operation outside the pattern
  // shapes and types
  const TensorInfo &q = g.tensors[p->q], &kt = g.tensors[p->kt], &v = g.tensors[p->v], &o = g.tensors[p->o];
  if (q.dims.size() != 4 || kt.dims.size() != 4 || v.dims.size() != 4 || o.dims.size() != 4) return false;
  if (q.is_virtual || kt.is_virtual || v.is_virtual || o.is_virtual) return false;
  for (int i = 0; i < 2; ++i) {
    if (kt.dims[i] != q.dims[i] || v.dims[i] != q.dims[i] || o.dims[i] != q.dims[i]) return false;
  }
  if (kt.dims[2] != q.dims[3] || v.dims[2] != kt.dims[3] || o.dims[2] != q.dims[2] || o.dims[3] != v.dims[3])
    return false;
  if (!is_16bit(q.type) || kt.type != q.type || v.type != q.type || o.type != q.type) return false;
  if (p->stats >= 0) {
    const TensorInfo& st = g.tensors[p->stats];
    if (st.type != CUDNN_DATA_FLOAT || st.dims != std::vector<int64_t>{q.dims[0], q.dims[1], q.dims[2], 1})
      return false;
  }
  p->tensors = g.tensors;
  return true;
}

// The backward pattern of the file comment; true with `p` filled in. Every
// node is checked for its kind, mode and operands, the reshapes for being
// transposes (dims and strides swapped), the real tensors for their shapes
// and dtypes; a node outside the pattern refuses the graph.
bool recognise_backward(Graph g, SdpaProblem* p) {
  p->backward = true;
  // the matmuls writing real tensors: dV = P^T dO, dK = dS^T Q, dQ (or dQacc) = dS K
  const Desc *mm_dv = nullptr, *mm_dk = nullptr, *mm_dq = nullptr;
  for (const Desc* op : g.ops) {
    if (op->kind != CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR || g.tensors[output_uid(op)].is_virtual) continue;
    const Desc* a = reshape(g, uid_of(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC));
    const Desc*& slot = a == nullptr ? mm_dq
                        : pointwise(g, uid_of(a, CUDNN_ATTR_OPERATION_RESHAPE_XDESC), CUDNN_POINTWISE_EXP) != nullptr
                            ? mm_dv
                            : mm_dk;
    if (slot != nullptr) return false;
    slot = op;
    g.used.insert(op);
  }
  if (mm_dv == nullptr || mm_dk == nullptr || mm_dq == nullptr) return false;
  // dV = matmul(reshape(P), dO),  P = exp(S - Stats)
  const Desc* r_p = reshape(g, uid_of(mm_dv, CUDNN_ATTR_OPERATION_MATMUL_ADESC));
  const int64_t prob = uid_of(r_p, CUDNN_ATTR_OPERATION_RESHAPE_XDESC);
  const Desc* exp = pointwise(g, prob, CUDNN_POINTWISE_EXP);
  const Desc* sub =
      exp == nullptr ? nullptr : pointwise(g, uid_of(exp, CUDNN_ATTR_OPERATION_POINTWISE_XDESC), CUDNN_POINTWISE_SUB);
  if (sub == nullptr) return false;
  p->stats = uid_of(sub, CUDNN_ATTR_OPERATION_POINTWISE_BDESC);
  if (!match_scores(g, uid_of(sub, CUDNN_ATTR_OPERATION_POINTWISE_XDESC), p)) return false;
  p->d_o = uid_of(mm_dv, CUDNN_ATTR_OPERATION_MATMUL_BDESC);
  p->dv = output_uid(mm_dv);
  p->pt_type = g.tensors[output_uid(r_p)].type;
  // dK = matmul(reshape(dS), Q),  dS = ((dP - D) * P) * scale,  dP = matmul(dO, V^T)
  const Desc* r_ds = reshape(g, uid_of(mm_dk, CUDNN_ATTR_OPERATION_MATMUL_ADESC));
  const int64_t ds = uid_of(r_ds, CUDNN_ATTR_OPERATION_RESHAPE_XDESC);
  if (uid_of(mm_dk, CUDNN_ATTR_OPERATION_MATMUL_BDESC) != p->q) return false;
  p->dk = output_uid(mm_dk);
  p->dst_type = g.tensors[output_uid(r_ds)].type;
  const Desc* mul_scale = pointwise(g, ds, CUDNN_POINTWISE_MUL);
  if (mul_scale == nullptr || uid_of(mul_scale, CUDNN_ATTR_OPERATION_POINTWISE_BDESC) != p->scale) return false;
  const Desc* mul_p = pointwise(g, uid_of(mul_scale, CUDNN_ATTR_OPERATION_POINTWISE_XDESC), CUDNN_POINTWISE_MUL);
  if (mul_p == nullptr || uid_of(mul_p, CUDNN_ATTR_OPERATION_POINTWISE_BDESC) != prob) return false;
  const Desc* sub_d = pointwise(g, uid_of(mul_p, CUDNN_ATTR_OPERATION_POINTWISE_XDESC), CUDNN_POINTWISE_SUB);
  if (sub_d == nullptr) return false;
  const Desc* mm_dp = matmul(g, uid_of(sub_d, CUDNN_ATTR_OPERATION_POINTWISE_XDESC));
  if (mm_dp == nullptr || uid_of(mm_dp, CUDNN_ATTR_OPERATION_MATMUL_ADESC) != p->d_o) return false;
  p->v = uid_of(mm_dp, CUDNN_ATTR_OPERATION_MATMUL_BDESC);
  // D' = reduce_add(dO * O) * one, a real f32 tensor
  p->row_sum = uid_of(sub_d, CUDNN_ATTR_OPERATION_POINTWISE_BDESC);
  const Desc* mul_one = pointwise(g, p->row_sum, CUDNN_POINTWISE_MUL);
  if (mul_one == nullptr) return false;
  p->one = uid_of(mul_one, CUDNN_ATTR_OPERATION_POINTWISE_BDESC);
  const Desc* red = reduction(g, uid_of(mul_one, CUDNN_ATTR_OPERATION_POINTWISE_XDESC), CUDNN_REDUCE_TENSOR_ADD);
  if (red == nullptr) return false;
  const Desc* mul_do = pointwise(g, uid_of(red, CUDNN_ATTR_OPERATION_REDUCTION_XDESC), CUDNN_POINTWISE_MUL);
  if (mul_do == nullptr || uid_of(mul_do, CUDNN_ATTR_OPERATION_POINTWISE_XDESC) != p->d_o) return false;
  p->o = uid_of(mul_do, CUDNN_ATTR_OPERATION_POINTWISE_BDESC);
  // dQ = matmul(dS, reshape(K^T)), directly or through an f32 accumulator and identity
  const Desc* r_k = reshape(g, uid_of(mm_dq, CUDNN_ATTR_OPERATION_MATMUL_BDESC));
  if (uid_of(mm_dq, CUDNN_ATTR_OPERATION_MATMUL_ADESC) != ds || r_k == nullptr ||
      uid_of(r_k, CUDNN_ATTR_OPERATION_RESHAPE_XDESC) != p->kt)
    return false;
  p->dq = output_uid(mm_dq);
  for (const Desc* op : g.ops) {
    if (g.used.count(op) != 0 || op->kind != CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR) continue;
    const Desc* id = pointwise(g, output_uid(op), CUDNN_POINTWISE_IDENTITY);
    if (id == nullptr || uid_of(id, CUDNN_ATTR_OPERATION_POINTWISE_XDESC) != p->dq || p->dq_accum >= 0) return false;
    p->dq_accum = p->dq;
    p->dq = output_uid(id);
  }
  if (g.used.size() != g.ops.size()) return false;  // an operation outside the pattern
  // the reshapes are transposes; shapes, dtypes, and which tensors are real
  for (const Desc* r : {r_p, r_ds, r_k}) {
    if (!is_transpose(g.tensors[uid_of(r, CUDNN_ATTR_OPERATION_RESHAPE_XDESC)], g.tensors[output_uid(r)])) return false;
  }
  const std::map<int64_t, TensorInfo>& t = g.tensors;
  const TensorInfo& q = t.at(p->q);
  if (q.dims.size() != 4 || !is_16bit(q.type)) return false;
  const int64_t nb = q.dims[0], nh = q.dims[1], l = q.dims[2], d = q.dims[3];
  const TensorInfo& kt = t.at(p->kt);
  if (kt.dims.size() != 4) return false;
  const int64_t s = kt.dims[3];
  const std::vector<int64_t> lxd{nb, nh, l, d}, dxs{nb, nh, d, s}, sxd{nb, nh, s, d}, lx1{nb, nh, l, 1};
  const struct {
    int64_t uid;
    std::vector<int64_t> dims;
    cudnnDataType_t type;
  } real[] = {{p->kt, dxs, q.type},
              {p->v, dxs, q.type},
              {p->o, lxd, q.type},
              {p->d_o, lxd, q.type},
              {p->dq, lxd, q.type},
              {p->dk, sxd, q.type},
              {p->dv, sxd, q.type},
              {p->stats, lx1, CUDNN_DATA_FLOAT},
              {p->row_sum, lx1, CUDNN_DATA_FLOAT}};
  for (const auto& r : real) {
    auto it = t.find(r.uid);
    if (it == t.end() || it->second.is_virtual || it->second.by_value || it->second.dims != r.dims ||
        it->second.type != r.type)
      return false;
  }
  if (p->dq_accum >= 0) {
    const TensorInfo& acc = t.at(p->dq_accum);
    if (acc.is_virtual || acc.type != CUDNN_DATA_FLOAT || acc.dims != lxd) return false;
  }
  auto one = t.find(p->one);
  if (one == t.end() || !one->second.by_value || one->second.type != CUDNN_DATA_FLOAT) return false;
  if (!is_16bit(p->pt_type) || !is_16bit(p->dst_type)) return false;
  // the distinct roles are distinct tensors
  const std::set<int64_t> uids{p->q,  p->kt, p->v,     p->o,       p->d_o,   p->dq,
                               p->dk, p->dv, p->stats, p->row_sum, p->scale, p->one};
  if (uids.size() != 12) return false;
  p->tensors = g.tensors;
  return true;
}

// Every operation's operands agree in shape: a matmul's A [.., m, k], B
// [.., k, n], C [.., m, n] with equal batch dims; a pointwise op's y has x's
// dims and b, t broadcast to them (each dim equal or 1); a reduction's y dims
// are x's or 1; a reshape keeps the element count.
bool shapes_agree(const Graph& g) {
  const auto dims = [&](const Desc* op, int name) -> const std::vector<int64_t>* {
    const int64_t uid = uid_of(op, name);
    auto it = g.tensors.find(uid);
    return uid < 0 || it == g.tensors.end() ? nullptr : &it->second.dims;
  };
  const auto broadcasts = [](const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
    if (from.size() != to.size()) return false;
    for (size_t i = 0; i < to.size(); ++i) {
      if (from[i] != to[i] && from[i] != 1) return false;
    }
    return true;
  };
  const auto count = [](const std::vector<int64_t>& d) {
    int64_t n = 1;
    for (int64_t x : d) n *= x;
    return n;
  };
  for (const Desc* op : g.ops) {
    switch (op->kind) {
      case CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR: {
        const auto *a = dims(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC), *b = dims(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC),
                   *c = dims(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC);
        if (a == nullptr || b == nullptr || c == nullptr || a->size() != 4 || b->size() != 4 || c->size() != 4)
          return false;
        for (size_t i = 0; i < 2; ++i) {
          if ((*b)[i] != (*a)[i] || (*c)[i] != (*a)[i]) return false;
        }
        if ((*a)[3] != (*b)[2] || (*c)[2] != (*a)[2] || (*c)[3] != (*b)[3]) return false;
        break;
      }
      case CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR: {
        const auto *x = dims(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC),
                   *y = dims(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC);
        if (x == nullptr || y == nullptr || *x != *y) return false;
        for (int name : {CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_ATTR_OPERATION_POINTWISE_TDESC}) {
          if (find(op, name) == nullptr) continue;
          const auto* b = dims(op, name);
          if (b == nullptr || !broadcasts(*b, *y)) return false;
        }
        break;
      }
      case CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR: {
        const auto *x = dims(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC),
                   *y = dims(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC);
        if (x == nullptr || y == nullptr || !broadcasts(*y, *x)) return false;
        break;
      }
      default: {
        const auto *x = dims(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC), *y = dims(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC);
        if (x == nullptr || y == nullptr || count(*x) != count(*y)) return false;
        break;
      }
    }
  }
  return true;
}

// The forward or the backward graph; true with `p` filled in.
bool recognise(const Desc* graph_desc, SdpaProblem* p) {
  Graph g;
  if (!load(graph_desc, &g) || !shapes_agree(g)) return false;
  *p = SdpaProblem{};
  if (recognise_forward(g, p)) return true;
  *p = SdpaProblem{};
  return recognise_backward(g, p);
}

// ---- execute ------------------------------------------------------------------------------------
float load16(const void* base, cudnnDataType_t t, int64_t i) {
  return t == CUDNN_DATA_HALF ? static_cast<float>(static_cast<const hg::half*>(base)[i])
                              : static_cast<float>(static_cast<const hg::bfloat16*>(base)[i]);
}

void store16(void* base, cudnnDataType_t t, int64_t i, float x) {
  if (t == CUDNN_DATA_HALF)
    static_cast<hg::half*>(base)[i] = hg::half(x);
  else
    static_cast<hg::bfloat16*>(base)[i] = hg::bfloat16(x);
}

int64_t offset(const TensorInfo& t, int64_t a, int64_t b, int64_t c, int64_t d) {
  return a * t.strides[0] + b * t.strides[1] + c * t.strides[2] + d * t.strides[3];
}

void run_sdpa(const SdpaProblem& p, const std::map<int64_t, TensorInfo>& tensors, const std::map<int64_t, void*>& ptr) {
  const TensorInfo &q = tensors.at(p.q), &kt = tensors.at(p.kt), &v = tensors.at(p.v), &o = tensors.at(p.o);
  const float scale = *static_cast<const float*>(ptr.at(p.scale));
  const float neg = p.neg >= 0 ? *static_cast<const float*>(ptr.at(p.neg)) : 0.0f;
  const int64_t nb = q.dims[0], nh = q.dims[1], l = q.dims[2], d = q.dims[3], s = kt.dims[3], dv = v.dims[3];
  const cudnnDataType_t t = q.type;
  std::vector<float> sc(static_cast<size_t>(s)), acc(static_cast<size_t>(dv));
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t h = 0; h < nh; ++h) {
      for (int64_t i = 0; i < l; ++i) {
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < s; ++j) {
          float dot = 0.0f;
          for (int64_t x = 0; x < d; ++x)
            dot += load16(ptr.at(p.q), t, offset(q, b, h, i, x)) * load16(ptr.at(p.kt), t, offset(kt, b, h, x, j));
          float e = dot * scale;
          if (p.causal && !(i >= j)) e = neg;
          sc[static_cast<size_t>(j)] = e;
          m = std::max(m, e);
        }
        float z = 0.0f;
        for (float& e : sc) z += (e = std::exp(e - m));
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t j = 0; j < s; ++j) {
          const float pj = sc[static_cast<size_t>(j)] / z;
          for (int64_t x = 0; x < dv; ++x)
            acc[static_cast<size_t>(x)] += pj * load16(ptr.at(p.v), t, offset(v, b, h, j, x));
        }
        for (int64_t x = 0; x < dv; ++x) store16(ptr.at(p.o), t, offset(o, b, h, i, x), acc[static_cast<size_t>(x)]);
        if (p.stats >= 0) {
          const TensorInfo& st = tensors.at(p.stats);
          static_cast<float*>(ptr.at(p.stats))[offset(st, b, h, i, 0)] = m + std::log(z);
        }
      }
    }
  }
}

// The backward: D_i = dO_i . O_i (written to the row-sum tensor), P_ij =
// exp(s_ij - Stats_i) (0 where masked), dP_ij = dO_i . v_j, dS_ij = scale
// P_ij (dP_ij - D_i); dV_j = sum_i P_ij dO_i and dK_j = sum_i dS_ij q_i with
// P and dS rounded to the dtype the graph gives P^T and dS^T; dQ_i = sum_j
// dS_ij k_j with dS in f32 (added into the accumulator first when the graph
// has one). f32 throughout otherwise; dq, dk, dv rounded once.
void run_sdpa_backward(const SdpaProblem& p, const std::map<int64_t, TensorInfo>& tensors,
                       const std::map<int64_t, void*>& ptr) {
  const TensorInfo &q = tensors.at(p.q), &kt = tensors.at(p.kt), &vt = tensors.at(p.v), &o = tensors.at(p.o);
  const TensorInfo &d_o = tensors.at(p.d_o), &dq = tensors.at(p.dq), &dk = tensors.at(p.dk), &dv = tensors.at(p.dv);
  const TensorInfo &st = tensors.at(p.stats), &rs = tensors.at(p.row_sum);
  const float scale = *static_cast<const float*>(ptr.at(p.scale));
  const float one = *static_cast<const float*>(ptr.at(p.one));
  const float neg = p.neg >= 0 ? *static_cast<const float*>(ptr.at(p.neg)) : 0.0f;
  const int64_t nb = q.dims[0], nh = q.dims[1], l = q.dims[2], d = q.dims[3], s = kt.dims[3];
  const cudnnDataType_t t = q.type;
  const auto round_to = [](cudnnDataType_t type, float x) {
    return type == CUDNN_DATA_HALF ? static_cast<float>(hg::half(x)) : static_cast<float>(hg::bfloat16(x));
  };
  const auto* stats = static_cast<const float*>(ptr.at(p.stats));
  auto* row_sum = static_cast<float*>(ptr.at(p.row_sum));
  float* acc = p.dq_accum >= 0 ? static_cast<float*>(ptr.at(p.dq_accum)) : nullptr;
  const size_t sd = static_cast<size_t>(s * d);
  std::vector<float> gk(sd), gv(sd), gq(static_cast<size_t>(d)), qi(static_cast<size_t>(d)),
      doi(static_cast<size_t>(d));
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t h = 0; h < nh; ++h) {
      std::fill(gk.begin(), gk.end(), 0.0f);
      std::fill(gv.begin(), gv.end(), 0.0f);
      for (int64_t i = 0; i < l; ++i) {
        float row = 0.0f;
        for (int64_t x = 0; x < d; ++x) {
          qi[static_cast<size_t>(x)] = load16(ptr.at(p.q), t, offset(q, b, h, i, x));
          doi[static_cast<size_t>(x)] = load16(ptr.at(p.d_o), t, offset(d_o, b, h, i, x));
          row += doi[static_cast<size_t>(x)] * load16(ptr.at(p.o), t, offset(o, b, h, i, x));
        }
        row *= one;
        row_sum[offset(rs, b, h, i, 0)] = row;
        const float lse = stats[offset(st, b, h, i, 0)];
        std::fill(gq.begin(), gq.end(), 0.0f);
        for (int64_t j = 0; j < s; ++j) {
          float dot = 0.0f, dp = 0.0f;
          for (int64_t x = 0; x < d; ++x) {
            dot += qi[static_cast<size_t>(x)] * load16(ptr.at(p.kt), t, offset(kt, b, h, x, j));
            dp += doi[static_cast<size_t>(x)] * load16(ptr.at(p.v), t, offset(vt, b, h, x, j));
          }
          float e = dot * scale;
          if (p.causal && !(i >= j)) e = neg;
          const float pij = std::exp(e - lse);
          const float ds = (dp - row) * pij * scale;
          const float p16 = round_to(p.pt_type, pij), ds16 = round_to(p.dst_type, ds);
          for (int64_t x = 0; x < d; ++x) {
            const size_t jx = static_cast<size_t>(j * d + x);
            gv[jx] += p16 * doi[static_cast<size_t>(x)];
            gk[jx] += ds16 * qi[static_cast<size_t>(x)];
            gq[static_cast<size_t>(x)] += ds * load16(ptr.at(p.kt), t, offset(kt, b, h, x, j));
          }
        }
        for (int64_t x = 0; x < d; ++x) {
          float g = gq[static_cast<size_t>(x)];
          if (acc != nullptr) {
            g = (acc[offset(tensors.at(p.dq_accum), b, h, i, x)] += g);
          }
          store16(ptr.at(p.dq), t, offset(dq, b, h, i, x), g);
        }
      }
      for (int64_t j = 0; j < s; ++j) {
        for (int64_t x = 0; x < d; ++x) {
          const size_t jx = static_cast<size_t>(j * d + x);
          store16(ptr.at(p.dk), t, offset(dk, b, h, j, x), gk[jx]);
          store16(ptr.at(p.dv), t, offset(dv, b, h, j, x), gv[jx]);
        }
      }
    }
  }
}

}  // namespace

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t descriptorType,
                                           cudnnBackendDescriptor_t* descriptor) {
  if (descriptor == nullptr) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (!known_kind(descriptorType)) return CUDNN_STATUS_NOT_SUPPORTED;
  auto* d = new Desc;
  d->kind = descriptorType;
  const std::lock_guard<std::mutex> lock(g_mutex);
  g_live.insert(d);
  *descriptor = d;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  Desc* d = lookup(descriptor);
  if (d == nullptr) return CUDNN_STATUS_BAD_PARAM;
  g_live.erase(d);
  delete d;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor, cudnnBackendAttributeName_t attributeName,
                                       cudnnBackendAttributeType_t attributeType, int64_t elementCount,
                                       const void* arrayOfElements) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  Desc* d = lookup(descriptor);
  if (d == nullptr) return CUDNN_STATUS_BAD_PARAM;
  if (d->finalized) return CUDNN_STATUS_BAD_PARAM;
  cudnnBackendAttributeType_t want{};
  if (!attribute_type(d->kind, attributeName, &want) || want != attributeType) return CUDNN_STATUS_BAD_PARAM;
  if (elementCount < 0 || (elementCount > 0 && arrayOfElements == nullptr)) return CUDNN_STATUS_BAD_PARAM;
  if (attributeName == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE || attributeName == CUDNN_ATTR_ENGINEHEUR_RESULTS)
    return CUDNN_STATUS_BAD_PARAM;  // read-only
  Attr a;
  a.type = attributeType;
  a.count = elementCount;
  const size_t bytes = element_size(attributeType) * static_cast<size_t>(elementCount);
  a.bytes.resize(bytes);
  if (bytes != 0) std::memcpy(a.bytes.data(), arrayOfElements, bytes);
  if (attributeType == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
    for (int64_t i = 0; i < elementCount; ++i) {
      if (lookup(static_cast<void* const*>(arrayOfElements)[i]) == nullptr) return CUDNN_STATUS_BAD_PARAM;
    }
  }
  d->attrs[attributeName] = std::move(a);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  Desc* d = lookup(descriptor);
  if (d == nullptr) return CUDNN_STATUS_BAD_PARAM;
  if (d->finalized) return CUDNN_STATUS_BAD_PARAM;
  if (const cudnnStatus_t s = finalize_checks(d); s != CUDNN_STATUS_SUCCESS) return s;
  switch (d->kind) {
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
    case CUDNN_BACKEND_ENGINE_DESCRIPTOR: {
      const int graph_attr = d->kind == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR ? CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH
                                                                            : CUDNN_ATTR_ENGINE_OPERATION_GRAPH;
      const Desc* graph = desc_attr(d, graph_attr);
      if (graph == nullptr || graph->kind != CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR || !graph->finalized)
        return CUDNN_STATUS_BAD_PARAM;
      if (!recognise(graph, &d->problem)) return CUDNN_STATUS_NOT_SUPPORTED;  // no engine for this graph
      d->recognised = true;
      break;
    }
    case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR: {
      const Desc* engine = desc_attr(d, CUDNN_ATTR_ENGINECFG_ENGINE);
      if (engine == nullptr || !engine->finalized || !engine->recognised) return CUDNN_STATUS_BAD_PARAM;
      d->recognised = true;
      d->problem = engine->problem;
      break;
    }
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: {
      const Desc* cfg = desc_attr(d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG);
      if (cfg == nullptr || cfg->kind != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR || !cfg->finalized)
        return CUDNN_STATUS_BAD_PARAM;
      if (!cfg->recognised) return CUDNN_STATUS_NOT_SUPPORTED;
      d->recognised = true;
      d->problem = cfg->problem;
      const TensorInfo& q = d->problem.tensors.at(d->problem.q);
      d->workspace = q.dims[0] * q.dims[1] * q.dims[2] * static_cast<int64_t>(sizeof(float));
      Attr a;
      a.type = CUDNN_TYPE_INT64;
      a.count = 1;
      a.bytes.resize(sizeof(int64_t));
      std::memcpy(a.bytes.data(), &d->workspace, sizeof(int64_t));
      d->attrs[CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE] = std::move(a);
      break;
    }
    default:
      break;
  }
  d->finalized = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                                       cudnnBackendAttributeName_t attributeName,
                                       cudnnBackendAttributeType_t attributeType, int64_t requestedElementCount,
                                       int64_t* elementCount, void* arrayOfElements) {
  const std::lock_guard<std::mutex> lock(g_mutex);
  const Desc* d = lookup(descriptor);
  if (d == nullptr || requestedElementCount < 0) return CUDNN_STATUS_BAD_PARAM;
  cudnnBackendAttributeType_t want{};
  if (!attribute_type(d->kind, attributeName, &want) || want != attributeType) return CUDNN_STATUS_BAD_PARAM;
  if (requestedElementCount > 0 && arrayOfElements == nullptr) return CUDNN_STATUS_BAD_PARAM;
  if (attributeName == CUDNN_ATTR_ENGINEHEUR_RESULTS) {
    // one engine config per recognised graph; the caller passes ENGINECFG descriptors to fill
    if (!d->finalized) return CUDNN_STATUS_BAD_PARAM;
    if (elementCount != nullptr) *elementCount = 1;
    if (requestedElementCount == 0) return CUDNN_STATUS_SUCCESS;
    Desc* cfg = lookup(static_cast<void**>(arrayOfElements)[0]);
    if (cfg == nullptr || cfg->kind != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR) return CUDNN_STATUS_BAD_PARAM;
    cfg->attrs.clear();
    cfg->recognised = true;
    cfg->problem = d->problem;
    cfg->finalized = true;
    return CUDNN_STATUS_SUCCESS;
  }
  const Attr* a = find(d, attributeName);
  if (a == nullptr) return CUDNN_STATUS_BAD_PARAM;  // never set
  if (elementCount != nullptr) *elementCount = a->count;
  const int64_t n = std::min(requestedElementCount, a->count);
  if (attributeType == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
    for (int64_t i = 0; i < n; ++i) {
      const Desc* src = lookup(reinterpret_cast<void* const*>(a->bytes.data())[i]);
      Desc* dst = lookup(static_cast<void**>(arrayOfElements)[i]);
      if (src == nullptr || dst == nullptr || dst->kind != src->kind) return CUDNN_STATUS_BAD_PARAM;
      if (dst != src) *dst = *src;
    }
    return CUDNN_STATUS_SUCCESS;
  }
  if (n > 0) std::memcpy(arrayOfElements, a->bytes.data(), static_cast<size_t>(n) * element_size(attributeType));
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t executionPlan,
                                  cudnnBackendDescriptor_t variantPack) {
  SdpaProblem problem;
  std::map<int64_t, TensorInfo> tensors;
  std::map<int64_t, void*> ptr;
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
  {
    const std::lock_guard<std::mutex> lock(g_mutex);
    const Desc* plan = lookup(executionPlan);
    const Desc* pack = lookup(variantPack);
    if (handle == nullptr || plan == nullptr || pack == nullptr) return CUDNN_STATUS_BAD_PARAM;
    if (plan->kind != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR || !plan->finalized || !plan->recognised)
      return CUDNN_STATUS_BAD_PARAM;
    if (pack->kind != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR || !pack->finalized) return CUDNN_STATUS_BAD_PARAM;
    problem = plan->problem;
    tensors = problem.tensors;
    const std::vector<int64_t> ids = values<int64_t>(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
    const std::vector<void*> ptrs = values<void*>(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
    for (size_t i = 0; i < ids.size(); ++i) ptr[ids[i]] = ptrs[i];
    (void)value<void*>(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, &workspace);
    workspace_bytes = plan->workspace;
  }
  for (const auto& [uid, t] : tensors) {
    if (t.is_virtual) continue;
    auto it = ptr.find(uid);
    if (it == ptr.end() || it->second == nullptr) return CUDNN_STATUS_BAD_PARAM;
  }
  if (workspace_bytes > 0) {
    if (workspace == nullptr) return CUDNN_STATUS_BAD_PARAM;
    std::memset(workspace, 0x5a, static_cast<size_t>(workspace_bytes));
  }
  if (problem.backward)
    run_sdpa_backward(problem, tensors, ptr);
  else
    run_sdpa(problem, tensors, ptr);
  return CUDNN_STATUS_SUCCESS;
}
