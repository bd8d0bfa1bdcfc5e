// CPU convolution through oneDNN (kernels/conv/conv_onednn.h; kernels/conv/CPU.md,
// "CPU convolution paths").
//
// Primitives: convolution_forward (forward_training, bias fused),
// convolution_backward_data, convolution_backward_weights (the bias gradient
// fused when d_w is wanted too), algorithm convolution_direct; stride,
// padding before/after and groups as Conv2dParams says, dilation d as
// oneDNN's d - 1. Grouped weights [O, Cg, KH, KW] are oneDNN's
// [G, O/G, Cg, KH, KW] over the same memory.
//
// Precision: f32 runs fp32 FMAs (oneDNN's default strict fpmath mode). bf16
// multiplies bf16 operands (each product exact in fp32) and accumulates in
// fp32 (VDPBF16PS / AMX), adds the bias in fp32 and rounds once into the bf16
// output; as in the bf16 matmul, those instructions treat bf16 subnormals as
// zero. f16 takes oneDNN only where this oneDNN has a non-reference f16
// convolution (AVX512-FP16 CPUs); elsewhere it widens on the im2col path.
//
// Layouts: each operand is described by its own strides (a dense NCHW or
// NHWC tensor by its format tag, so that size-1 dims cannot make two equal
// layouts look different). The primitive chooses its weights layout
// (format_tag::any: oneDNN's blocked OIhw16i16o and friends); its activations
// layout is the output's (channels-last stays channels-last), or any for
// NCHW (kActivationsAnyForNchw, chosen by measurement: kernels/conv/CPU.md). Every
// operand whose layout differs from the primitive's is reordered into a
// temporary before the call (inputs) or out of it after (outputs); those
// reorders are counted (conv_onednn_reorders()).
//
// Primitives and their reorders are cached per key (sizes, strides, params,
// dtype, thread count) in an LRU of 128 entries (runtime/cpu/onednn.h); a key
// oneDNN can only run on its reference kernels, or cannot run at all, is
// remembered as unsupported, and the caller takes im2col.
#include "kernels/conv/conv_onednn.h"

#include <omp.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "runtime/cpu/cpu_dispatch.h"
#include "runtime/cpu/onednn.h"

namespace hg::cpu {

namespace {

using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;
using onednn::engine;
using onednn::env_is;

// Measured on the AVX-512 development machine (kernels/conv/CPU.md, "CPU
// convolution paths"): NCHW tensors run faster reordered into oneDNN's
// blocked layouts than through its NCHW kernels (an im2col GEMM).
constexpr bool kActivationsAnyForNchw = true;

std::atomic<int64_t> g_reorders{0};

using Mode = ConvMode;

Mode mode() {
  static const Mode m = [] {
    const char* v = std::getenv("HG_CPU_CONV");
    if (v == nullptr || *v == '\0' || std::strcmp(v, "auto") == 0) return Mode::automatic;
    if (std::strcmp(v, "im2col") == 0) return Mode::im2col;
    if (std::strcmp(v, "onednn") == 0) return Mode::onednn;
    HG_LOG_WARN("ignoring HG_CPU_CONV={} (expected auto, im2col or onednn)", v);
    return Mode::automatic;
  }();
  return m;
}

dt to_dnnl(DType d) {
  switch (d) {
    case DType::F32:
      return dt::f32;
    case DType::BF16:
      return dt::bf16;
    case DType::F16:
      return dt::f16;
    default:
      return dt::undef;
  }
}

// The decision of runtime/cpu/cpu_dispatch.h; oneDNN is asked only when
// the switches leave it a chance.
const char* off_reason(DType dtype) {
  const bool generic = env_is("HG_CPU_ISA", "generic");
  const bool off = mode() == Mode::im2col || generic;
  return conv_onednn_decision(dtype, off ? OnednnCaps{} : onednn::caps(), mode(), generic);
}

// Cached once per dtype (the environment is read once, the CPU does not change).
const char* cached_off_reason(DType dtype) {
  static const char* const f32 = off_reason(DType::F32);
  static const char* const bf16 = off_reason(DType::BF16);
  static const char* const f16 = off_reason(DType::F16);
  switch (dtype) {
    case DType::F32:
      return f32;
    case DType::BF16:
      return bf16;
    case DType::F16:
      return f16;
    default:
      return off_reason(dtype);
  }
}

enum Kind : int64_t { kForward = 0, kBackwardData = 1, kBackwardWeights = 2 };

struct Key {
  int64_t kind, dtype, threads, bias, channels_last;
  int64_t x[4], w[4], y[4];     // sizes: [N, C, H, W], [O, Cg, KH, KW], [N, O, OH, OW]
  int64_t xs[4], ws[4], ys[4];  // strides of x (or d_x), w (or d_w), y (or d_y)
  int64_t bs;                   // bias stride
  int64_t stride[2], pad_lo[2], pad_hi[2], dilation[2], groups;
};

// One tensor argument of a primitive: the layout of the caller's tensor
// (user) and the primitive's (prim); when they differ, the reorder between them.
struct Operand {
  int arg = 0;
  bool output = false;
  memory::desc user, prim;
  bool reordered = false;
  dnnl::reorder reorder;
};

struct Entry {
  bool supported = false;
  dnnl::primitive prim;
  std::vector<Operand> operands;
};

onednn::Cache<Key, Entry, 128>& cache() {
  static onednn::Cache<Key, Entry, 128> c;
  return c;
}

// Dense in this order of dims (outermost first), dims of size 1 ignored.
bool dense_in(const int64_t* sizes, const int64_t* strides, const int* order) {
  int64_t expect = 1;
  for (int i = 3; i >= 0; --i) {
    const int d = order[i];
    if (sizes[d] == 1) continue;
    if (strides[d] != expect) return false;
    expect *= sizes[d];
  }
  return true;
}

// A [N, C, H, W] operand: its format tag when dense NCHW or NHWC (preferring
// `prefer` when both, as with C = 1), else its strides.
memory::desc activation_desc(const int64_t* sizes, const int64_t* strides, dt type, tag prefer) {
  static const int nchw[4] = {0, 1, 2, 3}, nhwc[4] = {0, 2, 3, 1};
  const memory::dims dims(sizes, sizes + 4);
  const bool is_nchw = dense_in(sizes, strides, nchw), is_nhwc = dense_in(sizes, strides, nhwc);
  if (is_nchw && is_nhwc) return memory::desc(dims, type, prefer);
  if (is_nchw) return memory::desc(dims, type, tag::nchw);
  if (is_nhwc) return memory::desc(dims, type, tag::nhwc);
  return memory::desc(dims, type, memory::dims(strides, strides + 4));
}

// Weights [O, Cg, KH, KW] with strides ws; grouped: [G, O/G, Cg, KH, KW].
memory::dims weight_dims(const Key& k) {
  if (k.groups == 1) return {k.w[0], k.w[1], k.w[2], k.w[3]};
  return {k.groups, k.w[0] / k.groups, k.w[1], k.w[2], k.w[3]};
}

memory::desc weight_user_desc(const Key& k, dt type) {
  if (k.groups == 1) return memory::desc(weight_dims(k), type, {k.ws[0], k.ws[1], k.ws[2], k.ws[3]});
  return memory::desc(weight_dims(k), type, {k.ws[0] * (k.w[0] / k.groups), k.ws[0], k.ws[1], k.ws[2], k.ws[3]});
}

Operand operand(int arg, bool output, const memory::desc& user, const memory::desc& prim) {
  Operand o;
  o.arg = arg;
  o.output = output;
  o.user = user;
  o.prim = prim;
  if (user != prim) {
    o.reordered = true;
    o.reorder = output ? dnnl::reorder(dnnl::reorder::primitive_desc(engine(), prim, engine(), user))
                       : dnnl::reorder(dnnl::reorder::primitive_desc(engine(), user, engine(), prim));
  }
  return o;
}

Entry make_entry(const Key& k) {
  Entry e;
  const dt type = to_dnnl(static_cast<DType>(k.dtype));
  const tag layout = k.channels_last ? tag::nhwc : tag::nchw;
  const tag act = k.channels_last || !kActivationsAnyForNchw ? layout : tag::any;
  const memory::dims strides{k.stride[0], k.stride[1]}, dilates{k.dilation[0] - 1, k.dilation[1] - 1},
      pad_l{k.pad_lo[0], k.pad_lo[1]}, pad_r{k.pad_hi[0], k.pad_hi[1]};
  const char* what = k.kind == kForward ? "forward" : k.kind == kBackwardData ? "backward-data" : "backward-weights";
  try {  // every descriptor in here: oneDNN may reject any of them (dnnl::error, caught below)
    const memory::desc x_user = activation_desc(k.x, k.xs, type, layout);
    const memory::desc y_user = activation_desc(k.y, k.ys, type, layout);
    const memory::desc w_user = weight_user_desc(k, type);
    const memory::desc x_any(memory::dims(k.x, k.x + 4), type, act), y_any(memory::dims(k.y, k.y + 4), type, act);
    const memory::desc w_any(weight_dims(k), type, tag::any), b_desc({k.w[0]}, type, tag::x);
    const memory::desc b_user({k.w[0]}, type, {k.bias ? k.bs : 1});
    using fwd = dnnl::convolution_forward;
    const auto algo = dnnl::algorithm::convolution_direct;
    const auto prop = dnnl::prop_kind::forward_training;
    const fwd::primitive_desc hint(
        k.bias && k.kind != kBackwardData
            ? fwd::desc(prop, algo, x_any, w_any, b_desc, y_any, strides, dilates, pad_l, pad_r)
            : fwd::desc(prop, algo, x_any, w_any, y_any, strides, dilates, pad_l, pad_r),
        engine());
    std::string impl;
    // oneDNN's reference kernels are scalar loops: im2col is faster.
    const auto reference = [&](const char* info) {
      impl = info;
      if (!onednn::is_reference(info)) return false;
      HG_LOG_DEBUG("oneDNN {} conv2d {} x=[{}, {}, {}, {}] w=[{}, {}, {}, {}]: only '{}', im2col taken",
                   dtype_name(static_cast<DType>(k.dtype)), what, k.x[0], k.x[1], k.x[2], k.x[3], k.w[0], k.w[1],
                   k.w[2], k.w[3], impl);
      return true;
    };
    if (k.kind == kForward) {
      if (reference(hint.impl_info_str())) return e;
      e.prim = fwd(hint);
      e.operands.push_back(operand(DNNL_ARG_SRC, false, x_user, hint.src_desc()));
      e.operands.push_back(operand(DNNL_ARG_WEIGHTS, false, w_user, hint.weights_desc()));
      if (k.bias) e.operands.push_back(operand(DNNL_ARG_BIAS, false, b_user, hint.bias_desc()));
      e.operands.push_back(operand(DNNL_ARG_DST, true, y_user, hint.dst_desc()));
    } else if (k.kind == kBackwardData) {
      using bwd = dnnl::convolution_backward_data;
      const bwd::primitive_desc pd(bwd::desc(algo, x_any, w_any, y_any, strides, dilates, pad_l, pad_r), engine(),
                                   hint);
      if (reference(pd.impl_info_str())) return e;
      e.prim = bwd(pd);
      e.operands.push_back(operand(DNNL_ARG_DIFF_DST, false, y_user, pd.diff_dst_desc()));
      e.operands.push_back(operand(DNNL_ARG_WEIGHTS, false, w_user, pd.weights_desc()));
      e.operands.push_back(operand(DNNL_ARG_DIFF_SRC, true, x_user, pd.diff_src_desc()));
    } else {
      using bwd = dnnl::convolution_backward_weights;
      const bwd::primitive_desc pd(k.bias ? bwd::desc(algo, x_any, w_any, b_desc, y_any, strides, dilates, pad_l, pad_r)
                                          : bwd::desc(algo, x_any, w_any, y_any, strides, dilates, pad_l, pad_r),
                                   engine(), hint);
      if (reference(pd.impl_info_str())) return e;
      e.prim = bwd(pd);
      e.operands.push_back(operand(DNNL_ARG_SRC, false, x_user, pd.src_desc()));
      e.operands.push_back(operand(DNNL_ARG_DIFF_DST, false, y_user, pd.diff_dst_desc()));
      e.operands.push_back(operand(DNNL_ARG_DIFF_WEIGHTS, true, w_user, pd.diff_weights_desc()));
      if (k.bias) e.operands.push_back(operand(DNNL_ARG_DIFF_BIAS, true, b_user, pd.diff_bias_desc()));
    }
    HG_LOG_DEBUG("oneDNN {} conv2d {} x=[{}, {}, {}, {}] w=[{}, {}, {}, {}]: {}",
                 dtype_name(static_cast<DType>(k.dtype)), what, k.x[0], k.x[1], k.x[2], k.x[3], k.w[0], k.w[1], k.w[2],
                 k.w[3], impl);
    e.supported = true;
  } catch (const dnnl::error& err) {
    HG_LOG_DEBUG("oneDNN {} conv2d {} x=[{}, {}, {}, {}] w=[{}, {}, {}, {}] not available ({}); im2col taken",
                 dtype_name(static_cast<DType>(k.dtype)), what, k.x[0], k.x[1], k.x[2], k.x[3], k.w[0], k.w[1], k.w[2],
                 k.w[3], err.what());
    e = Entry();
  }
  return e;
}

void fill4(int64_t* out, const Tensor& t, bool strides) {
  for (int i = 0; i < 4; ++i) out[i] = strides ? t.stride(i) : t.size(i);
}

Key make_key(Kind kind, const Tensor& x, const Tensor& w, const Tensor& y, bool bias, int64_t bias_stride,
             const Conv2dParams& p) {
  Key k = onednn::zeroed_key<Key>();
  k.kind = kind;
  k.dtype = static_cast<int64_t>(x.dtype());
  k.threads = omp_get_max_threads();
  k.bias = bias ? 1 : 0;
  // The activations' layout: the one conv_ops gave the output (x's; for
  // backward-data d_x, for backward-weights x itself).
  k.channels_last = is_channels_last(kind == kForward ? y : x) ? 1 : 0;
  k.bs = bias_stride;
  fill4(k.x, x, false);
  fill4(k.w, w, false);
  fill4(k.y, y, false);
  fill4(k.xs, x, true);
  fill4(k.ws, w, true);
  fill4(k.ys, y, true);
  for (int d = 0; d < 2; ++d) {
    k.stride[d] = p.stride[d];
    k.pad_lo[d] = p.pad_lo[d];
    k.pad_hi[d] = p.pad_hi[d];
    k.dilation[d] = p.dilation[d];
  }
  k.groups = p.groups;
  return k;
}

// Runs e with the tensors' memory (data[i] for e.operands[i]). `shared`
// (may be null) carries reordered inputs from one run to the next on the same
// tensors (backward-data and backward-weights both read d_y): an input found
// there in the layout this primitive wants is not reordered again.
void run(const Entry& e, const std::vector<void*>& data, const char* what,
         std::unordered_map<int, memory>* shared = nullptr) {
  dnnl::stream& stream = onednn::stream();
  try {
    std::unordered_map<int, memory> args;
    std::vector<std::pair<memory, memory>> outputs;  // (primitive's, caller's) to reorder after
    int64_t reorders = 0;
    for (size_t i = 0; i < e.operands.size(); ++i) {
      const Operand& o = e.operands[i];
      const memory user(o.user, engine(), data[i]);
      if (!o.reordered) {
        args.emplace(o.arg, user);
        continue;
      }
      if (!o.output && shared != nullptr) {
        const auto it = shared->find(o.arg);
        if (it != shared->end() && it->second.get_desc() == o.prim) {
          args.emplace(o.arg, it->second);
          continue;
        }
      }
      const memory tmp(o.prim, engine());
      if (o.output) {
        outputs.emplace_back(tmp, user);
      } else {
        o.reorder.execute(stream, {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, tmp}});
        if (shared != nullptr) shared->insert_or_assign(o.arg, tmp);
      }
      ++reorders;
      args.emplace(o.arg, tmp);
    }
    e.prim.execute(stream, args);
    size_t j = 0;
    for (const Operand& o : e.operands) {
      if (!o.reordered || !o.output) continue;
      o.reorder.execute(stream, {{DNNL_ARG_FROM, outputs[j].first}, {DNNL_ARG_TO, outputs[j].second}});
      ++j;
    }
    stream.wait();
    g_reorders.fetch_add(reorders, std::memory_order_relaxed);
  } catch (const dnnl::error& err) {
    HG_FAIL("conv2d: oneDNN's ", what, " failed: ", err.what(),
            "; HG_CPU_CONV=im2col runs convolutions without oneDNN");
  }
}

}  // namespace

const char* conv_onednn_off_reason(DType dtype) { return cached_off_reason(dtype); }

int64_t conv_onednn_reorders() { return g_reorders.load(); }

bool conv2d_forward_onednn(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& bias,
                           const Conv2dParams& p) {
  if (*cached_off_reason(x.dtype()) != '\0') return false;
  const Key key = make_key(kForward, x, w, y, bias.defined(), bias.defined() ? bias.stride(0) : 0, p);
  const std::shared_ptr<const Entry> e = cache().get(key, [&] { return make_entry(key); });
  if (!e->supported) return false;
  std::vector<void*> data{x.data_ptr(), w.data_ptr()};
  if (bias.defined()) data.push_back(bias.data_ptr());
  data.push_back(y.data_ptr());
  run(*e, data, "convolution forward");
  return true;
}

bool conv2d_backward_onednn(const Tensor& d_x, const Tensor& d_w, const Tensor& d_b, const Tensor& d_y, const Tensor& x,
                            const Tensor& w, const Conv2dParams& p) {
  if (*cached_off_reason(x.dtype()) != '\0') return false;
  // Both primitives are looked up before either runs, so that a shape oneDNN
  // cannot take falls back whole (nothing written twice).
  std::shared_ptr<const Entry> data_e, weights_e;
  if (d_x.defined()) {
    const Key key = make_key(kBackwardData, d_x, w, d_y, false, 0, p);
    data_e = cache().get(key, [&] { return make_entry(key); });
    if (!data_e->supported) return false;
  }
  const bool fused_bias = d_w.defined() && d_b.defined();
  if (d_w.defined()) {
    Key key = make_key(kBackwardWeights, x, d_w, d_y, fused_bias, fused_bias ? d_b.stride(0) : 0, p);
    weights_e = cache().get(key, [&] { return make_entry(key); });
    if (!weights_e->supported) return false;
  }
  if (!d_x.defined() && !d_w.defined()) return false;  // the bias gradient alone: the caller's loop
  // d_y is reordered once when both primitives want it in the same layout.
  std::unordered_map<int, memory> shared;
  if (data_e) run(*data_e, {d_y.data_ptr(), w.data_ptr(), d_x.data_ptr()}, "convolution backward-data", &shared);
  if (weights_e) {
    std::vector<void*> data{x.data_ptr(), d_y.data_ptr(), d_w.data_ptr()};
    if (fused_bias) data.push_back(d_b.data_ptr());
    run(*weights_e, data, "convolution backward-weights", &shared);
  }
  return true;
}

}  // namespace hg::cpu
