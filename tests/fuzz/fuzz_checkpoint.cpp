// Training-checkpoint loader (optim/checkpoint.cpp) on a small MLP + AdamW:
// any bytes -> a load or an hg::Error, and a failed load must leave the model
// and the optimizer bit-identical (the load is atomic).
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "nn/layers.h"
#include "optim/checkpoint.h"
#include "tests/fuzz/fuzz.h"

namespace hg::fuzz {
namespace {

struct Setup {
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<optim::AdamW> opt;
};

// A fresh setup per input, so every input is reproducible on its own: the
// model and an optimizer that has taken one step (so it holds state a bad
// load could clobber).
Setup make_setup() {
  Generator gen(1);
  Setup out;
  out.model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 3, true, &gen), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Linear>(3, 2, true, &gen)});
  out.opt = std::make_unique<optim::AdamW>(out.model->parameters(), optim::AdamWOptions{.lr = 1e-3});
  for (Tensor p : out.model->parameters()) p.set_grad(full(p.sizes(), 0.5));
  out.opt->step();
  return out;
}

// The raw bytes of the model's and the optimizer's state (bytes, not values:
// a loaded NaN must compare equal to itself).
std::vector<std::pair<std::string, std::string>> snapshot(const Setup& s) {
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](const std::string& name, const Tensor& t) {
    const Tensor c = t.cpu().contiguous();
    out.emplace_back(name, std::string(static_cast<const char*>(c.data_ptr()), c.nbytes()));
  };
  for (const auto& [name, t] : s.model->state_dict()) add("model." + name, t);
  for (const auto& [name, t] : s.opt->state_dict()) add("optim." + name, t);
  return out;
}

}  // namespace

int fuzz_checkpoint(const uint8_t* data, size_t size) {
  Setup s = make_setup();
  const auto before = snapshot(s);
  try {
    optim::load_training_checkpoint(input_file(data, size), *s.model, *s.opt);
  } catch (const Error&) {
    if (snapshot(s) != before) finding("a failed load_training_checkpoint changed the model or the optimizer");
  }
  return 0;
}

}  // namespace hg::fuzz
