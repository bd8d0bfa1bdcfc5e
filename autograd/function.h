// Custom differentiable functions, as libtorch's torch::autograd::Function<T>:
//
//   struct MulConstant : hg::autograd::Function<MulConstant> {
//     static hg::Tensor forward(hg::autograd::AutogradContext* ctx, const hg::Tensor& x, double c) {
//       ctx->saved_data["c"] = c;
//       return x * c;
//     }
//     static std::vector<hg::Tensor> backward(hg::autograd::AutogradContext* ctx, std::vector<hg::Tensor> grads) {
//       return {grads[0] * std::any_cast<double>(ctx->saved_data["c"]), hg::Tensor()};  // none for c
//     }
//   };
//   hg::Tensor y = MulConstant::apply(x, 2.0);
//
// forward runs with grad mode off and returns one tensor (halfgrad's nodes
// have one output); backward gets that output's gradient (grads[0]) and
// returns one tensor per forward argument, undefined for arguments that are
// not tensors or need no gradient. The engine checks each returned gradient
// against its input (shape and device: an error naming the function) and
// converts it to the input's dtype (Note [Gradient metadata] in
// autograd/node.h), so an f32 gradient for an f16 input under autocast is
// fine. Tensors needed by backward go through save_for_backward (they are
// checked for in-place changes, as every saved tensor); other values through
// saved_data.
#pragma once

#include <any>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/tensor.h"

namespace hg::autograd {

class AutogradContext {
 public:
  // Tensors backward needs (inputs or the output); read them back with get_saved_variables().
  void save_for_backward(std::vector<Tensor> tensors);
  // The saved tensors, in save order; throws if one was changed in place since.
  std::vector<Tensor> get_saved_variables() const;
  // Whether forward argument i (counting every argument) needs a gradient.
  bool needs_input_grad(size_t i) const;
  // forward changed these input tensors in place and returns one of them: the
  // version counter is bumped and the returned tensor takes the function as
  // its history (a leaf that requires grad is refused, as in PyTorch).
  void mark_dirty(const std::vector<Tensor>& tensors);
  // The output has no gradient (an index, a mask): it is returned with
  // requires_grad false.
  void mark_non_differentiable(const std::vector<Tensor>& outputs);
  // Any other value backward needs.
  std::map<std::string, std::any> saved_data;

 private:
  template <class T>
  friend struct Function;
  friend struct FunctionRecorder;
  std::vector<Tensor> to_save_;
  std::vector<bool> needs_input_grad_;
  std::vector<Tensor> dirty_, non_differentiable_;
  size_t saved_count_ = 0;
  const FunctionNode* node_ = nullptr;  // set while backward runs
};

// The non-template part of Function<T>::apply (autograd/function.cpp).
struct FunctionRecorder {
  using Backward = std::function<std::vector<Tensor>(AutogradContext* ctx, std::vector<Tensor> grads)>;
  // Before forward: which arguments need a gradient. `tensors[i]` is null
  // for an argument that is not a tensor.
  static void prepare(AutogradContext& ctx, const std::vector<const Tensor*>& tensors);
  // After forward: records the node when an input needs a gradient; returns
  // the tensor apply returns (an input returned unchanged becomes an alias,
  // so the input keeps its own history, as PyTorch's view of it).
  static Tensor finish(const std::string& name, const std::shared_ptr<AutogradContext>& ctx,
                       const std::vector<const Tensor*>& tensors, Tensor output, Backward backward);
  static std::string demangle(const char* name);
};

template <class T>
struct Function {
  // Runs T::forward(ctx, args...) and records T::backward for its output.
  template <typename... Args>
  static Tensor apply(Args&&... args) {
    auto ctx = std::make_shared<AutogradContext>();
    const std::vector<const Tensor*> tensors{tensor_or_null(args)...};
    FunctionRecorder::prepare(*ctx, tensors);
    Tensor output;
    {
      NoGradGuard no_grad;
      output = T::forward(ctx.get(), std::forward<Args>(args)...);
    }
    return FunctionRecorder::finish(
        FunctionRecorder::demangle(typeid(T).name()), ctx, tensors, output,
        [](AutogradContext* c, std::vector<Tensor> grads) { return T::backward(c, std::move(grads)); });
  }

 private:
  template <typename A>
  static const Tensor* tensor_or_null(const A& a) {
    if constexpr (std::is_same_v<std::decay_t<A>, Tensor>) {
      return &a;
    } else {
      return nullptr;
    }
  }
};

}  // namespace hg::autograd
