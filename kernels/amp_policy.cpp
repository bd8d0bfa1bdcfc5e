// The autocast policy table (Note [AMP policy table] in kernels/amp_policy.h).
#include "kernels/amp_policy.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hg::amp {

namespace {

constexpr uint8_t kNoOverride = 0xFF;

struct Overrides {
  std::array<std::atomic<uint8_t>, kNumOps> slots;
  Overrides() {
    for (auto& a : slots) a.store(kNoOverride, std::memory_order_relaxed);
  }
};

std::array<std::atomic<uint8_t>, kNumOps>& overrides() {
  static Overrides table;  // thread-safe static initialisation
  return table.slots;
}

std::atomic<uint8_t>& slot(OpId op) { return overrides()[static_cast<size_t>(op)]; }

// PyTorch's CUDA autocast lists (aten/src/ATen/autocast_mode.h, 2.x) for the
// ops halfgrad has, by op name, and why halfgrad differs where it does. Ops
// not named here are not listed by PyTorch either (they run in their input
// dtype), and backward kernels are not autocast ops in either library.
struct TorchRow {
  std::string_view op;
  std::string_view torch;
  std::string_view difference;
};

constexpr std::string_view kPromotion = "promote (type promotion; not listed)";
constexpr std::string_view kNotListed = "passthrough (not listed)";
constexpr std::string_view kBackward = "backward (not an autocast op)";

constexpr TorchRow kTorchRows[] = {
    {"exp", "fp32", ""},
    {"log", "fp32", ""},
    {"sqrt", kNotListed,
     "fp32 like rsqrt (fp32 in PyTorch too): a norm built from sum (fp32) and sqrt is not rounded to 16 bits in "
     "between"},
    {"rsqrt", "fp32", ""},
    {"add", kPromotion, ""},
    {"sub", kPromotion, ""},
    {"mul", kPromotion, ""},
    {"div", kPromotion, ""},
    {"maximum", kPromotion, ""},
    {"minimum", kPromotion, ""},
    {"pow", "fp32", ""},
    {"erf", kNotListed, ""},
    {"clamp", kNotListed, ""},
    {"softplus", "fp32", ""},
    {"eq", kPromotion, ""},
    {"ne", kPromotion, ""},
    {"lt", kPromotion, ""},
    {"le", kPromotion, ""},
    {"gt", kPromotion, ""},
    {"ge", kPromotion, ""},
    {"where", kPromotion, ""},
    {"sum", "fp32", ""},
    {"mean", kNotListed,
     "fp32 like sum: PyTorch accumulates a 16-bit mean in fp32 but rounds the result to 16 bits; a mean that "
     "feeds a loss keeps its fp32 result here"},
    {"norm", "fp32", ""},
    {"matmul", "lower", ""},
    {"bmm", "lower", ""},
    {"scaled_dot_product_attention", "lower", ""},
    {"conv2d", "lower", ""},
    {"softmax", "fp32", ""},
    {"log_softmax", "fp32", ""},
    {"cross_entropy", "fp32 (log_softmax + nll_loss)",
     "passthrough: the fused kernel reads 16-bit logits as they are and does all its math in fp32 (fp32 loss), so the "
     "fp32 copy of the logits that PyTorch's fp32 class makes is skipped; the numbers are the same (widening is exact "
     "and the gradient is rounded once to the logits' dtype either way)"},
    {"binary_cross_entropy", "banned", ""},
    {"layer_norm", "fp32", ""},
    {"rms_norm", kNotListed,
     "fp32 like layer_norm (statistics and output in fp32); whether PyTorch's CUDA autocast lists rms_norm was not "
     "checked against its source when this row was written"},
    {"scatter_add", "promote (autocast promote list)", ""},
    {"cat", "promote (autocast promote list)", ""},
    {"stack", "promote (autocast promote list)", ""},
};

// Safe alternatives of ops that are (or may be made) banned.
constexpr std::pair<std::string_view, std::string_view> kAlternatives[] = {
    {"binary_cross_entropy", "binary_cross_entropy_with_logits on the logits (fp32, stable in 16-bit regions)"},
};

bool is_backward(std::string_view name) {
  constexpr std::string_view suffix = "_backward";
  return name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
}

const TorchRow* torch_row(OpId op) {
  const std::string_view name = op_name(op);
  for (const TorchRow& r : kTorchRows) {
    if (r.op == name) return &r;
  }
  return nullptr;
}

}  // namespace

AmpClass PolicyTable::get(OpId op) const {
  const uint8_t v = slot(op).load(std::memory_order_relaxed);
  return v == kNoOverride ? default_amp_class(op) : static_cast<AmpClass>(v);
}

bool PolicyTable::is_overridden(OpId op) const { return slot(op).load(std::memory_order_relaxed) != kNoOverride; }

void PolicyTable::set(OpId op, AmpClass c) { slot(op).store(static_cast<uint8_t>(c), std::memory_order_relaxed); }

void PolicyTable::reset(OpId op) { slot(op).store(kNoOverride, std::memory_order_relaxed); }

void PolicyTable::reset_all() {
  for (auto& a : overrides()) a.store(kNoOverride, std::memory_order_relaxed);
}

std::string_view PolicyTable::torch_class(OpId op) {
  if (const TorchRow* r = torch_row(op)) return r->torch;
  return is_backward(op_name(op)) ? kBackward : kNotListed;
}

std::string_view PolicyTable::difference(OpId op) {
  const TorchRow* r = torch_row(op);
  return r != nullptr ? r->difference : std::string_view();
}

std::string_view PolicyTable::banned_alternative(OpId op) {
  for (const auto& [name, alternative] : kAlternatives) {
    if (name == op_name(op)) return alternative;
  }
  return "run it outside the autocast region, or override its class (hg::amp::PolicyOverride)";
}

std::string PolicyTable::to_string(bool markdown) const {
  struct Row {
    std::string op, cls, torch, note;
  };
  std::vector<Row> rows;
  for (int i = 0; i < kNumOps; ++i) {
    const auto op = static_cast<OpId>(i);
    std::string cls(amp_class_name(get(op)));
    if (is_overridden(op)) cls += " (override; default " + std::string(amp_class_name(default_amp_class(op))) + ")";
    rows.push_back({std::string(op_name(op)), cls, std::string(torch_class(op)), std::string(difference(op))});
  }
  const Row header{"op", "halfgrad", "PyTorch CUDA autocast", "why halfgrad differs"};
  std::string out;
  if (markdown) {
    auto line = [&](const Row& r) { out += "| " + r.op + " | " + r.cls + " | " + r.torch + " | " + r.note + " |\n"; };
    line(header);
    out += "|---|---|---|---|\n";
    for (const Row& r : rows) line(r);
    return out;
  }
  size_t w_op = header.op.size(), w_cls = header.cls.size(), w_torch = header.torch.size();
  for (const Row& r : rows) {
    w_op = std::max(w_op, r.op.size());
    w_cls = std::max(w_cls, r.cls.size());
    w_torch = std::max(w_torch, r.torch.size());
  }
  auto pad = [](const std::string& s, size_t w) { return s + std::string(w - s.size() + 2, ' '); };
  auto line = [&](const Row& r) {
    std::string l = pad(r.op, w_op) + pad(r.cls, w_cls) + (r.note.empty() ? r.torch : pad(r.torch, w_torch) + r.note);
    out += l + "\n";
  };
  line(header);
  for (const Row& r : rows) line(r);
  return out;
}

PolicyTable& policy() {
  static PolicyTable table;
  return table;
}

std::ostream& operator<<(std::ostream& os, const PolicyTable& table) { return os << table.to_string(); }

std::optional<OpId> op_from_name(std::string_view name) {
  for (int i = 0; i < kNumOps; ++i) {
    if (op_name(static_cast<OpId>(i)) == name) return static_cast<OpId>(i);
  }
  return std::nullopt;
}

std::optional<AmpClass> amp_class_from_name(std::string_view name) {
  for (AmpClass c : {AmpClass::lower, AmpClass::fp32, AmpClass::promote, AmpClass::passthrough, AmpClass::banned}) {
    if (amp_class_name(c) == name) return c;
  }
  return std::nullopt;
}

PolicyOverride::PolicyOverride(OpId op, AmpClass c)
    : op_(op), was_overridden_(policy().is_overridden(op)), previous_(policy().get(op)) {
  policy().set(op, c);
}

PolicyOverride::~PolicyOverride() {
  if (was_overridden_) {
    policy().set(op_, previous_);
  } else {
    policy().reset(op_);
  }
}

}  // namespace hg::amp
