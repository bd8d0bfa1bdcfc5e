// The recorder, tables, trace and modelled time of core/profiler.h (Note [Profiler]).
#include "core/profiler.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace hg::profiler {

namespace detail {
std::atomic<int> g_open{0};
namespace {
thread_local Profile* t_profile = nullptr;
std::atomic<const DeviceClock*> g_clock{nullptr};
}  // namespace
Profile* current() { return t_profile; }
}  // namespace detail

namespace {

double now_ns() {
  return static_cast<double>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

const DeviceClock* clock() { return detail::g_clock.load(std::memory_order_acquire); }

std::string shape_of(const Tensor& t) {
  if (!t.defined()) return "undefined";
  std::string s(dtype_name(t.dtype()));
  s += t.shape_str();
  return s;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string json_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

// The op or range a work record belongs to (its innermost enclosing one).
std::string owner_of(const std::vector<Record>& records, const Record& r) {
  if (r.parent < 0) return "(no op)";
  const Record& p = records[static_cast<size_t>(r.parent)];
  return p.kind == Kind::backward ? p.name + " (backward)" : p.name;
}

struct Row {
  std::string name;
  int64_t calls = 0;
  double total_us = 0, bytes = 0, flops = 0;
  bool declared = false;
};

std::string render(const std::string& title, std::vector<Row> rows, double step_us, const GpuSpec* spec,
                   size_t max_rows) {
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.total_us > b.total_us; });
  std::ostringstream os;
  char line[512];
  std::snprintf(line, sizeof line, "%-58s %7s %11s %10s %7s %9s %9s %8s\n", title.c_str(), "calls", "total ms",
                "mean us", "% step", "GB/s", "TFLOP/s", "% roof");
  os << line;
  double total = 0;
  size_t shown = 0;
  Row rest{"(other rows)"};
  for (const Row& r : rows) {
    total += r.total_us;
    if (shown >= max_rows) {
      rest.calls += r.calls;
      rest.total_us += r.total_us;
      continue;
    }
    ++shown;
    const double s = r.total_us * 1e-6;
    std::string gbs = "-", tfs = "-", roof = "-";
    if (r.declared && s > 0) {
      gbs = fmt("%.1f", r.bytes / s / 1e9);
      tfs = fmt("%.3f", r.flops / s / 1e12);
      if (spec != nullptr) {
        const double bound = std::max(r.bytes / (spec->hbm_tbps * 1e12), r.flops / (spec->bf16_tflops * 1e12));
        roof = fmt("%.1f", 100.0 * bound / s);
      }
    }
    std::string name = r.name.size() > 58 ? r.name.substr(0, 55) + "..." : r.name;
    std::snprintf(line, sizeof line, "%-58s %7lld %11.3f %10.1f %7.1f %9s %9s %8s\n", name.c_str(),
                  static_cast<long long>(r.calls), r.total_us / 1e3, r.total_us / static_cast<double>(r.calls),
                  step_us > 0 ? 100.0 * r.total_us / step_us : 0.0, gbs.c_str(), tfs.c_str(), roof.c_str());
    os << line;
  }
  if (rest.calls > 0) {
    std::snprintf(line, sizeof line, "%-58s %7lld %11.3f\n", rest.name.c_str(), static_cast<long long>(rest.calls),
                  rest.total_us / 1e3);
    os << line;
  }
  std::snprintf(line, sizeof line, "%-58s %7s %11.3f %10s %7.1f\n", "total", "", total / 1e3, "",
                step_us > 0 ? 100.0 * total / step_us : 0.0);
  os << line;
  return os.str();
}

}  // namespace

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::op:
      return "op";
    case Kind::backward:
      return "backward";
    case Kind::range:
      return "range";
    case Kind::kernel:
      return "kernel";
    case Kind::library:
      return "library";
    case Kind::cpu_kernel:
      return "cpu_kernel";
  }
  return "?";
}

void set_device_clock(const DeviceClock* clock) { detail::g_clock.store(clock, std::memory_order_release); }

const std::vector<GpuSpec>& gpu_specs() {
  // Dense (no sparsity) 16-bit tensor-core peaks and memory bandwidth. H200:
  // the bf16 GEMM and copy rates measured on one (hg-bench ceilings); the
  // others are the vendors' datasheet numbers, so their model is more
  // optimistic. Launch: the host cost of one kernel launch measured on the
  // H200 (hg-bench ceilings, empty kernel), used for all.
  static const std::vector<GpuSpec> specs = {
      {"H200", 790, 4.0, 3.5, "measured: hg-bench ceilings on an H200 (bf16 GEMM, copy, empty launch)"},
      {"H100", 989, 3.35, 3.5, "datasheet H100 SXM (dense bf16, HBM3); launch as measured on the H200"},
      {"A100", 312, 2.039, 3.5, "datasheet A100 SXM 80GB (dense bf16, HBM2e); launch as measured on the H200"},
      {"L4", 121, 0.3, 3.5, "datasheet L4 (dense bf16, GDDR6); launch as measured on the H200"},
  };
  return specs;
}

const GpuSpec& gpu_spec(std::string_view name) {
  std::string names;
  for (const GpuSpec& s : gpu_specs()) {
    if (s.name.size() == name.size() && std::equal(s.name.begin(), s.name.end(), name.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
        })) {
      return s;
    }
    names += names.empty() ? s.name : ", " + s.name;
  }
  HG_FAIL("profiler: no GPU named '", name, "' in the device table; the names are ", names);
}

// ---- recording --------------------------------------------------------------------

Profile::Profile(Options options) : options_(options) {
  HG_CHECK(detail::t_profile == nullptr, "profiler: a Profile is already recording on this thread; ",
           "stop it before opening another");
  const DeviceClock* c = clock();
  emulated_ = c != nullptr && c->emulated;
  count_only_ = options.count_only && emulated_;
  if (c != nullptr) {
    c->host_sync_counts(&syncs0_, &d2h0_);
    event0_ = c->record(c->current_stream());
  }
  records_.reserve(4096);
  start_ns_ = now_ns();
  running_ = true;
  detail::t_profile = this;
  detail::g_open.fetch_add(1, std::memory_order_relaxed);
}

Profile::~Profile() {
  if (running_) {
    try {
      stop();
    } catch (...) {  // a destructor must not throw; the records stay as they are
    }
  }
  const DeviceClock* c = clock();
  if (c != nullptr) {
    for (Record& r : records_) {
      if (r.event_begin != nullptr) c->release(r.event_begin);
      if (r.event_end != nullptr) c->release(r.event_end);
    }
    if (event0_ != nullptr) c->release(event0_);
  }
}

void Profile::stop() {
  if (!running_) return;
  const DeviceClock* c = clock();
  void* event_stop = c != nullptr && event0_ != nullptr ? c->record(c->current_stream()) : nullptr;
  wall_us_ = (now_ns() - start_ns_) / 1e3;
  running_ = false;
  detail::t_profile = nullptr;
  detail::g_open.fetch_sub(1, std::memory_order_relaxed);
  while (!open_.empty()) {  // scopes still open (an exception unwound past stop)
    records_[static_cast<size_t>(open_.back())].end_us = wall_us_;
    open_.pop_back();
  }
  step_us_ = wall_us_;
  if (c != nullptr) {
    int64_t syncs = 0, d2h = 0;
    c->host_sync_counts(&syncs, &d2h);  // before the one wait below
    host_syncs_ = syncs - syncs0_;
    d2h_copies_ = d2h - d2h0_;
    if (event_stop != nullptr) {
      step_us_ = c->elapsed_us(event0_, event_stop);
      c->release(event_stop);
    }
    if (event0_ != nullptr) {
      for (Record& r : records_) {
        if (r.event_begin == nullptr || r.event_end == nullptr) continue;
        r.device_begin_us = c->elapsed_us(event0_, r.event_begin);
        r.device_end_us = c->elapsed_us(event0_, r.event_end);
        c->release(r.event_begin);
        c->release(r.event_end);
        r.event_begin = r.event_end = nullptr;
      }
    }
    // A profile of CPU work alone (a CPU device in a CUDA build) is timed by
    // the host clock, like one in a CPU build.
    if (std::none_of(records_.begin(), records_.end(), [](const Record& r) { return r.device_begin_us >= 0; })) {
      step_us_ = wall_us_;
    }
    // Idle time between consecutive device records of one stream.
    std::map<uint64_t, double> last_end;
    for (const Record& r : records_) {
      if (r.device_begin_us < 0) continue;
      auto [it, fresh] = last_end.try_emplace(r.stream, r.device_end_us);
      if (!fresh) {
        gaps_us_ += std::max(0.0, r.device_begin_us - it->second);
        it->second = std::max(it->second, r.device_end_us);
      }
    }
  }
}

int Profile::begin(Kind kind, std::string name, std::string inputs) {
  Record r;
  r.kind = kind;
  r.name = std::move(name);
  r.inputs = std::move(inputs);
  r.parent = open_.empty() ? -1 : open_.back();
  r.depth = static_cast<int>(open_.size());
  r.begin_us = (now_ns() - start_ns_) / 1e3;
  records_.push_back(std::move(r));
  const int index = static_cast<int>(records_.size() - 1);
  if (!is_work(kind)) open_.push_back(index);
  return index;
}

void Profile::end(int index) {
  Record& r = records_[static_cast<size_t>(index)];
  const DeviceClock* c = clock();
  if (r.event_begin != nullptr && c != nullptr) r.event_end = c->record(r.stream);
  r.end_us = (now_ns() - start_ns_) / 1e3;
  if (!is_work(r.kind) && !open_.empty() && open_.back() == index) open_.pop_back();
}

struct ProfileAccess {
  static void declare(Profile& p, double bytes, double flops) {
    p.pending_bytes_ = bytes;
    p.pending_flops_ = flops;
  }
  static void declare_operands(Profile& p, double bytes) {
    if (p.pending_bytes_ < 0) {
      p.pending_bytes_ = bytes;
      p.pending_flops_ = std::max(p.call_flops_, 0.0);
    }
    p.call_flops_ = -1;
  }
  static void declare_call(Profile& p, double flops) { p.call_flops_ = flops; }
  static std::pair<double, double> take(Profile& p) {
    const std::pair<double, double> w{p.pending_bytes_, p.pending_flops_};

    p.pending_bytes_ = p.pending_flops_ = -1;
    return w;
  }
  static const std::vector<int>& open(const Profile& p) { return p.open_; }
  static std::vector<Record>& records(Profile& p) { return p.records_; }
};

namespace detail {

void declare(double bytes, double flops) {
  if (Profile* p = t_profile) ProfileAccess::declare(*p, bytes, flops);
}

void declare_operands(double bytes) {
  if (Profile* p = t_profile) ProfileAccess::declare_operands(*p, bytes);
}

void declare_call(double flops) {
  if (Profile* p = t_profile) ProfileAccess::declare_call(*p, flops);
}

void clear_declaration() {
  if (Profile* p = t_profile) (void)ProfileAccess::take(*p);
}

int begin_work(Kind kind, const char* name, uint64_t stream, const unsigned* grid, const unsigned* block,
               size_t shared_bytes) {
  Profile* p = t_profile;
  if (p == nullptr || !p->running()) return -1;
  const int index = p->begin(kind, name, {});
  Record& r = ProfileAccess::records(*p)[static_cast<size_t>(index)];
  const auto [bytes, flops] = ProfileAccess::take(*p);
  r.bytes = bytes;
  r.flops = bytes >= 0 ? std::max(flops, 0.0) : -1;
  r.shared_bytes = shared_bytes;
  if (grid != nullptr) std::copy(grid, grid + 3, r.grid);
  if (block != nullptr) std::copy(block, block + 3, r.block);
  const DeviceClock* c = clock();
  if (kind != Kind::cpu_kernel && c != nullptr) {
    r.stream = kind == Kind::library ? c->current_stream() : stream;
    r.device = c->current_device();
    r.event_begin = c->record(r.stream);
  }
  return index;
}

int begin_op(Kind kind, std::string_view name, std::initializer_list<const Tensor*> inputs) {
  Profile* p = t_profile;
  if (p == nullptr || !p->running()) return -1;
  // An op calling itself again (autocast re-entering with cast inputs) is one op.
  const std::vector<int>& open = ProfileAccess::open(*p);
  if (kind == Kind::op && !open.empty()) {
    const Record& top = p->records()[static_cast<size_t>(open.back())];
    if (top.kind == Kind::op && top.name == name) return -1;
  }
  std::string shapes;
  for (const Tensor* t : inputs) {
    if (t == nullptr) continue;
    if (!shapes.empty()) shapes += ", ";
    shapes += shape_of(*t);
  }
  return p->begin(kind, std::string(name), std::move(shapes));
}

void end(int index) {
  if (Profile* p = t_profile) {
    if (p->running()) p->end(index);
  }
}

}  // namespace detail

bool WorkScope::skip_recorded() {
  const Profile* p = detail::active();
  return p != nullptr && p->skip_execution();
}

// ---- outputs ------------------------------------------------------------------------

std::string Profile::table(const GpuSpec* spec, size_t max_rows) const {
  std::map<std::string, Row> by_op, by_kernel;
  std::map<int, bool> op_counted;
  for (const Record& r : records_) {
    if (!is_work(r.kind)) {
      const std::string key = r.kind == Kind::backward ? r.name + " (backward)" : r.name;
      Row& row = by_op[key];
      row.name = key;
      ++row.calls;
      continue;
    }
    const std::string owner = owner_of(records_, r);
    for (Row* row : {&by_op[owner], &by_kernel[r.name + "  [" + owner + "]"]}) {
      row->total_us += r.time_us();
      if (r.bytes >= 0) {
        row->bytes += r.bytes;
        row->flops += std::max(r.flops, 0.0);
        row->declared = true;
      }
    }
    by_kernel[r.name + "  [" + owner + "]"].name = r.name + "  [" + owner + "]";
    ++by_kernel[r.name + "  [" + owner + "]"].calls;
    Row& o = by_op[owner];
    o.name = owner;
    if (r.parent < 0) ++o.calls;
  }
  std::vector<Row> ops, kernels;
  for (auto& [k, v] : by_op) ops.push_back(v);
  for (auto& [k, v] : by_kernel) kernels.push_back(v);
  std::ostringstream os;
  const bool device_clock =
      std::any_of(records_.begin(), records_.end(), [](const Record& r) { return r.device_begin_us >= 0; });
  const char* clock_name = !device_clock ? "host wall clock"
                           : emulated_   ? "cuda-emu events (the emulator's host time: NOT GPU speed)"
                                         : "CUDA events (device time)";
  os << "profile: step " << fmt("%.3f", step_us_ / 1e3) << " ms (" << clock_name << "), host wall "
     << fmt("%.3f", wall_us_ / 1e3) << " ms, " << records_.size() << " records, host syncs " << host_syncs_
     << ", device-to-host copies " << d2h_copies_;
  if (device_clock) os << ", device idle between kernels " << fmt("%.3f", gaps_us_ / 1e3) << " ms";
  if (count_only_)
    os << "\n  count-only: kernel bodies and library calls did not run; times and values are meaningless";
  os << "\n\n"
     << render("by op (self: kernels directly under it)", std::move(ops), step_us_, spec, max_rows) << "\n"
     << render("by kernel  [op]", std::move(kernels), step_us_, spec, max_rows);
  return os.str();
}

Model Profile::model(const GpuSpec& spec, size_t max_rows) const {
  Model m;
  struct KRow {
    std::string name;
    int64_t calls = 0;
    double bytes = 0, flops = 0, us = 0, memory_us = 0, compute_us = 0, measured_us = 0;
    bool undeclared = false;
  };
  std::map<std::string, KRow> rows;
  const double bw = spec.hbm_tbps * 1e12 / 1e6;       // bytes per us
  const double peak = spec.bf16_tflops * 1e12 / 1e6;  // FLOPs per us
  for (const Record& r : records_) {
    if (!is_work(r.kind)) continue;
    const std::string key = r.name + "  [" + owner_of(records_, r) + "]";
    KRow& k = rows[key];
    k.name = key;
    ++k.calls;
    ++m.launches;
    const double bytes = std::max(r.bytes, 0.0), flops = std::max(r.flops, 0.0);
    if (r.bytes < 0) {
      ++m.undeclared;
      k.undeclared = true;
    }
    const double mem = bytes / bw, comp = flops / peak;
    k.bytes += bytes;
    k.flops += flops;
    k.memory_us += mem;
    k.compute_us += comp;
    k.us += std::max(mem, comp) + spec.launch_us;
    k.measured_us += r.time_us();
    m.bytes += bytes;
    m.flops += flops;
    m.memory_us += mem;
    m.compute_us += comp;
    m.launch_us += spec.launch_us;
    m.total_us += std::max(mem, comp) + spec.launch_us;
  }
  std::vector<KRow> sorted;
  for (auto& [key, k] : rows) sorted.push_back(k);
  std::sort(sorted.begin(), sorted.end(), [](const KRow& a, const KRow& b) { return a.us > b.us; });
  std::ostringstream os;
  char line[512];
  os << "modelled on " << spec.name << " (" << fmt("%.0f", spec.bf16_tflops) << " TFLOP/s bf16, "
     << fmt("%.2f", spec.hbm_tbps) << " TB/s, " << fmt("%.1f", spec.launch_us)
     << " us per launch): per launch max(bytes / bandwidth, FLOPs / peak) + launch, a lower bound\n";
  std::snprintf(line, sizeof line, "%-58s %7s %10s %10s %11s %6s %8s\n", "kernel  [op]", "calls", "GB", "GFLOP",
                "model ms", "bound", "% model");
  os << line;
  size_t shown = 0;
  for (const KRow& k : sorted) {
    if (shown++ >= max_rows) break;
    const char* bound = k.undeclared ? "?" : k.compute_us > k.memory_us ? "flops" : "bytes";
    std::string name = k.name.size() > 58 ? k.name.substr(0, 55) + "..." : k.name;
    std::snprintf(line, sizeof line, "%-58s %7lld %10.3f %10.2f %11.3f %6s %8.1f\n", name.c_str(),
                  static_cast<long long>(k.calls), k.bytes / 1e9, k.flops / 1e9, k.us / 1e3, bound,
                  m.total_us > 0 ? 100.0 * k.us / m.total_us : 0.0);
    os << line;
  }
  if (sorted.size() > max_rows) os << "  (" << sorted.size() - max_rows << " more rows)\n";
  std::snprintf(line, sizeof line,
                "total: %lld launches (%lld without declared work), %.3f GB, %.4f TFLOP; modelled %.3f ms = "
                "memory %.3f + compute %.3f (overlapping; max per launch) + launches %.3f\n",
                static_cast<long long>(m.launches), static_cast<long long>(m.undeclared), m.bytes / 1e9, m.flops / 1e12,
                m.total_us / 1e3, m.memory_us / 1e3, m.compute_us / 1e3, m.launch_us / 1e3);
  os << line;
  m.table = os.str();
  return m;
}

std::string Profile::trace_json() const {
  std::ostringstream os;
  os << "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"clock\":\""
     << (std::none_of(records_.begin(), records_.end(), [](const Record& r) { return r.device_begin_us >= 0; }) ? "host"
         : emulated_ ? "cuda-emu (not GPU speed)"
                     : "cuda events")
     << "\",\"count_only\":" << (count_only_ ? "true" : "false") << "},\"traceEvents\":[";
  os << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":0,\"args\":{\"name\":\"host: ops\"}},"
     << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":1,\"args\":{\"name\":\"device: kernels by stream\"}}";
  // Ops as B/E pairs in nesting order (records are in begin order; an op
  // closes before the first record that is not inside it), kernels as X.
  std::vector<int> open;
  auto close_until = [&](int parent) {
    while (!open.empty() && open.back() != parent) {
      const Record& r = records_[static_cast<size_t>(open.back())];
      os << ",{\"ph\":\"E\",\"pid\":0,\"tid\":0,\"ts\":" << fmt("%.3f", r.end_us) << "}";
      open.pop_back();
    }
  };
  for (size_t i = 0; i < records_.size(); ++i) {
    const Record& r = records_[i];
    close_until(r.parent);
    if (is_work(r.kind)) {
      const bool dev = r.device_begin_us >= 0;
      const double ts = dev ? r.device_begin_us : r.begin_us;
      os << ",{\"ph\":\"X\",\"name\":\"" << json_escape(r.name) << "\",\"cat\":\"" << kind_name(r.kind)
         << "\",\"pid\":1,\"tid\":" << (r.kind == Kind::cpu_kernel ? std::string("\"cpu\"") : std::to_string(r.stream))
         << ",\"ts\":" << fmt("%.3f", ts) << ",\"dur\":" << fmt("%.3f", std::max(r.time_us(), 0.0))
         << ",\"args\":{\"op\":\"" << json_escape(owner_of(records_, r)) << "\",\"grid\":[" << r.grid[0] << ","
         << r.grid[1] << "," << r.grid[2] << "],\"block\":[" << r.block[0] << "," << r.block[1] << "," << r.block[2]
         << "],\"bytes\":" << fmt("%.0f", r.bytes) << ",\"flops\":" << fmt("%.0f", r.flops) << "}}";
    } else {
      os << ",{\"ph\":\"B\",\"name\":\"" << json_escape(r.kind == Kind::backward ? r.name + " (backward)" : r.name)
         << "\",\"cat\":\"" << kind_name(r.kind) << "\",\"pid\":0,\"tid\":0,\"ts\":" << fmt("%.3f", r.begin_us)
         << ",\"args\":{\"inputs\":\"" << json_escape(r.inputs) << "\"}}";
      open.push_back(static_cast<int>(i));
    }
  }
  close_until(-1);
  os << "]}\n";
  return os.str();
}

void Profile::write_trace(const std::string& path) const {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  HG_CHECK(f.good(), "profiler: cannot open '", path, "' for writing the trace");
  f << trace_json();
  HG_CHECK(f.good(), "profiler: writing the trace to '", path, "' failed");
}

}  // namespace hg::profiler
