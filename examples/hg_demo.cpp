// hg_demo — a tour of the core tensor: factories, views, fp16/bf16 casts,
// seeded random numbers, and the errors bad input gets. `./run train` runs it
// until the training job exists.
#include <iostream>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"

int main() {
  using namespace hg;
  std::cout << "halfgrad core demo (the training job arrives with a later issue)\n\n";

  Tensor a = arange(12).view({3, 4});
  std::cout << "a = arange(12).view({3, 4}):\n" << a << "\n\n";
  std::cout << "a.t() is a view (shares storage: " << std::boolalpha
            << a.t().shares_storage_with(a) << "), strides "
            << shape_to_string(a.t().strides()) << ":\n" << a.t() << "\n\n";
  std::cout << "a.slice(1, 1, 4, 2):\n" << a.slice(1, 1, 4, 2) << "\n\n";

  Tensor x = from_vector(std::vector<float>{0.1f, 1.0f / 3, 65519.0f, 65520.0f, 1e-8f});
  std::cout << "fp32 values " << x << "\n";
  std::cout << "  as f16    " << x.to(kF16) << "\n";
  std::cout << "  as bf16   " << x.to(kBF16) << "\n\n";

  manual_seed(42);
  std::cout << "randn({2, 3}) with seed 42:\n" << randn({2, 3}) << "\n\n";

  try {
    a.view({5, 5});
  } catch (const Error& e) {
    std::cout << "a.view({5, 5}) throws hg::Error:\n  " << e.what() << "\n";
  }
  return 0;
}
