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

}  // namespace hg
