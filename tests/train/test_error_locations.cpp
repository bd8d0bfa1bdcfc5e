// Where an hg::Error says it was raised: "(at floor/file.cpp:line)", a path
// from the repository root, never the build machine's folders. One error is
// raised in each floor of docs/architecture.md (core/error.cpp, short_path).
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "amp/grad_scaler.h"
#include "autograd/engine.h"
#include "core/error.h"
#include "core/tensor.h"
#include "data/dataset.h"
#include "distributed/ddp.h"
#include "kernels/gemm/gemm.h"
#include "nn/layers.h"
#include "optim/optimizer.h"
#include "runtime/dlpack.h"
#include "train/run_folder.h"

namespace hg {
namespace {

// The location an error names: the file of "(at file:line)" at the end of
// what(), and Error::file(), which must agree.
std::string location_of(const std::function<void()>& raise) {
  try {
    raise();
  } catch (const Error& e) {
    const std::string what = e.what();
    std::smatch m;
    REQUIRE(std::regex_search(what, m, std::regex(R"(\(at ([^():]+):[0-9]+\)$)")));
    CHECK(m[1].str() == std::string(e.file()));
    return m[1].str();
  }
  FAIL("no hg::Error was raised");
  return "";
}

}  // namespace

TEST_CASE("an error names its source file from the repository root, in every floor", "[error]") {
  const std::string root = std::filesystem::current_path().root_path().string();
  const std::vector<std::pair<std::string, std::function<void()>>> raisers = {
      {"core/",
       [] {
         (void)zeros({2, 3}).view({7});
       }},
      {"runtime/", [] { (void)to_dlpack(zeros({2}), {.stream = 5}); }},
      {"kernels/",
       [] {
         (void)ops::matmul(zeros({2, 3}), zeros({4, 5}));
       }},
      {"autograd/", [] { autograd::backward(Tensor()); }},
      {"nn/", [] { nn::Linear(0, 3); }},
      {"optim/", [] { optim::AdamW({zeros({2}).requires_grad_()}, {.lr = -1.0}); }},
      {"data/", [] { data::TensorDataset({}); }},
      {"amp/", [] { amp::GradScaler(amp::GradScalerOptions{.growth_factor = 0.5}); }},
      {"distributed/", [] { distributed::DistributedDataParallel(nullptr); }},
      {"train/",
       [] {
         const auto file = std::filesystem::temp_directory_path() / "hg_error_locations_not_a_folder";
         {
           std::FILE* f = std::fopen(file.c_str(), "w");
           REQUIRE(f != nullptr);
           std::fclose(f);
         }
         try {
           train::RunFolder(file.string(), train::StartMode::kFresh);
         } catch (...) {
           std::filesystem::remove(file);
           throw;
         }
       }},
  };
  for (const auto& [floor, raise] : raisers) {
    INFO("floor " << floor);
    const std::string where = location_of(raise);
    CHECK(where.rfind(floor, 0) == 0);  // starts with the floor's folder
    CHECK(where.find(root) != 0);       // relative: not from the file system's root
  }
}

}  // namespace hg
