// hg-bench's harness (see harness.h).
#include "benchmarks/harness.h"

#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "autograd/autocast.h"
#include "core/error.h"
#include "core/profiler.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/runtime.h"
#endif

#ifndef HG_BENCH_BUILD_TYPE
#define HG_BENCH_BUILD_TYPE "?"
#endif
#ifndef HG_BENCH_CXX_FLAGS
#define HG_BENCH_CXX_FLAGS "?"
#endif
#ifndef HG_BENCH_CUDA_MODE
#define HG_BENCH_CUDA_MODE "?"
#endif
#ifndef HG_BENCH_COMPILER
#define HG_BENCH_COMPILER "?"
#endif
#ifndef HG_BENCH_SOURCE_DIR
#define HG_BENCH_SOURCE_DIR "."
#endif

namespace hgb {
namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The first processor's "key : value" fields of /proc/cpuinfo (empty where
// there is none).
std::map<std::string, std::string> cpuinfo_fields() {
  std::ifstream in("/proc/cpuinfo");
  std::map<std::string, std::string> fields;
  std::string line;
  while (std::getline(in, line) && line.find_first_not_of(" \t") != std::string::npos) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const auto key_end = line.find_last_not_of(" \t", colon == 0 ? 0 : colon - 1);
    const auto value = line.find_first_not_of(" \t", colon + 1);
    fields[line.substr(0, key_end == std::string::npos ? 0 : key_end + 1)] =
        value == std::string::npos ? "" : line.substr(value);
  }
  return fields;
}

std::string cpu_model(const std::map<std::string, std::string>& cpuinfo) {
  const auto it = cpuinfo.find("model name");
  return it == cpuinfo.end() ? "unknown" : it->second;
}

// "family F model M stepping S": a VM's model name is often generic
// ("Intel(R) Xeon(R) Processor"), the CPUID numbers are not.
std::string cpu_id(const std::map<std::string, std::string>& cpuinfo) {
  const auto field = [&](const char* key) {
    const auto it = cpuinfo.find(key);
    return it == cpuinfo.end() ? std::string() : it->second;
  };
  if (field("cpu family").empty() && field("model").empty()) return "unknown";
  return "family " + field("cpu family") + " model " + field("model") + " stepping " + field("stepping");
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

// HG_COMMIT, else `git rev-parse` in the source tree, else "unknown".
std::string commit() {
  if (const char* c = std::getenv("HG_COMMIT"); c != nullptr && *c != '\0') return c;
  const std::string cmd = std::string("git -C '") + HG_BENCH_SOURCE_DIR +
                          "' rev-parse --short=12 HEAD 2>/dev/null";
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[64];
    while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out.empty() ? "unknown" : out;
}

// User + system CPU time of the whole process (every thread), in seconds.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

hg::DType parse_dtype(const std::string& name) {
  if (name == "f32") return hg::kF32;
  if (name == "f16") return hg::kF16;
  if (name == "bf16") return hg::kBF16;
  if (name == "f64") return hg::kF64;
  HG_CHECK(false, "hg-bench: unknown dtype '", name, "' (f32, f16, bf16, f64)");
  return hg::kF32;
}

std::string dtype_str(hg::DType dtype) {
  if (dtype == hg::kF32) return "f32";
  if (dtype == hg::kF16) return "f16";
  if (dtype == hg::kBF16) return "bf16";
  if (dtype == hg::kF64) return "f64";
  return std::string(hg::dtype_name(dtype));
}

int64_t last_level_cache_bytes() {
  if (const char* forced = std::getenv("HG_BENCH_LLC_BYTES"); forced != nullptr && std::atoll(forced) > 0) {
    return std::atoll(forced);
  }
  int64_t best = 0;
  for (int i = 0; i < 8; ++i) {
    const std::string size =
        read_first_line("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
    if (size.empty()) continue;
    int64_t v = std::atoll(size.c_str());
    if (size.find('K') != std::string::npos) v *= 1024;
    if (size.find('M') != std::string::npos) v *= 1024 * 1024;
    best = std::max(best, v);
  }
  return best > 0 ? best : int64_t{32} << 20;
}

int64_t cpu_stream_bytes(int64_t llc, bool quick) {
  if (quick) return std::clamp(2 * llc, int64_t{32} << 20, int64_t{64} << 20);
  return std::clamp(8 * llc, int64_t{256} << 20, int64_t{1} << 30);
}

std::string format_seconds(double s) {
  char buf[32];
  if (s >= 1.0) {
    std::snprintf(buf, sizeof buf, "%.3f s", s);
  } else if (s >= 1e-3) {
    std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f us", s * 1e6);
  }
  return buf;
}

Bench::Bench(Options options) : options_(std::move(options)) {
  HG_CHECK(options_.runs >= 1, "hg-bench: --runs must be >= 1 (the default is 20)");
  const std::map<std::string, std::string> cpuinfo = cpuinfo_fields();
  nlohmann::json machine = {
      {"cpu", cpu_model(cpuinfo)},
      {"cpu_id", cpu_id(cpuinfo)},
      // The CPU's features and the paths halfgrad takes on it (the line
      // hg-train prints: AVX-512 FP16/BF16, AMX, the GEMM and f16 paths).
      {"isa", hg::amp::capability_report(hg::Device::cpu())},
      {"cores", std::thread::hardware_concurrency()},
      {"llc_bytes", last_level_cache_bytes()},
      {"loadavg_at_start", read_first_line("/proc/loadavg")},
  };
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) machine["host"] = host;
#if defined(HG_WITH_CUDA)
  if (options_.device.is_cuda()) {
    const cudaDeviceProp& p = hg::cuda::device_properties(options_.device.index);
    machine["gpu"] = p.name;
    machine["gpu_sms"] = p.multiProcessorCount;
    machine["gpu_memory_bytes"] = static_cast<int64_t>(p.totalGlobalMem);
  }
#endif
  context_ = {
      {"machine", machine},
      {"commit", commit()},
      {"build",
       {{"type", HG_BENCH_BUILD_TYPE},
        {"cxx_flags", HG_BENCH_CXX_FLAGS},
        {"cuda_mode", HG_BENCH_CUDA_MODE},
        {"compiler", HG_BENCH_COMPILER}}},
      {"threads",
       {{"omp_max_threads", omp_get_max_threads()},
        {"OMP_NUM_THREADS", env_or("OMP_NUM_THREADS", "unset")},
        {"OPENBLAS_NUM_THREADS", env_or("OPENBLAS_NUM_THREADS", "unset")},
        {"OMP_WAIT_POLICY", env_or("OMP_WAIT_POLICY", "unset")},
        {"GOMP_SPINCOUNT", env_or("GOMP_SPINCOUNT", "unset")}}},
      {"device", options_.device.str()},
      {"quick", options_.quick},
      {"timing", options_.device.is_cuda() ? "cuda events" : "steady_clock"},
      {"started", utc_now()},
  };
  if (!options_.json_path.empty()) {
    json_ = std::fopen(options_.json_path.c_str(), "a");
    HG_CHECK(json_ != nullptr, "hg-bench: cannot open --json file '", options_.json_path,
             "' for appending; check the folder exists and is writable");
  }
}

std::string Bench::header() const {
  std::ostringstream os;
  const auto& m = context_["machine"];
  os << "hg-bench  commit " << context_["commit"].get<std::string>() << "  "
     << context_["build"]["cuda_mode"].get<std::string>() << " build ("
     << context_["build"]["type"].get<std::string>() << ")  device "
     << context_["device"].get<std::string>() << (options_.quick ? "  --quick" : "") << "\n";
  os << "machine   " << m["cpu"].get<std::string>() << " (" << m["cpu_id"].get<std::string>() << "), "
     << m["cores"].get<unsigned>() << " cores, LLC " << (m["llc_bytes"].get<int64_t>() >> 20) << " MiB, load at start "
     << m["loadavg_at_start"].get<std::string>() << "\n";
  os << "cpu isa   " << m["isa"].get<std::string>() << "\n";
  if (m.contains("gpu")) os << "gpu       " << m["gpu"].get<std::string>() << "\n";
  os << "threads   OpenMP " << context_["threads"]["omp_max_threads"].get<int>()
     << " (OMP_NUM_THREADS=" << context_["threads"]["OMP_NUM_THREADS"].get<std::string>()
     << ", OPENBLAS_NUM_THREADS=" << context_["threads"]["OPENBLAS_NUM_THREADS"].get<std::string>()
     << ", OMP_WAIT_POLICY=" << context_["threads"]["OMP_WAIT_POLICY"].get<std::string>() << ")\n";
  os << "timing    " << options_.warmup << " warm-up calls, then the median of " << options_.runs
     << " timed runs [min .. max] by " << context_["timing"].get<std::string>()
     << "; cpu = process CPU time / wall time over the timed runs\n";
  return os.str();
}

void Bench::sync() const {
#if defined(HG_WITH_CUDA)
  if (on_cuda()) hg::cuda::synchronize(options_.device.index);
#endif
}

Stats Bench::profile(const std::function<void()>& fn, const TimeArgs& args) {
  {
    // Count-only: the warm-ups do not run their kernels either (a profile
    // left unread; Note [Profiler] in core/profiler.h).
    std::optional<hg::profiler::Profile> skip;
    if (options_.count_only) skip.emplace(hg::profiler::Options{.count_only = true});
    for (int i = 0; i < options_.warmup; ++i) {
      if (args.before) args.before();
      fn();
    }
  }
  sync();
  if (args.before) args.before();
  hg::profiler::Profile prof({.count_only = options_.count_only});
  fn();
  prof.stop();
  const hg::profiler::GpuSpec& spec = hg::profiler::gpu_spec(options_.profile_gpu);
  std::printf("\n==== profile: %s (one call after %d warm-up%s)\n%s\n%s\n", workload_.c_str(), options_.warmup,
              options_.warmup == 1 ? "" : "s", prof.table(on_cuda() && !prof.emulated() ? &spec : nullptr).c_str(),
              prof.model(spec).table.c_str());
  if (!options_.trace_path.empty()) {
    std::string name = workload_;
    std::replace(name.begin(), name.end(), '/', '_');
    const std::string path = options_.trace_path + "." + name + ".json";
    prof.write_trace(path);
    std::printf("trace: %s\n", path.c_str());
  }
  std::fflush(stdout);
  Stats s;
  s.runs = 1;
  s.median_s = s.min_s = s.max_s = prof.step_us() * 1e-6;
  return s;
}

Stats Bench::time(const std::function<void()>& fn, const TimeArgs& args) {
  if (options_.profile) return profile(fn, args);
  const int runs = args.runs > 0 ? args.runs : options_.runs;
  for (int i = 0; i < options_.warmup; ++i) {
    if (args.before) args.before();
    for (int j = 0; j < args.inner; ++j) fn();
  }
  sync();
  std::vector<double> t;
  t.reserve(static_cast<size_t>(runs));
  const double cpu0 = process_cpu_seconds();
  const auto wall0 = std::chrono::steady_clock::now();
  for (int r = 0; r < runs; ++r) {
    if (args.before) args.before();
#if defined(HG_WITH_CUDA)
    if (on_cuda()) {
      hg::cuda::Event start, stop;
      start.record();
      for (int j = 0; j < args.inner; ++j) fn();
      stop.record();
      t.push_back(static_cast<double>(start.elapsed_ms(stop)) * 1e-3 / args.inner);
      continue;
    }
#endif
    const auto t0 = std::chrono::steady_clock::now();
    for (int j = 0; j < args.inner; ++j) fn();
    const auto t1 = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double>(t1 - t0).count() / args.inner);
  }
  const double cpu1 = process_cpu_seconds();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  std::sort(t.begin(), t.end());
  Stats s;
  s.cpu_s = (cpu1 - cpu0) / (static_cast<double>(runs) * args.inner);
  s.cpu_share = wall > 0 ? (cpu1 - cpu0) / wall : 0;
  s.runs = runs;
  s.min_s = t.front();
  s.max_s = t.back();
  const size_t n = t.size();
  s.median_s = n % 2 == 1 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  return s;
}

void Bench::emit(const Workload& w, const Stats& s, nlohmann::json metrics, const std::string& text) {
  if (w.suite != last_suite_) {
    std::printf("\n== %s ==\n%-44s %11s %23s %5s  %s\n", w.suite.c_str(), "workload", "median", "[min .. max]", "cpu",
                "result");
    last_suite_ = w.suite;
  }
  const std::string range = "[" + format_seconds(s.min_s) + " .. " + format_seconds(s.max_s) + "]";
  std::printf("%-44s %11s %23s %5.2f  %s\n", w.name.c_str(), format_seconds(s.median_s).c_str(), range.c_str(),
              s.cpu_share, text.c_str());
  std::fflush(stdout);
  write_json_line(w, {{"median_s", s.median_s},
                      {"min_s", s.min_s},
                      {"max_s", s.max_s},
                      {"runs", s.runs},
                      {"cpu_s_per_call", s.cpu_s},
                      {"cpu_share", s.cpu_share},
                      {"metrics", std::move(metrics)}});
}

void Bench::emit_note(const Workload& w, const std::string& note, nlohmann::json metrics) {
  if (w.suite != last_suite_) {
    std::printf("\n== %s ==\n", w.suite.c_str());
    last_suite_ = w.suite;
  }
  std::printf("%-44s %11s %23s  %s\n", w.name.c_str(), "-", "", note.c_str());
  std::fflush(stdout);
  nlohmann::json fields = {{"note", note}};
  if (!metrics.is_null()) fields["metrics"] = std::move(metrics);
  write_json_line(w, std::move(fields));
}

// One JSON line: the run's context, the workload's identity, then `fields`.
void Bench::write_json_line(const Workload& w, nlohmann::json fields) {
  if (json_ == nullptr) return;
  nlohmann::json line = context_;
  line["suite"] = w.suite;
  line["name"] = w.name;
  line["params"] = w.params;
  for (auto& [key, value] : fields.items()) line[key] = std::move(value);
  line["finished"] = utc_now();
  std::fprintf(json_, "%s\n", line.dump().c_str());
  std::fflush(json_);
}

void Bench::define_ceiling(const std::string& key, std::function<double()> measure) {
  ceiling_measures_[key] = std::move(measure);
}

std::optional<double> Bench::ceiling(const std::string& key) {
  if (auto it = ceilings_.find(key); it != ceilings_.end()) return it->second;
  if (!options_.only.empty()) return std::nullopt;  // one workload at a time: no ceilings
  auto m = ceiling_measures_.find(key);
  if (m == ceiling_measures_.end()) return std::nullopt;
  if (std::find(measuring_.begin(), measuring_.end(), key) != measuring_.end()) return std::nullopt;
  measuring_.push_back(key);
  const double v = m->second();  // emits its own row (under a "ceilings" header)
  measuring_.pop_back();
  ceilings_[key] = v;
  return v;
}

}  // namespace hgb
