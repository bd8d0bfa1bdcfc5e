// init_process_group, the default group, and the Gloo backend
// (Note [Process groups] in process_group.h).
#include "distributed/process_group.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include "core/error.h"
#include "core/half.h"
#include "core/log.h"
#include "distributed/backends.h"
#include "distributed/tcp_store.h"

namespace hg::distributed {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "?";
}

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  HG_CHECK(end != v && *end == '\0' && x >= 0, "distributed: ", name, "='", v, "' is not a non-negative integer");
  return static_cast<int>(x);
}

std::string env_str(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

// ---- the work queue -------------------------------------------------------------

class QueuedWork final : public Work {
 public:
  explicit QueuedWork(std::string what) : what_(std::move(what)) {}
  void wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    if (!error_.empty()) HG_FAIL(error_);
  }
  bool is_completed() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  void finish(std::string error) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::move(error);
    done_ = true;
    cv_.notify_all();
  }
  const std::string& what() const { return what_; }

 private:
  std::string what_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::string error_;
};

// ---- element-wise reductions for Gloo (byte-typed, our own 16-bit types) --------

template <typename T>
void reduce_fn(ReduceOp op, void* out, const void* a, const void* b, size_t n) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
      const float u = x[i], v = y[i];
      // sum rounds once per pairwise step (16-bit wire format); DDP averages
      // 16-bit gradients in fp32 by default (ddp.h) for this reason.
      o[i] = T(op == ReduceOp::kMax ? std::max(u, v) : op == ReduceOp::kMin ? std::min(u, v) : u + v);
    } else {
      o[i] = op == ReduceOp::kMax ? std::max(x[i], y[i]) : op == ReduceOp::kMin ? std::min(x[i], y[i]) : x[i] + y[i];
    }
  }
}

gloo::AllreduceOptions::Func reduction_for(DType dtype, ReduceOp op) {
  const ReduceOp base = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  switch (dtype) {
    case kF32:
      return [base](void* o, const void* a, const void* b, size_t n) { reduce_fn<float>(base, o, a, b, n); };
    case kF64:
      return [base](void* o, const void* a, const void* b, size_t n) { reduce_fn<double>(base, o, a, b, n); };
    case kF16:
      return [base](void* o, const void* a, const void* b, size_t n) { reduce_fn<half>(base, o, a, b, n); };
    case kBF16:
      return [base](void* o, const void* a, const void* b, size_t n) { reduce_fn<bfloat16>(base, o, a, b, n); };
    case kI32:
      return [base](void* o, const void* a, const void* b, size_t n) { reduce_fn<int32_t>(base, o, a, b, n); };
    case kI64:
      return [base](void* o, const void* a, const void* b, size_t n) { reduce_fn<int64_t>(base, o, a, b, n); };
    default:
      HG_FAIL("distributed: reductions support f32, f64, f16, bf16, i32 and i64, not ", dtype_name(dtype),
              "; convert the tensor first");
  }
}

void divide_in_place(const Tensor& t, int world) {
  dispatch_compute_dtype(t.dtype(), "distributed avg", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      HG_FAIL("distributed: avg of a bool tensor");
    } else {
      T* p = static_cast<T*>(t.data_ptr());
      for (int64_t i = 0; i < t.numel(); ++i) {
        if constexpr (std::is_integral_v<T>)
          p[i] = static_cast<T>(p[i] / world);
        else
          p[i] = T(static_cast<double>(p[i]) / world);
      }
    }
  });
}

void check_cpu_contiguous(const Tensor& t, const char* op, const char* which) {
  HG_CHECK(t.defined(), "distributed::", op, ": ", which, " is undefined");
  HG_CHECK(t.is_cpu(), "distributed::", op, ": the gloo backend takes CPU tensors but ", which, " is on ",
           t.device().str(), "; use the nccl backend for CUDA tensors or copy with .to(Device::cpu())");
  HG_CHECK(t.is_contiguous(), "distributed::", op, ": ", which, " must be contiguous (call .contiguous())");
}

// ---- Gloo ----------------------------------------------------------------------

class GlooProcessGroup final : public ProcessGroup {
 public:
  GlooProcessGroup(std::shared_ptr<gloo::Context> ctx, std::unique_ptr<detail::TcpStoreServer> server,
                   std::shared_ptr<gloo::rendezvous::Store> store, std::chrono::milliseconds timeout)
      : ctx_(std::move(ctx)), server_(std::move(server)), store_(std::move(store)), timeout_(timeout) {
    thread_ = std::thread([this] { loop(); });
  }
  ~GlooProcessGroup() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    thread_.join();
  }
  int rank() const override { return ctx_->rank; }
  int world_size() const override { return ctx_->size; }
  std::string backend() const override { return "gloo"; }

  WorkPtr all_reduce(Tensor& t, ReduceOp op) override {
    check_cpu_contiguous(t, "all_reduce", "the tensor");
    auto fn = reduction_for(t.dtype(), op);
    Tensor keep = t;
    return enqueue(std::string("all_reduce(") + reduce_op_name(op) + ")", [this, keep, fn, op] {
      if (keep.numel() > 0) {
        gloo::AllreduceOptions opts(ctx_);
        set_typed_output(opts, keep);
        opts.setReduceFunction(fn);
        opts.setTimeout(timeout_);
        gloo::allreduce(opts);
        if (op == ReduceOp::kAvg) divide_in_place(keep, world_size());
      }
    });
  }

  WorkPtr broadcast(Tensor& t, int root) override {
    check_cpu_contiguous(t, "broadcast", "the tensor");
    HG_CHECK(root >= 0 && root < world_size(), "distributed::broadcast: root ", root, " is not a rank of a group of ",
             world_size());
    Tensor keep = t;
    return enqueue("broadcast", [this, keep, root] {
      if (keep.nbytes() == 0) return;
      gloo::BroadcastOptions opts(ctx_);
      opts.setOutput(static_cast<uint8_t*>(keep.data_ptr()), keep.nbytes());
      opts.setRoot(root);
      opts.setTimeout(timeout_);
      gloo::broadcast(opts);
    });
  }

  WorkPtr all_gather(Tensor& output, const Tensor& input) override {
    check_cpu_contiguous(output, "all_gather", "output");
    check_cpu_contiguous(input, "all_gather", "input");
    HG_CHECK(output.dtype() == input.dtype(), "distributed::all_gather: output is ", dtype_name(output.dtype()),
             " but input is ", dtype_name(input.dtype()));
    HG_CHECK(output.numel() == input.numel() * world_size(), "distributed::all_gather: output has ", output.numel(),
             " elements but needs world_size * input.numel() = ", world_size(), " * ", input.numel());
    Tensor out = output, in = input;
    return enqueue("all_gather", [this, out, in] {
      if (in.nbytes() == 0) return;
      gloo::AllgatherOptions opts(ctx_);
      opts.setInput(static_cast<uint8_t*>(in.data_ptr()), in.nbytes());
      opts.setOutput(static_cast<uint8_t*>(out.data_ptr()), out.nbytes());
      opts.setTimeout(timeout_);
      gloo::allgather(opts);
    });
  }

  // Gloo 2022 has no reduce-scatter in its option-style API: all-reduce a
  // copy of the input and keep this rank's chunk (world_size times the bytes
  // of a ring reduce-scatter; fine for CPU tests, documented).
  WorkPtr reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op) override {
    check_cpu_contiguous(output, "reduce_scatter", "output");
    check_cpu_contiguous(input, "reduce_scatter", "input");
    HG_CHECK(output.dtype() == input.dtype(), "distributed::reduce_scatter: output is ", dtype_name(output.dtype()),
             " but input is ", dtype_name(input.dtype()));
    HG_CHECK(input.numel() == output.numel() * world_size(), "distributed::reduce_scatter: input has ", input.numel(),
             " elements but needs world_size * output.numel() = ", world_size(), " * ", output.numel());
    auto fn = reduction_for(input.dtype(), op);
    Tensor out = output, scratch = input.clone();
    return enqueue("reduce_scatter", [this, out, scratch, fn, op] {
      if (out.numel() == 0) return;
      gloo::AllreduceOptions opts(ctx_);
      set_typed_output(opts, scratch);
      opts.setReduceFunction(fn);
      opts.setTimeout(timeout_);
      gloo::allreduce(opts);
      std::memcpy(out.data_ptr(), static_cast<const uint8_t*>(scratch.data_ptr()) + out.nbytes() * rank(),
                  out.nbytes());
      if (op == ReduceOp::kAvg) divide_in_place(out, world_size());
    });
  }

  WorkPtr barrier() override {
    return enqueue("barrier", [this] {
      gloo::BarrierOptions opts(ctx_);
      opts.setTimeout(timeout_);
      gloo::barrier(opts);
    });
  }

 private:
  static void set_typed_output(gloo::AllreduceOptions& opts, const Tensor& t) {
    // setOutputs<T> records sizeof(T) as the element size; the reduce
    // function then receives element counts.
    switch (t.element_size()) {
      case 2:
        opts.setOutputs(std::vector<uint16_t*>{static_cast<uint16_t*>(t.data_ptr())}, static_cast<size_t>(t.numel()));
        break;
      case 4:
        opts.setOutputs(std::vector<uint32_t*>{static_cast<uint32_t*>(t.data_ptr())}, static_cast<size_t>(t.numel()));
        break;
      case 8:
        opts.setOutputs(std::vector<uint64_t*>{static_cast<uint64_t*>(t.data_ptr())}, static_cast<size_t>(t.numel()));
        break;
      default:
        HG_FAIL("distributed: unsupported element size ", t.element_size());
    }
  }

  WorkPtr enqueue(std::string what, std::function<void()> job) {
    auto work = std::make_shared<QueuedWork>(std::move(what));
    std::lock_guard<std::mutex> lock(mu_);
    HG_CHECK(broken_.empty(), "distributed: the process group (rank ", rank(), " of ", world_size(),
             ") failed earlier and cannot run ", work->what(), ": ", broken_);
    queue_.emplace_back(work, std::move(job));
    cv_.notify_all();
    return work;
  }

  void loop() {
    for (;;) {
      std::pair<std::shared_ptr<QueuedWork>, std::function<void()>> item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      std::string error;
      {
        std::lock_guard<std::mutex> lock(mu_);
        error = broken_.empty() ? "" : "the process group failed earlier: " + broken_;
      }
      if (error.empty()) {
        try {
          item.second();
        } catch (const std::exception& e) {
          error = "distributed: " + item.first->what() + " failed on rank " + std::to_string(rank()) + " of " +
                  std::to_string(world_size()) + " (gloo): " + e.what() +
                  ". A peer process probably exited or stopped responding (timeout " +
                  std::to_string(timeout_.count()) + " ms); see the other ranks' output";
          std::lock_guard<std::mutex> lock(mu_);
          broken_ = error;
        }
      }
      item.first->finish(error);
    }
  }

  std::shared_ptr<gloo::Context> ctx_;
  std::unique_ptr<detail::TcpStoreServer> server_;
  std::shared_ptr<gloo::rendezvous::Store> store_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::shared_ptr<QueuedWork>, std::function<void()>>> queue_;
  bool stop_ = false;
  std::string broken_;
  std::thread thread_;
};

std::shared_ptr<gloo::transport::Device> make_gloo_device() {
  gloo::transport::tcp::attr attr;
  const std::string ifname = env_str("HG_GLOO_IFNAME");
  const std::string host = env_str("HG_GLOO_HOSTNAME");
  if (!host.empty()) {
    attr.hostname = host;
  } else {
    attr.iface = ifname.empty() ? "lo" : ifname;
  }
  try {
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    HG_FAIL("distributed: cannot create Gloo's TCP device on ",
            host.empty() ? "interface '" + attr.iface + "'" : "host '" + host + "'", ": ", e.what(),
            "; set HG_GLOO_IFNAME to a network interface of this machine (ip link) or HG_GLOO_HOSTNAME "
            "to one of its addresses");
  }
}

}  // namespace

detail::Rendezvous detail::rendezvous(int rank, const InitOptions& o) {
  std::unique_ptr<detail::TcpStoreServer> server;
  std::shared_ptr<gloo::rendezvous::Store> store;
  const std::string& m = o.init_method;
  std::string where;
  if (m.rfind("file://", 0) == 0) {
    const std::string dir = m.substr(7);
    HG_CHECK(!dir.empty(), "distributed: file:// needs a folder, e.g. file:///tmp/job42 (got '", m, "')");
    store = std::make_shared<gloo::rendezvous::FileStore>(dir);
    where = dir;
  } else {
    std::string host;
    int port = -1;
    if (m == "env://") {
      host = env_str("MASTER_ADDR");
      port = env_int("MASTER_PORT");
      HG_CHECK(!host.empty() && port > 0, "distributed: init_method env:// needs MASTER_ADDR and MASTER_PORT ",
               "(set by hg-run and torchrun; e.g. MASTER_ADDR=127.0.0.1 MASTER_PORT=29500)");
    } else if (m.rfind("tcp://", 0) == 0) {
      const std::string hp = m.substr(6);
      const size_t colon = hp.rfind(':');
      HG_CHECK(colon != std::string::npos && colon > 0, "distributed: tcp:// needs host:port (got '", m, "')");
      host = hp.substr(0, colon);
      port = std::atoi(hp.substr(colon + 1).c_str());
      HG_CHECK(port > 0 && port < 65536, "distributed: bad port in '", m, "'");
    } else {
      HG_FAIL("distributed: unknown init_method '", m, "'; use env://, tcp://host:port or file:///folder");
    }
    if (rank == 0) server = std::make_unique<detail::TcpStoreServer>(host, port);
    store = std::make_shared<detail::TcpStore>(host, port, o.timeout);
    where = host + ":" + std::to_string(port);
  }
  return {std::move(server), std::move(store), where};
}

namespace {

ProcessGroupPtr make_gloo(int rank, int world, const InitOptions& o) {
  detail::Rendezvous rv = detail::rendezvous(rank, o);
  std::unique_ptr<detail::TcpStoreServer> server = std::move(rv.server);
  std::shared_ptr<gloo::rendezvous::Store> store = std::move(rv.store);
  const std::string where = rv.where;
  auto device = make_gloo_device();
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, world);
  ctx->setTimeout(o.timeout);
  try {
    gloo::rendezvous::PrefixStore prefixed("hg", *store);
    ctx->connectFullMesh(prefixed, device);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    HG_FAIL("distributed: rank ", rank, " of ", world, " could not connect to its peers (store ", where,
            "): ", e.what());
  }
  auto pg = std::make_shared<GlooProcessGroup>(ctx, std::move(server), store, o.timeout);
  // Everyone has its pairs before rank 0 (which serves the store) may leave.
  pg->barrier()->wait();
  return pg;
}

std::mutex g_mu;
ProcessGroupPtr g_world;

}  // namespace

LaunchEnv launch_env() {
  LaunchEnv e;
  e.rank = env_int("RANK");
  e.world_size = env_int("WORLD_SIZE");
  e.local_rank = env_int("LOCAL_RANK");
  e.local_world_size = env_int("LOCAL_WORLD_SIZE");
  e.master_addr = env_str("MASTER_ADDR");
  e.master_port = env_int("MASTER_PORT");
  return e;
}

std::vector<std::string> available_backends() {
  std::vector<std::string> b{"gloo"};
#if defined(HG_HAVE_NCCL)
  b.push_back("nccl");
#endif
  return b;
}

ProcessGroupPtr new_process_group(InitOptions o) {
  const LaunchEnv env = launch_env();
  const int rank = o.rank >= 0 ? o.rank : env.rank;
  const int world = o.world_size >= 0 ? o.world_size : env.world_size;
  HG_CHECK(world > 0, "distributed: world size unknown: pass .world_size or set WORLD_SIZE ", "(hg-run -n N sets it)");
  HG_CHECK(rank >= 0 && rank < world, "distributed: rank ", rank, " is outside [0, ", world,
           "): pass .rank or set RANK (hg-run sets it)");
  HG_CHECK(o.timeout.count() > 0, "distributed: timeout must be positive");
  if (o.backend == "gloo") return make_gloo(rank, world, o);
  if (o.backend == "nccl") {
#if defined(HG_HAVE_NCCL)
    return detail::make_nccl(rank, world, o, detail::rendezvous(rank, o));
#else
#if defined(HG_CUDA_EMU)
    const char* why = "cuda-emu has no NCCL: the emulator cannot run a real collective";
#else
    const char* why = "a cpu build, or a gpu build that found no nccl.h / libnccl";
#endif
    HG_FAIL("distributed: the nccl backend is not built into this library (", why,
            "); use backend \"gloo\" with CPU tensors");
#endif
  }
  HG_FAIL("distributed: unknown backend '", o.backend, "'; use \"gloo\" or \"nccl\"");
}

ProcessGroupPtr init_process_group(InitOptions o) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    HG_CHECK(g_world == nullptr, "distributed: init_process_group called twice; call destroy_process_group first");
  }
  // A write to the socket of a peer that died raises SIGPIPE, whose default
  // action kills this process silently (status 141) instead of the transport
  // reporting EPIPE, which becomes the "a peer process probably exited"
  // hg::Error (test dist_dead_peer_np3 saw it). Ignore it unless the program
  // installed its own handler.
  struct sigaction old_action {};
  if (::sigaction(SIGPIPE, nullptr, &old_action) == 0 && old_action.sa_handler == SIG_DFL) {
    std::signal(SIGPIPE, SIG_IGN);
  }
  ProcessGroupPtr pg = new_process_group(std::move(o));
  std::lock_guard<std::mutex> lock(g_mu);
  g_world = pg;
  return pg;
}

ProcessGroupPtr world() {
  std::lock_guard<std::mutex> lock(g_mu);
  HG_CHECK(g_world != nullptr, "distributed: no process group; call hg::distributed::init_process_group first");
  return g_world;
}

bool is_initialized() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_world != nullptr;
}

void destroy_process_group() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_world.reset();
}

}  // namespace hg::distributed
