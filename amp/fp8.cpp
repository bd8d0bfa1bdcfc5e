// The fp8 recipe's state and casts (Note [fp8 recipe] in amp/fp8.h).
#include "amp/fp8.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"

namespace hg::amp {

Fp8State::Fp8State(int64_t layers, const Fp8Recipe& recipe, Device device) : layers_(layers), recipe_(recipe) {
  HG_CHECK(layers >= 0, "Fp8State: layers must be >= 0, got ", layers);
  HG_CHECK(recipe.amax_history_len >= 1, "Fp8State: amax_history_len must be >= 1, got ", recipe.amax_history_len);
  HG_CHECK(recipe.margin >= 0 && recipe.margin < 64, "Fp8State: margin must be in [0, 64), got ", recipe.margin);
  const int64_t n = 3 * layers;
  const int64_t length = recipe.scaling == Fp8Scaling::delayed ? recipe.amax_history_len : 1;
  history_ = zeros({length, n}, {.device = device});
  scale_ = ones({n}, {.device = device});
  scale_inv_ = ones({n}, {.device = device});
  std::vector<float> max_finite(static_cast<size_t>(n));
  for (int64_t l = 0; l < layers; ++l) {
    for (const Fp8Role role : {Fp8Role::input, Fp8Role::weight, Fp8Role::grad_output}) {
      max_finite[static_cast<size_t>(slot(l, role))] = fp8_max(dtype(role));
    }
  }
  fp8_max_ = from_vector(max_finite).to(device);
  saturated_ = zeros({n}, {.dtype = kI64, .device = device});
}

DType Fp8State::dtype(Fp8Role role) const {
  return recipe_.format == Fp8Format::hybrid && role == Fp8Role::grad_output ? kF8E5M2 : kF8E4M3;
}

int64_t Fp8State::slot(int64_t layer, Fp8Role role) const {
  HG_CHECK(layer >= 0 && layer < layers_, "Fp8State: layer ", layer, " is outside [0, ", layers_, ")");
  return 3 * layer + static_cast<int64_t>(role);
}

Tensor Fp8State::scale(int64_t layer, Fp8Role role) const { return scale_.narrow(0, slot(layer, role), 1); }
Tensor Fp8State::scale_inv(int64_t layer, Fp8Role role) const { return scale_inv_.narrow(0, slot(layer, role), 1); }
Tensor Fp8State::amax(int64_t layer, Fp8Role role) const {
  return history_.select(0, 0).narrow(0, slot(layer, role), 1);
}

Tensor Fp8State::cast(const Tensor& x, int64_t layer, Fp8Role role) {
  const Tensor amax_slot = amax(layer, role);
  if (recipe_.scaling == Fp8Scaling::current) {
    // This tensor's amax, then the scales from it (the history has one row;
    // the other slots' rows are 0, which keeps their scales), then the cast.
    ops::fp8_amax(x, amax_slot);
    ops::fp8_update_scales_(history_, scale_, scale_inv_, fp8_max_, Tensor(), recipe_.margin,
                            Fp8AmaxCompute::kMostRecent);
  }
  return ops::fp8_cast(x, dtype(role), scale(layer, role), amax_slot, saturated(layer, role));
}

Tensor Fp8State::saturated(int64_t layer, Fp8Role role) const { return saturated_.narrow(0, slot(layer, role), 1); }

std::vector<int64_t> Fp8State::saturation_counts() const { return saturated_.to_vector<int64_t>(); }

void Fp8State::reset_saturation_counts() { saturated_.zero_(); }

std::vector<std::pair<std::string, Tensor>> Fp8State::state_dict() const {
  const std::vector<double> recipe{static_cast<double>(recipe_.format), static_cast<double>(recipe_.scaling),
                                   static_cast<double>(recipe_.amax_history_len), static_cast<double>(recipe_.margin),
                                   static_cast<double>(recipe_.amax_compute)};
  return {{"history", history_.clone()},
          {"scale", scale_.clone()},
          {"scale_inv", scale_inv_.clone()},
          {"saturated", saturated_.clone()},
          {"recipe", from_vector(recipe, {5}, {.dtype = kF64})}};
}

void Fp8State::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) {
  auto find = [&](const char* key) -> const Tensor& {
    for (const auto& [name, t] : state) {
      if (name == key && t.defined()) return t;
    }
    HG_FAIL("Fp8State::load_state_dict: no \"", key,
            "\" entry (expected history, scale, scale_inv, saturated, recipe)");
  };
  const std::vector<double> recipe = find("recipe").to(Device::cpu()).to(kF64).to_vector<double>();
  const std::vector<double> mine{static_cast<double>(recipe_.format), static_cast<double>(recipe_.scaling),
                                 static_cast<double>(recipe_.amax_history_len), static_cast<double>(recipe_.margin),
                                 static_cast<double>(recipe_.amax_compute)};
  HG_CHECK(recipe == mine,
           "Fp8State::load_state_dict: the saved state was made with another fp8 recipe (format, "
           "scaling, amax history length, margin, amax compute); use the same Fp8Recipe to resume");
  const std::pair<const char*, Tensor*> targets[] = {
      {"history", &history_}, {"scale", &scale_}, {"scale_inv", &scale_inv_}, {"saturated", &saturated_}};
  for (const auto& [key, target] : targets) {
    const Tensor& src = find(key);
    HG_CHECK(src.sizes() == target->sizes() && src.dtype() == target->dtype(), "Fp8State::load_state_dict: \"", key,
             "\" is ", src.dtype(), " ", src.shape_str(), ", this state (", layers_, " fp8 layers) has ",
             target->dtype(), " ", target->shape_str());
  }
  for (const auto& [key, target] : targets) target->copy_(find(key));
}

void Fp8State::update(const Tensor& found_inf) {
  if (recipe_.scaling != Fp8Scaling::delayed || layers_ == 0) return;
  ops::fp8_update_scales_(history_, scale_, scale_inv_, fp8_max_, found_inf, recipe_.margin, recipe_.amax_compute);
}

namespace {

struct Fp8Operands {
  Tensor qx, qw, x2;
  int64_t m = 0, k = 0, n = 0;
};

Fp8Operands cast_operands(const char* op, const Tensor& x, const Tensor& weight, Fp8State& state, int64_t layer) {
  HG_CHECK(x.defined() && weight.defined() && x.dim() >= 1 && weight.dim() == 2 && x.size(-1) == weight.size(1), op,
           ": x [*, K] and weight [N, K] needed, got ", x.defined() ? x.shape_str() : std::string("undefined"), " and ",
           weight.defined() ? weight.shape_str() : std::string("undefined"));
  Fp8Operands o;
  o.k = x.size(-1);
  o.n = weight.size(0);
  o.x2 = x.reshape({-1, o.k});
  o.m = o.x2.size(0);
  o.qx = state.cast(o.x2, layer, Fp8Role::input);
  o.qw = state.cast(weight, layer, Fp8Role::weight);
  return o;
}

Tensor fp8_bias(const Tensor& bias, DType out_dtype) {
  return bias.defined() ? bias.to(out_dtype == kF16 ? kF16 : kBF16) : Tensor();
}

}  // namespace

Tensor fp8_linear_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, Fp8State& state, int64_t layer,
                          DType out_dtype) {
  hg::NoGradGuard no_grad;
  AutocastExcluded excluded;
  const Fp8Operands o = cast_operands("fp8_linear_forward", x, weight, state, layer);
  Shape out_shape = x.sizes();
  out_shape.back() = o.n;
  return ops::fp8_linear(o.qx, o.qw, state.scale_inv(layer, Fp8Role::input), state.scale_inv(layer, Fp8Role::weight),
                         out_dtype, fp8_bias(bias, out_dtype))
      .view(out_shape);
}

Tensor fp8_linear(const Tensor& x, const Tensor& weight, const Tensor& bias, Fp8State& state, int64_t layer,
                  DType out_dtype) {
  const bool needs_grad = autograd::any_requires_grad({&x, &weight, &bias});
  Tensor y;
  Fp8Operands o;
  Tensor sx_inv, sw_inv, qxt, qwt;
  {
    hg::NoGradGuard no_grad;
    AutocastExcluded excluded;
    o = cast_operands("fp8_linear", x, weight, state, layer);
    sx_inv = state.scale_inv(layer, Fp8Role::input);
    sw_inv = state.scale_inv(layer, Fp8Role::weight);
    Shape out_shape = x.sizes();
    out_shape.back() = o.n;
    y = ops::fp8_linear(o.qx, o.qw, sx_inv, sw_inv, out_dtype, fp8_bias(bias, out_dtype)).view(out_shape);
    if (!needs_grad) return y;
    // Current scaling rewrites the scales at every cast: keep this step's.
    if (state.recipe().scaling == Fp8Scaling::current) {
      sx_inv = sx_inv.clone();
      sw_inv = sw_inv.clone();
    }
    if (weight.requires_grad()) qxt = ops::fp8_transpose_padded(o.qx);  // [K, Mp]
    if (x.requires_grad()) qwt = ops::fp8_transpose_padded(o.qw);       // [K, N]
  }
  Fp8State* st = &state;
  const Shape x_shape = x.sizes();
  const DType x_dtype = x.dtype(), w_dtype = weight.dtype(), b_dtype = bias.defined() ? bias.dtype() : kF32;
  const bool want_dx = x.requires_grad(), want_dw = weight.requires_grad(),
             want_db = bias.defined() && bias.requires_grad();
  const int64_t m = o.m, n = o.n;
  autograd::record("fp8_linear", y, {&x, &weight, &bias}, {},
                   [=](const Tensor& grad_output, const autograd::FunctionNode&) -> autograd::Grads {
                     hg::NoGradGuard no_grad;
                     AutocastExcluded excluded;
                     autograd::Grads grads(3);
                     const Tensor g2 = grad_output.reshape({m, n});
                     const Tensor qg = st->cast(g2, layer, Fp8Role::grad_output);
                     Tensor sg_inv = st->scale_inv(layer, Fp8Role::grad_output);
                     if (want_dx) grads[0] = ops::fp8_linear(qg, qwt, sg_inv, sw_inv, x_dtype).view(x_shape);
                     if (want_dw)
                       grads[1] = ops::fp8_linear(ops::fp8_transpose_padded(qg), qxt, sg_inv, sx_inv, w_dtype);
                     if (want_db) grads[2] = hg::sum(g2.to(kF32), {0}).to(b_dtype);
                     return grads;
                   });
  return y;
}

// ---- routing ------------------------------------------------------------------

namespace {
thread_local bool t_fp8_autocast = false;

bool routable(DType t) { return t == kF32 || t == kF16 || t == kBF16; }
}  // namespace

Fp8Autocast::Fp8Autocast(bool enabled) : saved_(t_fp8_autocast) { t_fp8_autocast = enabled; }
Fp8Autocast::~Fp8Autocast() { t_fp8_autocast = saved_; }
bool is_fp8_autocast_enabled() { return t_fp8_autocast; }

Fp8Keep keep_layers(std::vector<std::string> names) {
  return [names = std::move(names)](const std::string& name, const nn::Linear&) {
    return std::any_of(names.begin(), names.end(), [&](const std::string& n) {
      return name == n || (name.size() > n.size() && name.compare(0, n.size(), n) == 0 && name[n.size()] == '.');
    });
  };
}

Fp8Training::Fp8Training(nn::Module& model, Device device, const Fp8Recipe& recipe, Fp8Keep keep) {
  HG_CHECK(supported(device, kF8E4M3), "Fp8Training: ", device.str(),
           " has no fp8 GEMM (it needs compute capability 8.9 or newer: ", capability_report(device),
           "); train in amp-bf16 there");
  std::vector<std::shared_ptr<nn::Linear>> chosen;
  std::set<const nn::Linear*> seen;  // a module registered twice is one layer
  for (const auto& [name, module] : model.named_modules()) {
    auto linear = std::dynamic_pointer_cast<nn::Linear>(module);
    if (!linear || !seen.insert(linear.get()).second) continue;
    HG_CHECK(!linear->has_route(), "Fp8Training: the Linear '", name,
             "' already has a route (another Fp8Training holds it); one Fp8Training per model");
    if (linear->in_features() % 16 != 0 || linear->out_features() % 16 != 0) {
      kept_.emplace_back(name, "in/out features " + std::to_string(linear->in_features()) + "/" +
                                   std::to_string(linear->out_features()) + " not multiples of 16");
    } else if (keep && keep(name, *linear)) {
      kept_.emplace_back(name, "kept by the filter");
    } else {
      names_.push_back(name);
      chosen.push_back(linear);
    }
  }
  state_ = std::make_shared<Fp8State>(static_cast<int64_t>(chosen.size()), recipe, device);
  for (size_t i = 0; i < chosen.size(); ++i) {
    const int64_t layer = static_cast<int64_t>(i);
    std::shared_ptr<Fp8State> state = state_;
    chosen[i]->set_route([state, layer](nn::Linear& self, const Tensor& x) -> Tensor {
      if (!t_fp8_autocast) return Tensor();
      const Device dev = state->scales().device();
      if (!routable(x.dtype()) || !routable(self.weight.dtype()) || x.device() != dev || self.weight.device() != dev)
        return Tensor();
      const DType out = is_autocast_enabled(x.device().type) ? autocast_dtype(x.device().type) : x.dtype();
      return fp8_linear(x, self.weight, self.bias, *state, layer, out);
    });
    routed_.push_back(chosen[i]);
  }
}

Fp8Training::~Fp8Training() {
  for (const auto& weak : routed_) {
    if (auto linear = weak.lock()) linear->set_route({});
  }
}

void Fp8Training::update(const GradScaler& scaler) { state_->update(scaler.found_any_tensor()); }
void Fp8Training::update(const Tensor& found_inf) { state_->update(found_inf); }

std::vector<Fp8LayerSaturation> Fp8Training::saturation() const {
  const std::vector<int64_t> counts = state_->saturation_counts();
  std::vector<Fp8LayerSaturation> out;
  for (size_t i = 0; i < names_.size(); ++i) {
    out.push_back({names_[i], counts[3 * i], counts[3 * i + 1], counts[3 * i + 2]});
  }
  return out;
}

std::string Fp8Training::summary() const {
  std::ostringstream os;
  os << "fp8: " << names_.size() << " Linear layer" << (names_.size() == 1 ? "" : "s");
  if (!kept_.empty()) {
    os << "; not in fp8:";
    for (size_t i = 0; i < kept_.size(); ++i)
      os << (i ? ", " : " ") << kept_[i].first << " (" << kept_[i].second << ")";
  }
  return os.str();
}

std::vector<std::pair<std::string, Tensor>> Fp8Training::state_dict() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [name, t] : state_->state_dict()) out.emplace_back("fp8." + name, t);
  return out;
}

void Fp8Training::load_state_dict(const std::vector<std::pair<std::string, Tensor>>& state) {
  std::vector<std::pair<std::string, Tensor>> mine;
  for (const auto& [name, t] : state) {
    if (name.rfind("fp8.", 0) == 0) mine.emplace_back(name.substr(4), t);
  }
  state_->load_state_dict(mine);
}

}  // namespace hg::amp
