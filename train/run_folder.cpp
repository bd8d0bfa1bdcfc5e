#include "train/run_folder.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace hg::train {
namespace {

namespace fs = std::filesystem;

// The files hg-train writes into --out.
constexpr const char* kOwnFiles[] = {"checkpoint.safetensors", "metrics.jsonl", "curves.svg", "sample.txt"};

// The pid in an AtomicFile temp name "<file>.tmp.<pid>.<n>", or -1.
long temp_file_pid(const std::string& name) {
  const size_t tmp = name.rfind(".tmp.");
  if (tmp == std::string::npos) return -1;
  const std::string rest = name.substr(tmp + 5);  // "<pid>.<n>"
  const size_t dot = rest.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == rest.size()) return -1;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (i != dot && (rest[i] < '0' || rest[i] > '9')) return -1;
  }
  return std::strtol(rest.substr(0, dot).c_str(), nullptr, 10);
}

bool process_is_gone(long pid) { return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

}  // namespace

RunFolder::RunFolder(const std::string& path, StartMode mode) : path_(path) {
  std::error_code ec;
  fs::create_directories(path_, ec);
  HG_CHECK(!ec, "cannot create the --out folder '", path_, "': ", ec.message());
  HG_CHECK(fs::is_directory(path_, ec), "--out '", path_, "' exists but is not a folder");

  // 1. The lock (also the first write into the folder).
  const std::string lock_path = file(kLockName);
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  HG_CHECK(lock_fd_ >= 0, "--out '", path_, "' is not writable (cannot create '", lock_path,
           "': ", std::strerror(errno), "); pick a folder you can write to");
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char pid[32] = {};
    const ssize_t n = ::pread(lock_fd_, pid, sizeof pid - 1, 0);
    ::close(lock_fd_);
    lock_fd_ = -1;
    HG_CHECK(error != EWOULDBLOCK, "--out '", path_, "' is in use by another hg-train",
             n > 0 ? " (pid " + std::string(pid, static_cast<size_t>(n)) + ")" : std::string(),
             "; wait for it to finish or pick another --out");
    HG_FAIL("cannot lock '", lock_path, "': ", std::strerror(error));
  }
  const std::string me = std::to_string(::getpid());
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
    // Only the message of a later second run needs the pid; the lock holds regardless.
  }

  // 2. Writable now, not only at the first save.
  const std::string probe = file(".hg-train.write-test." + me);
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const bool written = fd >= 0 && ::write(fd, "x", 1) == 1;
  const int write_errno = errno;
  if (fd >= 0) ::close(fd);
  ::unlink(probe.c_str());
  HG_CHECK(written, "--out '", path_, "' is not writable (", std::strerror(write_errno),
           "); pick a folder you can write to, with free space");

  // 3. Temp files of saves that were killed (their writers are gone).
  std::vector<std::string> present;
  for (const auto& entry : fs::directory_iterator(path_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == kLockName) continue;
    const long pid = temp_file_pid(name);
    if (pid > 0 && process_is_gone(pid) && fs::remove(entry.path(), ec)) {
      ++removed_;
      continue;
    }
    present.push_back(name);
  }
  HG_CHECK(!ec, "cannot list the --out folder '", path_, "': ", ec.message());

  // 4. The start rule.
  if (mode == StartMode::kOverwrite) {
    for (const char* own : kOwnFiles) fs::remove(file(own), ec);
  } else if (mode == StartMode::kFresh && !present.empty()) {
    std::string names;
    for (size_t i = 0; i < present.size() && i < 5; ++i) names += (i ? ", " : "") + present[i];
    if (present.size() > 5) names += ", ...";
    HG_FAIL("--out '", path_, "' already holds files (", names,
            "); continue that run with --resume, start it afresh with --overwrite (deletes hg-train's checkpoint, "
            "metrics and curves there), or pick another --out");
  }
}

namespace {

bool holds_files(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return false;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename() != RunFolder::kLockName) return true;
  }
  return false;
}

std::string numbered(const std::string& base, int k) { return k == 1 ? base : base + "-" + std::to_string(k); }

}  // namespace

std::string next_run_folder(const std::string& base) {
  for (int k = 1;; ++k) {
    HG_CHECK(k < 100000, "--out: runs ", base, " to ", numbered(base, k), " all hold files; pick an --out");
    if (!holds_files(numbered(base, k))) return numbered(base, k);
  }
}

std::string latest_run_folder(const std::string& base) {
  std::string last;
  std::error_code ec;
  for (int k = 1; k < 100000; ++k) {
    const std::string dir = numbered(base, k);
    if (!fs::exists(dir, ec)) {
      if (k > 1) break;  // base-2, base-3, ... are made in order; base itself may be gone
      continue;
    }
    if (fs::exists(fs::path(dir) / "checkpoint.safetensors", ec)) last = dir;
  }
  return last;
}

RunFolder::~RunFolder() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the lock; the file stays (removing it would race)
}

std::string RunFolder::file(const std::string& name) const { return (fs::path(path_) / name).string(); }

}  // namespace hg::train
