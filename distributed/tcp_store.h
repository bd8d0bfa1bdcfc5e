// The rendezvous key-value store behind env:// and tcp:// (internal to
// distributed/). Rank 0 serves it; every rank is a client. It only carries
// the few hundred bytes of transport addresses Gloo exchanges at start-up:
// the collectives themselves run on Gloo's transport.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gloo/rendezvous/store.h>

namespace hg::distributed::detail {

// Listens on host:port (port 0: any free port; port() says which).
class TcpStoreServer {
 public:
  TcpStoreServer(const std::string& host, int port);
  ~TcpStoreServer();
  int port() const { return port_; }

 private:
  void accept_loop();
  void serve(int fd);
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::map<std::string, std::vector<char>> data_;
  std::vector<int> client_fds_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

class TcpStore final : public gloo::rendezvous::Store {
 public:
  // Connects (retrying until `timeout`) to host:port.
  TcpStore(const std::string& host, int port, std::chrono::milliseconds timeout);
  ~TcpStore() override;
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;  // waits for the key
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  bool try_get(const std::string& key, std::vector<char>* out);
  std::string where_;
  int fd_ = -1;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
};

}  // namespace hg::distributed::detail
