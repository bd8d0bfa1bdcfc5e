// The op list: every op of the kernel library, named once, with all its
// properties on its one line.
//
// Note [The op list]
// Each family has its own list; HG_FORALL_OP_FAMILIES names them all. Every line is
//   _(name, dtypes, amp_class, grad)
// and the list a line sits in is the op's family (OpFamily). From these lines
// come the OpFamily and OpId enums, op_name, op_family, default_amp_class, needs_floating,
// has_backward and the is_* tests below; kernels/elementwise/elementwise_engine.h
// generates the CPU and CUDA dispatch of the element-wise families from the
// same lists. Nothing else switches on op ids by hand. Adding an element-wise
// op = one line here + its functor in kernels/elementwise/elementwise_functors.h + its
// autograd rule + one test entry (docs/kernels.md, "Adding an op").
//
// dtypes (what values the op takes):
//   any          every numeric dtype (element-wise ops never take bool, except
//                comparisons)
//   floating     floating values only: element-wise ops compute integer inputs
//                in f32 (like torch: exp(int) is float); other families reject
//                integer inputs with an error naming the fix
// amp_class (what autocast does with the op's floating inputs):
//   lower        run in the autocast dtype (f16/bf16): GEMM-like ops
//   fp32         run in f32: ops whose range or accuracy suffers in 16 bits
//   promote      run in the widest input dtype
//   passthrough  run in whatever dtype the inputs have
//   banned       refuse under autocast (the message names the safe op)
//   (classes follow PyTorch's CUDA autocast lists where the op is listed there)
// grad (how the op is differentiated):
//   functor      its functor's backward(d_out, saved) formula, run by
//                ops::unary_backward (element-wise unary ops)
//   rule         an autograd rule composed of other ops (autograd/functions*.cpp)
//   none         not differentiable (comparisons, random, integer results), or
//                itself a backward op
#pragma once

#include <cstdint>
#include <string_view>

namespace hg {

// clang-format off
#define HG_FORALL_MEMORY_OPS(_)                 \
  _(copy,      any,      passthrough, rule)     \
  _(cast,      any,      passthrough, rule)     \
  _(fill,      any,      passthrough, none)

// out = f(x); functor ew::Unary<OpId::name, A> in kernels/elementwise/elementwise_functors.h
#define HG_FORALL_UNARY_OPS(_)                  \
  _(neg,       any,      passthrough, functor)  \
  _(exp,       floating, fp32,        functor)  \
  _(log,       floating, fp32,        functor)  \
  _(sqrt,      floating, fp32,        functor)  \
  _(rsqrt,     floating, fp32,        functor)  \
  _(abs,       any,      passthrough, functor)  \
  _(tanh,      floating, passthrough, functor)  \
  _(sigmoid,   floating, passthrough, functor)  \
  _(relu,      any,      passthrough, functor)  \
  _(gelu,      floating, passthrough, functor)  \
  _(gelu_tanh, floating, passthrough, functor)  \
  _(silu,      floating, passthrough, functor)  \
  _(erf,       floating, passthrough, functor)  \
  _(clamp,     any,      passthrough, functor)  \
  _(softplus,  floating, fp32,        functor)  \
  _(round,     any,      passthrough, functor)  \
  _(floor,     any,      passthrough, functor)  \
  _(trunc,     any,      passthrough, functor)

// out = f(a, b), broadcasting; functor ew::Binary<OpId::name, A>
#define HG_FORALL_BINARY_OPS(_)                 \
  _(add,       any,      promote,     rule)     \
  _(sub,       any,      promote,     rule)     \
  _(mul,       any,      promote,     rule)     \
  _(div,       floating, promote,     rule)     \
  _(maximum,   any,      promote,     rule)     \
  _(minimum,   any,      promote,     rule)     \
  _(pow,       floating, fp32,        rule)

// out = f(a, b) as bool, broadcasting; functor ew::Binary<OpId::name, A>
#define HG_FORALL_COMPARISON_OPS(_)             \
  _(eq,        any,      promote,     none)     \
  _(ne,        any,      promote,     none)     \
  _(lt,        any,      promote,     none)     \
  _(le,        any,      promote,     none)     \
  _(gt,        any,      promote,     none)     \
  _(ge,        any,      promote,     none)

#define HG_FORALL_SELECT_OPS(_)                 \
  _(where,     any,      promote,     rule)

#define HG_FORALL_REDUCTION_OPS(_)              \
  _(sum,       any,      fp32,        rule)     \
  _(mean,      floating, fp32,        rule)     \
  _(max,       any,      passthrough, rule)     \
  _(min,       any,      passthrough, rule)     \
  _(argmax,    any,      passthrough, none)     \
  _(norm,      floating, fp32,        rule)

#define HG_FORALL_RANDOM_OPS(_)                 \
  _(uniform,   floating, passthrough, none)     \
  _(normal,    floating, passthrough, none)     \
  _(bernoulli, floating, passthrough, none)

#define HG_FORALL_GEMM_OPS(_)                   \
  _(matmul,    floating, lower,       rule)     \
  _(bmm,       floating, lower,       rule)

#define HG_FORALL_SOFTMAX_OPS(_)                          \
  _(softmax,                floating, fp32, rule)         \
  _(log_softmax,            floating, fp32, rule)         \
  _(softmax_backward,       floating, fp32, none)         \
  _(log_softmax_backward,   floating, fp32, none)         \
  _(cross_entropy,          floating, passthrough, rule)  \
  _(cross_entropy_backward, floating, fp32, none)

// 4-D NCHW (or channels-last) ops: kernels/conv/conv.h. conv2d runs in the
// autocast dtype like PyTorch's (lower_precision_fp list); pooling and
// batch_norm are on none of its CUDA autocast lists (batch_norm takes 16-bit
// activations with f32 parameters), so they pass through.
#define HG_FORALL_CONV_OPS(_)                                   \
  _(conv2d,                       floating, lower,       rule)  \
  _(conv2d_backward,              floating, lower,       none)  \
  _(max_pool2d,                   floating, passthrough, rule)  \
  _(max_pool2d_backward,          floating, passthrough, none)  \
  _(avg_pool2d,                   floating, passthrough, rule)  \
  _(avg_pool2d_backward,          floating, passthrough, none)  \
  _(adaptive_avg_pool2d,          floating, passthrough, rule)  \
  _(adaptive_avg_pool2d_backward, floating, passthrough, none)  \
  _(batch_norm,                   floating, passthrough, rule)  \
  _(batch_norm_backward,          floating, passthrough, none)
// ---- sequence-model building blocks: norms, embedding, indexing ----
// Row normalisation over the trailing dims (kernels/norm/norm.h); PyTorch's CUDA
// autocast runs layer_norm and rms_norm in fp32 (AT_FORALL_FP32).
#define HG_FORALL_NORM_OPS(_)                             \
  _(layer_norm,             floating, fp32, rule)         \
  _(rms_norm,               floating, fp32, rule)         \
  _(layer_norm_backward,    floating, fp32, none)         \
  _(rms_norm_backward,      floating, fp32, none)

// Gated linear units (kernels/glu/glu.h): the input halved along a dim, one half
// gating the other. Not on PyTorch's CUDA autocast lists: they run in the
// input's dtype, computing in f32 inside the kernel.
#define HG_FORALL_GLU_OPS(_)                              \
  _(glu,                    floating, passthrough, rule)  \
  _(swiglu,                 floating, passthrough, rule)  \
  _(glu_backward,           floating, passthrough, none)  \
  _(swiglu_backward,        floating, passthrough, none)

// Gathers, scatters and shape ops (kernels/index/index.h). index_add is the
// deterministic backward of embedding and index_select; cat/stack/scatter_add
// promote like PyTorch's type promotion (scatter_add is on its promote list).
#define HG_FORALL_INDEX_OPS(_)                            \
  _(embedding,              any,      passthrough, rule)  \
  _(index_select,           any,      passthrough, rule)  \
  _(index_add,              any,      passthrough, none)  \
  _(gather,                 any,      passthrough, rule)  \
  _(scatter_add,            any,      promote,     rule)  \
  _(cat,                    any,      promote,     rule)  \
  _(stack,                  any,      promote,     rule)  \
  _(masked_fill,            any,      passthrough, rule)  \
  _(tril,                   any,      passthrough, rule)  \
  _(triu,                   any,      passthrough, rule)  \
  _(arange,                 any,      passthrough, none)

// Attention (kernels/attention/attention.h). The op runs its GEMMs in
// the autocast dtype, like PyTorch's CUDA autocast (scaled_dot_product_attention
// is on its lower_precision_fp list); the fused row kernel between them takes
// whatever dtype the scores have.
#define HG_FORALL_ATTENTION_OPS(_)                                      \
  _(scaled_dot_product_attention, floating, lower,       rule)          \
  _(attention_softmax,            floating, passthrough, rule)          \
  _(attention_softmax_backward,   floating, passthrough, none)

// Every family, each with the OpFamily it stands for.
#define HG_FORALL_OP_FAMILIES(_) \
  _(memory,     HG_FORALL_MEMORY_OPS)     \
  _(unary,      HG_FORALL_UNARY_OPS)      \
  _(binary,     HG_FORALL_BINARY_OPS)     \
  _(comparison, HG_FORALL_COMPARISON_OPS) \
  _(select,     HG_FORALL_SELECT_OPS)     \
  _(reduction,  HG_FORALL_REDUCTION_OPS)  \
  _(random,     HG_FORALL_RANDOM_OPS)     \
  _(gemm,       HG_FORALL_GEMM_OPS)       \
  _(softmax,    HG_FORALL_SOFTMAX_OPS)    \
  _(conv,       HG_FORALL_CONV_OPS)       \
  _(norm,       HG_FORALL_NORM_OPS)       \
  _(glu,        HG_FORALL_GLU_OPS)        \
  _(index,      HG_FORALL_INDEX_OPS)      \
  _(attention,  HG_FORALL_ATTENTION_OPS)

// clang-format on

// The enum and the table below both walk the families in HG_FORALL_OP_FAMILIES
// order, so row i of the table describes OpId(i).
#define HG_OP_ENUM(name, dtypes, amp, grad) name,
#define HG_OP_ENUM_FAMILY(family, list) list(HG_OP_ENUM)
enum class OpId : uint16_t { HG_FORALL_OP_FAMILIES(HG_OP_ENUM_FAMILY) };
#undef HG_OP_ENUM_FAMILY
#undef HG_OP_ENUM

#define HG_OP_COUNT(name, dtypes, amp, grad) +1
#define HG_OP_COUNT_FAMILY(family, list) list(HG_OP_COUNT)
inline constexpr int kNumOps = 0 HG_FORALL_OP_FAMILIES(HG_OP_COUNT_FAMILY);
#undef HG_OP_COUNT_FAMILY
#undef HG_OP_COUNT

// One enumerator per family, in HG_FORALL_OP_FAMILIES order.
#define HG_OP_FAMILY_ENUM(family, list) family,
enum class OpFamily : uint8_t { HG_FORALL_OP_FAMILIES(HG_OP_FAMILY_ENUM) };
#undef HG_OP_FAMILY_ENUM
enum class OpDTypes : uint8_t { any, floating };
enum class AmpClass : uint8_t { lower, fp32, promote, passthrough, banned };
enum class OpGrad : uint8_t { functor, rule, none };
// What a unary op's derivative reads besides d_out: its input x, its output y,
// or nothing (each functor says, kernels/elementwise/elementwise_functors.h).
enum class GradFrom : uint8_t { input, output, nothing };

// The scalar arguments of a parameterised op, in the op's own terms (each
// functor that takes them says which is which: clamp's bounds, softplus's
// beta and threshold). Ops without arguments ignore them.
struct ScalarArgs {
  double a = 0.0;
  double b = 0.0;
};

// One row of the list.
struct OpInfo {
  std::string_view name;
  OpFamily family;
  OpDTypes dtypes;
  AmpClass amp_class;
  OpGrad grad;
};

namespace detail {
#define HG_OP_INFO_ROW(name, dtypes, amp, grad) \
  OpInfo{#name, family_, OpDTypes::dtypes, AmpClass::amp, OpGrad::grad},
#define HG_OP_INFO_FAMILY(family, list)                               \
  {                                                                   \
    constexpr OpFamily family_ = OpFamily::family;                    \
    for (const OpInfo& row : {list(HG_OP_INFO_ROW)}) rows[n++] = row; \
  }
struct OpTable {
  OpInfo rows[kNumOps];
  constexpr OpTable() : rows() {
    int n = 0;
    HG_FORALL_OP_FAMILIES(HG_OP_INFO_FAMILY)
  }
};
#undef HG_OP_INFO_FAMILY
#undef HG_OP_INFO_ROW
inline constexpr OpTable kOpTable{};
}  // namespace detail

constexpr const OpInfo& op_info(OpId op) { return detail::kOpTable.rows[static_cast<int>(op)]; }
constexpr std::string_view op_name(OpId op) { return op_info(op).name; }
constexpr OpFamily op_family(OpId op) { return op_info(op).family; }
// The default AMP class of each op (amp/ layers run-time overrides on top).
constexpr AmpClass default_amp_class(OpId op) { return op_info(op).amp_class; }
constexpr bool needs_floating(OpId op) { return op_info(op).dtypes == OpDTypes::floating; }
constexpr bool has_backward(OpId op) { return op_info(op).grad != OpGrad::none; }
constexpr bool is_unary(OpId op) { return op_family(op) == OpFamily::unary; }
constexpr bool is_comparison(OpId op) { return op_family(op) == OpFamily::comparison; }
// Arithmetic and comparison ops alike take two broadcast operands.
constexpr bool is_binary(OpId op) { return op_family(op) == OpFamily::binary || op_family(op) == OpFamily::comparison; }

constexpr std::string_view amp_class_name(AmpClass c) {
  switch (c) {
    case AmpClass::lower: return "lower";
    case AmpClass::fp32: return "fp32";
    case AmpClass::promote: return "promote";
    case AmpClass::passthrough: return "passthrough";
    case AmpClass::banned: return "banned";
  }
  return "?";
}

}  // namespace hg
