// A multi-layer perceptron: Linear-ReLU blocks and a Linear head (hg-train
// --model mlp: 784-256-128-10 on Fashion-MNIST, docs/training.md).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nn/layers.h"

namespace hg {
class Generator;
}

namespace hg::nn {

// sizes = {in, hidden..., out}: Linear(in, h1)-ReLU-...-Linear(hn, out), with biases.
std::shared_ptr<Sequential> make_mlp(const std::vector<int64_t>& sizes, Generator* gen);

}  // namespace hg::nn
