// The optimizer and train-mlp suites of hg-bench.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amp/grad_scaler.h"
#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "benchmarks/suites.h"
#include "core/generator.h"
#include "core/tensor.h"
#include "nn/models/cnn.h"
#include "nn/layers.h"
#include "nn/models/gpt.h"
#include "optim/optimizer.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/runtime.h"
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

// Device-to-host copies plus host waits made through the CUDA runtime layer
// (Note [Host sync counter]); on the CPU nothing is asynchronous, so there is
// nothing to count and the result is empty.
std::optional<int64_t> host_syncs_now(const Bench& b) {
#if defined(HG_WITH_CUDA)
  if (b.on_cuda()) {
    const hg::cuda::HostSyncCounts c = hg::cuda::host_sync_counts();
    return c.device_to_host_copies + c.synchronizations;
  }
#endif
  (void)b;
  return std::nullopt;
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
  // f32, 16-bit weights with f32 masters, and f32 weights under a GradScaler
  // (unscale folded into the step, found-inf check, update): the AMP step;
  // and the same with an explicit scaler.unscale_(opt) first (the gradients
  // unscaled in place and checked, as before gradient clipping).
  struct Variant {
    DType dt;
    bool scaler, unscale;
  };
  for (Variant v : {Variant{hg::kF32, false, false}, Variant{hg::kBF16, false, false}, Variant{hg::kF16, false, false},
                    Variant{hg::kF32, true, false}, Variant{hg::kF32, true, true}}) {
    const DType dt = v.dt;
    const bool with_scaler = v.scaler, with_unscale = v.unscale;
    const std::string d = dtype_str(dt);
    const std::string variant = with_unscale     ? "f32+grad-scaler+unscale_"
                                : with_scaler    ? "f32+grad-scaler"
                                : dt == hg::kF32 ? "f32"
                                                 : d + "+f32-masters";
    nlohmann::json jparams = {
        {"kind", "adamw"}, {"dtype", d}, {"scaler", with_scaler}, {"shapes", jshapes}, {"numel", total}};
    if (with_unscale) jparams["unscale"] = true;
    out.push_back(
        {"optimizer", "optimizer/adamw/" + variant + "/" + count + "-params", jparams,
         [dt, with_scaler, with_unscale, shapes, total](Bench& bb, const Workload& self) {
           hg::Generator gen(1);
           std::vector<Tensor> params;
           for (const auto& s : shapes) {
             Tensor p = hg::randn(s, {.dtype = hg::kF32, .device = bb.device()}, &gen).to(dt);
             p.requires_grad_(true);
             p.set_grad(hg::randn(s, {.dtype = hg::kF32, .device = bb.device()}, &gen).to(dt));
             params.push_back(p);
           }
           hg::optim::AdamW opt(params, {.lr = 1e-4});
           // The scaler's growth interval is longer than any run, and the
           // random gradients are finite: every timed step is applied.
           hg::amp::GradScaler scaler({.init_scale = 1.0, .enabled = with_scaler});
           reset_peak(bb);
           auto step = [&] {
             if (!with_scaler) {
               opt.step();
               return;
             }
             if (with_unscale) scaler.unscale_(opt);
             scaler.step(opt);
             scaler.update();
           };
           const Stats s = bb.time(step);
           // Host syncs of one more step, counted outside the timer (which
           // itself waits on an event per timed run on a GPU).
           const std::optional<int64_t> syncs_before = host_syncs_now(bb);
           step();
           const std::optional<int64_t> syncs_after = host_syncs_now(bb);
           // Per parameter: read grad, master (or weight), m, v; write master, m,
           // v and, with masters, the 16-bit weight. 28 bytes either way.
           const double bytes = 28.0 * static_cast<double>(total);
           const double gbps = bytes / s.median_s * 1e-9;
           nlohmann::json m = {{"gbps", gbps}, {"bytes", bytes}, {"peak_bytes", peak_bytes(bb)}};
           if (syncs_before && syncs_after) {
             m["host_syncs"] = *syncs_after - *syncs_before;
           } else {
             m["host_syncs"] = "n/a (cpu: nothing is asynchronous)";
           }
           std::string text = fmt("%.1f GB/s effective", gbps);
           if (auto copy = bb.ceiling("copy_gbps")) {
             m["fraction_of_copy"] = gbps / *copy;
             text += fmt("  %.0f%% of copy", 100.0 * gbps / *copy);
           }
           if (syncs_before && syncs_after) {
             text += fmt("  %.0f host syncs per step", static_cast<double>(*syncs_after - *syncs_before));
           }
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
    // f32; 16-bit weights with f32 masters; AMP (f32 weights, autocast to
    // the 16-bit dtype, a GradScaler), as hg-train's --precision modes.
    struct Variant {
      DType dt;
      bool amp;
    };
    for (Variant v : {Variant{hg::kF32, false}, Variant{hg::kBF16, false}, Variant{hg::kF16, false},
                      Variant{hg::kBF16, true}, Variant{hg::kF16, true}}) {
      const DType dt = v.dt;
      const bool amp = v.amp;
      const std::string d = dtype_str(dt);
      const std::string variant = amp ? "amp-" + d : dt == hg::kF32 ? "f32" : d + "+f32-masters";
      out.push_back(
          {"train-mlp",
           "train-mlp/" + dims_str(c.dims) + "/b" + std::to_string(c.batch) + "/" + variant,
           {{"kind", "mlp"}, {"dtype", d}, {"amp", amp}, {"dims", c.dims}, {"batch", c.batch}},
           [c, dt, amp](Bench& bb, const Workload& self) {
             hg::Generator gen(7);
             Mlp m = make_mlp(c.dims, gen);
             m.net->to(bb.device());
             if (!amp) m.net->to(dt);
             hg::optim::AdamW opt(m.net->parameters(), {.lr = 1e-4});
             hg::amp::GradScaler scaler({.enabled = amp});
             const int64_t classes = c.dims.back();
             Tensor x = hg::randn({c.batch, c.dims.front()}, {.dtype = hg::kF32, .device = bb.device()}, &gen);
             if (!amp) x = x.to(dt);
             std::vector<int64_t> labels(static_cast<size_t>(c.batch));
             for (int64_t i = 0; i < c.batch; ++i) labels[static_cast<size_t>(i)] = (i * 7) % classes;
             Tensor y = hg::from_vector(labels, {c.batch}, {.dtype = hg::kI64, .device = bb.device()});
             reset_peak(bb);
             // One training step: zero_grad, forward, loss, backward, AdamW.
             // No .item(): nothing reads the loss back, as in a real loop.
             const Stats s = bb.time([&] {
               opt.zero_grad();
               if (!amp) {
                 Tensor loss = hg::cross_entropy(m.net->forward(x), y);
                 loss.backward();
                 opt.step();
                 return;
               }
               Tensor loss;
               {
                 hg::amp::Autocast autocast(dt);
                 loss = hg::cross_entropy(m.net->forward(x), y);
               }
               scaler.scale(loss).backward();
               scaler.step(opt);
               scaler.update();
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

// hg-train's CNN (nn/models/cnn.h): conv-BN-pool-ReLU x2 and a linear head
// on [B, 784] inputs, one training step as in train-mlp.
void add_train_cnn(Bench& b, std::vector<Workload>& out) {
  const std::vector<int64_t> batches = b.quick() ? std::vector<int64_t>{64} : std::vector<int64_t>{64, 256};
  struct Variant {
    DType dt;
    bool amp;
  };
  for (int64_t batch : batches) {
    for (Variant v :
         {Variant{hg::kF32, false}, Variant{hg::kBF16, false}, Variant{hg::kBF16, true}, Variant{hg::kF16, true}}) {
      const DType dt = v.dt;
      const bool amp = v.amp;
      const std::string d = dtype_str(dt);
      const std::string variant = amp ? "amp-" + d : dt == hg::kF32 ? "f32" : d + "+f32-masters";
      out.push_back({"train-cnn",
                     "train-cnn/hg-train-cnn/b" + std::to_string(batch) + "/" + variant,
                     {{"kind", "cnn"}, {"dtype", d}, {"amp", amp}, {"batch", batch}},
                     [batch, dt, amp](Bench& bb, const Workload& self) {
                       hg::Generator gen(7);
                       std::shared_ptr<hg::nn::Sequential> net = hg::nn::make_cnn(&gen);
                       net->to(bb.device());
                       if (!amp) net->to(dt);
                       hg::optim::AdamW opt(net->parameters(), {.lr = 1e-4});
                       hg::amp::GradScaler scaler({.enabled = amp});
                       Tensor x = hg::randn({batch, 784}, {.dtype = hg::kF32, .device = bb.device()}, &gen);
                       if (!amp) x = x.to(dt);
                       std::vector<int64_t> labels(static_cast<size_t>(batch));
                       for (int64_t i = 0; i < batch; ++i) labels[static_cast<size_t>(i)] = (i * 7) % 10;
                       Tensor y = hg::from_vector(labels, {batch}, {.dtype = hg::kI64, .device = bb.device()});
                       reset_peak(bb);
                       const Stats s = bb.time([&] {
                         opt.zero_grad();
                         Tensor loss;
                         {
                           hg::amp::Autocast autocast(amp ? dt : hg::kF16, amp);
                           loss = hg::cross_entropy(net->forward(x), y);
                         }
                         scaler.scale(loss).backward();
                         scaler.step(opt);
                         scaler.update();
                       });
                       const double steps = 1.0 / s.median_s;
                       const double samples = steps * static_cast<double>(batch);
                       const double peak = peak_bytes(bb);
                       bb.emit(self, s, {{"steps_per_s", steps}, {"samples_per_s", samples}, {"peak_bytes", peak}},
                               fmt("%.1f steps/s  ", steps) + fmt("%.0f samples/s  ", samples) +
                                   fmt("peak %.0f MiB", peak / 1048576.0) + (bb.on_cuda() ? "" : " RSS"));
                     }});
    }
  }
}

// The GPT (nn/models/gpt.h), one training step as in train-mlp: the
// character-level default of hg-train --model gpt (n_layer 4, n_head 4,
// n_embd 128, block 64, batch 12, vocab 65) everywhere, and GPT-2 124M
// (block 1024, batch 8 on a GPU; 128 tokens, batch 1 on a CPU, full runs
// only). The vocabulary is padded as nn::GPT does by default (50304 rows for
// GPT-2, 128 for the character model: the lm_head GEMMs get 16-byte aligned
// rows); on a GPU GPT-2 also runs unpadded (gpt2-124M-v50257), so both
// layouts are on record. Tokens/s and model TFLOP/s with the PaLM count: 6 N + 12 L T C per
// token (N non-embedding parameters, L layers, T tokens of context, C width).
void add_train_gpt(Bench& b, std::vector<Workload>& out) {
  struct Case {
    std::string name;
    hg::nn::GPTConfig config;
    int64_t batch, tokens;
  };
  std::vector<Case> cases = {
      {"char", {.n_layer = 4, .n_head = 4, .n_embd = 128, .block_size = 64, .vocab_size = 65}, 12, 64}};
  if (b.on_cuda()) {
    cases.push_back({"gpt2-124M", {}, 8, 1024});
    cases.push_back({"gpt2-124M-v50257", {.padded_vocab_size = 0}, 8, 1024});
  } else if (!b.quick()) {
    cases.push_back({"gpt2-124M", {}, 1, 128});
  }
  struct Variant {
    DType dt;
    bool amp;
  };
  for (const Case& c : cases) {
    for (Variant v : {Variant{hg::kF32, false}, Variant{hg::kBF16, true}, Variant{hg::kF16, true}}) {
      const DType dt = v.dt;
      const bool amp = v.amp;
      const std::string d = dtype_str(dt);
      const std::string variant = amp ? "amp-" + d : "f32";
      out.push_back(
          {"train-gpt",
           "train-gpt/" + c.name + "/b" + std::to_string(c.batch) + "x" + std::to_string(c.tokens) + "/" + variant,
           {{"kind", "gpt"},
            {"dtype", d},
            {"amp", amp},
            {"n_layer", c.config.n_layer},
            {"n_head", c.config.n_head},
            {"n_embd", c.config.n_embd},
            {"block_size", c.config.block_size},
            {"vocab_size", c.config.vocab_size},
            {"padded_vocab_size", c.config.padded_vocab()},
            {"batch", c.batch},
            {"tokens", c.tokens}},
           [c, dt, amp](Bench& bb, const Workload& self) {
             hg::Generator gen(7);
             auto model = std::make_shared<hg::nn::GPT>(c.config, &gen);
             model->to(bb.device());
             auto opt = model->configure_optimizers(0.1, 1e-4, 0.9, 0.95);
             hg::amp::GradScaler scaler({.enabled = amp && dt == hg::kF16});
             const Tensor idx = (hg::rand({c.batch, c.tokens + 1}, {.device = bb.device()}, &gen) *
                                 static_cast<double>(c.config.vocab_size))
                                    .to(hg::kI64);
             const Tensor x = hg::narrow(idx, 1, 0, c.tokens).contiguous();
             const Tensor y = hg::narrow(idx, 1, 1, c.tokens).contiguous();
             reset_peak(bb);
             const Stats s = bb.time([&] {
               opt->zero_grad();
               Tensor loss;
               {
                 hg::amp::Autocast autocast(amp ? dt : hg::kBF16, amp);
                 loss = model->loss(x, y);
               }
               scaler.scale(loss).backward();
               scaler.step(*opt);
               scaler.update();
             });
             const double tokens = static_cast<double>(c.batch * c.tokens) / s.median_s;
             const double flops_per_token = 6.0 * static_cast<double>(model->num_params(true)) +
                                            12.0 * static_cast<double>(c.config.n_layer * c.tokens * c.config.n_embd);
             const double tflops = tokens * flops_per_token / 1e12;
             const double peak = peak_bytes(bb);
             bb.emit(self, s, {{"tokens_per_s", tokens}, {"model_tflops", tflops}, {"peak_bytes", peak}},
                     fmt("%.0f tokens/s  ", tokens) + fmt("%.3f model TFLOP/s  ", tflops) +
                         fmt("peak %.0f MiB", peak / 1048576.0) + (bb.on_cuda() ? "" : " RSS"));
           }});
    }
  }
}

}  // namespace hgb
