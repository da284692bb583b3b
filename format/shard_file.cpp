#include <functional>

#include "base/checksum.h"
#include "format/shard_file_internal.h"

namespace shardify::detail {

namespace {

// Reads a shard's ends (`size` bytes, read through `read`) and checks them: the frame,
// then that the footer names the manifest entry's format version and index checksum.
// Messages begin with `path`.
Result<ShardFooter> CheckedFooter(uint64_t size, const std::string& path, uint32_t version, uint64_t index_checksum,
                                  const std::function<Status(uint64_t, uint64_t, void*)>& read) {
  if (size < kShardHeaderSize + kShardFooterSize)  // before any arithmetic on offsets
    return Corruption(path + ": " + std::to_string(size) + " bytes is too small for a shard");
  uint8_t header[kShardHeaderSize], footer_bytes[kShardFooterSize];
  RETURN_IF_ERROR(read(0, sizeof header, header));
  RETURN_IF_ERROR(read(size - kShardFooterSize, sizeof footer_bytes, footer_bytes));
  RETURN_IF_ERROR(CheckShardEnds(header, footer_bytes, size, path));
  const ShardFooter footer = DecodeShardFooter(footer_bytes);
  if (footer.version != version)
    return Corruption(path + ": shard is version " + std::to_string(footer.version) + ", the manifest version " +
                      std::to_string(version));
  if (footer.index_checksum != index_checksum)
    return Corruption(path + ": index checksum in footer disagrees with the manifest");
  return footer;
}

}  // namespace

Result<std::shared_ptr<const storage::CachedFile>> FetchShard(const storage::RemoteDataset& remote, const Manifest& m,
                                                              size_t n, storage::WaitForRoom wait) {
  const ShardInfo& info = m.shards[n];
  return remote.Local(
      info.file_name, info.size_bytes, info.index_checksum,
      [&info, version = m.format_version](const std::string& tmp) -> Status {
        ASSIGN_OR_RETURN(std::unique_ptr<ReadableFile> f, ReadableFile::Open(tmp));
        return CheckedFooter(f->size(), tmp, version, info.index_checksum,
                             [&f](uint64_t offset, uint64_t size, void* dst) { return f->Read(offset, size, dst); })
            .status();
      },
      wait);
}

Result<std::shared_ptr<const MappedShard>> MappedShard::Open(
    const std::string& dir, const Manifest& m, size_t n, const ReadOptions& options,
    std::shared_ptr<const CheckedIndex> known, const std::shared_ptr<const storage::RemoteDataset>& remote, bool whole,
    storage::WaitForRoom wait) {
  const ShardInfo& info = m.shards[n];
  std::shared_ptr<MappedShard> shard(new MappedShard(JoinPath(dir, info.file_name), info.file_name, n));
  std::string file = shard->path();
  if (remote != nullptr && !whole && remote->ranges()) {
    ASSIGN_OR_RETURN(shard->cached_, remote->Cached(info.file_name, info.size_bytes, info.index_checksum));
    if (!shard->cached_) shard->ranged_ = remote;
  } else if (remote != nullptr) {
    ASSIGN_OR_RETURN(shard->cached_, FetchShard(*remote, m, n, wait));
  }
  if (shard->cached_) file = shard->cached_->path();
  Status opened = shard->ranged_ ? Status::Ok() : shard->OpenFile(options.io, file);
  if (shard->ranged_) shard->size_ = info.size_bytes;  // Check() reads the footer where the manifest puts it
  if (opened.ok()) opened = shard->Check(m, info, options, std::move(known));
  if (opened.code() == StatusCode::kNotFound) return Corruption(shard->path() + ": shard is missing");
  if (!opened.ok()) return opened;
  return std::shared_ptr<const MappedShard>(std::move(shard));
}

Status MappedShard::OpenFile(IoMode io, const std::string& file) {
  if (io == IoMode::kPread) {
    ASSIGN_OR_RETURN(file_, ReadableFile::Open(file));
    size_ = file_->size();
  } else {
    ASSIGN_OR_RETURN(map_, MappedFile::Open(file));
    size_ = map_->size();
  }
  return Status::Ok();
}

Status MappedShard::Check(const Manifest& m, const ShardInfo& info, const ReadOptions& options,
                          std::shared_ptr<const CheckedIndex> known) {
  const std::string& p = path();
  if (ranged_ && known && options.verify_checksums) {
    // Checked when it was open before; each blob read by range is checked against its
    // checksum, so a changed object is caught there, one request fewer per reopening.
    index_ = std::move(known);
    columns_ = index_->columns;
    return Status::Ok();
  }
  if (size_ != info.size_bytes)
    return Corruption(p + ": shard is " + std::to_string(size_) + " bytes, manifest says " +
                      std::to_string(info.size_bytes));
  ASSIGN_OR_RETURN(const ShardFooter footer, CheckedFooter(size_, p, m.format_version, info.index_checksum,
                                                           [this](uint64_t offset, uint64_t size, void* dst) {
                                                             return Read(offset, size, dst);
                                                           }));
  if (known) {  // checked before, against the same manifest entry, size and index checksum
    index_ = std::move(known);
    columns_ = index_->columns;
    return Status::Ok();
  }
  auto index = std::make_shared<CheckedIndex>();
  index->bytes.resize(footer.index_length);  // CheckShardEnds: the index lies inside the file
  RETURN_IF_ERROR(Read(footer.index_offset, footer.index_length, index->bytes.data()));
  if (Checksum64(index->bytes.data(), index->bytes.size()) != footer.index_checksum)
    return Corruption(p + ": index checksum mismatch");
  RETURN_IF_ERROR(CheckShardIndex(index->bytes.data(), index->bytes.size(), m.fields, info.first_sample,
                                  info.num_samples, footer.index_offset, options.max_sample_bytes, p, &index->columns));
  index_ = std::move(index);
  columns_ = index_->columns;
  return Status::Ok();
}

}  // namespace shardify::detail
