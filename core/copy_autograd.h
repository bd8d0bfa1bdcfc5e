// Note [Copy autograd hook]
// The copying members of Tensor (contiguous, clone, to(dtype), to(device))
// record autograd like the free functions hg::contiguous and hg::to: core
// cannot include autograd (floor 2), so autograd installs a hook at load time
// (autograd/functions_views.cpp), as it does for the views (Note [View
// autograd hook] in core/tensor.h). Without them o.transpose(1, 2)
// .contiguous().view(...) cut the graph: the layers before it got no
// gradient and no error.
#pragma once

#include "core/tensor.h"

namespace hg {

// Called with the source and the fresh copy when the source requires grad;
// `name` is the member ("contiguous", "clone", "to_dtype", "to_device").
// The hook records the node when grad mode is on.
using CopyAutogradHook = void (*)(const Tensor& source, const Tensor& copy, const char* name);
void register_copy_autograd_hook(CopyAutogradHook hook);

// Note [In-place members and autograd]
// halfgrad records no in-place write in the graph, so the in-place members
// (fill_, zero_, copy_) refuse, while grad mode is on, the writes PyTorch
// refuses and the ones it would record: a leaf that requires grad (PyTorch's
// "a leaf Variable that requires grad is being used in an in-place
// operation"), a tensor made by a recorded op (a later backward would use
// the overwritten values), and copy_ from a source that requires grad (the
// gradient would stop at dst). as_strided, which records no backward either,
// refuses a tensor that requires grad. Under hg::NoGradGuard they all work
// as before, which is how initialisers and optimizers change parameters;
// kernels take as_strided views of x.detach(). A write to a tensor a saved
// backward needs is caught at backward time by the version counter, as in
// PyTorch. The check lives in autograd (it knows grad mode), installed like
// the copy hook; `src` is null except for copy_.
using UnrecordedAutogradHook = void (*)(const Tensor& self, const Tensor* src, const char* name);
void register_unrecorded_autograd_hook(UnrecordedAutogradHook hook);
// Calls the hook when self or src requires grad (the members call it first).
void check_unrecorded_member(const Tensor& self, const Tensor* src, const char* name);

}  // namespace hg
