// The autocast policy table (kernels/amp_policy.h): defaults from the op list,
// run-time overrides (scoped, nested, from several threads), and docs/amp.md
// embedding exactly what hg-amp-policy --markdown prints.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kernels/amp_policy.h"

using namespace hg;
using Catch::Matchers::Contains;

TEST_CASE("amp policy: defaults come from the op list", "[amp][policy]") {
  for (int i = 0; i < kNumOps; ++i) {
    const auto op = static_cast<OpId>(i);
    CHECK(amp::policy().get(op) == default_amp_class(op));
    CHECK_FALSE(amp::policy().is_overridden(op));
    CHECK(amp::op_from_name(op_name(op)) == op);
  }
  // The PyTorch CUDA lists for the ops both libraries have.
  CHECK(amp::policy().get(OpId::matmul) == AmpClass::lower);
  for (OpId op :
       {OpId::exp, OpId::log, OpId::rsqrt, OpId::pow, OpId::softmax, OpId::log_softmax, OpId::sum, OpId::norm}) {
    CHECK(amp::policy().get(op) == AmpClass::fp32);
    CHECK(amp::PolicyTable::torch_class(op).substr(0, 4) == "fp32");
  }
  for (OpId op : {OpId::add, OpId::mul, OpId::where, OpId::maximum}) CHECK(amp::policy().get(op) == AmpClass::promote);
  for (OpId op : {OpId::relu, OpId::gelu, OpId::copy, OpId::max}) CHECK(amp::policy().get(op) == AmpClass::passthrough);
  // cross_entropy reads 16-bit logits itself (fp32 math inside): PyTorch's fp32 class, without the copy.
  CHECK(amp::policy().get(OpId::cross_entropy) == AmpClass::passthrough);
  CHECK(amp::PolicyTable::torch_class(OpId::cross_entropy).substr(0, 4) == "fp32");
  // Every default that departs from PyTorch says why.
  for (int i = 0; i < kNumOps; ++i) {
    const auto op = static_cast<OpId>(i);
    const std::string torch(amp::PolicyTable::torch_class(op));
    if (torch.rfind("backward", 0) == 0) continue;
    const bool same = torch.rfind(amp_class_name(default_amp_class(op)), 0) == 0;
    INFO(op_name(op) << ": " << torch);
    CHECK(same == amp::PolicyTable::difference(op).empty());
  }
  CHECK(amp::amp_class_from_name("banned") == AmpClass::banned);
  CHECK_FALSE(amp::op_from_name("no_such_op").has_value());
}

TEST_CASE("amp policy: overrides, RAII and nesting", "[amp][policy]") {
  {
    amp::PolicyOverride outer(OpId::matmul, AmpClass::fp32);
    CHECK(amp::policy().get(OpId::matmul) == AmpClass::fp32);
    CHECK_THAT(amp::policy().to_string(), Contains("fp32 (override; default lower)"));
    {
      amp::PolicyOverride inner(OpId::matmul, AmpClass::banned);
      CHECK(amp::policy().get(OpId::matmul) == AmpClass::banned);
    }
    CHECK(amp::policy().get(OpId::matmul) == AmpClass::fp32);
  }
  CHECK(amp::policy().get(OpId::matmul) == AmpClass::lower);
  CHECK_FALSE(amp::policy().is_overridden(OpId::matmul));
  amp::policy().set(OpId::relu, AmpClass::fp32);
  CHECK(amp::policy().get(OpId::relu) == AmpClass::fp32);
  amp::policy().reset_all();
  CHECK(amp::policy().get(OpId::relu) == AmpClass::passthrough);
}

TEST_CASE("amp policy: readers see either value while another thread overrides", "[amp][policy]") {
  std::thread writer([] {
    for (int i = 0; i < 20000; ++i) amp::PolicyOverride o(OpId::exp, AmpClass::lower);
  });
  for (int i = 0; i < 20000; ++i) {
    const AmpClass c = amp::policy().get(OpId::exp);
    REQUIRE((c == AmpClass::fp32 || c == AmpClass::lower));
  }
  writer.join();
  CHECK(amp::policy().get(OpId::exp) == AmpClass::fp32);
}

TEST_CASE("amp policy: docs/amp.md embeds hg-amp-policy --markdown", "[amp][policy][docs]") {
  std::ifstream in(std::string(HG_SOURCE_DIR) + "/docs/amp.md");
  REQUIRE(in.good());
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string doc = buffer.str();
  const std::string begin = "<!-- begin: hg-amp-policy --markdown -->\n", end = "<!-- end: hg-amp-policy -->";
  const size_t b = doc.find(begin), e = doc.find(end);
  REQUIRE(b != std::string::npos);
  REQUIRE(e != std::string::npos);
  const std::string embedded = doc.substr(b + begin.size(), e - b - begin.size());
  INFO("regenerate the table in docs/amp.md with: build/<preset>/examples/hg-amp-policy --markdown");
  CHECK(embedded == amp::policy().to_string(/*markdown=*/true));
}
