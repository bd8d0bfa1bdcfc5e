// HG_BACKEND_CALL(device, fn, args...): calls hg::cpu::fn or hg::cuda::fn
// depending on `device` (the cpu build has only the former). Used by the ops
// layer after it has checked arguments and allocated outputs. While a
// profiler::Profile records, the call declares the bytes of its tensor
// operands as its work and a CPU call is recorded as a kernel (Note
// [Profiler] in core/profiler.h).
#pragma once

#include <type_traits>
#include <utility>
#include <vector>

#include "core/profiler.h"
#include "core/tensor.h"
#include "runtime/cpu/threads.h"

namespace hg::detail {
// Bytes of the tensor arguments (numel x element size each, vectors of
// tensors too; other arguments count 0).
template <typename... Args>
double operand_bytes(const Args&... args) {
  double bytes = 0;
  (
      [&] {
        if constexpr (std::is_same_v<std::remove_cvref_t<Args>, Tensor>) {
          if (args.defined()) bytes += static_cast<double>(args.nbytes());
        } else if constexpr (std::is_same_v<std::remove_cvref_t<Args>, std::vector<Tensor>>) {
          for (const Tensor& t : args) bytes += t.defined() ? static_cast<double>(t.nbytes()) : 0.0;
        }
      }(),
      ...);
  return bytes;
}

template <typename F, typename... Args>
decltype(auto) profiled_backend_call(bool cpu, const char* name, F&& call, Args&&... args) {
  const ::hg::profiler::BackendCallScope scope(cpu, name, [&] { return operand_bytes(args...); });
  if (cpu) sync_cpu_threads();  // the team size the thread governor allows (runtime/cpu/threads.h)
  return call(std::forward<Args>(args)...);
}
}  // namespace hg::detail

// The arguments are evaluated once, before the call, as in a plain call.
#if defined(HG_WITH_CUDA)
#define HG_BACKEND_CALL(device, fn, ...)                                                                          \
  ::hg::detail::profiled_backend_call((device).is_cpu(), "cpu::" #fn,                                             \
                                      [&](auto&&... hg_args) -> decltype(auto) {                                  \
                                        return (device).is_cpu()                                                  \
                                                   ? ::hg::cpu::fn(std::forward<decltype(hg_args)>(hg_args)...)   \
                                                   : ::hg::cuda::fn(std::forward<decltype(hg_args)>(hg_args)...); \
                                      },                                                                          \
                                      __VA_ARGS__)
#else
#define HG_BACKEND_CALL(device, fn, ...)                                                                               \
  ::hg::detail::profiled_backend_call(                                                                                 \
      true, "cpu::" #fn,                                                                                               \
      [&](auto&&... hg_args) -> decltype(auto) { return ::hg::cpu::fn(std::forward<decltype(hg_args)>(hg_args)...); }, \
      __VA_ARGS__)
#endif
