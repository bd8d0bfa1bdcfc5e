// CUDA path of foreach_apply (Note [Foreach programs] in kernels/foreach/foreach.h).
//
// foreach_kernel
//   formula    per element: the program's element instructions over f32
//              registers (loads widen f16/bf16 to f32, stores round to
//              nearest even); scalar instructions once per thread
//   split      multi-tensor apply: a table of kChunk-element chunks over all
//              slots; one block per chunk, each thread strides over it
//   launch     kBlockThreads (256) threads per block, one block per chunk,
//              one launch per call
//   bytes      per element: the size of every tensor loaded plus every tensor
//              stored (a tensor loaded and stored counts twice)
//   FLOPs      per element: the program's arithmetic instructions
//   registers  the program's values live in a per-thread array indexed at run
//              time (local memory, 240-byte stack frame on sm_90, no spills;
//              L1-resident); the instruction table is a kernel argument
//              (constant bank), read uniformly by the warp
//   precision  every instruction is one f32 IEEE operation, rounded to
//              nearest (__fadd_rn, __fmul_rn, ...: nothing is contracted to
//              an FMA), so the result is bit-identical to the CPU path
//   skip       masked and *found_inf != 0: every block returns before touching
//              memory
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/convert.h"
#include "runtime/cuda/device_table.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/foreach/foreach.h"
#include "runtime/cuda/device_limits.h"
#include "runtime/cuda/runtime.h"

namespace hg::cuda {

namespace {

constexpr int64_t kChunk = 2048;

struct ForeachChunk {
  void* base[kForeachMaxTensors];
  uint8_t dtype[kForeachMaxTensors];  // 0 f32, 1 f16, 2 bf16
  int64_t begin;
  int64_t n;
};

__device__ inline float load_as_float(const void* base, uint8_t dtype, int64_t i) {
  if (dtype == 0) return static_cast<const float*>(base)[i];
  if (dtype == 1) return static_cast<float>(static_cast<const half*>(base)[i]);
  return static_cast<float>(static_cast<const bfloat16*>(base)[i]);
}

__device__ inline void store_from_float(void* base, uint8_t dtype, int64_t i, float v) {
  if (dtype == 0) {
    static_cast<float*>(base)[i] = v;
  } else if (dtype == 1) {
    static_cast<half*>(base)[i] = convert_value<half>(v);
  } else {
    static_cast<bfloat16*>(base)[i] = convert_value<bfloat16>(v);
  }
}

__global__ void foreach_kernel(const ForeachChunk* chunks, ForeachProgram program, float lr, LrSchedule schedule,
                               const int64_t* step, const float* inv_scale, const float* found_inf, bool masked) {
  ForeachScalars s;
  if (found_inf != nullptr) s.found_inf = *found_inf;
  if (masked && s.found_inf != 0.0f) return;  // skipped: write nothing
  if (step != nullptr) s.step = *step;
  if (inv_scale != nullptr) s.inv_scale = *inv_scale;
  OptimizerHyper h;
  h.lr = lr;
  h.schedule = schedule;
  s.lr = scheduled_lr(h, s.step);
  // The scalar registers once per thread; element instructions never
  // overwrite them (every instruction writes a register of its own).
  float r[kForeachMaxRegs];
  for (int k = 0; k < kForeachMaxRegs; ++k) r[k] = 0.0f;
  foreach_eval_scalars(program, s, r);
  const ForeachChunk& c = chunks[blockIdx.x];
  for (int64_t k = threadIdx.x; k < c.n; k += blockDim.x) {
    const int64_t i = c.begin + k;
    foreach_eval_element(
        program, r, [&](int t) { return load_as_float(c.base[t], c.dtype[t], i); },
        [&](int t, float v) { store_from_float(c.base[t], c.dtype[t], i, v); });
  }
}

uint8_t dtype_code(DType d) { return d == kF32 ? 0 : (d == kF16 ? 1 : 2); }

const float* float_ptr(const Tensor& t) { return t.defined() ? static_cast<const float*>(t.data_ptr()) : nullptr; }

}  // namespace

void foreach_apply(const ForeachProgram& program, const std::vector<std::vector<Tensor>>& lists,
                   const ForeachArgs& args) {
  const Device device = lists[0][0].device();
  DeviceGuard guard(device.index);
  const cudaStream_t stream = current_stream().handle();
  std::vector<ForeachChunk> table;
  double bytes_per_element_sum = 0, elements = 0;
  for (size_t slot = 0; slot < lists[0].size(); ++slot) {
    ForeachChunk proto{};
    double bytes = 0;
    for (size_t t = 0; t < lists.size(); ++t) {
      proto.base[t] = lists[t][slot].data_ptr();
      proto.dtype[t] = dtype_code(lists[t][slot].dtype());
    }
    for (int k = 0; k < program.size; ++k) {
      const ForeachInstr& in = program.code[k];
      if (in.op == ForeachOpcode::kLoad || in.op == ForeachOpcode::kStore)
        bytes += static_cast<double>(dtype_size(lists[in.a][slot].dtype()));
    }
    const int64_t n = lists[0][slot].numel();
    bytes_per_element_sum += bytes * static_cast<double>(n);
    elements += static_cast<double>(n);
    for (int64_t begin = 0; begin < n; begin += kChunk) {
      ForeachChunk c = proto;
      c.begin = begin;
      c.n = std::min(kChunk, n - begin);
      table.push_back(c);
    }
  }
  if (table.empty()) return;
  double flops = 0;
  for (int k = 0; k < program.size; ++k) {
    if (!foreach_is_scalar(program.code[k].op) && program.code[k].op != ForeachOpcode::kLoad &&
        program.code[k].op != ForeachOpcode::kStore)
      flops += 1;
  }
  // The table travels to the device as bytes; the stream orders its use.
  const Tensor on_device = upload_table(table, device);
  const auto* chunks = static_cast<const ForeachChunk*>(on_device.data_ptr());
  if (profiler::active()) profiler::declare_work(bytes_per_element_sum, flops * elements);
  HG_LAUNCH(foreach_kernel, dim3(static_cast<unsigned>(table.size())), dim3(kBlockThreads), 0, stream, chunks, program,
            args.lr, args.schedule, args.step.defined() ? static_cast<const int64_t*>(args.step.data_ptr()) : nullptr,
            float_ptr(args.inv_scale), float_ptr(args.found_inf), args.masked);
}

}  // namespace hg::cuda
