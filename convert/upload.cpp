#include <unistd.h>

#include <algorithm>
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
  ASSIGN_OR_RETURN(const bool there, store.Exists(name));
  if (!there) return false;
  RETURN_IF_ERROR(MakeDirs(path.substr(0, path.rfind('/'))));
  RETURN_IF_ERROR(store.Get(name, path));
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

// Puts the files of local folder `dir` under `under`, `last` last, telling `progress`.
Result<storage::UploadSummary> UploadFolder(const storage::ObjectStore& store, const std::string& dir,
                                            const std::string& under, const std::string& last, ProgressSink* progress) {
  return store.Upload(dir, under, {last}, [&](uint64_t objects, uint64_t bytes, uint64_t total) {
    if (progress != nullptr) progress->OnProgress({"upload", objects, total, bytes});
  });
}

// Deletes `names` from the store, ignoring none of its errors.
Status DeleteAll(const storage::ObjectStore& store, const std::vector<std::string>& names) {
  for (const std::string& name : names) RETURN_IF_ERROR(store.Delete(name));
  return Status::Ok();
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
  ConvertOptions local = options;
  local.dest = stage;
  ASSIGN_OR_RETURN(ConvertSummary sum, Convert(local, progress));
  if (options.dry_run || sum.part_state != ConvertSummary::PartState::kConverted) return sum;
  *converted = true;
  ASSIGN_OR_RETURN(const std::vector<std::string> before, store.List(under + "/"));
  ASSIGN_OR_RETURN(const storage::UploadSummary up,
                   UploadFolder(store, folder, under, kPartManifestFileName, progress));
  // A part converted again (--overwrite) leaves no object of its earlier copy behind.
  ASSIGN_OR_RETURN(const std::vector<std::string> now, ListDir(folder));
  std::vector<std::string> stale;
  for (const std::string& name : before) {
    if (std::find(now.begin(), now.end(), name.substr(under.size() + 1)) == now.end()) stale.push_back(name);
  }
  RETURN_IF_ERROR(DeleteAll(store, stale));
  sum.uploaded_to = store.location().text;
  sum.uploaded_objects = up.objects;
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
  ASSIGN_OR_RETURN(ConvertSummary sum, Convert(local, progress));
  if (options.dry_run) return sum;
  *converted = true;
  ASSIGN_OR_RETURN(const storage::UploadSummary up, UploadFolder(store, stage, "", kManifestFileName, progress));
  if (previous) {
    ASSIGN_OR_RETURN(const std::vector<std::string> now, ListDir(stage));
    std::vector<std::string> stale;
    for (const ShardInfo& shard : previous->shards) {
      if (std::find(now.begin(), now.end(), shard.file_name) == now.end()) stale.push_back(shard.file_name);
    }
    RETURN_IF_ERROR(DeleteAll(store, stale));
  }
  sum.uploaded_to = store.location().text;
  sum.uploaded_objects = up.objects;
  return sum;
}

}  // namespace

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
    ASSIGN_OR_RETURN(const std::vector<std::string> parts, store.List("parts/"));
    RETURN_IF_ERROR(GetIfThere(store, kManifestFileName, JoinPath(stage, kManifestFileName)).status());
    for (const std::string& name : parts) {
      const std::string path = JoinPath(stage, name);
      RETURN_IF_ERROR(MakeDirs(path.substr(0, path.rfind('/'))));
      RETURN_IF_ERROR(store.Get(name, path));
    }
    ASSIGN_OR_RETURN(MergeSummary sum, Merge(stage, fsync));
    if (!sum.already_merged) {
      RETURN_IF_ERROR(UploadFolder(store, stage, "", kManifestFileName, nullptr).status());
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
