// foreach_apply: checks the program and the lists once, then one backend call.
#include <cstdint>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/foreach/foreach.h"

namespace hg::ops {

namespace {
void check_program(const ForeachProgram& p) {
  HG_CHECK(p.size >= 0 && p.size <= kForeachMaxInstrs, "foreach: a program has at most ", kForeachMaxInstrs,
           " instructions, got ", p.size);
  HG_CHECK(p.tensors >= 1 && p.tensors <= kForeachMaxTensors, "foreach: a program addresses 1 to ", kForeachMaxTensors,
           " tensor lists, got ", p.tensors);
  bool defined[kForeachMaxRegs] = {};
  auto reg = [&](uint8_t r, int k) {
    HG_CHECK(r < kForeachMaxRegs && defined[r], "foreach: instruction ", k, " reads register ", int{r},
             " before it is written");
  };
  for (int k = 0; k < p.size; ++k) {
    const ForeachInstr& in = p.code[k];
    HG_CHECK(in.op <= ForeachOpcode::kSelect, "foreach: instruction ", k, " has an unknown opcode");
    switch (in.op) {
      case ForeachOpcode::kLoad:
      case ForeachOpcode::kStore:
        HG_CHECK(in.a < p.tensors, "foreach: instruction ", k, " addresses tensor list ", int{in.a}, " of ", p.tensors);
        if (in.op == ForeachOpcode::kStore) reg(in.b, k);
        break;
      case ForeachOpcode::kAdd:
      case ForeachOpcode::kSub:
      case ForeachOpcode::kMul:
      case ForeachOpcode::kDiv:
      case ForeachOpcode::kMax:
      case ForeachOpcode::kMin:
        reg(in.a, k);
        reg(in.b, k);
        break;
      case ForeachOpcode::kNeg:
      case ForeachOpcode::kAbs:
      case ForeachOpcode::kSqrt:
      case ForeachOpcode::kSign:
        reg(in.a, k);
        break;
      case ForeachOpcode::kSelect:
        reg(in.a, k);
        reg(in.b, k);
        reg(in.c, k);
        break;
      default:
        break;
    }
    if (in.op != ForeachOpcode::kStore) {
      HG_CHECK(in.dst < kForeachMaxRegs, "foreach: instruction ", k, " writes register ", int{in.dst}, " of ",
               kForeachMaxRegs);
      // Each register is written once (scalars are evaluated before the
      // element loop and kept across elements).
      HG_CHECK(!defined[in.dst], "foreach: instruction ", k, " writes register ", int{in.dst},
               " a second time; each register is written by one instruction");
      defined[in.dst] = true;
    }
  }
}

void check_scalar(const Tensor& t, DType dtype, Device device, const char* what) {
  if (!t.defined()) return;
  HG_CHECK(t.dtype() == dtype && t.numel() == 1 && t.device() == device && t.is_contiguous(), "foreach: ", what,
           " must be a ", dtype, " one-element tensor on ", device, ", got ", t.dtype(), " ", t.shape_str(), " on ",
           t.device());
}
}  // namespace

void foreach_apply(const ForeachProgram& program, const std::vector<std::vector<Tensor>>& lists,
                   const ForeachArgs& args) {
  check_program(program);
  HG_CHECK(static_cast<int32_t>(lists.size()) == program.tensors, "foreach: the program addresses ", program.tensors,
           " tensor lists but ", lists.size(), " were given");
  const size_t slots = lists[0].size();
  if (slots == 0) return;
  HG_CHECK(lists[0][0].defined(), "foreach: tensor 0 of list 0 is undefined");
  const Device device = lists[0][0].device();
  for (size_t t = 0; t < lists.size(); ++t) {
    HG_CHECK(lists[t].size() == slots, "foreach: list ", t, " has ", lists[t].size(), " tensors, list 0 has ", slots);
    for (size_t s = 0; s < slots; ++s) {
      const Tensor& x = lists[t][s];
      HG_CHECK(x.defined(), "foreach: tensor ", s, " of list ", t, " is undefined");
      HG_CHECK(x.dtype() == kF32 || is_16bit_float(x.dtype()), "foreach: tensors must be f32, f16 or bf16; tensor ", s,
               " of list ", t, " is ", x.dtype());
      HG_CHECK(x.device() == device, "foreach: tensor ", s, " of list ", t, " is on ", x.device(), ", list 0 on ",
               device);
      HG_CHECK(x.is_contiguous(), "foreach: tensor ", s, " of list ", t, " is not contiguous");
      HG_CHECK(x.numel() == lists[0][s].numel(), "foreach: slot ", s, " holds tensors of ", lists[0][s].numel(),
               " and ", x.numel(), " elements (list ", t, ")");
    }
  }
  check_scalar(args.step, kI64, device, "the step counter");
  check_scalar(args.inv_scale, kF32, device, "inv_scale");
  check_scalar(args.found_inf, kF32, device, "found_inf");
  for (int k = 0; k < program.size; ++k) {
    const ForeachOpcode op = program.code[k].op;
    HG_CHECK(args.step.defined() || (op != ForeachOpcode::kStep && op != ForeachOpcode::kBiasCorrection &&
                                     (op != ForeachOpcode::kLr || args.schedule.kind == LrScheduleKind::kConstant)),
             "foreach: the program reads the step (kStep, kBiasCorrection or a scheduled kLr) but no step counter "
             "was given");
  }
  HG_BACKEND_CALL(device, foreach_apply, program, lists, args);
  for (int k = 0; k < program.size; ++k) {
    if (program.code[k].op != ForeachOpcode::kStore) continue;
    for (const Tensor& x : lists[program.code[k].a]) x.bump_version();
  }
}

}  // namespace hg::ops
