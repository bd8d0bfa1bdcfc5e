// cuda-emu's launch counter: how many kernel launches (hg::emu::launch calls,
// failed ones included) this process has made. Tests read it before and after
// a piece of work to count that work's kernels; the real CUDA runtime has no
// counterpart, so callers guard it with HG_CUDA_EMU.
#pragma once

#include <cstdint>

namespace hg::emu {

uint64_t launch_count();

}  // namespace hg::emu
