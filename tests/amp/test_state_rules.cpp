// Training-state rules (Note [Training-state rules] in optim/state_check.h):
// a valid checkpoint with one tensor value made impossible is refused by
// load_training_checkpoint with the file, the key and the rule, before the
// model, the optimizer or the scaler changes; the in-memory loaders
// (Optimizer/GradScaler/Module::load_state_dict) refuse the same states;
// and the device counters saturate instead of overflowing.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "amp/grad_scaler.h"
#include "autograd/functions.h"
#include "core/counters.h"
#include "kernels/amp_scale/amp_scale.h"
#include "kernels/optimizer/optimizer.h"
#include "nn/layers.h"
#include "nn/serialize.h"
#include "optim/checkpoint.h"
#include "optim/state_check.h"
#include "tests/test_files.h"

using namespace hg;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

// A small model trained `steps` steps under a GradScaler (growth_interval 2,
// so the tracker and the scale move), checkpointed with the scaler.
struct Trained {
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<optim::AdamW> opt;
  amp::GradScaler scaler{amp::GradScalerOptions{}.set_init_scale(256.0).set_growth_interval(3)};

  explicit Trained(int steps) {
    Generator gen(7);
    model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(4, 3, true, &gen), std::make_shared<nn::GELU>(),
        std::make_shared<nn::Linear>(3, 2, true, &gen)});
    opt = std::make_unique<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = 1e-2});
    const Tensor x = from_vector(std::vector<float>{0.5f, -1.f, 2.f, 0.25f, 1.f, 0.f, -0.5f, 1.5f}, {2, 4});
    for (int s = 0; s < steps; ++s) {
      opt->zero_grad();
      scaler.scale(sum(mul(model->forward(x), model->forward(x)))).backward();
      scaler.step(*opt);
      scaler.update();
    }
  }

  std::vector<std::vector<double>> snapshot() const {
    std::vector<std::vector<double>> out;
    for (const auto& [name, t] : model->state_dict()) out.push_back(t.to_vector<double>());
    for (const auto& [name, t] : opt->state_dict()) out.push_back(t.to(kF64).to_vector<double>());
    return out;
  }
};

// Writes a copy of `src` with tensor `key` replaced by edit(tensor).
std::string mutated(const std::string& src, const std::string& dst, const std::string& key,
                    const std::function<Tensor(const Tensor&)>& edit) {
  nn::SafetensorsFile f = nn::load_safetensors(src);
  bool found = false;
  for (auto& [name, t] : f.tensors) {
    if (name == key) {
      t = edit(t);
      found = true;
    }
  }
  REQUIRE(found);
  nn::save_safetensors(dst, f.tensors, f.metadata);
  return dst;
}

Tensor set_f64(const Tensor& t, int64_t index, double value) {
  std::vector<double> v = t.to(kF64).to_vector<double>();
  v[static_cast<size_t>(index)] = value;
  return from_vector(v, t.sizes()).to(t.dtype());
}

Tensor set_i64(const Tensor& t, int64_t index, int64_t value) {
  std::vector<int64_t> v = t.to_vector<int64_t>();
  v[static_cast<size_t>(index)] = value;
  return from_vector(v, t.sizes());
}

// Loading `path` into a fresh trained run throws naming file, key and rule,
// and the run is unchanged.
void expect_refused(const std::string& path, const std::string& key, const std::string& rule_part) {
  Trained run(2);
  const auto before = run.snapshot();
  const auto scaler_before = run.scaler.state_dict();
  optim::NamedTensors scaler_state;
  try {
    optim::load_training_checkpoint(path, *run.model, *run.opt, &scaler_state);
    FAIL("loaded " << path << " with a bad '" << key << "'");
  } catch (const Error& e) {
    const std::string m = e.message();
    INFO(m);
    CHECK(m.find(path) != std::string::npos);
    CHECK(m.find("'" + key + "'") != std::string::npos);
    CHECK(m.find("rule: ") != std::string::npos);
    CHECK(m.find(rule_part) != std::string::npos);
    CHECK(m.find("corrupt or foreign checkpoint, not a diverged run") != std::string::npos);
    CHECK(m.find("--lr") == std::string::npos);
  }
  CHECK(run.snapshot() == before);
  CHECK(scaler_state.empty());
}

}  // namespace

TEST_CASE("state rules: a valid checkpoint with a scaler round-trips", "[amp][state_rules]") {
  test::TempDir dir;
  const std::string path = (dir.path / "ok.safetensors").string();
  Trained a(5);
  optim::save_training_checkpoint(path, *a.model, *a.opt, {.global_step = 5}, a.scaler.state_dict());
  Trained b(1);
  optim::NamedTensors scaler_state;
  optim::load_training_checkpoint(path, *b.model, *b.opt, &scaler_state);
  b.scaler.load_state_dict(scaler_state);
  CHECK(b.snapshot() == a.snapshot());
  CHECK(b.scaler.stats().iterations == 5);
  CHECK(b.scaler.get_scale() == a.scaler.get_scale());
}

TEST_CASE("state rules: impossible values in a checkpoint are refused with file, key and rule", "[amp][state_rules]") {
  test::TempDir dir;
  const std::string good = (dir.path / "good.safetensors").string();
  {
    Trained a(5);
    optim::save_training_checkpoint(good, *a.model, *a.opt, {.global_step = 5}, a.scaler.state_dict());
  }
  int n = 0;
  auto bad = [&](const std::string& key, const std::function<Tensor(const Tensor&)>& edit,
                 const std::string& rule_part) {
    const std::string path = (dir.path / ("bad" + std::to_string(n++) + ".safetensors")).string();
    INFO(key << " -> " << rule_part);
    expect_refused(mutated(good, path, key, edit), key, rule_part);
  };
  const std::string scale_rule = "the loss scale is finite, > 0 and in [min_scale, max_scale]";
  // The scale (default max_scale 2^24, min_scale 1).
  for (double v : {kInf, -kInf, kNaN, -1.0, 0.0, 0.5, 33554432.0}) {
    bad(
        "scaler.scale", [v](const Tensor& t) { return set_f64(t, 0, v); }, scale_rule);
  }
  // The state counters.
  bad(
      "scaler.state", [](const Tensor& t) { return set_i64(t, kAmpGrowthTracker, -1); }, "growth tracker");
  bad(
      "scaler.state", [](const Tensor& t) { return set_i64(t, kAmpGrowthTracker, kI64Min); }, "growth tracker");
  bad(
      "scaler.state", [](const Tensor& t) { return set_i64(t, kAmpGrowthTracker, 3); }, "growth_interval");
  bad(
      "scaler.state", [](const Tensor& t) { return set_i64(t, kAmpIteration, -1); }, "iteration count");
  bad(
      "scaler.state", [](const Tensor& t) { return set_i64(t, kAmpIteration, kI64Min); }, "iteration count");
  bad(
      "scaler.state", [](const Tensor& t) { return set_i64(t, kAmpIteration, kCounterLimit); }, "2^62");
  bad(
      "scaler.state", [](const Tensor& t) { return set_i64(t, kAmpSkipped, kI64Max - 1); }, "skipped steps");
  bad(
      "scaler.state", [](const Tensor& t) { return set_i64(t, kAmpSkipped, -5); }, "skipped steps");
  bad(
      "scaler.state", [](const Tensor& t) { return set_i64(t, kAmpApplied, 4); }, "applied or skipped");
  bad(
      "scaler.state", [](const Tensor& t) { return set_i64(t, kAmpOverflowsInRow, 1); }, "hysteresis");
  bad(
      "scaler.state", [](const Tensor& t) { return set_i64(t, kAmpCollapsed, 2); }, "collapsed flag");
  bad(
      "scaler.state", [](const Tensor& t) { return set_i64(t, kAmpLastOverflow, 99); }, "last overflow");
  bad(
      "scaler.state", [](const Tensor& t) { return set_i64(t, kAmpScaleBits, 0); }, "scale bits");
  // The options (NaN is named as NaN, not as a converted integer).
  bad(
      "scaler.options", [](const Tensor& t) { return set_f64(t, kAmpOptGrowthInterval, kNaN); }, "numbers");
  bad(
      "scaler.options", [](const Tensor& t) { return set_f64(t, kAmpOptHysteresis, 2.5); }, "hysteresis is an");
  bad(
      "scaler.options", [](const Tensor& t) { return set_f64(t, kAmpOptMinScale, kInf); }, "numbers");
  bad(
      "scaler.options", [](const Tensor& t) { return set_f64(t, kAmpOptGrowthFactor, 1.0); }, "growth_factor > 1");
  bad(
      "scaler.options", [](const Tensor& t) { return set_f64(t, kAmpOptBackoffFactor, 1.0); }, "backoff_factor");
  bad(
      "scaler.options", [](const Tensor& t) { return set_f64(t, kAmpOptMinScale, -1.0); }, "min_scale <=");
  // The optimizer.
  const std::string step_rule = "an optimizer step counter is an integer in [0, 2^62)";
  for (int64_t v : {int64_t{-1}, int64_t{-3}, kI64Min, kCounterLimit, kI64Max}) {
    bad(
        "optim.step.0", [v](const Tensor& t) { return set_i64(t, 0, v); }, step_rule);
  }
  for (double v : {2.5, kNaN, -3.0, 1e30, kInf}) {
    bad(
        "optim.step.0", [v](const Tensor&) { return from_vector(std::vector<float>{static_cast<float>(v)}); },
        step_rule);
  }
  bad(
      "optim.step.0", [](const Tensor& t) { return set_i64(t, 0, 0); }, "before the first applied step");
  bad(
      "optim.state2.0.0", [](const Tensor& t) { return set_f64(t, 1, -1e-3); }, "second moment");
  bad(
      "optim.state2.0.0", [](const Tensor& t) { return set_f64(t, 0, kInf); }, "finite");
  bad(
      "optim.state1.0.1", [](const Tensor& t) { return set_f64(t, 0, kNaN); }, "finite");
  // The model.
  bad(
      "model.0.weight", [](const Tensor& t) { return set_f64(t, 3, kNaN); }, "model weights and buffers are finite");
  bad(
      "model.2.bias", [](const Tensor& t) { return set_f64(t, 1, -kInf); }, "model weights and buffers are finite");
}

TEST_CASE("state rules: an f32 step counter from an older file loads when it is an exact integer",
          "[amp][state_rules]") {
  Trained a(3), b(1);
  optim::NamedTensors state = a.opt->state_dict();
  for (auto& [name, t] : state) {
    if (name == "step.0") t = t.to(kF32);
  }
  b.opt->load_state_dict(state);
  CHECK(b.opt->steps_applied(0) == 3);
  for (auto& [name, t] : state) {
    if (name == "step.0") t = from_vector(std::vector<float>{2.5f});
  }
  CHECK_THROWS_WITH(b.opt->load_state_dict(state),
                    Catch::Contains("'step.0' holds 2.5") && Catch::Contains("corrupt or foreign checkpoint"));
  CHECK(b.opt->steps_applied(0) == 3);  // unchanged
}

TEST_CASE("state rules: a checkpoint from before the first step replaces the optimizer's state", "[amp][state_rules]") {
  test::TempDir dir;
  const std::string path = (dir.path / "fresh.safetensors").string();
  Trained fresh(0);
  CHECK(fresh.opt->state_dict().empty());
  optim::save_training_checkpoint(path, *fresh.model, *fresh.opt, {});
  Trained stepped(3);
  REQUIRE(stepped.opt->steps_applied(0) == 3);
  optim::load_training_checkpoint(path, *stepped.model, *stepped.opt);
  CHECK(stepped.opt->state_dict().empty());  // moments and steps are gone
  CHECK(stepped.opt->steps_applied(0) == 0);
  CHECK(stepped.snapshot() == fresh.snapshot());
  // The same in memory.
  Trained again(2);
  again.opt->load_state_dict({});
  CHECK(again.opt->state_dict().empty());
}

TEST_CASE("state rules: in-memory loaders refuse the same states", "[amp][state_rules]") {
  Trained a(4);
  auto scaler_state = a.scaler.state_dict();
  for (auto& [name, t] : scaler_state) {
    if (name == "scale") t = from_vector(std::vector<float>{std::numeric_limits<float>::infinity()});
  }
  amp::GradScaler fresh;
  CHECK_THROWS_WITH(fresh.load_state_dict(scaler_state),
                    Catch::Contains("'scale' holds inf") && Catch::Contains("rule: the loss scale is finite"));
  CHECK(fresh.get_scale() == 65536.0);  // unchanged

  // Module::load_state_dict: a key given twice.
  optim::NamedTensors model_state = a.model->state_dict();
  model_state.push_back(model_state.front());
  CHECK_THROWS_WITH(a.model->load_state_dict(model_state), Catch::Contains("the key '0.weight' appears twice"));
  // Optimizer::load_state_dict: a key given twice.
  optim::NamedTensors opt_state = a.opt->state_dict();
  opt_state.push_back(opt_state.back());
  CHECK_THROWS_WITH(a.opt->load_state_dict(opt_state), Catch::Contains("appears twice"));
}

TEST_CASE("state rules: counters saturate at the limit instead of overflowing", "[amp][state_rules]") {
  CHECK(saturating_increment(0) == 1);
  CHECK(saturating_increment(kCounterLimit - 1) == kCounterLimit);
  CHECK(saturating_increment(kCounterLimit) == kCounterLimit);
  CHECK(saturating_increment(kI64Max) == kCounterLimit);
  CHECK(saturating_increment(kI64Min) == kI64Min + 1);

  // The scale update with every counter at INT64_MAX (a state no loader
  // accepts, written straight into the kernel's input): no overflow (UBSan
  // builds would report one), every counter ends at the limit.
  for (const float found : {0.0f, 1.0f}) {
    float scale = 1024.0f, inv_scale = 0.0f, found_any = found;
    std::vector<int64_t> state(kAmpStateSize, kI64Max);
    AmpScaleOptions o;
    o.growth_interval = kI64Max;
    o.hysteresis = kI64Max;
    o.collapse_steps = kI64Max;
    amp_update_state(&scale, &inv_scale, state.data(), &found_any, o);
    CHECK(state[kAmpIteration] == kCounterLimit);
    CHECK(state[found != 0.0f ? kAmpSkipped : kAmpApplied] == kCounterLimit);
    CHECK(scale == 1024.0f);
  }

  // The optimizer's step counter, on every backend.
  Trained a(1);
  for (const auto& [name, t] : a.opt->state_dict()) {
    if (name != "step.0") continue;
    Tensor step = t;
    step.copy_(from_vector(std::vector<int64_t>{kI64Max}).to(step.device()));
  }
  a.opt->zero_grad();
  sum(a.model->forward(ones({1, 4}))).backward();
  a.opt->step();
  CHECK(a.opt->steps_applied(0) == kCounterLimit);
}
