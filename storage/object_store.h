// The objects under an s3:// location, for writing datasets there: put, fetched, listed
// and deleted by name. (Reading a dataset goes through RemoteDataset and its cache.)
//
//   ASSIGN_OR_RETURN(ObjectStore store, ObjectStore::Open("s3://bucket/fmnist"));
//   ASSIGN_OR_RETURN(UploadSummary up, store.Upload("staged/fmnist", "", {"manifest.sfm"}));
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "storage/location.h"
#include "storage/s3.h"
#include "storage/transfer.h"

namespace shardify::storage {

struct UploadSummary {
  uint64_t objects = 0;
  uint64_t bytes = 0;
};

class ObjectStore {
 public:
  // After each object put: objects and bytes sent so far, and the objects in all.
  using UploadProgress = std::function<void(uint64_t objects, uint64_t bytes, uint64_t total)>;

  // `location` must be s3:// (an http(s) server takes no uploads: Unsupported); the
  // endpoint and credentials are S3SettingsFromEnvironment's. Sends nothing.
  static Result<ObjectStore> Open(const std::string& location, const TransferOptions& options = {});

  const Location& location() const { return location_; }
  // The URL of object `name` (a name under the location, '/' between folders).
  std::string Url(const std::string& name) const { return ObjectUrl(location_, name); }

  // Object `name` into a new local file `path`, its size within `size` (FetchToFile: a
  // larger object is refused before more than `size` is written). NotFound when the store
  // has no such object. Get, Put and Delete refuse (InvalidArgument) a `name` that is not a
  // relative name under the location (IsRelativeName, base/file.h).
  Status Get(const std::string& name, const std::string& path, SizeBound size) const;
  Status Put(const std::string& name, const std::string& path) const;
  Status Delete(const std::string& name) const;
  // The objects (names relative to the location, and sizes) whose names begin with `under`,
  // sorted by name. The store is not trusted: a listing with a key that is not a plain
  // relative name under the prefix asked for (IsRelativeName, after the XML's entities are
  // decoded: no empty, '.' or '..' part, no '/' at an end, no '\\' or control character)
  // is refused whole, as Corruption naming the key, rather than passed over: the caller
  // fetches, writes or deletes nothing on a listing it cannot read in full. A listing that
  // names more than `max_keys` objects, or takes more than max_keys / 100 + 10 pages (a
  // store gives up to 1,000 keys a page), is refused as ResourceExhausted naming the
  // prefix and the bound, once past it: the caller bounds it by what it can need.
  Result<std::vector<ListedObject>> List(const std::string& under, uint64_t max_keys) const;

  // Puts the files of local folder `dir` (not its folders, nor those named in `skip`: put
  // already) as objects `under`/<file name>, those named in `last` after all the others
  // and in that order, so that a reader that opens a dataset by its manifest never finds
  // one that names an object not there yet.
  Result<UploadSummary> Upload(const std::string& dir, const std::string& under, const std::vector<std::string>& last,
                               const std::vector<std::string>& skip = {},
                               const UploadProgress& progress = nullptr) const;

 private:
  Status CheckName(const std::string& name) const;
  ObjectStore(Location location, std::string bucket_url, TransferOptions transfer)
      : location_(std::move(location)), bucket_url_(std::move(bucket_url)), transfer_(std::move(transfer)) {}
  Location location_;       // base: the URL of the dataset's prefix
  std::string bucket_url_;  // the URL of the bucket (listings are asked of it)
  TransferOptions transfer_;
};

}  // namespace shardify::storage
