// The README's "A quick look" snippet, compiled and run (keep the two in sync;
// docs/libtorch.md shows the libtorch equivalent beside it).
#include <catch2/catch.hpp>

#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <halfgrad/halfgrad.h>

TEST_CASE("README quick look compiles and runs", "[core][docs]") {
  std::ostringstream captured;
  std::streambuf* old = std::cout.rdbuf(captured.rdbuf());
  // ---- begin README snippet ----
  using namespace hg;
  Tensor a = arange(12).view({3, 4});            // f32, on the CPU
  Tensor h = a.t().contiguous().to(kF16);        // views share storage; casts round to nearest even
  std::cout << h << "\n";                        // prints like PyTorch
  Tensor b = tensor({{1.0, -2.0}, {3.0, 4.0}});  // f32 from nested braces (integers give i64)
  Tensor r = randn({2, 3}, {.dtype = kBF16});    // Philox: same numbers on CPU and CUDA

  auto model = std::make_shared<nn::Sequential>(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 3));
  std::cout << *model << "\n";                                  // Sequential(\n  (0): Linear(in_features=4, ...
  Tensor logits = model->forward(a);                            // [3, 3]; autograd, PyTorch semantics
  Tensor loss = logits.log_softmax().mean().neg();              // methods, or free functions: hg::mean(x)
  loss.backward();                                              // every parameter's grad() is d(loss)/dp
  Tensor hits = (logits.argmax(1) == tensor({0, 1, 2})).sum();  // comparisons give bool tensors
  profiler::Profile prof;                                       // records each op and kernel (docs/profiling.md)
  model->forward(a).sum().backward();                           // any code: here a forward and backward
  prof.stop();                                                  // reads the device clock once
  std::cout << prof.table();                                    // time, bytes and FLOPs per op and per kernel
  // ---- end README snippet ----
  std::cout.rdbuf(old);
  CHECK(h.sizes() == Shape{4, 3});
  CHECK(h.dtype() == kF16);
  CHECK(b.dtype() == kF32);
  CHECK(b.to_vector<float>() == std::vector<float>{1, -2, 3, 4});
  CHECK(r.dtype() == kBF16);
  for (const Tensor& p : model->parameters()) CHECK(p.grad().sizes() == p.sizes());
  CHECK(hits.numel() == 1);
  CHECK(hits.dtype() == kI64);
  CHECK(!prof.records().empty());
  const std::string out = captured.str();
  CHECK(out.find("by kernel") != std::string::npos);
  CHECK(out.rfind("tensor([[ 0.,  4.,  8.],", 0) == 0);
  CHECK(out.find("Sequential(\n  (0): Linear(in_features=4, out_features=8, bias=true)\n  (1): ReLU()\n") !=
        std::string::npos);
}
