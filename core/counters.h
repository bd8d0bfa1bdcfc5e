// Saturating step and iteration counters, shared by host and device code.
//
// Note [Counter limit]
// Every counter of a run (the optimizer's per-group step, the GradScaler's
// iteration, applied, skipped, growth-tracker and overflow counters, the
// progress counters of a training checkpoint) stays in [0, kCounterLimit].
// 2^62 steps is beyond any real run (146 years at one step per nanosecond),
// so a counter at the limit comes from a corrupt or foreign file, never from
// training; loads refuse such values (optim/state_check.h), and the
// increments below saturate there instead of overflowing, so even a crafted
// state that bypasses the checks never reaches signed-overflow UB.
#pragma once

#include <cstdint>

#include "core/macros.h"

namespace hg {

inline constexpr int64_t kCounterLimit = int64_t{1} << 62;

// v + 1, saturating at kCounterLimit: defined for every int64 value.
HG_HOST_DEVICE constexpr int64_t saturating_increment(int64_t v) {
  return v < (int64_t{1} << 62) ? v + 1 : (int64_t{1} << 62);
}

}  // namespace hg
