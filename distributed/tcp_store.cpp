// Note [TCP store protocol]
// Requests: op (1 byte: 'S' set, 'G' get), key length (u32), key, then for
// 'S' the value length (u32) and value. Replies: 'S' -> one byte 1; 'G' ->
// found (1 byte) and, if found, value length (u32) and value. A get that
// misses is retried by the client (every 2 ms) until its timeout, so the
// server never blocks on a key.
#include "distributed/tcp_store.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

namespace hg::distributed::detail {

namespace {

bool send_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t k = ::send(fd, c, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool recv_all(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t k = ::recv(fd, c, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool send_blob(int fd, const void* p, uint32_t n) { return send_all(fd, &n, 4) && send_all(fd, p, n); }

bool recv_blob(int fd, std::vector<char>* out) {
  uint32_t n = 0;
  if (!recv_all(fd, &n, 4) || n > (64u << 20)) return false;
  out->resize(n);
  return recv_all(fd, out->data(), n);
}

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) freeaddrinfo(list);
  }
};

void resolve(const std::string& host, int port, bool passive, AddrInfo* ai) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &ai->list);
  HG_CHECK(rc == 0, "distributed: cannot resolve the store address '", host, ":", port, "': ", gai_strerror(rc),
           "; check MASTER_ADDR (or the tcp:// address)");
}

}  // namespace

TcpStoreServer::TcpStoreServer(const std::string& host, int port) {
  AddrInfo ai;
  resolve(host, port, true, &ai);
  std::string last_error = "no address";
  for (addrinfo* a = ai.list; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
      listen_fd_ = fd;
      sockaddr_storage bound{};
      socklen_t len = sizeof bound;
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
      port_ = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                          : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
      break;
    }
    last_error = std::strerror(errno);
    ::close(fd);
  }
  HG_CHECK(listen_fd_ >= 0, "distributed: rank 0 cannot listen on ", host, ":", port, " (", last_error,
           "); pick a free MASTER_PORT (hg-run picks one when MASTER_PORT is unset)");
  acceptor_ = std::thread([this] { accept_loop(); });
}

TcpStoreServer::~TcpStoreServer() {
  stop_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : client_fds_) ::shutdown(fd, SHUT_RDWR);
  }
  for (std::thread& t : threads_) t.join();
  for (int fd : client_fds_) ::close(fd);
  ::close(listen_fd_);
}

void TcpStoreServer::accept_loop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) {
      ::close(fd);
      break;
    }
    client_fds_.push_back(fd);
    threads_.emplace_back([this, fd] { serve(fd); });
  }
}

void TcpStoreServer::serve(int fd) {
  for (;;) {
    char op = 0;
    std::vector<char> key, value;
    if (!recv_all(fd, &op, 1) || !recv_blob(fd, &key)) return;
    const std::string k(key.begin(), key.end());
    if (op == 'S') {
      if (!recv_blob(fd, &value)) return;
      {
        std::lock_guard<std::mutex> lock(mu_);
        data_[k] = std::move(value);
      }
      const char ok = 1;
      if (!send_all(fd, &ok, 1)) return;
    } else if (op == 'G') {
      std::unique_lock<std::mutex> lock(mu_);
      auto it = data_.find(k);
      const char found = it != data_.end() ? 1 : 0;
      if (found) value = it->second;
      lock.unlock();
      if (!send_all(fd, &found, 1)) return;
      if (found && !send_blob(fd, value.data(), static_cast<uint32_t>(value.size()))) return;
    } else {
      return;
    }
  }
}

TcpStore::TcpStore(const std::string& host, int port, std::chrono::milliseconds timeout)
    : where_(host + ":" + std::to_string(port)), timeout_(timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last_error;
  while (fd_ < 0) {
    AddrInfo ai;
    resolve(host, port, false, &ai);
    for (addrinfo* a = ai.list; a != nullptr && fd_ < 0; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fd_ = fd;
      } else {
        last_error = std::strerror(errno);
        ::close(fd);
      }
    }
    if (fd_ >= 0) break;
    HG_CHECK(std::chrono::steady_clock::now() < deadline, "distributed: no rendezvous store at ", where_, " after ",
             timeout.count(), " ms (", last_error,
             "); is rank 0 running, and are MASTER_ADDR/MASTER_PORT the same on every rank?");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
}

void TcpStore::set(const std::string& key, const std::vector<char>& data) {
  std::lock_guard<std::mutex> lock(mu_);
  const char op = 'S';
  char ok = 0;
  const bool sent = send_all(fd_, &op, 1) && send_blob(fd_, key.data(), static_cast<uint32_t>(key.size())) &&
                    send_blob(fd_, data.data(), static_cast<uint32_t>(data.size())) && recv_all(fd_, &ok, 1);
  HG_CHECK(sent && ok == 1, "distributed: the rendezvous store at ", where_, " went away while setting '", key,
           "' (rank 0 exited?)");
}

bool TcpStore::try_get(const std::string& key, std::vector<char>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  const char op = 'G';
  char found = 0;
  bool ok = send_all(fd_, &op, 1) && send_blob(fd_, key.data(), static_cast<uint32_t>(key.size())) &&
            recv_all(fd_, &found, 1);
  if (ok && found) ok = recv_blob(fd_, out);
  HG_CHECK(ok, "distributed: the rendezvous store at ", where_, " went away while reading '", key,
           "' (rank 0 exited?)");
  return found != 0;
}

std::vector<char> TcpStore::get(const std::string& key) {
  wait({key}, timeout_);
  std::vector<char> out;
  try_get(key, &out);
  return out;
}

void TcpStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<char> scratch;
  for (const std::string& k : keys) {
    while (!try_get(k, &scratch)) {
      HG_CHECK(std::chrono::steady_clock::now() < deadline, "distributed: timed out after ", timeout.count(),
               " ms waiting for '", k, "' in the rendezvous store at ", where_,
               "; did every rank start (WORLD_SIZE processes) with the same MASTER_ADDR/MASTER_PORT?");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
}

}  // namespace hg::distributed::detail
