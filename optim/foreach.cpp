#include "optim/foreach.h"

#include <cstdint>
#include <vector>

#include "core/error.h"

namespace hg::optim {

Foreach::Foreach(int tensor_lists) {
  HG_CHECK(tensor_lists >= 1 && tensor_lists <= kForeachMaxTensors, "Foreach: a program addresses 1 to ",
           kForeachMaxTensors, " tensor lists, got ", tensor_lists);
  program_.tensors = tensor_lists;
}

ForeachValue Foreach::emit(ForeachInstr in, bool writes) {
  HG_CHECK(program_.size < kForeachMaxInstrs, "Foreach: a program holds at most ", kForeachMaxInstrs,
           " instructions; split the update into two programs");
  if (writes) {
    HG_CHECK(program_.registers < kForeachMaxRegs, "Foreach: a program holds at most ", kForeachMaxRegs,
             " values; split the update into two programs");
    in.dst = static_cast<uint8_t>(program_.registers++);
  }
  program_.code[program_.size++] = in;
  return {this, in.dst};
}

ForeachValue Foreach::load(int list) {
  HG_CHECK(list >= 0 && list < program_.tensors, "Foreach::load: no tensor list ", list, " (the program has ",
           program_.tensors, ")");
  return emit({.op = ForeachOpcode::kLoad, .a = static_cast<uint8_t>(list)}, true);
}

void Foreach::store(int list, ForeachValue v) {
  HG_CHECK(list >= 0 && list < program_.tensors, "Foreach::store: no tensor list ", list, " (the program has ",
           program_.tensors, ")");
  HG_CHECK(v.owner == this, "Foreach::store: the value belongs to another Foreach program");
  emit({.op = ForeachOpcode::kStore, .a = static_cast<uint8_t>(list), .b = v.reg}, false);
}

ForeachValue Foreach::constant(double v) {
  return emit({.op = ForeachOpcode::kConst, .value = static_cast<float>(v)}, true);
}
ForeachValue Foreach::lr() { return emit({.op = ForeachOpcode::kLr}, true); }
ForeachValue Foreach::step() { return emit({.op = ForeachOpcode::kStep}, true); }
ForeachValue Foreach::bias_correction(double beta) {
  // Stored as f32 (betas are given as f32 hyperparameters everywhere).
  return emit({.op = ForeachOpcode::kBiasCorrection, .value = static_cast<float>(beta)}, true);
}
ForeachValue Foreach::inv_scale() { return emit({.op = ForeachOpcode::kInvScale}, true); }
ForeachValue Foreach::found_inf() { return emit({.op = ForeachOpcode::kFoundInf}, true); }

ForeachValue Foreach::binary(ForeachOpcode op, ForeachValue a, ForeachValue b) {
  HG_CHECK(a.owner == this && b.owner == this, "Foreach: the values belong to another Foreach program");
  return emit({.op = op, .a = a.reg, .b = b.reg}, true);
}
ForeachValue Foreach::unary(ForeachOpcode op, ForeachValue a) {
  HG_CHECK(a.owner == this, "Foreach: the value belongs to another Foreach program");
  return emit({.op = op, .a = a.reg}, true);
}
ForeachValue Foreach::select(ForeachValue cond, ForeachValue if_nonzero, ForeachValue if_zero) {
  HG_CHECK(cond.owner == this && if_nonzero.owner == this && if_zero.owner == this,
           "Foreach: the values belong to another Foreach program");
  return emit({.op = ForeachOpcode::kSelect, .a = cond.reg, .b = if_nonzero.reg, .c = if_zero.reg}, true);
}

void Foreach::apply(const std::vector<std::vector<Tensor>>& lists, const ForeachArgs& args) const {
  ops::foreach_apply(program_, lists, args);
}

namespace {
Foreach& owner_of(ForeachValue a) {
  HG_CHECK(a.owner != nullptr, "Foreach: an empty value (make values with a Foreach's load, constant, ...)");
  return *a.owner;
}
}  // namespace

ForeachValue operator+(ForeachValue a, ForeachValue b) { return owner_of(a).binary(ForeachOpcode::kAdd, a, b); }
ForeachValue operator-(ForeachValue a, ForeachValue b) { return owner_of(a).binary(ForeachOpcode::kSub, a, b); }
ForeachValue operator*(ForeachValue a, ForeachValue b) { return owner_of(a).binary(ForeachOpcode::kMul, a, b); }
ForeachValue operator/(ForeachValue a, ForeachValue b) { return owner_of(a).binary(ForeachOpcode::kDiv, a, b); }
ForeachValue operator-(ForeachValue a) { return owner_of(a).unary(ForeachOpcode::kNeg, a); }
ForeachValue operator+(ForeachValue a, double b) { return a + owner_of(a).constant(b); }
ForeachValue operator-(ForeachValue a, double b) { return a - owner_of(a).constant(b); }
ForeachValue operator*(ForeachValue a, double b) { return a * owner_of(a).constant(b); }
ForeachValue operator/(ForeachValue a, double b) { return a / owner_of(a).constant(b); }
ForeachValue operator+(double a, ForeachValue b) { return owner_of(b).constant(a) + b; }
ForeachValue operator-(double a, ForeachValue b) { return owner_of(b).constant(a) - b; }
ForeachValue operator*(double a, ForeachValue b) { return owner_of(b).constant(a) * b; }
ForeachValue operator/(double a, ForeachValue b) { return owner_of(b).constant(a) / b; }
ForeachValue sqrt(ForeachValue a) { return owner_of(a).unary(ForeachOpcode::kSqrt, a); }
ForeachValue abs(ForeachValue a) { return owner_of(a).unary(ForeachOpcode::kAbs, a); }
ForeachValue sign(ForeachValue a) { return owner_of(a).unary(ForeachOpcode::kSign, a); }
ForeachValue maximum(ForeachValue a, ForeachValue b) { return owner_of(a).binary(ForeachOpcode::kMax, a, b); }
ForeachValue minimum(ForeachValue a, ForeachValue b) { return owner_of(a).binary(ForeachOpcode::kMin, a, b); }
ForeachValue lerp(ForeachValue a, ForeachValue b, double w) {
  if (w < 0.5 && w > -0.5) return a + w * (b - a);
  return b - (b - a) * (1.0 - w);
}

}  // namespace hg::optim
