// How a DatasetWriter takes over its destination directory (internal).
//
// Acquire() first locks the destination for this process: the lock file
// `<dir>/.shardify.lock` (a FileLock, so it dies with its process and a killed run never
// blocks the next one). A second writer of the same directory gets kBusy. It then looks
// at what is there and picks the directory the new dataset is written to:
//  - `dir` itself when it holds no dataset; what an interrupted run left (shards,
//    temporary files, companions, but no manifest) is removed first. A companion with
//    none of the others is a file of the user's: without overwrite it is refused as
//    foreign, like any other file;
//  - to overwrite a dataset, a staging directory: `.<name>.shardify-new` beside `dir` on
//    the same file system, or `<dir>/.shardify-new` where no such sibling can be made (dir
//    is a mount point, its parent is read-only) or where `dir` also holds files that are
//    not the dataset's (they stay where they are). The previous dataset stays complete
//    and readable until Commit(). A staging directory left by a killed run is removed.
// Commit(), once the new manifest is in write_dir(), makes it the dataset at `dir`: a
// sibling staging directory is exchanged with `dir` in one atomic rename (renameat2
// RENAME_EXCHANGE), then the previous dataset is removed. Otherwise (staging inside
// `dir`, or a file system without that exchange) files are moved: the previous manifest
// is removed first and the new one arrives last, so an interruption in between leaves
// no manifest, never a mix of two datasets.
// Destroying a Destination that was not committed removes the staging directory (the
// writer removes the files it wrote in `dir`); the lock is released either way.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/file.h"
#include "base/status.h"

namespace shardify::detail {

inline constexpr char kLockFileName[] = ".shardify.lock";
inline constexpr char kStagingSuffix[] = ".shardify-new";

// Names the writer makes: the manifest (or a part manifest), shards and their temporary files.
bool IsDatasetFile(const std::string& name);

class Destination {
 public:
  // `companions`: names of further files that belong to a dataset here (written through
  // the writer, replaced and removed with it).
  static Result<std::unique_ptr<Destination>> Acquire(const std::string& dir, bool overwrite,
                                                      std::vector<std::string> companions, bool fsync);
  ~Destination();
  Destination(const Destination&) = delete;
  Destination& operator=(const Destination&) = delete;

  // Where shards, companions and the manifest are written.
  const std::string& write_dir() const { return staging_.empty() ? dir_ : staging_; }
  bool IsCompanion(const std::string& name) const;
  Status Commit();

 private:
  Destination(std::string dir, std::vector<std::string> companions, bool fsync)
      : dir_(std::move(dir)), companions_(std::move(companions)), fsync_(fsync) {}
  bool Belongs(const std::string& name) const;  // a dataset file or a companion
  Status Prepare(bool overwrite);
  Status ChooseStaging(bool foreign);
  Status MoveFiles();
  // Removes a dataset directory's manifest (first), files and lock file, then the directory.
  Status RemoveDatasetDir(const std::string& path) const;

  std::string dir_, real_;  // as given; resolved (symlinks followed)
  std::string sibling_;     // the sibling staging path, "" when none can be named
  std::string staging_;     // "" when writing in dir_
  std::vector<std::string> companions_;
  bool fsync_;
  bool committed_ = false;
  std::unique_ptr<FileLock> lock_, staged_lock_;
};

}  // namespace shardify::detail
