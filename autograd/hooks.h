// Hooks into the backward pass, for code above autograd (DDP's gradient
// buckets, distributed/ddp.h): torch's register_post_accumulate_grad_hook
// and Variable._execution_engine.queue_callback.
//
// Note [Backward hooks]
// - A post-accumulate-grad hook on a leaf runs right after backward wrote
//   that leaf's .grad (AccumulateGrad, once per backward pass per leaf, with
//   the accumulated gradient in leaf.grad()), while the rest of the backward
//   pass is still to run. Hooks run on the thread that runs backward, in
//   registration order; a hook that throws aborts the backward pass.
// - queue_callback(fn), called during a backward pass (e.g. from a hook),
//   runs fn once after the pass's last node ran, before backward() returns.
//   Callbacks queued during a pass that throws are dropped.
// Both cost one relaxed atomic load per AccumulateGrad when no hook exists.
#pragma once

#include <cstdint>
#include <functional>

#include "core/tensor.h"

namespace hg::autograd {

using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;

// Removes its hook when destroyed (or on remove()). Move-only.
class HookHandle {
 public:
  HookHandle() = default;
  explicit HookHandle(uint64_t id) : id_(id) {}
  HookHandle(HookHandle&& o) noexcept : id_(o.id_) { o.id_ = 0; }
  HookHandle& operator=(HookHandle&& o) noexcept;
  HookHandle(const HookHandle&) = delete;
  HookHandle& operator=(const HookHandle&) = delete;
  ~HookHandle() { remove(); }
  void remove();

 private:
  uint64_t id_ = 0;
};

// `leaf` must be a leaf that requires grad (hg::Error otherwise).
[[nodiscard]] HookHandle register_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook);

// Only during a backward pass (hg::Error otherwise).
void queue_callback(std::function<void()> fn);

namespace detail {
// AccumulateGrad calls this after writing leaf.grad.
void run_post_accumulate_grad_hooks(const Tensor& leaf);
// The engine holds one for the length of a pass; finish() runs the queued
// callbacks (including ones queued by callbacks).
class BackwardScope {
 public:
  BackwardScope();
  ~BackwardScope();
  void finish();
  BackwardScope(const BackwardScope&) = delete;
  BackwardScope& operator=(const BackwardScope&) = delete;
};
}  // namespace detail

}  // namespace hg::autograd
