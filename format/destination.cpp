#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "base/strings.h"
#include "format/destination_internal.h"
#include "format/layout.h"

namespace shardify::detail {
namespace {

Result<std::string> RealPath(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return IOError("cannot resolve " + path + ": " + std::strerror(errno));
  return std::string(buf);
}

// Whether `staging` lies on the file system of `dir`; it then gets dir's permissions.
bool SameFileSystem(const std::string& staging, const std::string& dir) {
  struct stat a, b;
  if (::stat(staging.c_str(), &a) != 0 || ::stat(dir.c_str(), &b) != 0 || a.st_dev != b.st_dev) return false;
  return ::chmod(staging.c_str(), b.st_mode & 07777) == 0;
}

}  // namespace

bool IsDatasetFile(const std::string& name) {
  const std::string tmp_manifest = std::string(kManifestFileName) + kTempSuffix;
  const std::string tmp_part = std::string(kPartManifestFileName) + kTempSuffix;
  return name == kManifestFileName || name == tmp_manifest || name == kPartManifestFileName || name == tmp_part ||
         (name.rfind("shard-", 0) == 0 &&
          (EndsWith(name, kShardFileSuffix) || EndsWith(name, std::string(kShardFileSuffix) + kTempSuffix)));
}

bool Destination::IsCompanion(const std::string& name) const {
  return std::find(companions_.begin(), companions_.end(), name) != companions_.end();
}

bool Destination::Belongs(const std::string& name) const {
  return IsDatasetFile(name) || IsCompanion(name) ||
         (EndsWith(name, kTempSuffix) && IsCompanion(name.substr(0, name.size() - std::strlen(kTempSuffix))));
}

Result<std::unique_ptr<Destination>> Destination::Acquire(const std::string& dir, bool overwrite,
                                                          std::vector<std::string> companions, bool fsync) {
  if (PathExists(dir) && !IsDirectory(dir)) return InvalidArgument(dir + ": exists and is not a directory");
  RETURN_IF_ERROR(MakeDirs(dir));
  std::unique_ptr<Destination> d(new Destination(dir, std::move(companions), fsync));
  Result<std::unique_ptr<FileLock>> lock = FileLock::Acquire(JoinPath(dir, kLockFileName));
  if (!lock.ok()) {
    if (lock.status().code() != StatusCode::kBusy) return lock.status();
    return Busy(dir + ": another process is writing a dataset here (" + lock.status().message() +
                "); wait for it to end or choose another destination");
  }
  d->lock_ = std::move(lock).value();
  ASSIGN_OR_RETURN(d->real_, RealPath(dir));
  const size_t slash = d->real_.find_last_of('/');  // real_ is absolute; "/" has no sibling
  if (slash != std::string::npos && slash + 1 < d->real_.size()) {
    d->sibling_ = d->real_.substr(0, slash) + "/." + d->real_.substr(slash + 1) + kStagingSuffix;
  }
  RETURN_IF_ERROR(d->Prepare(overwrite));
  return d;
}

Status Destination::Prepare(bool overwrite) {
  // Staging directories of a run that was killed: only this process may write here now.
  const std::string inside = JoinPath(dir_, std::string(kStagingSuffix));
  for (const std::string& stale : {sibling_, inside}) {
    if (!stale.empty() && IsDirectory(stale)) RETURN_IF_ERROR(RemoveDatasetDir(stale));
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> names, ListDir(dir_));
  const bool has_manifest = std::find(names.begin(), names.end(), kManifestFileName) != names.end();
  if (has_manifest && !overwrite) {
    return AlreadyExists(dir_ + ": already holds a dataset (" + kManifestFileName + "); to replace it, pass " +
                         kOverwriteHint);
  }
  // Without a manifest, a companion (skipped.tsv) is what an interrupted run left only
  // beside a shard or temporary file of that run; alone, it is a file of the user's.
  const bool interrupted = std::any_of(names.begin(), names.end(), [this](const std::string& name) {
    return IsDatasetFile(name) || (EndsWith(name, kTempSuffix) && Belongs(name));
  });
  std::string foreign;
  for (const std::string& name : names) {
    const bool ours = has_manifest || interrupted ? Belongs(name) : IsDatasetFile(name);
    if (!ours && name != kLockFileName && foreign.empty()) foreign = name;
  }
  if (has_manifest) return ChooseStaging(!foreign.empty());
  if (!foreign.empty() && !overwrite) {
    return InvalidArgument(dir_ + ": is not empty and holds no dataset (found '" + foreign + "')");
  }
  for (const std::string& name : names) {  // left by an interrupted run; no manifest, no dataset
    if (Belongs(name)) RETURN_IF_ERROR(RemoveFile(JoinPath(dir_, name)));
  }
  return Status::Ok();
}

Status Destination::ChooseStaging(bool foreign) {
  if (!foreign && !sibling_.empty() && ::mkdir(sibling_.c_str(), 0755) == 0) {
    if (SameFileSystem(sibling_, real_)) {
      staging_ = sibling_;
      return Status::Ok();
    }
    RemoveEmptyDir(sibling_).IgnoreError();  // another file system: dir_ is a mount point
  }
  staging_ = JoinPath(dir_, std::string(kStagingSuffix));
  if (::mkdir(staging_.c_str(), 0755) != 0) {
    const std::string why = std::strerror(errno);
    staging_.clear();
    return IOError("cannot create directory " + JoinPath(dir_, std::string(kStagingSuffix)) + ": " + why);
  }
  return Status::Ok();
}

Status Destination::Commit() {
  if (staging_.empty() || committed_) return Status::Ok();
  if (staging_ == sibling_) {
    // Locked too, so that the destination stays locked from the moment it is exchanged.
    ASSIGN_OR_RETURN(staged_lock_, FileLock::Acquire(JoinPath(staging_, kLockFileName)));
    const Status swapped = ExchangePaths(staging_, real_);
    if (swapped.ok()) {
      committed_ = true;
      staged_lock_->Moved(JoinPath(dir_, kLockFileName));
      const size_t slash = real_.find_last_of('/');
      if (fsync_) RETURN_IF_ERROR(FsyncDir(slash == 0 ? "/" : real_.substr(0, slash)));
      // The previous dataset, now at the staging path; a failure leaves it hidden there,
      // without its manifest, for the next run here to remove.
      RemoveDatasetDir(staging_).IgnoreError();
      return Status::Ok();
    }
    staged_lock_.reset();
    if (swapped.code() != StatusCode::kUnsupported) return swapped;
  }
  return MoveFiles();
}

Status Destination::MoveFiles() {
  const std::string pending = JoinPath(dir_, std::string(kManifestFileName) + kTempSuffix);
  ASSIGN_OR_RETURN(const std::vector<std::string> fresh, ListDir(staging_));
  // The new manifest leaves the staging directory first, so that no directory holds a
  // manifest whose shards are being moved.
  RETURN_IF_ERROR(RenameFile(JoinPath(staging_, kManifestFileName), pending));
  RETURN_IF_ERROR(RemoveFile(JoinPath(dir_, kManifestFileName)));
  if (fsync_) RETURN_IF_ERROR(FsyncDir(dir_));
  ASSIGN_OR_RETURN(const std::vector<std::string> old, ListDir(dir_));
  for (const std::string& name : old) {
    if (Belongs(name) && JoinPath(dir_, name) != pending) RETURN_IF_ERROR(RemoveFile(JoinPath(dir_, name)));
  }
  for (const std::string& name : fresh) {
    if (name != kManifestFileName && Belongs(name)) {
      RETURN_IF_ERROR(RenameFile(JoinPath(staging_, name), JoinPath(dir_, name)));
    }
  }
  if (fsync_) RETURN_IF_ERROR(FsyncDir(dir_));
  RETURN_IF_ERROR(RenameFile(pending, JoinPath(dir_, kManifestFileName)));
  if (fsync_) RETURN_IF_ERROR(FsyncDir(dir_));
  committed_ = true;
  RemoveDatasetDir(staging_).IgnoreError();
  return Status::Ok();
}

Status Destination::RemoveDatasetDir(const std::string& path) const {
  RETURN_IF_ERROR(RemoveFile(JoinPath(path, kManifestFileName)));  // no longer a dataset
  ASSIGN_OR_RETURN(const std::vector<std::string> names, ListDir(path));
  for (const std::string& name : names) {
    if (Belongs(name) || name == kLockFileName) RETURN_IF_ERROR(RemoveFile(JoinPath(path, name)));
  }
  return RemoveEmptyDir(path);
}

Destination::~Destination() {
  if (!staging_.empty() && !committed_) RemoveDatasetDir(staging_).IgnoreError();
}

}  // namespace shardify::detail
