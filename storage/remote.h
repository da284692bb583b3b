// The objects of a remote dataset (an HTTP(S) prefix) and the local cache they are read
// through. format/ asks it for the manifest's bytes and for a shard as a local file.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "storage/cache.h"
#include "storage/location.h"
#include "storage/transfer.h"

namespace shardify::storage {

// How a shard is brought in for reading samples one at a time (Dataset::Sample). Batches
// (the Loader, which fetches ahead of its order) always fetch whole shards.
enum class RemoteFetch {
  // Whole shards when the cache holds the whole dataset (each is fetched once, then read
  // locally); ranges when it does not, so that samples read in a random order do not
  // fetch a shard each.
  kAuto,
  kWhole,   // the shard is fetched whole into the cache, then read there
  kRanges,  // a shard the cache does not have is read by range requests, a blob each
};

// "auto", "whole", "ranges" (the names SHARDIFY_REMOTE_FETCH takes).
std::optional<RemoteFetch> ParseRemoteFetch(const std::string& name);

struct RemoteOptions {
  // Where fetched shards are kept; "" = $SHARDIFY_CACHE_DIR, else $XDG_CACHE_HOME/shardify,
  // else ~/.cache/shardify. Each remote dataset gets its own folder in it.
  std::string cache_dir;
  // The most bytes that dataset's folder holds; 0 = $SHARDIFY_CACHE_LIMIT (bytes, or with a
  // K/M/G/T suffix), else the dataset's size, capped at half the free space of the cache's
  // file system.
  uint64_t cache_limit = 0;
  // kAuto = $SHARDIFY_REMOTE_FETCH when set, else kAuto.
  RemoteFetch fetch = RemoteFetch::kAuto;
  TransferOptions transfer;
};

class RemoteDataset {
 public:
  // `location` must be remote (IsRemote). Creates the cache folder; fetches nothing.
  static Result<std::unique_ptr<RemoteDataset>> Open(const std::string& location, const RemoteOptions& options);

  // Object `name` read whole into memory (the manifest), at most `max_bytes`.
  Result<std::vector<uint8_t>> ReadObject(const std::string& name, uint64_t max_bytes) const;

  // Opens the cache with its limit, once the dataset's shards are known (`dataset_bytes`:
  // their sum, for the default limit; `largest_shard`: the biggest of them). Before
  // Local(). A limit smaller than the largest shard is InvalidArgument, naming both.
  Status OpenCache(uint64_t dataset_bytes, uint64_t largest_shard);
  // Shards of the largest size the cache holds at once (after OpenCache; at least 1).
  uint64_t ShardsHeld() const { return cache_->limit() / std::max<uint64_t>(largest_shard_, 1); }

  // Object `name` of `size` bytes as a local file, fetched into the cache when missing and
  // held there while the result lives. `version` tells copies of a name apart (a dataset
  // rewritten at the same location). `check` runs on a fresh download before it enters
  // the cache; its error (e.g. Corruption) is returned and the download dropped. A full
  // cache is waited on as Cache::Get says (for TransferOptions::cache_wait_s).
  Result<std::shared_ptr<const CachedFile>> Local(const std::string& name, uint64_t size, uint64_t version,
                                                  const std::function<Status(const std::string&)>& check,
                                                  WaitForRoom wait = WaitForRoom::kYes) const;

  // Whether samples read one at a time read a shard the cache does not have by ranges
  // (RemoteFetch; after OpenCache).
  bool ranges() const { return ranges_; }
  // Object `name` as Local() would give it when the cache has it already; else null,
  // fetching nothing.
  Result<std::shared_ptr<const CachedFile>> Cached(const std::string& name, uint64_t size, uint64_t version) const;
  // Bytes [offset, offset + size) of object `name` into `dst`, by one range request (with
  // the transfer's retries); nothing enters the cache. A server that answers with the
  // whole object or another range is an error naming the URL.
  Status ReadRange(const std::string& name, uint64_t offset, uint64_t size, void* dst) const;

  const Location& location() const { return location_; }
  std::string Url(const std::string& name) const { return ObjectUrl(location_, name); }
  // The cache (after OpenCache): its folder and limit.
  const Cache* cache() const { return cache_.get(); }

 private:
  RemoteDataset(Location location, std::string folder, RemoteOptions options)
      : location_(std::move(location)), folder_(std::move(folder)), options_(std::move(options)) {}
  Location location_;
  std::string folder_;
  RemoteOptions options_;
  std::shared_ptr<Cache> cache_;
  uint64_t largest_shard_ = 0;
  bool ranges_ = false;
};

// The cache folder for remote datasets (see RemoteOptions::cache_dir).
std::string DefaultCacheDir();

}  // namespace shardify::storage
