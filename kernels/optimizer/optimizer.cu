// CUDA fused optimizer step (Note [Fused optimizer step] in kernels/optimizer/optimizer.h).
//
// advance_step_kernel
//   formula    step += 1 unless *found_inf != 0 (saturating at kCounterLimit)
//   launch     1 thread (ordered before the update on the same stream)
// optimizer_step_kernel<P, G>
//   formula    per element: optimizer_update (SGD / Adam / AdamW) on the fp32
//              master, param = round_P(master)
//   split      multi-tensor apply: a table of chunks of kChunk elements over
//              all slots of one (param, grad) dtype pair; one block per chunk,
//              each thread strides over its chunk
//   launch     kBlockThreads (256) threads per block, one block per chunk, one launch per pair
//   bytes      per element: sizeof(G) + 4 (master) + 4 + 4 (moments) read,
//              sizeof(P) + 4 + 4 + 4 written (less without master/moments)
//   precision  fp32 math; a 16-bit parameter is the master rounded once
//   lr         h.lr, or with a device-side schedule h.lr * factor(*step - 1),
//              evaluated in f64 once per thread (Note [Schedules on the device]),
//              as are Adam's bias corrections, from the exact i64 count
//   skip       if *found_inf != 0 every block returns before touching memory
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/convert.h"
#include "core/counters.h"
#include "runtime/cuda/device_limits.h"
#include "runtime/cuda/device_table.h"
#include "kernels/cuda/launch.cuh"
#include "runtime/cuda/runtime.h"
#include "kernels/optimizer/optimizer.h"

namespace hg::cuda {

namespace {

constexpr int64_t kChunk = 2048;

struct SlotChunk {
  void* param;
  const void* grad;
  float* master;  // null for f32 params
  float* m;       // null when unused
  float* v;       // null when unused
  int64_t begin;  // first element of this chunk
  int64_t n;      // elements in this chunk
};

__global__ void advance_step_kernel(int64_t* step, const float* found_inf) {
  if (found_inf != nullptr && *found_inf != 0.0f) return;
  *step = saturating_increment(*step);  // Note [Counter limit] in core/counters.h
}

template <typename P, typename G>
__global__ void optimizer_step_kernel(const SlotChunk* chunks, OptimizerHyper hyper, const int64_t* step,
                                      const float* inv_scale, const float* found_inf) {
  if (found_inf != nullptr && *found_inf != 0.0f) return;  // skipped: write nothing
  const SlotChunk c = chunks[blockIdx.x];
  // Once per thread, from the exact count (Note [Schedules on the device]).
  const StepScalars scalars = step_scalars(hyper, inv_scale != nullptr ? *inv_scale : 1.0f, *step);
  P* param = static_cast<P*>(c.param);
  const G* grad = static_cast<const G*>(c.grad);
  for (int64_t k = threadIdx.x; k < c.n; k += blockDim.x) {
    const int64_t i = c.begin + k;
    float m_i = c.m ? c.m[i] : 0.0f, v_i = c.v ? c.v[i] : 0.0f;
    const float p = c.master ? c.master[i] : static_cast<float>(param[i]);
    const float updated = optimizer_update(scalars, p, static_cast<float>(grad[i]), m_i, v_i);
    if (c.master) c.master[i] = updated;
    param[i] = convert_value<P>(updated);
    if (c.m) c.m[i] = m_i;
    if (c.v) c.v[i] = v_i;
  }
}

// Declared work of one step launch (the header's bytes; ~10 FLOPs per element).
double step_elements(const std::vector<SlotChunk>& table) {
  double n = 0;
  for (const SlotChunk& c : table) n += static_cast<double>(c.n);
  return n;
}
double step_bytes(const std::vector<SlotChunk>& table, size_t p_size, size_t g_size) {
  double bytes = 0;
  for (const SlotChunk& c : table) {
    const double per = static_cast<double>(g_size + 2 * p_size) + (c.master ? 8 : 0) + (c.m ? 8 : 0) + (c.v ? 8 : 0);
    bytes += per * static_cast<double>(c.n);
  }
  return bytes;
}

float* float_ptr(const Tensor& t) { return t.defined() ? static_cast<float*>(t.data_ptr()) : nullptr; }

}  // namespace

void fused_optimizer_step(const std::vector<OptimizerSlot>& slots, const OptimizerHyper& hyper,
                          const Tensor& step, const Tensor& inv_scale, const Tensor& found_inf) {
  DeviceGuard guard(step.device().index);
  const cudaStream_t stream = current_stream().handle();
  auto* step_ptr = static_cast<int64_t*>(step.data_ptr());
  const float* inv_scale_ptr = float_ptr(inv_scale);
  const float* found_inf_ptr = float_ptr(found_inf);
  HG_LAUNCH(advance_step_kernel, dim3(1), dim3(1), 0, stream, step_ptr, found_inf_ptr);

  // Chunk tables, one per (param dtype, grad dtype) pair.
  std::map<std::pair<DType, DType>, std::vector<SlotChunk>> tables;
  for (const OptimizerSlot& s : slots) {
    auto& table = tables[{s.param.dtype(), s.grad.dtype()}];
    for (int64_t begin = 0; begin < s.param.numel(); begin += kChunk) {
      table.push_back({s.param.data_ptr(), s.grad.data_ptr(), float_ptr(s.master), float_ptr(s.state1),
                       float_ptr(s.state2), begin, std::min(kChunk, s.param.numel() - begin)});
    }
  }
  for (const auto& [dtypes, table] : tables) {
    if (table.empty()) continue;
    // The table travels to the device as bytes; the stream orders its use.
    const Tensor on_device = upload_table(table, step.device());
    const auto* chunks = static_cast<const SlotChunk*>(on_device.data_ptr());
    const dim3 grid(static_cast<unsigned>(table.size()));
    dispatch_floating(dtypes.first, "optimizer step", [&](auto p_tag) {
      using P = decltype(p_tag);
      dispatch_floating(dtypes.second, "optimizer step", [&](auto g_tag) {
        using G = decltype(g_tag);
        if constexpr (!std::is_same_v<P, double> && !std::is_same_v<G, double>) {
          if (profiler::active())
            profiler::declare_work(step_bytes(table, sizeof(P), sizeof(G)), 10.0 * step_elements(table));
          HG_LAUNCH((optimizer_step_kernel<P, G>), grid, dim3(kBlockThreads), 0, stream, chunks, hyper,
                    static_cast<const int64_t*>(step_ptr), inv_scale_ptr, found_inf_ptr);
        }
      });
    });
  }
}

}  // namespace hg::cuda
