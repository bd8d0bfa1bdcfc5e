// A small convolutional net for 28x28 grey images (hg-train --model cnn,
// docs/training.md, "The CNN").
#pragma once

#include <memory>

#include "nn/layers.h"

namespace hg {
class Generator;
}

namespace hg::nn {

// [B, 784] -> [B, 1, 28, 28] -> conv(1->32, 3x3, pad 1)-BN-maxpool 2-ReLU
// -> conv(32->64, 3x3, pad 1)-BN-maxpool 2-ReLU -> flatten [B, 3136]
// -> linear(3136->128)-ReLU -> linear(128->10). 421,834 parameters.
std::shared_ptr<Sequential> make_cnn(Generator* gen);

}  // namespace hg::nn
