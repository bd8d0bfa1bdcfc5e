// The hg-bench suites. Each adds its workloads to `out` (nothing runs until
// the harness calls Workload::run, so `hg-bench --list` allocates nothing).
#pragma once

#include <vector>

#include "benchmarks/harness.h"

namespace hgb {

// ceilings: copy bandwidth, GEMM peak per dtype, per-launch overhead.
// Also defines the ceilings the other suites divide by.
void add_ceilings(Bench& b, std::vector<Workload>& out);
// gemm: f32/f16/bf16 at square sizes and GPT-2 shapes.
void add_gemm(Bench& b, std::vector<Workload>& out);
// bandwidth: casts, add, gelu, softmax, log_softmax, cross-entropy, reductions.
void add_bandwidth(Bench& b, std::vector<Workload>& out);
// attention: the flash path of scaled_dot_product_attention, forward and
// forward+backward TFLOP/s (benchmarks/attention_suites.cpp).
void add_attention(Bench& b, std::vector<Workload>& out);
// optimizer: AdamW over a GPT-2-small-sized parameter set.
void add_optimizer(Bench& b, std::vector<Workload>& out);
// train-mlp: full training steps of MLPs.
void add_train_mlp(Bench& b, std::vector<Workload>& out);
// train-cnn: full training steps of hg-train's CNN.
void add_train_cnn(Bench& b, std::vector<Workload>& out);
void add_train_gpt(Bench& b, std::vector<Workload>& out);
// io: checkpoint reading (the safetensors header parse at 10K-1M tensors).
void add_io(Bench& b, std::vector<Workload>& out);
// accuracy: ulp error against f64 per kernel family (no timing).
void add_accuracy(Bench& b, std::vector<Workload>& out);

#if defined(HG_WITH_CUDA)
// Launches an empty kernel `count` times on the current stream (empty_kernel.cu).
void launch_empty_kernels(int count);
#endif

}  // namespace hgb
