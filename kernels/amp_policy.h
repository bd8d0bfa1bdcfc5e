// The autocast policy table: what autocast does with each op's floating
// inputs (Note [The op list] in kernels/op_list.h gives the defaults), with
// run-time overrides. Data, not code: print it, query it, override an op.
//
//   std::cout << hg::amp::policy();                          // the table
//   hg::amp::policy().get(hg::OpId::matmul);                 // AmpClass::lower
//   hg::amp::PolicyOverride keep(hg::OpId::matmul, hg::AmpClass::fp32);  // scoped
//
// Note [AMP policy table]
// Classes: lower (the autocast dtype), fp32, promote (the widest floating
// input), passthrough (as given), banned (raises under autocast, naming the
// safe alternative). Defaults come from default_amp_class(op) and match
// PyTorch's CUDA autocast lists (aten/src/ATen/autocast_mode.h) for the ops
// both have; each row also records PyTorch's class and why halfgrad differs
// where it does (docs/amp.md embeds the table, printed by hg-amp-policy).
// Overrides are process-wide: one atomic per op, so reads from any thread
// while another thread overrides are safe, and a read costs one relaxed load.
// PolicyOverride restores the previous value (override or default) on exit;
// nest them like scopes.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/op_list.h"

namespace hg::amp {

class PolicyTable {
 public:
  AmpClass get(OpId op) const;
  bool is_overridden(OpId op) const;
  void set(OpId op, AmpClass c);
  void reset(OpId op);  // back to default_amp_class(op)
  void reset_all();

  // PyTorch's CUDA autocast class of the op ("lower", "fp32", "promote",
  // "passthrough" (not listed: runs in its input dtype), "banned") and why
  // halfgrad's default differs, if it does (empty otherwise).
  static std::string_view torch_class(OpId op);
  static std::string_view difference(OpId op);
  // What to use instead of a banned op (for the error message).
  static std::string_view banned_alternative(OpId op);

  // The table as aligned text, or as a Markdown table (docs/amp.md).
  std::string to_string(bool markdown = false) const;
};

// The process-wide table.
PolicyTable& policy();
std::ostream& operator<<(std::ostream& os, const PolicyTable& table);

// The op named `name` (op_name), if any.
std::optional<OpId> op_from_name(std::string_view name);
std::optional<AmpClass> amp_class_from_name(std::string_view name);

// Overrides one op's class for the guard's lifetime (RAII), then restores
// the value it replaced.
class PolicyOverride {
 public:
  PolicyOverride(OpId op, AmpClass c);
  ~PolicyOverride();
  PolicyOverride(const PolicyOverride&) = delete;
  PolicyOverride& operator=(const PolicyOverride&) = delete;

 private:
  OpId op_;
  bool was_overridden_;
  AmpClass previous_;
};

}  // namespace hg::amp
