// The cuda-emu block scheduler: runs the CUDA threads of one block as fibers.
//
// Note [Emulated thread schedule]
// A block's threads are fibers that switch only where CUDA threads must wait
// for each other: block barriers (__syncthreads*) and warp rendezvous
// (__syncwarp, shuffles, votes, match, reduce). The scheduler repeats:
//   1. run every runnable thread, in an order shuffled from the schedule seed
//      (HG_EMU_SEED), each until it reaches a barrier, a warp op or its end;
//   2. complete every warp op whose lanes (the mask, minus exited lanes and
//      lanes past the end of a partial warp) have all arrived;
//   3. otherwise, if every live thread waits at the same __syncthreads(),
//      release them all;
//   4. otherwise report what is stuck: threads that exited while others wait at
//      a barrier, threads waiting at different barriers, a warp op waiting for a
//      lane that waits at the block barrier. On a GPU these hang or corrupt.
// Because the order between barriers is random, code that reads another
// thread's shared-memory write without a barrier in between reads stale or
// poisoned data for some threads and fails its test; a fixed seed replays it.
// Costs, napkin math: creating a fiber on a pooled stack and switching to it
// are ~50-100 ns each, so 10^5 threads with a couple of barriers each take
// tens of milliseconds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hg_emu_device.h"
#include "hg_emu_launch.h"
#include "runtime/emu/stack_pool.h"

namespace hg::emu {

struct Failure {
  cudaError_t error = cudaSuccess;
  std::string message;
};

// Runs one block of `launch`; detail::g_block must describe the block.
// Returns the first failure (a device assert, an exception thrown by kernel
// code, a barrier that cannot complete), with every fiber unwound.
Failure run_block(const KernelLaunch& launch, StackPool& stacks, uint64_t block_seed, uint64_t& fiber_switches);

}  // namespace hg::emu
