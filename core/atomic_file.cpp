#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace hg {
namespace {

std::string errno_text() { return std::strerror(errno); }

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
    const ssize_t written = ::write(fd_, p, std::min<size_t>(nbytes, size_t{1} << 30));
    if (written < 0 && errno == EINTR) continue;
    HG_CHECK(written > 0, who_, ": writing '", temp_, "' failed: ", errno_text(), "; check free disk space and quotas");
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
  HG_CHECK(::rename(temp_.c_str(), path_.c_str()) == 0, who_, ": cannot rename '", temp_, "' to '", path_,
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
