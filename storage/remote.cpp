#include "storage/remote.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "base/checksum.h"
#include "base/file.h"
#include "base/strings.h"
#include "storage/s3.h"

namespace shardify::storage {
namespace {

// A folder name for a location: readable host and path, then a hash of the whole text, so
// two datasets never share a folder.
std::string FolderFor(const Location& at) {
  const std::string readable = ReadableName(at.base);
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx",
                static_cast<unsigned long long>(Checksum64(at.base.data(), at.base.size())));
  return readable + "-" + hash;
}

uint64_t FreeBytes(const std::string& dir) {
  struct statvfs fs;
  if (::statvfs(dir.c_str(), &fs) != 0) return 0;
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

// `location` parsed, remote, with its objects' URLs known and `transfer` signing for it.
Result<Location> ResolveRemote(const std::string& location, TransferOptions* transfer) {
  ASSIGN_OR_RETURN(Location at, ParseLocation(location));
  if (at.kind == LocationKind::kLocal) return InvalidArgument(at.text + ": not a remote location");
  if (!TransfersAvailable()) return Unsupported(at.text + ": this build has no libcurl, so no remote datasets");
  if (at.kind == LocationKind::kS3) {
    Result<S3Settings> s3 = S3SettingsFromEnvironment();
    if (!s3.ok()) return s3.status().WithContext(at.text);
    at.base = S3PrefixUrl(*s3, at.bucket, at.prefix);
    transfer->aws = s3->signing;
  }
  return at;
}

// The cache's name for version `version` of object `name`.
std::string CacheKey(const std::string& name, uint64_t version) {
  char tag[17];
  std::snprintf(tag, sizeof tag, "%016llx", static_cast<unsigned long long>(version));
  return name + "." + tag;
}

}  // namespace

std::string DefaultCacheDir() {
  if (const std::string dir = EnvValue("SHARDIFY_CACHE_DIR"); !dir.empty()) return dir;
  if (const std::string xdg = EnvValue("XDG_CACHE_HOME"); !xdg.empty()) return JoinPath(xdg, "shardify");
  if (const std::string home = EnvValue("HOME"); !home.empty()) return JoinPath(home, ".cache/shardify");
  return "/tmp/shardify-cache";
}

std::optional<RemoteFetch> ParseRemoteFetch(const std::string& name) {
  if (name == "auto") return RemoteFetch::kAuto;
  if (name == "whole") return RemoteFetch::kWhole;
  if (name == "ranges") return RemoteFetch::kRanges;
  return std::nullopt;
}

Result<std::unique_ptr<RemoteDataset>> RemoteDataset::Open(const std::string& location, const RemoteOptions& options) {
  RemoteOptions o = options;
  ASSIGN_OR_RETURN(Location at, ResolveRemote(location, &o.transfer));
  if (o.cache_dir.empty()) o.cache_dir = DefaultCacheDir();
  if (o.cache_limit == 0) {
    if (const std::string text = EnvValue("SHARDIFY_CACHE_LIMIT"); !text.empty()) {
      Result<uint64_t> limit = ParseByteSize(text);
      if (!limit.ok()) return limit.status().WithContext("SHARDIFY_CACHE_LIMIT");
      o.cache_limit = *limit;
    }
  }
  if (o.fetch == RemoteFetch::kAuto) {
    if (const std::string text = EnvValue("SHARDIFY_REMOTE_FETCH"); !text.empty()) {
      const std::optional<RemoteFetch> fetch = ParseRemoteFetch(text);
      if (!fetch) return InvalidArgument("SHARDIFY_REMOTE_FETCH is '" + text + "'; it takes auto, whole or ranges");
      o.fetch = *fetch;
    }
  }
  const std::string folder = JoinPath(o.cache_dir, FolderFor(at));
  RETURN_IF_ERROR(MakeDirs(folder).WithContext("cache for " + at.text));
  return std::unique_ptr<RemoteDataset>(new RemoteDataset(std::move(at), folder, std::move(o)));
}

Result<std::vector<uint8_t>> RemoteDataset::ReadObject(const std::string& name, uint64_t max_bytes) const {
  return FetchToMemory(Url(name), max_bytes, options_.transfer);
}

Status RemoteDataset::OpenCache(uint64_t dataset_bytes, uint64_t largest_shard) {
  uint64_t limit = options_.cache_limit;
  if (limit == 0) limit = std::max<uint64_t>(1, std::min(dataset_bytes, FreeBytes(folder_) / 2));
  if (largest_shard > limit) {
    return InvalidArgument(location_.text + ": the cache limit (" + std::to_string(limit) + " bytes, in " + folder_ +
                           ") is smaller than the largest shard (" + std::to_string(largest_shard) + " bytes)");
  }
  ASSIGN_OR_RETURN(const TransferOptions transfer, ResolveTransferOptions(options_.transfer));
  ASSIGN_OR_RETURN(cache_, Cache::Open(folder_, limit, transfer.cache_wait_s));
  largest_shard_ = largest_shard;
  ranges_ = options_.fetch == RemoteFetch::kRanges || (options_.fetch == RemoteFetch::kAuto && limit < dataset_bytes);
  return Status::Ok();
}

Result<std::shared_ptr<const CachedFile>> RemoteDataset::Cached(const std::string& name, uint64_t size,
                                                                uint64_t version) const {
  if (!cache_) return Internal(location_.text + ": the cache is not open");
  return cache_->Find(CacheKey(name, version), size);
}

Status RemoteDataset::ReadRange(const std::string& name, uint64_t offset, uint64_t size, void* dst) const {
  return FetchRange(Url(name), offset, size, dst, options_.transfer);
}

Result<std::shared_ptr<const CachedFile>> RemoteDataset::Local(const std::string& name, uint64_t size, uint64_t version,
                                                               const std::function<Status(const std::string&)>& check,
                                                               WaitForRoom wait) const {
  if (!cache_) return Internal(location_.text + ": the cache is not open");
  const std::string url = Url(name);
  return cache_->Get(
      CacheKey(name, version), size,
      [&](const std::string& tmp) -> Status {
        RETURN_IF_ERROR(FetchToFile(url, tmp, SizeBound::Exactly(size, "its manifest"), options_.transfer));
        return check ? check(tmp).WithContext(ShownLocation(url)) : Status::Ok();
      },
      wait);
}

}  // namespace shardify::storage
