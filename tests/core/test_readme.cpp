// The README's "A quick look" snippet, compiled and run (keep the two in sync).
#include <catch2/catch.hpp>

#include <iostream>
#include <sstream>

#include "autograd/functions.h"
#include "core/tensor.h"

TEST_CASE("README quick look compiles and runs", "[core][docs]") {
  std::ostringstream captured;
  std::streambuf* old = std::cout.rdbuf(captured.rdbuf());
  // ---- begin README snippet ----
  hg::Tensor a = hg::arange(12).view({3, 4});      // f32, on the CPU
  hg::Tensor h = a.t().contiguous().to(hg::kF16);   // views share storage; casts round to nearest even
  std::cout << h << "\n";                           // prints like PyTorch
  hg::Tensor r = hg::randn({2, 3}, {.dtype = hg::kBF16});  // Philox: same numbers on CPU and CUDA

  hg::Tensor w = hg::randn({4, 3}).requires_grad_(true);    // autograd, PyTorch semantics
  hg::Tensor loss = hg::sum(hg::relu(hg::matmul(a, w)));    // fp32 accumulation everywhere
  loss.backward();                                          // w.grad() is d(loss)/dw
  // ---- end README snippet ----
  std::cout.rdbuf(old);
  CHECK(h.sizes() == hg::Shape{4, 3});
  CHECK(h.dtype() == hg::kF16);
  CHECK(r.dtype() == hg::kBF16);
  CHECK(w.grad().sizes() == hg::Shape{4, 3});
  CHECK(captured.str().rfind("tensor([[ 0.,  4.,  8.],", 0) == 0);
}
