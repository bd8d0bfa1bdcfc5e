// hg::profiler — where a step spends its time, per op and per kernel.
//
//   hg::profiler::Profile prof;               // records on this thread until stop()
//   step();
//   prof.stop();
//   std::puts(prof.table().c_str());           // by op and by kernel, sorted by time
//   std::puts(prof.model(hg::profiler::gpu_spec("H200")).table.c_str());
//   prof.write_trace("trace.json");            // chrome://tracing, ui.perfetto.dev
//
// Note [Profiler]
// What is recorded, and where the hooks sit (each a scope object that costs
// one relaxed atomic load when no Profile is open):
// - ops: every differentiable op's forward (HG_AUTOCAST's line at the top of
//   each op in autograd/) and every backward node the engine runs
//   (autograd/engine.cpp), with the input shapes and dtypes; user ranges
//   (profiler::Range) group the rest (an optimizer step, a data copy);
// - kernels: every CUDA launch (HG_LAUNCH, kernels/cuda/launch.cuh) with its
//   stream, grid and block; every library call (the GEMM behind ops::matmul:
//   cuBLAS, oneDNN or OpenBLAS; cuDNN convolutions); every CPU backend call
//   (HG_BACKEND_CALL, kernels/dispatch.h) with its host wall time;
// - time: a pair of CUDA events around each launch and library call on a GPU,
//   read once when the Profile stops (no host sync per launch; the runtime's
//   host sync counter proves it), the host wall clock on the CPU; under
//   cuda-emu the events carry the emulator's host time, which says nothing
//   about GPU speed (emulated() is true);
// - declared work: bytes read + written and FLOPs of each launch. The backend
//   dispatch declares the bytes of the call's tensor operands (numel x element
//   size; an add of N f32 values: 12 N), a launcher that knows better declares
//   its own with declare_work(bytes, flops) on the line before its launch
//   (consumed by that next launch), the GEMM declares 2 M N K FLOPs per batch;
// - host syncs: the runtime's counters (runtime/cuda/runtime.h) while open.
//
// Only the thread that opened the Profile is recorded, one Profile at a time.
//
// Modelled time (model()): for each recorded kernel max(bytes / bandwidth,
// FLOPs / peak) + a launch overhead, summed, for a named GPU from a small table
// of peaks (gpu_spec). It needs only declared work, so it works on any machine,
// including cuda-emu in count-only mode (Options::count_only: launches are
// recorded but kernel bodies and library calls do not run, so every value is
// garbage; a training step's control flow does not depend on the values).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace hg {
class Tensor;
}

namespace hg::profiler {

enum class Kind : uint8_t {
  op,          // a differentiable op's forward
  backward,    // a backward node run by the autograd engine
  range,       // a user range (profiler::Range)
  kernel,      // a CUDA kernel launch
  library,     // a library call (cuBLAS, cuDNN, oneDNN, OpenBLAS)
  cpu_kernel,  // a CPU backend call
};
std::string_view kind_name(Kind kind);
inline bool is_work(Kind k) { return k == Kind::kernel || k == Kind::library || k == Kind::cpu_kernel; }

struct Record {
  Kind kind = Kind::op;
  std::string name;
  std::string inputs;  // ops: "f32[8, 16], bf16[16]"
  int parent = -1;     // the enclosing op or range record (-1: none)
  int depth = 0;
  int device = -1;      // CUDA device of a kernel/library call; -1: the CPU
  uint64_t stream = 0;  // cudaStream_t as an integer (0: the legacy default stream)
  unsigned grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  size_t shared_bytes = 0;
  double begin_us = 0, end_us = 0;                  // host clock, since the Profile opened
  double device_begin_us = -1, device_end_us = -1;  // device clock (events), since the Profile opened; -1: none
  double bytes = -1, flops = -1;                    // declared work; -1: undeclared
  void* event_begin = nullptr;                      // device clock events until stop()
  void* event_end = nullptr;
  // Time of a kernel/library/cpu record: device time where measured, else host.
  double time_us() const { return device_begin_us >= 0 ? device_end_us - device_begin_us : end_us - begin_us; }
};

// Peaks of a GPU for the modelled time: dense 16-bit tensor TFLOP/s, memory
// bandwidth in TB/s, and the host cost of one launch in microseconds.
struct GpuSpec {
  std::string name;
  double bf16_tflops = 0;
  double hbm_tbps = 0;
  double launch_us = 0;
  std::string source;  // where the numbers come from
};
// H100, H200, A100, L4 (case-insensitive); throws hg::Error listing the names.
const GpuSpec& gpu_spec(std::string_view name);
const std::vector<GpuSpec>& gpu_specs();

struct Options {
  // cuda-emu only: record launches without running kernel bodies or library
  // calls (see Note [Profiler]); ignored elsewhere (kernels always run there).
  bool count_only = false;
};

struct Model {
  double total_us = 0;    // sum over kernels of max(memory, compute) + launch
  double memory_us = 0;   // sum of bytes / bandwidth
  double compute_us = 0;  // sum of FLOPs / peak
  double launch_us = 0;   // launches x overhead
  double bytes = 0, flops = 0;
  int64_t launches = 0;
  int64_t undeclared = 0;  // launches without declared work (modelled as the launch alone)
  std::string table;       // per kernel, sorted by modelled time
};

class Profile {
 public:
  explicit Profile(Options options = {});
  ~Profile();
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  // Stops recording and reads the device clock (one wait for the device).
  void stop();
  bool running() const { return running_; }

  const std::vector<Record>& records() const { return records_; }
  // The scope's length: device time from open to stop where a device clock ran
  // (CUDA or cuda-emu), else host wall time.
  double step_us() const { return step_us_; }
  double wall_us() const { return wall_us_; }
  bool emulated() const { return emulated_; }
  bool count_only() const { return count_only_; }
  int64_t host_syncs() const { return host_syncs_; }
  int64_t device_to_host_copies() const { return d2h_copies_; }
  // Device idle time between consecutive kernels of one stream (the device
  // waiting for the host), where a device clock ran.
  double device_gaps_us() const { return gaps_us_; }

  // Summary tables by op and by kernel, sorted by total time. With a spec, GB/s
  // and TFLOP/s are also given as a fraction of its roofline.
  std::string table(const GpuSpec* spec = nullptr, size_t max_rows = 25) const;
  Model model(const GpuSpec& spec, size_t max_rows = 25) const;
  // Chrome trace / Perfetto JSON: ops as B/E pairs on the host row, kernels as
  // X events on one row per stream (device clock where there is one).
  std::string trace_json() const;
  void write_trace(const std::string& path) const;

  // Recording (the hooks below call these; not for users).
  int begin(Kind kind, std::string name, std::string inputs);
  void end(int index);
  bool skip_execution() const { return count_only_; }

 private:
  friend struct ProfileAccess;
  Options options_;
  bool running_ = false;
  bool emulated_ = false;
  bool count_only_ = false;
  std::vector<Record> records_;
  std::vector<int> open_;  // stack of open op/range records
  double start_ns_ = 0;
  void* event0_ = nullptr;
  double step_us_ = 0, wall_us_ = 0, gaps_us_ = 0;
  int64_t syncs0_ = 0, d2h0_ = 0, host_syncs_ = 0, d2h_copies_ = 0;
  double pending_bytes_ = -1, pending_flops_ = -1, call_flops_ = -1;
};

namespace detail {
extern std::atomic<int> g_open;  // Profiles open in the process
// The Profile recording on this thread, or null.
Profile* current();
inline Profile* active() { return g_open.load(std::memory_order_relaxed) == 0 ? nullptr : current(); }
void declare(double bytes, double flops);
void declare_operands(double bytes);
void declare_call(double flops);
void clear_declaration();
int begin_work(Kind kind, const char* name, uint64_t stream, const unsigned* grid, const unsigned* block,
               size_t shared_bytes);
int begin_op(Kind kind, std::string_view name, std::initializer_list<const Tensor*> inputs);
void end(int index);
}  // namespace detail

// True while a Profile records on this thread.
inline bool active() { return detail::active() != nullptr; }

// Bytes read + written and FLOPs of the next launch or library call on this
// thread (see Note [Profiler]). A no-op when nothing records.
inline void declare_work(double bytes, double flops = 0) {
  if (detail::g_open.load(std::memory_order_relaxed) != 0) detail::declare(bytes, flops);
}

// FLOPs of the next backend call (HG_BACKEND_CALL) on this thread, for an ops
// layer that knows them (attention): the call's first launch gets them with
// the call's operand bytes, unless its launcher declares its own work.
inline void declare_call_flops(double flops) {
  if (detail::g_open.load(std::memory_order_relaxed) != 0) detail::declare_call(flops);
}

// An op, backward node or user range, open for the object's lifetime.
class OpScope {
 public:
  OpScope() = default;
  OpScope(Kind kind, std::string_view name, std::initializer_list<const Tensor*> inputs) {
    if (detail::g_open.load(std::memory_order_relaxed) != 0) index_ = detail::begin_op(kind, name, inputs);
  }
  // A forward op over its tensor inputs (HG_AUTOCAST's form).
  template <typename... Ts>
  explicit OpScope(std::string_view name, const Ts&... inputs) {
    if (detail::g_open.load(std::memory_order_relaxed) != 0) index_ = detail::begin_op(Kind::op, name, {&inputs...});
  }
  ~OpScope() {
    if (index_ >= 0) detail::end(index_);
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

 private:
  int index_ = -1;
};

// A named range of user code ("optimizer.step", "data"): a row of the op table.
class Range : public OpScope {
 public:
  explicit Range(std::string_view name) : OpScope(Kind::range, name, {}) {}
};

// A kernel launch or library call, open around it. skip() is true in
// count-only mode: the caller records the launch but does not run it.
class WorkScope {
 public:
  WorkScope(Kind kind, const char* name, uint64_t stream = 0, const unsigned* grid = nullptr,
            const unsigned* block = nullptr, size_t shared_bytes = 0) {
    if (detail::g_open.load(std::memory_order_relaxed) != 0) {
      index_ = detail::begin_work(kind, name, stream, grid, block, shared_bytes);
    }
  }
  ~WorkScope() {
    if (index_ >= 0) detail::end(index_);
  }
  WorkScope(const WorkScope&) = delete;
  WorkScope& operator=(const WorkScope&) = delete;
  bool skip() const { return index_ >= 0 && skip_recorded(); }

 private:
  static bool skip_recorded();
  int index_ = -1;
};

// A backend call (HG_BACKEND_CALL): declares the bytes of its operands (and
// any declare_call_flops) for the first launch it makes, unless work is
// already declared; a launcher's own declare_work replaces it. On the
// CPU, records the call itself. The declaration is dropped when it ends.
// operand_bytes() is called only while a Profile records.
class BackendCallScope {
 public:
  template <typename F>
  BackendCallScope(bool cpu, const char* name, F&& operand_bytes) {
    if (detail::g_open.load(std::memory_order_relaxed) == 0) return;
    detail::declare_operands(static_cast<double>(operand_bytes()));
    if (cpu) index_ = detail::begin_work(Kind::cpu_kernel, name, 0, nullptr, nullptr, 0);
    armed_ = true;
  }
  ~BackendCallScope() {
    if (index_ >= 0) detail::end(index_);
    if (armed_) detail::clear_declaration();
  }
  BackendCallScope(const BackendCallScope&) = delete;
  BackendCallScope& operator=(const BackendCallScope&) = delete;

 private:
  int index_ = -1;
  bool armed_ = false;
};

// The device clock, installed by the CUDA runtime layer (runtime/cuda) in
// CUDA builds: events recorded on a stream, read when the Profile stops.
struct DeviceClock {
  void* (*record)(uint64_t stream);              // an event recorded now (null: failed)
  double (*elapsed_us)(void* begin, void* end);  // waits for `end`
  void (*release)(void* event);
  uint64_t (*current_stream)();
  int (*current_device)();
  void (*host_sync_counts)(int64_t* syncs, int64_t* device_to_host_copies);
  bool emulated;  // cuda-emu: the events carry the emulator's host time
};
void set_device_clock(const DeviceClock* clock);

}  // namespace hg::profiler
