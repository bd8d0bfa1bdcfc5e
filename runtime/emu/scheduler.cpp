// See Note [Emulated thread schedule] in scheduler.h.
#include "runtime/emu/scheduler.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include <boost/context/fiber.hpp>
#include <boost/context/preallocated.hpp>

#include "core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

// glibc's assert handler (declared by <assert.h> only without NDEBUG).
extern "C" [[noreturn]] void __assert_fail(const char* assertion, const char* file, unsigned int line,
                                           const char* function) noexcept;

namespace hg::emu {
namespace detail {
DeviceThread* g_thread = nullptr;
DeviceBlock g_block;
}  // namespace detail

namespace {

namespace ctx = boost::context;

// ---- AddressSanitizer fiber annotations ------------------------------------------------
// ASan tracks one stack per OS thread; every switch between the scheduler's
// stack and a fiber's stack must be announced or it reports false positives
// (and misses real errors) in the frames it mistakes for the wrong stack.
#if defined(__SANITIZE_ADDRESS__)
void asan_start_switch(void** fake_stack, const void* bottom, size_t size) {
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
}
void asan_finish_switch(void* fake_stack, const void** bottom_old, size_t* size_old) {
  __sanitizer_finish_switch_fiber(fake_stack, bottom_old, size_old);
}
#else
void asan_start_switch(void**, const void*, size_t) {}
void asan_finish_switch(void*, const void**, size_t*) {}
#endif

enum class ThreadState : uint8_t { kReady, kAtBarrier, kAtWarpOp, kExited };

// Thrown into a waiting fiber to unwind it after the block has failed.
struct AbortUnwind {};

// A device-side failure raised by kernel code (assert, __trap).
struct DeviceFault {
  cudaError_t error;
  std::string message;
};

struct FiberThread {
  DeviceThread dev;
  ctx::fiber fiber;   // the suspended fiber, held by the scheduler
  ctx::fiber caller;  // the scheduler, held by the running fiber
  ThreadState state = ThreadState::kReady;
  bool abort = false;
  const void* stack_bottom = nullptr;
  size_t stack_size = 0;
  void* fake_stack = nullptr;
  // What the thread waits at.
  std::source_location where;
  BarrierOp barrier_op = BarrierOp::kSync;
  int predicate = 0;
  int barrier_result = 0;
  WarpOp warp_op = WarpOp::kSyncWarp;
  unsigned mask = 0;
  uint64_t value = 0;
  unsigned arg = 0;
  unsigned width = 32;
  uint64_t warp_result = 0;
};

// State of the block being run (one at a time, on the engine's worker thread).
struct BlockRun {
  const KernelLaunch* launch = nullptr;
  std::vector<FiberThread> threads;
  Failure failure;
  const void* scheduler_stack_bottom = nullptr;
  size_t scheduler_stack_size = 0;
  uint64_t switches = 0;
};
BlockRun* g_run = nullptr;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::string format_dim(uint3 d) { return hg::detail::str_cat("(", d.x, ",", d.y, ",", d.z, ")"); }
std::string format_where(const std::source_location& where) {
  return hg::detail::str_cat(where.file_name(), ":", where.line(), ":", where.column());
}
std::string describe_thread(const FiberThread& t) {
  return hg::detail::str_cat("thread ", format_dim(t.dev.thread_idx), " of block ",
                             format_dim(detail::g_block.block_idx));
}
const char* barrier_name(BarrierOp op) {
  switch (op) {
    case BarrierOp::kSync:
      return "__syncthreads()";
    case BarrierOp::kCount:
      return "__syncthreads_count()";
    case BarrierOp::kAnd:
      return "__syncthreads_and()";
    case BarrierOp::kOr:
      return "__syncthreads_or()";
  }
  return "?";
}
const char* warp_op_name(WarpOp op) {
  switch (op) {
    case WarpOp::kSyncWarp:
      return "__syncwarp()";
    case WarpOp::kShflIdx:
      return "__shfl_sync()";
    case WarpOp::kShflUp:
      return "__shfl_up_sync()";
    case WarpOp::kShflDown:
      return "__shfl_down_sync()";
    case WarpOp::kShflXor:
      return "__shfl_xor_sync()";
    case WarpOp::kBallot:
      return "__ballot_sync()";
    case WarpOp::kAny:
      return "__any_sync()";
    case WarpOp::kAll:
      return "__all_sync()";
    case WarpOp::kMatchAny:
      return "__match_any_sync()";
    case WarpOp::kMatchAll:
      return "__match_all_sync()";
    case WarpOp::kReduceAdd:
      return "__reduce_add_sync()";
    case WarpOp::kReduceMinS:
    case WarpOp::kReduceMinU:
      return "__reduce_min_sync()";
    case WarpOp::kReduceMaxS:
    case WarpOp::kReduceMaxU:
      return "__reduce_max_sync()";
    case WarpOp::kReduceAnd:
      return "__reduce_and_sync()";
    case WarpOp::kReduceOr:
      return "__reduce_or_sync()";
    case WarpOp::kReduceXor:
      return "__reduce_xor_sync()";
  }
  return "?";
}

void fail(cudaError_t error, std::string message) {
  if (g_run->failure.error == cudaSuccess) g_run->failure = Failure{error, std::move(message)};
}

FiberThread& current_thread(const char* what) {
  if (detail::g_thread == nullptr || g_run == nullptr) {
    HG_FAIL("cuda-emu: ", what, " called outside a kernel (device code run on the host?)");
  }
  return g_run->threads[detail::g_thread->linear_id];
}

// ---- switching -----------------------------------------------------------------------------
void resume(FiberThread& t) {
  detail::g_thread = &t.dev;
  void* fake_stack = nullptr;
  asan_start_switch(&fake_stack, t.stack_bottom, t.stack_size);
  t.fiber = std::move(t.fiber).resume();
  asan_finish_switch(fake_stack, nullptr, nullptr);
  detail::g_thread = nullptr;
  ++g_run->switches;
}

// Called on the fiber: back to the scheduler until it releases this thread.
void suspend(FiberThread& t) {
  asan_start_switch(&t.fake_stack, g_run->scheduler_stack_bottom, g_run->scheduler_stack_size);
  t.caller = std::move(t.caller).resume();
  asan_finish_switch(t.fake_stack, nullptr, nullptr);
  if (t.abort) throw AbortUnwind{};
}

ctx::fiber fiber_main(FiberThread& t, ctx::fiber&& caller) {
  asan_finish_switch(nullptr, &g_run->scheduler_stack_bottom, &g_run->scheduler_stack_size);
  t.caller = std::move(caller);
  if (!t.abort) {
    try {
      g_run->launch->invoke(g_run->launch->entry, g_run->launch->params);
    } catch (const AbortUnwind&) {
    } catch (const DeviceFault& fault) {
      fail(fault.error, hg::detail::str_cat(describe_thread(t), ": ", fault.message));
    } catch (const std::exception& ex) {
      fail(cudaErrorLaunchFailure, hg::detail::str_cat(describe_thread(t), " threw: ", ex.what()));
    } catch (...) {
      fail(cudaErrorLaunchFailure, hg::detail::str_cat(describe_thread(t), " threw an unknown exception"));
    }
  }
  t.state = ThreadState::kExited;
  asan_start_switch(nullptr, g_run->scheduler_stack_bottom, g_run->scheduler_stack_size);
  return std::move(t.caller);
}

// ---- warp ops --------------------------------------------------------------------------------
// Result of a warp op for lane `lane` of a warp whose lanes start at `base`;
// `participants` are the lanes taking part (all arrived).
uint64_t warp_result(const FiberThread& t, unsigned lane, unsigned base, unsigned participants) {
  const auto lane_value = [&](unsigned src) -> uint64_t {
    if (src >= 32 || !((participants >> src) & 1u)) return t.value;  // inactive source: own value
    return g_run->threads[base + src].value;
  };
  const unsigned width = t.width;
  const unsigned seg_start = lane & ~(width - 1u);
  const unsigned seg_end = seg_start + width - 1u;
  unsigned ballot = 0;
  for (unsigned j = 0; j < 32; ++j) {
    if (((participants >> j) & 1u) && g_run->threads[base + j].value != 0) ballot |= 1u << j;
  }
  switch (t.warp_op) {
    case WarpOp::kSyncWarp:
      return 0;
    case WarpOp::kShflIdx:
      return lane_value(seg_start + (t.arg & (width - 1u)));
    case WarpOp::kShflUp:
      return t.arg > lane - seg_start ? t.value : lane_value(lane - t.arg);
    case WarpOp::kShflDown: {
      const uint64_t src = uint64_t{lane} + t.arg;
      return src > seg_end ? t.value : lane_value(static_cast<unsigned>(src));
    }
    case WarpOp::kShflXor: {
      const unsigned src = lane ^ t.arg;
      return src > seg_end ? t.value : lane_value(src);
    }
    case WarpOp::kBallot:
      return ballot;
    case WarpOp::kAny:
      return ballot != 0;
    case WarpOp::kAll:
      return ballot == participants;
    case WarpOp::kMatchAny:
    case WarpOp::kMatchAll: {
      unsigned same = 0;
      for (unsigned j = 0; j < 32; ++j) {
        if (((participants >> j) & 1u) && g_run->threads[base + j].value == t.value) same |= 1u << j;
      }
      if (t.warp_op == WarpOp::kMatchAny) return same;
      return same == participants ? participants : 0u;
    }
    default:
      break;
  }
  // Reductions over 32-bit values.
  uint32_t acc = 0;
  bool first = true;
  for (unsigned j = 0; j < 32; ++j) {
    if (!((participants >> j) & 1u)) continue;
    const auto v = static_cast<uint32_t>(g_run->threads[base + j].value);
    const auto sv = static_cast<int32_t>(v), sacc = static_cast<int32_t>(acc);
    if (first) {
      acc = v;
      first = false;
      continue;
    }
    switch (t.warp_op) {
      case WarpOp::kReduceAdd:
        acc += v;
        break;
      case WarpOp::kReduceMinS:
        acc = static_cast<uint32_t>(std::min(sacc, sv));
        break;
      case WarpOp::kReduceMinU:
        acc = std::min(acc, v);
        break;
      case WarpOp::kReduceMaxS:
        acc = static_cast<uint32_t>(std::max(sacc, sv));
        break;
      case WarpOp::kReduceMaxU:
        acc = std::max(acc, v);
        break;
      case WarpOp::kReduceAnd:
        acc &= v;
        break;
      case WarpOp::kReduceOr:
        acc |= v;
        break;
      case WarpOp::kReduceXor:
        acc ^= v;
        break;
      default:
        break;
    }
  }
  return acc;
}

bool is_shuffle(WarpOp op) {
  return op == WarpOp::kShflIdx || op == WarpOp::kShflUp || op == WarpOp::kShflDown || op == WarpOp::kShflXor;
}

// Completes every warp op whose participants have all arrived. Returns true if
// any thread became runnable.
bool resolve_warp_ops() {
  auto& threads = g_run->threads;
  const auto n = static_cast<unsigned>(threads.size());
  bool progressed = false;
  for (unsigned base = 0; base < n; base += 32) {
    const unsigned lanes = std::min(32u, n - base);
    const unsigned existing = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1u;
    unsigned exited = 0;
    for (unsigned j = 0; j < lanes; ++j) {
      if (threads[base + j].state == ThreadState::kExited) exited |= 1u << j;
    }
    for (unsigned lane = 0; lane < lanes; ++lane) {
      FiberThread& t = threads[base + lane];
      if (t.state != ThreadState::kAtWarpOp) continue;
      if (!((t.mask >> lane) & 1u)) {
        fail(cudaErrorLaunchFailure,
             hg::detail::str_cat(describe_thread(t), " called ", warp_op_name(t.warp_op), " at ", format_where(t.where),
                                 " with mask 0x", std::hex, t.mask, std::dec, ", which does not include its own lane ",
                                 lane));
        return false;
      }
      const unsigned participants = t.mask & existing & ~exited;
      bool all_arrived = true;
      for (unsigned j = 0; j < 32 && all_arrived; ++j) {
        if ((participants >> j) & 1u) all_arrived = threads[base + j].state == ThreadState::kAtWarpOp;
      }
      if (!all_arrived) continue;
      for (unsigned j = 0; j < 32; ++j) {
        if (!((participants >> j) & 1u)) continue;
        const FiberThread& other = threads[base + j];
        if (other.warp_op != t.warp_op || other.mask != t.mask) {
          fail(cudaErrorLaunchFailure,
               hg::detail::str_cat("lanes of warp ", base / 32,
                                   " met at different warp operations: ", describe_thread(t), " is in ",
                                   warp_op_name(t.warp_op), " at ", format_where(t.where), " (mask 0x", std::hex,
                                   t.mask, "), ", describe_thread(other), " in ", warp_op_name(other.warp_op), " at ",
                                   format_where(other.where), " (mask 0x", other.mask, std::dec,
                                   "); all lanes named in a mask must execute the same *_sync call"));
          return false;
        }
      }
      if (is_shuffle(t.warp_op) && (t.width == 0 || t.width > 32 || (t.width & (t.width - 1u)) != 0)) {
        fail(cudaErrorLaunchFailure,
             hg::detail::str_cat(describe_thread(t), ": ", warp_op_name(t.warp_op), " at ", format_where(t.where),
                                 " has width ", t.width, "; width must be a power of two in [1, 32]"));
        return false;
      }
      // All results first (they read the lanes' deposited values), then release.
      uint64_t results[32] = {};
      for (unsigned j = 0; j < 32; ++j) {
        if ((participants >> j) & 1u) results[j] = warp_result(threads[base + j], j, base, participants);
      }
      for (unsigned j = 0; j < 32; ++j) {
        if (!((participants >> j) & 1u)) continue;
        threads[base + j].warp_result = results[j];
        threads[base + j].state = ThreadState::kReady;
      }
      progressed = true;
    }
  }
  return progressed;
}

// Releases the block barrier if every live thread waits at the same one;
// otherwise records why the block cannot make progress.
bool release_block_barrier() {
  auto& threads = g_run->threads;
  const FiberThread* waiting = nullptr;
  const FiberThread* exited = nullptr;
  const FiberThread* in_warp_op = nullptr;
  size_t n_waiting = 0, n_exited = 0;
  for (const FiberThread& t : threads) {
    if (t.state == ThreadState::kAtBarrier) {
      if (!waiting) waiting = &t;
      ++n_waiting;
    } else if (t.state == ThreadState::kExited) {
      if (!exited) exited = &t;
      ++n_exited;
    } else if (t.state == ThreadState::kAtWarpOp && !in_warp_op) {
      in_warp_op = &t;
    }
  }
  if (!waiting) {
    if (in_warp_op) {  // nothing runnable, nothing resolvable, nobody at the block barrier
      fail(cudaErrorLaunchFailure,
           hg::detail::str_cat("deadlock: ", describe_thread(*in_warp_op), " waits in ",
                               warp_op_name(in_warp_op->warp_op), " at ", format_where(in_warp_op->where),
                               " for lanes of its mask that never arrive"));
    }
    return false;
  }
  if (in_warp_op) {
    fail(
        cudaErrorLaunchFailure,
        hg::detail::str_cat("deadlock: ", describe_thread(*in_warp_op), " waits in ", warp_op_name(in_warp_op->warp_op),
                            " at ", format_where(in_warp_op->where), " for lanes that wait in ",
                            barrier_name(waiting->barrier_op), " at ", format_where(waiting->where)));
    return false;
  }
  if (n_exited > 0) {
    fail(cudaErrorLaunchFailure,
         hg::detail::str_cat("divergent barrier: ", n_waiting, " of ", threads.size(), " threads wait in ",
                             barrier_name(waiting->barrier_op), " at ", format_where(waiting->where), " but ", n_exited,
                             " exited without reaching it (e.g. ", describe_thread(*exited),
                             "); every thread of a block must reach the same barriers "
                             "(on a GPU this hangs or corrupts shared memory)"));
    return false;
  }
  int count = 0;
  for (const FiberThread& t : threads) {
    const bool same_site = t.barrier_op == waiting->barrier_op && t.where.line() == waiting->where.line() &&
                           t.where.column() == waiting->where.column() &&
                           std::strcmp(t.where.file_name(), waiting->where.file_name()) == 0;
    if (!same_site) {
      fail(cudaErrorLaunchFailure,
           hg::detail::str_cat("divergent barrier: ", describe_thread(*waiting), " waits in ",
                               barrier_name(waiting->barrier_op), " at ", format_where(waiting->where), " but ",
                               describe_thread(t), " waits in ", barrier_name(t.barrier_op), " at ",
                               format_where(t.where), "; all threads of a block must reach the same barrier"));
      return false;
    }
    count += t.predicate != 0;
  }
  const int n = static_cast<int>(threads.size());
  int result = 0;
  switch (waiting->barrier_op) {
    case BarrierOp::kSync:
      result = 0;
      break;
    case BarrierOp::kCount:
      result = count;
      break;
    case BarrierOp::kAnd:
      result = count == n;
      break;
    case BarrierOp::kOr:
      result = count > 0;
      break;
  }
  for (FiberThread& t : threads) {
    t.barrier_result = result;
    t.state = ThreadState::kReady;
  }
  return true;
}

}  // namespace

// ---- device entry points (hg_emu_device.h) -------------------------------------------------
namespace detail {

int block_barrier(BarrierOp op, int predicate, const std::source_location& where) {
  FiberThread& t = current_thread(barrier_name(op));
  if (t.abort) throw AbortUnwind{};
  t.state = ThreadState::kAtBarrier;
  t.barrier_op = op;
  t.predicate = predicate;
  t.where = where;
  suspend(t);
  return t.barrier_result;
}

uint64_t warp_op(WarpOp op, unsigned mask, uint64_t value, unsigned arg, unsigned width,
                 const std::source_location& where) {
  FiberThread& t = current_thread(warp_op_name(op));
  if (t.abort) throw AbortUnwind{};
  t.state = ThreadState::kAtWarpOp;
  t.warp_op = op;
  t.mask = mask;
  t.value = value;
  t.arg = arg;
  t.width = width;
  t.where = where;
  suspend(t);
  return t.warp_result;
}

unsigned active_mask() {
  const FiberThread& t = current_thread("__activemask()");
  const auto& threads = g_run->threads;
  const unsigned base = t.dev.linear_id & ~31u;
  unsigned mask = 0;
  for (unsigned j = 0; j < 32 && base + j < threads.size(); ++j) {
    if (threads[base + j].state != ThreadState::kExited) mask |= 1u << j;
  }
  return mask;
}

void device_trap(const char* what, const std::source_location& where) {
  if (g_thread == nullptr) HG_FAIL("cuda-emu: ", what, " at ", format_where(where), " outside a kernel");
  throw DeviceFault{cudaErrorLaunchFailure, hg::detail::str_cat(what, " at ", format_where(where))};
}

void device_assert_fail(const char* expr, const char* file, unsigned line, const char* function) {
  if (g_thread == nullptr) __assert_fail(expr, file, line, function);  // host code: the usual assert
  throw DeviceFault{cudaErrorAssert,
                    hg::detail::str_cat("device assertion `", expr, "` failed in ", function, " at ", file, ":", line)};
}

}  // namespace detail

Failure run_block(const KernelLaunch& launch, StackPool& stacks, uint64_t block_seed, uint64_t& fiber_switches) {
  static BlockRun run;  // worker thread only; vectors keep their capacity between blocks
  run.launch = &launch;
  run.failure = Failure{};
  run.switches = 0;
  g_run = &run;
  const dim3 bd = launch.block;
  const unsigned n = bd.x * bd.y * bd.z;
  run.threads.clear();
  run.threads.resize(n);
  for (unsigned i = 0; i < n; ++i) {
    FiberThread& t = run.threads[i];
    t.dev.linear_id = i;
    t.dev.thread_idx = uint3{i % bd.x, (i / bd.x) % bd.y, i / (bd.x * bd.y)};
    ctx::stack_context stack = stacks.allocate();
    t.stack_bottom = static_cast<char*>(stack.sp) - stack.size;
    t.stack_size = stack.size;
    t.fiber =
        ctx::fiber(std::allocator_arg, ctx::preallocated(stack.sp, stack.size, stack), PooledStackAllocator{&stacks},
                   [&t](ctx::fiber&& caller) { return fiber_main(t, std::move(caller)); });
  }

  uint64_t rng = block_seed;
  std::vector<unsigned> ready;
  ready.reserve(n);
  while (run.failure.error == cudaSuccess) {
    ready.clear();
    for (unsigned i = 0; i < n; ++i) {
      if (run.threads[i].state == ThreadState::kReady) ready.push_back(i);
    }
    if (!ready.empty()) {
      if (block_seed != 0) {  // Fisher-Yates with our own generator: same seed, same order
        for (size_t i = ready.size() - 1; i > 0; --i) std::swap(ready[i], ready[splitmix64(rng) % (i + 1)]);
      }
      for (unsigned i : ready) {
        resume(run.threads[i]);
        if (run.failure.error != cudaSuccess) break;
      }
      continue;
    }
    if (resolve_warp_ops()) continue;
    if (run.failure.error != cudaSuccess) break;
    const bool all_exited = std::all_of(run.threads.begin(), run.threads.end(),
                                        [](const FiberThread& t) { return t.state == ThreadState::kExited; });
    if (all_exited) break;
    if (!release_block_barrier()) break;
  }

  // Unwind every fiber that has not finished (after a failure): each throws
  // AbortUnwind from where it waits, or returns at once if it never started.
  for (FiberThread& t : run.threads) {
    for (int attempt = 0; t.state != ThreadState::kExited && attempt < 8; ++attempt) {
      t.abort = true;
      resume(t);
    }
    HG_CHECK(t.state == ThreadState::kExited, "cuda-emu: a thread of kernel ", launch.name,
             " keeps running after its block failed (does kernel code catch(...) around a barrier?)");
  }
  if (run.failure.error != cudaSuccess) stacks.clear_sanitizer_state();
  fiber_switches += run.switches;
  g_run = nullptr;
  return run.failure;
}

}  // namespace hg::emu
