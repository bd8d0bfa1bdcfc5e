#include "autograd/function.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace hg::autograd {

void AutogradContext::save_for_backward(std::vector<Tensor> tensors) { to_save_ = std::move(tensors); }

std::vector<Tensor> AutogradContext::get_saved_variables() const {
  HG_CHECK(node_ != nullptr, "get_saved_variables: call it in backward (forward saves with save_for_backward)");
  std::vector<Tensor> out;
  out.reserve(saved_count_);
  for (size_t i = 0; i < saved_count_; ++i) out.push_back(node_->saved(i));
  return out;
}

bool AutogradContext::needs_input_grad(size_t i) const {
  HG_CHECK(i < needs_input_grad_.size(), "needs_input_grad(", i, "): forward has ", needs_input_grad_.size(),
           " arguments");
  return needs_input_grad_[i];
}

void AutogradContext::mark_dirty(const std::vector<Tensor>& tensors) { dirty_ = tensors; }

void AutogradContext::mark_non_differentiable(const std::vector<Tensor>& outputs) { non_differentiable_ = outputs; }

void FunctionRecorder::prepare(AutogradContext& ctx, const std::vector<const Tensor*>& tensors) {
  const bool grad = is_grad_enabled();
  ctx.needs_input_grad_.clear();
  for (const Tensor* t : tensors)
    ctx.needs_input_grad_.push_back(grad && t != nullptr && t->defined() && t->requires_grad());
}

Tensor FunctionRecorder::finish(const std::string& name, const std::shared_ptr<AutogradContext>& ctx,
                                const std::vector<const Tensor*>& tensors, Tensor output, Backward backward) {
  HG_CHECK(output.defined(), name, "::forward returned an undefined tensor");
  bool output_dirty = false;
  for (const Tensor& d : ctx->dirty_) {
    bool is_input = false;
    for (const Tensor* t : tensors) is_input = is_input || (t != nullptr && same(*t, d));
    HG_CHECK(is_input, name, ": mark_dirty takes input tensors that forward changed in place");
    HG_CHECK(!(d.requires_grad() && d.is_leaf() && is_grad_enabled()), name,
             ": a leaf tensor that requires grad was changed in place (mark_dirty); PyTorch refuses this too. Run "
             "the function under hg::NoGradGuard, or on a copy (x.clone())");
    d.bump_version();
    output_dirty = output_dirty || same(d, output);
  }
  HG_CHECK(ctx->dirty_.empty() || output_dirty, name,
           ": a function that marks inputs dirty must return the one it changed (halfgrad's functions have one "
           "output)");
  bool non_differentiable = false;
  for (const Tensor& t : ctx->non_differentiable_) non_differentiable = non_differentiable || same(t, output);
  // The node's closure owns ctx, so ctx must not keep the output alive (a
  // dirty input is the output: output -> node -> ctx -> output would leak).
  ctx->dirty_.clear();
  ctx->non_differentiable_.clear();
  bool any = false;
  for (size_t i = 0; i < tensors.size(); ++i) any = any || ctx->needs_input_grad_[i];
  std::vector<SavedTensor> saved;
  for (const Tensor& t : ctx->to_save_) saved.emplace_back(t);
  ctx->saved_count_ = saved.size();
  ctx->to_save_.clear();
  if (!any || non_differentiable) {
    // No graph: a fresh output stays a plain tensor; an input returned as is keeps its own history.
    if (non_differentiable && output.requires_grad()) output = output.detach();
    return output;
  }
  bool output_is_input = false;
  for (const Tensor* t : tensors) output_is_input = output_is_input || (t != nullptr && same(*t, output));
  if (output_is_input && !output_dirty) output = output.detach();
  const size_t num_args = tensors.size();
  std::vector<bool> is_tensor;
  for (const Tensor* t : tensors) is_tensor.push_back(t != nullptr);
  auto node = std::make_shared<FunctionNode>(
      name, std::move(saved),
      [ctx, backward = std::move(backward), name, num_args, is_tensor](const Tensor& grad_output,
                                                                       const FunctionNode& self) {
        ctx->node_ = &self;
        std::vector<Tensor> grads;
        try {
          grads = backward(ctx.get(), {grad_output});
        } catch (...) {
          ctx->node_ = nullptr;
          throw;
        }
        ctx->node_ = nullptr;
        HG_CHECK(grads.size() == num_args, name, "::backward returned ", grads.size(), " gradients, but forward has ",
                 num_args, " arguments; return one per argument (an undefined Tensor() for those without one)");
        Grads out;
        for (size_t i = 0; i < num_args; ++i) {
          if (!is_tensor[i]) {
            HG_CHECK(!grads[i].defined(), name, "::backward returned a gradient for argument ", i,
                     ", which is not a tensor; return Tensor() there");
            continue;
          }
          out.push_back(grads[i]);
        }
        return out;
      });
  for (const Tensor* t : tensors) {
    if (t != nullptr) node->next_edges.push_back(edge_to(*t));
  }
  set_history(output, node);
  return output;
}

std::string FunctionRecorder::demangle(const char* name) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

}  // namespace hg::autograd
