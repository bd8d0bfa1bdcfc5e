// Every public member of Tensor either carries the gradient (checked against
// central finite differences in f64) or refuses while grad mode is on; none
// silently cuts the graph (Note [Copy autograd hook], Note [In-place members
// and autograd] in core/copy_autograd.h). The member list is read from
// core/tensor.h itself, so a new member fails this test until it is
// classified here, and the classification is compared with PyTorch's.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "nn/layers.h"
#include "tests/kernels/test_support.h"

using namespace hg;
using namespace hg::test;

namespace {

// What a member does with autograd.
enum class Grad {
  kFlows,    // records its backward: gradcheck below
  kRefuses,  // in-place or raw: refuses while grad mode is on and an operand requires grad
  kNone,     // no derivative: metadata, integer results, bookkeeping, the engine itself
};

// Every public member of class Tensor in core/tensor.h (the constructor and
// friends excluded). The reading is simple on purpose: one declaration per
// line, the name before the first '('.
std::set<std::string> tensor_members_from_header() {
  std::ifstream in(std::string(HG_SOURCE_DIR) + "/core/tensor.h");
  REQUIRE(in.good());
  std::set<std::string> names;
  const std::regex decl(
      R"(^\s+(?:template\s*<[^>]*>\s*)?(?:const\s+)?[\w:][\w:<>, ]*?[&*]?\s+[&*]?(operator\[\]|\w+)\s*\()");
  bool in_class = false;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("class Tensor {", 0) == 0) in_class = true;
    if (!in_class) continue;
    if (line.rfind(" private:", 0) == 0 || line.rfind("};", 0) == 0) break;
    if (line.find("friend") != std::string::npos) continue;
    std::smatch m;
    if (std::regex_search(line, m, decl) && m[1] != "Tensor") names.insert(m[1]);
  }
  return names;
}

// halfgrad's classification of each member.
const std::map<std::string, Grad>& classification() {
  static const std::map<std::string, Grad> table = {
      // metadata and storage access
      {"defined", Grad::kNone},
      {"dim", Grad::kNone},
      {"sizes", Grad::kNone},
      {"strides", Grad::kNone},
      {"size", Grad::kNone},
      {"stride", Grad::kNone},
      {"offset", Grad::kNone},
      {"numel", Grad::kNone},
      {"dtype", Grad::kNone},
      {"device", Grad::kNone},
      {"element_size", Grad::kNone},
      {"nbytes", Grad::kNone},
      {"is_contiguous", Grad::kNone},
      {"is_cpu", Grad::kNone},
      {"is_cuda", Grad::kNone},
      {"storage", Grad::kNone},
      {"shares_storage_with", Grad::kNone},
      {"shape_str", Grad::kNone},
      {"impl_ptr", Grad::kNone},
      {"impl_shared", Grad::kNone},
      {"data_ptr", Grad::kNone},
      {"data", Grad::kNone},
      {"version", Grad::kNone},
      {"bump_version", Grad::kNone},
      {"options", Grad::kNone},
      {"item", Grad::kNone},
      {"to_vector", Grad::kNone},
      {"argmax", Grad::kNone},
      // autograd bookkeeping and the engine
      {"requires_grad", Grad::kNone},
      {"requires_grad_", Grad::kNone},
      {"grad", Grad::kNone},
      {"set_grad", Grad::kNone},
      {"set_data", Grad::kNone},
      {"is_leaf", Grad::kNone},
      {"detach", Grad::kNone},
      {"backward", Grad::kNone},
      // views
      {"view", Grad::kFlows},
      {"reshape", Grad::kFlows},
      {"flatten", Grad::kFlows},
      {"transpose", Grad::kFlows},
      {"t", Grad::kFlows},
      {"permute", Grad::kFlows},
      {"slice", Grad::kFlows},
      {"narrow", Grad::kFlows},
      {"select", Grad::kFlows},
      {"operator[]", Grad::kFlows},
      {"expand", Grad::kFlows},
      {"squeeze", Grad::kFlows},
      {"unsqueeze", Grad::kFlows},
      {"as_strided", Grad::kRefuses},
      // copies
      {"contiguous", Grad::kFlows},
      {"clone", Grad::kFlows},
      {"to", Grad::kFlows},
      {"cpu", Grad::kFlows},
      {"copy_", Grad::kRefuses},
      {"fill_", Grad::kRefuses},
      {"zero_", Grad::kRefuses},
      // the libtorch-style methods
      {"sum", Grad::kFlows},
      {"mean", Grad::kFlows},
      {"max", Grad::kFlows},
      {"min", Grad::kFlows},
      {"relu", Grad::kFlows},
      {"exp", Grad::kFlows},
      {"log", Grad::kFlows},
      {"sqrt", Grad::kFlows},
      {"abs", Grad::kFlows},
      {"neg", Grad::kFlows},
      {"tanh", Grad::kFlows},
      {"sigmoid", Grad::kFlows},
      {"round", Grad::kFlows},
      {"floor", Grad::kFlows},
      {"trunc", Grad::kFlows},
      {"pow", Grad::kFlows},
      {"softmax", Grad::kFlows},
      {"log_softmax", Grad::kFlows},
      {"matmul", Grad::kFlows},
      {"add", Grad::kFlows},
      {"sub", Grad::kFlows},
      {"mul", Grad::kFlows},
      {"div", Grad::kFlows},
  };
  return table;
}

// The members above that torch.Tensor differentiates (each has an entry in
// PyTorch's tools/autograd/derivatives.yaml, or is a view or copy autograd
// tracks: view, reshape, t, contiguous, to, cpu, ...). Written by hand: the
// machines that run this test have no PyTorch. In PyTorch fill_, zero_ and
// copy_ record on a non-leaf; halfgrad refuses them instead (kRefuses).
const std::set<std::string> kTorchDifferentiable = {
    "view",      "reshape", "flatten",   "transpose",  "t",          "permute", "slice",   "narrow",      "select",
    "expand",    "squeeze", "unsqueeze", "as_strided", "contiguous", "clone",   "to",      "cpu",         "copy_",
    "fill_",     "zero_",   "sum",       "mean",       "max",        "min",     "relu",    "exp",         "log",
    "sqrt",      "abs",     "neg",       "tanh",       "sigmoid",    "pow",     "softmax", "log_softmax", "matmul",
    "add",       "sub",     "mul",       "div",        "round",      "floor",   "trunc",  // zeros_like(grad)
    "operator[]"};                                                                        // torch.Tensor.__getitem__

using V = const std::vector<Tensor>&;
using Fn = std::function<Tensor(V)>;

struct MemberCase {
  std::string member;
  std::string what;
  std::vector<Shape> shapes;
  Fn fn;
  Domain domain = Domain::kAny;
};

// At least one gradcheck case per kFlows member, through the member itself.
std::vector<MemberCase> member_cases() {
  std::vector<MemberCase> c;
  c.push_back({"view", "view", {{3, 4}}, [](V x) { return x[0].view({2, 6}).exp(); }});
  c.push_back(
      {"reshape", "reshape of a transpose (copies)", {{3, 4}}, [](V x) { return x[0].t().reshape({12}) * 2.0; }});
  c.push_back({"flatten", "flatten", {{2, 3, 2}}, [](V x) { return x[0].flatten(1).tanh(); }});
  c.push_back({"transpose", "transpose", {{2, 3, 4}}, [](V x) { return x[0].transpose(0, 2).exp(); }});
  c.push_back({"t", "t", {{3, 4}}, [](V x) { return x[0].t().matmul(x[0]); }});
  c.push_back({"permute", "permute", {{2, 3, 4}}, [](V x) { return x[0].permute({2, 0, 1}).sigmoid(); }});
  c.push_back({"slice", "slice with a step", {{5, 4}}, [](V x) { return x[0].slice(0, 1, 5, 2).exp(); }});
  c.push_back({"narrow", "narrow", {{5, 4}}, [](V x) { return x[0].narrow(1, 1, 2) * 3.0; }});
  c.push_back({"select", "select -1", {{5, 4}}, [](V x) { return x[0].select(0, -1).tanh(); }});
  c.push_back({"expand", "expand", {{3, 1}}, [](V x) { return x[0].expand({2, 3, 4}) * x[0].expand({2, 3, 4}); }});
  c.push_back({"squeeze", "squeeze() and squeeze(d)", {{3, 1, 4, 1}}, [](V x) {
                 return x[0].squeeze(3).exp() + x[0].squeeze().unsqueeze(1).unsqueeze(3);
               }});
  c.push_back({"unsqueeze", "unsqueeze", {{3, 4}}, [](V x) { return x[0].unsqueeze(0).exp(); }});
  c.push_back({"contiguous", "contiguous of a transpose", {{3, 4}}, [](V x) {
                 return x[0].transpose(0, 1).contiguous().exp();
               }});
  c.push_back(
      {"contiguous", "the attention idiom o.transpose(1, 2).contiguous().view(B, T, C)", {{2, 2, 3, 2}}, [](V x) {
         return x[0].transpose(1, 2).contiguous().view({2, 3, 4}).tanh();
       }});
  c.push_back({"clone", "clone", {{3, 4}}, [](V x) { return x[0].clone() * x[0]; }});
  c.push_back({"to", "to(kF64) and to(cpu) of an f64 cpu tensor (self)", {{3, 4}}, [](V x) {
                 return x[0].to(kF64).to(Device::cpu()).exp();
               }});
  c.push_back({"cpu", "cpu() of a cpu tensor (self)", {{3, 4}}, [](V x) { return x[0].cpu().exp(); }});
  c.push_back({"sum", "sum all, sum(d), sum(dims, keepdim)", {{2, 3, 4}}, [](V x) {
                 return x[0].sum(1).sum(0) * x[0].sum({0, 2}, true) + x[0].sum();
               }});
  c.push_back({"mean", "mean(d), mean(dims)", {{2, 3, 4}}, [](V x) {
                 return x[0].mean(2) * x[0].mean(std::vector<int64_t>{0}).mean(1);
               }});
  c.push_back({"max", "max(d) and max()", {{3, 5}}, [](V x) { return std::get<0>(x[0].max(1)) + x[0].max(); }});
  c.push_back({"min", "min(d, keepdim) and min(dims)", {{3, 5}}, [](V x) {
                 return std::get<0>(x[0].min(1, true)) * x[0].min(std::vector<int64_t>{0});
               }});
  c.push_back({"relu", "relu", {{3, 4}}, [](V x) { return x[0].relu(); }});
  c.push_back({"exp", "exp", {{3, 4}}, [](V x) { return x[0].exp(); }});
  c.push_back({"log", "log", {{3, 4}}, [](V x) { return x[0].log(); }, Domain::kPositive});
  c.push_back({"sqrt", "sqrt", {{3, 4}}, [](V x) { return x[0].sqrt(); }, Domain::kPositive});
  c.push_back({"abs", "abs", {{3, 4}}, [](V x) { return x[0].abs(); }});
  c.push_back({"neg", "neg and unary -", {{3, 4}}, [](V x) { return x[0].neg() * -x[0]; }});
  c.push_back({"tanh", "tanh", {{3, 4}}, [](V x) { return x[0].tanh(); }});
  c.push_back({"sigmoid", "sigmoid", {{3, 4}}, [](V x) { return x[0].sigmoid(); }});
  // d/dx (x * floor(x)) = floor(x): the rounding ops' zero gradient under a product.
  c.push_back({"round", "x * round(x)", {{3, 4}}, [](V x) { return x[0] * x[0].round(); }});
  c.push_back({"floor", "x * floor(x)", {{3, 4}}, [](V x) { return x[0] * x[0].floor(); }});
  c.push_back({"trunc", "x * trunc(x)", {{3, 4}}, [](V x) { return x[0] * x[0].trunc(); }});
  c.push_back({"pow", "pow 2.5", {{3, 4}}, [](V x) { return x[0].pow(2.5); }, Domain::kPositive});
  c.push_back({"softmax", "softmax (last dim)", {{3, 5}}, [](V x) { return x[0].softmax(); }});
  c.push_back({"softmax", "softmax(0)", {{3, 5}}, [](V x) { return x[0].softmax(0); }});
  c.push_back({"log_softmax", "log_softmax (last dim)", {{3, 5}}, [](V x) { return x[0].log_softmax(); }});
  c.push_back({"log_softmax", "log_softmax(0)", {{3, 5}}, [](V x) { return x[0].log_softmax(0); }});
  c.push_back({"operator[]", "x[1][-1] (select along dim 0)", {{3, 4, 2}}, [](V x) { return x[0][1][-1].exp(); }});
  c.push_back({"matmul", "matmul", {{3, 5}, {5, 2}}, [](V x) { return x[0].matmul(x[1]); }});
  c.push_back({"add", "add broadcast and +", {{3, 4}, {4}}, [](V x) { return x[0].add(x[1]) + x[1]; }});
  c.push_back({"sub", "sub and -", {{3, 4}, {3, 4}}, [](V x) { return x[0].sub(x[1]) - x[0] * 2.0; }});
  c.push_back({"mul", "mul and *", {{3, 4}, {3, 1}}, [](V x) { return x[0].mul(x[1]) * x[0]; }});
  c.push_back({"div", "div and /", {{3, 4}, {3, 4}}, [](V x) { return x[0].div(x[1]) / 2.0; }, Domain::kPositive});
  return c;
}

std::vector<Tensor> inputs_for(const MemberCase& c, uint64_t seed) {
  std::vector<Tensor> in;
  for (const Shape& s : c.shapes) in.push_back(make_input(s, kF64, c.domain, seed++).requires_grad_(true));
  return in;
}

// A small attention block, written once with Tensor members (the PyTorch
// idiom) and once with the hg:: free functions; returns the loss.
Tensor attention_loss(const Tensor& x, nn::Linear& qkv, nn::Linear& proj, bool members) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), H = 2, D = C / H;
  const Tensor packed = qkv.forward(x);
  Tensor o;
  if (members) {
    const Tensor heads = packed.view({B, T, 3, H, D}).permute({2, 0, 3, 1, 4});
    const Tensor q = heads.select(0, 0), k = heads.select(0, 1), v = heads.select(0, 2);
    const Tensor att = (q.matmul(k.transpose(-2, -1)) * (1.0 / std::sqrt(double(D)))).softmax();
    o = att.matmul(v).transpose(1, 2).contiguous().view({B, T, C});
  } else {
    const Tensor heads = hg::permute(hg::view(packed, {B, T, 3, H, D}), {2, 0, 3, 1, 4});
    const Tensor q = hg::select(heads, 0, 0), k = hg::select(heads, 0, 1), v = hg::select(heads, 0, 2);
    const Tensor att = hg::softmax(hg::matmul(q, hg::transpose(k, -2, -1)) * (1.0 / std::sqrt(double(D))));
    o = hg::view(hg::contiguous(hg::transpose(hg::matmul(att, v), 1, 2)), {B, T, C});
  }
  return hg::sum(x + proj.forward(o));
}

}  // namespace

TEST_CASE("every public Tensor member is classified, and the classes agree with PyTorch's", "[autograd][members]") {
  const std::set<std::string> members = tensor_members_from_header();
  REQUIRE(members.size() >= 70);  // the reading found the class (78 members when written)
  const auto& table = classification();
  for (const std::string& m : members) {
    INFO("Tensor::" << m
                    << " is public in core/tensor.h: classify it in this test (kFlows with a gradcheck "
                       "case, kRefuses with a refusal case, or kNone)");
    CHECK(table.count(m) == 1);
  }
  for (const auto& [name, grad] : table) {
    INFO("Tensor::" << name << " is classified here but is not a member any more");
    CHECK(members.count(name) == 1);
  }
  // What PyTorch differentiates never cuts the graph silently here.
  for (const std::string& m : kTorchDifferentiable) {
    INFO("torch.Tensor." << m << " is differentiable in PyTorch");
    REQUIRE(table.count(m) == 1);
    CHECK(table.at(m) != Grad::kNone);
  }
  for (const auto& [name, grad] : table) {
    INFO("Tensor::" << name << " records a backward, so PyTorch's list above should have it");
    if (grad != Grad::kNone) CHECK(kTorchDifferentiable.count(name) == 1);
  }
}

TEST_CASE("every differentiable Tensor member passes gradcheck (f64, cpu)", "[autograd][members][gradcheck]") {
  const std::vector<MemberCase> cases = member_cases();
  std::set<std::string> covered;
  for (const MemberCase& c : cases) {
    INFO("Tensor::" << c.member << ": " << c.what);
    const std::vector<Tensor> in = inputs_for(c, 21);
    CHECK(c.fn(in).requires_grad());
    CHECK(gradcheck(c.fn, in) == "");
    covered.insert(c.member);
  }
  for (const auto& [name, grad] : classification()) {
    INFO("Tensor::" << name << " is kFlows but has no gradcheck case");
    if (grad == Grad::kFlows) CHECK(covered.count(name) == 1);
  }
}

TEST_CASE("the PyTorch attention idiom trains the qkv projection, bit for bit with the free functions",
          "[autograd][members]") {
  for (Device dev : test_devices()) {
    INFO(dev.str());
    Generator gen(7);
    nn::Linear qkv(8, 24, true, &gen), proj(8, 8, true, &gen);
    qkv.to(dev);
    proj.to(dev);
    const Tensor x = randn({2, 3, 8}, {.device = dev}, &gen);
    attention_loss(x, qkv, proj, /*members=*/true).backward();
    REQUIRE(qkv.weight.grad().defined());
    REQUIRE(qkv.bias.grad().defined());
    const std::vector<float> member_w = qkv.weight.grad().to_vector<float>();
    const std::vector<float> member_b = qkv.bias.grad().to_vector<float>();
    CHECK(hg::sum(hg::abs(qkv.weight.grad())).item<float>() > 0.0f);
    qkv.weight.set_grad(Tensor());
    qkv.bias.set_grad(Tensor());
    attention_loss(x, qkv, proj, /*members=*/false).backward();
    CHECK(qkv.weight.grad().to_vector<float>() == member_w);
    CHECK(qkv.bias.grad().to_vector<float>() == member_b);
  }
}

TEST_CASE("to(dtype) and to(device) send the gradient back in the source's dtype and device", "[autograd][members]") {
  // y = x.to(f32); L = sum(y * w): dL/dx = w, in x's dtype (f64).
  const Tensor x = make_input({3, 4}, kF64, Domain::kAny, 3).requires_grad_(true);
  const Tensor w = make_input({3, 4}, kF32, Domain::kAny, 4);
  hg::sum(x.to(kF32) * w).backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().dtype() == kF64);
  CHECK(values_of(x.grad()) == values_of(w.to(kF64)));
  // Half precision: the gradient is rounded once into bf16 on the way back (values exact in bf16 here).
  const Tensor h = full({4}, 1.5, {.dtype = kBF16}).requires_grad_(true);
  hg::sum(h.to(kF32) * 0.25).backward();
  CHECK(h.grad().dtype() == kBF16);
  CHECK(values_of(h.grad()) == std::vector<double>{0.25, 0.25, 0.25, 0.25});
  for (Device dev : test_devices()) {
    if (dev.is_cpu()) continue;
    INFO(dev.str());
    const Tensor a = make_input({5}, kF32, Domain::kAny, 5).requires_grad_(true);
    const Tensor b = a.to(dev);
    CHECK(b.requires_grad());
    hg::sum(b * b).to(Device::cpu()).backward();
    REQUIRE(a.grad().defined());
    CHECK(a.grad().device() == Device::cpu());
    CHECK(values_of(a.grad()) == values_of(a.detach() * 2.0));
    const Tensor c = make_input({5}, kF32, Domain::kAny, 6).requires_grad_(true);
    hg::sum(c.to(dev, kBF16).to(kF32)).backward();
    CHECK(c.grad().device() == Device::cpu());
    CHECK(c.grad().dtype() == kF32);
    CHECK(values_of(c.grad()) == std::vector<double>(5, 1.0));
  }
}

TEST_CASE("in-place members refuse what would cut or corrupt the graph, and write under NoGradGuard",
          "[autograd][members][errors]") {
  Tensor leaf = ones({2, 3}).requires_grad_(true);
  CHECK_THROWS_WITH(leaf.fill_(2.0), Catch::Contains("fill_") && Catch::Contains("leaf that requires grad") &&
                                         Catch::Contains("NoGradGuard"));
  CHECK_THROWS_WITH(leaf.zero_(), Catch::Contains("leaf that requires grad"));
  CHECK_THROWS_WITH(leaf.copy_(zeros({2, 3})), Catch::Contains("copy_") && Catch::Contains("leaf"));
  CHECK(values_of(leaf) == std::vector<double>(6, 1.0));  // nothing was written
  // A view of the leaf is made by a recorded op.
  CHECK_THROWS_WITH(leaf.select(0, 1).zero_(), Catch::Contains("recorded op (select)"));
  // A tensor made by an op.
  Tensor y = hg::exp(leaf);
  CHECK_THROWS_WITH(y.fill_(0.0), Catch::Contains("recorded op (exp)") && Catch::Contains("out-of-place"));
  // copy_ from a source that requires grad into a plain tensor.
  Tensor plain = zeros({2, 3});
  CHECK_THROWS_WITH(plain.copy_(y), Catch::Contains("source") && Catch::Contains("clone()"));
  plain.copy_(y.detach());  // allowed: no gradient asked for
  CHECK(values_of(plain) == values_of(y.detach()));
  // as_strided records no backward, so it refuses too.
  CHECK_THROWS_WITH(leaf.as_strided({3}, {1}, 0), Catch::Contains("as_strided") && Catch::Contains("detach()"));
  CHECK(leaf.detach().as_strided({3}, {1}, 0).numel() == 3);
  {
    NoGradGuard no_grad;  // initialisers, optimizers, loading a state
    leaf.fill_(0.5);
    leaf.select(0, 0).zero_();
    y.copy_(leaf);
    CHECK(leaf.as_strided({3}, {2}, 0).numel() == 3);
  }
  CHECK(values_of(leaf) == std::vector<double>{0, 0, 0, 0.5, 0.5, 0.5});
  // A write to a tensor a saved backward needs is caught at backward, as in PyTorch.
  Tensor x = ones({3}).requires_grad_(true);
  Tensor e = hg::exp(x);
  Tensor loss = hg::sum(e * e);  // mul saves e
  {
    NoGradGuard no_grad;
    e.fill_(1.0);
  }
  CHECK_THROWS_WITH(loss.backward(), Catch::Contains("modified by an in-place operation"));
  // Without grad mode, nothing is refused.
  {
    NoGradGuard no_grad;
    Tensor z = zeros({3});
    z.copy_(x);
    CHECK(values_of(z) == std::vector<double>{1, 1, 1});
  }
}
