// Precision modes of a training run (docs/training.md, docs/amp.md): what the
// weights are stored in, whether the forward runs under hg::amp::Autocast and
// in which dtype, and whether a GradScaler scales the loss.
//
//   fp32         everything f32, no autocast, no scaler;
//   fp16-master, bf16-master
//                the model itself in 16 bits, fp32 master weights in the
//                optimizer, the forward under Autocast (so the fp32-class ops
//                run in fp32) and a GradScaler;
//   amp-fp16     fp32 weights, the forward under Autocast (matmuls in 16
//                bits, softmax and losses in fp32) and a GradScaler (the
//                seed recipe, torch.amp's fp16 one);
//   amp-bf16     the same in bf16, without a GradScaler (PyTorch's bf16
//                recipe: bf16 has f32's range);
//   amp-fp8      amp-bf16 with a GradScaler, plus the eligible nn::Linear layers (both dims
//                multiples of 16, not kept by TrainerOptions::fp8_keep) in
//                fp8 through amp::Fp8Training (delayed scaling, E4M3 forward,
//                E5M2 gradients; docs/amp.md); a GPU needs fp8 GEMMs (sm_89+),
//                a CPU runs them on the exact f32 reference;
//   auto         resolve_precision: amp-bf16 where bf16 matmuls are native,
//                else fp32 on a CPU and amp-fp16 on a GPU.
//
// A new mode is one row of kPrecisionModes (precision.cpp) and, if it needs
// one, a field of Precision.
#pragma once

#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"

namespace hg::train {

struct Precision {
  DType weights = kF32;  // parameters and input data
  bool autocast = false;
  DType autocast_dtype = kF16;  // the autocast region's dtype
  bool scaler = false;          // a GradScaler scales the loss (its state travels in the checkpoint)
  bool fp8 = false;             // eligible Linear layers in fp8 (amp::Fp8Training; its state travels too)
};

// The modes by name, in the order a help text lists them (without "auto").
std::vector<std::string> precision_names();
// The mode called `name`; an hg::Error naming the known modes for any other
// name ("auto" included: resolve it first).
Precision precision_of(const std::string& name);
// "auto" -> amp-bf16 where bf16 matmuls are native (a GPU with bf16, a CPU
// with AVX512_BF16/AMX through oneDNN), else amp-fp16 on a GPU and fp32 on a
// CPU (where 16-bit matmuls widen to f32 and cost time); other names unchanged.
std::string resolve_precision(const std::string& name, Device device);
// True when bf16 matmuls on `device` run natively (a CPU: oneDNN's bf16 path).
bool native_bf16_matmul(Device device);

// "auto" is the first GPU when there is one, else the CPU; anything else
// Device::parse.
Device pick_device(const std::string& name);

}  // namespace hg::train
