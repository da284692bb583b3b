#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/file.h"
#include "convert/parts.h"
#include "convert/parts_internal.h"
#include "convert/upload_internal.h"
#include "format/layout.h"
#include "format/manifest.h"
#include "storage/location.h"
#include "storage/object_store.h"
#include "storage/remote.h"

namespace shardify::convert::detail {
namespace {

constexpr uint64_t kMaxManifestBytes = 1ull << 30;

// Removes `dir` and everything in it (a staging folder: files and folders of files).
void RemoveTree(const std::string& dir) {
  Result<std::vector<std::string>> names = ListDir(dir);
  if (names.ok()) {
    for (const std::string& name : *names) {
      const std::string path = JoinPath(dir, name);
      if (IsDirectory(path)) {
        RemoveTree(path);
      } else {
        RemoveFile(path).IgnoreError();
      }
    }
  }
  RemoveEmptyDir(dir).IgnoreError();
}

// A new staging folder for the dataset at `store`: <cache dir>/uploads/<name>-<pid>.
std::string StageFor(const storage::ObjectStore& store) {
  return JoinPath(JoinPath(storage::DefaultCacheDir(), "uploads"),
                  storage::ReadableName(store.location().text) + "-" + std::to_string(::getpid()));
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

// Object `name` into `path` (its folders made), when the store has it; whether it had it.
Result<bool> GetIfThere(const storage::ObjectStore& store, const std::string& name, const std::string& path) {
  RETURN_IF_ERROR(MakeDirs(path.substr(0, path.rfind('/'))));
  const Status got = store.Get(name, path);  // a missing object leaves no file
  if (got.code() == StatusCode::kNotFound) return false;
  RETURN_IF_ERROR(got);
  return true;
}

// The manifest at `store` (the dataset there before this conversion), if there is one.
Result<std::optional<Manifest>> PreviousManifest(const storage::ObjectStore& store, const std::string& scratch) {
  ASSIGN_OR_RETURN(const bool there, GetIfThere(store, kManifestFileName, scratch));
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
  ASSIGN_OR_RETURN(const bool merged, GetIfThere(store, kManifestFileName, JoinPath(stage, kManifestFileName)));
  if (!merged && !options.overwrite) {
    RETURN_IF_ERROR(
        GetIfThere(store, under + "/" + kPartManifestFileName, JoinPath(folder, kPartManifestFileName)).status());
  }
  ASSIGN_OR_RETURN(const std::vector<std::string> before, store.List(under + "/"));
  ConvertOptions local = options;
  local.dest = stage;
  // Shards go up during the conversion only into a part folder that holds nothing yet.
  ASSIGN_OR_RETURN(ConvertSummary sum, ConvertAndUpload(local, store, folder, under, kPartManifestFileName,
                                                        !merged && before.empty(), progress, converted));
  if (!*converted) return sum;
  // A part converted again (--overwrite) leaves no object of its earlier copy behind.
  ASSIGN_OR_RETURN(const std::vector<std::string> now, ListDir(folder));
  std::vector<std::string> stale;
  for (const std::string& name : before) {
    if (std::find(now.begin(), now.end(), name.substr(under.size() + 1)) == now.end()) stale.push_back(name);
  }
  RETURN_IF_ERROR(DeleteAll(store, stale));
  return sum;
}

// The whole dataset into `stage`, then into the store, the manifest last; the shards the
// dataset there before named and this one does not are deleted after.
Result<ConvertSummary> ConvertWhole(const ConvertOptions& options, const storage::ObjectStore& store,
                                    const std::string& stage, ProgressSink* progress, bool* converted) {
  ASSIGN_OR_RETURN(const std::optional<Manifest> previous, PreviousManifest(store, stage + ".previous.sfm"));
  if (previous && !options.overwrite && !options.dry_run) {
    return AlreadyExists(options.dest + ": a dataset is there already (--overwrite replaces it)");
  }
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
  const std::string stage = StageFor(store);
  RemoveTree(stage);       // a folder of an earlier process with this pid
  bool converted = false;  // the stage holds a converted dataset or part: kept when its upload fails
  Result<ConvertSummary> sum = options.parts > 0 ? ConvertPart(options, store, stage, progress, &converted)
                                                 : ConvertWhole(options, store, stage, progress, &converted);
  if (!sum.ok() && converted) return sum.status().WithContext("the converted dataset is kept in " + stage);
  RemoveTree(stage);
  if (!sum.ok()) return AsRemote(sum.status(), stage, store);
  return sum;
}

Result<MergeSummary> MergeInObjectStore(const std::string& dest, bool fsync) {
  ASSIGN_OR_RETURN(const storage::ObjectStore store, storage::ObjectStore::Open(dest));
  const std::string stage = StageFor(store);
  RemoveTree(stage);
  auto merge = [&]() -> Result<MergeSummary> {
    const std::string root = std::string(kPartsDirName) + "/";
    ASSIGN_OR_RETURN(const std::vector<std::string> listed, store.List(root));
    std::vector<std::string> parts;  // a hidden folder under parts/ is no part's, as on disk
    for (const std::string& name : listed) {
      if (name.compare(0, root.size() + 1, root + ".") != 0) parts.push_back(name);
    }
    RETURN_IF_ERROR(GetIfThere(store, kManifestFileName, JoinPath(stage, kManifestFileName)).status());
    for (const std::string& name : parts) {
      ASSIGN_OR_RETURN(const std::string path, JoinRelative(stage, name));
      RETURN_IF_ERROR(MakeDirs(path.substr(0, path.rfind('/'))));
      RETURN_IF_ERROR(store.Get(name, path));
    }
    ASSIGN_OR_RETURN(MergeSummary sum, Merge(stage, fsync));
    if (!sum.already_merged) {
      RETURN_IF_ERROR(store.Upload(stage, "", {kManifestFileName}).status());
    }
    RETURN_IF_ERROR(DeleteAll(store, parts));  // the dataset is complete: its parts go
    return sum;
  };
  Result<MergeSummary> sum = merge();
  RemoveTree(stage);
  if (!sum.ok()) return AsRemote(sum.status(), stage, store);
  return sum;
}

}  // namespace shardify::convert::detail
