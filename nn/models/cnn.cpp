#include "nn/models/cnn.h"

#include <initializer_list>
#include <memory>

#include "nn/conv.h"

namespace hg::nn {

// Max-pooling before the ReLU gives the same function as after it (both are
// monotone) with a quarter of the ReLU work.
std::shared_ptr<Sequential> make_cnn(Generator* gen) {
  const Conv2dOptions pad1{.padding = {1, 1}};
  return std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<Unflatten>(Shape{1, 28, 28}), std::make_shared<Conv2d>(1, 32, 3, pad1, true, gen),
      std::make_shared<BatchNorm2d>(32), std::make_shared<MaxPool2d>(2), std::make_shared<ReLU>(),
      std::make_shared<Conv2d>(32, 64, 3, pad1, true, gen), std::make_shared<BatchNorm2d>(64),
      std::make_shared<MaxPool2d>(2), std::make_shared<ReLU>(), std::make_shared<Flatten>(1),
      std::make_shared<Linear>(64 * 7 * 7, 128, true, gen), std::make_shared<ReLU>(),
      std::make_shared<Linear>(128, 10, true, gen)});
}

}  // namespace hg::nn
