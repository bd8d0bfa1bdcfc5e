// AtomicFile: writes a file so that readers, and a crash or SIGKILL at any
// moment, see either the previous content of `path` or the complete new one.
//
//   hg::AtomicFile out(path, "save_safetensors");  // temp file next to path
//   out.write(header.data(), header.size());
//   out.write(data, nbytes);
//   out.commit();  // fsync, rename over path, fsync the folder
//
// The bytes go to a uniquely named temp file in the same folder (rename is
// atomic only within one file system), created with O_EXCL; commit() fsyncs
// it, checks close(2) (which can report a deferred write error), renames it
// over `path`, then fsyncs the folder so the rename itself survives a crash
// (folders that cannot be synced, EINVAL, are accepted: the file is complete).
// A writer destroyed before commit() — an exception, a failed write —
// removes its temp file, so a failed save leaves nothing behind. Errors are
// hg::Error prefixed with `who` and naming the file; a full disk (ENOSPC,
// EDQUOT) and the file size limit (EFBIG: set SIGXFSZ to SIG_IGN to get it
// instead of being killed, as hg-train does) say so and how to fix it.
//
// Temp files are named "<path>.tmp.<pid>.<n>"; a writer killed by SIGKILL
// cannot remove its own, so a program that owns a folder removes the ones of
// dead pids at start (hg-train does, train/run_folder.h).
//
// Fault injection (tests only): HG_TEST_FAIL_IO=write:N or rename:N makes the
// N-th write or rename of any AtomicFile in the process fail (ENOSPC / EIO).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace hg {

class AtomicFile {
 public:
  AtomicFile(std::string path, std::string who);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t nbytes);
  void write(std::string_view text) { write(text.data(), text.size()); }
  void commit();

  const std::string& temp_path() const { return temp_; }

 private:
  std::string path_, who_, temp_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace hg
