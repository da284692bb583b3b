#include <unistd.h>

#include <string>

#include "base/file.h"
#include "convert/upload_internal.h"
#include "format/layout.h"
#include "storage/location.h"
#include "storage/remote.h"
#include "storage/transfer.h"

namespace shardify::convert::detail {
namespace {

// Removes the staging folder's files, then the folder (it holds no folders: no parts).
void RemoveStage(const std::string& dir) {
  Result<std::vector<std::string>> names = ListDir(dir);
  if (names.ok()) {
    for (const std::string& name : *names) RemoveFile(JoinPath(dir, name)).IgnoreError();
  }
  RemoveEmptyDir(dir).IgnoreError();
}

}  // namespace

Result<ConvertSummary> ConvertToObjectStore(const ConvertOptions& options, ProgressSink* progress) {
  ASSIGN_OR_RETURN(const storage::Location at, storage::ParseLocation(options.dest));
  if (at.kind != storage::LocationKind::kS3) {
    return Unsupported(options.dest + ": datasets are written to a directory or an s3:// location");
  }
  if (options.parts > 0) {
    return Unsupported(options.dest +
                       ": converting in parts writes to a shared directory; convert into one, then upload it whole");
  }
  const storage::TransferOptions transfer;
  if (!options.overwrite && !options.dry_run) {
    ASSIGN_OR_RETURN(const bool exists, storage::RemoteObjectExists(options.dest, kManifestFileName, transfer));
    if (exists) return AlreadyExists(options.dest + ": a dataset is there already (--overwrite replaces it)");
  }
  const std::string stage = JoinPath(JoinPath(storage::DefaultCacheDir(), "uploads"),
                                     storage::ReadableName(at.text) + "-" + std::to_string(::getpid()));
  ConvertOptions local = options;
  local.dest = stage;
  local.overwrite = true;  // the stage is this process's own
  Result<ConvertSummary> sum = Convert(local, progress);
  if (!sum.ok() || options.dry_run) {
    RemoveStage(stage);
    return sum;
  }
  Result<storage::UploadSummary> up = storage::UploadDirectory(stage, options.dest, {kManifestFileName}, transfer);
  if (!up.ok()) {
    return up.status().WithContext("the converted dataset is kept in " + stage);
  }
  RemoveStage(stage);
  sum->uploaded_to = at.text;
  sum->uploaded_objects = up->objects;
  return sum;
}

}  // namespace shardify::convert::detail
