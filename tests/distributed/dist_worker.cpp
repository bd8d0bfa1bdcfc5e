// One rank of a multi-process test: started N times by hg-run (tests.cmake),
// each process checks its own results against a serial reference it computes
// itself (every rank can rebuild every rank's inputs) and exits non-zero on a
// mismatch, which makes hg-run stop the others and fail.
//   dist_worker <scenario>     scenarios: see kScenarios below.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/generator.h"
#include "core/tensor.h"
#include "amp/grad_scaler.h"
#include "distributed/ddp.h"
#include "autograd/functions.h"
#include "distributed/process_group.h"
#include "nn/functional.h"
#include "nn/layers.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "tests/kernels/tolerance.h"

#if defined(HG_WITH_CUDA)
#include "runtime/cuda/runtime.h"
#endif

namespace hd = hg::distributed;
using hg::Tensor;

namespace {

int g_failures = 0;
int g_rank = -1;

void check(bool ok, const std::string& what) {
  if (!ok) {
    ++g_failures;
    std::fprintf(stderr, "rank %d: FAIL %s\n", g_rank, what.c_str());
  }
}

std::vector<double> as_f64(const Tensor& t) { return t.to(hg::kF64).contiguous().to_vector<double>(); }

void check_close(const Tensor& actual, const std::vector<double>& expected, hg::DType dtype, hg::test::OpKind kind,
                 const std::string& what) {
  const std::string report = hg::test::compare_values(as_f64(actual), expected, hg::test::tolerance_for(dtype, kind));
  check(report.empty(), what + ": " + report);
}

// Rank r's input element i: distinct per rank, exact in every dtype tested.
double value(int r, int64_t i) { return static_cast<double>((r + 1) * 3 + (i % 7) - 2 * (i % 3)); }

Tensor rank_input(int r, int64_t n, hg::DType dtype) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = value(r, i);
  return hg::from_vector(v, {n}, {.dtype = hg::kF64}).to(dtype);
}

// ---- collectives ------------------------------------------------------------------

void collectives(hd::ProcessGroup& pg) {
  const int W = pg.world_size(), R = pg.rank();
  const int64_t n = 37;
  for (hg::DType dt : {hg::kF32, hg::kF64, hg::kF16, hg::kBF16, hg::kI32, hg::kI64}) {
    const std::string name(hg::dtype_name(dt));
    for (hd::ReduceOp op : {hd::ReduceOp::kSum, hd::ReduceOp::kAvg, hd::ReduceOp::kMax, hd::ReduceOp::kMin}) {
      Tensor t = rank_input(R, n, dt);
      pg.all_reduce(t, op)->wait();
      std::vector<double> ref(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        double acc = value(0, i);
        for (int r = 1; r < W; ++r) {
          const double v = value(r, i);
          acc = op == hd::ReduceOp::kMax ? std::max(acc, v) : op == hd::ReduceOp::kMin ? std::min(acc, v) : acc + v;
        }
        if (op == hd::ReduceOp::kAvg) {
          acc = (dt == hg::kI32 || dt == hg::kI64) ? std::trunc(acc / W) : acc / W;
        }
        ref[static_cast<size_t>(i)] = acc;
      }
      check_close(t, ref, dt, hg::test::OpKind::kReduction,
                  "all_reduce(" + std::string(hd::reduce_op_name(op)) + ") " + name);
    }
    // broadcast from the last rank
    Tensor b = rank_input(R, n, dt);
    pg.broadcast(b, W - 1)->wait();
    std::vector<double> bref(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) bref[static_cast<size_t>(i)] = value(W - 1, i);
    check_close(b, bref, dt, hg::test::OpKind::kElementwise, "broadcast " + name);
    // all_gather
    Tensor out = hg::zeros({W, n}, {.dtype = dt});
    pg.all_gather(out, rank_input(R, n, dt))->wait();
    std::vector<double> gref;
    for (int r = 0; r < W; ++r)
      for (int64_t i = 0; i < n; ++i) gref.push_back(value(r, i));
    check_close(out, gref, dt, hg::test::OpKind::kElementwise, "all_gather " + name);
    // reduce_scatter (sum) of W * 5 elements
    Tensor rs = hg::zeros({5}, {.dtype = dt});
    pg.reduce_scatter(rs, rank_input(R, 5 * W, dt), hd::ReduceOp::kSum)->wait();
    std::vector<double> rref;
    for (int64_t i = 0; i < 5; ++i) {
      double acc = 0;
      for (int r = 0; r < W; ++r) acc += value(r, R * 5 + i);
      rref.push_back(acc);
    }
    check_close(rs, rref, dt, hg::test::OpKind::kReduction, "reduce_scatter " + name);
  }
  // Async: queue several, wait in reverse; order of execution is issue order.
  std::vector<Tensor> ts;
  std::vector<hd::WorkPtr> works;
  for (int k = 0; k < 6; ++k) {
    ts.push_back(hg::full({1000}, static_cast<double>(R + k), {}));
    works.push_back(pg.all_reduce(ts.back(), hd::ReduceOp::kSum));
  }
  works.push_back(pg.barrier());
  for (size_t k = works.size(); k-- > 0;) works[k]->wait();
  for (int k = 0; k < 6; ++k) {
    check_close(ts[static_cast<size_t>(k)], std::vector<double>(1000, W * (W - 1) / 2.0 + W * k), hg::kF32,
                hg::test::OpKind::kReduction, "async all_reduce " + std::to_string(k));
    check(works[static_cast<size_t>(k)]->is_completed(), "is_completed after wait");
  }
  // Bad input is an hg::Error naming the problem, not a hang.
  bool threw = false;
  try {
    Tensor wrong = hg::zeros({3});
    pg.all_gather(wrong, hg::zeros({2}));
  } catch (const hg::Error& e) {
    threw = std::string(e.what()).find("world_size * input.numel()") != std::string::npos;
  }
  check(threw, "all_gather with a wrong output size raises hg::Error");
  // A second group over file:// (Gloo's FileStore), in a folder named after this job's port.
  const std::string dir = "/tmp/hg_dist_filestore_" + std::to_string(hd::launch_env().master_port);
  if (R == 0) std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str());
  pg.barrier()->wait();
  auto fpg = hd::new_process_group({.init_method = "file://" + dir, .timeout = std::chrono::seconds(20)});
  Tensor f = hg::full({4}, static_cast<double>(R + 1), {});
  fpg->all_reduce(f, hd::ReduceOp::kMax)->wait();
  check_close(f, std::vector<double>(4, W), hg::kF32, hg::test::OpKind::kElementwise, "file:// group max");
  fpg.reset();
  pg.barrier()->wait();
  if (R == 0) std::system(("rm -rf " + dir).c_str());
}

// ---- DDP --------------------------------------------------------------------------

std::shared_ptr<hg::nn::Sequential> make_mlp(uint64_t seed) {
  hg::Generator g(seed);
  return std::make_shared<hg::nn::Sequential>(std::initializer_list<std::shared_ptr<hg::nn::Module>>{
      std::make_shared<hg::nn::Linear>(8, 32, true, &g), std::make_shared<hg::nn::ReLU>(),
      std::make_shared<hg::nn::Linear>(32, 16, true, &g), std::make_shared<hg::nn::ReLU>(),
      std::make_shared<hg::nn::Linear>(16, 4, true, &g)});
}

struct GlobalBatch {
  Tensor x, y;
};
GlobalBatch global_batch(int step, int64_t rows) {
  hg::Generator g(1000 + static_cast<uint64_t>(step));
  Tensor x = hg::randn({rows, 8}, {}, &g);
  std::vector<int64_t> y;
  for (int64_t i = 0; i < rows; ++i) y.push_back((i * 7 + step) % 4);
  return {x, hg::from_vector(y, {rows})};
}

// Every parameter bit-identical on every rank (broadcast rank 0's and compare).
void check_same_on_all_ranks(hd::ProcessGroup& pg, hg::nn::Module& m, const std::string& what) {
  for (const auto& [name, p] : m.named_parameters()) {
    Tensor mine = p.detach().contiguous().clone();
    Tensor r0 = mine.clone();
    pg.broadcast(r0, 0)->wait();
    check(mine.to_vector<float>() == r0.to_vector<float>(), what + ": " + name + " differs from rank 0's");
  }
}

void ddp_matches_single_process(hd::ProcessGroup& pg, hd::ProcessGroupPtr pgp, double bucket_mb) {
  const int W = pg.world_size(), R = pg.rank();
  const int64_t B = 6;
  auto ref = make_mlp(100);        // the single-process model (rank 0's init)
  auto local = make_mlp(100 + R);  // different on purpose: DDP must broadcast rank 0's
  hd::DistributedDataParallel ddp(local, pgp, {.bucket_cap_mb = bucket_mb});
  check_same_on_all_ranks(pg, *local, "after construction");
  hg::optim::SGD opt_ref(ref->parameters(), {.lr = 0.1, .momentum = 0.9});
  hg::optim::SGD opt(local->parameters(), {.lr = 0.1, .momentum = 0.9});
  for (int step = 0; step < 20; ++step) {
    GlobalBatch gb = global_batch(step, B * W);
    opt_ref.zero_grad();
    Tensor loss_ref = hg::nn::functional::cross_entropy(ref->forward(gb.x), gb.y);
    loss_ref.backward();
    opt.zero_grad();
    Tensor loss = hg::nn::functional::cross_entropy(ddp.forward(gb.x.narrow(0, R * B, B)), gb.y.narrow(0, R * B, B));
    loss.backward();
    Tensor mean_loss = loss.detach().clone();
    pg.all_reduce(mean_loss, hd::ReduceOp::kAvg)->wait();
    check_close(mean_loss, as_f64(loss_ref), hg::kF32, hg::test::OpKind::kReduction,
                "step " + std::to_string(step) + " loss");
    auto rp = ref->named_parameters();
    auto lp = local->named_parameters();
    for (size_t k = 0; k < rp.size(); ++k) {
      check_close(lp[k].second.grad(), as_f64(rp[k].second.grad()), hg::kF32, hg::test::OpKind::kReduction,
                  "step " + std::to_string(step) + " grad " + lp[k].first);
    }
    opt_ref.step();
    opt.step();
  }
  auto rp = ref->named_parameters();
  auto lp = local->named_parameters();
  for (size_t k = 0; k < rp.size(); ++k) {
    check_close(lp[k].second, as_f64(rp[k].second), hg::kF32, hg::test::OpKind::kReduction,
                "after 20 steps " + lp[k].first);
  }
  check_same_on_all_ranks(pg, *local, "after 20 steps");
  const hd::DDPStats st = ddp.stats();
  check(st.syncs == 20, "20 synchronised backward passes, got " + std::to_string(st.syncs));
  const int64_t nb = static_cast<int64_t>(ddp.bucket_names().size());
  if (bucket_mb < 0.001) {
    // One bucket per parameter: all but the last-computed launch while backward runs.
    check(nb == 6, "6 buckets with a tiny cap, got " + std::to_string(nb));
    check(ddp.bucket_names().front().front() == "4.bias" && ddp.bucket_names().back().front() == "0.weight",
          "buckets in reverse registration order");
    check(st.buckets_launched_in_backward == 20 * nb,
          "every bucket launched during backward, got " + std::to_string(st.buckets_launched_in_backward));
  } else {
    check(nb == 1, "one bucket with the default 25 MB cap, got " + std::to_string(nb));
  }
}

void ddp(hd::ProcessGroup& pg, hd::ProcessGroupPtr pgp) {
  ddp_matches_single_process(pg, pgp, 25.0);
  ddp_matches_single_process(pg, pgp, 1e-6);
}

// no_sync: two micro-batches per step, the first under no_sync.
void no_sync(hd::ProcessGroup& pg, hd::ProcessGroupPtr pgp) {
  const int W = pg.world_size(), R = pg.rank();
  const int64_t B = 4;
  auto ref = make_mlp(5);
  auto local = make_mlp(5);
  hd::DistributedDataParallel ddp(local, pgp, {.bucket_cap_mb = 0.001});
  hg::optim::SGD opt_ref(ref->parameters(), {.lr = 0.05});
  hg::optim::SGD opt(local->parameters(), {.lr = 0.05});
  for (int step = 0; step < 5; ++step) {
    opt_ref.zero_grad();
    opt.zero_grad();
    for (int micro = 0; micro < 2; ++micro) {
      GlobalBatch gb = global_batch(10 * step + micro, B * W);
      hg::nn::functional::cross_entropy(ref->forward(gb.x), gb.y).backward();
      Tensor loss = hg::nn::functional::cross_entropy(ddp.forward(gb.x.narrow(0, R * B, B)), gb.y.narrow(0, R * B, B));
      if (micro == 0) {
        auto guard = ddp.no_sync();
        loss.backward();
      } else {
        loss.backward();
      }
    }
    auto rp = ref->named_parameters();
    auto lp = local->named_parameters();
    for (size_t k = 0; k < rp.size(); ++k) {
      check_close(lp[k].second.grad(), as_f64(rp[k].second.grad()), hg::kF32, hg::test::OpKind::kReduction,
                  "no_sync step " + std::to_string(step) + " grad " + lp[k].first);
    }
    opt_ref.step();
    opt.step();
  }
  check(ddp.stats().syncs == 5, "one all-reduce per step under no_sync, got " + std::to_string(ddp.stats().syncs));
}

// A layer only rank 0 uses: with find_unused_parameters the others add zeros;
// without it, a layer no rank uses is an hg::Error on every rank.
void unused(hd::ProcessGroup& pg, hd::ProcessGroupPtr pgp) {
  const int W = pg.world_size(), R = pg.rank();
  struct TwoHeads : hg::nn::Module {
    std::shared_ptr<hg::nn::Linear> a, b;
    bool use_b = true;
    explicit TwoHeads(hg::Generator* g) {
      a = register_module("a", std::make_shared<hg::nn::Linear>(8, 4, true, g));
      b = register_module("b", std::make_shared<hg::nn::Linear>(8, 4, true, g));
    }
    Tensor forward(const Tensor& x) override { return use_b ? a->forward(x) + b->forward(x) : a->forward(x); }
  };
  hg::Generator g(3);
  auto m = std::make_shared<TwoHeads>(&g);
  hd::DistributedDataParallel ddp(m, pgp, {.bucket_cap_mb = 1e-6, .find_unused_parameters = true});
  GlobalBatch gb = global_batch(0, 4 * W);
  std::vector<std::vector<double>> b_grads;  // each rank's local grad of b.weight
  m->use_b = true;
  for (int r = 0; r < W; ++r) {  // local gradients of every rank, without DDP
    hg::Generator g2(3);
    TwoHeads probe(&g2);
    hg::nn::functional::cross_entropy(probe.forward(gb.x.narrow(0, r * 4, 4)), gb.y.narrow(0, r * 4, 4)).backward();
    b_grads.push_back(as_f64(probe.b->parameters()[0].grad()));
  }
  m->use_b = R == 0;
  hg::nn::functional::cross_entropy(ddp.forward(gb.x.narrow(0, R * 4, 4)), gb.y.narrow(0, R * 4, 4)).backward();
  std::vector<double> expect = b_grads[0];
  for (double& v : expect) v /= W;
  check_close(m->b->parameters()[0].grad(), expect, hg::kF32, hg::test::OpKind::kReduction,
              "unused-on-other-ranks grad = rank 0's / world");
  // Without the option: b unused everywhere -> hg::Error naming b.
  hg::Generator g3(3);
  auto m2 = std::make_shared<TwoHeads>(&g3);
  m2->use_b = false;
  hd::DistributedDataParallel strict(m2, pgp, {.bucket_cap_mb = 1e-6});
  bool threw = false;
  try {
    hg::nn::functional::cross_entropy(strict.forward(gb.x.narrow(0, R * 4, 4)), gb.y.narrow(0, R * 4, 4)).backward();
  } catch (const hg::Error& e) {
    threw = std::string(e.what()).find("'b.weight'") != std::string::npos &&
            std::string(e.what()).find("find_unused_parameters") != std::string::npos;
    if (!threw) std::fprintf(stderr, "rank %d: unexpected message: %s\n", R, e.what());
  }
  check(threw, "a parameter without gradient raises an hg::Error naming it");
  pg.barrier()->wait();
}

// AMP across ranks: DDP + GradScaler, an overflow injected into the (already
// all-reduced) gradients of the last rank only, at iterations 3 and 7 (as a
// sharded optimizer would see it). With sync_grad_scaler every rank skips
// both steps: scale, counters, the applied-steps LR schedule and the
// parameters stay identical. Without it (the control) the ranks diverge,
// which shows the check can fail.
struct ScalerRun {
  hg::amp::GradScalerStats stats;
  bool params_same = true;
};
ScalerRun scaler_run(hd::ProcessGroup& pg, hd::ProcessGroupPtr pgp, bool sync) {
  const int W = pg.world_size(), R = pg.rank();
  const int64_t B = 4;
  auto model = make_mlp(21);
  hd::DistributedDataParallel ddp(model, pgp);
  hg::optim::SGD opt(model->parameters(), {.lr = 0.05, .momentum = 0.9});
  hg::optim::StepLR sched(opt, {.step_size = 2, .gamma = 0.5, .clock = hg::optim::ScheduleClock::kAppliedSteps});
  // growth_interval 3: the scale also grows during the run, so a tracker
  // that diverges shows up in the scale too.
  hg::amp::GradScaler scaler({.init_scale = 1024.0, .growth_interval = 3});
  if (sync) hd::sync_grad_scaler(scaler, pgp);
  for (int it = 0; it < 10; ++it) {
    GlobalBatch gb = global_batch(200 + it, B * W);
    opt.zero_grad();
    Tensor loss = hg::nn::functional::cross_entropy(ddp.forward(gb.x.narrow(0, R * B, B)), gb.y.narrow(0, R * B, B));
    scaler.scale(loss).backward();
    if ((it == 3 || it == 7) && R == W - 1) {
      Tensor g = model->named_parameters().back().second.grad();  // "4.bias"
      g.narrow(0, 1, 1).fill_(it == 3 ? INFINITY : NAN);
    }
    scaler.step(opt);
    scaler.update();
    sched.step();
  }
  ScalerRun out;
  out.stats = scaler.stats();
  for (const auto& [name, p] : model->named_parameters()) {
    Tensor mine = p.detach().contiguous().clone();
    Tensor r0 = mine.clone();
    pg.broadcast(r0, 0)->wait();
    out.params_same = out.params_same && mine.to_vector<float>() == r0.to_vector<float>();
  }
  return out;
}

// Each rank's value of x, gathered (index = rank).
std::vector<double> gather_scalar(hd::ProcessGroup& pg, double x) {
  Tensor in = hg::from_vector(std::vector<double>{x}, {1}, {.dtype = hg::kF64});
  Tensor out = hg::zeros({pg.world_size()}, {.dtype = hg::kF64});
  pg.all_gather(out, in)->wait();
  return out.to_vector<double>();
}

void amp_scaler(hd::ProcessGroup& pg, hd::ProcessGroupPtr pgp) {
  const int W = pg.world_size(), R = pg.rank();
  const ScalerRun synced = scaler_run(pg, pgp, true);
  check(synced.stats.steps_skipped == 2,
        "synced: 2 skipped steps on every rank, got " + std::to_string(synced.stats.steps_skipped));
  check(synced.stats.steps_applied == 8, "synced: 8 applied steps");
  // Scale: 1024, grows x2 after 3 clean steps (it 2 -> 2048), halves at it 3
  // (1024), grows after it 6 (2048), halves at 7 (1024), then 8, 9: 1024.
  check(synced.stats.scale == 1024.0, "synced: scale 1024 at the end, got " + std::to_string(synced.stats.scale));
  for (const auto& [what, v] :
       std::vector<std::pair<std::string, double>>{{"scale", synced.stats.scale},
                                                   {"steps_skipped", static_cast<double>(synced.stats.steps_skipped)},
                                                   {"growth_tracker", static_cast<double>(synced.stats.growth_tracker)},
                                                   {"iterations", static_cast<double>(synced.stats.iterations)}}) {
    const std::vector<double> all = gather_scalar(pg, v);
    for (int r = 0; r < W; ++r)
      check(all[static_cast<size_t>(r)] == all[0], "synced: " + what + " equal on every rank");
  }
  // The applied-steps LR schedule lives on the device (the fused step reads
  // its step counter): identical parameters after 10 iterations show that
  // every rank applied the same steps with the same lrs.
  check(synced.params_same, "synced: parameters identical on every rank");
  // Control: without the reducer, only the last rank skips.
  const ScalerRun local = scaler_run(pg, pgp, false);
  check(local.stats.steps_skipped == (R == W - 1 ? 2 : 0),
        "control: only the injected rank skips, got " + std::to_string(local.stats.steps_skipped));
  const std::vector<double> skipped = gather_scalar(pg, static_cast<double>(local.stats.steps_skipped));
  check(skipped.front() != skipped.back(), "control: skip counts differ without sync_grad_scaler");
  check(R != W - 1 || !local.params_same, "control: the injected rank's parameters diverge without sync_grad_scaler");
}

// World size 1 over NCCL on one GPU (gpu builds on a GPU machine; exit 77 =
// skipped elsewhere): every collective is the identity there, DDP gives the
// plain gradients, and a DDP backward adds no host sync.
int nccl_world1() {
  const auto backends = hd::available_backends();
  if (std::find(backends.begin(), backends.end(), "nccl") == backends.end()) {
    std::fprintf(stderr, "dist_worker nccl1: this build has no nccl backend (skipped)\n");
    return 77;
  }
#if defined(HG_WITH_CUDA)
  if (!hg::cuda::is_available()) {
    std::fprintf(stderr, "dist_worker nccl1: no CUDA device (skipped)\n");
    return 77;
  }
  const hg::Device dev = hg::Device::cuda(0);
  auto pg = hd::init_process_group({.backend = "nccl", .timeout = std::chrono::seconds(30)});
  const int64_t n = 37;
  for (hg::DType dt : {hg::kF32, hg::kF64, hg::kF16, hg::kBF16, hg::kI32, hg::kI64}) {
    const std::string name(hg::dtype_name(dt));
    for (hd::ReduceOp op : {hd::ReduceOp::kSum, hd::ReduceOp::kAvg, hd::ReduceOp::kMax, hd::ReduceOp::kMin}) {
      if (op == hd::ReduceOp::kAvg && !hg::is_floating(dt)) continue;
      Tensor t = rank_input(0, n, dt).to(dev);
      pg->all_reduce(t, op)->wait();
      check_close(t.cpu(), as_f64(rank_input(0, n, dt)), dt, hg::test::OpKind::kElementwise,
                  "nccl all_reduce " + name + " " + hd::reduce_op_name(op));
    }
    Tensor b = rank_input(0, n, dt).to(dev);
    pg->broadcast(b, 0)->wait();
    check_close(b.cpu(), as_f64(rank_input(0, n, dt)), dt, hg::test::OpKind::kElementwise, "nccl broadcast " + name);
    Tensor out = hg::zeros({n}, {.dtype = dt, .device = dev});
    pg->all_gather(out, rank_input(0, n, dt).to(dev))->wait();
    check_close(out.cpu(), as_f64(rank_input(0, n, dt)), dt, hg::test::OpKind::kElementwise, "nccl all_gather " + name);
    Tensor rs = hg::zeros({n}, {.dtype = dt, .device = dev});
    pg->reduce_scatter(rs, rank_input(0, n, dt).to(dev))->wait();
    check_close(rs.cpu(), as_f64(rank_input(0, n, dt)), dt, hg::test::OpKind::kElementwise,
                "nccl reduce_scatter " + name);
  }
  pg->barrier()->wait();
  // DDP: plain gradients, and no host sync in forward + backward.
  auto ref = make_mlp(8), model = make_mlp(8);
  ref->to(dev);
  model->to(dev);
  hd::DistributedDataParallel ddp(model, pg, {.bucket_cap_mb = 1e-6});
  for (int step = 0; step < 3; ++step) {
    GlobalBatch gb = global_batch(step, 6);
    const Tensor x = gb.x.to(dev), y = gb.y.to(dev);
    ref->zero_grad();
    model->zero_grad();
    hg::nn::functional::cross_entropy(ref->forward(x), y).backward();
    const auto before = hg::cuda::host_sync_counts();
    hg::nn::functional::cross_entropy(ddp.forward(x), y).backward();
    const auto after = hg::cuda::host_sync_counts();
    check(after.synchronizations == before.synchronizations &&
              after.device_to_host_copies == before.device_to_host_copies,
          "nccl DDP backward without host sync");
    auto rp = ref->named_parameters();
    auto lp = model->named_parameters();
    for (size_t k = 0; k < rp.size(); ++k) {
      check(lp[k].second.grad().cpu().to_vector<float>() == rp[k].second.grad().cpu().to_vector<float>(),
            "nccl DDP grad " + lp[k].first);
    }
  }
  pg->barrier()->wait();
  hd::destroy_process_group();
  if (g_failures == 0) std::fprintf(stderr, "rank 0: nccl1 passed\n");
  return g_failures == 0 ? 0 : 1;
#else
  return 77;
#endif
}

// The last rank exits right after the rendezvous; the others must get an
// hg::Error (not hang) well within the timeout.
int dead_peer() {
  auto pg = hd::init_process_group({.backend = "gloo", .timeout = std::chrono::seconds(10)});
  const int W = pg->world_size(), R = pg->rank();
  if (R == W - 1) std::_Exit(0);  // exit 0: hg-run must not stop the others for us
  const auto t0 = std::chrono::steady_clock::now();
  std::string message;
  try {
    for (int k = 0; k < 1000; ++k) {
      Tensor t = hg::ones({1 << 16});
      pg->all_reduce(t)->wait();
    }
  } catch (const hg::Error& e) {
    message = e.what();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "rank %d: after %.2f s: %s\n", R, s, message.c_str());
  check(!message.empty(), "an hg::Error after a peer died");
  check(message.find("peer process") != std::string::npos, "the message says a peer probably died");
  check(s < 12.0, "the error came within the 10 s timeout");
  bool again = false;  // the group stays broken: the next call raises at once
  try {
    Tensor t = hg::ones({4});
    pg->all_reduce(t)->wait();
  } catch (const hg::Error&) {
    again = true;
  }
  check(again, "a broken group raises on the next call");
  std::_Exit(g_failures == 0 ? 0 : 1);  // skip destructors of a broken group
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: dist_worker collectives|ddp|no_sync|unused|amp_scaler|dead_peer|nccl1|exit_early\n");
    return 2;
  }
  const std::string scenario = argv[1];
  g_rank = hd::launch_env().rank;
  try {
    if (scenario == "dead_peer") return dead_peer();
    if (scenario == "nccl1") return nccl_world1();
    if (scenario == "exit_early") {  // hg-run must stop the sleeping ranks when rank 1 fails
      if (g_rank == 1) return 3;
      std::this_thread::sleep_for(std::chrono::seconds(60));
      return 0;
    }
    auto pg = hd::init_process_group({.backend = "gloo", .timeout = std::chrono::seconds(30)});
    const std::map<std::string, std::function<void()>> scenarios{
        {"collectives", [&] { collectives(*pg); }},   {"ddp", [&] { ddp(*pg, pg); }},
        {"no_sync", [&] { no_sync(*pg, pg); }},       {"unused", [&] { unused(*pg, pg); }},
        {"amp_scaler", [&] { amp_scaler(*pg, pg); }},
    };
    auto it = scenarios.find(scenario);
    if (it == scenarios.end()) {
      std::fprintf(stderr, "dist_worker: unknown scenario '%s'\n", scenario.c_str());
      return 2;
    }
    it->second();
    pg->barrier()->wait();
    hd::destroy_process_group();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", g_rank, e.what());
    return 1;
  }
  if (g_failures == 0) std::fprintf(stderr, "rank %d: %s passed\n", g_rank, scenario.c_str());
  return g_failures == 0 ? 0 : 1;
}
