#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/file.h"
#include "base/strings.h"
#include "convert/pipeline/parts.h"
#include "convert/pipeline/parts_internal.h"
#include "convert/pipeline/upload_internal.h"
#include "format/layout.h"
#include "format/manifest.h"
#include "storage/location.h"
#include "storage/object_store.h"
#include "storage/remote.h"

namespace shardify::convert::detail {
namespace {

// The most objects a listing of one part's folder, or of all the parts, may name: the
// shards of a dataset put in parts (1,000,000: 256 TiB in shards of the default size) and
// the other files of each part (part.sfm, skipped.tsv, the plans and the fingerprint, with
// room to spare). A store that lists more is refused before it fills memory.
constexpr uint64_t kMaxListedShards = 1000000;
constexpr uint64_t kMaxPartFiles = 8;
constexpr uint64_t kMaxPartListing = kMaxListedShards + kMaxPartFiles;
constexpr uint64_t kMaxPartsListing = kMaxListedShards + uint64_t{kMaxParts} * kMaxPartFiles;

constexpr char kLockSuffix[] = ".lock";
constexpr char kProbePrefix[] = ".shardify-probe-";  // + pid: the object CheckWritable puts

// Removes `dir` and everything in it (a staging folder: files and folders of files). A
// symbolic link is removed, never followed.
void RemoveTree(const std::string& dir) {
  if (IsSymlink(dir) || !IsDirectory(dir)) {
    RemoveFile(dir).IgnoreError();
    return;
  }
  Result<std::vector<std::string>> names = ListDir(dir);
  if (names.ok()) {
    for (const std::string& name : *names) RemoveTree(JoinPath(dir, name));
  }
  RemoveEmptyDir(dir).IgnoreError();
}

// Whether the process whose id ends staging folder `name` (<name>-<pid>) is alive.
bool OwnerAlive(const std::string& name) {
  const size_t dash = name.rfind('-');
  const std::string digits = dash == std::string::npos ? "" : name.substr(dash + 1);
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  const pid_t pid = static_cast<pid_t>(std::stol(digits));
  return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
}

// Removes the staging folders in `uploads` that no process holds, with their lock files:
// a folder's lock (<folder>.lock) is held while its process uses it and dies with the
// process (kill -9 included), so a free lock means its run ended. A folder without a lock
// file (of an earlier version) goes once the process its name ends with is gone. Hidden
// entries are no stage's.
void RemoveStaleStages(const std::string& uploads) {
  Result<std::vector<std::string>> names = ListDir(uploads);
  if (!names.ok()) return;
  for (const std::string& name : *names) {
    if (name.empty() || name[0] == '.') continue;
    const bool lock_file = EndsWith(name, kLockSuffix);
    const std::string folder =
        JoinPath(uploads, lock_file ? name.substr(0, name.size() - std::strlen(kLockSuffix)) : name);
    if (lock_file ? PathExists(folder) : IsSymlink(folder) || !IsDirectory(folder))
      continue;  // a lock: with its folder
    if (!PathExists(folder + kLockSuffix) && OwnerAlive(name)) continue;
    const Result<std::unique_ptr<FileLock>> lock = FileLock::Acquire(folder + kLockSuffix);
    if (lock.ok()) RemoveTree(folder);  // else held: a live process's
  }                                     // each lock taken was released at the end of its turn, and its file removed
}

// This process's staging folder for one location, held (its lock file taken) while the
// object lives.
struct Stage {
  std::string path;
  std::unique_ptr<FileLock> lock;
};

// The stage for `store`: <cache dir>/uploads/<name>-<pid>, empty. The stale stages of
// other runs go first (RemoveStaleStages).
Result<Stage> TakeStage(const storage::ObjectStore& store) {
  const std::string uploads = JoinPath(storage::DefaultCacheDir(), "uploads");
  RETURN_IF_ERROR(MakeDirs(uploads));
  Stage stage;
  stage.path = JoinPath(uploads, storage::ReadableName(store.location().text) + "-" + std::to_string(::getpid()));
  ASSIGN_OR_RETURN(stage.lock, FileLock::Acquire(stage.path + kLockSuffix));
  RemoveTree(stage.path);  // a folder of an earlier process with this pid
  RemoveStaleStages(uploads);
  return stage;
}

// `st` with the staging folder's paths in its message named as the objects they stand for.
Status AsRemote(const Status& st, const std::string& stage, const storage::ObjectStore& store) {
  if (st.ok()) return st;
  std::string text = st.message();
  for (size_t at = text.find(stage); at != std::string::npos; at = text.find(stage, at)) {
    text.replace(at, stage.size(), store.location().text);
    at += store.location().text.size();
  }
  return Status(st.code(), text);
}

// Puts an empty object under the location and deletes it, so that a missing bucket, or
// credentials that may not write or delete there, fail before any work is done.
Status CheckWritable(const storage::ObjectStore& store, const std::string& stage) {
  const std::string name = kProbePrefix + std::to_string(::getpid());
  const std::string empty = JoinPath(stage, name);
  RETURN_IF_ERROR(MakeDirs(stage));
  RETURN_IF_ERROR(WriteFileAtomic(empty, "", 0, false));
  Status st = store.Put(name, empty);
  if (st.ok()) st = store.Delete(name);
  RemoveFile(empty).IgnoreError();
  return st.WithContext("writing to " + store.location().text + " (checked first, by putting and deleting object '" +
                        name + "')");
}

// Manifest `name` (manifest.sfm, part.sfm: at most kMaxManifestBytes) into `path` (its
// folders made), when the store has it; whether it had it.
Result<bool> GetManifestIfThere(const storage::ObjectStore& store, const std::string& name, const std::string& path) {
  RETURN_IF_ERROR(MakeDirs(path.substr(0, path.rfind('/'))));
  const Status got = store.Get(name, path, storage::SizeBound::AtMost(kMaxManifestBytes));  // none: no file
  if (got.code() == StatusCode::kNotFound) return false;
  RETURN_IF_ERROR(got);
  return true;
}

// The manifest at `store` (the dataset there before this conversion), if there is one.
Result<std::optional<Manifest>> PreviousManifest(const storage::ObjectStore& store, const std::string& scratch) {
  ASSIGN_OR_RETURN(const bool there, GetManifestIfThere(store, kManifestFileName, scratch));
  if (!there) return std::optional<Manifest>();
  Result<std::vector<uint8_t>> bytes = ReadWholeFile(scratch, kMaxManifestBytes);
  RemoveFile(scratch).IgnoreError();
  if (!bytes.ok()) return bytes.status();
  ASSIGN_OR_RETURN(Manifest m, DecodeManifestFile(bytes->data(), bytes->size(), store.Url(kManifestFileName)));
  return std::optional<Manifest>(std::move(m));
}

// Deletes `names` from the store, ignoring none of its errors.
Status DeleteAll(const storage::ObjectStore& store, const std::vector<std::string>& names) {
  for (const std::string& name : names) RETURN_IF_ERROR(store.Delete(name));
  return Status::Ok();
}

// Converts `local` (its dest: the stage), then puts the files of `folder` (in the stage)
// under `under`, `last` last. With `early`, the shards go up as they are finished, during
// the conversion. Sets *converted once the conversion is done; returns the summary with
// the objects put. A part found complete or merged already puts nothing.
Result<ConvertSummary> ConvertAndUpload(ConvertOptions local, const storage::ObjectStore& store,
                                        const std::string& folder, const std::string& under, const char* last,
                                        bool early, ProgressSink* progress, bool* converted) {
  auto object = [&under](const std::string& name) { return under.empty() ? name : under + "/" + name; };
  std::optional<EarlyUploads> uploads;
  if (early && !local.dry_run) {
    uploads.emplace(
        folder,
        [&](const std::string& name) {
          return store.Put(object(name), JoinPath(folder, name)).WithContext("uploading to " + store.location().text);
        },
        local.cancel);
    local.cancel = uploads->cancel();
  }
  Result<ConvertSummary> sum = Convert(local, progress);
  const Status uploaded = uploads ? uploads->Stop() : Status::Ok();
  if (!sum.ok() || !uploaded.ok()) {  // a conversion that failed leaves no objects behind
    if (uploads) {
      for (const std::string& name : uploads->put()) store.Delete(object(name)).IgnoreError();
    }
    // The upload's error when it stopped the conversion (or came after it), else the
    // conversion's own.
    const bool upload_stopped_it = !uploaded.ok() && (sum.ok() || sum.status().code() == StatusCode::kCancelled);
    return upload_stopped_it ? uploaded : sum.status();
  }
  if (local.dry_run || sum->part_state != ConvertSummary::PartState::kConverted) return sum;
  *converted = true;
  const std::vector<std::string> done = uploads ? uploads->put() : std::vector<std::string>();
  ASSIGN_OR_RETURN(const storage::UploadSummary up,
                   store.Upload(folder, under, {last}, done, [&](uint64_t objects, uint64_t bytes, uint64_t total) {
                     if (progress != nullptr) progress->OnProgress({"upload", objects, total, bytes});
                   }));
  sum->uploaded_to = store.location().text;
  sum->uploaded_objects = done.size() + up.objects;
  return sum;
}

// Part o.part of o.parts into `stage`, then its folder under parts/ in the store, its
// part manifest last. What the store holds already (this part, or the dataset merged) is
// put in the stage first, so the part is judged by the rules of a local one (StartPart).
Result<ConvertSummary> ConvertPart(const ConvertOptions& options, const storage::ObjectStore& store,
                                   const std::string& stage, ProgressSink* progress, bool* converted) {
  PartInfo part;
  part.index = options.part;
  part.count = options.parts;
  const std::string folder = PartDir(stage, part);
  const std::string under = folder.substr(stage.size() + 1);  // parts/KKKKK-of-NNNNN
  ASSIGN_OR_RETURN(const bool merged, GetManifestIfThere(store, kManifestFileName, JoinPath(stage, kManifestFileName)));
  if (!merged && !options.overwrite) {
    RETURN_IF_ERROR(
        GetManifestIfThere(store, under + "/" + kPartManifestFileName, JoinPath(folder, kPartManifestFileName))
            .status());
  }
  ASSIGN_OR_RETURN(const std::vector<storage::ListedObject> before, store.List(under + "/", kMaxPartListing));
  if (!options.dry_run) RETURN_IF_ERROR(CheckWritable(store, stage));
  ConvertOptions local = options;
  local.dest = stage;
  // Shards go up during the conversion only into a part folder that holds nothing yet.
  ASSIGN_OR_RETURN(ConvertSummary sum, ConvertAndUpload(local, store, folder, under, kPartManifestFileName,
                                                        !merged && before.empty(), progress, converted));
  if (!*converted) return sum;
  // A part converted again (--overwrite) leaves no object of its earlier copy behind.
  ASSIGN_OR_RETURN(const std::vector<std::string> now, ListDir(folder));
  std::vector<std::string> stale;
  for (const storage::ListedObject& object : before) {
    const std::string& name = object.name;
    if (std::find(now.begin(), now.end(), name.substr(under.size() + 1)) == now.end()) stale.push_back(name);
  }
  RETURN_IF_ERROR(DeleteAll(store, stale));
  return sum;
}

// The whole dataset into `stage`, then into the store, the manifest last; the shards the
// dataset there before named and this one does not are deleted after.
Result<ConvertSummary> ConvertWhole(const ConvertOptions& options, const storage::ObjectStore& store,
                                    const std::string& stage, ProgressSink* progress, bool* converted) {
  ASSIGN_OR_RETURN(const std::optional<Manifest> previous, PreviousManifest(store, JoinPath(stage, ".previous.sfm")));
  if (previous && !options.overwrite && !options.dry_run) {
    return AlreadyExists(options.dest + ": a dataset is there already; to replace it, pass " + kOverwriteHint);
  }
  if (!options.dry_run) RETURN_IF_ERROR(CheckWritable(store, stage));
  ConvertOptions local = options;
  local.dest = stage;
  local.overwrite = true;  // the stage is this process's own
  // Shards go up during the conversion only where no dataset is there to be read.
  ASSIGN_OR_RETURN(ConvertSummary sum,
                   ConvertAndUpload(local, store, stage, "", kManifestFileName, !previous, progress, converted));
  if (!*converted) return sum;
  if (previous) {
    ASSIGN_OR_RETURN(const std::vector<std::string> now, ListDir(stage));
    std::vector<std::string> stale;
    for (const ShardInfo& shard : previous->shards) {
      if (std::find(now.begin(), now.end(), shard.file_name) == now.end()) stale.push_back(shard.file_name);
    }
    RETURN_IF_ERROR(DeleteAll(store, stale));
  }
  return sum;
}

// The objects of the parts at `store` (those of hidden folders under parts/ are no part's,
// as on disk), fetched into `stage` with the manifest there if any, once the store has
// shown that it takes writes.
Status FetchParts(const storage::ObjectStore& store, const std::string& stage, std::vector<std::string>* parts) {
  const std::string root = std::string(kPartsDirName) + "/";
  ASSIGN_OR_RETURN(const std::vector<storage::ListedObject> listed, store.List(root, kMaxPartsListing));
  RETURN_IF_ERROR(CheckWritable(store, stage));
  RETURN_IF_ERROR(GetManifestIfThere(store, kManifestFileName, JoinPath(stage, kManifestFileName)).status());
  for (const storage::ListedObject& object : listed) {
    if (object.name.compare(0, root.size() + 1, root + ".") == 0) continue;
    ASSIGN_OR_RETURN(const std::string path, JoinRelative(stage, object.name));
    RETURN_IF_ERROR(MakeDirs(path.substr(0, path.rfind('/'))));
    RETURN_IF_ERROR(store.Get(object.name, path, storage::SizeBound::Exactly(object.size, "the listing")));
    parts->push_back(object.name);
  }
  return Status::Ok();
}

}  // namespace

EarlyUploads::EarlyUploads(std::string dir, Put put, const std::atomic<bool>* caller_cancel)
    : dir_(std::move(dir)), put_file_(std::move(put)), caller_cancel_(caller_cancel) {
  thread_ = std::thread([this] { Run(); });
}

EarlyUploads::~EarlyUploads() { Stop().IgnoreError(); }

Status EarlyUploads::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  return error_;
}

void EarlyUploads::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!done_) {
    lock.unlock();
    if (caller_cancel_ != nullptr && caller_cancel_->load()) cancel_ = true;
    Status st = Pass();
    lock.lock();
    if (!st.ok()) {
      error_ = std::move(st);
      cancel_ = true;
      return;
    }
    wake_.wait_for(lock, std::chrono::milliseconds(200));
  }
}

Status EarlyUploads::Pass() {
  Result<std::vector<std::string>> names = ListDir(dir_);
  if (!names.ok()) return Status::Ok();  // not made yet
  for (const std::string& name : *names) {
    const bool shard = name.size() > 10 && name.compare(0, 6, "shard-") == 0 &&
                       name.compare(name.size() - 4, 4, ".sfs") == 0;  // not a .tmp being written
    if (!shard || std::find(put_.begin(), put_.end(), name) != put_.end()) continue;
    RETURN_IF_ERROR(put_file_(name));
    put_.push_back(name);
  }
  return Status::Ok();
}

Result<ConvertSummary> ConvertToObjectStore(const ConvertOptions& options, ProgressSink* progress) {
  ASSIGN_OR_RETURN(const storage::ObjectStore store, storage::ObjectStore::Open(options.dest));
  ASSIGN_OR_RETURN(const Stage stage, TakeStage(store));
  bool converted = false;  // the stage holds a converted dataset or part: kept when its upload fails
  Result<ConvertSummary> sum = options.parts > 0 ? ConvertPart(options, store, stage.path, progress, &converted)
                                                 : ConvertWhole(options, store, stage.path, progress, &converted);
  if (!sum.ok() && converted) return sum.status().WithContext("the converted dataset is kept in " + stage.path);
  RemoveTree(stage.path);
  if (!sum.ok()) return AsRemote(sum.status(), stage.path, store);
  return sum;
}

Result<MergeSummary> MergeInObjectStore(const std::string& dest, bool fsync) {
  ASSIGN_OR_RETURN(const storage::ObjectStore store, storage::ObjectStore::Open(dest));
  ASSIGN_OR_RETURN(const Stage stage, TakeStage(store));
  auto merge = [&]() -> Result<MergeSummary> {
    std::vector<std::string> parts;
    RETURN_IF_ERROR(FetchParts(store, stage.path, &parts));
    ASSIGN_OR_RETURN(MergeSummary sum, Merge(stage.path, fsync));
    if (!sum.already_merged) {
      RETURN_IF_ERROR(store.Upload(stage.path, "", {kManifestFileName}).status());
    }
    RETURN_IF_ERROR(DeleteAll(store, parts));  // the dataset is complete: its parts go
    return sum;
  };
  Result<MergeSummary> sum = merge();
  RemoveTree(stage.path);
  if (!sum.ok()) return AsRemote(sum.status(), stage.path, store);
  return sum;
}

}  // namespace shardify::convert::detail
