// Semantic fuzzing of training state: the input is not file bytes but a list
// of value mutations applied to a valid checkpoint (a small MLP, AdamW and a
// GradScaler after a few steps), so every mutated file passes the format's
// structural rules (and its integrity hash: it is re-saved) and reaches the
// value rules (Note [Training-state rules] in optim/state_check.h) through
// the library's load path, load_training_checkpoint + GradScaler::
// load_state_dict. Outcomes checked:
//   refused  an hg::Error that names the file and says "corrupt or foreign
//            checkpoint", and the model, optimizer and scaler bit-identical;
//   accepted the loaded values satisfy the rules (checked here independently
//            of state_check.cpp), and two more training steps run without a
//            sanitizer report and leave the counters in range.
// Input: records of 12 bytes: tensor selector, value kind, element (u16),
// payload (8 bytes); at most 8 records.
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "amp/grad_scaler.h"
#include "autograd/functions.h"
#include "core/counters.h"
#include "core/error.h"
#include "kernels/amp_scale/amp_scale.h"
#include "nn/layers.h"
#include "nn/serialize.h"
#include "optim/checkpoint.h"
#include "tests/fuzz/fuzz.h"

namespace hg::fuzz {
namespace {

struct Setup {
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<optim::AdamW> opt;
  std::unique_ptr<amp::GradScaler> scaler;
};

Tensor batch() { return from_vector(std::vector<float>{0.5f, -1.f, 2.f, 0.25f, 1.f, 0.f, -0.5f, 1.5f}, {2, 4}); }

void train_step(Setup& s) {
  s.opt->zero_grad();
  const Tensor y = s.model->forward(batch());
  s.scaler->scale(sum(mul(y, y))).backward();
  s.scaler->step(*s.opt);
  s.scaler->update();
}

Setup make_setup(int steps) {
  Generator gen(3);
  Setup s;
  s.model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 3, true, &gen), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(3, 2, true, &gen)});
  s.opt = std::make_unique<optim::AdamW>(s.model->parameters(), optim::AdamWOptions{.lr = 1e-3});
  s.scaler = std::make_unique<amp::GradScaler>(amp::GradScalerOptions{}.set_init_scale(512.0).set_growth_interval(2));
  for (int i = 0; i < steps; ++i) train_step(s);
  return s;
}

std::vector<std::pair<std::string, std::string>> snapshot(const Setup& s) {
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](const std::string& name, const Tensor& t) {
    const Tensor c = t.cpu().contiguous();
    out.emplace_back(name, std::string(static_cast<const char*>(c.data_ptr()), c.nbytes()));
  };
  for (const auto& [name, t] : s.model->state_dict()) add("model." + name, t);
  for (const auto& [name, t] : s.opt->state_dict()) add("optim." + name, t);
  for (const auto& [name, t] : s.scaler->state_dict()) add("scaler." + name, t);
  return out;
}

// The file each input is written to: a real file (the writer renames a temp
// file over it), one per process, removed at exit.
const std::string& state_path() {
  struct File {
    std::string path = "/tmp/hg_fuzz_state_" + std::to_string(::getpid()) + ".safetensors";
    ~File() { std::remove(path.c_str()); }
  };
  static const File file;
  return file.path;
}

// The valid checkpoint every input mutates (built once per process).
const nn::SafetensorsFile& base() {
  static const nn::SafetensorsFile file = [] {
    Setup s = make_setup(5);
    const std::string& path = state_path();
    optim::save_training_checkpoint(path, *s.model, *s.opt, {.global_step = 5}, s.scaler->state_dict());
    return nn::load_safetensors(path);
  }();
  return file;
}

double special_double(uint8_t k, uint64_t payload) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const double table[] = {kInf,   -kInf, std::nan(""), 0.0, -0.0,    -1.0,       1e-45,      1e-300,
                          3.5e38, 1e30,  0.5,          2.0, 65536.0, 16777216.0, 33554432.0, -1e-3};
  if (k < std::size(table)) return table[k];
  return std::bit_cast<double>(payload);
}

int64_t special_int(uint8_t k, uint64_t payload) {
  const int64_t table[] = {std::numeric_limits<int64_t>::min(),
                           std::numeric_limits<int64_t>::max(),
                           -1,
                           0,
                           1,
                           2,
                           kCounterLimit,
                           kCounterLimit - 1,
                           1 << 24,
                           2000,
                           4,
                           5};
  if (k < std::size(table)) return table[k];
  return static_cast<int64_t>(payload % 64) - 8;  // small values near the real ones
}

void mutate(Tensor& t, uint8_t kind, uint16_t element, uint64_t payload) {
  if (t.numel() == 0) return;
  const int64_t i = element % t.numel();
  if (t.dtype() == kI64) {
    std::vector<int64_t> v = t.to_vector<int64_t>();
    v[static_cast<size_t>(i)] = special_int(kind % 16, payload);
    t = from_vector(v, t.sizes());
  } else if (t.dtype() == kF32 && kind >= 0x80) {
    // Raw f32 bits (every NaN payload, every denormal).
    std::vector<float> v = t.to_vector<float>();
    v[static_cast<size_t>(i)] = std::bit_cast<float>(static_cast<uint32_t>(payload));
    t = from_vector(v, t.sizes());
  } else {
    std::vector<double> v = t.to(kF64).to_vector<double>();
    v[static_cast<size_t>(i)] = special_double(kind % 20, payload);
    t = from_vector(v, t.sizes()).to(t.dtype());
  }
}

std::vector<int64_t> scaler_counters(const Setup& s) {
  for (const auto& [name, t] : s.scaler->state_dict()) {
    if (name == "state") return t.to_vector<int64_t>();
  }
  finding("the scaler's state_dict has no 'state'");
}

bool all_finite(const Tensor& t) {
  if (!is_floating(t.dtype())) return true;
  for (double x : t.to(kF64).to_vector<double>()) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

// The rules, restated from Note [Training-state rules] without its code.
void check_accepted(const Setup& s) {
  for (const auto& [name, t] : s.model->state_dict()) {
    if (!all_finite(t)) finding("accepted a non-finite model tensor " + name);
  }
  for (const auto& [name, t] : s.opt->state_dict()) {
    if (name.rfind("step.", 0) == 0) {
      const int64_t v = t.item<int64_t>();
      if (v < 0 || v >= kCounterLimit) finding("accepted an optimizer step of " + std::to_string(v));
      continue;
    }
    if (!all_finite(t)) finding("accepted a non-finite optimizer tensor " + name);
    if (name.rfind("state2.", 0) == 0) {
      for (double x : t.to(kF64).to_vector<double>()) {
        if (x < 0) finding("accepted a negative second moment in " + name);
      }
    }
  }
  // The scaler through state_dict (stats() raises on a collapsed scale).
  const amp::GradScalerOptions& o = s.scaler->options();
  const std::vector<int64_t> state = scaler_counters(s);
  const float scale = std::bit_cast<float>(static_cast<uint32_t>(state[kAmpScaleBits]));
  if (!(std::isfinite(scale) && scale > 0 && scale >= static_cast<float>(o.min_scale) &&
        scale <= static_cast<float>(o.max_scale))) {
    finding("accepted a loss scale of " + std::to_string(scale));
  }
  if (!(o.init_scale >= o.min_scale && o.init_scale <= o.max_scale)) finding("accepted init_scale out of range");
  for (int slot : {kAmpGrowthTracker, kAmpIteration, kAmpApplied, kAmpSkipped, kAmpOverflowsInRow,
                   kAmpMinScaleOverflows, kAmpLastOverflow}) {
    if (state[slot] < 0 || state[slot] >= kCounterLimit) {
      finding("accepted a scaler counter of " + std::to_string(state[slot]));
    }
  }
  if (state[kAmpGrowthTracker] >= o.growth_interval) finding("accepted a growth tracker past growth_interval");
  if (state[kAmpApplied] + state[kAmpSkipped] != state[kAmpIteration]) {
    finding("accepted inconsistent scaler counters");
  }
}

}  // namespace

int fuzz_state(const uint8_t* data, size_t size) {
  nn::SafetensorsFile file = base();
  const size_t records = std::min<size_t>(size / 12, 8);
  for (size_t r = 0; r < records; ++r) {
    const uint8_t* p = data + 12 * r;
    uint16_t element;
    uint64_t payload;
    std::memcpy(&element, p + 2, 2);
    std::memcpy(&payload, p + 4, 8);
    auto& entry = file.tensors[p[0] % file.tensors.size()];
    mutate(entry.second, p[1], element, payload);
  }
  const std::string& path = state_path();
  nn::save_safetensors(path, file.tensors, file.metadata);

  Setup s = make_setup(2);
  const auto before = snapshot(s);
  try {
    optim::NamedTensors scaler_state;
    optim::load_training_checkpoint(path, *s.model, *s.opt, &scaler_state);
    s.scaler->load_state_dict(scaler_state);
  } catch (const Error& e) {
    if (snapshot(s) != before) finding("a refused state changed the model, the optimizer or the scaler");
    const std::string m = e.message();
    if (m.find("corrupt or foreign checkpoint") == std::string::npos || m.find(path) == std::string::npos) {
      finding("a refusal that does not name the file or say it is corrupt: " + m);
    }
    return 0;
  }
  check_accepted(s);
  const int64_t iterations = scaler_counters(s)[kAmpIteration];
  for (int i = 0; i < 2; ++i) {
    try {
      train_step(s);
    } catch (const Error&) {
      return 0;  // e.g. the collapse error of a scaler loaded at min_scale: a refusal, not UB
    }
  }
  const std::vector<int64_t> after = scaler_counters(s);
  if (after[kAmpIteration] != std::min(iterations + 2, kCounterLimit)) {
    finding("the scaler's iteration count did not advance by 2");
  }
  for (int64_t c : after) {
    if (c < 0) finding("training made a scaler counter negative: " + std::to_string(c));
  }
  return 0;
}

}  // namespace hg::fuzz
