// The CPU's native bf16 GEMM, and the f32 GEMM on AVX-512 CPUs, through
// oneDNN's matmul primitive (kernels/gemm/gemm_onednn.h; kernels/gemm/CPU.md, "CPU
// GEMM paths").
//
// f32: f32 A, B and C, fp32 FMAs (oneDNN's default "strict" fpmath mode: no
// down-conversion). f16 (where this oneDNN has an f16 matmul: AVX512-FP16 /
// AMX-FP16 CPUs with oneDNN after 2.6): f16 A, B and C, fp32 accumulation
// (oneDNN's default), one rounding. bf16: bf16 A and B, fp32 accumulation (VDPBF16PS / AMX: each bf16 product is exact
// in fp32), alpha as oneDNN's output scale, beta as its sum post-op on C, one
// rounding into the bf16 C. Transposes and row strides are memory-descriptor
// strides, a batch stride of 0 is a batch dim of 1 (oneDNN broadcasts it), so
// nothing is copied here. Primitives are cached per shape (an LRU of
// 256 entries) so that a call costs a hash lookup plus three memory
// objects; a shape oneDNN can only run on its reference (scalar) kernels, or
// cannot run at all, is remembered as unsupported and the caller widens.
//
// Engine, streams, the primitive cache and the thread-count rule: runtime/cpu/onednn.h.
#include "kernels/gemm/gemm_onednn.h"

#include <omp.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>

#include "core/error.h"
#include "core/log.h"
#include "runtime/cpu/onednn.h"

namespace hg::cpu {

namespace {

using dnnl::memory;
using dt = memory::data_type;

using onednn::engine;

// Which GEMMs take oneDNN in this process (decided once, by
// cpu::gemm_decision from oneDNN's caps and the switches).
const GemmDecision& policy() {
  static const GemmDecision d = [] {
    const char* forced = std::getenv("HG_CPU_GEMM");
    if (forced != nullptr && *forced != '\0' && std::strcmp(forced, "widen") != 0 &&
        std::strcmp(forced, "openblas") != 0 && std::strcmp(forced, "auto") != 0) {
      HG_LOG_WARN("ignoring HG_CPU_GEMM={} (expected auto, widen or openblas)", forced);
    }
    const bool generic = onednn::env_is("HG_CPU_ISA", "generic");
    // The oneDNN probes only when the switches leave oneDNN a chance.
    const bool off = onednn::env_is("HG_CPU_GEMM", "widen") || generic;
    return gemm_decision(off ? OnednnCaps{} : onednn::caps(), forced, generic);
  }();
  return d;
}

bool takes(const Decision& d) { return *d.reason == '\0' && std::strncmp(d.path, "onednn", 6) == 0; }

struct Key {
  DType dtype;
  bool trans_a, trans_b, bias;
  int64_t m, n, k, batch, lda, ldb, ldc, stride_a, stride_b, stride_c;
  int64_t outer_batch, outer_stride_a, outer_stride_b, outer_stride_c;
  float alpha, beta;
  int threads;
};

struct Entry {
  bool supported = false;
  memory::desc a, b, c, bias;
  dnnl::matmul prim;
};

onednn::Cache<Key, Entry, 256>& cache() {
  static onednn::Cache<Key, Entry, 256> c;
  return c;
}

// A (rows x cols) operand stored with row stride ld, transposed or not, as a
// [batch, r, c] descriptor of the logical op(X), or [outer, batch, r, c] with
// an outer batch level; a batch stride of 0 -> a batch dim of 1 (broadcast).
memory::desc operand_desc(dt type, int64_t outer, int64_t outer_stride, int64_t batch, int64_t batch_stride, int64_t r,
                          int64_t c, bool trans, int64_t ld) {
  const memory::dim row = trans ? 1 : ld, col = trans ? ld : 1;
  if (batch == 1 && outer == 1) return memory::desc({r, c}, type, {row, col});
  const int64_t extent = (trans ? c : r) * ld;  // the stride of a dim of size 1 is not read
  const int64_t b = batch_stride == 0 ? 1 : batch;
  const int64_t bs = batch_stride == 0 ? extent : batch_stride;
  if (outer == 1) return memory::desc({b, r, c}, type, {bs, row, col});
  const int64_t o = outer_stride == 0 ? 1 : outer;
  return memory::desc({o, b, r, c}, type, {outer_stride == 0 ? b * bs : outer_stride, bs, row, col});
}

Entry make_entry(const GemmArgs& g) {
  Entry e;
  const dt type = g.dtype == DType::F32 ? dt::f32 : g.dtype == DType::F16 ? dt::f16 : dt::bf16;
  try {
    e.a = operand_desc(type, g.outer_batch, g.outer_stride_a, g.batch, g.stride_a, g.m, g.k, g.trans_a, g.lda);
    e.b = operand_desc(type, g.outer_batch, g.outer_stride_b, g.batch, g.stride_b, g.k, g.n, g.trans_b, g.ldb);
    e.c = operand_desc(type, g.outer_batch, g.outer_batch == 1 ? 0 : g.outer_stride_c, g.batch,
                       g.batch == 1 ? 0 : g.stride_c, g.m, g.n, false, g.ldc);
    // Every entry writing one C: not a matmul.
    if ((g.batch > 1 && g.stride_c == 0) || (g.outer_batch > 1 && g.outer_stride_c == 0)) return e;
    dnnl::primitive_attr attr;
    if (g.alpha != 1.0f) attr.set_output_scales(0, {g.alpha});
    if (g.beta != 0.0f) {
      dnnl::post_ops po;
      po.append_sum(g.beta);
      attr.set_post_ops(po);
    }
    // The bias epilogue: one value per column of C, added to the fp32
    // accumulator before C's rounding (2-D products only).
    const bool with_bias = g.epilogue == GemmEpilogue::bias;
    if (with_bias) e.bias = memory::desc({1, g.n}, type, {g.n, 1});
    const dnnl::matmul::desc desc =
        with_bias ? dnnl::matmul::desc(e.a, e.b, e.bias, e.c) : dnnl::matmul::desc(e.a, e.b, e.c);
    const dnnl::matmul::primitive_desc pd(desc, attr, engine());
    const std::string impl = pd.impl_info_str();
    if (onednn::is_reference(impl.c_str())) {  // the scalar reference kernels: widening / OpenBLAS is faster
      HG_LOG_DEBUG("oneDNN {} matmul m={} n={} k={} batch={}: only '{}', not taken", dtype_name(g.dtype), g.m, g.n, g.k,
                   g.batch, impl);
      return e;
    }
    e.prim = dnnl::matmul(pd);
    e.supported = true;
  } catch (const dnnl::error& err) {
    HG_LOG_DEBUG("oneDNN {} matmul m={} n={} k={} batch={} not available ({}); not taken", dtype_name(g.dtype), g.m,
                 g.n, g.k, g.batch, err.what());
    e.supported = false;
  }
  return e;
}

}  // namespace

bool native_bf16_gemm() { return takes(policy().bf16); }

const char* native_bf16_gemm_reason() { return policy().bf16.reason; }

bool native_f32_gemm() { return takes(policy().f32); }

const char* native_f32_gemm_reason() { return policy().f32.reason; }

bool native_f16_gemm() { return takes(policy().f16); }

const char* native_f16_gemm_reason() { return policy().f16.reason; }

const GemmDecision& gemm_onednn_decision() { return policy(); }

namespace {

// The cached primitive for g, or null when oneDNN does not take g.
std::shared_ptr<const Entry> entry_for(const GemmArgs& g) {
  if (!(g.dtype == DType::BF16 && native_bf16_gemm()) && !(g.dtype == DType::F32 && native_f32_gemm()) &&
      !(g.dtype == DType::F16 && native_f16_gemm())) {
    return nullptr;
  }
  // No epilogue, or a bias over the columns of one 2-D product (GemmArgs'
  // other epilogues are cuBLASLt's).
  if (g.epilogue != GemmEpilogue::none &&
      !(g.epilogue == GemmEpilogue::bias && g.batch == 1 && g.outer_batch == 1 && g.bias != nullptr)) {
    return nullptr;
  }
  Key key = onednn::zeroed_key<Key>();
  key.dtype = g.dtype;
  key.trans_a = g.trans_a;
  key.trans_b = g.trans_b;
  key.bias = g.epilogue == GemmEpilogue::bias;
  key.m = g.m;
  key.n = g.n;
  key.k = g.k;
  key.batch = g.batch;
  key.lda = g.lda;
  key.ldb = g.ldb;
  key.ldc = g.ldc;
  key.stride_a = g.batch == 1 ? 0 : g.stride_a;
  key.stride_b = g.batch == 1 ? 0 : g.stride_b;
  key.stride_c = g.batch == 1 ? 0 : g.stride_c;
  key.outer_batch = g.outer_batch;
  key.outer_stride_a = g.outer_batch == 1 ? 0 : g.outer_stride_a;
  key.outer_stride_b = g.outer_batch == 1 ? 0 : g.outer_stride_b;
  key.outer_stride_c = g.outer_batch == 1 ? 0 : g.outer_stride_c;
  key.alpha = g.alpha;
  key.beta = g.beta;
  key.threads = omp_get_max_threads();
  std::shared_ptr<const Entry> e = cache().get(key, [&] { return make_entry(g); });
  return e->supported ? e : nullptr;
}

}  // namespace

bool gemm_onednn_takes(const GemmArgs& g) { return entry_for(g) != nullptr; }

bool gemm_onednn(const GemmArgs& g) {
  const std::shared_ptr<const Entry> e = entry_for(g);
  if (e == nullptr) return false;
  dnnl::stream& stream = onednn::stream();
  try {
    const memory a(e->a, engine(), const_cast<void*>(g.a));
    const memory b(e->b, engine(), const_cast<void*>(g.b));
    const memory c(e->c, engine(), g.c);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
    if (g.epilogue == GemmEpilogue::bias) args.emplace(DNNL_ARG_BIAS, memory(e->bias, engine(), g.bias));
    e->prim.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& err) {
    HG_FAIL("matmul: oneDNN's ", dtype_name(g.dtype), " matmul failed (m=", g.m, " n=", g.n, " k=", g.k,
            " batch=", g.batch, "): ", err.what(), "; HG_CPU_GEMM=widen runs GEMMs without oneDNN");
  }
  return true;
}

}  // namespace hg::cpu
