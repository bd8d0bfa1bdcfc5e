// The optimizer and train-mlp suites of hg-bench.
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "benchmarks/suites.h"
#include "core/generator.h"
#include "core/tensor.h"
#include "nn/layers.h"
#include "optim/optimizer.h"

#if defined(HG_WITH_CUDA)
#include "kernels/cuda/caching_allocator.h"
#endif

namespace hgb {
namespace {

using hg::DType;
using hg::Tensor;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// GPT-2 small's parameter shapes (124,439,808 parameters with n_layer = 12,
// vocab = 50257); --quick keeps the shapes but 1 layer and a 2048 vocab (9.4M).
std::vector<hg::Shape> gpt2_param_shapes(int64_t n_layer, int64_t vocab) {
  const int64_t d = 768, ctx = 1024;
  std::vector<hg::Shape> s = {{vocab, d}, {ctx, d}};
  for (int64_t l = 0; l < n_layer; ++l) {
    for (const hg::Shape& p : std::vector<hg::Shape>{{d}, {d}, {3 * d, d}, {3 * d}, {d, d}, {d}, {d}, {d},
                                                     {4 * d, d}, {4 * d}, {d, 4 * d}, {d}}) {
      s.push_back(p);
    }
  }
  s.push_back({d});
  s.push_back({d});
  return s;
}

// Peak memory during a workload: the CUDA caching allocator's peak on a GPU,
// the process's peak resident set (VmHWM, reset through clear_refs) on the CPU.
void reset_peak(const Bench& b) {
#if defined(HG_WITH_CUDA)
  if (b.on_cuda()) {
    hg::cuda::reset_peak_memory_stats(b.device().index);
    return;
  }
#endif
  (void)b;
  std::ofstream("/proc/self/clear_refs") << "5";
}

double peak_bytes(const Bench& b) {
#if defined(HG_WITH_CUDA)
  if (b.on_cuda()) return static_cast<double>(hg::cuda::memory_stats(b.device().index).peak_allocated_bytes);
#endif
  (void)b;
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) * 1024.0;  // kB
  }
  return 0.0;
}

struct Mlp {
  std::shared_ptr<hg::nn::Sequential> net;
  std::vector<int64_t> dims;
};

Mlp make_mlp(const std::vector<int64_t>& dims, hg::Generator& gen) {
  Mlp m{std::make_shared<hg::nn::Sequential>(), dims};
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    m.net->push_back(std::make_shared<hg::nn::Linear>(dims[i], dims[i + 1], true, &gen));
    if (i + 2 < dims.size()) m.net->push_back(std::make_shared<hg::nn::ReLU>());
  }
  return m;
}

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "-" : "") + std::to_string(dims[i]);
  return s;
}

}  // namespace

void add_optimizer(Bench& b, std::vector<Workload>& out) {
  const int64_t layers = b.quick() ? 1 : 12, vocab = b.quick() ? 2048 : 50257;
  const std::vector<hg::Shape> shapes = gpt2_param_shapes(layers, vocab);
  int64_t total = 0;
  for (const auto& s : shapes) total += hg::numel_of(s);
  nlohmann::json jshapes = nlohmann::json::array();
  for (const auto& s : shapes) jshapes.push_back(s);
  const std::string count = fmt("%.1fM", static_cast<double>(total) / 1e6);
  for (DType dt : {hg::kF32, hg::kBF16, hg::kF16}) {
    const std::string d = dtype_str(dt);
    const std::string variant = dt == hg::kF32 ? "f32" : d + "+f32-masters";
    out.push_back(
        {"optimizer", "optimizer/adamw/" + variant + "/" + count + "-params",
         {{"kind", "adamw"}, {"dtype", d}, {"shapes", jshapes}, {"numel", total}},
         [dt, shapes, total](Bench& bb, const Workload& self) {
           hg::Generator gen(1);
           std::vector<Tensor> params;
           for (const auto& s : shapes) {
             Tensor p = hg::randn(s, {.dtype = hg::kF32, .device = bb.device()}, &gen).to(dt);
             p.requires_grad_(true);
             p.set_grad(hg::randn(s, {.dtype = hg::kF32, .device = bb.device()}, &gen).to(dt));
             params.push_back(p);
           }
           hg::optim::AdamW opt(params, {.lr = 1e-4});
           reset_peak(bb);
           const Stats s = bb.time([&] { opt.step(); });
           // Per parameter: read grad, master (or weight), m, v; write master, m,
           // v and, with masters, the 16-bit weight. 28 bytes either way.
           const double bytes = 28.0 * static_cast<double>(total);
           const double gbps = bytes / s.median_s * 1e-9;
           nlohmann::json m = {{"gbps", gbps},
                               {"bytes", bytes},
                               {"host_syncs", "n/a"},
                               {"peak_bytes", peak_bytes(bb)}};
           std::string text = fmt("%.1f GB/s effective", gbps);
           if (auto copy = bb.ceiling("copy_gbps")) {
             m["fraction_of_copy"] = gbps / *copy;
             text += fmt("  %.0f%% of copy", 100.0 * gbps / *copy);
           }
           text += "  host syncs n/a (no sync counter in the runtime yet)";
           bb.emit(self, s, m, text);
         }});
  }
}

void add_train_mlp(Bench& b, std::vector<Workload>& out) {
  struct Case {
    std::vector<int64_t> dims;
    int64_t batch;
  };
  std::vector<Case> cases = {{{784, 512, 512, 10}, 64}, {{784, 512, 512, 10}, 256}};
  // The compute-bound case: 4 Linear layers of 4096 (batch 1024 on a CPU,
  // 8192 on a GPU); --quick on a CPU shrinks it to 1024 wide, batch 256.
  if (b.on_cuda()) {
    cases.push_back({{4096, 4096, 4096, 4096, 4096}, 8192});
  } else if (b.quick()) {
    cases.push_back({{1024, 1024, 1024, 1024, 1024}, 256});
  } else {
    cases.push_back({{4096, 4096, 4096, 4096, 4096}, 1024});
  }
  for (const Case& c : cases) {
    for (DType dt : {hg::kF32, hg::kBF16, hg::kF16}) {
      const std::string d = dtype_str(dt);
      const std::string variant = dt == hg::kF32 ? "f32" : d + "+f32-masters";
      out.push_back(
          {"train-mlp", "train-mlp/" + dims_str(c.dims) + "/b" + std::to_string(c.batch) + "/" + variant,
           {{"kind", "mlp"}, {"dtype", d}, {"dims", c.dims}, {"batch", c.batch}},
           [c, dt](Bench& bb, const Workload& self) {
             hg::Generator gen(7);
             Mlp m = make_mlp(c.dims, gen);
             m.net->to(bb.device());
             m.net->to(dt);
             hg::optim::AdamW opt(m.net->parameters(), {.lr = 1e-4});
             const int64_t classes = c.dims.back();
             Tensor x = hg::randn({c.batch, c.dims.front()}, {.dtype = hg::kF32, .device = bb.device()}, &gen).to(dt);
             std::vector<int64_t> labels(static_cast<size_t>(c.batch));
             for (int64_t i = 0; i < c.batch; ++i) labels[static_cast<size_t>(i)] = (i * 7) % classes;
             Tensor y = hg::from_vector(labels, {c.batch}, {.dtype = hg::kI64, .device = bb.device()});
             reset_peak(bb);
             // One training step: zero_grad, forward, loss, backward, AdamW.
             // No .item(): nothing reads the loss back, as in a real loop.
             const Stats s = bb.time([&] {
               opt.zero_grad();
               Tensor loss = hg::cross_entropy(m.net->forward(x), y);
               loss.backward();
               opt.step();
             });
             const double steps = 1.0 / s.median_s;
             const double samples = steps * static_cast<double>(c.batch);
             const double peak = peak_bytes(bb);
             bb.emit(self, s, {{"steps_per_s", steps}, {"samples_per_s", samples}, {"peak_bytes", peak}},
                     fmt("%.1f steps/s  ", steps) + fmt("%.0f samples/s  ", samples) +
                         fmt("peak %.0f MiB", peak / 1048576.0) + (bb.on_cuda() ? "" : " RSS"));
           }});
    }
  }
}

}  // namespace hgb
