// HG_BACKEND_CALL(device, fn, args...): calls hg::cpu::fn or hg::cuda::fn
// depending on `device` (the cpu build has only the former). Used by the ops
// layer after it has checked arguments and allocated outputs.
#pragma once

#if defined(HG_WITH_CUDA)
#define HG_BACKEND_CALL(device, fn, ...) \
  ((device).is_cpu() ? ::hg::cpu::fn(__VA_ARGS__) : ::hg::cuda::fn(__VA_ARGS__))
#else
#define HG_BACKEND_CALL(device, fn, ...) ::hg::cpu::fn(__VA_ARGS__)
#endif
