#include "nn/models/mlp.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "core/error.h"

namespace hg::nn {

std::shared_ptr<Sequential> make_mlp(const std::vector<int64_t>& sizes, Generator* gen) {
  HG_CHECK(sizes.size() >= 2, "make_mlp: give at least the input and output sizes, got ", sizes.size(), " size(s)");
  auto mlp = std::make_shared<Sequential>();
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    if (i > 0) mlp->push_back(std::make_shared<ReLU>());
    mlp->push_back(std::make_shared<Linear>(sizes[i], sizes[i + 1], true, gen));
  }
  return mlp;
}

}  // namespace hg::nn
