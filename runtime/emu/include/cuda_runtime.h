// cuda-emu stand-in for CUDA's cuda_runtime.h: the host runtime API (from the
// shim's cuda_runtime_api.h), the device-side language (hg_emu_device.h) and
// launches (hg_emu_launch.h). Like the real header it does not pull in
// cuda_fp16.h / cuda_bf16.h; include those where needed.
#pragma once

#include "cuda_runtime_api.h"
#include "hg_emu_device.h"
#include "hg_emu_launch.h"
#include "vector_types.h"
