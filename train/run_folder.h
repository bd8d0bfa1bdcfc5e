// hg-train's --out folder: one run owns it at a time, and a run never
// silently clobbers or loses another's results.
//
// Opening a RunFolder, before any training:
//   1. creates the folder if needed;
//   2. takes an advisory lock (flock on <out>/.hg-train.lock, held until the
//      process exits, so a killed run releases it): a second hg-train on the
//      same folder gets a clear error naming the first one's pid;
//   3. checks the folder is writable (creates and removes a probe file), so a
//      read-only --out fails now, not at the first save an epoch later;
//   4. removes temp files of killed saves ("<file>.tmp.<pid>.<n>" of pids
//      that no longer run; core/atomic_file.h);
//   5. applies the start rule: a fresh run (no --resume) refuses a folder that
//      holds files, unless --overwrite, which deletes hg-train's own files
//      (checkpoint, metrics, curves) and leaves anything else alone.
#pragma once

#include <string>

namespace hg::train {

enum class StartMode { kFresh, kResume, kOverwrite };

// The default --out of a fresh run: `base` when it does not exist or holds no
// files (the lock file aside), else the first of base-2, base-3, ... that does
// not, so running hg-train twice gives two folders and loses nothing.
std::string next_run_folder(const std::string& base);
// The default --out of --resume: the last of base, base-2, base-3, ... that
// holds a checkpoint.safetensors; empty when none does.
std::string latest_run_folder(const std::string& base);

class RunFolder {
 public:
  RunFolder(const std::string& path, StartMode mode);
  ~RunFolder();
  RunFolder(const RunFolder&) = delete;
  RunFolder& operator=(const RunFolder&) = delete;

  std::string file(const std::string& name) const;  // <path>/<name>
  int stale_temp_files_removed() const { return removed_; }

  static constexpr const char* kLockName = ".hg-train.lock";

 private:
  std::string path_;
  int lock_fd_ = -1;
  int removed_ = 0;
};

}  // namespace hg::train
