// One shard file of an open Dataset: the file (mapped, read with pread, or read by range
// requests), its ends checked against the manifest, its index read and checked once.
// dataset.cpp opens and caches them; sample_view.cpp reads samples through them.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/file.h"
#include "format/dataset.h"
#include "format/shard_index_internal.h"
#include "storage/remote.h"

namespace shardify::detail {

// A shard's index as read and checked completely once: its bytes, copied out of the file,
// and the column views into them. The index is copied because it is read again for every
// sample: offsets read from a file that is rewritten later would no longer be the ones
// that were checked. It outlives the shard's file: a shard closed to stay within
// max_open_shards opens again without reading and checking its index again.
struct CheckedIndex {
  std::vector<uint8_t> bytes;
  std::vector<ColumnView> columns;
};

// Shard n of a remote dataset as a held file of its cache. A download enters the cache
// only when its ends are those of the shard the manifest describes, so a stale or foreign
// object is never cached (opening checks the rest, as for a local shard). `wait`: whether
// a full cache is waited on (RemoteDataset::Local).
Result<std::shared_ptr<const storage::CachedFile>> FetchShard(const storage::RemoteDataset& remote, const Manifest& m,
                                                              size_t n, storage::WaitForRoom wait);

// One open shard: its file (mapped, or read with pread) and its checked index.
class MappedShard {
 public:
  // Opens shard n and checks its ends and footer against the manifest. With `known` (the
  // index checked when the shard was open before) the footer's index checksum must be the
  // one it was checked with, and the index is not read again; otherwise it is read and
  // checked completely.
  // A remote dataset's shard is read from its local copy in the cache, held there while
  // the shard is open; unless `whole` is false and the dataset reads by ranges
  // (RemoteDataset::ranges()) and the cache does not have it: then every read is a range
  // request. Messages name its URL. `wait`: see FetchShard.
  static Result<std::shared_ptr<const MappedShard>> Open(const std::string& dir, const Manifest& m, size_t n,
                                                         const ReadOptions& options,
                                                         std::shared_ptr<const CheckedIndex> known,
                                                         const std::shared_ptr<const storage::RemoteDataset>& remote,
                                                         bool whole, storage::WaitForRoom wait);

  const std::string& path() const { return path_; }
  const std::string& name() const { return name_; }
  size_t number() const { return number_; }
  const uint8_t* mapped() const { return map_ ? map_->data() : nullptr; }
  const ColumnView& column(size_t f) const { return columns_[f]; }
  const std::shared_ptr<const CheckedIndex>& index() const { return index_; }
  bool faulted() const { return map_ && map_->faulted(); }
  // IOError naming the file and where a read of the mapping faulted; Ok when none did.
  Status FaultStatus() const { return map_ ? map_->FaultStatus() : Status::Ok(); }
  bool ranged() const { return ranged_ != nullptr; }

  // Copies [offset, offset + size) of the file into dst. The range was checked against the
  // file when the shard was opened; a file that shrank since gives IOError.
  Status Read(uint64_t offset, uint64_t size, void* dst) const {
    if (ranged_) return ranged_->ReadRange(name_, offset, size, dst);
    if (!map_) return file_->Read(offset, size, dst);
    if (size > 0) std::memcpy(dst, map_->data() + offset, size);
    return map_->FaultStatus();
  }

 private:
  MappedShard(std::string path, std::string name, size_t number)
      : path_(std::move(path)), name_(std::move(name)), number_(number) {}

  // Opens `file` to be read by `io`: mapped, or with pread.
  Status OpenFile(IoMode io, const std::string& file);
  // Checks the file's size, ends and footer against the manifest's entry, then reads and
  // checks the index, or takes `known`.
  Status Check(const Manifest& m, const ShardInfo& info, const ReadOptions& options,
               std::shared_ptr<const CheckedIndex> known);

  std::string path_, name_;
  size_t number_;
  uint64_t size_ = 0;
  std::shared_ptr<const storage::CachedFile> cached_;     // a remote shard's local copy, held
  std::shared_ptr<const storage::RemoteDataset> ranged_;  // a remote shard read by range requests
  std::unique_ptr<MappedFile> map_;                       // IoMode::kMmap
  std::unique_ptr<ReadableFile> file_;                    // IoMode::kPread
  std::shared_ptr<const CheckedIndex> index_;
  std::vector<ColumnView> columns_;  // index_->columns, one pointer less on every sample's way
};

}  // namespace shardify::detail
