// hg-bench's harness: workloads, timing, ceilings and the two outputs (a table
// on stdout, one JSON line per result with --json FILE).
//
// Timing: `warmup` untimed calls, then `runs` (>= 20) timed calls; the median
// is the figure, min and max go beside it. On the CUDA backend each call is
// timed by a pair of CUDA events on the current stream (an optional `before`
// callback, e.g. an L2 flush, is queued before the start event and not
// timed); on the CPU by std::chrono::steady_clock around the call, which is
// synchronous there.
//
// Ceilings (copy bandwidth, GEMM peak, launch overhead) are measured in the
// same run as the workloads they normalise: Bench::ceiling() measures one the
// first time it is asked for. With --only (the PyTorch driver runs one
// workload at a time) ceilings are not measured and fractions are left out.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"

namespace hgb {

struct Stats {
  double median_s = 0, min_s = 0, max_s = 0;
  int runs = 0;
  // Over the timed runs: the process's CPU time (user + system, all threads)
  // per call, and that CPU time over the wall time (the threads' busy share:
  // up to the thread count; well below it when the machine is shared).
  double cpu_s = 0, cpu_share = 0;
};

class Bench;

struct Workload {
  std::string suite;
  std::string name;       // unique, e.g. "gemm/f16/4096x4096x4096"
  nlohmann::json params;  // what compare_torch.py needs to run the same thing
  std::function<void(Bench&, const Workload&)> run;
};

struct Options {
  bool quick = false;
  int runs = 20;
  int warmup = 3;
  hg::Device device = hg::Device::cpu();
  std::vector<std::string> only;  // exact workload names; empty = all selected
  std::string json_path;
  // --profile: instead of timing, run the warm-ups and then one call of each
  // workload under hg::profiler::Profile, and print its tables (by op, by
  // kernel) and its modelled time on profile_gpu; trace_path: the Chrome
  // trace (one file per workload: the name's '/' become '_', appended).
  bool profile = false;
  std::string profile_gpu = "H200";
  std::string trace_path;
  bool count_only = false;  // cuda-emu: record launches without running them
  // --accuracy-inputs DIR: each accuracy workload writes the inputs its kernel
  // read to DIR/<name, '/' as '_'>.bin (every input's values as f32, exact for
  // the 16-bit ones, one after the other) and .json ({"inputs": [{"dtype",
  // "shape"}, ...]}), so that compare_torch.py runs PyTorch on the same values.
  std::string accuracy_inputs;
};

class Bench {
 public:
  explicit Bench(Options options);

  const Options& options() const { return options_; }
  hg::Device device() const { return options_.device; }
  bool on_cuda() const { return options_.device.is_cuda(); }
  bool quick() const { return options_.quick; }

  struct TimeArgs {
    int inner = 1;                  // calls of fn per timed run (result is per call)
    std::function<void()> before;   // untimed, before each timed run
    int runs = 0;                   // 0: options().runs
  };
  // Times fn (see the top of this file); seconds per call of fn.
  Stats time(const std::function<void()>& fn, const TimeArgs& args);
  Stats time(const std::function<void()>& fn) { return time(fn, TimeArgs{}); }

  // Prints one table row and writes one JSON line. metrics: named figures
  // (GB/s, TFLOP/s, fraction of a ceiling, ...); text: the row's last column.
  void emit(const Workload& w, const Stats& s, nlohmann::json metrics, const std::string& text);
  // A row without timing: something not measured (a pending op) or a result
  // that is not a time (the accuracy suite's errors, in metrics).
  void emit_note(const Workload& w, const std::string& note, nlohmann::json metrics = nullptr);

  // Ceilings: key -> value (copy GB/s, GEMM TFLOP/s per dtype). Registered by
  // the ceilings suite; measured on first request unless running with --only.
  void define_ceiling(const std::string& key, std::function<double()> measure);
  std::optional<double> ceiling(const std::string& key);
  void set_ceiling(const std::string& key, double value) { ceilings_[key] = value; }

  // The workload about to run (named in --profile's output).
  void set_workload(const std::string& name) { workload_ = name; }

  // Synchronises the device (no-op on the CPU).
  void sync() const;

  // The JSON context of every line: machine, commit, build flags, threads.
  const nlohmann::json& context() const { return context_; }
  std::string header() const;  // the lines printed above the table

 private:
  void write_json_line(const Workload& w, nlohmann::json fields);
  Options options_;
  nlohmann::json context_;
  std::map<std::string, double> ceilings_;
  std::map<std::string, std::function<double()>> ceiling_measures_;
  std::vector<std::string> measuring_;  // guards against a ceiling asking for itself
  FILE* json_ = nullptr;
  std::string last_suite_;
  std::string workload_;
  Stats profile(const std::function<void()>& fn, const TimeArgs& args);
};

// "f32", "f16", "bf16" <-> DType.
hg::DType parse_dtype(const std::string& name);
std::string dtype_str(hg::DType dtype);
// Bytes of the last-level cache: HG_BENCH_LLC_BYTES when set (to test the
// sizing of another machine), else what sysfs says, else a guess of 32 MiB.
int64_t last_level_cache_bytes();
// Bytes per f32 operand of the CPU bandwidth suite for a last-level cache of
// llc bytes: 8x the cache (DRAM is what is measured), between 256 MiB and
// 1 GiB; with --quick 2x the cache, between 32 and 64 MiB, so that quick mode
// takes the same few minutes on a 480 MiB L3 as on a 32 MiB one
// (docs/benchmarks.md, "How the CPU sizes are chosen").
int64_t cpu_stream_bytes(int64_t llc, bool quick);
// "1.23 ms", "456 us", ...
std::string format_seconds(double s);

}  // namespace hgb
