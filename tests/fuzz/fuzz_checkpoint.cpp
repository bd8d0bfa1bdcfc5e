// Training-checkpoint loader (optim/checkpoint.cpp) on a small MLP + AdamW:
// any bytes -> a load or an hg::Error, and a failed load must leave the model
// and the optimizer bit-identical (the load is atomic).
#include <memory>
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

Setup& setup() {
  static Setup s = [] {
    Generator gen(1);
    Setup out;
    out.model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(4, 3, true, &gen), std::make_shared<nn::ReLU>(),
        std::make_shared<nn::Linear>(3, 2, true, &gen)});
    out.opt = std::make_unique<optim::AdamW>(out.model->parameters(), optim::AdamWOptions{.lr = 1e-3});
    return out;
  }();
  return s;
}

// Every byte of the model's and the optimizer's state, by name.
std::vector<std::pair<std::string, std::vector<double>>> snapshot(const Setup& s) {
  std::vector<std::pair<std::string, std::vector<double>>> out;
  for (const auto& [name, t] : s.model->state_dict()) out.emplace_back("model." + name, t.to_vector<double>());
  for (const auto& [name, t] : s.opt->state_dict()) out.emplace_back("optim." + name, t.to_vector<double>());
  return out;
}

}  // namespace

int fuzz_checkpoint(const uint8_t* data, size_t size) {
  Setup& s = setup();
  const auto before = snapshot(s);
  try {
    optim::load_training_checkpoint(input_file(data, size), *s.model, *s.opt);
  } catch (const Error&) {
    if (snapshot(s) != before) finding("a failed load_training_checkpoint changed the model or the optimizer");
  }
  return 0;
}

}  // namespace hg::fuzz
