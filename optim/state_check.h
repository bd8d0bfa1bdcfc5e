// The value rules of training state read back from a file: what an
// optimizer's, a GradScaler's and a model's tensors can hold after any real
// run. A state that breaks one came from a corrupt or foreign file, never from
// training, so the loaders refuse it before anything changes, naming the
// file, the key and the rule, instead of training on (or blaming the
// learning rate when the impossible value later surfaces as "diverged").
//
// Note [Training-state rules]
// Optimizer (keys of Optimizer::state_dict, "step.<g>", "master.<g>.<i>",
// "state1.<g>.<i>", "state2.<g>.<i>"):
//   step.<g>     one integer in [0, 2^62) (i64; an f32 counter from an older
//                file must hold an exact integer)
//   master, state1, state2   every element finite
//   state2       (Adam's second moment) every element >= 0
//   step 0       nothing was applied yet, so state1/state2 are all zero
// GradScaler (keys of GradScaler::state_dict, "scale", "state", "options"):
//   options      every value a number (max_scale may be +inf, the others are
//                finite); growth_interval, hysteresis, collapse_steps and
//                check_every integers in range; growth_factor > 1,
//                0 < backoff_factor < 1, 0 < min_scale <= max_scale, init_scale
//                an f32 in [min_scale, max_scale]
//   scale        finite, > 0, in [min_scale, max_scale] (as f32)
//   state        growth tracker in [0, growth_interval); iteration in
//                [0, 2^62); applied + skipped = iteration; overflows in a row
//                in [0, hysteresis); min-scale overflows and the last
//                overflow's stamp in [0, iteration]; collapsed 0 or 1; the
//                stored scale bits equal "scale"
// Model: every element of every floating tensor finite.
// 2^62 is the counter limit of Note [Counter limit] (core/counters.h).
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "optim/optimizer.h"

namespace hg::optim {

// Where checked state comes from, for the messages: `file` ("" when the state
// was passed in memory) and the key prefix the file stores it under
// ("optim.", "scaler.", "model.").
struct StateSource {
  std::string file;
  std::string prefix;
};

// Each throws hg::Error at the first broken rule: "<file>: '<prefix><key>'
// <what is wrong> (rule: <rule>); this is a corrupt or foreign checkpoint, not
// a diverged run". Nothing is changed; entries with an unexpected name, dtype
// or shape are left to the loaders' own structure checks.
void check_optimizer_state_values(const NamedTensors& state, const StateSource& source);
void check_scaler_state_values(const NamedTensors& state, const StateSource& source);
void check_finite_values(const NamedTensors& tensors, const StateSource& source);

}  // namespace hg::optim
