// DistributedDataParallel: torch.nn.parallel.DistributedDataParallel in C++.
//
//   auto pg = hg::distributed::init_process_group({.backend = "gloo"});
//   auto model = make_model();                       // same architecture on every rank
//   hg::distributed::DistributedDataParallel ddp(model, pg);  // rank 0's weights everywhere
//   hg::optim::SGD opt(model->parameters(), {...});
//   for (auto [x, y] : loader) {                     // loader: this rank's shard
//     opt.zero_grad();
//     hg::Tensor loss = cross_entropy(ddp.forward(x), y);
//     loss.backward();                               // gradients averaged over ranks on return
//     opt.step();
//   }
//
// Note [DDP buckets]
// At construction the parameters (those that require grad) are split into
// buckets of about bucket_cap_mb, in reverse registration order (the order
// backward usually produces gradients: last layer first), one dtype per
// bucket. A post-accumulate-grad hook (autograd/hooks.h) on each parameter
// copies its fresh .grad into its bucket's flat buffer; when every parameter
// of a bucket has arrived, and all earlier buckets have been launched, the
// bucket's all_reduce(sum) is queued on the process group's communication
// thread, so it overlaps the rest of backward. At the end of the backward
// pass (autograd::queue_callback) the reducer waits for every bucket, scales
// by 1/world_size and writes each parameter's .grad back (in its dtype).
// Buckets always launch in the same order on every rank, which is what keeps
// the collectives matched.
//   16-bit gradients: reduce_in_fp32 (default) sums and averages them in an
// f32 bucket and rounds once when writing .grad back; reduce_in_fp32 = false
// sums in the gradient's dtype (half the bytes on the wire, one rounding per
// addition step).
//   no_sync(): while the guard lives, hooks do nothing: gradients accumulate
// locally, and the first backward after it all-reduces the accumulated sum.
//   Unused parameters: a parameter that gets no gradient in a pass leaves its
// bucket incomplete; by default that is an hg::Error at the end of backward
// (naming it). find_unused_parameters = true contributes zeros for it
// instead, and writes the averaged gradient of the other ranks into its
// .grad (zeros when no rank used it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "amp/grad_scaler.h"
#include "autograd/hooks.h"
#include "distributed/process_group.h"
#include "nn/module.h"

namespace hg::distributed {

struct DDPOptions {
  double bucket_cap_mb = 25.0;
  bool broadcast_buffers = true;  // forward() first broadcasts buffers from rank 0
  bool find_unused_parameters = false;
  bool reduce_in_fp32 = true;  // 16-bit gradients: sum/average in f32
  // Chainable setters, any order (designated initialisers must follow the
  // declaration order): DDPOptions{}.set_reduce_in_fp32(...).set_bucket_cap_mb(...).
  // clang-format off
  constexpr DDPOptions& set_bucket_cap_mb(double v) { bucket_cap_mb = v; return *this; }
  constexpr DDPOptions& set_broadcast_buffers(bool v) { broadcast_buffers = v; return *this; }
  constexpr DDPOptions& set_find_unused_parameters(bool v) { find_unused_parameters = v; return *this; }
  constexpr DDPOptions& set_reduce_in_fp32(bool v) { reduce_in_fp32 = v; return *this; }
  // clang-format on
};

struct DDPStats {
  int64_t syncs = 0;                         // backward passes that all-reduced
  int64_t buckets_launched_in_backward = 0;  // launched before backward's last node ran
  int64_t buckets_launched_at_end = 0;       // launched by the end-of-backward callback
};

class DistributedDataParallel {
 public:
  // Broadcasts rank 0's parameters and buffers to every rank (blocking).
  DistributedDataParallel(std::shared_ptr<nn::Module> module, ProcessGroupPtr group = world(), DDPOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  Tensor forward(const Tensor& x);
  nn::Module& module() { return *module_; }
  std::shared_ptr<nn::Module> module_ptr() const { return module_; }
  const ProcessGroupPtr& group() const { return group_; }

  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp) : ddp_(ddp), prev_(ddp.sync_) { ddp.sync_ = false; }
    ~NoSyncGuard() { ddp_.sync_ = prev_; }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool prev_;
  };
  // `{ auto guard = ddp.no_sync(); loss.backward(); }` accumulates locally.
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  // Parameter names per bucket, in launch order (for tests and logs).
  std::vector<std::vector<std::string>> bucket_names() const;
  DDPStats stats() const { return stats_; }

 private:
  struct Bucket {
    std::vector<size_t> params;    // indices into params_
    std::vector<int64_t> offsets;  // element offsets in flat
    Tensor flat;                   // 1-D, reduce dtype
    int64_t pending = 0;
    bool launched = false;
    WorkPtr work;
  };
  void on_grad_ready(size_t index);
  void launch_ready(bool at_end);
  void finish_pass();
  void start_pass();

  std::shared_ptr<nn::Module> module_;
  ProcessGroupPtr group_;
  DDPOptions options_;
  std::vector<Tensor> params_;
  std::vector<std::string> names_;
  std::vector<size_t> bucket_of_;  // param index -> bucket
  std::vector<size_t> slot_of_;    // param index -> position in its bucket
  std::vector<Bucket> buckets_;
  std::vector<char> ready_;
  std::vector<autograd::HookHandle> hooks_;
  size_t next_bucket_ = 0;
  bool in_pass_ = false;
  bool sync_ = true;
  DDPStats stats_;
};

// Makes `scaler` agree across the ranks of `group` (Note [GradScaler across
// ranks] in amp/grad_scaler.h): found_inf and found_any are all-reduced with
// kMax on their device before step() and update() use them. Needed when ranks
// check different gradients (sharded optimizers, model-parallel parts);
// harmless under DDP (one 4-byte collective more per step() and update()).
// The group must hold the scaler's device (gloo: CPU; nccl: CUDA).
void sync_grad_scaler(amp::GradScaler& scaler, ProcessGroupPtr group = world());

}  // namespace hg::distributed
