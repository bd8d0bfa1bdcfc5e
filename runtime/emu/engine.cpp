// cuda-emu launches: validation against Hopper's limits, the worker thread that
// runs every block, shared-memory poisoning, cudaFuncSetAttribute.
// See Note [Emulated shared memory] (hg_emu_device.h) and
// Note [Emulated thread schedule] (scheduler.h).
#include <link.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

#include "core/error.h"
#include "cuda_runtime.h"
#include "hg_emu_mma_sm80.h"
#include "runtime/emu/scheduler.h"
#include "runtime/emu/stack_pool.h"

namespace hg::emu {
namespace {

constexpr unsigned char kSharedPoison = 0xFF;  // NaN in f32/f16/bf16, -1 in ints
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kDefaultStackKiB = 512;
#else
constexpr size_t kDefaultStackKiB = 256;
#endif

uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 0);
  HG_CHECK(end != nullptr && *end == '\0', "environment variable ", name, "='", text, "' is not an unsigned integer");
  return value;
}

// The static thread-local block (PT_TLS) of the module that contains `address`,
// as seen by the calling thread. Empty if the module has none or allocates it
// lazily (dlopen'ed modules), in which case its __shared__ arrays are not poisoned.
struct TlsBlock {
  unsigned char* data = nullptr;
  size_t size = 0;
};

TlsBlock module_tls_block(const void* address) {
  struct Query {
    uintptr_t address;
    TlsBlock block;
  } query{reinterpret_cast<uintptr_t>(address), {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* q = static_cast<Query*>(data);
        bool contains = false;
        const ElfW(Phdr)* tls = nullptr;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
          if (ph.p_type == PT_LOAD && q->address >= start && q->address < start + ph.p_memsz) contains = true;
          if (ph.p_type == PT_TLS) tls = &ph;
        }
        if (!contains) return 0;
        if (tls != nullptr && info->dlpi_tls_data != nullptr) {
          q->block = TlsBlock{static_cast<unsigned char*>(info->dlpi_tls_data), tls->p_memsz};
        }
        return 1;
      },
      &query);
  return query.block;
}

size_t total_static_tls_bytes() {
  size_t total = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          if (info->dlpi_phdr[i].p_type == PT_TLS) *static_cast<size_t*>(data) += info->dlpi_phdr[i].p_memsz;
        }
        return 0;
      },
      &total);
  return total;
}

const char* g_running_kernel = nullptr;  // for the sanitizer report below
uint64_t g_block_serial = 0;             // counts the blocks started (hg::emu::detail::block_serial)

#if defined(__SANITIZE_ADDRESS__)
// AddressSanitizer's report shows the kernel's source line; this adds which
// CUDA thread it was, since every CUDA thread runs on the same OS thread.
void report_cuda_thread_on_death() {
  const DeviceThread* t = detail::g_thread;
  if (g_running_kernel == nullptr || t == nullptr) return;
  const DeviceBlock& b = detail::g_block;
  std::fprintf(stderr, "cuda-emu: the error above happened in kernel %s, block (%u,%u,%u), thread (%u,%u,%u)\n",
               g_running_kernel, b.block_idx.x, b.block_idx.y, b.block_idx.z, t->thread_idx.x, t->thread_idx.y,
               t->thread_idx.z);
}
#endif

// One OS thread that runs every block of every launch (see Note [Emulated
// shared memory] for why it must not be the caller's thread).
class Worker {
 public:
  Worker() {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    // The static TLS of every module (all __shared__ arrays) lives on the new
    // thread's stack mapping in glibc, on top of what the scheduler needs.
    pthread_attr_setstacksize(&attr, (size_t{8} << 20) + total_static_tls_bytes());
    const int rc = pthread_create(&thread_, &attr, &Worker::main, this);
    pthread_attr_destroy(&attr);
    HG_CHECK(rc == 0, "cuda-emu: cannot start the worker thread (", std::strerror(rc), ")");
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_set_death_callback(&report_cuda_thread_on_death);
#endif
  }
  bool on_worker() const { return pthread_equal(pthread_self(), thread_) != 0; }

  void run(const std::function<void()>& job) {
    std::unique_lock lock(mutex_);
    job_ = &job;
    error_ = nullptr;
    cv_.notify_all();
    cv_.wait(lock, [this] { return job_ == nullptr; });
    if (error_) std::rethrow_exception(error_);
  }

 private:
  static void* main(void* self) {
    static_cast<Worker*>(self)->loop();
    return nullptr;
  }
  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [this] { return job_ != nullptr; });
      try {
        (*job_)();
      } catch (...) {
        error_ = std::current_exception();
      }
      job_ = nullptr;
      cv_.notify_all();
    }
  }

  pthread_t thread_{};
  std::mutex mutex_;
  std::condition_variable cv_;
  const std::function<void()>* job_ = nullptr;
  std::exception_ptr error_;
};

struct Engine {
  std::mutex launch_mutex;               // one launch at a time: blocks share the worker's __shared__ storage
  std::atomic<Worker*> worker{nullptr};  // created by the first launch
  StackPool* stacks = nullptr;           // worker only
  std::unordered_map<KernelEntry, TlsBlock> tls_blocks;  // worker only

  std::mutex state_mutex;  // guards what follows
  bool seed_loaded = false;
  uint64_t seed = 1;
  std::unordered_map<KernelEntry, size_t> max_dynamic_smem;
  LaunchStats last_stats;
  uint64_t launch_count = 0;  // successful launches, process-wide
};

// Leaked on purpose: the worker thread blocks on it until the process exits.
Engine& engine() {
  static Engine* e = new Engine;
  return *e;
}

std::string format_dim(dim3 d) { return hg::detail::str_cat("(", d.x, ",", d.y, ",", d.z, ")"); }

// The checks a Hopper GPU applies at launch, with the error it returns.
Failure validate(const KernelLaunch& l, size_t max_dynamic_smem) {
  const dim3 b = l.block, g = l.grid;
  const auto invalid = [](std::string why) { return Failure{cudaErrorInvalidConfiguration, std::move(why)}; };
  if (b.x == 0 || b.y == 0 || b.z == 0)
    return invalid(hg::detail::str_cat("blockDim ", format_dim(b), " has a zero dimension"));
  if (g.x == 0 || g.y == 0 || g.z == 0)
    return invalid(hg::detail::str_cat("gridDim ", format_dim(g), " has a zero dimension"));
  if (b.x > kMaxBlockDimX || b.y > kMaxBlockDimY || b.z > kMaxBlockDimZ) {
    return invalid(hg::detail::str_cat("blockDim ", format_dim(b), " exceeds the per-dimension limit (", kMaxBlockDimX,
                                       ",", kMaxBlockDimY, ",", kMaxBlockDimZ, ")"));
  }
  const uint64_t threads = uint64_t{b.x} * b.y * b.z;
  if (threads > static_cast<uint64_t>(kMaxThreadsPerBlock)) {
    return invalid(hg::detail::str_cat("blockDim ", format_dim(b), " has ", threads, " threads; a block holds at most ",
                                       kMaxThreadsPerBlock));
  }
  if (g.x > kMaxGridDimX || g.y > kMaxGridDimY || g.z > kMaxGridDimZ) {
    return invalid(hg::detail::str_cat("gridDim ", format_dim(g), " exceeds the limit (", kMaxGridDimX, ",",
                                       kMaxGridDimY, ",", kMaxGridDimZ, ")"));
  }
  if (l.shared_bytes > max_dynamic_smem) {
    return Failure{cudaErrorInvalidValue,
                   hg::detail::str_cat(l.shared_bytes, " bytes of dynamic shared memory exceed the kernel's limit of ",
                                       max_dynamic_smem,
                                       " bytes; above 48 KiB call cudaFuncSetAttribute(kernel, "
                                       "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) first (at most ",
                                       kSharedMemPerBlockOptin, " bytes on sm_90)")};
  }
  return Failure{};
}

// Runs on the worker.
Failure run_grid(const KernelLaunch& l, uint64_t seed, LaunchStats& stats) {
  Engine& e = engine();
  if (e.stacks == nullptr) {
    const uint64_t stack_kib = env_u64("HG_EMU_STACK_KB", kDefaultStackKiB);
    HG_CHECK(stack_kib >= 16 && stack_kib <= 65536, "HG_EMU_STACK_KB=", stack_kib,
             " is out of range; use 16 to 65536 (KiB per CUDA thread)");
    e.stacks = new StackPool(stack_kib * 1024);
  }
  auto tls = e.tls_blocks.find(l.entry);
  if (tls == e.tls_blocks.end()) {
    tls = e.tls_blocks.emplace(l.entry, module_tls_block(reinterpret_cast<const void*>(l.entry))).first;
  }
  g_running_kernel = l.name;
  detail::g_block = DeviceBlock{};
  detail::g_block.block_dim = l.block;
  detail::g_block.grid_dim = l.grid;
  detail::g_block.dynamic_smem_bytes = l.shared_bytes;
  Failure failure;
  for (unsigned z = 0; z < l.grid.z && failure.error == cudaSuccess; ++z) {
    for (unsigned y = 0; y < l.grid.y && failure.error == cudaSuccess; ++y) {
      for (unsigned x = 0; x < l.grid.x && failure.error == cudaSuccess; ++x) {
        detail::g_block.block_idx = uint3{x, y, z};
        ++g_block_serial;
        if (tls->second.data != nullptr) std::memset(tls->second.data, kSharedPoison, tls->second.size);
        // Exact-size heap buffer: AddressSanitizer catches accesses past the
        // launch's dynamic shared memory size.
        auto* smem = static_cast<unsigned char*>(::operator new (l.shared_bytes, std::align_val_t{16}));
        std::memset(smem, kSharedPoison, l.shared_bytes);
        detail::g_block.dynamic_smem = smem;
        uint64_t block_seed = 0;
        if (seed != 0) {  // mix the block index in, so blocks do not all run the same order
          block_seed = seed * 0x9e3779b97f4a7c15ull ^ ((uint64_t{z} << 42) | (uint64_t{y} << 26) | x);
          block_seed = block_seed == 0 ? 1 : block_seed;
        }
        try {
          failure = run_block(l, *e.stacks, block_seed, stats.fiber_switches);
        } catch (...) {
          ::operator delete (smem, std::align_val_t{16});
          detail::g_block = DeviceBlock{};
          g_running_kernel = nullptr;
          throw;
        }
        ::operator delete (smem, std::align_val_t{16});
        ++stats.blocks;
        stats.threads += uint64_t{l.block.x} * l.block.y * l.block.z;
      }
    }
  }
  const uint3 failed_block = detail::g_block.block_idx;
  detail::g_block = DeviceBlock{};
  g_running_kernel = nullptr;
  if (failure.error != cudaSuccess && failure.message.find("block (") == std::string::npos) {
    failure.message = hg::detail::str_cat("in block (", failed_block.x, ",", failed_block.y, ",", failed_block.z,
                                          "): ", failure.message);
  }
  return failure;
}

}  // namespace

LaunchResult launch(const KernelLaunch& l) {
  Engine& e = engine();
  uint64_t seed;
  size_t max_smem;
  {
    std::lock_guard lock(e.state_mutex);
    if (!e.seed_loaded) {
      e.seed = env_u64("HG_EMU_SEED", 1);
      e.seed_loaded = true;
    }
    seed = e.seed;
    const auto it = e.max_dynamic_smem.find(l.entry);
    max_smem = it == e.max_dynamic_smem.end() ? kSharedMemPerBlock : it->second;
  }
  Failure failure = validate(l, max_smem);
  if (failure.error == cudaSuccess && cudaStreamQuery(l.stream) != cudaSuccess) {
    (void)cudaGetLastError();  // the query's error; the launch reports its own below
    failure = Failure{cudaErrorInvalidResourceHandle,
                      "the stream is not a live stream (destroyed, or not from cudaStreamCreate)"};
  }
  LaunchStats stats;
  if (failure.error == cudaSuccess) {
    Worker* worker = e.worker.load();
    if (worker != nullptr && worker->on_worker()) {
      HG_FAIL("cuda-emu: kernel ", l.name, " launched from device code (dynamic parallelism is not emulated)");
    }
    std::lock_guard lock(e.launch_mutex);
    if (worker == nullptr) {
      worker = e.worker.load();
      if (worker == nullptr) e.worker.store(worker = new Worker);
    }
    const std::function<void()> job = [&] { failure = run_grid(l, seed, stats); };
    worker->run(job);
  }
  {
    std::lock_guard lock(e.state_mutex);
    e.last_stats = stats;
    if (failure.error == cudaSuccess) ++e.launch_count;
  }
  LaunchResult result;
  result.error = failure.error;
  if (failure.error != cudaSuccess) {
    result.message = hg::detail::str_cat("launch of kernel ", l.name, "<<<", format_dim(l.grid), ", ",
                                         format_dim(l.block), ", ", l.shared_bytes, ">>> failed: ", failure.message);
    set_last_error(failure.error);
  }
  return result;
}

cudaError_t set_func_attribute(KernelEntry entry, cudaFuncAttribute attribute, int value) {
  cudaError_t error = cudaSuccess;
  if (entry == nullptr) {
    error = cudaErrorInvalidDeviceFunction;
  } else if (attribute == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || static_cast<size_t>(value) > kSharedMemPerBlockOptin) {
      error = cudaErrorInvalidValue;
    } else {
      Engine& e = engine();
      std::lock_guard lock(e.state_mutex);
      e.max_dynamic_smem[entry] = static_cast<size_t>(value);
    }
  } else if (attribute == cudaFuncAttributePreferredSharedMemoryCarveout) {
    if (value < -1 || value > 100) error = cudaErrorInvalidValue;  // a hint; nothing to emulate
  } else {
    error = cudaErrorInvalidValue;
  }
  if (error != cudaSuccess) set_last_error(error);
  return error;
}

void set_schedule_seed(uint64_t seed) {
  Engine& e = engine();
  std::lock_guard lock(e.state_mutex);
  e.seed = seed;
  e.seed_loaded = true;
}

uint64_t schedule_seed() {
  Engine& e = engine();
  std::lock_guard lock(e.state_mutex);
  if (!e.seed_loaded) {
    e.seed = env_u64("HG_EMU_SEED", 1);
    e.seed_loaded = true;
  }
  return e.seed;
}

// Declared in hg_emu_mma_sm80.h (the cp.async stand-in drops a finished
// block's pending copies by it). Read on the worker thread, which runs blocks.
uint64_t detail::block_serial() { return g_block_serial; }

LaunchStats last_launch_stats() {
  Engine& e = engine();
  std::lock_guard lock(e.state_mutex);
  return e.last_stats;
}

uint64_t launch_count() {
  Engine& e = engine();
  std::lock_guard lock(e.state_mutex);
  return e.launch_count;
}

}  // namespace hg::emu

long long clock64() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
