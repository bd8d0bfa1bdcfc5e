#include "autograd/hooks.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"

namespace hg::autograd {

namespace {

struct Registry {
  std::mutex mu;
  std::unordered_map<const TensorImpl*, std::vector<std::pair<uint64_t, PostAccumulateGradHook>>> hooks;
  std::unordered_map<uint64_t, const TensorImpl*> owner;
  uint64_t next_id = 1;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: handles may outlive statics
  return *r;
}

std::atomic<int64_t> g_hook_count{0};

// Callbacks of the passes running on this thread (a pass may nest: a hook
// that calls backward).
thread_local std::vector<std::vector<std::function<void()>>> t_callbacks;

}  // namespace

HookHandle& HookHandle::operator=(HookHandle&& o) noexcept {
  if (this != &o) {
    remove();
    id_ = o.id_;
    o.id_ = 0;
  }
  return *this;
}

void HookHandle::remove() {
  if (id_ == 0) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.owner.find(id_);
  if (it != r.owner.end()) {
    auto& list = r.hooks[it->second];
    std::erase_if(list, [&](const auto& p) { return p.first == id_; });
    if (list.empty()) r.hooks.erase(it->second);
    r.owner.erase(it);
    g_hook_count.fetch_sub(1, std::memory_order_relaxed);
  }
  id_ = 0;
}

HookHandle register_post_accumulate_grad_hook(const Tensor& leaf, PostAccumulateGradHook hook) {
  HG_CHECK(leaf.defined() && leaf.requires_grad(), "register_post_accumulate_grad_hook: the tensor must require grad");
  HG_CHECK(leaf.impl_ptr()->autograd_meta == nullptr || leaf.impl_ptr()->autograd_meta->grad_fn == nullptr,
           "register_post_accumulate_grad_hook: the tensor is not a leaf (it has a grad_fn); hooks go on "
           "parameters");
  HG_CHECK(hook != nullptr, "register_post_accumulate_grad_hook: empty hook");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const uint64_t id = r.next_id++;
  r.hooks[leaf.impl_ptr()].emplace_back(id, std::move(hook));
  r.owner[id] = leaf.impl_ptr();
  g_hook_count.fetch_add(1, std::memory_order_relaxed);
  return HookHandle(id);
}

void queue_callback(std::function<void()> fn) {
  HG_CHECK(!t_callbacks.empty(), "queue_callback: no backward pass is running on this thread");
  t_callbacks.back().push_back(std::move(fn));
}

namespace detail {

void run_post_accumulate_grad_hooks(const Tensor& leaf) {
  if (g_hook_count.load(std::memory_order_relaxed) == 0) return;
  std::vector<PostAccumulateGradHook> todo;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.hooks.find(leaf.impl_ptr());
    if (it == r.hooks.end()) return;
    for (const auto& p : it->second) todo.push_back(p.second);
  }
  for (const auto& h : todo) h(leaf);
}

BackwardScope::BackwardScope() { t_callbacks.emplace_back(); }
BackwardScope::~BackwardScope() { t_callbacks.pop_back(); }

void BackwardScope::finish() {
  // Index, not iterator: a callback may queue another.
  for (size_t i = 0; i < t_callbacks.back().size(); ++i) {
    std::function<void()> fn = std::move(t_callbacks.back()[i]);
    fn();
  }
  t_callbacks.back().clear();
}

}  // namespace detail

}  // namespace hg::autograd
