// The one Catch2 main for every test binary (compiled once per configuration).
//
// A binary whose tests need something this machine may lack is started with
// HG_TEST_REQUIRES=<comma list> (hg_add_test's REQUIRES in tests/CMakeLists.txt):
//   cuda   a CUDA device (always there in the emu build)
//   cudnn  a usable cuDNN (cudnnCreate succeeds; the emu build has a stand-in)
//   cpu-bf16  the native bf16 CPU GEMM (oneDNN on a CPU with AVX512_BF16 or
//          AMX, not switched off by HG_CPU_GEMM=widen / HG_CPU_ISA=generic)
//   cpu-f32-onednn  the f32 CPU GEMM through oneDNN (an AVX-512 CPU, not
//          switched off by HG_CPU_GEMM=widen|openblas / HG_CPU_ISA=generic)
//   cpu-contention  two cores or more, and the per-thread run-queue delay the
//          thread governor reads (/proc/self/task/<tid>/schedstat)
// When one is missing it prints why and exits with kSkipReturnCode, which CTest
// reports as skipped (SKIP_RETURN_CODE), not as passed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "kernels/gemm/gemm.h"
#include "runtime/cpu/threads.h"
#include "tests/skip.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/runtime.h"
#endif

namespace {

// Why this machine cannot meet `requirement` (empty: it can).
std::string missing(const std::string& requirement) {
  if (requirement == "cpu-bf16") {
    const std::string reason = hg::cpu::gemm_bf16_widen_reason();
    return reason.empty() ? "" : "bf16 CPU GEMMs widen to fp32 here: " + reason;
  }
  if (requirement == "cpu-f32-onednn") {
    const std::string reason = hg::cpu::gemm_f32_openblas_reason();
    return reason.empty() ? "" : "f32 CPU GEMMs take OpenBLAS here: " + reason;
  }
  if (requirement == "cpu-contention") {
    if (std::thread::hardware_concurrency() < 2) return "one core: no team to shrink";
    std::ifstream schedstat("/proc/self/task/" + std::to_string(gettid()) + "/schedstat");
    unsigned long long on_cpu = 0, waited = 0;
    if (!(schedstat >> on_cpu >> waited))
      return "no /proc/self/task/<tid>/schedstat (a kernel without CONFIG_SCHED_INFO)";
    return "";
  }
#if defined(HG_WITH_CUDA)
  if (requirement == "cuda" || requirement == "cudnn") {
    if (!hg::cuda::is_available()) return "no CUDA device available";
    if (requirement == "cuda") return "";
    try {
      (void)hg::cuda::cudnn_handle();
      return "";
    } catch (const std::exception& e) {
      return std::string("cuDNN is not usable here: ") + e.what();
    }
  }
#else
  if (requirement == "cuda" || requirement == "cudnn") return "built without the CUDA backend";
#endif
  return "unknown requirement '" + requirement +
         "' in HG_TEST_REQUIRES (cuda, cudnn, cpu-bf16, cpu-f32-onednn, cpu-contention)";
}

}  // namespace

int main(int argc, char* argv[]) {
  // Tests compare runs bit for bit, and OpenBLAS's and oneDNN's results may
  // depend on the team size the thread governor picks under load (ctest runs
  // tests side by side): the governor is off unless HG_THREAD_GOVERNOR=1. Its
  // own tests (tests/kernels/test_threads.cpp) turn it on.
  if (const char* g = std::getenv("HG_THREAD_GOVERNOR"); g == nullptr || std::strcmp(g, "1") != 0) {
    hg::set_thread_governor(false);
  }
  if (const char* requires_list = std::getenv("HG_TEST_REQUIRES"); requires_list != nullptr) {
    std::istringstream list(requires_list);
    for (std::string requirement; std::getline(list, requirement, ',');) {
      if (requirement.empty()) continue;
      const std::string why = missing(requirement);
      if (why.rfind("unknown requirement", 0) == 0) {
        std::fprintf(stderr, "%s\n", why.c_str());
        return 2;
      }
      if (!why.empty()) {
        std::printf("skipped (needs %s): %s\n", requirement.c_str(), why.c_str());
        return hg::test::kSkipReturnCode;
      }
    }
  }
  return Catch::Session().run(argc, argv);
}
