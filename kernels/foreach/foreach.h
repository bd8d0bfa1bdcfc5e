// Multi-tensor element-wise programs: one launch runs a small program over
// every element of many tensors (the foreach / multi_tensor_apply idea), so an
// optimizer written outside the library updates all its parameters and state
// in one pass instead of one launch per tensor and operation.
//
// Note [Foreach programs]
// A ForeachProgram is straight-line code over f32 registers:
//   scalar instructions  kConst (a host constant), kLr (the lr of this step:
//                        lr, or lr * the device-side schedule's factor after
//                        *step - 1 applied steps, Note [Schedules on the
//                        device]), kStep (*step as f32), kBiasCorrection
//                        (1 - value^*step in f64, rounded once), kInvScale,
//                        kFoundInf (1 when *found_inf != 0, else 0);
//   element instructions kLoad (element i of tensor `a`, widened to f32),
//                        arithmetic on registers, kStore (rounds register `b`
//                        to tensor `a`'s dtype, to nearest even).
// Every register is written by exactly one instruction (checked). The scalar
// instructions do not depend on the element: they are evaluated once per
// thread (the f64 pow included), before the element loop, and their
// registers keep their values across elements. Every
// arithmetic instruction is one IEEE f32 operation rounded to nearest (no FMA
// contraction on the device: __fadd_rn etc.), so the CPU path and the CUDA
// kernel give bit-identical results.
// Slots: list t of the program's tensor lists holds one tensor per slot; the
// tensors of one slot have the same element count. With `masked`, a
// *found_inf != 0 makes every block return before touching memory, like the
// fused optimizer step: a program that writes optimizer state this way leaves
// it bit-identical on a skipped step with no host sync.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/macros.h"
#include "core/tensor.h"
#include "kernels/optimizer/optimizer.h"

namespace hg {

enum class ForeachOpcode : uint8_t {
  // scalars (element-independent): r[dst] = ...
  kConst,
  kLr,
  kStep,
  kBiasCorrection,
  kInvScale,
  kFoundInf,
  // elements
  kLoad,   // r[dst] = tensor a [i]
  kStore,  // tensor a [i] = r[b]
  kAdd,    // r[dst] = r[a] + r[b]
  kSub,
  kMul,
  kDiv,
  kMax,  // fmaxf
  kMin,  // fminf
  kNeg,  // r[dst] = -r[a]
  kAbs,
  kSqrt,
  kSign,    // 1, -1, or r[a] itself for +-0 and NaN
  kSelect,  // r[dst] = r[a] != 0 ? r[b] : r[c]
};

constexpr int kForeachMaxInstrs = 64;
constexpr int kForeachMaxRegs = 48;
constexpr int kForeachMaxTensors = 8;

struct ForeachInstr {
  ForeachOpcode op = ForeachOpcode::kConst;
  uint8_t dst = 0, a = 0, b = 0, c = 0;
  float value = 0.0f;
};

struct ForeachProgram {
  ForeachInstr code[kForeachMaxInstrs];
  int32_t size = 0;       // instructions used
  int32_t tensors = 0;    // tensor lists the program addresses (loads and stores)
  int32_t registers = 0;  // registers used
};

HG_HOST_DEVICE inline bool foreach_is_scalar(ForeachOpcode op) { return op < ForeachOpcode::kLoad; }

// The per-launch values the scalar instructions read.
struct ForeachScalars {
  float lr = 0.0f;
  int64_t step = 0;
  float inv_scale = 1.0f;
  float found_inf = 0.0f;
};

// Fills the scalar registers (once per thread).
HG_HOST_DEVICE inline void foreach_eval_scalars(const ForeachProgram& p, const ForeachScalars& s, float* r) {
  for (int k = 0; k < p.size; ++k) {
    const ForeachInstr& in = p.code[k];
    switch (in.op) {
      case ForeachOpcode::kConst:
        r[in.dst] = in.value;
        break;
      case ForeachOpcode::kLr:
        r[in.dst] = s.lr;
        break;
      case ForeachOpcode::kStep:
        r[in.dst] = static_cast<float>(s.step);
        break;
      case ForeachOpcode::kBiasCorrection:
        r[in.dst] = static_cast<float>(1.0 - ::pow(static_cast<double>(in.value), static_cast<double>(s.step)));
        break;
      case ForeachOpcode::kInvScale:
        r[in.dst] = s.inv_scale;
        break;
      case ForeachOpcode::kFoundInf:
        r[in.dst] = s.found_inf != 0.0f ? 1.0f : 0.0f;
        break;
      default:
        break;
    }
  }
}

// One f32 operation, rounded to nearest, never contracted with another.
HG_HOST_DEVICE inline float foreach_add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
HG_HOST_DEVICE inline float foreach_sub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
HG_HOST_DEVICE inline float foreach_mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
HG_HOST_DEVICE inline float foreach_div(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
HG_HOST_DEVICE inline float foreach_sqrt(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

// Runs the element instructions for one element. load(t) returns element i
// of tensor t as f32; store(t, v) rounds and writes it.
template <typename Load, typename Store>
HG_HOST_DEVICE inline void foreach_eval_element(const ForeachProgram& p, float* r, Load&& load, Store&& store) {
  for (int k = 0; k < p.size; ++k) {
    const ForeachInstr& in = p.code[k];
    const float x = r[in.a], y = r[in.b];
    switch (in.op) {
      case ForeachOpcode::kLoad:
        r[in.dst] = load(in.a);
        break;
      case ForeachOpcode::kStore:
        store(in.a, y);
        break;
      case ForeachOpcode::kAdd:
        r[in.dst] = foreach_add(x, y);
        break;
      case ForeachOpcode::kSub:
        r[in.dst] = foreach_sub(x, y);
        break;
      case ForeachOpcode::kMul:
        r[in.dst] = foreach_mul(x, y);
        break;
      case ForeachOpcode::kDiv:
        r[in.dst] = foreach_div(x, y);
        break;
      case ForeachOpcode::kMax:
        r[in.dst] = ::fmaxf(x, y);
        break;
      case ForeachOpcode::kMin:
        r[in.dst] = ::fminf(x, y);
        break;
      case ForeachOpcode::kNeg:
        r[in.dst] = -x;
        break;
      case ForeachOpcode::kAbs:
        r[in.dst] = ::fabsf(x);
        break;
      case ForeachOpcode::kSqrt:
        r[in.dst] = foreach_sqrt(x);
        break;
      case ForeachOpcode::kSign:
        r[in.dst] = x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x);
        break;
      case ForeachOpcode::kSelect:
        r[in.dst] = x != 0.0f ? y : r[in.c];
        break;
      default:
        break;  // scalars: filled by foreach_eval_scalars
    }
  }
}

// The device values a program may read; all optional (on the lists' device):
// step i64 [1] (needed by kLr with a schedule, kStep, kBiasCorrection),
// inv_scale and found_inf f32 [1] (absent: 1 and 0).
struct ForeachArgs {
  float lr = 0.0f;
  LrSchedule schedule{};
  Tensor step{};
  Tensor inv_scale{};
  Tensor found_inf{};
  bool masked = true;  // skip everything when *found_inf != 0
};

namespace ops {
// lists[t][slot]: f32, f16 or bf16, contiguous, on one device; every tensor of
// a slot has the same element count. Checks the program (registers defined
// before use, tensors in range) and the lists, then one backend call.
void foreach_apply(const ForeachProgram& program, const std::vector<std::vector<Tensor>>& lists,
                   const ForeachArgs& args);
}  // namespace ops

namespace cpu {
void foreach_apply(const ForeachProgram& program, const std::vector<std::vector<Tensor>>& lists,
                   const ForeachArgs& args);
}
#if defined(HG_WITH_CUDA)
namespace cuda {
void foreach_apply(const ForeachProgram& program, const std::vector<std::vector<Tensor>>& lists,
                   const ForeachArgs& args);
}
#endif

}  // namespace hg
