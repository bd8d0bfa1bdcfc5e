// Foreach: builds a multi-tensor element-wise program (Note [Foreach programs]
// in kernels/foreach/foreach.h) with ordinary arithmetic, for optimizers written
// outside the library. One apply() is one launch over every element of every
// tensor in the lists, on the CPU or a CUDA device.
//
//   hg::optim::Foreach f(2);                 // two tensor lists: param, grad
//   auto p = f.load(0), g = f.load(1);
//   f.store(0, p - f.lr() * g);              // plain SGD
//   f.apply({params, grads}, {.lr = 0.1f});  // or OptimizerStep::apply(f, ...)
//
// Values are f32 registers; every operation is one IEEE f32 operation rounded
// to nearest (bit-identical on the CPU and on CUDA). Loads widen f16/bf16,
// stores round to the stored tensor's dtype. A program holds at most
// kForeachMaxInstrs instructions and kForeachMaxRegs values; exceeding them
// raises hg::Error while building.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/foreach/foreach.h"

namespace hg::optim {

class Foreach;

// A value of a Foreach program (a register); combine with + - * / and the
// functions below. Valid only with the Foreach that made it.
struct ForeachValue {
  Foreach* owner = nullptr;
  uint8_t reg = 0;
};

class Foreach {
 public:
  // A program over `tensor_lists` lists (1 to kForeachMaxTensors).
  explicit Foreach(int tensor_lists);

  ForeachValue load(int list);                // element i of list `list`
  void store(int list, ForeachValue v);       // rounds to the list's dtype
  ForeachValue constant(double v);            // rounded to f32
  ForeachValue lr();                          // this step's lr (device schedule applied)
  ForeachValue step();                        // the step being applied (1 for the first)
  ForeachValue bias_correction(double beta);  // 1 - beta^step, in f64 then rounded
  ForeachValue inv_scale();                   // 1 / loss scale (1 without a scaler)
  ForeachValue found_inf();                   // 1 on an overflow step, else 0

  ForeachValue binary(ForeachOpcode op, ForeachValue a, ForeachValue b);
  ForeachValue unary(ForeachOpcode op, ForeachValue a);
  ForeachValue select(ForeachValue cond, ForeachValue if_nonzero, ForeachValue if_zero);

  const ForeachProgram& program() const { return program_; }
  // Runs the program (ops::foreach_apply): lists[t][slot].
  void apply(const std::vector<std::vector<Tensor>>& lists, const ForeachArgs& args = {}) const;

 private:
  ForeachValue emit(ForeachInstr in, bool writes);
  ForeachProgram program_;
};

ForeachValue operator+(ForeachValue a, ForeachValue b);
ForeachValue operator-(ForeachValue a, ForeachValue b);
ForeachValue operator*(ForeachValue a, ForeachValue b);
ForeachValue operator/(ForeachValue a, ForeachValue b);
ForeachValue operator-(ForeachValue a);
ForeachValue operator+(ForeachValue a, double b);
ForeachValue operator-(ForeachValue a, double b);
ForeachValue operator*(ForeachValue a, double b);
ForeachValue operator/(ForeachValue a, double b);
ForeachValue operator+(double a, ForeachValue b);
ForeachValue operator-(double a, ForeachValue b);
ForeachValue operator*(double a, ForeachValue b);
ForeachValue operator/(double a, ForeachValue b);
ForeachValue sqrt(ForeachValue a);
ForeachValue abs(ForeachValue a);
ForeachValue sign(ForeachValue a);
ForeachValue maximum(ForeachValue a, ForeachValue b);
ForeachValue minimum(ForeachValue a, ForeachValue b);
// a + w * (b - a), as torch.lerp computes it for |w| < 0.5 (and
// b - (b - a) * (1 - w) otherwise).
ForeachValue lerp(ForeachValue a, ForeachValue b, double w);

}  // namespace hg::optim
