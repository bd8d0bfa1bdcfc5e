// The attention suite of hg-bench: the flash path of
// scaled_dot_product_attention (kernels/attention/flash_attention.h), forward and
// forward+backward, in TFLOP/s and as a fraction of the GEMM-peak ceiling of
// the same dtype; on a GPU the cuDNN path (kernels/attention/attention_cudnn.h: cuDNN's
// fused forward and backward graphs) beside each flash row, named
// ".../cudnn", so one run compares the two (a shape cuDNN cannot run reports
// the reason and is skipped).
//
// FLOPs, the FlashAttention-2 paper's convention (docs/benchmarks.md):
//   forward           4 B H L S D        (Q K^T and P V, 2 FLOPs per multiply-add)
//                     halved when causal (half of the score matrix is computed)
//   backward          2.5 x forward      (5 GEMMs against the forward's 2; the
//                                         recomputation of S counts as work)
//   forward+backward  3.5 x forward
// Softmax, exp and the row statistics are not counted.
//
// Shapes: on a GPU, GPT-2 small's (B 8, H 12, T 1024, D 64, causal), the
// FlashAttention-2 paper's at T 1024 (16k tokens, hidden 2048: B 16, H 32,
// D 64, causal; 512 heads of work against GPT-2's 96, so its grid fills the
// GPU in more waves: the shape the paper's published TFLOP/s refer to), a head
// dim 128 one (B 4, H 8, T 2048) and a long one (B 1, H 16, T 8192, D 64),
// in bf16 and f16; --quick keeps the bf16 forward and forward+backward of the
// first two and the D 128 bf16 forward. On a CPU the CPU flash path (the kernels'
// oracle) at small shapes in f32 and bf16.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "benchmarks/suites.h"
#include "core/tensor.h"
#include "kernels/attention/attention_cudnn.h"
#include "kernels/attention/flash_attention.h"

namespace hgb {
namespace {

using hg::DType;
using hg::Tensor;

struct AttnShape {
  int64_t b, h, t, d;
  bool causal;
};

std::string shape_name(const AttnShape& s) {
  return "b" + std::to_string(s.b) + "h" + std::to_string(s.h) + "t" + std::to_string(s.t) + "d" + std::to_string(s.d) +
         (s.causal ? "-causal" : "");
}

// The forward's FLOPs (see the top of this file); L = S = T.
double forward_flops(const AttnShape& s) {
  const double f = 4.0 * static_cast<double>(s.b) * static_cast<double>(s.h) * static_cast<double>(s.t) *
                   static_cast<double>(s.t) * static_cast<double>(s.d);
  return s.causal ? f / 2 : f;
}

void add_one(std::vector<Workload>& out, DType dt, const AttnShape& s, bool backward, bool cudnn) {
  const std::string name = "attention/" + dtype_str(dt) + "/" + shape_name(s) + "/" +
                           (backward ? "forward+backward" : "forward") + (cudnn ? "/cudnn" : "");
  out.push_back({"attention",
                 name,
                 {{"kind", "attention"},
                  {"dtype", dtype_str(dt)},
                  {"b", s.b},
                  {"h", s.h},
                  {"t", s.t},
                  {"d", s.d},
                  {"causal", s.causal},
                  {"backward", backward},
                  {"path", cudnn ? "cudnn" : "flash"}},
                 [dt, s, backward, cudnn](Bench& bb, const Workload& self) {
                   hg::NoGradGuard no_grad;
                   const hg::TensorOptions f32{.dtype = hg::kF32, .device = bb.device()};
                   Tensor q = hg::randn({s.b, s.h, s.t, s.d}, f32).to(dt);
                   Tensor k = hg::randn({s.b, s.h, s.t, s.d}, f32).to(dt);
                   Tensor v = hg::randn({s.b, s.h, s.t, s.d}, f32).to(dt);
                   Tensor d_out = hg::randn({s.b, s.h, s.t, s.d}, f32).to(dt);
                   const std::string why =
                       cudnn ? hg::ops::cudnn_attention_unsupported_reason(q, k, v, false, 0.0) : std::string();
                   HG_CHECK(why.empty(), "hg-bench attention: the cudnn path does not apply to ", self.name, ": ", why);
                   HG_CHECK(hg::ops::flash_attention_supported(q, k, v, false, 0.0),
                            "hg-bench attention: the flash path ", "does not apply to ", self.name);
                   const double scale = 1.0 / std::sqrt(static_cast<double>(s.d));
                   const Stats st = bb.time([&] {
                     hg::ops::FlashForward f = cudnn ? hg::ops::cudnn_attention_forward(q, k, v, scale, s.causal)
                                                     : hg::ops::flash_attention_forward(q, k, v, scale, s.causal);
                     if (backward && cudnn)
                       (void)hg::ops::cudnn_attention_backward(d_out, q, k, v, f.out, f.lse, scale, s.causal);
                     else if (backward)
                       (void)hg::ops::flash_attention_backward(d_out, q, k, v, f.out, f.lse, scale, s.causal);
                   });
                   const double flops = forward_flops(s) * (backward ? 3.5 : 1.0);
                   const double tf = flops / st.median_s * 1e-12;
                   nlohmann::json mt = {{"tflops", tf}, {"flops", flops}};
                   char buf[96];
                   std::snprintf(buf, sizeof buf, "%.4g TFLOP/s", tf);
                   std::string text = buf;
                   if (auto peak = bb.ceiling("gemm_" + dtype_str(dt))) {
                     mt["fraction_of_peak"] = tf / *peak;
                     std::snprintf(buf, sizeof buf, "  %.0f%% of peak", 100.0 * tf / *peak);
                     text += buf;
                   }
                   bb.emit(self, st, mt, text);
                 }});
}

}  // namespace

void add_attention(Bench& b, std::vector<Workload>& out) {
  // Each shape with whether --quick keeps its forward and its forward+backward
  // (in the first dtype listed only).
  struct Row {
    AttnShape shape;
    bool quick_forward, quick_backward;
  };
  const bool gpu = b.on_cuda();
  const std::vector<Row> rows = gpu ? std::vector<Row>{{{8, 12, 1024, 64, true}, true, true},   // GPT-2 small
                                                       {{16, 32, 1024, 64, true}, true, true},  // FA2 paper, 16k tokens
                                                       {{4, 8, 2048, 128, true}, true, false},  // head dim 128
                                                       {{1, 16, 8192, 64, true}, false, false}}  // long
                                    // CPU: the CPU flash path at shapes that keep one call well under a second.
                                    : std::vector<Row>{{{1, 4, 256, 64, true}, true, true},
                                                       {{1, 2, 256, 128, true}, true, false},
                                                       {{1, 2, 1024, 64, true}, false, false}};
  const std::vector<DType> dtypes =
      gpu ? std::vector<DType>{hg::kBF16, hg::kF16} : std::vector<DType>{hg::kF32, hg::kBF16};
  for (DType dt : dtypes) {
    for (const Row& r : rows) {
      for (bool backward : {false, true}) {
        const bool in_quick = dt == dtypes.front() && (backward ? r.quick_backward : r.quick_forward);
        if (b.quick() && !in_quick) continue;
        add_one(out, dt, r.shape, backward, false);
        if (gpu) add_one(out, dt, r.shape, backward, true);  // cuDNN's forward beside flash's
      }
    }
  }
}

}  // namespace hgb
