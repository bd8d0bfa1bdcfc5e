// What a resumed run checks before anything is loaded: the options that change
// the arithmetic (stored as checkpoint extras "config.<option>" and
// "data.<property>") and the loop's own counters, read back from the extras.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "optim/checkpoint.h"

namespace hg::train {

// The checkpoint extra `key` as an integer in [0, max], or an hg::Error.
int64_t extra_int(const optim::TrainingProgress& p, const std::string& key, int64_t max);
// A finite loss sum stored in the checkpoint's extras (the exact "%a" form),
// or an hg::Error naming the key (load_training_checkpoint adds the file).
double extra_sum(const optim::TrainingProgress& p, const std::string& key);

// Every entry of `config` must be in the checkpoint with the same value; the
// keys of `first` are compared first (a different model or precision would
// otherwise surface as another option's mismatch). A mismatch is an hg::Error
// "--resume: the checkpoint was written with --lr = 0.002, this run has
// 0.0015; <hint>": "config.<name>" is the option --<name> (underscores as
// dashes), "data.<name>" a property of the data; exact floating values ("%a")
// are shown in decimal.
void check_config(const optim::TrainingProgress& p, const std::map<std::string, std::string>& config,
                  const std::vector<std::string>& first, const std::string& hint);

}  // namespace hg::train
