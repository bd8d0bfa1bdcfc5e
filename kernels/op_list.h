// The op list: every op of the kernel library, named once.
//
// Note [The op list]
// HG_FORALL_OPS(_) calls _(name, amp_class) for every op. From it come the
// OpId enum, op names (for errors, logs and test names) and the AMP cast
// policy table (amp/ reads amp_class; it can be overridden at run time there).
// Adding an op = one line here + its CPU and CUDA kernels + its autograd rule
// + one test-case entry.
//
// amp_class (what autocast does with the op's floating inputs):
//   lower        run in the autocast dtype (f16/bf16): GEMM-like ops
//   fp32         run in f32: ops whose range or accuracy suffers in 16 bits
//   promote      run in the widest input dtype
//   passthrough  run in whatever dtype the inputs have
//   banned       refuse under autocast (the message names the safe op)
#pragma once

#include <cstdint>
#include <string_view>

namespace hg {

#define HG_FORALL_OPS(_)            \
  /* memory */                      \
  _(copy, passthrough)              \
  _(cast, passthrough)              \
  _(fill, passthrough)              \
  /* unary */                       \
  _(neg, passthrough)               \
  _(exp, fp32)                      \
  _(log, fp32)                      \
  _(sqrt, fp32)                     \
  _(rsqrt, fp32)                    \
  _(abs, passthrough)               \
  _(tanh, passthrough)              \
  _(sigmoid, passthrough)           \
  _(relu, passthrough)              \
  _(gelu, passthrough)              \
  _(gelu_tanh, passthrough)         \
  _(silu, passthrough)              \
  /* unary backward: f(d_out, x) */ \
  _(tanh_backward, passthrough)     \
  _(sigmoid_backward, passthrough)  \
  _(relu_backward, passthrough)     \
  _(gelu_backward, passthrough)     \
  _(gelu_tanh_backward, passthrough) \
  _(silu_backward, passthrough)     \
  /* binary, broadcasting */        \
  _(add, promote)                   \
  _(sub, promote)                   \
  _(mul, promote)                   \
  _(div, promote)                   \
  _(maximum, promote)               \
  _(minimum, promote)               \
  _(pow, fp32)                      \
  _(eq, promote)                    \
  _(ne, promote)                    \
  _(lt, promote)                    \
  _(le, promote)                    \
  _(gt, promote)                    \
  _(ge, promote)                    \
  _(where, promote)                 \
  /* reductions */                  \
  _(sum, fp32)                      \
  _(mean, fp32)                     \
  _(max, passthrough)               \
  _(min, passthrough)               \
  _(argmax, passthrough)            \
  _(norm, fp32)                     \
  /* random */                      \
  _(uniform, passthrough)           \
  _(normal, passthrough)            \
  _(bernoulli, passthrough)         \
  /* GEMM */                        \
  _(matmul, lower)                  \
  /* softmax family */              \
  _(softmax, fp32)                  \
  _(log_softmax, fp32)              \
  _(softmax_backward, fp32)         \
  _(log_softmax_backward, fp32)     \
  _(cross_entropy, fp32)            \
  _(cross_entropy_backward, fp32)

enum class OpId : uint16_t {
#define HG_OP_ENUM(name, amp) name,
  HG_FORALL_OPS(HG_OP_ENUM)
#undef HG_OP_ENUM
};

inline constexpr int kNumOps = 0
#define HG_OP_COUNT(name, amp) +1
    HG_FORALL_OPS(HG_OP_COUNT)
#undef HG_OP_COUNT
    ;

enum class AmpClass : uint8_t { lower, fp32, promote, passthrough, banned };

constexpr std::string_view op_name(OpId op) {
  switch (op) {
#define HG_OP_NAME(name, amp) \
  case OpId::name:            \
    return #name;
    HG_FORALL_OPS(HG_OP_NAME)
#undef HG_OP_NAME
  }
  return "?";
}

// The default AMP class of each op (amp/ layers run-time overrides on top).
constexpr AmpClass default_amp_class(OpId op) {
  switch (op) {
#define HG_OP_AMP(name, amp) \
  case OpId::name:           \
    return AmpClass::amp;
    HG_FORALL_OPS(HG_OP_AMP)
#undef HG_OP_AMP
  }
  return AmpClass::passthrough;
}

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
