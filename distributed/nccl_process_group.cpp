// The NCCL backend (gpu builds that found nccl.h and libnccl; see
// distributed/sources.cmake). Note [NCCL process group] below.
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "distributed/backends.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/runtime.h"

// Note [NCCL process group]
// One communicator per group, on the device current at creation (hg-train
// and DDP users select cuda:LOCAL_RANK first), and one dedicated
// communication stream S (non-blocking, created by the group).
//   Issuing a collective on the calling thread (no queue, no host wait):
//     (1) record event `ready` on the caller's current stream C;
//     (2) S waits on `ready`: the collective reads its inputs only after
//         everything queued on C before the call (e.g. the backward kernels
//         that wrote the gradients) has run;
//     (3) the nccl call is queued on S;
//     (4) record event `done` on S.
//   Work::wait() makes the then-current stream wait on `done` (no host wait)
//   and raises if the group failed; is_completed() queries `done`. Only
//   barrier()'s wait blocks the host (a barrier is a host-level promise).
//   Memory (the record_stream question): the caching allocator pools blocks
//   per stream and knows nothing of S. Every collective therefore keeps its
//   tensors (input and output) alive in the group's in-flight list until
//   `done` has completed, observed by a non-blocking query at later calls or
//   by the watchdog. A tensor the caller drops while S still reads or writes
//   it goes back to the allocator only after that: its block cannot be handed
//   out again in the meantime. (Nothing needs C to wait for that: the block
//   is reused on its own stream, C, after S finished.)
//   Failures: NCCL has no per-call timeout. A watchdog thread polls the
//   in-flight collectives every 100 ms; one still running after the group's
//   timeout, or an asynchronous NCCL error (ncclCommGetAsyncError), aborts
//   the communicator (ncclCommAbort: the kernels stuck waiting for a dead
//   peer return) and marks the group broken: every later call and wait()
//   raises hg::Error naming the collective.
namespace hg::distributed::detail {

namespace {

#define HG_NCCL_CHECK(expr)                                                                         \
  do {                                                                                              \
    const ncclResult_t hg_nccl_result = (expr);                                                     \
    if (hg_nccl_result != ncclSuccess) {                                                            \
      HG_FAIL("distributed (nccl): ", #expr, " failed: ", ncclGetErrorString(hg_nccl_result), " (", \
              ncclGetLastError(nullptr), ")");                                                      \
    }                                                                                               \
  } while (0)

ncclDataType_t nccl_dtype(DType dt) {
  switch (dt) {
    case kF32:
      return ncclFloat32;
    case kF64:
      return ncclFloat64;
    case kF16:
      return ncclFloat16;
    case kBF16:
      return ncclBfloat16;
    case kI32:
      return ncclInt32;
    case kI64:
      return ncclInt64;
    default:
      HG_FAIL("distributed (nccl): reductions support f32, f64, f16, bf16, i32 and i64, not ", dtype_name(dt),
              "; convert the tensor first");
  }
}

ncclRedOp_t nccl_op(ReduceOp op, DType dt) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kAvg:
      HG_CHECK(is_floating(dt), "distributed (nccl): avg of an integer tensor (", dtype_name(dt),
               ") is not supported by this backend; use kSum and divide");
      return ncclAvg;
  }
  HG_FAIL("distributed (nccl): unknown reduce op");
}

class NcclWork;

struct InFlight {
  std::shared_ptr<NcclWork> work;
  std::vector<Tensor> keep;  // alive until `done` completed (Note [NCCL process group])
  std::chrono::steady_clock::time_point issued;
};

class NcclWork final : public Work {
 public:
  NcclWork(std::string what, std::shared_ptr<std::string> broken, std::shared_ptr<std::mutex> mu, bool host_wait)
      : what_(std::move(what)), broken_(std::move(broken)), mu_(std::move(mu)), host_wait_(host_wait) {}
  void wait() override {
    check();
    if (host_wait_) {
      done.synchronize();
    } else {
      cuda::current_stream(done.device()).wait(done);
    }
    check();
  }
  bool is_completed() const override { return done.query(); }
  const std::string& what() const { return what_; }
  cuda::Event ready{/*enable_timing=*/false}, done{/*enable_timing=*/false};

 private:
  void check() const {
    std::lock_guard<std::mutex> lock(*mu_);
    if (!broken_->empty()) HG_FAIL("distributed: ", what_, " on the nccl group failed: ", *broken_);
  }
  std::string what_;
  std::shared_ptr<std::string> broken_;
  std::shared_ptr<std::mutex> mu_;
  bool host_wait_;
};

class NcclProcessGroup final : public ProcessGroup {
 public:
  NcclProcessGroup(int rank, int world, int device, ncclComm_t comm, std::chrono::milliseconds timeout)
      : rank_(rank),
        world_(world),
        device_(device),
        comm_(comm),
        timeout_(timeout),
        stream_(cuda::Stream::create(device)) {
    watchdog_ = std::thread([this] { watch(); });
  }
  ~NcclProcessGroup() override {
    {
      std::lock_guard<std::mutex> lock(*mu_);
      stop_ = true;
    }
    cv_.notify_all();
    watchdog_.join();
    bool broken = false;
    {
      std::lock_guard<std::mutex> lock(*mu_);
      broken = !broken_->empty();
    }
    if (broken) {
      ncclCommAbort(comm_);
    } else {
      stream_.synchronize();
      ncclCommDestroy(comm_);
    }
  }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string backend() const override { return "nccl"; }

  WorkPtr all_reduce(Tensor& t, ReduceOp op) override {
    check_tensor(t, "all_reduce", "the tensor");
    const ncclDataType_t dt = nccl_dtype(t.dtype());
    const ncclRedOp_t rop = nccl_op(op, t.dtype());
    return launch(std::string("all_reduce(") + reduce_op_name(op) + ")", {t}, false, [&](cudaStream_t s) {
      HG_NCCL_CHECK(ncclAllReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), dt, rop, comm_, s));
    });
  }
  WorkPtr broadcast(Tensor& t, int root) override {
    check_tensor(t, "broadcast", "the tensor");
    HG_CHECK(root >= 0 && root < world_, "distributed::broadcast: root ", root, " is outside [0, ", world_, ")");
    return launch("broadcast", {t}, false, [&](cudaStream_t s) {
      HG_NCCL_CHECK(ncclBroadcast(t.data_ptr(), t.data_ptr(), t.nbytes(), ncclUint8, root, comm_, s));
    });
  }
  WorkPtr all_gather(Tensor& output, const Tensor& input) override {
    check_tensor(output, "all_gather", "output");
    check_tensor(input, "all_gather", "input");
    HG_CHECK(output.dtype() == input.dtype(), "distributed::all_gather: output is ", dtype_name(output.dtype()),
             " but input is ", dtype_name(input.dtype()));
    HG_CHECK(output.numel() == input.numel() * world_, "distributed::all_gather: output has ", output.numel(),
             " elements but needs world_size * input.numel() = ", world_, " * ", input.numel());
    return launch("all_gather", {output, input}, false, [&](cudaStream_t s) {
      HG_NCCL_CHECK(ncclAllGather(input.data_ptr(), output.data_ptr(), input.nbytes(), ncclUint8, comm_, s));
    });
  }
  WorkPtr reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op) override {
    check_tensor(output, "reduce_scatter", "output");
    check_tensor(input, "reduce_scatter", "input");
    HG_CHECK(output.dtype() == input.dtype(), "distributed::reduce_scatter: output is ", dtype_name(output.dtype()),
             " but input is ", dtype_name(input.dtype()));
    HG_CHECK(input.numel() == output.numel() * world_, "distributed::reduce_scatter: input has ", input.numel(),
             " elements but needs world_size * output.numel() = ", world_, " * ", output.numel());
    const ncclDataType_t dt = nccl_dtype(input.dtype());
    const ncclRedOp_t rop = nccl_op(op, input.dtype());
    return launch("reduce_scatter", {output, input}, false, [&](cudaStream_t s) {
      HG_NCCL_CHECK(ncclReduceScatter(input.data_ptr(), output.data_ptr(), static_cast<size_t>(output.numel()), dt, rop,
                                      comm_, s));
    });
  }
  // A one-element all-reduce; its wait() blocks the host until it is done.
  WorkPtr barrier() override {
    Tensor t = zeros({1}, {.device = Device::cuda(device_)});
    return launch("barrier", {t}, true, [&](cudaStream_t s) {
      HG_NCCL_CHECK(ncclAllReduce(t.data_ptr(), t.data_ptr(), 1, ncclFloat32, ncclSum, comm_, s));
    });
  }

 private:
  void check_tensor(const Tensor& t, const char* op, const char* which) const {
    HG_CHECK(t.defined(), "distributed::", op, ": ", which, " is undefined");
    HG_CHECK(t.is_cuda() && t.device().index == device_, "distributed::", op, ": the nccl group of rank ", rank_,
             " works on cuda:", device_, " but ", which, " is on ", t.device().str(),
             "; move it there (or use the gloo backend for CPU tensors)");
    HG_CHECK(t.is_contiguous(), "distributed::", op, ": ", which, " must be contiguous (call .contiguous())");
  }

  template <typename F>
  WorkPtr launch(std::string what, std::vector<Tensor> keep, bool host_wait, F&& issue) {
    auto work = std::make_shared<NcclWork>(what, broken_, mu_, host_wait);
    {
      std::lock_guard<std::mutex> lock(*mu_);
      HG_CHECK(broken_->empty(), "distributed: the nccl process group (rank ", rank_, " of ", world_,
               ") failed earlier and cannot run ", what, ": ", *broken_);
    }
    const cuda::Stream compute = cuda::current_stream(device_);
    work->ready.record(compute);
    stream_.wait(work->ready);
    issue(stream_.handle());
    work->done.record(stream_);
    std::lock_guard<std::mutex> lock(*mu_);
    reap_locked();
    inflight_.push_back({work, std::move(keep), std::chrono::steady_clock::now()});
    cv_.notify_all();
    return work;
  }

  // Drops the finished collectives (front first: they finish in order on S).
  void reap_locked() {
    while (!inflight_.empty() && inflight_.front().work->done.query()) inflight_.pop_front();
  }

  void watch() {
    std::unique_lock<std::mutex> lock(*mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(100));
      if (!broken_->empty()) continue;
      reap_locked();
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      std::string error;
      if (async != ncclSuccess && async != ncclInProgress) {
        error = std::string("asynchronous NCCL error: ") + ncclGetErrorString(async);
      } else if (!inflight_.empty() && std::chrono::steady_clock::now() - inflight_.front().issued > timeout_) {
        error = inflight_.front().work->what() + " did not finish within the timeout of " +
                std::to_string(timeout_.count()) + " ms";
      }
      if (!error.empty()) {
        *broken_ = error + " on rank " + std::to_string(rank_) + " of " + std::to_string(world_) +
                   ". A peer process probably exited or stopped responding; see the other ranks' output";
        HG_LOG_ERROR("distributed: {}", *broken_);
        ncclCommAbort(comm_);  // the stuck kernels return; the group stays broken
        aborted_ = true;
        inflight_.clear();
      }
    }
  }

  int rank_, world_, device_;
  ncclComm_t comm_;
  std::chrono::milliseconds timeout_;
  cuda::Stream stream_;
  std::shared_ptr<std::mutex> mu_ = std::make_shared<std::mutex>();
  std::shared_ptr<std::string> broken_ = std::make_shared<std::string>();
  std::condition_variable cv_;
  std::deque<InFlight> inflight_;
  bool stop_ = false;
  bool aborted_ = false;
  std::thread watchdog_;
};

}  // namespace

ProcessGroupPtr make_nccl(int rank, int world, const InitOptions& o, Rendezvous rv) {
  HG_CHECK(cuda::is_available(),
           "distributed: the nccl backend needs a CUDA device, and this machine has none; "
           "use backend \"gloo\"");
  const int device = cuda::current_device();
  ncclUniqueId id;
  const std::string key = "hg/nccl_unique_id";
  if (rank == 0) {
    HG_NCCL_CHECK(ncclGetUniqueId(&id));
    std::vector<char> bytes(sizeof(id));
    std::memcpy(bytes.data(), &id, sizeof(id));
    rv.store->set(key, bytes);
  }
  try {
    rv.store->wait({key}, o.timeout);
    const std::vector<char> bytes = rv.store->get(key);
    HG_CHECK(bytes.size() == sizeof(id), "distributed (nccl): the unique id in the store has ", bytes.size(),
             " bytes, expected ", sizeof(id));
    std::memcpy(&id, bytes.data(), sizeof(id));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    HG_FAIL("distributed: rank ", rank, " of ", world, " got no NCCL id from rank 0 (store ", rv.where,
            "): ", e.what());
  }
  ncclComm_t comm = nullptr;
  HG_NCCL_CHECK(ncclCommInitRank(&comm, world, id, rank));
  auto pg = std::make_shared<NcclProcessGroup>(rank, world, device, comm, o.timeout);
  // Rank 0 serves the store: everyone has read the id before it may go.
  pg->barrier()->wait();
  (void)rv.server;  // kept alive until here
  return pg;
}

}  // namespace hg::distributed::detail
