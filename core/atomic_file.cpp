#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "core/error.h"

namespace hg {
namespace {

std::string errno_text() { return std::strerror(errno); }

// What to do about a failed write, by errno: the cases a user can fix get a hint.
std::string write_hint(int error) {
  switch (error) {
    case ENOSPC: return "; the disk is full: free some space and run again";
    case EDQUOT: return "; the disk quota is used up: free some space and run again";
    case EFBIG: return "; the file size limit (ulimit -f) is smaller than the file: raise it and run again";
    default: return "; check free disk space and quotas";
  }
}

// Test hook for fault injection (examples/check_faults.sh): with
// HG_TEST_FAIL_IO=write:N (or rename:N) in the environment, the N-th write
// (rename) of an AtomicFile in this process fails, with ENOSPC (EIO), as on
// a full disk or a failing device. Unset, it costs one getenv per process.
int injected_error(const char* op) {
  struct Plan {
    std::string op;
    int64_t at = 0;
  };
  static const Plan plan = [] {
    Plan p;
    const char* spec = std::getenv("HG_TEST_FAIL_IO");
    if (spec != nullptr) {
      const char* colon = std::strchr(spec, ':');
      if (colon != nullptr) {
        p.op.assign(spec, colon);
        p.at = std::atoll(colon + 1);
      }
    }
    return p;
  }();
  static std::atomic<int64_t> count{0};
  if (plan.at <= 0 || plan.op != op) return 0;
  if (count.fetch_add(1) + 1 != plan.at) return 0;
  return plan.op == "write" ? ENOSPC : EIO;
}

// The folder part of `path` ("." for a bare file name).
std::string parent_folder(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

AtomicFile::AtomicFile(std::string path, std::string who) : path_(std::move(path)), who_(std::move(who)) {
  // A per-process counter keeps two threads writing the same path apart.
  static std::atomic<uint64_t> counter{0};
  temp_ = path_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  HG_CHECK(fd_ >= 0, who_, ": cannot create the temp file '", temp_, "' next to '", path_, "': ", errno_text(),
           "; check that the folder exists and is writable");
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFile::write(const void* data, size_t nbytes) {
  HG_CHECK(fd_ >= 0 && !committed_, who_, ": write to '", temp_, "' after commit()");
  const char* p = static_cast<const char*>(data);
  while (nbytes > 0) {
    // Linux write() moves at most ~2 GiB per call, so large buffers take several.
    const int injected = injected_error("write");
    const ssize_t written = injected != 0 ? (errno = injected, -1) : ::write(fd_, p, std::min<size_t>(nbytes, size_t{1} << 30));
    if (written < 0 && errno == EINTR) continue;
    const int error = written == 0 ? ENOSPC : errno;  // write() returning 0 for a regular file: no space
    HG_CHECK(written > 0, who_, ": writing '", temp_, "' failed: ", std::strerror(error), write_hint(error),
             " (the previous '", path_, "', if any, is intact)");
    p += written;
    nbytes -= static_cast<size_t>(written);
  }
}

void AtomicFile::commit() {
  HG_CHECK(fd_ >= 0 && !committed_, who_, ": commit() of '", temp_, "' twice");
  // The data must be on disk before the rename publishes it, or a crash could
  // leave a renamed-but-empty file in place of the old one.
  HG_CHECK(::fsync(fd_) == 0, who_, ": fsync of '", temp_, "' failed: ", errno_text());
  const int fd = std::exchange(fd_, -1);
  HG_CHECK(::close(fd) == 0, who_, ": closing '", temp_, "' failed: ", errno_text());
  const int injected = injected_error("rename");
  HG_CHECK(injected == 0 ? ::rename(temp_.c_str(), path_.c_str()) == 0 : (errno = injected, false), who_, ": cannot rename '", temp_, "' to '", path_,
           "': ", errno_text(), "; is the target a folder or on another file system?");
  committed_ = true;

  // fsync the folder so the rename itself survives a crash.
  const std::string folder = parent_folder(path_);
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  HG_CHECK(dir >= 0, who_, ": wrote '", path_, "' but cannot open its folder '", folder, "' to sync it: ",
           errno_text());
  const bool synced = ::fsync(dir) == 0 || errno == EINVAL;
  const int sync_errno = errno;
  ::close(dir);
  HG_CHECK(synced, who_, ": wrote '", path_, "' but fsync of its folder failed: ", std::strerror(sync_errno));
}

}  // namespace hg
