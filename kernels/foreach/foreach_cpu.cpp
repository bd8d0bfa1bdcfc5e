// CPU path of foreach_apply (Note [Foreach programs] in kernels/foreach/foreach.h).
// Instruction-major over blocks of kBlock elements: each instruction runs as
// a plain loop over the block (which the compiler vectorises), so the
// interpretation costs once per block instead of once per element. Every
// element sees the same f32 operations, in the same order, as in the CUDA
// kernel's element-major loop, so the results are bit-identical.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/convert.h"
#include "kernels/foreach/foreach.h"

namespace hg::cpu {

namespace {

constexpr int64_t kBlock = 256;

void load_block(const void* base, DType dtype, int64_t begin, int64_t len, float* out) {
  if (dtype == kF32) {
    const float* p = static_cast<const float*>(base) + begin;
    for (int64_t j = 0; j < len; ++j) out[j] = p[j];
  } else if (dtype == kF16) {
    const half* p = static_cast<const half*>(base) + begin;
    for (int64_t j = 0; j < len; ++j) out[j] = static_cast<float>(p[j]);
  } else {
    const bfloat16* p = static_cast<const bfloat16*>(base) + begin;
    for (int64_t j = 0; j < len; ++j) out[j] = static_cast<float>(p[j]);
  }
}

void store_block(void* base, DType dtype, int64_t begin, int64_t len, const float* in) {
  if (dtype == kF32) {
    float* p = static_cast<float*>(base) + begin;
    for (int64_t j = 0; j < len; ++j) p[j] = in[j];
  } else if (dtype == kF16) {
    half* p = static_cast<half*>(base) + begin;
    for (int64_t j = 0; j < len; ++j) p[j] = convert_value<half>(in[j]);
  } else {
    bfloat16* p = static_cast<bfloat16*>(base) + begin;
    for (int64_t j = 0; j < len; ++j) p[j] = convert_value<bfloat16>(in[j]);
  }
}

// One block: the element instructions in program order, each over len elements.
void run_block(const ForeachProgram& program, void* const* base, const DType* dtype, int64_t begin, int64_t len,
               float (*r)[kBlock]) {
  for (int k = 0; k < program.size; ++k) {
    const ForeachInstr& in = program.code[k];
    if (foreach_is_scalar(in.op)) continue;  // filled once per thread
    float* d = r[in.dst];
    const float* x = r[in.a];
    const float* y = r[in.b];
    switch (in.op) {
      case ForeachOpcode::kLoad:
        load_block(base[in.a], dtype[in.a], begin, len, d);
        break;
      case ForeachOpcode::kStore:
        store_block(base[in.a], dtype[in.a], begin, len, y);
        break;
      case ForeachOpcode::kAdd:
        for (int64_t j = 0; j < len; ++j) d[j] = x[j] + y[j];
        break;
      case ForeachOpcode::kSub:
        for (int64_t j = 0; j < len; ++j) d[j] = x[j] - y[j];
        break;
      case ForeachOpcode::kMul:
        for (int64_t j = 0; j < len; ++j) d[j] = x[j] * y[j];
        break;
      case ForeachOpcode::kDiv:
        for (int64_t j = 0; j < len; ++j) d[j] = x[j] / y[j];
        break;
      case ForeachOpcode::kMax:
        for (int64_t j = 0; j < len; ++j) d[j] = std::fmax(x[j], y[j]);
        break;
      case ForeachOpcode::kMin:
        for (int64_t j = 0; j < len; ++j) d[j] = std::fmin(x[j], y[j]);
        break;
      case ForeachOpcode::kNeg:
        for (int64_t j = 0; j < len; ++j) d[j] = -x[j];
        break;
      case ForeachOpcode::kAbs:
        for (int64_t j = 0; j < len; ++j) d[j] = std::fabs(x[j]);
        break;
      case ForeachOpcode::kSqrt:
        for (int64_t j = 0; j < len; ++j) d[j] = std::sqrt(x[j]);
        break;
      case ForeachOpcode::kSign:
        for (int64_t j = 0; j < len; ++j) d[j] = x[j] > 0.0f ? 1.0f : (x[j] < 0.0f ? -1.0f : x[j]);
        break;
      case ForeachOpcode::kSelect: {
        const float* z = r[in.c];
        for (int64_t j = 0; j < len; ++j) d[j] = x[j] != 0.0f ? y[j] : z[j];
        break;
      }
      default:
        break;
    }
  }
}

}  // namespace

void foreach_apply(const ForeachProgram& program, const std::vector<std::vector<Tensor>>& lists,
                   const ForeachArgs& args) {
  ForeachScalars s;
  if (args.found_inf.defined()) s.found_inf = args.found_inf.data<float>()[0];
  if (args.masked && s.found_inf != 0.0f) return;  // skipped: write nothing
  if (args.step.defined()) s.step = args.step.data<int64_t>()[0];
  if (args.inv_scale.defined()) s.inv_scale = args.inv_scale.data<float>()[0];
  OptimizerHyper h;
  h.lr = args.lr;
  h.schedule = args.schedule;
  s.lr = scheduled_lr(h, s.step);
  float scalars[kForeachMaxRegs] = {};
  foreach_eval_scalars(program, s, scalars);
  const size_t n_lists = lists.size();
  for (size_t slot = 0; slot < lists[0].size(); ++slot) {
    void* base[kForeachMaxTensors] = {};
    DType dtype[kForeachMaxTensors] = {};
    for (size_t t = 0; t < n_lists; ++t) {
      base[t] = lists[t][slot].data_ptr();
      dtype[t] = lists[t][slot].dtype();
    }
    const int64_t n = lists[0][slot].numel();
    const int64_t blocks = (n + kBlock - 1) / kBlock;
    // Blocks [first, last) on one thread, with that thread's block register
    // file (48 x 256 floats); the scalar registers hold their value in every
    // lane, set once.
    const auto run_blocks = [&](int64_t first, int64_t last) {
      std::vector<float> storage(static_cast<size_t>(kForeachMaxRegs * kBlock));
      auto* r = reinterpret_cast<float(*)[kBlock]>(storage.data());
      for (int k = 0; k < kForeachMaxRegs; ++k) std::fill(r[k], r[k] + kBlock, scalars[k]);
      for (int64_t b = first; b < last; ++b) {
        const int64_t begin = b * kBlock;
        run_block(program, base, dtype, begin, std::min(kBlock, n - begin), r);
      }
    };
    if (n <= 65536) {  // no parallel region below the grain
      run_blocks(0, blocks);
      continue;
    }
#pragma omp parallel
    {
      const int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
      run_blocks(blocks * t / threads, blocks * (t + 1) / threads);
    }
  }
}

}  // namespace hg::cpu
