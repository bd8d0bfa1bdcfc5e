// DistributedDataParallel (Note [DDP buckets] in ddp.h).
#include "distributed/ddp.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "kernels/ops.h"

namespace hg::distributed {

namespace {

bool is_16bit(DType t) { return t == kF16 || t == kBF16; }

// Gloo works on host memory: the flat buffers live on the CPU.
Device bucket_device(const ProcessGroupPtr& g, const Tensor& p) {
  return g->backend() == "gloo" ? Device::cpu() : p.device();
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module, ProcessGroupPtr group,
                                                 DDPOptions options)
    : module_(std::move(module)), group_(std::move(group)), options_(options) {
  HG_CHECK(module_ != nullptr, "DistributedDataParallel: the module is null");
  HG_CHECK(group_ != nullptr, "DistributedDataParallel: the process group is null");
  HG_CHECK(options_.bucket_cap_mb > 0, "DistributedDataParallel: bucket_cap_mb must be > 0, got ",
           options_.bucket_cap_mb);

  // 1. Rank 0's parameters and buffers everywhere.
  {
    NoGradGuard no_grad;
    std::vector<WorkPtr> works;
    std::vector<Tensor> staged, targets;
    auto send = [&](const Tensor& t) {
      const Device d = bucket_device(group_, t);  // no host copy with a device backend (nccl)
      Tensor buf = (t.device() == d && t.is_contiguous()) ? t : t.to(d).contiguous();
      works.push_back(group_->broadcast(buf, 0));
      staged.push_back(buf);
      targets.push_back(t);
    };
    for (const auto& [name, p] : module_->named_parameters()) send(p);
    for (const auto& [name, b] : module_->named_buffers()) send(b);
    for (auto& w : works) w->wait();
    for (size_t i = 0; i < targets.size(); ++i) {
      if (!same(staged[i], targets[i])) targets[i].copy_(staged[i]);
    }
  }

  // 2. Buckets over the parameters that require grad, last registered first.
  for (const auto& [name, p] : module_->named_parameters()) {
    if (!p.requires_grad()) continue;
    params_.push_back(p);
    names_.push_back(name);
  }
  bucket_of_.assign(params_.size(), 0);
  slot_of_.assign(params_.size(), 0);
  const double cap_bytes = options_.bucket_cap_mb * 1024.0 * 1024.0;
  std::vector<DType> bucket_dtype;
  std::vector<int64_t> bucket_numel;
  for (size_t k = params_.size(); k-- > 0;) {
    const Tensor& p = params_[k];
    const DType rd = options_.reduce_in_fp32 && is_16bit(p.dtype()) ? kF32 : p.dtype();
    const bool fits =
        !buckets_.empty() && bucket_dtype.back() == rd &&
        static_cast<double>((bucket_numel.back() + p.numel()) * static_cast<int64_t>(dtype_size(rd))) <= cap_bytes &&
        buckets_.back().flat.device() == bucket_device(group_, p);
    if (!fits) {
      buckets_.emplace_back();
      bucket_dtype.push_back(rd);
      bucket_numel.push_back(0);
      // Device placeholder, replaced by the real buffer below.
      buckets_.back().flat = empty({0}, {.dtype = rd, .device = bucket_device(group_, p)});
    }
    Bucket& b = buckets_.back();
    bucket_of_[k] = buckets_.size() - 1;
    slot_of_[k] = b.params.size();
    b.params.push_back(k);
    b.offsets.push_back(bucket_numel.back());
    bucket_numel.back() += p.numel();
  }
  for (size_t i = 0; i < buckets_.size(); ++i) {
    buckets_[i].flat = zeros({bucket_numel[i]}, {.dtype = bucket_dtype[i], .device = buckets_[i].flat.device()});
  }
  ready_.assign(params_.size(), 0);

  // 3. Hooks.
  for (size_t k = 0; k < params_.size(); ++k) {
    hooks_.push_back(
        autograd::register_post_accumulate_grad_hook(params_[k], [this, k](const Tensor&) { on_grad_ready(k); }));
  }
}

DistributedDataParallel::~DistributedDataParallel() {
  hooks_.clear();
  // Never leave a collective writing into a freed bucket.
  for (Bucket& b : buckets_) {
    if (b.work) {
      try {
        b.work->wait();
      } catch (const Error&) {}
    }
  }
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  if (options_.broadcast_buffers && group_->world_size() > 1) {
    NoGradGuard no_grad;
    for (const Tensor& b : module_->buffers()) {
      const Device d = bucket_device(group_, b);
      Tensor buf = (b.device() == d && b.is_contiguous()) ? b : b.to(d).contiguous();
      group_->broadcast(buf, 0)->wait();
      if (!same(buf, b)) const_cast<Tensor&>(b).copy_(buf);
    }
  }
  return module_->forward(x);
}

void DistributedDataParallel::start_pass() {
  in_pass_ = true;
  next_bucket_ = 0;
  std::fill(ready_.begin(), ready_.end(), 0);
  for (Bucket& b : buckets_) {
    b.pending = static_cast<int64_t>(b.params.size());
    b.launched = false;
    b.work.reset();
  }
  autograd::queue_callback([this] { finish_pass(); });
}

void DistributedDataParallel::on_grad_ready(size_t k) {
  if (!sync_) return;
  if (!in_pass_) start_pass();
  HG_CHECK(!ready_[k], "DistributedDataParallel: parameter '", names_[k],
           "' received its gradient twice in one backward pass");
  ready_[k] = 1;
  Bucket& b = buckets_[bucket_of_[k]];
  const Tensor g = params_[k].grad();
  const int64_t off = b.offsets[slot_of_[k]];
  b.flat.narrow(0, off, params_[k].numel()).copy_(g.reshape({params_[k].numel()}));
  --b.pending;
  launch_ready(false);
}

void DistributedDataParallel::launch_ready(bool at_end) {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    Bucket& b = buckets_[next_bucket_++];
    b.work = group_->all_reduce(b.flat, ReduceOp::kSum);
    b.launched = true;
    ++(at_end ? stats_.buckets_launched_at_end : stats_.buckets_launched_in_backward);
  }
}

void DistributedDataParallel::finish_pass() {
  in_pass_ = false;
  // Parameters that got no gradient in this pass.
  std::vector<std::string> missing;
  for (size_t k = 0; k < params_.size(); ++k) {
    if (ready_[k]) continue;
    if (!options_.find_unused_parameters) {
      missing.push_back(names_[k]);
      continue;
    }
    Bucket& b = buckets_[bucket_of_[k]];
    b.flat.narrow(0, b.offsets[slot_of_[k]], params_[k].numel()).zero_();
    --b.pending;
  }
  if (!missing.empty()) {
    std::ostringstream os;
    for (size_t i = 0; i < missing.size() && i < 8; ++i) os << (i ? ", " : "") << "'" << missing[i] << "'";
    if (missing.size() > 8) os << " and " << missing.size() - 8 << " more";
    HG_FAIL("DistributedDataParallel: ", missing.size(), " parameter(s) received no gradient in this backward pass (",
            os.str(), "), so their buckets cannot be all-reduced and the ranks would fall out of step. ",
            "Construct with {.find_unused_parameters = true} if parts of the model are skipped, or set ",
            "requires_grad(false) on parameters that are never used");
  }
  launch_ready(true);
  HG_CHECK(next_bucket_ == buckets_.size(), "DistributedDataParallel: internal error, bucket ", next_bucket_,
           " was not launched");
  const double inv_world = 1.0 / static_cast<double>(group_->world_size());
  for (Bucket& b : buckets_) {
    b.work->wait();
    b.work.reset();
    ops::binary_scalar_(OpId::mul, b.flat, inv_world);
    for (size_t s = 0; s < b.params.size(); ++s) {
      Tensor& p = params_[b.params[s]];
      Tensor avg = b.flat.narrow(0, b.offsets[s], p.numel()).view(p.sizes()).to(p.device(), p.dtype());
      Tensor g = p.grad();
      if (g.defined() && g.is_contiguous() && g.dtype() == p.dtype() && g.device() == p.device()) {
        g.copy_(avg);  // in place: the optimizer may hold the gradient tensor
      } else {
        p.set_grad(avg.clone());  // never a view of the bucket (reused next pass)
      }
    }
  }
  ++stats_.syncs;
}

std::vector<std::vector<std::string>> DistributedDataParallel::bucket_names() const {
  std::vector<std::vector<std::string>> out;
  for (const Bucket& b : buckets_) {
    out.emplace_back();
    for (size_t k : b.params) out.back().push_back(names_[k]);
  }
  return out;
}

void sync_grad_scaler(amp::GradScaler& scaler, ProcessGroupPtr group) {
  HG_CHECK(group != nullptr, "sync_grad_scaler: no process group; call init_process_group() first or pass one");
  scaler.set_found_inf_reducer([group = std::move(group)](Tensor& found_inf) {
    // In place on the device; wait() blocks the host only for gloo (CPU
    // tensors), where the host is the device.
    group->all_reduce(found_inf, ReduceOp::kMax)->wait();
  });
}

}  // namespace hg::distributed
