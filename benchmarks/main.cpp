// hg-bench — halfgrad's benchmark suite (docs/benchmarks.md).
//
//   hg-bench                          # every suite, on the GPU when there is one
//   hg-bench --quick gemm bandwidth   # two suites, smaller shapes
//   hg-bench --json results.jsonl     # also one JSON line per result
//   hg-bench --list                   # the workloads, one JSON line each
//   hg-bench --only gemm/f16/1024x1024x1024   # one workload (compare_torch.py)
//   hg-bench --quick --set gpu-check  # the few minutes of numbers scripts/gpu-check takes
//   hg-bench --profile train-gpt      # per-op and per-kernel tables of one step
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fnmatch.h>
#include <set>
#include <string>
#include <vector>

#include "benchmarks/harness.h"
#include "benchmarks/suites.h"
#include "core/error.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/runtime.h"
#endif

namespace {

const std::vector<std::string> kSuites = {"ceilings",  "gemm",      "bandwidth", "attention", "optimizer",
                                          "train-mlp", "train-cnn", "train-gpt", "accuracy",  "io"};

// Named sets of workloads (--set), as shell patterns over the workload names.
// gpu-check: what one short GPU run must bring back (scripts/gpu-check): the
// ceilings, GPT-2's GEMM shapes and two square ones, the memory-bound kernels
// of a training step in bf16, the fused optimizer, and the training steps that
// PyTorch is compared on (the small and the wide MLP, the char-GPT, GPT-2 124M).
struct NamedSet {
  const char* name;
  std::vector<const char*> patterns;
};
const std::vector<NamedSet> kSets = {
    {"gpu-check",
     {"ceilings/*",
      "gemm/bf16/4096x4096x4096",
      "gemm/f16/4096x4096x4096",
      "gemm/bf16/16384x*",
      "gemm/f16/16384x50*",
      "gemm/f8e4m3/*",
      "bandwidth/cast/f32->bf16/*",
      "bandwidth/add/bf16/*",
      "bandwidth/gelu/bf16/*",
      "bandwidth/softmax/*/8192x4096",
      "bandwidth/cross_entropy/bf16/*",
      "bandwidth/sum-rows/bf16/*",
      "bandwidth/layer_norm*/bf16/*",
      "bandwidth/copy*",
      "bandwidth/transpose*",
      "attention/*",
      "optimizer/adamw/bf16+f32-masters/*",
      "train-mlp/784-512-512-10/b64/amp-bf16",
      "train-mlp/4096-*/amp-bf16",
      "train-gpt/char/*/amp-bf16",
      "train-gpt/gpt2-124M/*/amp-bf16",
      "train-gpt/gpt2-124M/*/amp-f16",
      "train-gpt/gpt2-124M-v50257/*/amp-bf16"}},
};

bool in_set(const NamedSet& set, const std::string& name) {
  return std::any_of(set.patterns.begin(), set.patterns.end(),
                     [&](const char* p) { return fnmatch(p, name.c_str(), 0) == 0; });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hg-bench: halfgrad's benchmarks (timings against ceilings measured in the same run, and "
               "per-kernel error against f64)"};
  std::vector<std::string> suites;
  std::string device = "auto";
  hgb::Options o;
  bool list = false;
  app.add_option("suites", suites, "suites to run (default: all): " + [] {
    std::string s;
    for (const auto& x : kSuites) s += x + " ";
    return s;
  }());
  app.add_option("--suite,-s", suites, "a suite to run (repeatable; same as the positional names)");
  app.add_flag("--quick", o.quick, "smaller shapes (the same >= 20 timed runs): a few minutes on a CPU");
  app.add_option("--json", o.json_path, "append one JSON line per result to this file");
  app.add_option("--only", o.only, "run only these workloads (exact names from --list; repeatable)");
  std::string set_name;
  app.add_option("--set", set_name, "run only a named set of workloads: gpu-check (what scripts/gpu-check runs)");
  app.add_flag("--list", list, "print the selected workloads as JSON lines and exit");
  std::vector<std::string> ceilings_given;
  app.add_option("--ceiling", ceilings_given,
                 "KEY=VALUE (repeatable): a ceiling measured earlier in the same run (copy_gbps, gemm_f32, "
                 "gemm_f16, gemm_bf16), so that --only runs report fractions (compare_torch.py --hg-json)");
  app.add_option("--device", device, "cpu | cuda | auto (cuda in a gpu build with a GPU, else cpu)");
  app.add_option("--runs", o.runs, "timed runs per workload (median, min, max)")->check(CLI::Range(20, 100000));
  app.add_option("--warmup", o.warmup, "untimed warm-up calls per workload (default 3; 1 with --quick)")->check(CLI::Range(0, 1000));
  app.add_flag("--profile", o.profile,
               "profile one call of each workload (after the warm-ups, default 1) instead of timing it: tables by op "
               "and by kernel, the modelled time on --profile-gpu (docs/profiling.md)");
  app.add_option("--profile-gpu", o.profile_gpu, "the GPU of the modelled time: H200 (default), H100, A100, L4");
  app.add_option("--trace", o.trace_path, "with --profile: write a Chrome trace to PREFIX.<workload>.json");
  app.add_flag("--count-only", o.count_only,
               "with --profile on cuda-emu: record the launches without running them (the modelled time needs only "
               "their declared work; values are garbage)");
  app.add_option("--accuracy-inputs", o.accuracy_inputs,
                 "with the accuracy suite: write each workload's inputs to this existing directory (NAME.bin, "
                 "NAME.json; compare_torch.py runs PyTorch on the same values)")
      ->check(CLI::ExistingDirectory);
  CLI11_PARSE(app, argc, argv);
  if ((o.quick || o.profile) && app.count("--warmup") == 0) o.warmup = 1;

  try {
    if (device == "auto") {
      o.device = hg::Device::cpu();
#if defined(HG_WITH_CUDA) && !defined(HG_CUDA_EMU)
      if (hg::cuda::is_available()) o.device = hg::Device::cuda(0);
#endif
    } else {
      o.device = hg::Device::parse(device);
    }
    std::set<std::string> want;
    for (const auto& s : suites) {
      if (s == "all") {
        want.insert(kSuites.begin(), kSuites.end());
        continue;
      }
      HG_CHECK(
          std::find(kSuites.begin(), kSuites.end(), s) != kSuites.end(), "hg-bench: unknown suite '", s,
          "'; the suites are ceilings gemm bandwidth attention optimizer train-mlp train-cnn train-gpt accuracy io "
          "(or all)");
      want.insert(s);
    }
    if (want.empty()) want.insert(kSuites.begin(), kSuites.end());

    hgb::Bench bench(o);
    for (const auto& kv : ceilings_given) {
      const auto eq = kv.find('=');
      HG_CHECK(eq != std::string::npos && eq > 0, "hg-bench: --ceiling takes KEY=VALUE (e.g. copy_gbps=11.2), got '",
               kv, "'");
      char* end = nullptr;
      const double v = std::strtod(kv.c_str() + eq + 1, &end);
      HG_CHECK(end != nullptr && *end == '\0' && v > 0, "hg-bench: --ceiling ", kv,
               ": the value must be a positive number");
      bench.set_ceiling(kv.substr(0, eq), v);
    }
    std::vector<hgb::Workload> all, selected;
    // The ceilings are always registered: the other suites ask for them.
    std::vector<hgb::Workload> ceilings;
    hgb::add_ceilings(bench, ceilings);
    if (want.count("ceilings")) all.insert(all.end(), ceilings.begin(), ceilings.end());
    if (want.count("gemm")) hgb::add_gemm(bench, all);
    if (want.count("bandwidth")) hgb::add_bandwidth(bench, all);
    if (want.count("attention")) hgb::add_attention(bench, all);
    if (want.count("optimizer")) hgb::add_optimizer(bench, all);
    if (want.count("train-mlp")) hgb::add_train_mlp(bench, all);
    if (want.count("train-cnn")) hgb::add_train_cnn(bench, all);
    if (want.count("train-gpt")) hgb::add_train_gpt(bench, all);
    if (want.count("accuracy")) hgb::add_accuracy(bench, all);
    if (want.count("io")) hgb::add_io(bench, all);
    const NamedSet* set = nullptr;
    if (!set_name.empty()) {
      for (const auto& s : kSets) {
        if (set_name == s.name) set = &s;
      }
      HG_CHECK(set != nullptr, "hg-bench: unknown --set '", set_name, "'; the sets are: gpu-check");
    }
    for (auto& w : all) {
      if (set != nullptr && !in_set(*set, w.name)) continue;
      if (o.only.empty() || std::find(o.only.begin(), o.only.end(), w.name) != o.only.end()) selected.push_back(w);
    }
    if (!o.only.empty() && selected.size() != o.only.size()) {
      for (const auto& name : o.only) {
        const bool found = std::any_of(selected.begin(), selected.end(), [&](const auto& w) { return w.name == name; });
        HG_CHECK(found, "hg-bench: no workload named '", name, "' in the selected suites; hg-bench --list ",
                 o.quick ? "--quick " : "", "shows the names");
      }
    }
    if (list) {
      for (const auto& w : selected) {
        std::printf("%s\n", nlohmann::json{{"suite", w.suite}, {"name", w.name}, {"params", w.params}}.dump().c_str());
      }
      return 0;
    }
    std::printf("%s", bench.header().c_str());
    int failures = 0;
    for (const auto& w : selected) {
      try {
        bench.set_workload(w.name);
        w.run(bench, w);
      } catch (const std::exception& e) {
        ++failures;
        std::printf("%-44s FAILED: %s\n", w.name.c_str(), e.what());
        std::fflush(stdout);
      }
    }
    std::printf("\nhg-bench: %zu workloads, %d failed\n", selected.size(), failures);
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
