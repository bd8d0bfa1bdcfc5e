// hg-run: starts N local copies of a program as one data-parallel job, the
// way torchrun --standalone does (docs/distributed.md).
//
//   hg-run -n 2 build/cpu/examples/hg-train --epochs 3
//
// Each copy gets RANK, LOCAL_RANK (0..N-1), WORLD_SIZE, LOCAL_WORLD_SIZE (N),
// MASTER_ADDR (default 127.0.0.1) and MASTER_PORT (default: a free port), so
// hg::distributed::init_process_group() with env:// finds the others.
// SIGINT/SIGTERM/SIGHUP are forwarded to every copy. When one copy fails
// (non-zero exit or killed by a signal) the others get SIGTERM, then SIGKILL
// after --grace seconds; hg-run exits with the first failure's status
// (128 + signal for a signal), or 0 when every copy succeeded. Unless
// OMP_NUM_THREADS is set, each copy gets cores / N OpenMP threads.
// Deliberately not built on hg: no halfgrad state in the launcher.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

volatile sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

int usage(const char* msg) {
  if (msg) std::fprintf(stderr, "hg-run: %s\n", msg);
  std::fprintf(stderr,
               "usage: hg-run [-n N] [--master-addr A] [--master-port P] [--grace S] program [args...]\n"
               "  -n N            processes to start (default 1; also --nproc)\n"
               "  --master-addr   MASTER_ADDR for the rendezvous (default 127.0.0.1)\n"
               "  --master-port   MASTER_PORT (default: a free port)\n"
               "  --grace S       seconds between SIGTERM and SIGKILL when stopping (default 5)\n");
  return 2;
}

int exit_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 1, port = -1;
  double grace = 5.0;
  std::string addr = "127.0.0.1";
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "-n" || a == "--nproc" || a == "--nproc-per-node") {
      if (!(v = next()) || (n = std::atoi(v)) < 1) return usage("-n needs a positive number");
    } else if (a == "--master-addr") {
      if (!(v = next())) return usage("--master-addr needs a value");
      addr = v;
    } else if (a == "--master-port") {
      if (!(v = next()) || (port = std::atoi(v)) <= 0 || port > 65535) return usage("bad --master-port");
    } else if (a == "--grace") {
      if (!(v = next())) return usage("--grace needs seconds");
      grace = std::atof(v);
    } else if (a == "-h" || a == "--help") {
      return usage(nullptr);
    } else if (a == "--") {
      ++i;
      break;
    } else {
      return usage(("unknown option " + a).c_str());
    }
  }
  if (i >= argc) return usage("no program given");
  if (port < 0) {
    const char* env = std::getenv("MASTER_PORT");
    port = env ? std::atoi(env) : free_port();
    if (port <= 0) return usage("no free port found; pass --master-port");
  }

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaction(s, &sa, nullptr);

  std::vector<pid_t> pids(static_cast<size_t>(n), -1);
  std::vector<bool> done(static_cast<size_t>(n), false);
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("hg-run: fork");
      for (int k = 0; k < r; ++k) kill(pids[static_cast<size_t>(k)], SIGKILL);
      return 1;
    }
    if (pid == 0) {
      for (int s : {SIGINT, SIGTERM, SIGHUP}) signal(s, SIG_DFL);
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 1);
      setenv("GROUP_RANK", "0", 1);
      setenv("MASTER_ADDR", addr.c_str(), 1);
      setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      // N ranks on one machine share its cores: without a setting of its
      // own, each gets cores / N OpenMP threads (torchrun sets 1).
      if (n > 1 && std::getenv("OMP_NUM_THREADS") == nullptr) {
        const long cores = sysconf(_SC_NPROCESSORS_ONLN);
        setenv("OMP_NUM_THREADS", std::to_string(std::max(1L, cores / n)).c_str(), 1);
      }
      execvp(argv[i], argv + i);
      std::fprintf(stderr, "hg-run: cannot run %s: %s\n", argv[i], std::strerror(errno));
      _exit(127);
    }
    pids[static_cast<size_t>(r)] = pid;
  }

  int result = 0, failed_rank = -1, alive = n;
  bool stopping = false;
  std::chrono::steady_clock::time_point kill_at{};
  auto stop_all = [&](int sig) {
    for (int r = 0; r < n; ++r)
      if (!done[static_cast<size_t>(r)]) kill(pids[static_cast<size_t>(r)], sig);
  };
  int forwarded = 0;
  while (alive > 0) {
    if (g_signal != 0 && g_signal != forwarded) {  // forward once per distinct signal
      forwarded = g_signal;
      stop_all(forwarded);
      if (!stopping) {
        stopping = true;
        result = 128 + forwarded;
        kill_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(grace * 1000));
      }
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < n; ++r) {
        if (pids[static_cast<size_t>(r)] != pid) continue;
        done[static_cast<size_t>(r)] = true;
        --alive;
        const int code = exit_status(status);
        if (code != 0 && !stopping) {
          stopping = true;
          result = code;
          failed_rank = r;
          std::fprintf(stderr, "hg-run: rank %d exited with status %d; stopping the other %d rank(s)\n", r, code,
                       alive);
          stop_all(SIGTERM);
          kill_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(grace * 1000));
        }
      }
      continue;
    }
    if (stopping && std::chrono::steady_clock::now() >= kill_at) {
      stop_all(SIGKILL);
      kill_at = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (failed_rank >= 0) std::fprintf(stderr, "hg-run: failed (rank %d, status %d)\n", failed_rank, result);
  return result;
}
