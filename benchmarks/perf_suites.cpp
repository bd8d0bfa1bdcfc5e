// The ceilings, gemm and bandwidth suites of hg-bench.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "amp/fp8.h"
#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "benchmarks/suites.h"
#include "core/tensor.h"
#include "kernels/gemm/gemm.h"
#include "kernels/ops.h"
#include "kernels/norm/norm.h"
#include "kernels/reduce/reduce.h"
#include "kernels/softmax/softmax.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/runtime.h"
#endif

namespace hgb {
namespace {

using hg::DType;
using hg::Tensor;

const std::vector<DType> kFloatTypes = {hg::kF32, hg::kF16, hg::kBF16};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

Tensor randn_on(Bench& b, hg::Shape shape, DType dtype) {
  return hg::randn(std::move(shape), {.dtype = hg::kF32, .device = b.device()}).to(dtype);
}

// Bytes per f32 buffer of the bandwidth suite: cpu_stream_bytes on the CPU
// (a capped multiple of the last-level cache), 512 MiB (128 MiB with --quick)
// on a GPU.
int64_t stream_bytes(const Bench& b) {
  if (b.on_cuda()) return b.quick() ? (int64_t{128} << 20) : (int64_t{512} << 20);
  return cpu_stream_bytes(last_level_cache_bytes(), b.quick());
}

// GB/s text and metrics, with the fraction of the copy ceiling when known.
void emit_bandwidth(Bench& b, const Workload& w, const Stats& s, double bytes) {
  const double gbps = bytes / s.median_s * 1e-9;
  nlohmann::json m = {{"bytes", bytes}, {"gbps", gbps}};
  std::string text = fmt("%.1f GB/s", gbps);
  if (auto copy = b.ceiling("copy_gbps")) {
    m["fraction_of_copy"] = gbps / *copy;
    text += fmt("  %.0f%% of copy", 100.0 * gbps / *copy);
  }
  b.emit(w, s, m, text);
}

// A GPU's L2 flushed between bandwidth runs: a write over twice its size.
std::function<void()> l2_flush(Bench& b) {
#if defined(HG_WITH_CUDA)
  if (b.on_cuda()) {
    const int64_t l2 = hg::cuda::device_properties(b.device().index).l2CacheSize;
    auto buf = std::make_shared<Tensor>(
        hg::empty({std::max<int64_t>(2 * l2, 1 << 20)}, {.dtype = hg::kU8, .device = b.device()}));
    return [buf] { buf->zero_(); };
  }
#endif
  (void)b;
  return {};
}

// ---- ceilings ---------------------------------------------------------------

double measure_copy(Bench& b, const Workload& w) {
  const int64_t bytes = w.params["bytes"].get<int64_t>();
  Stats s;
  if (b.on_cuda()) {
    Tensor src = hg::empty({bytes}, {.dtype = hg::kU8, .device = b.device()});
    Tensor dst = hg::empty({bytes}, {.dtype = hg::kU8, .device = b.device()});
    src.zero_();
    s = b.time([&] { dst.copy_(src); }, {.inner = 1, .before = l2_flush(b), .runs = 0});
  } else {
    // memcpy split over the OpenMP threads: what the hardware gives a
    // multi-threaded kernel that streams through memory.
    std::vector<unsigned char> src(static_cast<size_t>(bytes), 1), dst(static_cast<size_t>(bytes));
    const int64_t chunk = int64_t{1} << 20;
    const int64_t chunks = (bytes + chunk - 1) / chunk;
    s = b.time([&] {
#pragma omp parallel for schedule(static)
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t off = c * chunk;
        std::memcpy(dst.data() + off, src.data() + off, static_cast<size_t>(std::min(chunk, bytes - off)));
      }
    });
  }
  const double gbps = 2.0 * static_cast<double>(bytes) / s.median_s * 1e-9;  // read + write
  b.emit(w, s, {{"bytes", 2.0 * static_cast<double>(bytes)}, {"gbps", gbps}},
         fmt("%.1f GB/s (read + write)", gbps));
  b.set_ceiling("copy_gbps", gbps);
  return gbps;
}

double gemm_tflops(const Stats& s, int64_t m, int64_t n, int64_t k) {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / s.median_s * 1e-12;
}

double measure_gemm_peak(Bench& b, const Workload& w) {
  const DType dt = parse_dtype(w.params["dtype"]);
  const int64_t n = w.params["m"].get<int64_t>();
  hg::NoGradGuard no_grad;
  Tensor a = randn_on(b, {n, n}, dt), c = randn_on(b, {n, n}, dt);
  const Stats s = b.time([&] { (void)hg::ops::matmul(a, c); });
  const double tf = gemm_tflops(s, n, n, n);
  b.emit(w, s, {{"tflops", tf}}, fmt("%.3f TFLOP/s", tf));
  return tf;
}

void add_gemm_peak(Bench& b, std::vector<Workload>& out, DType dt) {
  const int64_t n = b.on_cuda() ? 8192 : (b.quick() ? 1024 : 2048);
  Workload w{"ceilings", "ceilings/gemm-peak/" + dtype_str(dt) + "/" + std::to_string(n) + "^3",
             {{"kind", "gemm"}, {"dtype", dtype_str(dt)}, {"m", n}, {"n", n}, {"k", n}, {"trans_b", false}},
             {}};
  const std::string key = "gemm_" + dtype_str(dt);
  w.run = [key](Bench& bb, const Workload& self) { bb.set_ceiling(key, measure_gemm_peak(bb, self)); };
  Workload copy = w;
  b.define_ceiling(key, [&b, copy] { return measure_gemm_peak(b, copy); });
  out.push_back(std::move(w));
}

}  // namespace

void add_ceilings(Bench& b, std::vector<Workload>& out) {
  const int64_t copy_bytes = b.on_cuda() ? (int64_t{1} << 30) : 2 * stream_bytes(b);
  Workload copy{"ceilings", "ceilings/copy/" + std::to_string(copy_bytes >> 20) + "MiB",
                {{"kind", "copy"}, {"bytes", copy_bytes}},
                [](Bench& bb, const Workload& self) { (void)measure_copy(bb, self); }};
  b.define_ceiling("copy_gbps", [&b, copy] { return measure_copy(b, copy); });
  out.push_back(copy);
  for (DType dt : kFloatTypes) add_gemm_peak(b, out, dt);

  if (!b.on_cuda()) {
    // OpenBLAS sgemm called directly: what the f32 CPU GEMM could reach.
    const int64_t n = b.quick() ? 1024 : 2048;
    out.push_back({"ceilings", "ceilings/openblas-sgemm/" + std::to_string(n) + "^3",
                   {{"kind", "gemm"}, {"dtype", "f32"}, {"m", n}, {"n", n}, {"k", n}, {"trans_b", false}},
                   [n](Bench& bb, const Workload& self) {
                     std::vector<float> a(static_cast<size_t>(n * n), 0.5f), c(a), d(a);
                     const int ni = static_cast<int>(n);
                     const Stats s = bb.time([&] {
                       cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, a.data(),
                                   ni, c.data(), ni, 0.0f, d.data(), ni);
                     });
                     const double tf = gemm_tflops(s, n, n, n);
                     bb.emit(self, s, {{"tflops", tf}}, fmt("%.3f TFLOP/s (raw cblas_sgemm)", tf));
                   }});
  }

#if defined(HG_WITH_CUDA)
  if (hg::cuda::is_available()) {
    out.push_back({"ceilings", "ceilings/launch/empty-kernel", {{"kind", "empty_kernel"}},
                   [](Bench& bb, const Workload& self) {
                     // Always on the CUDA device, whatever --device says.
                     Options o = bb.options();
                     o.device = hg::Device::cuda(0);
                     o.json_path.clear();
                     Bench on_gpu(o);
                     const Stats s = on_gpu.time([] { launch_empty_kernels(1); }, {.inner = 1000, .before = {}, .runs = 0});
                     bb.emit(self, s, {{"us_per_launch", s.median_s * 1e6}},
                             fmt("%.2f us per launch (CUDA events, 1000 launches per run)", s.median_s * 1e6));
                   }});
  }
#endif
  out.push_back({"ceilings", "ceilings/launch/tiny-op-add-1", {{"kind", "tiny_op"}},
                 [](Bench& bb, const Workload& self) {
                   // One 1-element add through the whole stack: autograd wrapper,
                   // argument checks, dispatch, output allocation, kernel, free.
                   Tensor x = hg::ones({1}, {.device = bb.device()});
                   Tensor y = hg::ones({1}, {.device = bb.device()});
                   const Stats s = bb.time([&] { (void)hg::add(x, y); }, {.inner = 1000, .before = {}, .runs = 0});
                   bb.emit(self, s, {{"us_per_op", s.median_s * 1e6}},
                           fmt("%.2f us per op (1000 ops per run)", s.median_s * 1e6));
                 }});
}

// fp8 GEMM rows (ops::fp8_linear, Note [fp8 GEMM]): E4M3 x E4M3 with
// per-tensor device scales, fp32 accumulation, bf16 output, beside the bf16
// rows of add_gemm at 4096^3 and GPT-2 small's Linear shapes. On the CPU the
// fp8 GEMM is the reference path (exact widening, f32 sums): one small row,
// reported as such; on a GPU below compute capability 8.9 a note says why not.
void add_gemm_fp8(Bench& b, std::vector<Workload>& out) {
  std::vector<std::array<int64_t, 3>> shapes;  // m, n, k
  if (b.on_cuda()) {
    shapes = {{4096, 4096, 4096}, {16384, 768, 768}, {16384, 3072, 768}, {16384, 768, 3072}};
  } else {
    shapes = {{128, 768, 768}};
  }
  for (const auto& [m, n, k] : shapes) {
    const std::string name =
        "gemm/f8e4m3/" + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + "-nt";
    out.push_back(
        {"gemm",
         name,
         {{"kind", "gemm_fp8"}, {"dtype", "f8e4m3"}, {"out", "bf16"}, {"m", m}, {"n", n}, {"k", k}, {"trans_b", true}},
         [m, n, k](Bench& bb, const Workload& self) {
           if (!hg::amp::supported(bb.device(), hg::kF8E4M3)) {
             bb.emit_note(self, "skipped: fp8 GEMMs need compute capability 8.9+ (" +
                                    hg::amp::capability_report(bb.device()) + ")");
             return;
           }
           hg::NoGradGuard no_grad;
           const Tensor one = hg::ones({1}, {.device = bb.device()});
           const Tensor a = randn_on(bb, {m, k}, hg::kBF16).to(hg::kF8E4M3);
           const Tensor w = randn_on(bb, {n, k}, hg::kBF16).to(hg::kF8E4M3);
           const Stats st = bb.time([&] { (void)hg::ops::fp8_linear(a, w, one, one, hg::kBF16); });
           const double tf = gemm_tflops(st, m, n, k);
           nlohmann::json mt = {{"tflops", tf}};
           std::string text = fmt("%.3f TFLOP/s", tf);
           if (!bb.on_cuda()) text += " (CPU reference path: exact widening, then sgemm)";
           if (auto peak = bb.ceiling("gemm_bf16")) {
             mt["vs_bf16_peak"] = tf / *peak;
             text += fmt("  %.2fx the bf16 peak", tf / *peak);
           }
           bb.emit(self, st, mt, text);
         }});
  }
}

void add_gemm(Bench& b, std::vector<Workload>& out) {
  struct Shape3 {
    int64_t m, n, k;
    bool trans_b;
  };
  std::vector<Shape3> shapes;
  const std::vector<int64_t> squares =
      b.on_cuda() ? std::vector<int64_t>{1024, 4096, 8192}
                  : (b.quick() ? std::vector<int64_t>{256, 1024} : std::vector<int64_t>{512, 1024, 2048});
  for (int64_t s : squares) shapes.push_back({s, s, s, false});
  // GPT-2 small's Linear layers: x [M, K] @ W[N, K]^T. M = 16384 tokens on a
  // GPU; fewer rows on the CPU so that one call stays in seconds.
  // The LM head twice: GPT-2's 50257 columns (rows of 2-byte alignment) and
  // nanoGPT's padded 50304 (nn::GPT's default; a multiple of 64).
  // --quick on a CPU: 128 rows and no vocabulary-wide projection.
  const int64_t m = b.on_cuda() ? 16384 : (b.quick() ? 128 : 2048);
  for (auto [n, k] :
       std::vector<std::pair<int64_t, int64_t>>{{768, 768}, {3072, 768}, {768, 3072}, {50257, 768}, {50304, 768}}) {
    if (n >= 50257 && b.quick() && !b.on_cuda()) continue;
    shapes.push_back({m, n, k, true});
  }
  for (DType dt : kFloatTypes) {
    for (const Shape3& s : shapes) {
      const std::string name = "gemm/" + dtype_str(dt) + "/" + std::to_string(s.m) + "x" + std::to_string(s.n) +
                               "x" + std::to_string(s.k) + (s.trans_b ? "-nt" : "");
      out.push_back(
          {"gemm", name,
           {{"kind", "gemm"}, {"dtype", dtype_str(dt)}, {"m", s.m}, {"n", s.n}, {"k", s.k}, {"trans_b", s.trans_b}},
           [dt, s](Bench& bb, const Workload& self) {
             hg::NoGradGuard no_grad;
             Tensor a = randn_on(bb, {s.m, s.k}, dt);
             Tensor w = s.trans_b ? randn_on(bb, {s.n, s.k}, dt) : randn_on(bb, {s.k, s.n}, dt);
             const Stats st = bb.time([&] { (void)hg::ops::matmul(a, w, false, s.trans_b); });
             const double tf = gemm_tflops(st, s.m, s.n, s.k);
             nlohmann::json mt = {{"tflops", tf}};
             std::string text = fmt("%.3f TFLOP/s", tf);
             if (auto peak = bb.ceiling("gemm_" + dtype_str(dt))) {
               mt["fraction_of_peak"] = tf / *peak;
               text += fmt("  %.0f%% of peak", 100.0 * tf / *peak);
             }
             bb.emit(self, st, mt, text);
           }});
    }
  }
  add_gemm_fp8(b, out);
}

void add_bandwidth(Bench& b, std::vector<Workload>& out) {
  const int64_t n = stream_bytes(b) / 4;  // elements: one f32 buffer of stream_bytes
  const int64_t cols = 4096;
  const int64_t rows = n / cols;
  const std::string ns = std::to_string(n >> 20) + "Mi";

  // Casts.
  for (auto [from, to] : std::vector<std::pair<DType, DType>>{
           {hg::kF32, hg::kF16}, {hg::kF32, hg::kBF16}, {hg::kF16, hg::kF32}, {hg::kBF16, hg::kF32}}) {
    out.push_back({"bandwidth", "bandwidth/cast/" + dtype_str(from) + "->" + dtype_str(to) + "/" + ns,
                   {{"kind", "cast"}, {"from", dtype_str(from)}, {"to", dtype_str(to)}, {"n", n}},
                   [from, to, n](Bench& bb, const Workload& self) {
                     Tensor x = randn_on(bb, {n}, from);
                     const Stats s = bb.time([&] { (void)x.to(to); }, {.inner = 1, .before = l2_flush(bb), .runs = 0});
                     emit_bandwidth(bb, self, s, static_cast<double>(n) * static_cast<double>(
                                                     hg::dtype_size(from) + hg::dtype_size(to)));
                   }});
  }
  for (DType dt : kFloatTypes) {
    const std::string d = dtype_str(dt);
    const double es = static_cast<double>(hg::dtype_size(dt));
    const double nd = static_cast<double>(n);
    out.push_back({"bandwidth", "bandwidth/add/" + d + "/" + ns, {{"kind", "add"}, {"dtype", d}, {"n", n}},
                   [dt, n, es, nd](Bench& bb, const Workload& self) {
                     hg::NoGradGuard no_grad;
                     Tensor x = randn_on(bb, {n}, dt), y = randn_on(bb, {n}, dt);
                     const Stats s = bb.time([&] { (void)hg::ops::add(x, y); }, {.inner = 1, .before = l2_flush(bb), .runs = 0});
                     emit_bandwidth(bb, self, s, 3 * nd * es);
                   }});
    out.push_back({"bandwidth", "bandwidth/gelu/" + d + "/" + ns, {{"kind", "gelu"}, {"dtype", d}, {"n", n}},
                   [dt, n, es, nd](Bench& bb, const Workload& self) {
                     Tensor x = randn_on(bb, {n}, dt);
                     const Stats s = bb.time([&] { (void)hg::ops::gelu(x); }, {.inner = 1, .before = l2_flush(bb), .runs = 0});
                     emit_bandwidth(bb, self, s, 2 * nd * es);
                   }});
    for (const char* op : {"softmax", "log_softmax"}) {
      const std::string opname = op;
      out.push_back({"bandwidth", "bandwidth/" + opname + "/" + d + "/" + std::to_string(rows) + "x" + std::to_string(cols),
                     {{"kind", opname}, {"dtype", d}, {"rows", rows}, {"cols", cols}},
                     [dt, rows, cols, es, opname](Bench& bb, const Workload& self) {
                       Tensor x = randn_on(bb, {rows, cols}, dt);
                       const bool log = opname == "log_softmax";
                       const Stats s = bb.time([&] { (void)(log ? hg::ops::log_softmax(x) : hg::ops::softmax(x)); },
                                               {.inner = 1, .before = l2_flush(bb), .runs = 0});
                       emit_bandwidth(bb, self, s, 2.0 * static_cast<double>(rows * cols) * es);
                     }});
    }
    {
      const int64_t c = 32768, r = n / c;  // a GPT-sized vocabulary
      out.push_back({"bandwidth", "bandwidth/cross_entropy/" + d + "/" + std::to_string(r) + "x" + std::to_string(c),
                     {{"kind", "cross_entropy"}, {"dtype", d}, {"rows", r}, {"cols", c}},
                     [dt, r, c, es](Bench& bb, const Workload& self) {
                       Tensor logits = randn_on(bb, {r, c}, dt);
                       Tensor t = hg::arange(static_cast<double>(r), {.dtype = hg::kI64, .device = bb.device()});
                       const Stats s = bb.time([&] { (void)hg::ops::cross_entropy(logits, t); },
                                               {.inner = 1, .before = l2_flush(bb), .runs = 0});
                       emit_bandwidth(bb, self, s, static_cast<double>(r * c) * es);
                     }});
    }
    out.push_back({"bandwidth", "bandwidth/sum-all/" + d + "/" + ns, {{"kind", "sum_all"}, {"dtype", d}, {"n", n}},
                   [dt, n, es, nd](Bench& bb, const Workload& self) {
                     Tensor x = randn_on(bb, {n}, dt);
                     const Stats s = bb.time([&] { (void)hg::ops::sum(x); }, {.inner = 1, .before = l2_flush(bb), .runs = 0});
                     emit_bandwidth(bb, self, s, nd * es);
                   }});
    out.push_back({"bandwidth", "bandwidth/sum-rows/" + d + "/" + std::to_string(rows) + "x" + std::to_string(cols),
                   {{"kind", "sum_rows"}, {"dtype", d}, {"rows", rows}, {"cols", cols}},
                   [dt, rows, cols, es](Bench& bb, const Workload& self) {
                     Tensor x = randn_on(bb, {rows, cols}, dt);
                     const Stats s = bb.time([&] { (void)hg::ops::sum(x, {-1}); }, {.inner = 1, .before = l2_flush(bb), .runs = 0});
                     emit_bandwidth(bb, self, s, static_cast<double>(rows * cols) * es);
                   }});
  }
  // LayerNorm over a GPT-2-wide row (768), forward and backward (d_x,
  // d_weight, d_bias), with weight and bias in the activation dtype. Bytes:
  // forward reads x and writes y; backward reads d_y and x and writes d_x (the
  // [rows] statistics and the 768-wide parameters are under 0.2% of that).
  for (DType dt : kFloatTypes) {
    const std::string d = dtype_str(dt);
    const double es = static_cast<double>(hg::dtype_size(dt));
    const int64_t c = 768, r = n / c;
    const std::string shape = std::to_string(r) + "x" + std::to_string(c);
    for (const bool backward : {false, true}) {
      const std::string kind = backward ? "layer_norm_backward" : "layer_norm";
      out.push_back({"bandwidth",
                     "bandwidth/" + kind + "/" + d + "/" + shape,
                     {{"kind", kind}, {"dtype", d}, {"rows", r}, {"cols", c}},
                     [dt, r, c, es, backward](Bench& bb, const Workload& self) {
                       hg::NoGradGuard no_grad;
                       Tensor x = randn_on(bb, {r, c}, dt), w = randn_on(bb, {c}, dt), bias = randn_on(bb, {c}, dt);
                       const hg::ops::NormForward f = hg::ops::layer_norm(x, {c}, w, bias, 1e-5);
                       Tensor d_y = randn_on(bb, {r, c}, dt);
                       const Stats s = bb.time(
                           [&] {
                             if (backward) {
                               (void)hg::ops::layer_norm_backward(d_y, x, {c}, f.mean, f.rstd, w, {true, true, true});
                             } else {
                               (void)hg::ops::layer_norm(x, {c}, w, bias, 1e-5);
                             }
                           },
                           {.inner = 1, .before = l2_flush(bb), .runs = 0});
                       emit_bandwidth(bb, self, s, (backward ? 3.0 : 2.0) * static_cast<double>(r * c) * es);
                     }});
    }
  }
}

}  // namespace hgb
