// halfgrad's umbrella header, like libtorch's <torch/torch.h>:
//
//   #include <halfgrad/halfgrad.h>   // installed, or from the build tree
//
// brings the whole user API: tensors and factories, the differentiable ops and
// operators, custom functions (autograd::Function), gradcheck, autocast, CPU
// thread control (set_num_threads), modules and layers, safetensors, optimizers, LR
// schedules, gradient clipping, checkpoints, GradScaler, the data loaders and
// DLPack exchange.
// Each header can also be included on its own (<halfgrad/nn/layers.h>).
#pragma once

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/half.h"
#include "core/profiler.h"
#include "core/tensor.h"
#include "core/version.h"

#include "runtime/dlpack.h"

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/node.h"

#include "runtime/cpu/threads.h"

#include "nn/functional.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/module.h"
#include "nn/conv.h"
#include "nn/serialize.h"
#include "nn/transformer.h"

#include "optim/checkpoint.h"
#include "optim/clip_grad.h"
#include "optim/foreach.h"
#include "optim/lion.h"
#include "optim/lr_scheduler.h"
#include "optim/make_optimizer.h"
#include "optim/muon.h"
#include "optim/optimizer.h"

#include "amp/grad_scaler.h"

#include "data/dataloader.h"
#include "data/dataset.h"
#include "data/fashion_mnist.h"
#include "data/idx.h"
#include "data/npy.h"

#include "nn/models/cnn.h"
#include "nn/models/mlp.h"

#include "train/trainer.h"
