// Grad mode: whether ops record the graph. Thread-local, like torch.
#pragma once

namespace hg {

bool is_grad_enabled();
void set_grad_enabled(bool enabled);

// RAII: no graph is recorded inside (inference, optimizer steps, the engine).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(is_grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// torch.inference_mode() / libtorch's c10::InferenceMode: no graph is
// recorded inside. halfgrad has no separate inference tensors, so this is
// NoGradGuard under PyTorch's name (it skips nothing more).
using InferenceMode = NoGradGuard;

// RAII: sets grad mode to `enabled` for a scope.
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : previous_(is_grad_enabled()) { set_grad_enabled(enabled); }
  ~GradModeGuard() { set_grad_enabled(previous_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace hg
