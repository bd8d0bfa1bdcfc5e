// A program outside halfgrad's tree, built against an installed halfgrad
// (tests/install/check_install.cmake: through find_package and pkg-config).
#include <halfgrad/halfgrad.h>

#include <iostream>
#include <memory>

int main() {
  using namespace hg;
  manual_seed(0);
  auto model = std::make_shared<nn::Sequential>(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 2));
  optim::AdamW opt(model->parameters(), {.lr = 1e-2});
  const Tensor x = randn({16, 4});
  const Tensor y = (x.sum(1) > 0.0).to(kI64);  // label: is the row's sum positive?
  double first = 0, last = 0;
  for (int step = 0; step < 50; ++step) {
    opt.zero_grad();
    Tensor loss = cross_entropy(model->forward(x), y);
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  std::cout << *model << "\nloss " << first << " -> " << last << "\n";
  return last < first ? 0 : 1;
}
