// hg::distributed — process groups and collectives (torch.distributed in C++).
//
//   // every process (started by hg-run, torchrun, mpirun + env, or by hand):
//   auto pg = hg::distributed::init_process_group({.backend = "gloo"});  // env:// by default
//   hg::Tensor t = hg::ones({4});
//   pg->all_reduce(t, hg::distributed::ReduceOp::kSum)->wait();          // t = world_size
//
// Note [Process groups]
// A ProcessGroup is `world_size` processes that issue the same collectives in
// the same order. Each collective is queued on the group's one communication
// thread and returns a Work handle at once; wait() blocks until it finished
// and raises hg::Error if it failed (a peer that died, a timeout). Collectives
// of one group run in issue order (one thread), which is what keeps ranks in
// step. After a failure the group is broken: every later call raises.
//   Backends: "gloo" (CPU tensors; Gloo's TCP transport and algorithms) and
// "nccl" (CUDA tensors; only in a gpu build linked against NCCL — see
// docs/distributed.md for what exists today).
//   Rendezvous (init_method): "env://" reads MASTER_ADDR/MASTER_PORT and meets
// at a key-value store that rank 0 serves over TCP (like torch's TCPStore);
// "tcp://host:port" is the same with the address given; "file:///path/dir"
// uses Gloo's FileStore in a shared folder (one fresh folder per job).
//   The TCP transport binds to HG_GLOO_IFNAME (default "lo", the loopback:
// single-machine jobs) or HG_GLOO_HOSTNAME (an address or a name of this
// host): multi-machine jobs must set one of them.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace hg::distributed {

enum class ReduceOp { kSum, kAvg, kMax, kMin };
const char* reduce_op_name(ReduceOp op);

struct InitOptions {
  std::string backend = "gloo";                                 // "gloo" | "nccl"
  int rank = -1;                                                // -1: from RANK
  int world_size = -1;                                          // -1: from WORLD_SIZE
  std::string init_method = "env://";                           // "env://" | "tcp://host:port" | "file:///dir"
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};  // every collective and the rendezvous
  // Chainable setters, any order (designated initialisers must follow the
  // declaration order): InitOptions{}.set_timeout(...).set_backend(...).
  // clang-format off
  InitOptions& set_backend(std::string v) { backend = std::move(v); return *this; }
  constexpr InitOptions& set_rank(int v) { rank = v; return *this; }
  constexpr InitOptions& set_world_size(int v) { world_size = v; return *this; }
  InitOptions& set_init_method(std::string v) { init_method = std::move(v); return *this; }
  InitOptions& set_timeout(std::chrono::milliseconds v) { timeout = std::move(v); return *this; }
  // clang-format on
};

// A queued collective. wait() blocks until it is done (rethrowing its
// failure as hg::Error); is_completed() polls.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  virtual bool is_completed() const = 0;
};
using WorkPtr = std::shared_ptr<Work>;

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend() const = 0;

  // In place on `t` (contiguous; f32 f64 f16 bf16 i32 i64). kAvg divides the
  // sum by world_size in t's dtype (integer: truncating).
  virtual WorkPtr all_reduce(Tensor& t, ReduceOp op = ReduceOp::kSum) = 0;
  // t of rank `root` overwrites t on every rank (any dtype, same shape).
  virtual WorkPtr broadcast(Tensor& t, int root = 0) = 0;
  // output[r] (a [world_size, ...input.shape] tensor, or world_size*numel
  // elements) receives rank r's input.
  virtual WorkPtr all_gather(Tensor& output, const Tensor& input) = 0;
  // input has world_size * output.numel() elements; output = chunk `rank` of
  // the element-wise reduction of every rank's input.
  virtual WorkPtr reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::kSum) = 0;
  virtual WorkPtr barrier() = 0;
};
using ProcessGroupPtr = std::shared_ptr<ProcessGroup>;

// The launch environment (torchrun's variables). Missing values are -1 / "".
struct LaunchEnv {
  int rank = -1, world_size = -1, local_rank = -1, local_world_size = -1;
  std::string master_addr;
  int master_port = -1;
  bool launched() const { return world_size > 0; }  // WORLD_SIZE is set
};
LaunchEnv launch_env();

// Creates a process group and makes it the default one (world()). Raises
// hg::Error naming the missing variable or the unreachable peer.
ProcessGroupPtr init_process_group(InitOptions options = {});
// A new group with the options, not the default (tests run several).
ProcessGroupPtr new_process_group(InitOptions options);
// The default group (hg::Error before init_process_group).
ProcessGroupPtr world();
bool is_initialized();
void destroy_process_group();

// Backends built into this library ("gloo", and "nccl" in a gpu build with NCCL).
std::vector<std::string> available_backends();

}  // namespace hg::distributed
