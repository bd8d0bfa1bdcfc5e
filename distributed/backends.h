// Internal to distributed/: the rendezvous shared by the backends and the
// NCCL backend's factory (distributed/nccl_process_group.cpp, gpu builds
// with NCCL only).
#pragma once

#include <memory>
#include <string>

#include <gloo/rendezvous/store.h>

#include "distributed/process_group.h"
#include "distributed/tcp_store.h"

namespace hg::distributed::detail {

// The key-value store of init_method (env://, tcp://, file://); rank 0 also
// serves it for env:// and tcp:// (server then non-null).
struct Rendezvous {
  std::unique_ptr<TcpStoreServer> server;
  std::shared_ptr<gloo::rendezvous::Store> store;
  std::string where;  // for messages
};
Rendezvous rendezvous(int rank, const InitOptions& options);

#if defined(HG_HAVE_NCCL)
ProcessGroupPtr make_nccl(int rank, int world, const InitOptions& options, Rendezvous rv);
#endif

}  // namespace hg::distributed::detail
